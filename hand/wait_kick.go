package hand

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// A threadKicker ends a thread waiter's blocking read of its fd (pollFD)
// with an event of its own on the fd: cqKick for a completion channel, and
// the tests' stand-ins. The pollFD's lock serializes its calls.
type threadKicker interface {
	// open makes the kicker ready, once, at the first thread wait; an
	// error leaves nothing behind, and the waits use epoll_wait instead.
	open() error
	// cq is what the fd's reads return for the kicker's events (for a
	// completion channel, the kick's CQ); 0 when closed.
	cq() uintptr
	// signal raises one event on the fd.
	signal() error
	// rearm makes the kicker ready for the next signal, once its event
	// was read.
	rearm() error
	// close undoes open; open may make it again.
	close()
}

// cqKick is what ends a completion channel's thread wait while it blocks
// in the channel's read: the channel pollFD's threadKicker. It lets a
// thread wait block in the read as perftest's -e does, rather than in
// epoll_wait with an eventfd beside the channel (about 1,000 kernel
// instructions a wake at send_bw 64 B), and still end at once for Close,
// a CQ's Close or a ctx's end.
//
// Only an event ends that read: the Go runtime restarts it after a
// signal, and closing the fd does not end a read in progress. So the kick
// makes one: a CQ of its own on the channel, armed, and an RC QP of its
// own with one receive posted. signal moves the QP to the error state,
// which flushes the receive (the IB specification's rule for a QP in
// error, on which the kernel's ib_drain_rq relies too); the flush's
// completion raises the kick CQ's event, and the wait that reads it
// (goverbs_wait_cq_event, given cq) is woken. rearm then makes the kick
// ready again: it reaps the flush, resets the QP, brings it to INIT on
// port 1, posts the receive and arms the CQ.
//
// All of it is control path, made through the generated stubs: only the
// wait's read and its comparison with the kick's CQ run at every wake, in
// C (wait.c).
type cqKick struct {
	context *verbs.Context
	channel *verbs.CompChannel
	// What open made, nil when closed; mem is C memory for the calls'
	// arguments and results, so that none passes a Go pointer.
	pd  *verbs.PD
	kcq *verbs.CQ
	qp  *verbs.QP
	mem *kickMem
}

// kickMem is the kick's C memory: the QP's attributes for CreateQP and
// ModifyQP, its one receive WR (no scatter list) and bad_wr slot, and a
// completion to reap the flush into.
type kickMem struct {
	init verbs.QPInitAttr
	attr verbs.QPAttr
	wr   verbs.RecvWR
	bad  *verbs.RecvWR
	wc   verbs.WC
}

// kickFunctions are the extern functions of libibverbs the kick calls;
// the rest (ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are verbs.h's
// inlines, which call the provider.
var kickFunctions = [...]string{
	"ibv_alloc_pd", "ibv_dealloc_pd", "ibv_create_cq", "ibv_destroy_cq",
	"ibv_create_qp", "ibv_destroy_qp", "ibv_modify_qp",
}

// kickOp prefixes what a kick's error names.
const kickOp = "the thread wait's kick: "

// newCQKick returns the kick of channel, to open at its first thread wait,
// or nil when the library lacks a function it needs (the wait then uses
// epoll_wait and an eventfd).
func newCQKick(context *verbs.Context, channel *verbs.CompChannel) threadKicker {
	for _, f := range kickFunctions {
		if verbs.Available(f) != nil {
			return nil
		}
	}
	return &cqKick{context: context, channel: channel}
}

// open makes the kick on the channel's device and tries it once before it
// arms it: a device whose QP does not flush within a second is refused
// (ETIMEDOUT), so that a wait never blocks on a kick that cannot come. An
// error names the call that failed, and open leaves nothing behind.
func (k *cqKick) open() (err error) {
	p, err := cmalloc(unsafe.Sizeof(kickMem{}))
	if err != nil {
		return err
	}
	k.mem = (*kickMem)(p)
	defer func() {
		if err != nil {
			k.close()
		}
	}()
	if k.pd, err = verbs.AllocPD(k.context); err != nil {
		return fmt.Errorf("%s%w", kickOp, err)
	}
	if k.kcq, err = verbs.CreateCQ(k.context, 1, nil, k.channel, 0); err != nil {
		return fmt.Errorf("%s%w", kickOp, err)
	}
	k.mem.init = verbs.QPInitAttr{
		SendCQ: k.kcq,
		RecvCQ: k.kcq,
		Cap:    verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		QPType: verbs.QPTRC,
	}
	if k.qp, err = verbs.CreateQP(k.pd, &k.mem.init); err != nil {
		return fmt.Errorf("%sRC QP: %w", kickOp, err)
	}
	// Once unarmed, to see that the QP flushes, then armed.
	if err := k.ready(false); err != nil {
		return err
	}
	if err := k.signal(); err != nil {
		return err
	}
	if err := k.reap(); err != nil {
		return err
	}
	return k.ready(true)
}

// modify moves the QP to state; to INIT on port 1.
func (k *cqKick) modify(state verbs.QPState) error {
	a := &k.mem.attr
	*a = verbs.QPAttr{QPState: state}
	mask := verbs.QPAttrState
	if state == verbs.QPSInit {
		a.PortNum = 1
		mask |= verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags
	}
	if err := verbs.ModifyQP(k.qp, a, mask); err != nil {
		if state == verbs.QPSErr {
			return fmt.Errorf("%sQP to the error state: %w", kickOp, err)
		}
		return fmt.Errorf("%s%w", kickOp, err)
	}
	return nil
}

// reap polls the kick's CQ until the flushed receive's completion is
// there, for up to a second.
func (k *cqKick) reap() error {
	for range 10000 {
		n, err := verbs.PollCQ(k.kcq, 1, &k.mem.wc)
		if err != nil {
			return fmt.Errorf("%s%w", kickOp, err)
		}
		if n > 0 {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
	return fmt.Errorf("%sibv_poll_cq: the flushed receive's completion did not come within a second: %w", kickOp, syscall.ETIMEDOUT)
}

// ready resets the QP, brings it to INIT and posts its receive; and arms
// the CQ when arm is set.
func (k *cqKick) ready(arm bool) error {
	if err := k.modify(verbs.QPSReset); err != nil {
		return err
	}
	if err := k.modify(verbs.QPSInit); err != nil {
		return err
	}
	k.mem.wr = verbs.RecvWR{}
	if err := verbs.PostRecv(k.qp, &k.mem.wr, &k.mem.bad); err != nil {
		return fmt.Errorf("%s%w", kickOp, err)
	}
	if arm {
		if err := verbs.ReqNotifyCQ(k.kcq, 0); err != nil {
			return fmt.Errorf("%s%w", kickOp, err)
		}
	}
	return nil
}

// cq is the kick's CQ, whose events are the kick's; 0 when closed.
func (k *cqKick) cq() uintptr {
	if k.mem == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(k.kcq))
}

// signal raises the kick's event: the QP's move to the error state
// flushes its receive.
func (k *cqKick) signal() error { return k.modify(verbs.QPSErr) }

// rearm makes the kick ready for the next signal, once its event was read.
func (k *cqKick) rearm() error {
	if err := k.reap(); err != nil {
		return err
	}
	return k.ready(true)
}

// close destroys the kick's QP, CQ and PD, which must go before the
// channel can; open may make it again.
func (k *cqKick) close() {
	if k.mem == nil {
		return
	}
	if k.qp != nil {
		verbs.DestroyQP(k.qp)
	}
	if k.kcq != nil {
		verbs.DestroyCQ(k.kcq)
	}
	if k.pd != nil {
		verbs.DeallocPD(k.pd)
	}
	k.pd, k.kcq, k.qp = nil, nil, nil
	cfree(unsafe.Pointer(k.mem))
	k.mem = nil
}
