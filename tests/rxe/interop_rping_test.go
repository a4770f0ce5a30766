package rxe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cmd/goverbs-rping/rping"
)

// rping both ways round: goverbs-rping (in this process, through the
// command's Main) against rdma-core's rping, on rxe0 over rdma_cm. The
// client validates every echo (-V); both sides print every ping (-v), and
// the test checks each line against the text rping's protocol defines:
// what the server RDMA-read is what the client wrote, and what the client
// got back by RDMA write is the same.

const rpingCount = 10

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

func TestRpingText(t *testing.T) {
	if got := rpingText(0); got != "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr" {
		t.Errorf("rpingText(0) = %q", got)
	}
}

// waitCMListen waits until `rdma resource show cm_id` lists a listener on
// port: rdma_cm listeners do not show in /proc/net/tcp.
func waitCMListen(ctx context.Context, port int) error {
	want := ":" + strconv.Itoa(port)
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, "rdma", "resource", "show", "cm_id").CombinedOutput()
		last = out
		if err == nil {
			// "link rxe0/1 cm-idn 0 state LISTEN ps TCP ... src-addr 192.0.2.1:7174 ..."
			for line := range strings.Lines(string(out)) {
				f := strings.Fields(line)
				if slices.Contains(f, "LISTEN") && slices.ContainsFunc(f, func(s string) bool { return strings.HasSuffix(s, want) }) {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no rdma_cm listener on port %d: %w; rdma resource show cm_id:\n%s", port, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type rpingRun struct {
	name     string
	out      string
	exitCode int
	err      error
}

func goRping(name string, args []string) <-chan rpingRun {
	ch := make(chan rpingRun, 1)
	go func() {
		var out bytes.Buffer
		code := rping.Main(args, &out, &out)
		ch <- rpingRun{name: name, out: out.String(), exitCode: code}
	}()
	return ch
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

func checkRping(t *testing.T, server, client rpingRun) {
	t.Helper()
	for _, r := range []rpingRun{server, client} {
		t.Logf("%s output:\n%s", r.name, r.out)
		if r.err != nil || r.exitCode != 0 {
			t.Errorf("%s failed: exit %d, %v", r.name, r.exitCode, r.err)
		}
	}
	for _, c := range []struct {
		r      rpingRun
		prefix string
	}{{server, "server ping data: "}, {client, "ping data: "}} {
		got := pingLines(c.r.out, c.prefix)
		if len(got) != rpingCount {
			t.Errorf("%s printed %d %q lines, want %d", c.r.name, len(got), c.prefix, rpingCount)
			continue
		}
		for i, g := range got {
			if want := rpingText(i); g != want {
				t.Errorf("%s ping %d: %q, want %q", c.r.name, i, g, want)
			}
		}
	}
	if strings.Contains(client.out, "mismatch") {
		t.Errorf("%s saw a data mismatch", client.name)
	}
}

func rpingArgs(side string, port int) []string {
	args := []string{side, "-a", localAddr(), "-p", strconv.Itoa(port), "-v"}
	if side == "-c" {
		args = append(args, "-V", "-C", strconv.Itoa(rpingCount))
	}
	return args
}

func TestInteropRpingGoServerCClient(t *testing.T) {
	RequireDevice(t)
	const port = 18611
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := goRping("Go server", rpingArgs("-s", port))
	if err := waitCMListen(ctx, port); err != nil {
		t.Fatalf("goverbs-rping server: %v", err)
	}
	c := startC(t, ctx, "rping", rpingArgs("-c", port)...)
	out, err := c.wait()
	client := rpingRun{name: "C client", out: out, err: err}
	var server rpingRun
	select {
	case server = <-srv:
	case <-ctx.Done():
		t.Fatalf("Go server did not finish; C client output:\n%s", out)
	}
	checkRping(t, server, client)
}

func TestInteropRpingCServerGoClient(t *testing.T) {
	RequireDevice(t)
	const port = 18612
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := startC(t, ctx, "rping", rpingArgs("-s", port)...)
	if err := waitCMListen(ctx, port); err != nil {
		out, _ := c.wait()
		t.Fatalf("rping server: %v; output:\n%s", err, out)
	}
	client := <-goRping("Go client", rpingArgs("-c", port))
	out, err := c.wait()
	checkRping(t, rpingRun{name: "C server", out: out, err: err}, client)
}

func TestInteropRpingGoGo(t *testing.T) {
	RequireDevice(t)
	const port = 18613
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := goRping("Go server", rpingArgs("-s", port))
	if err := waitCMListen(ctx, port); err != nil {
		t.Fatalf("goverbs-rping server: %v", err)
	}
	client := <-goRping("Go client", rpingArgs("-c", port))
	var server rpingRun
	select {
	case server = <-srv:
	case <-ctx.Done():
		t.Fatal("Go server did not finish")
	}
	checkRping(t, server, client)
}
