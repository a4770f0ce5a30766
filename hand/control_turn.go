package hand

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// turn lets one waiter at a time hold an event fd (pollFD): a lock whose
// waiters give up when their context ends, and which is handed to them in
// the order they came.
//
// A buffered channel used as a semaphore does the same, but each acquire
// and release locks the channel's runtime lock: about 300 instructions a
// wait on the data path (make perf-insns, send_bw with events). A turn
// nobody else wants costs one compare-and-swap to take and one to give back
// (state); mu is taken only when a waiter must queue, or must be handed the
// turn. A waiter that finds the turn taken queues a channel of its own,
// which release sends on; the channels are kept for reuse, so a contended
// turn allocates only when more waiters queue than ever before.
type turn struct {
	// state is turnFree, turnHeld, or turnQueued: held, and a waiter
	// may be queued, so release must take mu. It leaves turnQueued only
	// under mu.
	state   atomic.Int32
	mu      sync.Mutex
	waiters []chan struct{} // in arrival order; each is sent on once, when handed the turn
	spare   signalPool      // empty channels of waiters gone
}

const (
	turnFree int32 = iota
	turnHeld
	turnQueued
)

// signalPool keeps the one-slot wake channels of waiters gone, empty, for
// the next ones, so that waiting allocates only when more wait at once
// than ever before. Its owner's lock guards it.
type signalPool struct{ spare []chan struct{} }

// get returns an empty wake channel.
func (p *signalPool) get() chan struct{} {
	if n := len(p.spare); n > 0 {
		ch := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return ch
	}
	return make(chan struct{}, 1)
}

// put keeps ch, which must be empty, for get.
func (p *signalPool) put(ch chan struct{}) { p.spare = append(p.spare, ch) }

// errStopped is acquireOr's answer when stop came before the turn.
var errStopped = errors.New("goverbs: stopped waiting for the turn")

// acquire takes the turn, waiting for it if needed; it returns ctx.Err()
// without the turn when ctx ends first.
func (t *turn) acquire(ctx context.Context) error { return t.acquireOr(ctx, nil) }

// acquireOr is acquire that also gives up, with errStopped, when stop is
// ready (closed) before the turn comes: a queued waiter's way to learn
// that what it waits for may have come without the turn (another waiter
// read its event). A nil stop never is. When the turn and stop come
// together, the turn wins: the caller checks again with it held.
func (t *turn) acquireOr(ctx context.Context, stop <-chan struct{}) error {
	if t.state.CompareAndSwap(turnFree, turnHeld) {
		return nil
	}
	t.mu.Lock()
	for {
		s := t.state.Load()
		if s == turnFree && t.state.CompareAndSwap(turnFree, turnHeld) {
			t.mu.Unlock()
			return nil
		}
		// Held: mark it queued before queueing, so that the holder's
		// release comes here for the waiter. A release that freed it
		// first fails the swap, and the loop takes the turn.
		if s == turnQueued || (s == turnHeld && t.state.CompareAndSwap(turnHeld, turnQueued)) {
			break
		}
	}
	ch := t.spare.get()
	t.waiters = append(t.waiters, ch)
	t.mu.Unlock()

	stopped := false
	select {
	case <-ch:
		t.reuse(ch)
		return nil
	case <-ctx.Done(): // nil, never ready, when ctx cannot end
	case <-stop:
		stopped = true
	}
	t.mu.Lock()
	if i := slices.Index(t.waiters, ch); i >= 0 {
		t.waiters = slices.Delete(t.waiters, i, i+1)
		t.spare.put(ch)
		t.mu.Unlock()
		if stopped {
			return errStopped
		}
		return ctx.Err()
	}
	t.mu.Unlock()
	// release handed the turn to this waiter as it gave up: the send is in
	// ch already (release sends under mu). Keep it if stopped, else pass
	// it on.
	<-ch
	t.reuse(ch)
	if stopped {
		return nil
	}
	t.release()
	return ctx.Err()
}

// tryAcquire takes the turn if nobody holds it, and reports whether it did.
func (t *turn) tryAcquire() bool {
	return t.state.CompareAndSwap(turnFree, turnHeld)
}

// release hands the turn to the longest waiter, or frees it.
func (t *turn) release() {
	if t.state.CompareAndSwap(turnHeld, turnFree) {
		return // nobody queued
	}
	t.mu.Lock()
	if len(t.waiters) > 0 {
		ch := t.waiters[0]
		t.waiters = slices.Delete(t.waiters, 0, 1)
		if len(t.waiters) == 0 {
			t.state.Store(turnHeld) // by ch's waiter now, with nobody behind it
		}
		ch <- struct{}{} // never blocks: ch is empty until this send
	} else {
		t.state.Store(turnFree) // the queued waiters gave up
	}
	t.mu.Unlock()
}

func (t *turn) reuse(ch chan struct{}) {
	t.mu.Lock()
	t.spare.put(ch)
	t.mu.Unlock()
}
