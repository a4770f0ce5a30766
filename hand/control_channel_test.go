package hand

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/verbs"
)

// pipeChannel is a CompChannel whose events come from a pipe in place of
// ibv_get_cq_event: each byte written names a CQ by its index. Its readFn
// is readEvent with only the read replaced (the same closed check, the
// same deliver); the rest (CQ.Wait, CompChannel.wait, the turn, pending,
// filed) is the package's own code. The real channel is tested on
// soft-RoCE (tests/rxe).
type pipeChannel struct {
	ch   *CompChannel
	cqs  []*CQ
	raws []verbs.CQ
	r, w int
}

func newPipeChannel(t *testing.T, n int) *pipeChannel {
	t.Helper()
	var fds [2]int
	require.NoError(t, syscall.Pipe2(fds[:], syscall.O_CLOEXEC))
	fd, err := newPollFD(int32(fds[0]), "pipe")
	require.NoError(t, err)
	pc := &pipeChannel{r: fds[0], w: fds[1], raws: make([]verbs.CQ, n)}
	ch := &CompChannel{fd: fd, cqs: map[*verbs.CQ]*CQ{}, pending: map[*CQ]int{}}
	ch.init("CompChannel pipe")
	for i := range n {
		cq := &CQ{ch: ch}
		cq.init(fmt.Sprintf("CQ %d", i), &ch.object)
		ch.cqs[&pc.raws[i]] = cq
		pc.cqs = append(pc.cqs, cq)
	}
	ch.readFn = func(uintptr) bool {
		only := ch.waitOnly
		for {
			if only != nil && only.isClosed() {
				ch.waitError = ErrClosed
				return true
			}
			var b [1]byte
			if _, err := syscall.Read(pc.r, b[:]); err != nil {
				if err == syscall.EAGAIN {
					return false
				}
				ch.waitError = err
				return true
			}
			if ch.deliver(&pc.raws[b[0]], only) {
				return true
			}
		}
	}
	pc.ch = ch
	t.Cleanup(func() {
		fd.close()
		syscall.Close(fds[0])
		syscall.Close(fds[1])
	})
	return pc
}

func (pc *pipeChannel) event(t *testing.T, i int) {
	_, err := syscall.Write(pc.w, []byte{byte(i)})
	require.NoError(t, err)
}

// closeCQ is CQ.Close without its C calls (ibv_destroy_cq, unregister).
func (pc *pipeChannel) closeCQ(i int) error {
	cq := pc.cqs[i]
	err := cq.close(func() error {
		cq.ch.mu.Lock()
		cq.ch.forgetLocked(&pc.raws[i], cq)
		cq.ch.mu.Unlock()
		return nil
	}, cq.interrupt, cq.undo)
	if err == nil {
		cq.ch.fd.kick()
	}
	return err
}

// waitHolding starts a.Wait and returns once it holds the channel's turn.
func (pc *pipeChannel) waitHolding(t *testing.T, i int) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- pc.cqs[i].Wait(ctx) }()
	require.Eventually(t, func() bool {
		return pc.ch.fd.turn.state.Load() != turnFree
	}, 5*time.Second, time.Millisecond)
	return done
}

// Two CQs on one channel: a CQ.Wait queued behind a wait for the other CQ
// returns when the holder reads its event and files it, though the holder
// goes on waiting. Before, it stayed queued until the other CQ's own event
// came, for ever if that one waited for this one (a send CQ and a receive
// CQ sharing a channel, the sender waiting for its send to complete before
// the next message the peer replies to).
func TestChannelQueuedWaitGetsFiledEvent(t *testing.T) {
	pc := newPipeChannel(t, 2)
	aDone := pc.waitHolding(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bDone := make(chan error, 1)
	go func() { bDone <- pc.cqs[1].Wait(ctx) }()
	queued(t, &pc.ch.fd.turn, 1)

	pc.event(t, 1)
	require.NoError(t, <-bDone, "CQ 1's event was read by CQ 0's waiter")
	select {
	case err := <-aDone:
		t.Fatalf("CQ 0's wait returned %v with no event of its own", err)
	default:
	}
	pc.event(t, 0)
	require.NoError(t, <-aDone)
}

// A waiter queued for a CQ that another event does not concern goes back
// to waiting for the turn, and still gets it when the holder returns.
func TestChannelQueuedWaitRequeues(t *testing.T) {
	pc := newPipeChannel(t, 3)
	aDone := pc.waitHolding(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cDone := make(chan error, 1)
	go func() { cDone <- pc.cqs[2].Wait(ctx) }()
	queued(t, &pc.ch.fd.turn, 1)

	pc.event(t, 1) // filed for CQ 1, which nobody waits for
	// The holder filed it, which woke CQ 2's wait, and that wait watches
	// again: filing empties the watchers, and only a requeue adds one.
	require.Eventually(t, func() bool {
		pc.ch.mu.Lock()
		defer pc.ch.mu.Unlock()
		return pc.ch.pending[pc.cqs[1]] == 1 && len(pc.ch.watchers) == 1
	}, 5*time.Second, time.Millisecond, "CQ 1's event filed and CQ 2's wait watching again")
	queued(t, &pc.ch.fd.turn, 1)
	pc.event(t, 0)
	require.NoError(t, <-aDone)
	pc.event(t, 2)
	require.NoError(t, <-cDone)
	pc.ch.mu.Lock()
	require.Equal(t, 1, pc.ch.pending[pc.cqs[1]], "CQ 1's event stays filed for its own Wait")
	pc.ch.mu.Unlock()
	// which takes it with the turn, from pending, and reads nothing
	require.NoError(t, pc.cqs[1].Wait(ctx))
	require.False(t, pc.ch.anyPending.Load(), "nothing is left filed")
}

// anyPending, which lets the turn's holder skip the lock when nothing is
// filed (dropPending, takePending), says whether pending holds an event
// after each way it changes: filed (deliver), taken one at a time, dropped.
func TestChannelAnyPendingFollowsPending(t *testing.T) {
	pc := newPipeChannel(t, 3)
	ch := pc.ch
	require.False(t, ch.anyPending.Load())
	require.Nil(t, ch.takePending(nil), "nothing filed")

	require.False(t, ch.deliver(&pc.raws[1], pc.cqs[0]))
	require.False(t, ch.deliver(&pc.raws[1], pc.cqs[0]))
	require.False(t, ch.deliver(&pc.raws[2], pc.cqs[0]))
	require.True(t, ch.anyPending.Load(), "three events filed")
	require.Equal(t, pc.cqs[1], ch.takePending(pc.cqs[1]))
	require.True(t, ch.anyPending.Load(), "one of CQ 1's and CQ 2's left")
	ch.dropPending(pc.cqs[1])
	require.True(t, ch.anyPending.Load(), "CQ 2's left")
	ch.dropPending(pc.cqs[0]) // none of its own
	require.True(t, ch.anyPending.Load(), "CQ 2's left")
	require.Equal(t, pc.cqs[2], ch.takePending(nil))
	require.False(t, ch.anyPending.Load(), "all taken")
	require.Nil(t, ch.takePending(nil))

	require.True(t, ch.deliver(&pc.raws[0], pc.cqs[0]), "the waiter's own is not filed")
	require.False(t, ch.anyPending.Load())
	require.False(t, ch.deliver(&pc.raws[2], pc.cqs[0]))
	ch.dropPending(pc.cqs[2])
	require.False(t, ch.anyPending.Load(), "dropped")
	ch.mu.Lock()
	defer ch.mu.Unlock()
	require.Empty(t, ch.pending)
}

// CQ.Close wakes a CQ.Wait of that CQ queued behind another CQ's waiter
// with ErrClosed, as it does a waiter holding the turn.
func TestChannelCloseWakesQueuedWait(t *testing.T) {
	pc := newPipeChannel(t, 2)
	pc.waitHolding(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bDone := make(chan error, 1)
	go func() { bDone <- pc.cqs[1].Wait(ctx) }()
	queued(t, &pc.ch.fd.turn, 1)

	require.NoError(t, pc.closeCQ(1))
	require.ErrorIs(t, <-bDone, ErrClosed)
}

// A wait queued behind another CQ's waiter, woken by an event filed for
// it, allocates nothing once warm: its wake channel is reused, where a
// channel closed for each filing had to be made again for the next.
func TestChannelQueuedWaitAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("built with -race, whose runtime allocates for the goroutines' channel operations: counted without it")
	}
	pc := newPipeChannel(t, 2)
	pc.waitHolding(t, 0) // holds the turn, waiting for CQ 0 for ever
	trigger, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	one := []byte{1}
	go func() {
		for {
			select {
			case <-trigger:
			case <-stop:
				return
			}
			for { // once CQ 1's wait is queued, raise CQ 1's event
				pc.ch.fd.turn.mu.Lock()
				n := len(pc.ch.fd.turn.waiters)
				pc.ch.fd.turn.mu.Unlock()
				if n == 1 {
					break
				}
				time.Sleep(10 * time.Microsecond)
			}
			syscall.Write(pc.w, one)
		}
	}()
	ctx := context.Background()
	wait := func() {
		trigger <- struct{}{}
		if err := pc.cqs[1].Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait()
	require.Zero(t, testing.AllocsPerRun(100, wait), "a queued CQ.Wait(context.Background()) allocates")
}

// A Close of the channel that fails wakes no wait for good: its
// interrupt woke the parked CompChannel.Wait, but a CQ made on the
// channel after Close first looked made it a *BusyError, and the wait
// goes on and gets the new CQ's event. Before, it returned ErrClosed from
// a channel that stayed open.
func TestChannelFailedCloseKeepsWait(t *testing.T) {
	pc := newPipeChannel(t, 0)
	ch := pc.ch
	done := make(chan error, 1)
	var got *CQ
	go func() {
		cq, err := ch.Wait(context.Background())
		got = cq
		done <- err
	}()
	require.Eventually(t, func() bool { return ch.fd.turn.state.Load() != turnFree }, 5*time.Second, time.Millisecond)

	pc.raws = make([]verbs.CQ, 1)
	late := &CQ{ch: ch}
	err := ch.close(func() error { return nil }, func() {
		ch.fd.interrupt()
		// NewCQ on the channel, between Close's first look at the
		// children and its second.
		late.init("CQ late", &ch.object)
		ch.mu.Lock()
		ch.cqs[&pc.raws[0]] = late
		ch.mu.Unlock()
	}, ch.fd.undo)
	var be *BusyError
	require.ErrorAs(t, err, &be)
	select {
	case err := <-done:
		t.Fatalf("the wait returned %v from a Close that failed", err)
	case <-time.After(50 * time.Millisecond):
	}
	pc.event(t, 0)
	select {
	case err := <-done:
		require.NoError(t, err)
		require.Same(t, late, got)
	case <-time.After(5 * time.Second):
		t.Fatal("no return 5 s after the event")
	}

	// A Close that succeeds ends a wait with ErrClosed, as before.
	require.NoError(t, late.close(func() error { return nil }, nil, nil))
	go func() {
		_, err := ch.Wait(context.Background())
		done <- err
	}()
	require.Eventually(t, func() bool { return ch.fd.turn.state.Load() != turnFree }, 5*time.Second, time.Millisecond)
	require.NoError(t, ch.close(func() error { return nil }, ch.fd.interrupt, ch.fd.undo))
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not return 5 s after Close")
	}
}
