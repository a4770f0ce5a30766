package hand

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// CompChannel is a completion event channel (struct ibv_comp_channel): the
// file descriptor a CQ signals after RequestNotify. One channel may serve
// several CQs.
type CompChannel struct {
	object
	ctx *Context
	raw *verbs.CompChannel
	fd  *pollFD

	mu      sync.Mutex
	cqs     map[*verbs.CQ]*CQ
	pending map[*CQ]int // events read by a CQ.Wait for another CQ
	// anyPending is len(pending) > 0, kept under mu by deliver, which
	// adds, and dropPendingLocked, which every removal goes through, so
	// that the turn's holder, the only one that adds, can skip mu when
	// there is none.
	anyPending atomic.Bool
	// watchers are the wake channels of the waiters queued for the turn
	// (acquireFor, waitPoll), each sent on when an event is filed in
	// pending or a CQ of the channel closes: the holder may never return
	// for them. spareWatch keeps them, empty, for reuse, so that queued
	// waits allocate only when more queue at once than ever before.
	watchers   []chan struct{}
	spareWatch signalPool

	// The one waiter's (pollFD.acquire) state, kept here rather than in a
	// closure so that a wait allocates nothing: readFn is readEvent,
	// stepFn readEventThread and pollStepFn pollEventThread, made once; ev
	// is C memory for ibv_get_cq_event's two results.
	readFn     func(fd uintptr) bool
	stepFn     threadStep
	pollStepFn threadStep
	ev         *cqEvent
	// The library's ibv_get_cq_event and ibv_ack_cq_events
	// (verbs.Address), which the thread wait calls from C.
	getFn, ackFn uintptr
	waitOnly     *CQ
	waitGot      *CQ
	waitError    error
	waitPoller   *Poller // Poller.WaitThread's
	waitMin      int     // and how many completions it waits for
}

// NewCompChannel creates a completion channel whose Wait parks on Go's
// netpoller.
func (c *Context) NewCompChannel() (*CompChannel, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.done()
	// The functions the thread wait calls from C are looked up first, so
	// that a library without them leaves nothing to undo.
	getFn, err := verbs.Address("ibv_get_cq_event")
	if err != nil {
		return nil, err
	}
	ackFn, err := verbs.Address("ibv_ack_cq_events")
	if err != nil {
		return nil, err
	}
	raw, err := verbs.CreateCompChannel(c.raw)
	if err != nil {
		return nil, err
	}
	ev, err := cmalloc(unsafe.Sizeof(cqEvent{}))
	if err != nil {
		verbs.DestroyCompChannel(raw)
		return nil, err
	}
	fd, err := newPollFDKick(raw.FD, "ibv_comp_channel", newCQKick(c.raw, raw))
	if err != nil {
		cfree(ev)
		verbs.DestroyCompChannel(raw)
		return nil, err
	}
	ch := &CompChannel{ctx: c, raw: raw, fd: fd, cqs: map[*verbs.CQ]*CQ{}, pending: map[*CQ]int{}, ev: (*cqEvent)(ev),
		getFn: getFn, ackFn: ackFn}
	ch.readFn = ch.readEvent
	ch.stepFn = ch.readEventThread
	ch.pollStepFn = ch.pollEventThread
	// The first wait's read of the empty channel fails with EAGAIN, and
	// verberr makes each site's error for an errno once: read it now, so
	// that no wait, the first one included, allocates.
	verbs.GetCQEvent(ch.raw, &ch.ev.cq, &ch.ev.context)
	ch.init(fmt.Sprintf("CompChannel fd %d", raw.FD), &c.object)
	return ch, nil
}

// Raw returns the struct ibv_comp_channel, valid until Close. Its fd is
// non-blocking, but for the time from a WaitThread (or Poller.WaitThread)
// to the next Wait: thread waits block in its read.
func (ch *CompChannel) Raw() *verbs.CompChannel { return ch.raw }

// Close destroys the channel, waking a Wait with ErrClosed. It fails with a
// *BusyError while CQs use it.
func (ch *CompChannel) Close() error {
	return ch.close(func() error {
		ch.fd.closeKick() // its CQ is on the channel
		if err := verbs.DestroyCompChannel(ch.raw); err != nil {
			return err
		}
		ch.fd.close()
		cfree(unsafe.Pointer(ch.ev))
		return nil
	}, ch.fd.interrupt, ch.fd.undo)
}

// interrupt is Close's first step: it makes a Poller.WaitThread that
// holds the CQ let go of it, waking it if it is blocked, so that Close can
// destroy the CQ. undo reverts it when Close fails.
func (cq *CQ) interrupt() {
	cq.closing.Store(true)
	if cq.ch != nil {
		cq.ch.fd.kick()
	}
}

func (cq *CQ) undo() { cq.closing.Store(false) }

// CQ is a completion queue (struct ibv_cq), or an extended one (struct
// ibv_cq_ex) when made with CQOptions.Extended. Reap its completions with a
// Poller (NewPoller(cq, n)) or, for an extended CQ, an ExPoller
// (NewExPoller(cq, n)).
//
// A CQ must hold every completion its QPs can have outstanding at once:
// at least the sum of their send and receive queue depths (signaled sends
// only, where sends are unsignaled). A device with no room for a
// completion drops it and reports IBV_EVENT_CQ_ERR, an async event;
// soft-RoCE then moves a QP whose receive could not complete to the
// error state, and loses a send's completion with the QP still working.
// Once Context.NextEvent (or Events) has read that event, Overrun is
// true and every poll of the CQ (CQ.Poll, Poller.Poll, PollSpin, Wait,
// WaitThread, ExPoller.Poll) returns the completions that are left and
// then, instead of an empty poll, an *OverrunError matching ErrCQOverrun,
// for good: which work requests finished is no longer known (a wait
// already parked when the event is read is not woken by it; one begun
// after returns at once). A program that sees it should stop posting to
// the CQ's QPs, close them and the CQ, and make the new CQ deep enough. Only a program that reads the
// async events learns of an overrun: hand reads none on its own.
type CQ struct {
	object
	ctx      *Context
	raw      *verbs.CQ
	rawEx    *verbs.CQEx
	ch       *CompChannel
	size     atomic.Int64 // Resize changes it while others read it
	resizeMu sync.Mutex   // held by Resize
	// wcFlags are CQOptions.WCFlags of an extended CQ, for NewExPoller.
	wcFlags verbs.CreateCQWCFlags
	// armed is whether an event is due after the next completion, of any
	// kind: set by RequestNotify and Poller.WaitThread before they arm,
	// cleared when an event of the CQ is read. Poller.WaitThread, which leaves the CQ
	// armed, reads it to skip the arm (a system call on some providers)
	// that the next wait would otherwise repeat.
	armed atomic.Bool
	// closing is set while Close waits for the CQ's users (its interrupt):
	// Poller.WaitThread, which holds the CQ while it blocks, sees it
	// before it blocks and lets go.
	closing atomic.Bool
	// overrun is the error the polls return once the CQ is empty, set
	// when Context.NextEvent reads an IBV_EVENT_CQ_ERR naming this CQ;
	// made then, once, so that the polls that return it allocate nothing.
	overrun atomic.Pointer[OverrunError]
}

// CQOptions configures NewCQ.
type CQOptions struct {
	// Channel, if set, is where the CQ signals completion events after
	// RequestNotify; Wait needs one.
	Channel *CompChannel
	// Vector is the completion vector (interrupt) to use, below the
	// device's num_comp_vectors.
	Vector int
	// Extended creates the CQ with ibv_create_cq_ex, for ExPoller and the
	// extended completion fields; WCFlags selects them
	// (verbs.WCExWithByteLen and friends).
	Extended bool
	WCFlags  CQWCFlags
}

// checkCQEntries refuses a CQ size the verbs' int cqe cannot hold.
func checkCQEntries(op string, entries int) error {
	return checkRange(op, "entries", entries, 1, math.MaxInt32)
}

// NewCQ creates a completion queue of at least entries entries.
func (c *Context) NewCQ(entries int, o CQOptions) (*CQ, error) {
	if err := checkCQEntries("Context.NewCQ", entries); err != nil {
		return nil, err
	}
	// The device refuses a vector at or above its num_comp_vectors; one the
	// C int would truncate is refused here.
	if err := checkRange("Context.NewCQ", "Vector", o.Vector, 0, math.MaxInt32); err != nil {
		return nil, err
	}
	var chObj *object
	if o.Channel != nil {
		if o.Channel.ctx.raw != c.raw {
			return nil, &AttrError{Op: "Context.NewCQ", Field: "Channel", Reason: "belongs to another device context"}
		}
		chObj = &o.Channel.object
	}
	release, err := useAll(&c.object, chObj)
	if err != nil {
		return nil, err
	}
	defer release()
	var chRaw *verbs.CompChannel
	if o.Channel != nil {
		chRaw = o.Channel.raw
	}
	cq := &CQ{ctx: c, ch: o.Channel}
	if o.Extended {
		attr := verbs.CQInitAttrEx{CQE: uint32(entries), Channel: chRaw, CompVector: uint32(o.Vector), WCFlags: uint64(o.WCFlags)}
		ex, err := verbs.CreateCQEx(c.raw, &attr)
		if err != nil {
			return nil, err
		}
		cq.rawEx, cq.raw, cq.wcFlags = ex, verbs.CQExToCQ(ex), o.WCFlags
	} else {
		raw, err := verbs.CreateCQ(c.raw, int32(entries), nil, chRaw, int32(o.Vector))
		if err != nil {
			return nil, err
		}
		cq.raw = raw
	}
	cq.size.Store(int64(cq.raw.CQE))
	cq.init(fmt.Sprintf("CQ %#x", cq.raw.Handle), &c.object, chObj)
	if o.Channel != nil {
		o.Channel.mu.Lock()
		o.Channel.cqs[cq.raw] = cq
		o.Channel.mu.Unlock()
	}
	c.register(unsafe.Pointer(cq.raw), cq)
	return cq, nil
}

// Raw returns the struct ibv_cq (for an extended CQ, the ibv_cq inside it),
// valid until Close.
func (cq *CQ) Raw() *verbs.CQ { return cq.raw }

// RawEx returns the struct ibv_cq_ex of an extended CQ, or nil.
func (cq *CQ) RawEx() *verbs.CQEx { return cq.rawEx }

// Size returns the number of entries the CQ holds (at least what was asked).
func (cq *CQ) Size() int { return int(cq.size.Load()) }

// Channel returns the completion channel the CQ signals, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.ch }

// Overrun reports whether the device dropped a completion for want of
// room in the CQ, as far as this program knows: an IBV_EVENT_CQ_ERR naming
// the CQ was read by Context.NextEvent or Events. It does not go back to
// false: see CQ for what to do.
func (cq *CQ) Overrun() bool { return cq.overrun.Load() != nil }

// overrunErr returns the overrun's error, or nil: what a poll that found
// the CQ empty returns.
func (cq *CQ) overrunErr() error {
	if e := cq.overrun.Load(); e != nil {
		return e
	}
	return nil
}

// markOverrun records an IBV_EVENT_CQ_ERR of the CQ, the first one only.
func (cq *CQ) markOverrun() {
	if cq.overrun.Load() == nil {
		cq.overrun.CompareAndSwap(nil, &OverrunError{CQ: cq.label, Size: cq.Size()})
	}
}

// RequestNotify arms the CQ: the next completion (with solicitedOnly, the
// next solicited one) raises one event on its channel. Poll the CQ empty
// after arming and before Wait, or a completion that arrived before the
// arm is never signalled.
func (cq *CQ) RequestNotify(solicitedOnly bool) error {
	if err := cq.use(); err != nil {
		return err
	}
	defer cq.done()
	if cq.ch == nil {
		return &AttrError{Op: "CQ.RequestNotify", Field: "Channel", Reason: "the CQ was made without a completion channel"}
	}
	so := int32(0)
	if solicitedOnly {
		so = 1
	}
	// Set before the arm: set after it, an event the arm raised, read in
	// between, would leave it set on a disarmed CQ. An arm for solicited
	// completions only leaves it clear: Poller.WaitThread arms for any.
	cq.armed.Store(!solicitedOnly)
	if err := verbs.ReqNotifyCQ(cq.raw, so); err != nil {
		cq.armed.Store(false)
		return err
	}
	return nil
}

// Poll reaps up to len(wc) completions into wc (ibv_poll_cq) and returns
// how many. It is the simple path for control code and tests; the data
// path uses a Poller, which polls into C memory without allocating. A
// failed poll (a negative ibv_poll_cq, the provider's code) is a
// *PollError, as a Poller's is. An empty poll of a CQ that overran is an
// *OverrunError (see CQ).
func (cq *CQ) Poll(wc []verbs.WC) (int, error) {
	if err := cq.use(); err != nil {
		return 0, err
	}
	defer cq.done()
	if len(wc) == 0 {
		return 0, nil
	}
	n, err := verbs.PollCQ(cq.raw, int32(len(wc)), &wc[0])
	if n == 0 && err == nil {
		return 0, cq.overrunErr()
	}
	return n, pollCQErr(err)
}

// Resize changes the number of entries (ibv_resize_cq).
func (cq *CQ) Resize(entries int) error {
	if err := checkCQEntries("CQ.Resize", entries); err != nil {
		return err
	}
	if err := cq.use(); err != nil {
		return err
	}
	defer cq.done()
	// One Resize at a time: each reads back the size ibv_resize_cq left in
	// struct ibv_cq, plain C memory that another Resize could change
	// between its call and the read, and store the other's size last.
	cq.resizeMu.Lock()
	defer cq.resizeMu.Unlock()
	if err := verbs.ResizeCQ(cq.raw, int32(entries)); err != nil {
		return err
	}
	cq.size.Store(int64(cq.raw.CQE))
	return nil
}

// Close destroys the CQ, waking a CQ.Wait with ErrClosed. It fails with a
// *BusyError while QPs or SRQs use it.
func (cq *CQ) Close() error {
	err := cq.close(func() error {
		if err := verbs.DestroyCQ(cq.raw); err != nil {
			return err
		}
		if cq.ch != nil {
			cq.ch.mu.Lock()
			cq.ch.forgetLocked(cq.raw, cq)
			cq.ch.mu.Unlock()
		}
		cq.ctx.unregister(unsafe.Pointer(cq.raw), cq)
		return nil
	}, cq.interrupt, cq.undo)
	if err == nil && cq.ch != nil {
		cq.ch.fd.kick() // a CQ.Wait parked for this CQ sees it closed
	}
	return err
}
