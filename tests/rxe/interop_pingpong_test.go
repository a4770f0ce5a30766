package rxe

import (
	"context"
	"testing"

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
	if err := tooltest.WaitListen(ctx, pp.Port); err != nil {
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
	if err := tooltest.WaitListen(ctx, pp.Port); err != nil {
		t.Fatalf("ibv_rc_pingpong server: %v; output:\n%s", err, c.Wait().Out)
	}
	client := <-tooltest.GoPingpong("Go client", append(pp.Args(), localAddr()))
	pp.Check(t, c.Wait(), client, localAddr())
}

// Both sides Go: the same checks hold between two goverbs-pingpongs.
func TestInteropPingpongGoGo(t *testing.T) {
	pp := ppConfig(t, 18603)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := tooltest.GoPingpong("Go server", pp.Args())
	if err := tooltest.WaitListen(ctx, pp.Port); err != nil {
		t.Fatalf("goverbs-pingpong server: %v", err)
	}
	client := <-tooltest.GoPingpong("Go client", append(pp.Args(), localAddr()))
	pp.Check(t, tooltest.Await(ctx, "Go server", srv), client, localAddr())
}
