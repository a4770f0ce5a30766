package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseFlagsTwoHosts(t *testing.T) {
	o, err := parseFlags([]string{"-hosts", "2", "--", "srv", "-x", "--", "cli", "y"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.smp != 1 || !slices.Equal(o.command, []string{"srv", "-x"}) || !slices.Equal(o.peerCommand, []string{"cli", "y"}) {
		t.Errorf("parseFlags gave smp %d, commands %q and %q; want 1, [srv -x], [cli y]", o.smp, o.command, o.peerCommand)
	}
	o, err = parseFlags([]string{"-hosts", "2", "-smp", "2", "--", "both"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.smp != 2 || !slices.Equal(o.command, []string{"both"}) || !slices.Equal(o.peerCommand, []string{"both"}) {
		t.Errorf("parseFlags gave smp %d, commands %q and %q; want 2 and both twice", o.smp, o.command, o.peerCommand)
	}
	for _, args := range [][]string{
		{"-hosts", "3", "--", "x"},
		{"-hosts", "2", "--", "x", "--"},    // no command for b
		{"-hosts", "2", "--", "--", "x"},    // none for a
		{"-peer-grace", "0s", "--", "true"}, // no grace
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
	// A single host keeps every word, "--" included, for its command.
	o, err = parseFlags([]string{"--", "go", "test", "--", "x"}, io.Discard)
	if err != nil || !slices.Equal(o.command, []string{"go", "test", "--", "x"}) {
		t.Errorf("single host: command %q, %v", o.command, err)
	}
}

// The two hosts' networks point at each other: a's qemu socket sends to
// b's port and listens on its own, and each is told who it and the peer are.
func TestPairNetwork(t *testing.T) {
	ports := [2]int{47001, 47002}
	a, b := pairNetwork(0, ports, hostTools), pairNetwork(1, ports, hostTools)
	if got := strings.Join(a.qemuArgs, " "); !strings.Contains(got, "udp=127.0.0.1:47002,localaddr=127.0.0.1:47001") ||
		!strings.Contains(got, "mac=52:54:00:00:00:01") {
		t.Errorf("host a's qemu args %q", got)
	}
	if got := strings.Join(b.qemuArgs, " "); !strings.Contains(got, "udp=127.0.0.1:47001,localaddr=127.0.0.1:47002") ||
		!strings.Contains(got, "mac=52:54:00:00:00:02") {
		t.Errorf("host b's qemu args %q", got)
	}
	for _, c := range []struct {
		n    network
		want []string
	}{
		{a, []string{"RXE_HOST=a", "RXE_ROLE=server", "RXE_ADDR=192.0.2.1", "RXE_PEER_ADDR=192.0.2.2", "RXE_DEVICE=rxe0", "RXE_NETDEV=eth0"}},
		{b, []string{"RXE_HOST=b", "RXE_ROLE=client", "RXE_ADDR=192.0.2.2", "RXE_PEER_ADDR=192.0.2.1", "RXE_GID_INDEX=1"}},
	} {
		for _, w := range c.want {
			if !slices.Contains(c.n.env, w) {
				t.Errorf("environment %q lacks %s", c.n.env, w)
			}
		}
		if !slices.Equal(c.n.devices, []string{"rxe0"}) || !slices.ContainsFunc(c.n.setup, func(s []string) bool {
			return slices.Equal(s[1:], []string{"link", "add", "rxe0", "type", "rxe", "netdev", "eth0"})
		}) {
			t.Errorf("rxe0 is not made on eth0: %q", c.n.setup)
		}
	}
}

func TestConsoleKillMarker(t *testing.T) {
	var out strings.Builder
	kills := 0
	c := &console{out: &out, readyMarker: "rxevm-ready-n1", exitMarker: "rxevm-exit-n1=",
		killMarker: "rxevm-kill-peer-n1", onKill: func() { kills++ }}
	if err := c.copyFrom(strings.NewReader("before\r\nrxevm-kill-peer-n1\r\nafter\r\n")); err != nil {
		t.Fatal(err)
	}
	if kills != 1 || out.String() != "before\nafter\n" {
		t.Errorf("kills %d, output %q; want 1 and the marker line gone", kills, out.String())
	}
}

func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	mux := &lineMux{w: &out}
	a := &prefixWriter{mux: mux, w: &out, prefix: "a| "}
	b := &prefixWriter{mux: mux, w: &out, prefix: "b| "}
	var wg sync.WaitGroup
	for _, w := range []*prefixWriter{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				io.WriteString(w, "one\ntwo\n")
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		// A write's lines stay together and keep their writer's prefix.
		p := lines[i][:3]
		if lines[i] != p+"one" || lines[i+1] != p+"two" || (p != "a| " && p != "b| ") {
			t.Fatalf("lines %d-%d: %q %q", i, i+1, lines[i], lines[i+1])
		}
	}
}

func TestPairStatus(t *testing.T) {
	for _, c := range []struct {
		results [2]pairResult
		want    int
		err     bool
	}{
		{[2]pairResult{{0, nil}, {0, nil}}, 0, false},
		{[2]pairResult{{0, nil}, {3, nil}}, 3, false},
		{[2]pairResult{{1, nil}, {3, nil}}, 1, false},
		{[2]pairResult{{0, nil}, {exitTimeout, errPeerEnded}}, exitTimeout, true},
	} {
		var log strings.Builder
		got, err := pairStatus(c.results, &host{log: &log})
		if got != c.want || (err != nil) != c.err {
			t.Errorf("pairStatus(%v) = %d, %v; want %d, error %v", c.results, got, err, c.want, c.err)
		}
	}
}

// A host killed at its peer's request counts as a success; one that hangs
// after its peer ended is killed after the grace period, as a timeout.
func TestRunPowerCutAndPeerEnded(t *testing.T) {
	plan := testPlan("/w", "my-cmd")
	for _, c := range []struct {
		cause error
		want  int
		err   string
	}{
		{errPowerCut, 0, ""},
		{errPeerEnded, exitTimeout, "well after the other host ended"},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		v := vm{qemu: fakeQEMU(t, `printf 'rxevm-ready-0123456789abcdef\r\n'; exec sleep 60`), mem: "1G", smp: 1}
		time.AfterFunc(200*time.Millisecond, func() { cancel(c.cause) })
		var out, log strings.Builder
		start := time.Now()
		code, err := v.run(ctx, time.Minute, plan, &out, &host{log: &log})
		if code != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("cause %v: run = %d, %v; want %d, %q", c.cause, code, err, c.want, c.err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cause %v: run took %v to end", c.cause, d)
		}
		cancel(nil)
	}
}
