package hand

/*
#include "wait.h"
*/
import "C"

import (
	"context"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// cqEvent is where ibv_get_cq_event writes the CQ and its context: C
// memory, so the call passes no Go pointer and makes nothing escape. It is
// struct goverbs_cq_event (wait.h), err and polled included, which only
// the thread waits write.
type cqEvent struct {
	cq      *verbs.CQ
	context unsafe.Pointer
	err     int32
	polled  int32
}

// The Go and C views of an event must agree.
var _ [unsafe.Sizeof(cqEvent{}) - C.sizeof_struct_goverbs_cq_event]struct{}
var _ [C.sizeof_struct_goverbs_cq_event - unsafe.Sizeof(cqEvent{})]struct{}

// Wait blocks until a CQ on this channel has a completion event, and
// returns that CQ; the event is acknowledged (ibv_ack_cq_events). The CQ
// must have been armed with RequestNotify, and is disarmed by the event:
// arm it again before the next Wait. As with ibv_get_cq_event, an event
// does not promise a completion the caller has not polled: a poll after the
// arm (a Poller's Wait and WaitThread arm, then poll) may have taken it
// already. The waiting goroutine is parked on the netpoller and holds no OS
// thread. Events of a CQ this package did not make (one made on Raw()
// through the generated layer) are acknowledged and dropped. Wait returns
// ctx.Err() when ctx ends first and ErrClosed when the channel is closed.
// With a ctx that cannot end (ctx.Done() is nil: context.Background) it
// allocates nothing, parked or not; one that can end costs the hook that
// cancels it, a few allocations a wait.
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	return ch.wait(ctx, nil, false)
}

// WaitThread is Wait with the waiting done on the calling goroutine's OS
// thread: it blocks the thread in the channel's read, as perftest's -e does,
// instead of parking the goroutine on the netpoller. A wake then costs one
// cgo call and one syscall, the event's read (ibv_get_cq_event, then
// ibv_ack_cq_events, called from C), where Wait's costs five syscalls (the
// netpoller's epoll_pwait twice, a read that finds nothing before it parks,
// the read, and the scheduler's run of the goroutine); on one vCPU under
// -icount, goverbs-perf's event-driven send_bw at 64 B ran at 0.75 of
// perftest's rate parked on the netpoller, and runs at 0.96 waiting so, with
// Poller.WaitThread's loop in C, at a return every wake (BENCHMARKS.md,
// "Results against perftest"). Nothing
// but an event ends that read, so ctx's end, Close and a CQ's Close end it
// with an event of the channel's own: the kick, a CQ and an RC QP of
// goverbs' on the channel's device (a PD, a CQ of one entry and a QP of one
// receive, made by the first WaitThread and destroyed by Close), whose
// receive a move to the error state flushes. On a device that refuses them,
// or whose QP does not flush, WaitThread blocks in epoll_wait on the
// channel's fd and on an eventfd instead, which costs a syscall more a wake.
// The price is the thread: it is held for the whole wait, like any blocking
// cgo call, so WaitThread suits a few data-path goroutines, and Wait
// thousands of waiters. While it is blocked, the runtime takes its P once it
// finds no other P idle (after 20 us with GOMAXPROCS=1) and starts another
// thread to look for work. WaitThread takes the channel's fd off the
// netpoller, so that this thread, parked there, is not woken by every event
// of a channel that only WaitThread uses; the next Wait puts it back, at the
// cost of a few allocations, once. Wait and WaitThread on one channel take
// turns, as two Waits do. Allocations, ctx and Close are as for Wait;
// WaitThread's first call on a channel makes the kick (or the eventfd and
// the epoll instance), and tries it once.
func (ch *CompChannel) WaitThread(ctx context.Context) (*CQ, error) {
	return ch.wait(ctx, nil, true)
}

// PrepareWaitThread makes what WaitThread and Poller.WaitThread need on this
// channel now, so that the first of them does not pay for it inside a loop
// someone times: the kick (a PD, a CQ and an RC QP, and its one trial: about
// 280 us of a one-vCPU VM's time on rxe under -icount), or, on a device that
// refuses the kick, the eventfd and the epoll instance. Without it the first
// thread wait makes them. It fails with ErrClosed after Close, and with the
// system call's error when epoll or the eventfd cannot be made; a refused
// kick is no error.
func (ch *CompChannel) PrepareWaitThread() error {
	if err := ch.use(); err != nil {
		return err
	}
	defer ch.done()
	return ch.fd.prepareThreadWait()
}

// wait returns the next event's CQ, or, when only is set, waits for an
// event of only and counts the others as pending for their own Wait. It
// waits on the netpoller (pollFD.waitHeld) or, with thread, on the
// thread (pollFD.waitThreadHeld), and allocates nothing when ctx cannot end.
func (ch *CompChannel) wait(ctx context.Context, only *CQ, thread bool) (*CQ, error) {
	if err := ch.use(); err != nil {
		return nil, err
	}
	for {
		cq, err := ch.waitHeld(ctx, only, thread)
		// ErrClosed with the channel's interrupt in force: a Close of
		// the channel woke the wait, and may yet fail (outlast), unless
		// the CQ waited for is closed, which ends the wait whatever
		// the channel's Close does: Close tried again and again would
		// otherwise keep it waiting for each attempt.
		if err != ErrClosed || !ch.fd.isClosing() || (only != nil && only.isClosed()) {
			ch.done()
			return cq, err
		}
		if err := ch.outlast(ch.fd.isClosing); err != nil {
			return nil, err
		}
	}
}

// waitHeld is wait for a caller that holds ch (use).
func (ch *CompChannel) waitHeld(ctx context.Context, only *CQ, thread bool) (*CQ, error) {
	if cq, err := ch.acquireFor(ctx, only); cq != nil || err != nil {
		return cq, err
	}
	defer ch.fd.release()
	// The waiter before may have read this CQ's event just before it let
	// go of the turn.
	if cq := ch.takePending(only); cq != nil {
		return cq, nil
	}
	ch.waitOnly, ch.waitGot, ch.waitError = only, nil, nil
	var err error
	if thread {
		err = ch.fd.waitThreadHeld(ctx, ch.stepFn)
	} else {
		err = ch.fd.waitHeld(ctx, ch.readFn)
	}
	got := ch.waitGot
	if err == nil {
		err = ch.waitError
	}
	ch.waitOnly, ch.waitGot, ch.waitError = nil, nil, nil
	return got, err
}

// acquireFor takes the channel's turn for a wait for only (any CQ when
// nil), or returns an event of only that another waiter read, or ErrClosed
// when only closes, or ctx.Err(). Queued, it does not wait for the turn
// alone: the holder may wait for its own CQ for ever while it files
// events of only as pending, or while only closes, and would never hand
// the turn on; a watcher wakes it to check.
func (ch *CompChannel) acquireFor(ctx context.Context, only *CQ) (*CQ, error) {
	if ch.fd.tryAcquire() {
		return nil, nil
	}
	for {
		cq, w := ch.pendingOrWatch(only)
		if cq != nil {
			return cq, nil
		}
		if only != nil && only.isClosed() {
			ch.unwatch(w)
			return nil, ErrClosed
		}
		err := ch.fd.acquireOr(ctx, w)
		ch.unwatch(w)
		switch err {
		case nil:
			return nil, nil
		case errStopped:
			continue
		default:
			return nil, err
		}
	}
}

// pendingOrWatch takes an event of only (any CQ when nil) that another
// waiter read, as takePending does, or, when there is none, returns a
// watcher (watchLocked), in one critical section, so that nothing filed
// between the two goes unseen.
func (ch *CompChannel) pendingOrWatch(only *CQ) (*CQ, chan struct{}) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if cq := ch.takePendingLocked(only); cq != nil {
		return cq, nil
	}
	return nil, ch.watchLocked()
}

// watchLocked returns a wake channel that the next filing or CQ close
// sends on (wakeQueuedLocked); unwatch gives it back. ch.mu is held.
func (ch *CompChannel) watchLocked() chan struct{} {
	w := ch.spareWatch.get()
	ch.watchers = append(ch.watchers, w)
	return w
}

// unwatch gives back w, emptied of a wake it did not take.
func (ch *CompChannel) unwatch(w chan struct{}) {
	ch.mu.Lock()
	if i := slices.Index(ch.watchers, w); i >= 0 {
		ch.watchers = slices.Delete(ch.watchers, i, i+1)
	}
	select {
	case <-w:
	default:
	}
	ch.spareWatch.put(w)
	ch.mu.Unlock()
}

// wakeQueuedLocked wakes the waiters queued for the turn (acquireFor,
// waitPoll), to look again at pending and at their CQ. ch.mu is held.
func (ch *CompChannel) wakeQueuedLocked() {
	for _, w := range ch.watchers {
		select {
		case w <- struct{}{}:
		default: // woken already
		}
	}
	ch.watchers = ch.watchers[:0]
}

// readEvent is the waiter's read (pollFD.waitHeld): it reads events until
// one for waitOnly (any, when nil), and reports false when the channel has
// none left (EAGAIN: it is non-blocking).
func (ch *CompChannel) readEvent(uintptr) bool {
	only := ch.waitOnly
	for {
		if only != nil && only.isClosed() {
			ch.waitError = ErrClosed // CQ.Close kicked the channel
			return true
		}
		// The read and its acknowledgement in one cgo call, with no
		// waiter: the fd is non-blocking here, so the read returns at
		// once, and EAGAIN (GOVERBS_NO_EVENT) means nothing pending.
		switch C.goverbs_wait_cq_event(C.uintptr_t(ch.getFn), C.uintptr_t(ch.ackFn),
			C.uintptr_t(uintptr(unsafe.Pointer(ch.raw))), -1, 0, C.uintptr_t(uintptr(unsafe.Pointer(ch.ev)))) {
		case C.GOVERBS_NO_EVENT:
			return false
		case C.GOVERBS_READ_FAILED:
			ch.waitError = ch.waitFailed(C.GOVERBS_READ_FAILED)
			return true
		}
		if ch.fd.isKick(unsafe.Pointer(ch.ev.cq)) {
			ch.fd.kickRead() // meant for a thread waiter before this one
			continue
		}
		if ch.deliver(ch.ev.cq, only) {
			return true
		}
	}
}

// readEventThread is the thread waiter's step (pollFD.waitThreadHeld): it
// does what readEvent does, with the wait, the read and the
// acknowledgement in one cgo call a wake (goverbs_wait_cq_event), and
// reports false when it was woken first (wake, or the kick's event).
func (ch *CompChannel) readEventThread(w threadWake) (bool, error) {
	only := ch.waitOnly
	for {
		if only != nil && only.isClosed() {
			ch.waitError = ErrClosed // CQ.Close kicked the channel
			return true, nil
		}
		r := C.goverbs_wait_cq_event(C.uintptr_t(ch.getFn), C.uintptr_t(ch.ackFn),
			C.uintptr_t(uintptr(unsafe.Pointer(ch.raw))), C.int(w.waiter), C.uintptr_t(w.kickCQ),
			C.uintptr_t(uintptr(unsafe.Pointer(ch.ev))))
		switch r {
		case C.GOVERBS_WOKEN:
			return false, nil
		case C.GOVERBS_NO_EVENT:
			continue
		case C.GOVERBS_WAIT_FAILED, C.GOVERBS_READ_FAILED:
			return false, ch.waitFailed(r)
		}
		if ch.deliver(ch.ev.cq, only) {
			return true, nil
		}
	}
}

// waitPoll is Poller.WaitThreadAtLeast: it returns how many completions p
// holds once it holds at least min (or p's size, or one in error), waiting
// for events on the thread in between (pollEventThread). It polls first in
// C, holding the channel's turn. It polls from Go first instead, one
// crossing more (two when the CQ must be armed first), in two cases: when
// another waiter holds the turn, so that completions already queued do not
// wait for another CQ's event; and when ctx can end, so that they do not
// pay for the hook that would wake the thread (waitThreadHeld). When the
// wait ends with completions held, it returns them, and no error: why it
// ended comes again at the next wait.
func (ch *CompChannel) waitPoll(ctx context.Context, p *Poller, min int) (int, error) {
	if err := ch.use(); err != nil {
		return 0, err
	}
	for {
		n, err := ch.waitPollHeld(ctx, p, min)
		// As in wait: a Close of the channel that may yet fail, unless
		// p's CQ is closed.
		if err != ErrClosed || !ch.fd.isClosing() || p.owner.isClosed() {
			// Not deferred: nothing in between panics, and the defers'
			// wrappers cost tens of instructions a wait (make perf-insns).
			ch.done()
			return n, err
		}
		if err := ch.outlast(ch.fd.isClosing); err != nil {
			return 0, err
		}
	}
}

// waitPollHeld is waitPoll for a caller that holds ch (use).
func (ch *CompChannel) waitPollHeld(ctx context.Context, p *Poller, min int) (int, error) {
	held := 0
	if ctx.Done() != nil || !ch.fd.tryAcquire() {
		n, turn, err := ch.waitPollQueued(ctx, p, min)
		if !turn {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		held = n
	}
	// Events of p's CQ that another waiter read disarmed it (deliver), and
	// the poll below makes up for them.
	ch.dropPending(p.owner)
	ch.waitPoller, ch.waitMin, ch.waitError = p, min, nil
	ch.ev.polled = int32(held)
	err := ch.fd.waitThreadHeld(ctx, ch.pollStepFn)
	if err == nil {
		err = ch.waitError
	}
	n := int(ch.ev.polled) // the step ended without an error only on GOVERBS_POLLED
	ch.waitPoller, ch.waitError = nil, nil
	ch.fd.release()
	if n > 0 {
		return n, nil
	}
	return 0, err
}

// waitPollQueued is waitPoll's way to the turn when ctx can end or another
// waiter holds it: it polls from Go while it waits, into p from what it
// holds. It returns how many completions p holds, and whether it holds the
// turn: without it once it holds min (or p's size, or one in error), or
// with an error; with it (and fewer) for the thread wait to go on.
func (ch *CompChannel) waitPollQueued(ctx context.Context, p *Poller, min int) (held int, turn bool, err error) {
	for {
		// Queued for the turn, it wakes when the holder files an event
		// of p's CQ, or the CQ closes (acquireFor), to poll again. The
		// poll below makes up for the events filed until now, as it
		// does below for a holder.
		ch.mu.Lock()
		w := ch.watchLocked()
		ch.dropPendingLocked(p.owner)
		ch.mu.Unlock()
		// Arm unless armed, then poll, as the C loop does: completions
		// returned from here must leave the CQ armed too, or a CQ.Wait
		// after this wait, without RequestNotify, never sees the next
		// completion's event (the CQ is disarmed after a CQ.Wait read
		// its event). Armed already, as it stays between WaitThreads,
		// this costs nothing.
		if !p.owner.armed.Load() {
			if err := p.owner.RequestNotify(false); err != nil {
				ch.unwatch(w)
				return held, false, err
			}
		}
		wcs, err := p.poll(held, 1, nil) // the wait holds p.use
		held += len(wcs)
		if err != nil || anyFailed(wcs) || held >= min || held == len(p.wc) {
			ch.unwatch(w)
			return held, false, err
		}
		err = ch.fd.acquireOr(ctx, w)
		ch.unwatch(w)
		switch err {
		case nil:
			return held, true, nil
		case errStopped:
		default:
			return held, false, err
		}
	}
}

// pollEventThread is Poller.WaitThread's step (pollFD.waitThreadHeld): one
// cgo call (goverbs_wait_poll_cq) arms the poller's CQ unless it is armed,
// polls it, and waits for events until the poller holds waitMin
// completions (ev.polled, kept across its calls), re-arming after each of
// the CQ's own events; it comes back to Go only for another CQ's event,
// which it files (deliver), for a wake, or with the completions. The CQ
// is held (use) across each call: CQ.Close's interrupt sets closing and
// kicks the channel, and the write lock it then takes waits for the call
// to return.
func (ch *CompChannel) pollEventThread(w threadWake) (bool, error) {
	p := ch.waitPoller
	cq := p.owner
	for {
		if err := cq.use(); err != nil {
			ch.waitError = err
			return true, nil
		}
		if cq.closing.Load() {
			// Close is about to take the CQ: let go, and let it
			// (the next use waits for it, or fails once it is done).
			cq.done()
			runtime.Gosched()
			continue
		}
		armed := C.int(0)
		if cq.armed.Load() {
			armed = 1
		} else {
			cq.armed.Store(true) // before the arm: see RequestNotify
		}
		r := C.goverbs_wait_poll_cq(C.uintptr_t(ch.getFn), C.uintptr_t(ch.ackFn),
			C.uintptr_t(uintptr(unsafe.Pointer(ch.raw))), C.int(w.waiter), C.uintptr_t(w.kickCQ),
			C.uintptr_t(uintptr(unsafe.Pointer(ch.ev))), C.uintptr_t(uintptr(unsafe.Pointer(p.cq))), C.int(len(p.wc)), C.uintptr_t(uintptr(unsafe.Pointer(&p.wc[0]))), armed,
			C.int(ch.waitMin))
		cq.done()
		switch r {
		case C.GOVERBS_POLLED: // p holds ev.polled completions
			return true, nil
		case C.GOVERBS_WOKEN:
			return false, nil
		case C.GOVERBS_EVENT:
			ch.deliver(ch.ev.cq, cq) // another CQ's
			continue
		case C.GOVERBS_ARM_FAILED:
			cq.armed.Store(false)
			return false, siteReqNotifyCq.Err(syscall.Errno(ch.ev.err))
		case C.GOVERBS_POLL_CQ_FAILED:
			p.err = PollError{Op: "ibv_poll_cq", Ret: int(ch.ev.err)}
			return false, &p.err
		default: // C.GOVERBS_WAIT_FAILED, C.GOVERBS_READ_FAILED
			return false, ch.waitFailed(r)
		}
	}
}

// waitFailed is the error of a thread wait's failed epoll_wait or read
// (GOVERBS_WAIT_FAILED, GOVERBS_READ_FAILED), from the errno in ev.
func (ch *CompChannel) waitFailed(r C.int) error {
	if r == C.GOVERBS_WAIT_FAILED {
		return siteEpollWait.Err(syscall.Errno(ch.ev.err))
	}
	return siteGetCqEvent.Err(syscall.Errno(ch.ev.err))
}

// deliver files an event of raw, read and acknowledged, for the waiter
// (waitOnly: any CQ when nil). It reports true and sets waitGot when the
// event is the waiter's; one of another CQ is counted pending for that
// CQ's own wait. Either way the event disarmed its CQ. An event of a CQ
// the channel does not know is dropped: the CQ was closed after the event
// was read (its ibv_destroy_cq waits only for the acknowledgement), or it
// was made on Raw() outside this package; a Wait must not return it as a
// nil *CQ with no error.
func (ch *CompChannel) deliver(raw *verbs.CQ, only *CQ) bool {
	ch.mu.Lock()
	cq := ch.cqs[raw]
	if cq == nil {
		ch.mu.Unlock()
		return false
	}
	cq.armed.Store(false)
	if only != nil && cq != only {
		ch.pending[cq]++
		ch.anyPending.Store(true)
		ch.wakeQueuedLocked()
		ch.mu.Unlock()
		return false
	}
	ch.mu.Unlock()
	ch.waitGot = cq
	return true
}

// forgetLocked drops cq, destroyed, from the channel: its entry under raw
// (unless a new CQ got the freed address) and the events filed for it; a
// Wait queued for it wakes and sees it closed. ch.mu is held.
func (ch *CompChannel) forgetLocked(raw *verbs.CQ, cq *CQ) {
	if ch.cqs[raw] == cq {
		delete(ch.cqs, raw)
	}
	ch.dropPendingLocked(cq)
	ch.wakeQueuedLocked()
}

// dropPending forgets the events of cq that other waiters read. The caller
// holds the turn, so none is filed while it looks.
func (ch *CompChannel) dropPending(cq *CQ) {
	if !ch.anyPending.Load() {
		return // the usual case, without the lock
	}
	ch.mu.Lock()
	ch.dropPendingLocked(cq)
	ch.mu.Unlock()
}

// dropPendingLocked is dropPending with ch.mu held, and keeps anyPending.
func (ch *CompChannel) dropPendingLocked(cq *CQ) {
	if len(ch.pending) == 0 {
		return
	}
	delete(ch.pending, cq)
	ch.anyPending.Store(len(ch.pending) > 0)
}

// takePending is takePendingLocked for the turn's holder, which need not
// lock when nothing is pending.
func (ch *CompChannel) takePending(only *CQ) *CQ {
	if !ch.anyPending.Load() {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.takePendingLocked(only)
}

func (ch *CompChannel) takePendingLocked(only *CQ) *CQ {
	if len(ch.pending) == 0 {
		return nil // the usual case; ranging over a map costs a few hundred instructions
	}
	for cq, n := range ch.pending {
		if only != nil && cq != only {
			continue
		}
		if n <= 1 {
			ch.dropPendingLocked(cq)
		} else {
			ch.pending[cq] = n - 1
		}
		return cq
	}
	return nil
}

// Wait blocks until this CQ's channel delivers an event for this CQ (events
// for other CQs sharing the channel are kept for their own Wait or for
// CompChannel.Wait). See CompChannel.Wait, allocations included.
func (cq *CQ) Wait(ctx context.Context) error {
	return cq.wait(ctx, "CQ.Wait", false)
}

// WaitThread is Wait done on the calling goroutine's OS thread: see
// CompChannel.WaitThread for what that costs and saves.
func (cq *CQ) WaitThread(ctx context.Context) error {
	return cq.wait(ctx, "CQ.WaitThread", true)
}

func (cq *CQ) wait(ctx context.Context, op string, thread bool) error {
	if err := cq.use(); err != nil {
		return err
	}
	ch := cq.ch
	cq.done() // not held while parked: Close must not wait for the waiter
	if ch == nil {
		return &AttrError{Op: op, Field: "Channel", Reason: "the CQ was made without a completion channel"}
	}
	_, err := ch.wait(ctx, cq, thread)
	return err
}
