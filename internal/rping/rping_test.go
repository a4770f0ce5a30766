package rping

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
	// rping's getopt forms (package getopt), as goverbs-rping's own usage
	// line, "-s [-vVd]", writes them.
	for _, c := range []struct {
		args []string
		want Config
	}{
		{[]string{"-s", "-vVd"}, Config{Server: true, Addr: "0.0.0.0", Port: 7174, Size: 64, Verbose: true, Validate: true, Debug: true}},
		{[]string{"-sv"}, Config{Server: true, Addr: "0.0.0.0", Port: 7174, Size: 64, Verbose: true}},
		{[]string{"-s", "-S64"}, Config{Server: true, Addr: "0.0.0.0", Port: 7174, Size: 64}},
		{[]string{"-c", "-a192.0.2.1", "-C3"}, Config{Addr: "192.0.2.1", Port: 7174, Count: 3, Size: 64}},
		{[]string{"-cvV", "-a", "192.0.2.1", "-C", "3"}, Config{Addr: "192.0.2.1", Port: 7174, Count: 3, Size: 64, Verbose: true, Validate: true}},
		{[]string{"-cVa192.0.2.1", "-p7000", "-S100"}, Config{Addr: "192.0.2.1", Port: 7000, Size: 100, Validate: true}},
	} {
		if cfg, err := ParseArgs(c.args); err != nil || cfg != c.want {
			t.Errorf("ParseArgs(%q) = %+v, %v; want %+v", c.args, cfg, err, c.want)
		}
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

// How a failed server step ends the session: cleanly whenever the client
// has disconnected, at any wait, as rping's server returns 0 whenever its
// state is DISCONNECTED; with WaitDisconnect's own failure named when that
// is what cancelled the wait; with the step's error otherwise.
func TestDiscWatchEnd(t *testing.T) {
	watch := func(v ...error) *discWatch {
		c := make(chan error, 1)
		for _, e := range v {
			c <- e
		}
		return &discWatch{c: c, grace: 50 * time.Millisecond}
	}
	cmErr := errors.New("rdma_cm event DISCONNECTED: status -110")
	for _, c := range []struct {
		name string
		w    *discWatch
		err  error
		want string // "" for a *clientGone
	}{
		{"disconnected, the watch cancelled the wait", watch(nil), context.Canceled, ""},
		{"disconnected, a flushed receive", watch(nil), errFlushed, ""},
		{"disconnected, any other failure after it", watch(nil), errors.New("post failed"), ""},
		{"the watch failed", watch(cmErr), context.Canceled,
			"wait for RDMA_WRITE_ADV: context canceled; waiting for the client's disconnect: " + cmErr.Error()},
		{"no disconnect", watch(), errors.New("received bogus data, size 8"), "wait for RDMA_WRITE_ADV: received bogus data, size 8"},
		{"no word within grace", watch(), errFlushed, "wait for RDMA_WRITE_ADV: work request flushed"},
	} {
		err := c.w.end(context.Background(), "wait for RDMA_WRITE_ADV", c.err)
		var gone *clientGone
		switch {
		case c.want == "" && (!errors.As(err, &gone) || gone.step != "wait for RDMA_WRITE_ADV"):
			t.Errorf("%s: %v; want the client gone at wait for RDMA_WRITE_ADV", c.name, err)
		case c.want != "" && (err == nil || err.Error() != c.want || errors.As(err, &gone)):
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	// The server's own end (its ctx) ends the watch too: that is not news.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := watch(context.Canceled).end(ctx, "wait for RDMA_READ_ADV", context.Canceled); err == nil || err.Error() != "wait for RDMA_READ_ADV: context canceled" {
		t.Errorf("ended by the server's ctx: %v", err)
	}
}
