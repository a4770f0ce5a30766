package cross

import (
	"context"
	"errors"
	"fmt"
	"github.com/goverbs/goverbs/tests/internal/testkit"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

const (
	dieWRs     = 1000
	dieChunk   = 64 << 10 // 64 MB in flight: seconds of work under TCG
	dieRegion  = 1 << 20  // the writes wrap around the server's region
	dieAck     = 14       // 2^14 x 4.096 us, about 67 ms
	dieRetries = 6
	// The kernel's rdma_cm retries an unanswered disconnect request about
	// 16 times, 4.3 s apart on RoCE.
	dieDisconnectBudget = 3 * time.Minute
)

// The peer dies mid-transfer: the client posts 1,000 RDMA writes to the
// server over an rdma_cm connection and has the harness kill the server's
// VM (RXEVM_KILL_PEER) while they are outstanding. The client's QP reports
// IBV_WC_RETRY_EXC_ERR within the retry budget set on it (7 ACK timeouts of
// about 67 ms), every WR comes back exactly once (successes, then the
// error, then flushes), the QP is in ERR, Disconnect surfaces the silent
// peer as an error matching ETIMEDOUT, and every object closes cleanly.
// Nothing waits without a deadline.
//
// It must be the last test the two hosts run, alone (make rxe-pair-test
// runs it so): the server's host does not survive it, and its peer's
// later tests would have no one to meet.
func TestFaultPeerDies(t *testing.T) {
	p := ConnectPeer(t)
	cfg := hand.ConnConfig{Caps: hand.QPCaps{MaxSendWR: dieWRs, MaxRecvWR: 1}, SignalAll: true, AckTimeout: dieAck, RetryCount: dieRetries}
	c, cq := faultConn(t, p, 7616, cfg)
	if p.IsServer() {
		region := connMR(t, c, dieRegion)
		p.Send("region", RegionOf(region))
		// The client has this host killed now, and abandons the control
		// channel as it does: surviving is the failure.
		<-time.After(time.Minute)
		t.Fatalf("still alive a minute after the client posted: the harness was to cut this host's power (RXEVM_KILL_PEER)")
	}
	killMarker := os.Getenv("RXEVM_KILL_PEER")
	if killMarker == "" {
		t.Fatalf("RXEVM_KILL_PEER is not set: run under internal/cmd/rxevm -hosts 2, which kills the peer on that line")
	}
	src := connMR(t, c, dieChunk)
	Fill(src.Bytes(), seedOf(Client, testFaultPeerDies, 0))
	var dst Region
	p.Recv("region", &dst)
	sc := testkit.SendChain(t, dieWRs, 1)
	v := sc.Reserve(dieWRs)
	for i := range dieWRs {
		off := uint64(i*dieChunk) % uint64(dieRegion)
		v.SetWrite(i, uint64(i), verbs.SendSignaled, src.SGE(0, dieChunk), dst.Addr+off, dst.RKey)
	}
	if err := sc.PostSendRaw(c.QP().Raw()); err != nil {
		t.Fatalf("PostSend of %d RDMA writes: %v", dieWRs, err)
	}
	posted := time.Now()
	// The line that has the harness kill the server's qemu, as a power cut
	// would. The control channel dies with it.
	fmt.Println(killMarker)
	killed := time.Now()
	p.Abandon()

	// Bounded: the retry budget, with room for a slow emulated machine.
	budget := time.Duration(dieRetries+1) * ackDuration(dieAck)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wcs []hand.WC
	// When the last success and the first error were seen. The kill comes
	// some time after its line, when the harness has read it: an ACK may
	// come after the line, none after the kill, and the last success seen
	// is its last ACK's, or later (the retry timer restarts with each).
	// With no success at all, the timer started with the first write.
	lastOK, firstErrAt := posted, time.Time{}
	for len(wcs) < dieWRs {
		got := cq.some(t, ctx, "RDMA writes to a dead peer")
		seen := time.Now()
		for i := range got {
			switch {
			case got[i].OK():
				lastOK = seen
			case firstErrAt.IsZero():
				firstErrAt = seen
			}
		}
		wcs = append(wcs, got...)
	}
	firstErr := firstErrAt.Sub(lastOK)
	all := time.Since(killed)
	ok := checkEachOnce(t, wcs, dieWRs)
	if ok == dieWRs {
		t.Fatalf("all %d WRs succeeded: the peer was not killed while they were outstanding", dieWRs)
	}
	t.Logf("injected: the %s's VM killed with %d of %d WRs outstanding", p.PeerRole(), dieWRs-ok, dieWRs)
	t.Logf("measured: IBV_WC_RETRY_EXC_ERR %v after the last success seen, %v after the kill line (QP budget %v: %d tries x %v); %d WRs returned exactly once: %d succeeded before the kill, 1 retry-exceeded, %d flushed; all back in %v",
		firstErr.Round(time.Millisecond), firstErrAt.Sub(killed).Round(time.Millisecond), budget.Round(time.Millisecond), dieRetries+1,
		ackDuration(dieAck).Round(100*time.Microsecond), len(wcs), ok, dieWRs-ok-1, all.Round(time.Millisecond))
	// The timer restarts with each ACK, so the error comes at most one
	// budget after the last ACK; measured from the last success seen, not
	// from the kill line, which counted the harness's delay in killing
	// too. TCG's timers lag, hence the slack.
	if limit := 2*budget + time.Second; firstErr > limit {
		t.Errorf("the retry error came %v after the last success seen, more than %v (twice the QP's budget of %v, plus 1 s)", firstErr, limit, budget)
	}
	testkit.CheckState(t, c.QP(), verbs.QPSErr)

	dctx, dcancel := context.WithTimeout(context.Background(), dieDisconnectBudget)
	defer dcancel()
	start := time.Now()
	err := c.Disconnect(dctx)
	var ce *hand.CMEventError
	if !errors.As(err, &ce) || !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("Disconnect from the dead peer: %v; want a *hand.CMEventError matching ETIMEDOUT", err)
	}
	t.Logf("measured: Disconnect returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	// The cleanups close the MRs, the chain, the poller and the connection
	// (closeLater fails the test on any error).
}
