package getopt

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// flags is a flag set like the tools': rping's letters, ibv_rc_pingpong's
// long names beside their letters, and a Go-style long flag.
func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, b := range []string{"v", "V", "d", "c", "s", "chk"} {
		fs.Bool(b, false, "")
	}
	for _, v := range []string{"a", "ib-dev"} {
		fs.String(v, "", "")
	}
	for _, n := range []string{"p", "S", "C", "g", "n", "iters", "ib-port", "tx-depth"} {
		fs.Int(n, 0, "")
	}
	return fs
}

func TestArgs(t *testing.T) {
	for _, c := range []struct {
		in, want []string
	}{
		// Grouped letters, and values attached: rping's and
		// ibv_rc_pingpong's command lines.
		{[]string{"-s", "-vVd"}, []string{"-s", "-v", "-V", "-d"}},
		{[]string{"-sv"}, []string{"-s", "-v"}},
		{[]string{"-s", "-S64"}, []string{"-s", "-S", "64"}},
		{[]string{"-c", "-a192.0.2.1", "-C3"}, []string{"-c", "-a", "192.0.2.1", "-C", "3"}},
		{[]string{"-cvV", "-a", "192.0.2.1"}, []string{"-c", "-v", "-V", "-a", "192.0.2.1"}},
		{[]string{"-g1", "-n10"}, []string{"-g", "1", "-n", "10"}},
		{[]string{"-cg1"}, []string{"-c", "-g", "1"}},
		{[]string{"-cg", "1"}, []string{"-c", "-g", "1"}},
		{[]string{"-g-1"}, []string{"-g", "-1"}},
		// A value is the next argument whatever it looks like.
		{[]string{"-g", "-1"}, []string{"-g", "-1"}},
		{[]string{"-a", "-vVd"}, []string{"-a", "-vVd"}},
		{[]string{"--ib-dev", "--iters"}, []string{"--ib-dev", "--iters"}},
		{[]string{"-tx-depth", "-5"}, []string{"-tx-depth", "-5"}},
		// getopt_long's abbreviations.
		{[]string{"--iter", "10"}, []string{"--iters", "10"}},
		{[]string{"--iter=10"}, []string{"--iters=10"}},
		{[]string{"--ib-p=2"}, []string{"--ib-port=2"}},
		{[]string{"--ib-d", "rxe0"}, []string{"--ib-dev", "rxe0"}},
		{[]string{"--ch"}, []string{"--chk"}},
		{[]string{"--chk"}, []string{"--chk"}},
		{[]string{"--tx", "64"}, []string{"--tx-depth", "64"}},
		{[]string{"--g", "1"}, []string{"--g", "1"}}, // a whole name, as flag has it
		// The flag package's own forms stand.
		{[]string{"-tx-depth", "64"}, []string{"-tx-depth", "64"}},
		{[]string{"-tx-depth=64"}, []string{"-tx-depth=64"}},
		{[]string{"-chk"}, []string{"-chk"}},
		{[]string{"-S=64"}, []string{"-S=64"}},
		{[]string{"-v=false"}, []string{"-v=false"}},
		{[]string{"-p", "18515"}, []string{"-p", "18515"}},
		// Operands anywhere, moved behind the flags; -- ends them.
		{[]string{"192.0.2.1", "-g1"}, []string{"-g", "1", "--", "192.0.2.1"}},
		{[]string{"host", "-g1", "--", "-x", "y"}, []string{"-g", "1", "--", "host", "-x", "y"}},
		{[]string{"-", "-v"}, []string{"-v", "--", "-"}},
		{[]string{"--"}, []string{}},
		// Unknown flags and missing values are passed on for Parse.
		{[]string{"-vXd"}, []string{"-v", "-X", "-d"}},
		{[]string{"--nope=1"}, []string{"--nope=1"}},
		{[]string{"-S"}, []string{"-S"}},
		{[]string{"-vS"}, []string{"-v", "-S"}},
	} {
		got, err := Args(flags(), c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Args(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// A prefix of two long names is refused, naming them, as getopt_long
// refuses it.
func TestArgsAmbiguous(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"--i", "1"}, "option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters'"},
		{[]string{"-v", "--ib=2"}, "option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'"},
	} {
		if got, err := Args(flags(), c.in); err == nil || err.Error() != c.want {
			t.Errorf("Args(%q) = %q, %v; want the error %q", c.in, got, err, c.want)
		}
	}
}

// Parse reads what the C tools read: the values land in the flags.
func TestParse(t *testing.T) {
	fs := flags()
	err := Parse(fs, []string{"-cvV", "-a192.0.2.1", "host", "-C3", "--iter", "10", "-g", "-1", "-tx-depth=64"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	fs.Visit(func(f *flag.Flag) { got = append(got, f.Name+"="+f.Value.String()) })
	want := "C=3 V=true a=192.0.2.1 c=true g=-1 iters=10 tx-depth=64 v=true"
	if strings.Join(got, " ") != want || !slices.Equal(fs.Args(), []string{"host"}) {
		t.Errorf("Parse set %q and left %q; want %q and [host]", got, fs.Args(), want)
	}
	for _, args := range [][]string{{"-vXd"}, {"-S"}, {"--i", "1"}, {"-Sx"}} {
		if err := Parse(flags(), args); err == nil {
			t.Errorf("Parse(%q): no error", args)
		}
	}
}
