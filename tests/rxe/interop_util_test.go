package rxe

// Helpers for the interop tests: the Go tools against rdma-core's C tools
// on the same rxe device, one side in this process, the other a child.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// interopTimeout bounds each interop run; under TCG a 1000-iteration
// ping-pong takes well under a second, rping's connection set-up a few.
const interopTimeout = 90 * time.Second

// localAddr is an address of this host for the TCP side channel and for
// rdma_cm: veth0's, under rxe0.
func localAddr() string {
	if a := os.Getenv("RXE_ADDR"); a != "" {
		return a
	}
	return "192.0.2.1"
}

// cTool is a C tool running as a child process.
type cTool struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

// startC starts name with args; the test fails if it cannot start. wait
// returns its error and output.
func startC(t *testing.T, ctx context.Context, name string, args ...string) *cTool {
	t.Helper()
	c := &cTool{cmd: exec.CommandContext(ctx, name, args...), done: make(chan error, 1)}
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.out
	t.Logf("$ %s %s", name, strings.Join(args, " "))
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("%s: %v (ibverbs-utils and rdmacm-utils are in the VM's host packages)", name, err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	return c
}

func (c *cTool) wait() (string, error) {
	err := <-c.done
	return c.out.String(), err
}

// waitListen waits until a TCP socket listens on port (from /proc/net/tcp
// and tcp6), so a client started next finds its server, without taking
// the server's one accept as a probe connection would.
func waitListen(ctx context.Context, port int) error {
	want := fmt.Sprintf(":%04X", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				fs := strings.Fields(sc.Text())
				// sl local_address rem_address st ...; st 0A is LISTEN.
				if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on TCP port %d: %w", port, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// summary is what ibv_rc_pingpong prints at the end of a run.
type summary struct {
	bytes, iters int64
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

func TestParseSummary(t *testing.T) {
	s := parseSummary("  local address: ...\n16384000 bytes in 4.00 seconds = 32.81 Mbit/sec\n1000 iters in 4.00 seconds = 3995.28 usec/iter\n")
	if !s.ok || s.bytes != 16384000 || s.iters != 1000 {
		t.Errorf("parseSummary = %+v", s)
	}
}
