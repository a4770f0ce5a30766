package rping

import (
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"-c", "-a", "192.0.2.1", "-C", "10", "-v", "-V", "-S", "100"})
	want := Config{Addr: "192.0.2.1", Port: 7174, Count: 10, Size: 100, Verbose: true, Validate: true}
	if err != nil || cfg != want {
		t.Errorf("ParseArgs = %+v, %v; want %+v", cfg, err, want)
	}
	cfg, err = ParseArgs([]string{"-s"})
	if err != nil || !cfg.Server || cfg.Addr != "0.0.0.0" || cfg.Size != 64 {
		t.Errorf("ParseArgs(-s) = %+v, %v", cfg, err)
	}
	for _, args := range [][]string{{}, {"-s", "-c"}, {"-c"}, {"-s", "-S", "25"}, {"-s", "-S", "65536"}, {"-s", "-C", "-1"}} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q): want an error", args)
		}
	}
	if minSize != 26 {
		t.Errorf("minSize = %d, want rping's RPING_MIN_BUFSIZE 26", minSize)
	}
}

// The text of rping's first two pings at the default size, as rping -v
// prints it.
func TestFillPing(t *testing.T) {
	b := make([]byte, 64)
	next := fillPing(b, 0, 'A')
	if got, want := string(cstr(b)), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"; got != want {
		t.Errorf("ping 0 = %q, want %q", got, want)
	}
	fillPing(b, 1, next)
	if got := string(cstr(b)); !strings.HasPrefix(got, "rdma-ping-1: BCD") || len(got) != 63 {
		t.Errorf("ping 1 = %q", got)
	}
	if fillPing(b, 2, 'z') != 'A' {
		t.Error("the first letter does not wrap from 'z' to 'A'")
	}
}
