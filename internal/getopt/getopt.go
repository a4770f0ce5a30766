// Package getopt lets the cmd tools, which declare their flags with the
// flag package, take the command lines of the C tools they stand in for,
// which parse theirs with getopt(3) (rping) and getopt_long(3)
// (ibv_rc_pingpong, ibv_devinfo, perftest). Args rewrites such a command
// line into one that flag.FlagSet.Parse reads the same way; what a flag is
// and whether it takes a value comes from the FlagSet (a bool flag takes
// none, as flag's own parser has it).
//
// It does not define flags, print usage, or report unknown ones: an unknown
// flag is passed on for Parse to refuse.
package getopt

import (
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Args returns args rewritten for fs.Parse, as getopt_long reads them:
//
//   - grouped short flags are split: -vVd is -v -V -d;
//   - a value may be attached to its short flag, alone or at the end of a
//     group: -g1 is -g 1, -cg1 is -c -g 1;
//   - after --, an unambiguous prefix of a long flag's name is that flag:
//     --iter is --iters (a name that is a flag's whole wins); a prefix of
//     two or more is an error naming them, as getopt_long's;
//   - operands may come anywhere, as GNU getopt permutes them: they are
//     moved behind the flags, after a "--" (which fs.Args returns after
//     Parse); "--" ends the flags, as in both.
//
// The flag package's own forms keep their meaning: a name of more than one
// letter after a single dash (-tx-depth, -chk) is that flag, and
// -x=value gives x the value after the =, where getopt would give it
// "=value". A flag that takes a value takes the next argument, whatever
// it looks like (-g -1, -a -vVd), as both parsers do.
func Args(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, operands []string
	// value appends the next argument, f's value, unless it has one.
	value := func(f *flag.Flag, i int, has bool) int {
		if !has && takesValue(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
		return i
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case len(a) < 2 || a[0] != '-':
			operands = append(operands, a) // "-" too, as getopt has it
		case a[1] == '-':
			name, v, has := strings.Cut(a[2:], "=")
			f, err := long(fs, name)
			if err != nil {
				return nil, err
			}
			if f == nil {
				flags = append(flags, a) // for Parse to refuse
				continue
			}
			if has {
				flags = append(flags, "--"+f.Name+"="+v)
			} else {
				flags = append(flags, "--"+f.Name)
			}
			i = value(f, i, has)
		default:
			name, _, has := strings.Cut(a[1:], "=")
			if f := fs.Lookup(name); f != nil && (has || utf8.RuneCountInString(name) > 1) {
				flags = append(flags, a) // flag's own -name, -name=value, -x=value
				i = value(f, i, has)
				continue
			}
			i = group(fs, a[1:], args, i, &flags)
		}
	}
	if len(operands) > 0 {
		flags = append(append(flags, "--"), operands...)
	}
	return flags, nil
}

// Parse is fs.Parse of args rewritten by Args.
func Parse(fs *flag.FlagSet, args []string) error {
	a, err := Args(fs, args)
	if err != nil {
		return err
	}
	return fs.Parse(a)
}

// group appends the flags of the group g (args[i] without its dash) to
// flags, one letter each, up to the first that takes a value, which takes
// the rest of g or, at its end, the next argument; it returns the index of
// the last argument used.
func group(fs *flag.FlagSet, g string, args []string, i int, flags *[]string) int {
	for g != "" {
		_, n := utf8.DecodeRuneInString(g)
		letter, rest := g[:n], g[n:]
		*flags = append(*flags, "-"+letter)
		g = rest
		f := fs.Lookup(letter)
		if f == nil || !takesValue(f) {
			continue // an unknown letter is Parse's to refuse
		}
		switch {
		case rest != "":
			*flags = append(*flags, rest)
		case i+1 < len(args):
			i++
			*flags = append(*flags, args[i])
		}
		return i
	}
	return i
}

// long returns the flag that name, after --, stands for: the flag of that
// name, or the one flag whose name it begins (getopt_long's abbreviation);
// nil when there is none, and an error when there are more.
func long(fs *flag.FlagSet, name string) (*flag.Flag, error) {
	if f := fs.Lookup(name); f != nil || name == "" {
		return f, nil
	}
	var found []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, name) {
			found = append(found, f)
		}
	})
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for k, f := range found {
		names[k] = "'--" + f.Name + "'"
	}
	return nil, fmt.Errorf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(names, " "))
}

// boolFlag is what the flag package asks of a flag that takes no value.
type boolFlag interface {
	IsBoolFlag() bool
}

func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(boolFlag)
	return !ok || !b.IsBoolFlag()
}
