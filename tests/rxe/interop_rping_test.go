package rxe

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/internal/listenwait"
	"github.com/goverbs/goverbs/tests/internal/tooltest"
)

// rping both ways round: goverbs-rping (in this process, through the
// command's Main) against rdma-core's rping, on rxe0 over rdma_cm. The
// client validates every echo (-V); both sides print every ping (-v), and
// tooltest.Rping.Check checks each line against the text rping's protocol
// defines: what the server RDMA-read is what the client wrote, and what the
// client got back by RDMA write is the same.

const rpingCount = 10

func TestInteropRpingGoServerCClient(t *testing.T) {
	RequireDevice(t)
	rp := tooltest.Rping{Port: 18611, Count: rpingCount}
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := tooltest.GoRping("Go server", rp.Args("-s", localAddr()))
	if err := listenwait.CM(ctx, rp.Port); err != nil {
		t.Fatalf("goverbs-rping server: %v", err)
	}
	client := tooltest.StartC(t, ctx, "C client", "rping", rp.Args("-c", localAddr())...).Wait()
	rp.Check(t, tooltest.Await(ctx, "Go server", srv), client)
}

func TestInteropRpingCServerGoClient(t *testing.T) {
	RequireDevice(t)
	rp := tooltest.Rping{Port: 18612, Count: rpingCount}
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	c := tooltest.StartC(t, ctx, "C server", "rping", rp.Args("-s", localAddr())...)
	if err := listenwait.CM(ctx, rp.Port); err != nil {
		t.Fatalf("rping server: %v; output:\n%s", err, c.Wait().Out)
	}
	client := tooltest.Await(ctx, "Go client", tooltest.GoRping("Go client", rp.Args("-c", localAddr())))
	rp.Check(t, c.Wait(), client)
}

func TestInteropRpingGoGo(t *testing.T) {
	RequireDevice(t)
	rp := tooltest.Rping{Port: 18613, Count: rpingCount}
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	srv := tooltest.GoRping("Go server", rp.Args("-s", localAddr()))
	if err := listenwait.CM(ctx, rp.Port); err != nil {
		t.Fatalf("goverbs-rping server: %v", err)
	}
	client := tooltest.Await(ctx, "Go client", tooltest.GoRping("Go client", rp.Args("-c", localAddr())))
	rp.Check(t, tooltest.Await(ctx, "Go server", srv), client)
}
