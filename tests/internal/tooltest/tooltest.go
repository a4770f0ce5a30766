// Package tooltest runs the project's Go tools (goverbs-pingpong,
// goverbs-rping, in-process through their Main) and rdma-core's C tools
// (ibv_rc_pingpong, rping, as child processes) against each other, and
// checks what both sides print. The soft-RoCE test packages share it:
// tests/rxe runs both sides on one host, tests/cross one side on each of two.
//
// It needs a verbs device only when its callers do, and decides nothing
// about where the tools run: addresses, ports and counts come from the
// caller. A Run is plain data (JSON-friendly), so one side's result can be
// sent to the other host and checked there as well.
package tooltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/pingpong"
	"github.com/goverbs/goverbs/internal/rping"
)

// Run is how one side of a tool run ended.
type Run struct {
	Name     string // who ran: "Go server", "C client", ...
	Out      string // stdout and stderr, interleaved
	ExitCode int
	Err      string // why a child failed to run or exit cleanly; "" otherwise
}

// Failed reports a non-zero exit or an error.
func (r Run) Failed() bool { return r.ExitCode != 0 || r.Err != "" }

// CTool is a C tool running as a child process.
type CTool struct {
	name string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	run  Run
}

// StartC starts the program prog with args as a child that ctx kills; name
// labels its Run ("C server"). The test fails if it cannot start.
func StartC(t testing.TB, ctx context.Context, name, prog string, args ...string) *CTool {
	t.Helper()
	return StartCEnv(t, ctx, name, nil, prog, args...)
}

// StartCEnv is StartC with env (KEY=VALUE) added to the child's
// environment: LD_PRELOAD, for one.
func StartCEnv(t testing.TB, ctx context.Context, name string, env []string, prog string, args ...string) *CTool {
	t.Helper()
	c := &CTool{name: name, cmd: exec.CommandContext(ctx, prog, args...), done: make(chan struct{})}
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.out
	if len(env) > 0 {
		c.cmd.Env = append(os.Environ(), env...)
	}
	t.Logf("$ %s%s %s", strings.Join(append(env, ""), " "), prog, strings.Join(args, " "))
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("%s: %v (ibverbs-utils and rdmacm-utils are in the VM's host packages)", prog, err)
	}
	go func() {
		err := c.cmd.Wait()
		c.run = Run{Name: c.name, Out: c.out.String(), ExitCode: c.cmd.ProcessState.ExitCode()}
		if err != nil {
			c.run.Err = err.Error()
		}
		close(c.done)
	}()
	return c
}

// Wait waits for the child to exit and returns its Run; it may be called
// more than once.
func (c *CTool) Wait() Run {
	<-c.done
	return c.run
}

// goMain runs main (a tool's Main) with args in a goroutine.
func goMain(name string, main func(args []string, stdout, stderr io.Writer) int, args []string) <-chan Run {
	ch := make(chan Run, 1)
	go func() {
		var out bytes.Buffer
		code := main(args, &out, &out)
		ch <- Run{Name: name, Out: out.String(), ExitCode: code}
	}()
	return ch
}

// GoPingpong runs goverbs-pingpong's Main with args in a goroutine; its
// Run comes on the channel.
func GoPingpong(name string, args []string) <-chan Run {
	return goMain(name, pingpong.Main, args)
}

// GoRping runs goverbs-rping's Main with args in a goroutine.
func GoRping(name string, args []string) <-chan Run {
	return goMain(name, rping.Main, args)
}

// Await returns the Run from ch, or, when ctx ends first, a failed Run
// named name that says so (the goroutine is abandoned).
func Await(ctx context.Context, name string, ch <-chan Run) Run {
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return Run{Name: name, ExitCode: -1, Err: fmt.Sprintf("did not finish: %v", ctx.Err())}
	}
}

// Pingpong describes a ping-pong run, the same on both sides.
type Pingpong struct {
	Device   string
	GIDIndex int
	Port     int
	Iters    int
	Size     int // at least 8192 makes -c check a mark on two pages
	RxDepth  int // -r; 0 leaves the tools' default (500)
}

// Args are the arguments of both ibv_rc_pingpong and goverbs-pingpong,
// with -c: the client marks every page and the server checks the marks.
// The client appends the server's address.
func (p Pingpong) Args() []string {
	args := []string{"-d", p.Device, "-g", strconv.Itoa(p.GIDIndex), "-p", strconv.Itoa(p.Port),
		"-n", strconv.Itoa(p.Iters), "-s", strconv.Itoa(p.Size), "-c"}
	if p.RxDepth > 0 {
		args = append(args, "-r", strconv.Itoa(p.RxDepth))
	}
	return args
}

// Check checks the two sides of a ping-pong run: each must exit cleanly
// and report Iters exchanges of Size bytes each way, no page may lack the
// client's mark, each side must have learnt the other's address as the
// other printed it (QPN, PSN and GID through the text wire format), and
// the server's GID must be the RoCE v2 IPv4 GID of serverAddr.
func (p Pingpong) Check(t testing.TB, server, client Run, serverAddr string) {
	t.Helper()
	for _, r := range []Run{server, client} {
		t.Logf("%s output:\n%s", r.Name, r.Out)
		if r.Failed() {
			t.Errorf("%s failed: exit %d, %s", r.Name, r.ExitCode, r.Err)
			continue
		}
		s := parseSummary(r.Out)
		if !s.ok {
			t.Errorf("%s printed no summary lines", r.Name)
			continue
		}
		if want := int64(p.Iters) * int64(p.Size) * 2; s.bytes != want || s.iters != int64(p.Iters) {
			t.Errorf("%s: %d bytes in %d iters, want %d bytes in %d iters", r.Name, s.bytes, s.iters, want, p.Iters)
		}
		if strings.Contains(r.Out, "invalid data") {
			t.Errorf("%s found pages without the client's mark", r.Name)
		}
	}
	for _, q := range [][2]Run{{server, client}, {client, server}} {
		local, remote := addrLine(q[0].Out, "local address:"), addrLine(q[1].Out, "remote address:")
		if local == "" || local != remote {
			t.Errorf("%s's local address %q, but %s saw %q", q[0].Name, local, q[1].Name, remote)
		}
	}
	if !strings.Contains(addrLine(server.Out, "local address:"), "GID ::ffff:"+serverAddr) {
		t.Errorf("%s's GID is not the RoCE v2 IPv4 GID of %s", server.Name, serverAddr)
	}
}

// Summary is what a ping-pong side reported at the end of a run.
type Summary struct {
	Bytes, Iters int64
	Seconds      float64
}

// PingpongSummary returns r's "%d bytes in %.2f seconds" and "%d iters in"
// figures, for a test to print; ok is false without both lines.
func PingpongSummary(r Run) (s Summary, ok bool) {
	p := parseSummary(r.Out)
	return Summary{Bytes: p.bytes, Iters: p.iters, Seconds: p.seconds}, p.ok
}

// summary is what ibv_rc_pingpong prints at the end of a run.
type summary struct {
	bytes, iters int64
	seconds      float64
	ok           bool
}

// parseSummary reads the "%d bytes in ..." and "%d iters in ..." lines.
func parseSummary(out string) summary {
	var s summary
	var nb, ni bool
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		// "%d bytes in %.2f seconds = %.2f Mbit/sec", "%d iters in ... usec/iter"
		if len(f) == 8 && f[2] == "in" && f[4] == "seconds" && f[5] == "=" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			switch {
			case err != nil:
			case f[1] == "bytes" && f[7] == "Mbit/sec":
				s.bytes, nb = n, true
				s.seconds, _ = strconv.ParseFloat(f[3], 64)
			case f[1] == "iters" && f[7] == "usec/iter":
				s.iters, ni = n, true
			}
		}
	}
	s.ok = nb && ni
	return s
}

// addrLine returns the rest of the line that starts with prefix ("local
// address:" or "remote address:"), trimmed.
func addrLine(out, prefix string) string {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// Rping describes an rping run, the same on both sides.
type Rping struct {
	Port  int
	Count int // pings; the client stops after Count, then the server
}

// Args are the arguments of rping and goverbs-rping for side "-s" (bind to
// addr) or "-c" (connect to addr), printing every ping (-v); the client
// validates every echo (-V).
func (r Rping) Args(side, addr string) []string {
	args := []string{side, "-a", addr, "-p", strconv.Itoa(r.Port), "-v"}
	if side == "-c" {
		args = append(args, "-V", "-C", strconv.Itoa(r.Count))
	}
	return args
}

// Check checks the two sides of an rping run: both exit cleanly and print
// every ping as the text rping's protocol defines, the server what it
// RDMA-read from the client, the client what came back by RDMA write; and
// the client saw no mismatch.
func (r Rping) Check(t testing.TB, server, client Run) {
	t.Helper()
	for _, run := range []Run{server, client} {
		t.Logf("%s output:\n%s", run.Name, run.Out)
		if run.Failed() {
			t.Errorf("%s failed: exit %d, %s", run.Name, run.ExitCode, run.Err)
		}
	}
	for _, c := range []struct {
		run    Run
		prefix string
	}{{server, "server ping data: "}, {client, "ping data: "}} {
		got := pingLines(c.run.Out, c.prefix)
		if len(got) != r.Count {
			t.Errorf("%s printed %d %q lines, want %d", c.run.Name, len(got), c.prefix, r.Count)
			continue
		}
		for i, g := range got {
			if want := rpingText(i); g != want {
				t.Errorf("%s ping %d: %q, want %q", c.run.Name, i, g, want)
			}
		}
	}
	if strings.Contains(client.Out, "mismatch") {
		t.Errorf("%s saw a data mismatch", client.Name)
	}
}

// rpingText is ping i's text at size 64 (rping's default), built here from
// rping's definition rather than from the package under test.
func rpingText(i int) string {
	s := fmt.Sprintf("rdma-ping-%d: ", i)
	c := 'A' + i%58
	for len(s) < 63 {
		s += string(rune(c))
		if c++; c > 'z' {
			c = 'A'
		}
	}
	return s
}

// pingLines returns the text after prefix on each line that starts with it.
func pingLines(out, prefix string) []string {
	var ls []string
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), prefix); ok {
			ls = append(ls, rest)
		}
	}
	return ls
}
