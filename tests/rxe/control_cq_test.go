package rxe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// waitWays are the two ways to wait for a completion event: parked on the
// netpoller (Wait) and blocked on the thread in the channel's read
// (WaitThread).
var waitWays = []struct {
	name string
	cq   func(*hand.CQ, context.Context) error
	ch   func(*hand.CompChannel, context.Context) (*hand.CQ, error)
}{
	{"netpoller", (*hand.CQ).Wait, (*hand.CompChannel).Wait},
	{"thread", (*hand.CQ).WaitThread, (*hand.CompChannel).WaitThread},
}

// forEachWaitWay runs test once for each of waitWays.
func forEachWaitWay(t *testing.T, test func(t *testing.T, cqWait func(*hand.CQ, context.Context) error, chWait func(*hand.CompChannel, context.Context) (*hand.CQ, error))) {
	for _, w := range waitWays {
		t.Run(w.name, func(t *testing.T) { test(t, w.cq, w.ch) })
	}
}

// A goroutine blocked in Wait (or WaitThread) wakes when a completion
// arrives.
func TestControlWaitWakesOnCompletion(t *testing.T) {
	forEachWaitWay(t, testWaitWakesOnCompletion)
}

func testWaitWakesOnCompletion(t *testing.T, cqWait func(*hand.CQ, context.Context) error, chWait func(*hand.CompChannel, context.Context) (*hand.CQ, error)) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	require.NoError(t, r.cq.RequestNotify(false))

	woke := make(chan error, 1)
	go func() { woke <- cqWait(r.cq, ctlContext(t, 20*time.Second)) }()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned before any completion: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	ctlPostRecv(t, b, r.mr, 1, 1, 4096, 64)
	ctlPostSend(t, a, r.mr, 2, 0, 64)
	require.NoError(t, <-woke)
	ctlReap(t, r.cq, 2)

	// The same through the channel, which names the CQ.
	require.NoError(t, r.cq.RequestNotify(false))
	ctlPostRecv(t, b, r.mr, 3, 1, 4096, 64)
	ctlPostSend(t, a, r.mr, 4, 0, 64)
	cq, err := chWait(r.ch, ctlContext(t, 20*time.Second))
	require.NoError(t, err)
	require.Same(t, r.cq, cq)
	ctlReap(t, r.cq, 2)
}

// sharedChannelPair makes a second CQ on the rig's channel and two
// connected RC QPs: a sends on r.cq and receives on cq2, b does both on
// r.cq. Either may RDMA-write the other.
func sharedChannelPair(t *testing.T, r *ctlRig) (cq2 *hand.CQ, a, b *hand.QP) {
	t.Helper()
	cq2, err := r.ctx.NewCQ(16, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	ctlCloseLater(t, cq2)
	a, err = r.pd.NewQP(hand.QPConfig{Type: hand.RC, SendCQ: r.cq, RecvCQ: cq2, Caps: hand.QPCaps{MaxSendWR: 4, MaxRecvWR: 4}})
	require.NoError(t, err)
	ctlCloseLater(t, a)
	b = r.qp(t, hand.RC)
	pa, pb := hand.RandomPSN(), hand.RandomPSN()
	access := hand.AccessLocalWrite | hand.AccessRemoteWrite
	require.NoError(t, a.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pa, Remote: r.endpoint(b, pb)}))
	require.NoError(t, b.Connect(hand.ConnectAttr{SGIDIndex: r.gidIndex, Access: access, PSN: pb, Remote: r.endpoint(a, pa)}))
	return cq2, a, b
}

// Two CQs on one channel: each CQ.Wait gets its own event, whichever
// arrives first.
func TestControlSharedChannel(t *testing.T) {
	r := newCtlRig(t)
	cq2, a, b := sharedChannelPair(t, r)

	// b sends to a: a's receive completes on cq2, b's send on r.cq.
	require.NoError(t, r.cq.RequestNotify(false))
	require.NoError(t, cq2.RequestNotify(false))
	ctlPostRecv(t, a, r.mr, 1, 1, 4096, 64)
	ctlPostSend(t, b, r.mr, 2, 0, 64)
	ctx := ctlContext(t, 20*time.Second)
	require.NoError(t, cq2.Wait(ctx))
	require.NoError(t, r.cq.Wait(ctx))
	ctlReap(t, cq2, 1)
	ctlReap(t, r.cq, 1)
}

// Two goroutines wait at once on two CQs of one channel, and the second's
// event comes first, while the first holds the channel: the first reads it
// and keeps it as pending, and the second, queued for the turn, must
// return with it at once, while the first goes on waiting for its own.
// Injected: an unsignaled send (only the receive it completes, on cq2,
// raises an event), then, once the second has returned, a signaled RDMA
// write (an event on r.cq only). Measured: both waits return, the second
// first. Before the second looked at the pending events once its turn
// came (2026-11-25), it parked until its context ended; before a filed
// event woke it in the queue (2026-11-26), it returned only after the
// first's own event, which would never come had it depended on the
// second. Run for each pair of waitWays (first, second), and with the
// second a Poller.WaitThread, which returns the completion itself.
func TestControlSharedChannelConcurrentWaits(t *testing.T) {
	for _, first := range waitWays {
		for _, second := range waitWays {
			t.Run(first.name+"/"+second.name, func(t *testing.T) {
				testSharedChannelConcurrentWaits(t, first.cq, first.name == "thread", second.cq, nil)
			})
		}
		t.Run(first.name+"/Poller.WaitThread", func(t *testing.T) {
			var p *hand.Poller
			testSharedChannelConcurrentWaits(t, first.cq, first.name == "thread", func(cq *hand.CQ, ctx context.Context) error {
				var err error
				if p, err = hand.NewPoller(cq, 4); err != nil {
					return err
				}
				wcs, err := p.WaitThread(ctx)
				if err == nil && (len(wcs) != 1 || wcs[0].WRID() != 1) {
					err = fmt.Errorf("Poller.WaitThread returned %d completions, want the receive (wr_id 1)", len(wcs))
				}
				return err
			}, func() { p.Close() })
		})
	}
}

// testSharedChannelConcurrentWaits runs the test; firstThread says that
// firstWait blocks its thread (WaitThread) rather than parking; reaped,
// when not nil, says that secondWait reaped cq2's completion, and frees
// what it used.
func testSharedChannelConcurrentWaits(t *testing.T, firstWait func(*hand.CQ, context.Context) error, firstThread bool, secondWait func(*hand.CQ, context.Context) error, reaped func()) {
	r := newCtlRig(t)
	cq2, a, b := sharedChannelPair(t, r)
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer sc.Close()

	require.NoError(t, r.cq.RequestNotify(false))
	require.NoError(t, cq2.RequestNotify(false))
	ctx := ctlContext(t, 20*time.Second)
	first, second := make(chan error, 1), make(chan error, 1)
	go sharedFirstWaiter(firstWait, r.cq, ctx, first)
	// Holding the channel: blocked in its read on the thread, or parked
	// on the netpoller, which a waiter does only with the channel's turn.
	if firstThread {
		waitBlockedInRead(t, r.ch.Raw().FD)
	} else {
		waitGoroutine(t, "sharedFirstWaiter", "IO wait")
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	go sharedSecondWaiter(secondWait, cq2, short, second)
	// Queued for the turn: the one select on its way.
	waitGoroutine(t, "sharedSecondWaiter", "select")

	ctlPostRecv(t, a, r.mr, 1, 1, 4096, 64)
	sc.Reserve(1).SetSend(0, 2, 0, r.mr.SGE(0, 64))
	require.NoError(t, sc.PostSend(b))
	require.NoError(t, <-second, "the second waiter missed the event the first one read for it")
	select {
	case err := <-first:
		t.Fatalf("the first waiter returned %v with no event of its own", err)
	default:
	}
	sc.Reserve(1).SetWrite(0, 3, hand.Signaled, r.mr.SGE(0, 64), r.mr.Addr()+8192, r.mr.RKey())
	require.NoError(t, sc.PostSend(b))
	require.NoError(t, <-first)
	if reaped != nil {
		reaped()
	} else {
		require.EqualValues(t, 1, ctlReap(t, cq2, 1)[0].WRID)
	}
	require.EqualValues(t, 3, ctlReap(t, r.cq, 1)[0].WRID)
}

// sharedFirstWaiter and sharedSecondWaiter send wait's error on out; each
// a function of its own, for waitGoroutine to tell them apart.
func sharedFirstWaiter(wait func(*hand.CQ, context.Context) error, cq *hand.CQ, ctx context.Context, out chan<- error) {
	out <- wait(cq, ctx)
}

func sharedSecondWaiter(wait func(*hand.CQ, context.Context) error, cq *hand.CQ, ctx context.Context, out chan<- error) {
	out <- wait(cq, ctx)
}

// waitGoroutine waits, up to vTimeout, until a goroutine that is running
// fn, a function of this package, is blocked in status ("IO wait": parked
// on the netpoller; "select") as the runtime's dump of every goroutine
// (runtime.Stack) shows it: the runtime's own account of where a goroutine
// waits, which needs nothing of the package under test but its calls.
func waitGoroutine(t *testing.T, fn, status string) {
	t.Helper()
	call := "/tests/rxe." + fn + "("
	buf := make([]byte, 1<<16)
	deadline := time.Now().Add(vTimeout)
	for {
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		// "goroutine 42 [IO wait, 2 minutes]:\nframes...", blank-line separated.
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			header, frames, _ := strings.Cut(g, "\n")
			_, st, _ := strings.Cut(header, "[")
			st, _, _ = strings.Cut(st, "]")
			st, _, _ = strings.Cut(st, ",")
			if st == status && strings.Contains(frames, call) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine in %s blocked in %q after %v; goroutines:\n%s", fn, status, vTimeout, buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}

// A cancelled or expired context ends Wait (or WaitThread) promptly with
// the context's error.
func TestControlWaitCancelled(t *testing.T) {
	forEachWaitWay(t, testWaitCancelled)
}

func testWaitCancelled(t *testing.T, cqWait func(*hand.CQ, context.Context) error, chWait func(*hand.CompChannel, context.Context) (*hand.CQ, error)) {
	r := newCtlRig(t)
	require.NoError(t, r.cq.RequestNotify(false))

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cqWait(r.cq, ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return 5 s after its context was cancelled")
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer dcancel()
	_, err := chWait(r.ch, dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// An already-cancelled context returns at once, and the channel still
	// works afterwards.
	_, err = chWait(r.ch, ctx)
	require.ErrorIs(t, err, context.Canceled)
	a, b := r.pair(t, hand.RC)
	ctlPostRecv(t, b, r.mr, 1, 1, 4096, 64)
	ctlPostSend(t, a, r.mr, 2, 0, 64)
	require.NoError(t, cqWait(r.cq, ctlContext(t, 20*time.Second)))
}

// Close wakes a parked Wait (or WaitThread) with ErrClosed, for a CQ and
// for a channel.
func TestControlWaitClosed(t *testing.T) {
	forEachWaitWay(t, testWaitClosed)
}

func testWaitClosed(t *testing.T, cqWait func(*hand.CQ, context.Context) error, chWait func(*hand.CompChannel, context.Context) (*hand.CQ, error)) {
	ctx, _ := ctlDevice(t)
	ch, err := ctx.NewCompChannel()
	require.NoError(t, err)
	cq, err := ctx.NewCQ(16, hand.CQOptions{Channel: ch})
	require.NoError(t, err)
	require.NoError(t, cq.RequestNotify(false))

	var busy *hand.BusyError
	require.ErrorAs(t, ch.Close(), &busy, "channel with a CQ")

	errc := make(chan error, 1)
	go func() { errc <- cqWait(cq, context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, cq.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, hand.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("CQ.Close did not wake CQ.Wait")
	}
	require.ErrorIs(t, cq.RequestNotify(false), hand.ErrClosed)
	require.ErrorIs(t, cqWait(cq, context.Background()), hand.ErrClosed)
	_, err = cq.Poll(make([]verbs.WC, 1))
	require.ErrorIs(t, err, hand.ErrClosed)

	go func() { _, err := chWait(ch, context.Background()); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, ch.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, hand.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("CompChannel.Close did not wake Wait")
	}
	_, err = chWait(ch, context.Background())
	require.ErrorIs(t, err, hand.ErrClosed)
	require.NoError(t, ch.Close())
}

// Waiters park on the netpoller: fifty of them do not take fifty threads.
func TestControlWaitHoldsNoThread(t *testing.T) {
	ctx, _ := ctlDevice(t)
	before := ctlThreads(t)
	const n = 50
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(context.Background())
	for range n {
		ch, err := ctx.NewCompChannel()
		require.NoError(t, err)
		cq, err := ctx.NewCQ(4, hand.CQOptions{Channel: ch})
		require.NoError(t, err)
		require.NoError(t, cq.RequestNotify(false))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cq.Wait(wctx)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Wait: %v", err)
			}
			if err := cq.Close(); err != nil {
				t.Errorf("closing the CQ: %v", err)
			}
			if err := ch.Close(); err != nil {
				t.Errorf("closing the channel: %v", err)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	during := ctlThreads(t)
	cancel()
	wg.Wait()
	t.Logf("OS threads: %d before, %d with %d waiters parked", before, during, n)
	require.Less(t, during-before, 10, "waiters hold OS threads")
}

// WaitThread waits where it says: its thread is blocked in the channel's
// read, as perftest's -e is, until the completion comes, which it then
// returns; for CQ.WaitThread and for Poller.WaitThread, whose loop is in
// C. No epoll_wait: what ends that read early is the channel's kick, an
// event of goverbs' own (TestControlWaitThreadKicked).
func TestControlWaitThreadBlocksInRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(r *ctlRig) error
	}{
		{"CQ", func(r *ctlRig) error {
			if err := r.cq.RequestNotify(false); err != nil {
				return err
			}
			return r.cq.WaitThread(ctlContext(t, 20*time.Second))
		}},
		{"Poller", func(r *ctlRig) error {
			p, err := hand.NewPoller(r.cq, 2)
			if err != nil {
				return err
			}
			defer p.Close()
			// Background: with a ctx that can end it first polls from Go.
			wcs, err := p.WaitThread(context.Background())
			if err == nil && len(wcs) == 0 {
				err = errors.New("Poller.WaitThread returned no completion")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCtlRig(t)
			a, b := r.pair(t, hand.RC)
			woke := make(chan error, 1)
			go func() { woke <- tc.wait(r) }()
			tid := waitBlockedInRead(t, r.ch.Raw().FD)
			select {
			case err := <-woke:
				t.Fatalf("WaitThread returned before any completion: %v", err)
			default:
			}
			t.Logf("WaitThread's thread %s is blocked in the channel's read", tid)
			ctlPostRecv(t, b, r.mr, 1, 1, 4096, 64)
			ctlPostSend(t, a, r.mr, 2, 0, 64)
			select {
			case err := <-woke:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("WaitThread did not wake on the completion")
			}
		})
	}
}

// The kick ends a WaitThread blocked in the channel's read, for each of
// its callers, and a channel moves between thread waits and netpoller
// waits: each round, a CQ.WaitThread and a Poller.WaitThread ended by
// their ctx, a Wait ended by its ctx while parked on the netpoller (so the
// fd is non-blocking again: no thread is left in its read), then a
// WaitThread and a Wait that completions wake; a CQ's Close wakes a
// WaitThread on another CQ of the channel, which waits on; a kick with no
// waiter is read and rearmed by the netpoller's Wait after it, so that a
// WaitThread after that still ends with its ctx; and, after all that, a
// CQ's Close wakes a WaitThread on it with ErrClosed.
func TestControlWaitThreadKicked(t *testing.T) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	fd := r.ch.Raw().FD
	p, err := hand.NewPoller(r.cq, 4)
	require.NoError(t, err)
	defer p.Close()
	ended := func(what string, errc <-chan error, want error) {
		t.Helper()
		select {
		case err := <-errc:
			require.ErrorIs(t, err, want, what)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not return 5 s after it should have", what)
		}
	}
	next := uint64(0)
	complete := func() {
		next++
		ctlPostRecv(t, b, r.mr, next, 1, 4096, 64)
		ctlPostSend(t, a, r.mr, 1000+next, 0, 64)
	}
	// reaped checks that the receive and the send of the last complete
	// are on r.cq, less the n a Poller took.
	reaped := func(n int) {
		t.Helper()
		var ids []uint64
		for _, wc := range ctlReap(t, r.cq, 2-n) {
			ids = append(ids, wc.WRID)
		}
		require.Subset(t, []uint64{next, 1000 + next}, ids)
	}
	for round := range 3 {
		require.NoError(t, r.cq.RequestNotify(false))
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- r.cq.WaitThread(ctx) }()
		waitBlockedInRead(t, fd)
		cancel()
		ended(fmt.Sprintf("round %d: CQ.WaitThread, its ctx cancelled", round), errc, context.Canceled)

		ctx, cancel = context.WithCancel(context.Background())
		go func() { _, err := p.WaitThread(ctx); errc <- err }()
		// With a ctx that can end it polls from Go first, then blocks.
		waitBlockedInRead(t, fd)
		cancel()
		ended(fmt.Sprintf("round %d: Poller.WaitThread, its ctx cancelled", round), errc, context.Canceled)

		ctx, cancel = context.WithCancel(context.Background())
		go kickedNetpollWaiter(r.cq, ctx, errc)
		waitGoroutine(t, "kickedNetpollWaiter", "IO wait")
		cancel()
		ended(fmt.Sprintf("round %d: Wait, its ctx cancelled", round), errc, context.Canceled)

		go func() { errc <- r.cq.WaitThread(ctlContext(t, 20*time.Second)) }()
		waitBlockedInRead(t, fd)
		complete()
		ended(fmt.Sprintf("round %d: CQ.WaitThread, a completion", round), errc, nil)
		reaped(0)

		require.NoError(t, r.cq.RequestNotify(false))
		go kickedNetpollWaiter(r.cq, ctlContext(t, 20*time.Second), errc)
		waitGoroutine(t, "kickedNetpollWaiter", "IO wait")
		complete()
		ended(fmt.Sprintf("round %d: Wait, a completion", round), errc, nil)
		reaped(0)
	}

	other, err := r.ctx.NewCQ(4, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	require.NoError(t, r.cq.RequestNotify(false))
	errc, polled := make(chan error, 1), make(chan int, 1)
	go func() { wcs, err := p.WaitThread(context.Background()); polled <- len(wcs); errc <- err }()
	waitBlockedInRead(t, fd)
	require.NoError(t, other.Close())
	// Woken by the kick, it finds its own CQ open and blocks again.
	waitBlockedInRead(t, fd)
	select {
	case err := <-errc:
		t.Fatalf("Poller.WaitThread returned when another CQ of its channel closed: %v", err)
	default:
	}
	complete()
	ended("Poller.WaitThread after another CQ's Close, a completion", errc, nil)
	reaped(<-polled)

	// Poller.WaitThread left the CQ armed, so the second completion may
	// have raised an event after its poll (it did on 33.2): a thread wait
	// takes it, and leaves the fd off the netpoller.
	for i := 0; ; i++ {
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := r.cq.WaitThread(short)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		require.NoError(t, err)
		require.Less(t, i, 2, "events of r.cq left after its completions were reaped")
	}

	// A CQ's Close with no waiter kicks the channel all the same: its
	// event is read by the netpoller's Wait that comes next, which must
	// rearm the kick, or the WaitThread after it could not be ended.
	gone, err := r.ctx.NewCQ(4, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	time.Sleep(50 * time.Millisecond) // the kick's event is in the channel
	require.NoError(t, r.cq.RequestNotify(false))
	go kickedNetpollWaiter(r.cq, ctlContext(t, 20*time.Second), errc)
	waitGoroutine(t, "kickedNetpollWaiter", "IO wait")
	complete()
	ended("Wait after a kick nobody waited for, a completion", errc, nil)
	reaped(0)
	require.NoError(t, r.cq.RequestNotify(false))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- r.cq.WaitThread(ctx) }()
	waitBlockedInRead(t, fd)
	cancel()
	ended("CQ.WaitThread after the netpoller's Wait read the kick, its ctx cancelled", errc, context.Canceled)

	lone, err := r.ctx.NewCQ(4, hand.CQOptions{Channel: r.ch})
	require.NoError(t, err)
	require.NoError(t, lone.RequestNotify(false))
	go func() { errc <- lone.WaitThread(context.Background()) }()
	waitBlockedInRead(t, fd)
	require.NoError(t, lone.Close())
	ended("CQ.WaitThread, its CQ closed", errc, hand.ErrClosed)
}

// PrepareWaitThread makes the channel's kick before any wait (its time is
// logged: what a first WaitThread would otherwise spend), so that the
// first WaitThread blocks in the read at once; a second call does nothing;
// after Close it fails with ErrClosed.
func TestControlPrepareWaitThread(t *testing.T) {
	ctx, _ := ctlDevice(t)
	ch, err := ctx.NewCompChannel()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, ch.PrepareWaitThread())
	took := time.Since(start)
	start = time.Now()
	require.NoError(t, ch.PrepareWaitThread())
	t.Logf("PrepareWaitThread: %v, then %v", took, time.Since(start))
	cq, err := ctx.NewCQ(4, hand.CQOptions{Channel: ch})
	require.NoError(t, err)
	require.NoError(t, cq.RequestNotify(false))
	errc := make(chan error, 1)
	go func() { errc <- cq.WaitThread(context.Background()) }()
	waitBlockedInRead(t, ch.Raw().FD)
	require.NoError(t, cq.Close())
	require.ErrorIs(t, <-errc, hand.ErrClosed)
	require.NoError(t, ch.Close())
	require.ErrorIs(t, ch.PrepareWaitThread(), hand.ErrClosed)
}

func kickedNetpollWaiter(cq *hand.CQ, ctx context.Context, out chan<- error) {
	out <- cq.Wait(ctx)
}

func ctlThreads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

func TestControlExtendedCQ(t *testing.T) {
	ctx, _ := ctlDevice(t)
	cq, err := ctx.NewCQ(64, hand.CQOptions{Extended: true, WCFlags: verbs.WCExWithByteLen | verbs.WCExWithQPNum})
	if requireNotSupportedBefore(t, err, "ibv_create_cq_ex") {
		return
	}
	require.NotNil(t, cq.RawEx())
	require.GreaterOrEqual(t, cq.Size(), 64)
	p, err := hand.NewExPollerRaw(cq.RawEx(), 8, verbs.WCExWithByteLen|verbs.WCExWithQPNum)
	require.NoError(t, err)
	wcs, err := p.Poll()
	require.NoError(t, err)
	require.Empty(t, wcs)
	p.Close()
	require.NoError(t, cq.Resize(256))
	require.GreaterOrEqual(t, cq.Size(), 256)
	require.NoError(t, cq.Close())
}

// An ExPoller reads what its extended CQ's wc_flags select, from rxe's
// ibv_cq_ex readers. A UD send with immediate data 0x01020304 of 100 bytes:
// with byte_len, imm, qp_num and src_qp selected, its receive reports the
// 100 bytes after the GRH room, the immediate data, the receiving QP and the
// sender; with byte_len alone, Imm answers none (IBV_WC_WITH_IMM cleared),
// the QP numbers read 0 and the GRH flag, always read, stays. A completion
// timestamp, which rxe lacks, is a clear "not supported" from
// ibv_create_cq_ex on every release.
func TestControlExPollerFields(t *testing.T) {
	const imm, size, qkey = 0x01020304, 100, 0x22222222
	all := verbs.WCExWithByteLen | verbs.WCExWithImm | verbs.WCExWithQPNum | verbs.WCExWithSrcQP
	for _, tc := range []struct {
		name  string
		flags verbs.CreateCQWCFlags
	}{{"all", all}, {"byte_len", verbs.WCExWithByteLen}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCtlRig(t)
			cq, err := r.ctx.NewCQ(64, hand.CQOptions{Extended: true, WCFlags: tc.flags})
			if requireNotSupportedBefore(t, err, "ibv_create_cq_ex") {
				return
			}
			ctlCloseLater(t, cq)
			a, b, ah := r.udPairOn(t, qkey, cq)
			p, err := hand.NewExPoller(cq, 8)
			require.NoError(t, err)
			defer p.Close()

			ctlPostRecv(t, b, r.mr, 1, 1, 4096, size+hand.GRHSize)
			c, err := hand.NewSendChain(1, 1, 0)
			require.NoError(t, err)
			defer c.Close()
			c.Reserve(1).SetUDImm(0, 2, hand.Signaled, imm, r.mr.SGE(0, size), ah, b.Num(), qkey)
			require.NoError(t, c.PostSend(a))

			byID := map[uint64]hand.WC{}
			deadline := time.Now().Add(10 * time.Second)
			for len(byID) < 2 {
				wcs, err := p.Poll()
				require.NoError(t, err)
				for _, wc := range wcs {
					require.True(t, wc.OK(), "wr_id %d: %s", wc.WRID(), wc.StatusString())
					byID[wc.WRID()] = wc
				}
				require.True(t, time.Now().Before(deadline), "%d of 2 completions after 10 s", len(byID))
			}
			send, recv := byID[2], byID[1]
			require.Equal(t, verbs.WCSend, send.Opcode(), "the opcode is always read")
			require.Equal(t, verbs.WCRecv, recv.Opcode())
			require.True(t, recv.HasGRH(), "wc_flags are always read")
			require.Equal(t, uint32(size+hand.GRHSize), recv.ByteLen())
			got, ok := recv.Imm()
			if tc.flags&verbs.WCExWithImm != 0 {
				require.True(t, ok, "imm selected")
				require.Equal(t, uint32(imm), got)
				require.Equal(t, b.Num(), recv.QPNum())
				require.Equal(t, a.Num(), recv.SrcQP())
				require.Equal(t, a.Num(), send.QPNum())
				return
			}
			require.False(t, ok, "imm not selected: no value to report")
			require.False(t, recv.HasImm(), "nor the flag that announces one")
			require.Zero(t, recv.QPNum(), "qp_num not selected")
			require.Zero(t, recv.SrcQP(), "src_qp not selected")
		})
	}
	t.Run("timestamp", func(t *testing.T) {
		ctx, _ := ctlDevice(t)
		_, err := ctx.NewCQ(64, hand.CQOptions{Extended: true, WCFlags: verbs.WCExWithCompletionTimestamp})
		require.ErrorIs(t, err, hand.ErrNotSupported, "rxe has no completion timestamps")
		require.ErrorContains(t, err, "ibv_create_cq_ex")
	})
}

// Poller.Wait is rdma_get_send_comp / rdma_get_recv_comp without a thread:
// a completion already queued comes back at once and allocates nothing,
// even with a context that can end; on an empty CQ it arms, re-polls and
// parks until the event. Injected: 21 signaled RDMA writes, one at a time,
// each waited for with CQ.Wait, whose event says its completion is queued,
// before the Poller's wait (the AllocsPerRun case); then a receive the
// peer's send completes while Wait is parked, then a Wait that times out.
// Measured: 0 allocations per returned completion; the parked Wait returns
// the receive; the third returns context.DeadlineExceeded.
func TestControlPollerWait(t *testing.T) {
	forEachPollerWait(t, testPollerWait)
}

// pollerWaits are Poller's two ways to wait: Wait parks on the netpoller,
// WaitThread blocks in the channel's read with its loop in C.
var pollerWaits = []struct {
	name string
	wait func(*hand.Poller, context.Context) ([]hand.WC, error)
}{{"netpoller", (*hand.Poller).Wait}, {"thread", (*hand.Poller).WaitThread}}

// forEachPollerWait runs test once for each of pollerWaits.
func forEachPollerWait(t *testing.T, test func(t *testing.T, wait func(*hand.Poller, context.Context) ([]hand.WC, error))) {
	for _, w := range pollerWaits {
		t.Run(w.name, func(t *testing.T) { test(t, w.wait) })
	}
}

func testPollerWait(t *testing.T, wait func(*hand.Poller, context.Context) ([]hand.WC, error)) {
	r := newCtlRig(t)
	a, b := r.pair(t, hand.RC)
	p, err := hand.NewPoller(r.cq, 1)
	require.NoError(t, err)
	defer p.Close()
	ctx := ctlContext(t, 20*time.Second)

	// Queued: CQ.Wait returns on the write's completion event, so the
	// completion is in the CQ before the Poller's wait asks for it.
	// CQ.Wait with context.Background, the post and the arm allocate
	// nothing (TestControlCQWaitNoAllocs).
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	seen := 0
	allocs := testing.AllocsPerRun(20, func() {
		if err := r.cq.RequestNotify(false); err != nil {
			t.Fatalf("arm: %v", err)
		}
		sc.Reserve(1).SetWrite(0, 7, hand.Signaled, r.mr.SGE(0, 64), r.mr.Addr()+4096, r.mr.RKey())
		if err := sc.PostSend(a); err != nil {
			t.Fatalf("post: %v", err)
		}
		if err := r.cq.Wait(context.Background()); err != nil {
			t.Fatalf("the write's event: %v", err)
		}
		wcs, err := wait(p, ctx)
		if err != nil || len(wcs) != 1 || !wcs[0].OK() || wcs[0].WRID() != 7 {
			t.Fatalf("Wait on a CQ with a queued completion: %v, %d", err, len(wcs))
		}
		seen++
	})
	require.Zero(t, allocs, "Poller.Wait allocates on a queued completion")
	require.Equal(t, 21, seen) // AllocsPerRun runs once more to warm up

	// Nothing queued: Wait parks until b's send lands in a's receive.
	ctlPostRecv(t, a, r.mr, 500, 1, 8192, 64)
	done := make(chan []hand.WC, 1)
	go func() {
		wcs, err := wait(p, ctx)
		if err != nil {
			t.Errorf("parked Wait: %v", err)
		}
		done <- wcs
	}()
	time.Sleep(50 * time.Millisecond) // let it park
	ctlPostSend(t, b, r.mr, 600, 0, 32)
	var got []hand.WC
	for len(got) < 2 {
		select {
		case w := <-done:
			got = append(got, w...)
			if len(got) < 2 {
				go func() { w, _ := wait(p, ctx); done <- w }()
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a parked Wait did not wake on the completion")
		}
	}
	ids := map[uint64]bool{got[0].WRID(): true, got[1].WRID(): true}
	require.True(t, ids[500] && ids[600], "completions %d and %d, want the receive 500 and the send 600", got[0].WRID(), got[1].WRID())

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = wait(p, short)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	raw, err := hand.NewPollerRaw(r.cq.Raw(), 1)
	require.NoError(t, err)
	defer raw.Close()
	_, err = wait(raw, ctx)
	var attr *hand.AttrError
	require.ErrorAs(t, err, &attr, "a raw poller has no CQ to arm")
}

// A Wait that parks allocates nothing when its context cannot end: the
// event-driven data path (goverbs-perf -e) waits once a completion batch.
// Injected: 20 waits, each made before the RDMA write that completes it is
// posted, by a goroutine started before the count, 2 ms after the waiter
// asks (Wait arms and parks within microseconds). Measured: 0 allocations a
// wait. Before the channel kept the waiter's state and the event in C
// memory (2026-11-25), each wait cost 11 (checked: this test fails there).
// The same for Poller.WaitThread.
func TestControlPollerWaitParkedNoAllocs(t *testing.T) {
	forEachPollerWait(t, testPollerWaitParkedNoAllocs)
}

func testPollerWaitParkedNoAllocs(t *testing.T, wait func(*hand.Poller, context.Context) ([]hand.WC, error)) {
	r := newCtlRig(t)
	a, _ := r.pair(t, hand.RC)
	p, kick, posted := writeOnKick(t, r, a, 7)
	defer close(kick)
	allocs := allocsPerKickedWait(t, kick, posted, func() error {
		wcs, err := wait(p, context.Background())
		if err == nil && (len(wcs) != 1 || !wcs[0].OK() || wcs[0].WRID() != 7) {
			return fmt.Errorf("%d completions, want the write 7", len(wcs))
		}
		return err
	})
	require.Zero(t, allocs, "Poller.Wait allocates when it parks")
}

// allocsPerKickedWait returns the allocations of a wait, over 20 waits
// and one more to warm up (testing.AllocsPerRun): each sends on kick, then
// waits, and then takes the post's error from posted. It fails t when a
// wait or a post fails.
func allocsPerKickedWait(t *testing.T, kick chan<- struct{}, posted <-chan error, wait func() error) float64 {
	t.Helper()
	waits := 0
	allocs := testing.AllocsPerRun(20, func() {
		kick <- struct{}{}
		if err := wait(); err != nil {
			t.Fatalf("wait %d: %v", waits, err)
		}
		if err := <-posted; err != nil {
			t.Fatalf("post %d: %v", waits, err)
		}
		waits++
	})
	require.Equal(t, 21, waits)
	return allocs
}

// Poller.WaitThread arms the CQ itself, leaves it armed when it returns
// completions (perftest's order: arm after the event, then poll), and
// arms it again once another wait has read its event, or once the CQ was
// armed for solicited completions only. Injected: five signaled RDMA
// writes on a CQ nobody armed, each posted 2 ms after its wait began (a
// WaitThread's only once its thread is blocked in the channel's read);
// the second and fourth are waited for with CQ.Wait (netpoller) and no
// RequestNotify, the fifth after RequestNotify(true). Measured:
// each wait returns its write; a WaitThread that did not arm first, or a
// CQ left unarmed, or a flag still set after CQ.Wait read the event or
// after a solicited-only arm, would each end a wait at its 5-second
// deadline instead.
func TestControlPollerWaitThreadArming(t *testing.T) {
	r := newCtlRig(t)
	a, _ := r.pair(t, hand.RC)
	p, kick, posted := writeOnKick(t, r, a, 11)
	defer close(kick)
	fd := r.ch.Raw().FD
	waitFor := func(what string, wait func(ctx context.Context) error, thread bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		waited := make(chan error, 1)
		go func() { waited <- wait(ctx) }()
		if thread {
			// A write that completed between WaitThread's arm and its
			// poll would come back with its event still queued, and the
			// CQ.Wait after it would return on that event with nothing
			// to poll. CI met that once, on arm64 6.12: the first
			// WaitThread makes the channel's kick (1 ms or more under
			// TCG) after it arms and polls from Go and before its C
			// loop polls.
			waitBlockedInRead(t, fd)
		}
		kick <- struct{}{}
		if err := <-waited; err != nil {
			// Say whether the write had completed, to tell a CQ left
			// unarmed (no event for a completion that is there) from a
			// write that never completed. The one timeout seen (stop
			// 33's first CI run, the fourth wait) was the former: see
			// TestControlPollerWaitThreadQueuedLeavesArmed.
			wcs, perr := p.Poll()
			t.Fatalf("%s: %v; the post: %v; the CQ then held %d completions (poll error %v)", what, err, <-posted, len(wcs), perr)
		}
		require.NoError(t, <-posted)
	}
	waitThread := func(ctx context.Context) error {
		wcs, err := p.WaitThread(ctx)
		if err == nil && (len(wcs) != 1 || wcs[0].WRID() != 11) {
			return fmt.Errorf("%d completions, want the write 11", len(wcs))
		}
		return err
	}

	waitFor("WaitThread on a CQ nobody armed", waitThread, true)
	waitFor("CQ.Wait after WaitThread, without RequestNotify", r.cq.Wait, false)
	wcs, err := p.Poll()
	require.NoError(t, err)
	require.Len(t, wcs, 1)
	waitFor("WaitThread after CQ.Wait read the event", waitThread, true)
	// Disarmed again by CQ.Wait, then armed for solicited completions
	// only, which a send's completion never is: not the arm WaitThread
	// needs, so it arms for any.
	waitFor("CQ.Wait after the second WaitThread", r.cq.Wait, false)
	wcs, err = p.Poll()
	require.NoError(t, err)
	require.Len(t, wcs, 1)
	require.NoError(t, r.cq.RequestNotify(true))
	waitFor("WaitThread after RequestNotify(solicitedOnly)", waitThread, true)
}

// A Poller.WaitThread whose ctx can end polls from Go before it takes the
// channel. When that poll finds a completion already queued, on a CQ a
// CQ.Wait had disarmed, it must still leave the CQ armed, as its C loop
// does, so that a CQ.Wait without RequestNotify sees the next completion's
// event. Injected: a write completed and its event read by CQ.Wait before
// the WaitThread, then a second write. Measured: the WaitThread returns
// the first; CQ.Wait returns on the second's event (before the fix it
// timed out at 5 s, which a CI run once met in
// TestControlPollerWaitThreadArming, whose write had completed before the
// wait began).
func TestControlPollerWaitThreadQueuedLeavesArmed(t *testing.T) {
	r := newCtlRig(t)
	a, _ := r.pair(t, hand.RC)
	p, kick, posted := writeOnKick(t, r, a, 11)
	defer close(kick)
	ctx := ctlContext(t, 20*time.Second)
	require.NoError(t, r.cq.RequestNotify(false))
	kick <- struct{}{}
	require.NoError(t, <-posted)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, r.cq.Wait(wctx), "the first write's event")
	// Disarmed by that event; the write's completion is queued.
	wcs, err := p.WaitThread(ctx)
	require.NoError(t, err)
	require.Len(t, wcs, 1, "the queued completion")
	kick <- struct{}{}
	require.NoError(t, <-posted)
	wctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, r.cq.Wait(wctx), "CQ.Wait without RequestNotify after a WaitThread that returned a queued completion")
	wcs, err = p.Poll()
	require.NoError(t, err)
	require.Len(t, wcs, 1, "the second write")
}

// CQ.Close wakes a Poller.WaitThread with ErrClosed. The wait holds the CQ
// while it blocks in C, so Close must make it let go first (its
// interrupt); closing at any point of the wait's start must neither
// deadlock nor end the wait otherwise. Injected: 20 CQs on one channel,
// each closed 0 to 50 ms after a WaitThread on it started. Measured: every
// Close returns nil and every wait ErrClosed, within 5 s.
func TestControlPollerWaitThreadClosed(t *testing.T) {
	ctx, _ := ctlDevice(t)
	ch, err := ctx.NewCompChannel()
	require.NoError(t, err)
	ctlCloseLater(t, ch)
	delays := []time.Duration{0, 100 * time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond, 50 * time.Millisecond}
	for i := range 20 {
		cq, err := ctx.NewCQ(4, hand.CQOptions{Channel: ch})
		require.NoError(t, err)
		p, err := hand.NewPoller(cq, 1)
		require.NoError(t, err)
		waited, closed := make(chan error, 1), make(chan error, 1)
		go func() { _, err := p.WaitThread(context.Background()); waited <- err }()
		time.Sleep(delays[i%len(delays)])
		go func() { closed <- cq.Close() }()
		for range 2 {
			select {
			case err := <-waited:
				require.ErrorIs(t, err, hand.ErrClosed, "wait %d", i)
				waited = nil
			case err := <-closed:
				require.NoError(t, err, "close %d", i)
				closed = nil
			case <-time.After(5 * time.Second):
				t.Fatalf("close %d, %v after the wait: Close or WaitThread still blocked 5 s later", i, delays[i%len(delays)])
			}
		}
		p.Close()
	}
}

// Poller.WaitThread on one CQ of a shared channel files another CQ's event
// for that CQ's own wait, and waits on for its own. Injected: an
// unsignaled send whose receive completes on cq2 (an event on cq2 only)
// while the poller waits on r.cq, then, 200 ms later, a signaled RDMA
// write (r.cq). Measured: the poller does not return for cq2's event;
// cq2.Wait then returns at once with the filed event (the poller holds the
// channel's turn, so it could not have read it itself); the poller returns
// the write.
func TestControlPollerWaitThreadSharedChannel(t *testing.T) {
	r := newCtlRig(t)
	cq2, a, b := sharedChannelPair(t, r)
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	defer sc.Close()
	p, err := hand.NewPoller(r.cq, 4)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, cq2.RequestNotify(false))
	ctx := ctlContext(t, 20*time.Second)
	got := make(chan []uint64, 1)
	go func() {
		wcs, err := p.WaitThread(ctx)
		if err != nil {
			t.Errorf("WaitThread: %v", err)
		}
		var ids []uint64
		for i := range wcs {
			ids = append(ids, wcs[i].WRID())
		}
		got <- ids
	}()
	waitBlockedInRead(t, r.ch.Raw().FD) // holding the channel

	ctlPostRecv(t, a, r.mr, 1, 1, 4096, 64)
	sc.Reserve(1).SetSend(0, 2, 0, r.mr.SGE(0, 64))
	require.NoError(t, sc.PostSend(b))
	time.Sleep(200 * time.Millisecond) // the poller reads cq2's event
	select {
	case ids := <-got:
		t.Fatalf("WaitThread returned %v on another CQ's event", ids)
	default:
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, cq2.Wait(short), "cq2's event, filed by the poller's wait")
	require.EqualValues(t, 1, ctlReap(t, cq2, 1)[0].WRID)

	sc.Reserve(1).SetWrite(0, 3, hand.Signaled, r.mr.SGE(0, 64), r.mr.Addr()+8192, r.mr.RKey())
	require.NoError(t, sc.PostSend(b))
	select {
	case ids := <-got:
		require.Equal(t, []uint64{3}, ids)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitThread did not wake on its own CQ's completion")
	}
}

// CQ.Wait and CQ.WaitThread allocate nothing when their context cannot
// end, parked or blocked: the loop goverbs-perf -e runs (arm, wait, poll).
// Injected: 20 waits, each on a CQ armed before the signaled RDMA write
// that completes it is posted, 2 ms after the waiter asks. Measured: 0
// allocations a wait, either way.
func TestControlCQWaitNoAllocs(t *testing.T) {
	forEachWaitWay(t, func(t *testing.T, cqWait func(*hand.CQ, context.Context) error, _ func(*hand.CompChannel, context.Context) (*hand.CQ, error)) {
		r := newCtlRig(t)
		a, _ := r.pair(t, hand.RC)
		p, kick, posted := writeOnKick(t, r, a, 9)
		defer close(kick)
		waits := 0
		allocs := testing.AllocsPerRun(20, func() {
			if err := r.cq.RequestNotify(false); err != nil {
				t.Fatalf("arm: %v", err)
			}
			kick <- struct{}{}
			if err := cqWait(r.cq, context.Background()); err != nil {
				t.Fatalf("wait: %v", err)
			}
			if err := <-posted; err != nil {
				t.Fatalf("post: %v", err)
			}
			wcs, err := p.Poll()
			if err != nil || len(wcs) != 1 || !wcs[0].OK() || wcs[0].WRID() != 9 {
				t.Fatalf("poll after the event: %v, %d completions", err, len(wcs))
			}
			waits++
		})
		require.Equal(t, 21, waits) // AllocsPerRun runs once more to warm up
		require.Zero(t, allocs, "the wait allocates")
	})
}

// writeOnKick returns a poller of r.cq with room for one completion a
// write, and a kick channel: each send on kick makes a goroutine post a
// signaled 64-byte RDMA write from a for each of wrids (its wr_id), each
// 2 ms after the one before (the first 2 ms after the kick), and send the
// first post's error, or nil, on posted. Close kick when done.
func writeOnKick(t *testing.T, r *ctlRig, a *hand.QP, wrids ...uint64) (p *hand.Poller, kick chan struct{}, posted chan error) {
	t.Helper()
	p, err := hand.NewPoller(r.cq, len(wrids))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	sc, err := hand.NewSendChain(1, 1, 0)
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	kick, posted = make(chan struct{}), make(chan error)
	go func() {
		for range kick {
			var err error
			for _, wrid := range wrids {
				time.Sleep(2 * time.Millisecond)
				sc.Reserve(1).SetWrite(0, wrid, hand.Signaled, r.mr.SGE(0, 64), r.mr.Addr()+4096, r.mr.RKey())
				if e := sc.PostSend(a); e != nil && err == nil {
					err = e
				}
			}
			posted <- err
		}
	}()
	return p, kick, posted
}

// Poller.WaitThreadAtLeast returns once it holds min completions, in the
// order they came, from its loop in C or from Go's polls when ctx can end;
// it returns fewer when one failed, or when the wait ends with some held,
// and then reports the end at the next wait. Injected: six signaled RDMA
// writes, 2 ms apart, posted once the wait has begun (for a thread wait
// with context.Background, once it is blocked in the channel's read),
// waited for with min 4, then 1; two writes completed before a wait for 8
// whose ctx ends 200 ms later; two receives flushed by a move to the error
// state while a wait for 8 blocks; min 0. Measured: 4 writes (a wait that
// ignored min returns 1), then the other 2; the 2 writes with no error,
// then ctx's error; the 2 failed receives within 10 s (a wait that did not
// stop at a failed completion blocks until its 20-second context ends); an
// *AttrError.
func TestControlPollerWaitThreadAtLeast(t *testing.T) {
	for _, ctxCanEnd := range []bool{false, true} {
		t.Run(fmt.Sprintf("ctx can end %v", ctxCanEnd), func(t *testing.T) {
			r := newCtlRig(t)
			a, b := r.pair(t, hand.RC)
			p, err := hand.NewPoller(r.cq, 8)
			require.NoError(t, err)
			defer p.Close()
			ctx := context.Background()
			if ctxCanEnd {
				ctx = ctlContext(t, 20*time.Second)
			}
			sc, err := hand.NewSendChain(1, 1, 0)
			require.NoError(t, err)
			defer sc.Close()
			write := func(id uint64) error {
				sc.Reserve(1).SetWrite(0, id, hand.Signaled, r.mr.SGE(0, 64), r.mr.Addr()+4096, r.mr.RKey())
				return sc.PostSend(a)
			}
			got := make(chan []uint64, 1)
			go func() {
				wcs, err := p.WaitThreadAtLeast(ctx, 4)
				if err != nil {
					t.Errorf("WaitThreadAtLeast: %v", err)
				}
				var ids []uint64
				for i := range wcs {
					ids = append(ids, wcs[i].WRID())
				}
				got <- ids
			}()
			if !ctxCanEnd {
				waitBlockedInRead(t, r.ch.Raw().FD)
			}
			for id := range uint64(6) {
				time.Sleep(2 * time.Millisecond)
				require.NoError(t, write(id))
			}
			select {
			case ids := <-got:
				require.GreaterOrEqual(t, len(ids), 4, "WaitThreadAtLeast(4) returned %v", ids)
				for i, id := range ids {
					require.EqualValues(t, i, id, "the writes in order")
				}
				seen := len(ids)
				for seen < 6 {
					wcs, err := p.WaitThreadAtLeast(ctx, 1)
					require.NoError(t, err)
					for i := range wcs {
						require.EqualValues(t, seen, wcs[i].WRID())
						seen++
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("WaitThreadAtLeast(4) still blocked 10 s after six writes")
			}

			// Fewer than min when ctx ends: those, then why.
			require.NoError(t, write(10))
			require.NoError(t, write(11))
			short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			var ids []uint64
			for len(ids) < 2 {
				wcs, err := p.WaitThreadAtLeast(short, 8)
				require.NoError(t, err, "a wait that ended with %d completions held", len(ids))
				for i := range wcs {
					ids = append(ids, wcs[i].WRID())
				}
			}
			require.Equal(t, []uint64{10, 11}, ids)
			_, err = p.WaitThreadAtLeast(short, 8)
			require.ErrorIs(t, err, context.DeadlineExceeded)

			// A failed completion ends the wait: b's two receives,
			// flushed.
			flushed := make(chan []hand.WC, 1)
			bp, err := hand.NewPoller(r.cq, 8)
			require.NoError(t, err)
			returned := false
			defer func() {
				if returned { // else the wait still uses it
					bp.Close()
				}
			}()
			ctlPostRecv(t, b, r.mr, 20, 2, 8192, 64)
			go func() {
				wcs, err := bp.WaitThreadAtLeast(ctx, 8)
				if err != nil {
					t.Errorf("WaitThreadAtLeast on flushed receives: %v", err)
				}
				flushed <- wcs
			}()
			if !ctxCanEnd {
				waitBlockedInRead(t, r.ch.Raw().FD)
			}
			require.NoError(t, b.ToError())
			select {
			case wcs := <-flushed:
				returned = true
				require.NotEmpty(t, wcs)
				require.LessOrEqual(t, len(wcs), 2)
				require.False(t, wcs[0].OK(), "a flushed receive")
				require.EqualValues(t, 20, wcs[0].WRID())
			case <-time.After(10 * time.Second):
				t.Fatal("WaitThreadAtLeast(8) still blocked 10 s after its QP's receives were flushed")
			}

			_, err = p.WaitThreadAtLeast(ctx, 0)
			var attr *hand.AttrError
			require.ErrorAs(t, err, &attr)
		})
	}
}

// Poller.WaitThreadAtLeast allocates nothing when its context cannot end.
// Injected: 20 waits for 2, each made before the two signaled RDMA writes
// that complete it are posted, 2 ms apart. Measured: 0 allocations a wait,
// each returning both writes.
func TestControlPollerWaitThreadAtLeastNoAllocs(t *testing.T) {
	r := newCtlRig(t)
	a, _ := r.pair(t, hand.RC)
	p, kick, posted := writeOnKick(t, r, a, 0, 1)
	defer close(kick)
	allocs := allocsPerKickedWait(t, kick, posted, func() error {
		wcs, err := p.WaitThreadAtLeast(context.Background(), 2)
		if err == nil && (len(wcs) != 2 || wcs[0].WRID() != 0 || wcs[1].WRID() != 1) {
			return fmt.Errorf("%d completions, want the writes 0 and 1", len(wcs))
		}
		return err
	})
	require.Zero(t, allocs, "WaitThreadAtLeast allocates")
}
