package rxe

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/cmd/goverbs-pingpong/pingpong"
)

// The ping-pong both ways round: goverbs-pingpong (run in this process,
// through the same Main the command runs) against rdma-core's
// ibv_rc_pingpong, on rxe0, with -c so the client marks every page and
// the server checks the marks. Each side must report iters exchanges of
// size bytes each way, and each must have learnt the other's address as
// the other printed it (QPN, PSN and GID through the text wire format).

const (
	ppIters = 500
	ppSize  = 8192 // two pages: -c checks a mark in each
)

type ppRun struct {
	name     string // "Go server" ...
	out      string
	exitCode int
	err      error
}

func ppArgs(device string, gidIndex, port int) []string {
	return []string{"-d", device, "-g", strconv.Itoa(gidIndex), "-p", strconv.Itoa(port),
		"-n", strconv.Itoa(ppIters), "-s", strconv.Itoa(ppSize), "-c"}
}

// goPingpong runs pingpong.Main with args in a goroutine.
func goPingpong(name string, args []string) <-chan ppRun {
	ch := make(chan ppRun, 1)
	go func() {
		var out bytes.Buffer
		code := pingpong.Main(args, &out, &out)
		ch <- ppRun{name: name, out: out.String(), exitCode: code}
	}()
	return ch
}

func checkPingpong(t *testing.T, server, client ppRun) {
	t.Helper()
	for _, r := range []ppRun{server, client} {
		t.Logf("%s output:\n%s", r.name, r.out)
		if r.err != nil || r.exitCode != 0 {
			t.Errorf("%s failed: exit %d, %v", r.name, r.exitCode, r.err)
			continue
		}
		s := parseSummary(r.out)
		if !s.ok {
			t.Errorf("%s printed no summary lines", r.name)
			continue
		}
		if want := int64(ppIters) * ppSize * 2; s.bytes != want || s.iters != ppIters {
			t.Errorf("%s: %d bytes in %d iters, want %d bytes in %d iters", r.name, s.bytes, s.iters, want, ppIters)
		}
		if strings.Contains(r.out, "invalid data") {
			t.Errorf("%s found pages without the client's mark", r.name)
		}
	}
	for _, p := range [][2]ppRun{{server, client}, {client, server}} {
		local, remote := addrLine(p[0].out, "local address:"), addrLine(p[1].out, "remote address:")
		if local == "" || local != remote {
			t.Errorf("%s's local address %q, but %s saw %q", p[0].name, local, p[1].name, remote)
		}
	}
	if !strings.Contains(addrLine(server.out, "local address:"), "GID ::ffff:"+localAddr()) {
		t.Errorf("server's GID is not the RoCE v2 IPv4 GID of %s", localAddr())
	}
}

func TestInteropPingpongGoServerCClient(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	const port = 18601
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := goPingpong("Go server", ppArgs(device, gidIndex, port))
	if err := waitListen(ctx, port); err != nil {
		t.Fatalf("goverbs-pingpong server: %v", err)
	}
	c := startC(t, ctx, "ibv_rc_pingpong", append(ppArgs(device, gidIndex, port), localAddr())...)
	out, err := c.wait()
	client := ppRun{name: "C client", out: out, err: err}
	var server ppRun
	select {
	case server = <-srv:
	case <-ctx.Done():
		t.Fatalf("Go server did not finish; C client output:\n%s", out)
	}
	checkPingpong(t, server, client)
}

func TestInteropPingpongCServerGoClient(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	const port = 18602
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := startC(t, ctx, "ibv_rc_pingpong", ppArgs(device, gidIndex, port)...)
	if err := waitListen(ctx, port); err != nil {
		out, _ := c.wait()
		t.Fatalf("ibv_rc_pingpong server: %v; output:\n%s", err, out)
	}
	client := <-goPingpong("Go client", append(ppArgs(device, gidIndex, port), localAddr()))
	out, err := c.wait()
	checkPingpong(t, ppRun{name: "C server", out: out, err: err}, client)
}

// Both sides Go: the same checks hold between two goverbs-pingpongs.
func TestInteropPingpongGoGo(t *testing.T) {
	device, gidIndex := RequireDevice(t)
	const port = 18603
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := goPingpong("Go server", ppArgs(device, gidIndex, port))
	if err := waitListen(ctx, port); err != nil {
		t.Fatalf("goverbs-pingpong server: %v", err)
	}
	client := <-goPingpong("Go client", append(ppArgs(device, gidIndex, port), localAddr()))
	var server ppRun
	select {
	case server = <-srv:
	case <-ctx.Done():
		t.Fatal("Go server did not finish")
	}
	checkPingpong(t, server, client)
}
