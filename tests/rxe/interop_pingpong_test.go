package rxe

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// The ping-pong both ways round: goverbs-pingpong (run in this process,
// through the same Main the command runs) against rdma-core's
// ibv_rc_pingpong, on rxe0, with -c so the client marks every page and
// the server checks the marks. tooltest.Pingpong.Check says what must hold.

const (
	ppIters = 500
	ppSize  = 8192 // two pages: -c checks a mark in each
)

func ppConfig(t *testing.T, port int) tooltest.Pingpong {
	device, gidIndex := RequireDevice(t)
	return tooltest.Pingpong{Device: device, GIDIndex: gidIndex, Port: port, Iters: ppIters, Size: ppSize}
}

func TestInteropPingpongGoServerCClient(t *testing.T) {
	pp := ppConfig(t, 18601)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := tooltest.GoPingpong("Go server", pp.Args())
	if err := listenwait.TCP(ctx, pp.Port); err != nil {
		t.Fatalf("goverbs-pingpong server: %v", err)
	}
	client := tooltest.StartC(t, ctx, "C client", "ibv_rc_pingpong", append(pp.Args(), localAddr())...).Wait()
	pp.Check(t, tooltest.Await(ctx, "Go server", srv), client, localAddr())
}

func TestInteropPingpongCServerGoClient(t *testing.T) {
	pp := ppConfig(t, 18602)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := tooltest.StartC(t, ctx, "C server", "ibv_rc_pingpong", pp.Args()...)
	if err := listenwait.TCP(ctx, pp.Port); err != nil {
		t.Fatalf("ibv_rc_pingpong server: %v; output:\n%s", err, c.Wait().Out)
	}
	client := tooltest.Await(ctx, "Go client", tooltest.GoPingpong("Go client", append(pp.Args(), localAddr())))
	pp.Check(t, c.Wait(), client, localAddr())
}

// Both sides Go: the same checks hold between two goverbs-pingpongs.
func TestInteropPingpongGoGo(t *testing.T) {
	pp := ppConfig(t, 18603)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := tooltest.GoPingpong("Go server", pp.Args())
	if err := listenwait.TCP(ctx, pp.Port); err != nil {
		t.Fatalf("goverbs-pingpong server: %v", err)
	}
	client := tooltest.Await(ctx, "Go client", tooltest.GoPingpong("Go client", append(pp.Args(), localAddr())))
	pp.Check(t, tooltest.Await(ctx, "Go server", srv), client, localAddr())
}

// A receive queue of one (-r 1), which ibv_rc_pingpong runs with: each
// side reposts its one receive before the send that lets the peer send
// again. goverbs-pingpong refused it (at least 2) until it was checked
// here, Go against C both ways round.
func TestInteropPingpongRxDepth1(t *testing.T) {
	for i, goServer := range []bool{true, false} {
		name := map[bool]string{true: "Go server, C client", false: "C server, Go client"}[goServer]
		t.Run(name, func(t *testing.T) {
			pp := ppConfig(t, 18606+i)
			pp.RxDepth = 1
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			if goServer {
				srv := tooltest.GoPingpong("Go server", pp.Args())
				if err := listenwait.TCP(ctx, pp.Port); err != nil {
					t.Fatalf("goverbs-pingpong server: %v", err)
				}
				client := tooltest.StartC(t, ctx, "C client", "ibv_rc_pingpong", append(pp.Args(), localAddr())...).Wait()
				pp.Check(t, tooltest.Await(ctx, "Go server", srv), client, localAddr())
				return
			}
			c := tooltest.StartC(t, ctx, "C server", "ibv_rc_pingpong", pp.Args()...)
			if err := listenwait.TCP(ctx, pp.Port); err != nil {
				t.Fatalf("ibv_rc_pingpong server: %v; output:\n%s", err, c.Wait().Out)
			}
			client := tooltest.Await(ctx, "Go client", tooltest.GoPingpong("Go client", append(pp.Args(), localAddr())))
			pp.Check(t, c.Wait(), client, localAddr())
		})
	}
}
