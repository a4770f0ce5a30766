package hand

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
)

// The process's rdma_cm event channel.
//
// Every rdma_cm id this package makes is on one event channel: Listen's,
// Dial's and the accepted requests' (which rdma_cm puts on their
// listener's channel), the EP paths' once moved off librdmacm's
// synchronous channel, UD's and multicast's. One goroutine reads it,
// parked on the netpoller while it is empty; it acknowledges each event at
// once, after copying it (rdma_destroy_id waits until every event of its id
// that was read is acknowledged, so no destroy ever waits for a reader),
// and hands the copy to the mailbox (cmBox) of the id it is for. A
// connection request goes to its listener's mailbox, and its new id gets a
// mailbox of its own before the request is handed over, so that the new
// connection's events, coming before anyone took the request, queue there.
//
// One channel rather than one per id: a channel is an open of the rdma_cm
// device, a netpoller registration and, for an accepted request,
// rdma_migrate_id onto it; cmtime, like most C servers, uses one for all.
// A mailbox is a queue with no bound, so one connection's events never
// wait behind another's: the reader never blocks on a mailbox.
//
// An id is registered (given its mailbox) before anything can make an
// event for it: at rdma_create_id, before rdma_migrate_id, or by the
// reader for a request's id. It is unregistered (cmChannel.close) only
// after rdma_destroy_id returned, and the reader hands an event over
// before it acknowledges it, so no event of a destroyed id can reach an id
// made later at the same address. An event for an id that has no mailbox
// yet waits for its registration (pending), and is dropped when the id is
// unregistered.
type cmEvents struct {
	raw *rdmacm.EventChannel
	fd  *pollFD

	mu      sync.Mutex // guards boxes, pending and err; taken before any cmBox.mu
	boxes   map[*rdmacm.CMID]*cmBox
	pending map[*rdmacm.CMID][]cmEvent
	err     error // the read that failed and ended the reader
}

// cmShared is the process's channel: made by the first id, kept for the
// life of the process (a failed read drops it, and the next id makes
// another).
var cmShared struct {
	sync.Mutex
	ev *cmEvents
}

// sharedCMEvents returns the process's channel, making it on first use.
// Without RDMA it fails as createEventChannel does, and the next call
// tries again.
func sharedCMEvents() (*cmEvents, error) {
	cmShared.Lock()
	defer cmShared.Unlock()
	if e := cmShared.ev; e != nil {
		return e, nil
	}
	raw, err := createEventChannel()
	if err != nil {
		return nil, err
	}
	fd, err := newPollFD(*(*int32)(unsafe.Pointer(raw)), "rdma_event_channel")
	if err != nil {
		rdmacm.DestroyEventChannel(raw)
		return nil, err
	}
	e := &cmEvents{raw: raw, fd: fd, boxes: map[*rdmacm.CMID]*cmBox{}, pending: map[*rdmacm.CMID][]cmEvent{}}
	go e.run()
	cmShared.ev = e
	return e, nil
}

// run reads the channel until a read fails, which it reports to every
// mailbox; ids made later go on a new channel. The failed channel stays:
// its ids are still on it, and destroying it would free them.
func (e *cmEvents) run() {
	var failed error
	err := e.fd.wait(context.Background(), func() bool {
		for {
			var raw *rdmacm.CMEvent
			switch err := rdmacm.GetCMEvent(e.raw, &raw); {
			case err == nil:
			case errors.Is(err, syscall.EAGAIN): // non-blocking: nothing pending
				return false
			default:
				failed = err
				return true
			}
			e.deliver(copyCMEvent(raw))
			// After the hand-over: see cmEvents.
			rdmacm.ACKCMEvent(raw)
		}
	})
	if err == nil {
		err = failed
	}
	cmShared.Lock()
	if cmShared.ev == e {
		cmShared.ev = nil
	}
	cmShared.Unlock()
	e.mu.Lock()
	e.err = err
	for _, b := range e.boxes {
		b.fail(err)
	}
	e.mu.Unlock()
}

// copyCMEvent copies what hand reads of an event before it is
// acknowledged: the private data lives in the event.
func copyCMEvent(raw *rdmacm.CMEvent) cmEvent {
	ev := cmEvent{typ: raw.Event, status: raw.Status, id: raw.ID, listenID: raw.ListenID}
	if p := raw.Param.Conn(); p.PrivateData != nil && p.PrivateDataLen > 0 &&
		(raw.ID.Ps == rdmacm.PsTCP || raw.ID.Ps == rdmacm.PsIB || raw.ID.Ps == rdmacm.PsUDP && raw.Event != rdmacm.CMEventMulticastJoin) {
		ev.data = append([]byte(nil), unsafe.Slice((*byte)(p.PrivateData), p.PrivateDataLen)...)
	}
	if raw.ID.Ps == rdmacm.PsUDP {
		ev.ud = raw.Param.UD
		ev.ud.PrivateData = nil
	}
	return ev
}

// deliver hands ev to its id's mailbox: a connection request to its
// listener's, after registering the request's new id with a mailbox of
// its own (ev.ch).
func (e *cmEvents) deliver(ev cmEvent) {
	key := ev.id
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.typ == rdmacm.CMEventConnectRequest {
		key = ev.listenID
		ev.ch = &cmChannel{events: e, fd: &cmBox{}}
		e.registerLocked(ev.id, ev.ch.fd)
	}
	if b := e.boxes[key]; b != nil {
		b.push(ev)
		return
	}
	e.pending[key] = append(e.pending[key], ev)
}

// registerLocked gives id the mailbox b, with the events that came for id
// before; e.mu is held.
func (e *cmEvents) registerLocked(id *rdmacm.CMID, b *cmBox) {
	e.boxes[id] = b
	b.mu.Lock()
	b.id = id
	if e.err != nil {
		b.err = e.err
	}
	b.mu.Unlock()
	if evs, ok := e.pending[id]; ok {
		delete(e.pending, id)
		for _, ev := range evs {
			b.push(ev)
		}
	}
}

// unregister takes id's mailbox b away (b nil: an id that never had one),
// and with it what the reader still held for id, and returns the events b
// had not handed out.
func (e *cmEvents) unregister(id *rdmacm.CMID, b *cmBox) []cmEvent {
	e.mu.Lock()
	if b != nil && e.boxes[id] == b {
		delete(e.boxes, id)
	}
	left := e.pending[id]
	delete(e.pending, id)
	e.mu.Unlock()
	if b == nil {
		return left
	}
	// No event reaches b from here on: the reader hands over under e.mu.
	b.mu.Lock()
	left = append(b.q, left...)
	b.q = nil
	b.mu.Unlock()
	return left
}

// cmBox is an id's mailbox: the events the reader handed over, in order,
// and the waiters' wake-up. Its interrupt, undo and kick are what a
// Close, and a waiter that got what another waits for, call, as they
// would a pollFD's.
type cmBox struct {
	mu      sync.Mutex
	id      *rdmacm.CMID
	q       []cmEvent
	wake    chan struct{} // closed at the next change; nil while nobody waits
	closing bool          // interrupt: waiters return ErrClosed
	err     error         // the channel's failed read
}

// push queues ev and wakes the waiters.
func (b *cmBox) push(ev cmEvent) {
	b.mu.Lock()
	b.q = append(b.q, ev)
	b.changedLocked()
	b.mu.Unlock()
}

// fail ends the waits with err: the channel is gone.
func (b *cmBox) fail(err error) {
	b.mu.Lock()
	b.err = err
	b.changedLocked()
	b.mu.Unlock()
}

// changedLocked wakes every waiter, to look again; b.mu is held.
func (b *cmBox) changedLocked() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// interrupt wakes the waiters (they return ErrClosed) and refuses new ones.
func (b *cmBox) interrupt() {
	b.mu.Lock()
	b.closing = true
	b.changedLocked()
	b.mu.Unlock()
}

// undo reverts interrupt, when the Close that called it failed.
func (b *cmBox) undo() {
	b.mu.Lock()
	b.closing = false
	b.mu.Unlock()
}

// kick wakes the waiters without closing: each asks its stop again.
func (b *cmBox) kick() {
	b.mu.Lock()
	b.changedLocked()
	b.mu.Unlock()
}

// cmChannel is one id's view of the process's channel: its mailbox (fd,
// named as the pollFD it replaced, for Close's interrupt and undo).
type cmChannel struct {
	events *cmEvents
	fd     *cmBox
}

// newCMChannel returns a mailbox on the process's channel, for an id that
// create or adopt makes or moves there. Without RDMA it fails with
// rdma_create_event_channel's error.
func newCMChannel() (*cmChannel, error) {
	e, err := sharedCMEvents()
	if err != nil {
		return nil, err
	}
	return &cmChannel{events: e, fd: &cmBox{}}, nil
}

// create makes an id on the process's channel with mk (createID,
// createUDPID) and registers it with ch.
func (ch *cmChannel) create(mk func(*rdmacm.EventChannel) (*rdmacm.CMID, error)) (*rdmacm.CMID, error) {
	id, err := mk(ch.events.raw)
	if err != nil {
		return nil, err
	}
	ch.events.mu.Lock()
	ch.events.registerLocked(id, ch.fd)
	ch.events.mu.Unlock()
	return id, nil
}

// adopt registers id with ch and moves it onto the process's channel
// (rdma_migrate_id): an id of librdmacm's synchronous API. On failure the
// caller closes ch and destroys id.
func (ch *cmChannel) adopt(id *rdmacm.CMID) error {
	ch.events.mu.Lock()
	ch.events.registerLocked(id, ch.fd)
	ch.events.mu.Unlock()
	return rdmacm.MigrateID(id, ch.events.raw)
}

// close unregisters ch's id, which the caller destroyed before (or never
// made), and ends the waits on it. Connection requests still queued (a
// listener's, closed before they were taken) are rejected and their ids
// destroyed: nobody else can.
func (ch *cmChannel) close() {
	b := ch.fd
	b.interrupt()
	b.mu.Lock()
	id := b.id
	b.mu.Unlock()
	if id == nil {
		return
	}
	for _, ev := range ch.events.unregister(id, b) {
		if ev.typ == rdmacm.CMEventConnectRequest && ev.ch != nil {
			reject(ev.id, nil)
			rdmacm.DestroyID(ev.id)
			ev.ch.close()
		}
	}
}

// next returns the next event, acknowledged.
func (ch *cmChannel) next(ctx context.Context) (cmEvent, error) {
	ev, _, err := ch.nextUnless(ctx, nil)
	return ev, err
}

// nextUnless is next for a waiter that another may make needless: once
// stop (if not nil) reports true, before an event is taken, it returns ok
// false and takes nothing. Waiters that take an event make stop true for
// the others, and kick them to look. A queued event is taken even when
// ctx has ended; ErrClosed once interrupted.
func (ch *cmChannel) nextUnless(ctx context.Context, stop func() bool) (ev cmEvent, ok bool, err error) {
	b := ch.fd
	for {
		b.mu.Lock()
		switch {
		case b.closing:
			b.mu.Unlock()
			return ev, false, ErrClosed
		case stop != nil && stop():
			b.mu.Unlock()
			return ev, false, nil
		case len(b.q) > 0:
			ev = b.q[0]
			b.q[0] = cmEvent{}
			b.q = b.q[1:]
			b.mu.Unlock()
			return ev, true, nil
		case b.err != nil:
			err := b.err
			b.mu.Unlock()
			return ev, false, err
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ev, false, ctx.Err()
		}
	}
}

// expect waits for the event want; any other event is a *CMEventError.
func (ch *cmChannel) expect(ctx context.Context, op string, want rdmacm.CMEventType) (cmEvent, error) {
	ev, err := ch.next(ctx)
	if err != nil {
		return ev, err
	}
	if ev.typ != want {
		return ev, withCause(ctx, &CMEventError{Op: op, Event: ev.typ, Status: ev.status, PrivateData: ev.data})
	}
	return ev, nil
}
