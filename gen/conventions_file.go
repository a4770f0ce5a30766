package gen

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A conventions file declares the error conventions of functions that
// gen.Conventions does not list (a vendor's additions to the headers, a
// newer rdma-core's functions), so that a user never edits goverbs itself:
//
//	# how my headers' own functions fail
//	ibv_my_vendor_op   errno-result
//	ibv_my_query_*     minus-one-errno
//	ibv_my_poll        count-or-error negative-code
//
// One rule a line; # starts a comment; blank lines are ignored. A line is
// NAME CONVENTION [negative-code]: NAME a C function name, or a prefix
// ending in * for every function that starts with it; CONVENTION one of
// the keywords of ParseConvention; negative-code sets
// ConventionRule.NegativeCode. Its rules come before the built-in ones, so
// one decides for every function it lists. They are checked as the
// built-in table is: a convention that does not fit a function's result
// type fails naming the rule's line and the function's header line; a rule
// that matches no function is a warning (IR.Warnings).

// conventionKeywords are the conventions file's spellings of Convention,
// by value.
var conventionKeywords = [...]string{"", "cannot-fail", "null-errno", "errno-result",
	"minus-one-errno", "count-or-error", "getaddrinfo"}

// negativeCodeKeyword is the optional third word of a conventions file
// line: ConventionRule.NegativeCode.
const negativeCodeKeyword = "negative-code"

// Keyword is c's spelling in a conventions file ("errno-result"); ""
// for Unassigned.
func (c Convention) Keyword() string { return conventionKeywords[c] }

// ParseConvention reads a conventions file's keyword: cannot-fail,
// null-errno, errno-result, minus-one-errno, count-or-error or
// getaddrinfo.
func ParseConvention(s string) (Convention, error) {
	for c := CannotFail; c <= GetaddrinfoCode; c++ {
		if c.Keyword() == s {
			return c, nil
		}
	}
	return Unassigned, fmt.Errorf("unknown convention %q (want one of %s)", s, strings.Join(conventionKeywords[CannotFail:], ", "))
}

// ruleName is a C function name, or a prefix of one followed by *.
var ruleName = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*\*)$`)

// ReadConventions reads and parses the conventions file at path (see
// ParseConventions).
func ReadConventions(path string) ([]ConventionRule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("conventions file: %w", err)
	}
	defer f.Close()
	return ParseConventions(path, f)
}

// ParseConventions parses a conventions file read from r, which errors
// and the rules' Source call file: one rule a line, in the file's order.
// A rule's Name is the file's base name and the line's NAME, which is what
// the generated stubs' doc comments cite (it does not change when lines
// are added above it). Each error is one line naming file:line.
func ParseConventions(file string, r io.Reader) ([]ConventionRule, error) {
	var rules []ConventionRule
	first := map[string]int{} // NAME -> line
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", file, n)
		if len(words) < 2 || len(words) > 3 {
			return nil, fmt.Errorf("%s: want NAME CONVENTION [%s], got %d words", at, negativeCodeKeyword, len(words))
		}
		name := words[0]
		if !ruleName.MatchString(name) {
			return nil, fmt.Errorf("%s: %q is neither a C function name nor a prefix of one ending in *", at, name)
		}
		conv, err := ParseConvention(words[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", at, name, err)
		}
		negative := false
		if len(words) == 3 {
			if words[2] != negativeCodeKeyword {
				return nil, fmt.Errorf("%s: %s: %q after the convention: the only word allowed there is %s", at, name, words[2], negativeCodeKeyword)
			}
			switch conv {
			case ErrnoResult, MinusOneErrno, CountOrError:
			default:
				return nil, fmt.Errorf("%s: %s: %s cannot have %s (only errno-result, minus-one-errno and count-or-error can)",
					at, name, conv.Keyword(), negativeCodeKeyword)
			}
			negative = true
		}
		if prev, ok := first[name]; ok {
			return nil, fmt.Errorf("%s: %s is already given a convention at line %d", at, name, prev)
		}
		first[name] = n
		rules = append(rules, ConventionRule{
			Name:         filepath.Base(file) + ": " + name,
			Convention:   conv,
			Funcs:        []string{name},
			NegativeCode: negative,
			Source:       at,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("conventions file %s: %w", file, err)
	}
	return rules, nil
}

// fitting is every convention a result of type t fits, the likelier
// first: where there is one, it is the only choice a rule can make.
func fitting(t *Type) []Convention {
	var cs []Convention
	for _, c := range []Convention{NullErrno, ErrnoResult, MinusOneErrno, CountOrError, GetaddrinfoCode, CannotFail} {
		if c.fits(t) {
			cs = append(cs, c)
		}
	}
	return cs
}

// conventionHint says what line of a conventions file would give fn a
// convention: the line itself where only one fits its result type, else
// the choices, which only the function's documentation can settle.
func conventionHint(fn *Func) string {
	cs := fitting(fn.Result)
	result := cDecl(fn.Result, "")
	if len(cs) == 1 {
		return fmt.Sprintf("%q (the only convention a result of type %s fits)", fn.Name+" "+cs[0].Keyword(), result)
	}
	words := make([]string, len(cs))
	for i, c := range cs {
		words[i] = c.Keyword()
	}
	return fmt.Sprintf("%q, CONVENTION one of %s (those a result of type %s fits: its documentation says which)",
		fn.Name+" CONVENTION", strings.Join(words, ", "), result)
}

// MissingConventionsError is Build's and AssignConventions' error when
// the only thing wrong is functions that no rule lists: IR is the model,
// every other function given its convention, for Report to describe, and
// Funcs those without one, in source order.
type MissingConventionsError struct {
	IR    *IR
	Funcs []*Func
}

// Error is one line: the first function, with what to do about it, and
// how many more there are.
func (e *MissingConventionsError) Error() string {
	fn := e.Funcs[0]
	msg := fmt.Sprintf("%s: %s returns %s and has no error convention: give it one in a conventions file (verbsgen -conventions FILE), a line %s (in goverbs itself: a rule of gen.Conventions)",
		fn.Pos, fn.Name, cDecl(fn.Result, ""), conventionHint(fn))
	switch n := len(e.Funcs) - 1; n {
	case 0:
	case 1:
		msg += "; 1 more function has none (verbsgen -report lists them all)"
	default:
		msg += fmt.Sprintf("; %d more functions have none (verbsgen -report lists them all)", n)
	}
	return msg
}
