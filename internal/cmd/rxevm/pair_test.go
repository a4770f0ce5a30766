package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
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

// Each host's qemu gets its own end of the link as descriptor 3, for its
// one NIC, and each is told who it and the peer are.
func TestPairNetwork(t *testing.T) {
	link, err := newPairLink()
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	a, b := pairNetwork(0, link, hostTools), pairNetwork(1, link, hostTools)
	for i, n := range []network{a, b} {
		if got := strings.Join(n.qemuArgs, " "); !strings.Contains(got, "-netdev dgram,id=n0,local.type=fd,local.str=3 ") ||
			!strings.Contains(got, "mac="+pairHosts[i].mac) {
			t.Errorf("host %s's qemu args %q", pairHosts[i].name, got)
		}
		if len(n.files) != 1 || n.files[0] != link.files[i] {
			t.Errorf("host %s's qemu inherits %v, want its end of the link only (%v)", pairHosts[i].name, n.files, link.files[i])
		}
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

// bindUDP binds a UDP socket to 127.0.0.1:port as qemu's -netdev
// socket,localaddr= does (with SO_REUSEADDR, which lets two such sockets
// share a port), and closes it.
func bindUDP(port int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return err
	}
	return syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
}

// readFrame reads one datagram from a link's socket, waiting up to 10 s.
// (A deadline would not do: exec makes the descriptor blocking.)
func readFrame(f *os.File) (string, error) {
	fd := int(f.Fd())
	tv := syscall.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return "", err
	}
	buf := make([]byte, 100)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// The link's ports are taken from the moment it is made: no other process
// can bind one before qemu uses it, not even another qemu, whose
// SO_REUSEADDR would otherwise share it. (The link used to be two ports
// found free and let go, which another process could take before qemu
// bound them.)
func TestPairLinkHoldsPorts(t *testing.T) {
	link, err := newPairLink()
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	if link.ports[0] == 0 || link.ports[0] == link.ports[1] {
		t.Fatalf("ports %v: want two different ports", link.ports)
	}
	for i, p := range link.ports {
		if err := bindUDP(p); !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("host %s's port %d: another socket's bind gave %v, want EADDRINUSE", pairHosts[i].name, p, err)
		}
	}
}

// Each end sends to the other, and takes datagrams from the other end only.
func TestPairLinkCarriesFrames(t *testing.T) {
	link, err := newPairLink()
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	stranger, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(stranger)
	for i := range 2 {
		from, to := link.files[1-i], link.files[i]
		// The stranger's datagram comes first: a connected socket drops it.
		if err := syscall.Sendto(stranger, []byte("stranger"), 0, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: link.ports[i]}); err != nil {
			t.Fatal(err)
		}
		want := "frame for host " + pairHosts[i].name
		if _, err := from.Write([]byte(want)); err != nil {
			t.Fatal(err)
		}
		if got, err := readFrame(to); err != nil || got != want {
			t.Errorf("host %s's end read %q, %v; want %q", pairHosts[i].name, got, err, want)
		}
	}
}

// qemu takes its end of the link as its NIC's backend. It starts stopped
// (-S), with no kernel: nothing boots; its monitor lists the network, and
// quits.
func TestPairLinkQEMU(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not found: install qemu-system-x86 (rxevm -setup-only does)")
	}
	link, err := newPairLink()
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	n := pairNetwork(0, link, hostTools)
	cmd := exec.Command(qemu, append([]string{"-S", "-accel", "tcg", "-nodefaults", "-no-user-config", "-display", "none", "-monitor", "stdio"}, n.qemuArgs...)...)
	cmd.ExtraFiles = n.files
	cmd.Stdin = strings.NewReader("info network\nquit\n")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "n0: index=0,type=dgram") {
		t.Errorf("qemu %s: %v\n%s", shellJoin(n.qemuArgs), err, out)
	}
}

// A host's qemu inherits its end of the link as descriptor 3, as its
// -netdev argument says: a fake qemu's write to it reaches the other end.
func TestRunPassesLink(t *testing.T) {
	link, err := newPairLink()
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	n := pairNetwork(0, link, hostTools)
	v := vm{qemu: fakeQEMU(t, `printf 'rxevm-ready-0123456789abcdef\r\n'; printf 'frame from a' >&3 || exit 1; printf 'rxevm-exit-0123456789abcdef=0\r\n'`),
		mem: "1G", smp: 1, netArgs: n.qemuArgs, files: n.files}
	var out, log strings.Builder
	if code, err := v.run(context.Background(), time.Minute, testPlan("/w", "my-cmd"), &out, &host{log: &log}); code != 0 || err != nil {
		t.Fatalf("run = %d, %v; want 0, nil\n%s%s", code, err, out.String(), log.String())
	}
	if got, err := readFrame(link.files[1]); err != nil || got != "frame from a" {
		t.Errorf("host b's end read %q, %v; want the fake qemu's frame", got, err)
	}
}
