package main

// This example against rdma-core's ibv_rc_pingpong on a soft-RoCE device,
// both ways round: the Go side runs in this process (run, as main calls
// it), the C side as a child. They run in the throwaway VM of
// `make rxe-test`, which names its device in the environment; elsewhere
// they skip.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// skipMessage is what these tests skip with outside the VM, the same words
// as tests/rxe's.
const skipMessage = "needs a verbs device: GOVERBS_IN_VM=1 is not set, so this is not the soft-RoCE VM; " +
	"run `make rxe-test`, which boots one (internal/cmd/rxevm) and runs this package inside"

// rxe is the VM's soft-RoCE device: its name, the GID index of its RoCE v2
// IPv4 GID, and its address.
type rxe struct {
	device   string
	gidIndex int
	addr     string
}

// requireDevice returns the VM's device, skips the test outside the VM,
// and fails it when the VM lacks what it promised.
func requireDevice(t *testing.T) rxe {
	t.Helper()
	if os.Getenv("GOVERBS_IN_VM") != "1" {
		t.Skip(skipMessage)
	}
	r := rxe{device: os.Getenv("RXE_DEVICE"), addr: os.Getenv("RXE_ADDR")}
	var err error
	r.gidIndex, err = strconv.Atoi(os.Getenv("RXE_GID_INDEX"))
	if r.device == "" || r.addr == "" || err != nil {
		t.Fatalf("GOVERBS_IN_VM=1 but RXE_DEVICE=%q RXE_GID_INDEX=%q RXE_ADDR=%q: run under internal/cmd/rxevm, which sets them",
			r.device, os.Getenv("RXE_GID_INDEX"), r.addr)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", r.device)); err != nil {
		t.Fatalf("in the soft-RoCE VM but device %s is missing (%v)", r.device, err)
	}
	return r
}

const (
	interopIters = 1000
	interopSize  = 8192 // two pages: -c checks a mark in each
)

// side is how one side of a run ended.
type side struct {
	name string
	out  string // stdout and stderr
	code int    // exit status; -1 if it did not finish
}

func TestInteropWithCTool(t *testing.T) {
	dev := requireDevice(t)
	for i, c := range []struct {
		goServer, events bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		name := map[bool]string{true: "Go server, C client", false: "C server, Go client"}[c.goServer]
		if c.events {
			name += ", Go with -e"
		}
		t.Run(name, func(t *testing.T) {
			port := 18620 + i
			args := []string{"-d", dev.device, "-g", strconv.Itoa(dev.gidIndex), "-p", strconv.Itoa(port),
				"-n", strconv.Itoa(interopIters), "-s", strconv.Itoa(interopSize), "-c"}
			goArgs := args
			if c.events {
				goArgs = append([]string{"-e"}, args...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var server, client side
			if c.goServer {
				srv := startGo("Go server", goArgs)
				waitListen(t, ctx, port)
				client = runC(ctx, "C client", append(args, dev.addr))
				server = await(ctx, srv)
			} else {
				srv := startC(ctx, "C server", args)
				waitListen(t, ctx, port)
				client = await(ctx, startGo("Go client", append(goArgs, dev.addr)))
				server = await(ctx, srv)
			}
			checkRun(t, server, client, dev.addr)
		})
	}
}

// -c can fail: against a C client that does not mark its pages (no -c),
// the Go server reports both pages and exits 1.
func TestInteropCheckFindsUnmarkedPages(t *testing.T) {
	dev := requireDevice(t)
	const port = 18630
	args := []string{"-d", dev.device, "-g", strconv.Itoa(dev.gidIndex), "-p", strconv.Itoa(port),
		"-n", "10", "-s", strconv.Itoa(interopSize)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startGo("Go server", append([]string{"-c"}, args...))
	waitListen(t, ctx, port)
	client := runC(ctx, "C client", append(args, dev.addr))
	server := await(ctx, srv)
	t.Logf("%s:\n%s\n%s:\n%s", server.name, server.out, client.name, client.out)
	if client.code != 0 {
		t.Errorf("%s exited %d", client.name, client.code)
	}
	for _, want := range []string{"invalid data in page 0\n", "invalid data in page 1\n", "-c: 2 of 2 pages lack the client's mark"} {
		if !strings.Contains(server.out, want) {
			t.Errorf("%s did not print %q", server.name, want)
		}
	}
	if server.code != 1 {
		t.Errorf("%s exited %d, want 1", server.name, server.code)
	}
}

// startGo runs the example with args in a goroutine.
func startGo(name string, args []string) <-chan side {
	ch := make(chan side, 1)
	go func() {
		var out bytes.Buffer
		code := run(args, &out, &out)
		ch <- side{name: name, out: out.String(), code: code}
	}()
	return ch
}

// startC runs ibv_rc_pingpong with args as a child that ctx kills.
func startC(ctx context.Context, name string, args []string) <-chan side {
	ch := make(chan side, 1)
	go func() { ch <- runC(ctx, name, args) }()
	return ch
}

func runC(ctx context.Context, name string, args []string) side {
	out, err := exec.CommandContext(ctx, "ibv_rc_pingpong", args...).CombinedOutput()
	s := side{name: name, out: "$ ibv_rc_pingpong " + strings.Join(args, " ") + "\n" + string(out)}
	if err != nil {
		s.code = -1
		s.out += err.Error() + "\n"
	}
	return s
}

// await returns the side's end, or a side that did not finish when ctx
// ends first.
func await(ctx context.Context, ch <-chan side) side {
	select {
	case s := <-ch:
		return s
	case <-ctx.Done():
		return side{name: "a side", out: "did not finish: " + ctx.Err().Error(), code: -1}
	}
}

// waitListen waits until something listens on TCP port, from
// /proc/net/tcp and tcp6: a probe connection would be the server's one
// client. The kernel has no event for a new listener, so it rereads them
// every 20 ms.
func waitListen(t *testing.T, ctx context.Context, port int) {
	t.Helper()
	want := fmt.Sprintf(":%04X", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				// sl local_address rem_address st ...; st 0A is LISTEN.
				fs := strings.Fields(sc.Text())
				if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nothing listens on TCP port %d: %v", port, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkRun checks both sides of a run: each exits 0 and reports
// interopIters exchanges of interopSize bytes each way, the server found
// every page marked, each side learnt the address the other printed as
// its own, and the server's GID is the RoCE v2 GID of addr.
func checkRun(t *testing.T, server, client side, addr string) {
	t.Helper()
	for _, s := range []side{server, client} {
		t.Logf("%s:\n%s", s.name, s.out)
		if s.code != 0 {
			t.Errorf("%s exited %d", s.name, s.code)
			continue
		}
		bytes, iters, ok := results(s.out)
		if !ok {
			t.Errorf("%s printed no result lines", s.name)
		} else if want := int64(interopIters) * interopSize * 2; bytes != want || iters != interopIters {
			t.Errorf("%s: %d bytes in %d iters, want %d bytes in %d iters", s.name, bytes, iters, want, interopIters)
		}
		if strings.Contains(s.out, "invalid data") {
			t.Errorf("%s found pages without the client's mark", s.name)
		}
	}
	for _, p := range [][2]side{{server, client}, {client, server}} {
		local, remote := addressLine(p[0].out, "local address:"), addressLine(p[1].out, "remote address:")
		if local == "" || local != remote {
			t.Errorf("%s's local address is %q, but %s saw %q", p[0].name, local, p[1].name, remote)
		}
	}
	if gid := addressLine(server.out, "local address:"); !strings.HasSuffix(gid, "GID ::ffff:"+addr) {
		t.Errorf("%s's address %q does not have the RoCE v2 GID of %s", server.name, gid, addr)
	}
}

// results reads the "%d bytes in %.2f seconds = %.2f Mbit/sec" and "%d
// iters in %.2f seconds = %.2f usec/iter" lines both tools print.
func results(out string) (bytes, iters int64, ok bool) {
	var nb, ni bool
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 8 || f[2] != "in" || f[4] != "seconds" || f[5] != "=" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		switch {
		case err != nil:
		case f[1] == "bytes" && f[7] == "Mbit/sec":
			bytes, nb = n, true
		case f[1] == "iters" && f[7] == "usec/iter":
			iters, ni = n, true
		}
	}
	return bytes, iters, nb && ni
}

// addressLine is the rest of the line that starts with prefix, trimmed.
func addressLine(out, prefix string) string {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
