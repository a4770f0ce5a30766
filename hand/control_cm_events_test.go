package hand

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/generated/rdmacm"
)

// The demultiplexer of the process's rdma_cm channel, without the channel:
// the fake provider has no rdma_cm, so these drive cmEvents.deliver (what
// the reader calls for each event it read) with ids that are Go values.
// tests/rxe's TestControlCMManyConcurrent drives it through librdmacm.

func newTestCMEvents() *cmEvents {
	return &cmEvents{boxes: map[*rdmacm.CMID]*cmBox{}, pending: map[*rdmacm.CMID][]cmEvent{}}
}

// testRegister gives id a mailbox, as cmChannel.create does after
// rdma_create_id.
func testRegister(e *cmEvents, id *rdmacm.CMID) *cmChannel {
	ch := &cmChannel{events: e, fd: &cmBox{}}
	e.mu.Lock()
	e.registerLocked(id, ch.fd)
	e.mu.Unlock()
	return ch
}

func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Each id's events reach its own mailbox, in order, however they
// interleave on the channel; waiters parked before the events came wake.
func TestCMEventsEachIDItsOwn(t *testing.T) {
	e := newTestCMEvents()
	const n, per = 50, 4
	ids := make([]*rdmacm.CMID, n)
	chs := make([]*cmChannel, n)
	for i := range ids {
		ids[i] = new(rdmacm.CMID)
		chs[i] = testRegister(e, ids[i])
	}
	var wg sync.WaitGroup
	got := make([][]int32, n)
	for i := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				ev, err := chs[i].next(quick(t))
				if err != nil {
					t.Errorf("id %d: %v", i, err)
					return
				}
				if ev.id != ids[i] {
					t.Errorf("id %d got another id's event", i)
				}
				got[i] = append(got[i], ev.status)
			}
		}()
	}
	for k := range per {
		for i := range ids {
			e.deliver(cmEvent{typ: rdmacm.CMEventEstablished, id: ids[i], status: int32(k)})
		}
	}
	wg.Wait()
	for i := range got {
		require.Equal(t, []int32{0, 1, 2, 3}, got[i], "id %d", i)
	}
}

// A connection request goes to its listener's mailbox, and its new id has
// a mailbox before the request is handed over: the new connection's
// events queue there, even before anyone took the request.
func TestCMEventsRequestIDRegisteredFirst(t *testing.T) {
	e := newTestCMEvents()
	lid, nid := new(rdmacm.CMID), new(rdmacm.CMID)
	l := testRegister(e, lid)
	e.deliver(cmEvent{typ: rdmacm.CMEventConnectRequest, id: nid, listenID: lid, data: []byte("hi")})
	e.deliver(cmEvent{typ: rdmacm.CMEventEstablished, id: nid})

	req, err := l.next(quick(t))
	require.NoError(t, err)
	require.Equal(t, rdmacm.CMEventConnectRequest, req.typ)
	require.Equal(t, nid, req.id)
	require.NotNil(t, req.ch, "the request's id has its mailbox")
	require.Equal(t, []byte("hi"), req.data)
	ev, err := req.ch.expect(quick(t), "rdma_accept", rdmacm.CMEventEstablished)
	require.NoError(t, err)
	require.Equal(t, nid, ev.id)

	// Nothing of the connection's reached the listener.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A request left in the listener's mailbox is what unregistering it
	// hands back (cmChannel.close rejects and destroys those).
	nid2 := new(rdmacm.CMID)
	e.deliver(cmEvent{typ: rdmacm.CMEventConnectRequest, id: nid2, listenID: lid})
	left := e.unregister(lid, l.fd)
	require.Len(t, left, 1)
	require.Equal(t, nid2, left[0].id)
	require.NotNil(t, left[0].ch)
	require.Same(t, left[0].ch.fd, e.boxes[nid2])
}

// An event for an id with no mailbox yet waits for it; unregistering the
// id drops what waited, so an id made later at the same address cannot
// get it.
func TestCMEventsPendingUntilRegistered(t *testing.T) {
	e := newTestCMEvents()
	id := new(rdmacm.CMID)
	e.deliver(cmEvent{typ: rdmacm.CMEventAddrResolved, id: id})
	ch := testRegister(e, id)
	ev, err := ch.next(quick(t))
	require.NoError(t, err)
	require.Equal(t, rdmacm.CMEventAddrResolved, ev.typ)
	require.Empty(t, e.pending)

	other := new(rdmacm.CMID)
	e.deliver(cmEvent{typ: rdmacm.CMEventAddrResolved, id: other})
	require.Len(t, e.unregister(other, nil), 1, "an id that never had a mailbox")
	require.Empty(t, e.pending)
	require.Empty(t, testRegister(e, other).fd.q)

	// After its unregistering, nothing reaches a mailbox.
	require.Empty(t, e.unregister(id, ch.fd))
	e.deliver(cmEvent{typ: rdmacm.CMEventDisconnected, id: id})
	require.Empty(t, ch.fd.q)
}

// A wait ends with ctx's error, with ErrClosed on interrupt (and at once
// for a wait that starts after it), and waits again after undo; an event
// already queued is taken even when ctx has ended.
func TestCMEventsWaitEnds(t *testing.T) {
	e := newTestCMEvents()
	id := new(rdmacm.CMID)
	ch := testRegister(e, id)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := ch.next(ctx); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	e.deliver(cmEvent{typ: rdmacm.CMEventEstablished, id: id})
	ev, err := ch.next(ctx)
	require.NoError(t, err, "a queued event with ctx ended")
	require.Equal(t, rdmacm.CMEventEstablished, ev.typ)

	go func() { _, err := ch.next(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	ch.fd.interrupt()
	require.ErrorIs(t, <-errc, ErrClosed)
	_, err = ch.next(context.Background())
	require.ErrorIs(t, err, ErrClosed)

	ch.fd.undo()
	go func() { _, err := ch.next(quick(t)); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	e.deliver(cmEvent{typ: rdmacm.CMEventDisconnected, id: id})
	require.NoError(t, <-errc)

	// A failed channel ends every wait with its error.
	failed := errors.New("rdma_get_cm_event: EBADF")
	go func() { _, err := ch.next(quick(t)); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	ch.fd.fail(failed)
	require.ErrorIs(t, <-errc, failed)
}

// Two waiters on one mailbox (Disconnect and WaitDisconnect): the one that
// takes the event makes stop true and kicks; the other returns ok false,
// taking nothing.
func TestCMEventsKickEndsOtherWaiter(t *testing.T) {
	e := newTestCMEvents()
	id := new(rdmacm.CMID)
	ch := testRegister(e, id)
	var mu sync.Mutex
	done := false
	stop := func() bool { mu.Lock(); defer mu.Unlock(); return done }
	type res struct {
		ok  bool
		err error
	}
	out := make(chan res, 2)
	for range 2 {
		go func() {
			_, ok, err := ch.nextUnless(quick(t), stop)
			if ok {
				mu.Lock()
				done = true
				mu.Unlock()
				ch.fd.kick()
			}
			out <- res{ok, err}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	e.deliver(cmEvent{typ: rdmacm.CMEventDisconnected, id: id})
	a, b := <-out, <-out
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	require.True(t, a.ok != b.ok, "one took the event, the other stopped: %v %v", a, b)
}
