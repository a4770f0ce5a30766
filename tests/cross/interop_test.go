package cross

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// The Go tools against rdma-core's C tools across the hosts, both ways
// round: goverbs-pingpong against ibv_rc_pingpong (RC over a TCP side
// channel of their own) and goverbs-rping against rping (rdma_cm, RDMA read
// and write). The server host starts its side, waits until it listens and
// says so at a barrier; then the client host starts its side. Each host
// sends its side's output to the other, so both check the whole run the
// way tests/rxe's single-host interop tests do (package tooltest).

const (
	toolTimeout = 90 * time.Second
	ppIters     = 500
	ppSize      = 8192 // two pages: -c checks a mark in each
	rpingCount  = 10
)

// toolSide starts one side of a tool run and returns what waits for its
// end.
type toolSide func(t *testing.T, ctx context.Context) (wait func() tooltest.Run)

// goSide runs a Go tool's Main in this process.
func goSide(name string, run func(string, []string) <-chan tooltest.Run, args []string) toolSide {
	return func(t *testing.T, ctx context.Context) func() tooltest.Run {
		ch := run(name, args)
		return func() tooltest.Run { return tooltest.Await(ctx, name, ch) }
	}
}

// cSide runs a C tool as a child.
func cSide(name, prog string, args []string) toolSide {
	return func(t *testing.T, ctx context.Context) func() tooltest.Run {
		return tooltest.StartC(t, ctx, name, prog, args...).Wait
	}
}

// acrossHosts runs server on the server host and client on the client
// host, the client once listening(ctx) says the server listens, and
// returns both sides' Runs on both hosts.
func acrossHosts(t *testing.T, p *Peer, server, client toolSide, listening func(context.Context) error) (srv, cli tooltest.Run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), toolTimeout)
	defer cancel()
	start := time.Now()
	var mine tooltest.Run
	if p.IsServer() {
		wait := server(t, ctx)
		if err := listening(ctx); err != nil {
			cancel()
			t.Fatalf("the server side never listened: %v; its output:\n%s", err, wait().Out)
		}
		p.Barrier("server listening")
		mine = wait()
	} else {
		p.Barrier("server listening")
		mine = client(t, ctx)()
	}
	t.Logf("%s on this host ran %v (exit %d)", mine.Name, time.Since(start).Round(time.Millisecond), mine.ExitCode)
	var theirs tooltest.Run
	p.Exchange("run", mine, &theirs)
	if p.IsServer() {
		return mine, theirs
	}
	return theirs, mine
}

func pingpongAcross(t *testing.T, goServer bool, port int) {
	p := ConnectPeer(t)
	pp := tooltest.Pingpong{Device: p.Device, GIDIndex: p.GIDIndex, Port: port, Iters: ppIters, Size: ppSize}
	clientArgs := append(pp.Args(), p.ServerAddr().String())
	server := cSide("C server", "ibv_rc_pingpong", pp.Args())
	client := goSide("Go client", tooltest.GoPingpong, clientArgs)
	if goServer {
		server = goSide("Go server", tooltest.GoPingpong, pp.Args())
		client = cSide("C client", "ibv_rc_pingpong", clientArgs)
	}
	srv, cli := acrossHosts(t, p, server, client, func(ctx context.Context) error { return listenwait.TCP(ctx, port) })
	pp.Check(t, srv, cli, p.ServerAddr().String())
	for _, r := range []tooltest.Run{srv, cli} {
		if s, ok := tooltest.PingpongSummary(r); ok {
			t.Logf("%s reports %d iterations, %d bytes in %.2f s (%s)", r.Name, s.Iters, s.Bytes, s.Seconds, rate(s.Bytes, s.Seconds))
		}
	}
}

func TestCrossPingpongGoServerCClient(t *testing.T) { pingpongAcross(t, true, 18701) }

func TestCrossPingpongCServerGoClient(t *testing.T) { pingpongAcross(t, false, 18702) }

func rpingAcross(t *testing.T, goServer bool, port int) {
	p := ConnectPeer(t)
	rp := tooltest.Rping{Port: port, Count: rpingCount}
	serverArgs, clientArgs := rp.Args("-s", p.ServerAddr().String()), rp.Args("-c", p.ServerAddr().String())
	server := cSide("C server", "rping", serverArgs)
	client := goSide("Go client", tooltest.GoRping, clientArgs)
	if goServer {
		server = goSide("Go server", tooltest.GoRping, serverArgs)
		client = cSide("C client", "rping", clientArgs)
	}
	srv, cli := acrossHosts(t, p, server, client, func(ctx context.Context) error { return listenwait.CM(ctx, port) })
	rp.Check(t, srv, cli)
	if !t.Failed() {
		t.Logf("%d pings of %s RDMA-read by the %s and echoed back by RDMA write to the %s, every line as rping defines it",
			rpingCount, cli.Name, srv.Name, cli.Name)
	}
}

func TestCrossRpingGoServerCClient(t *testing.T) { rpingAcross(t, true, 18711) }

func TestCrossRpingCServerGoClient(t *testing.T) { rpingAcross(t, false, 18712) }
