package hand

/*
#include "wait.h"
*/
import "C"

import (
	"syscall"
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
// in the channel's read (wait.h, "The kick"): a CQ of goverbs' own on the
// channel and an RC QP whose flushed receive raises that CQ's event. It
// lets a thread wait block in the read as perftest's -e does, without
// epoll_wait and an eventfd beside the channel, and still end at once for
// Close, a CQ's Close or a ctx's end: the channel pollFD's threadKicker.
type cqKick struct {
	context, channel uintptr // the struct ibv_context and ibv_comp_channel
	fns              C.struct_goverbs_kick
	c                *C.struct_goverbs_kick // C memory while open; nil when closed
}

// newCQKick returns the kick of channel, to open at its first thread wait,
// or nil when the library lacks a function it needs (the wait then uses
// epoll_wait and an eventfd).
func newCQKick(context *verbs.Context, channel *verbs.CompChannel) threadKicker {
	k := &cqKick{context: uintptr(unsafe.Pointer(context)), channel: uintptr(unsafe.Pointer(channel))}
	for _, f := range []struct {
		name string
		to   *C.uintptr_t
	}{
		{"ibv_alloc_pd", &k.fns.alloc_pd}, {"ibv_dealloc_pd", &k.fns.dealloc_pd},
		{"ibv_create_cq", &k.fns.create_cq}, {"ibv_destroy_cq", &k.fns.destroy_cq},
		{"ibv_create_qp", &k.fns.create_qp}, {"ibv_destroy_qp", &k.fns.destroy_qp},
		{"ibv_modify_qp", &k.fns.modify_qp},
	} {
		a, err := verbs.Address(f.name)
		if err != nil {
			return nil
		}
		*f.to = C.uintptr_t(a)
	}
	return k
}

// open makes the kick and tries it once (goverbs_kick_open); an error says
// which call failed, and leaves nothing behind.
func (k *cqKick) open() error {
	p, err := cmalloc(unsafe.Sizeof(C.struct_goverbs_kick{}))
	if err != nil {
		return err
	}
	c := (*C.struct_goverbs_kick)(p)
	*c = k.fns
	if r := C.goverbs_kick_open(c, C.uintptr_t(k.context), C.uintptr_t(k.channel)); r != 0 {
		err := k.err(c, r)
		cfree(p)
		return err
	}
	k.c = c
	return nil
}

// err is the error of a kick call that returned the errno r.
func (k *cqKick) err(c *C.struct_goverbs_kick, r C.int) error {
	op := "the thread wait's kick"
	if c.failed != nil {
		op += ": " + C.GoString(c.failed)
	}
	return errnoErr(op, syscall.Errno(r))
}

// cq is the kick's CQ, whose events are the kick's; 0 when closed.
func (k *cqKick) cq() uintptr {
	if k.c == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(k.c.cq))
}

// signal raises the kick's event (goverbs_kick_signal).
func (k *cqKick) signal() error {
	if r := C.goverbs_kick_signal(k.c); r != 0 {
		return k.err(k.c, r)
	}
	return nil
}

// rearm makes the kick ready for the next signal, once its event was read
// (goverbs_kick_rearm).
func (k *cqKick) rearm() error {
	if r := C.goverbs_kick_rearm(k.c); r != 0 {
		return k.err(k.c, r)
	}
	return nil
}

// close destroys the kick's QP, CQ and PD, which must go before the
// channel can; open may make it again.
func (k *cqKick) close() {
	if k.c == nil {
		return
	}
	C.goverbs_kick_close(k.c)
	cfree(unsafe.Pointer(k.c))
	k.c = nil
}
