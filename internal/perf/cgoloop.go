package perf

/*
// As hand's data-path stubs: every argument is a number, and none calls
// back into Go.
#cgo noescape perf_cgo_post_send
#cgo noescape perf_cgo_poll_send
#cgo noescape perf_cgo_poll_recv
#cgo noescape perf_cgo_post_recv
#include "cloop.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// cgoState is the cgo loop's state in C memory (cloop.h's perf_cgo),
// made before the loop; perf_cgo_free frees it. (Returning a func that
// frees it would allocate the closure in the timed loop.) With
// Config.Events its polls wait for events as hand's thread wait does at
// min 1, in C, blocked in the channel's read on the goroutine's thread,
// and return to Go at every wake that finds completions (cloop.h): the CQ
// is armed already (run), and the channel's fd is made blocking here, as
// hand's thread wait makes it (hand.CompChannel.Raw).
func (e *engine) cgoState() (C.uintptr_t, error) {
	var channel, get, ack uintptr
	if e.cfg.Events {
		ch := e.cq.Channel().Raw()
		var err error
		if get, err = verbs.Address("ibv_get_cq_event"); err != nil {
			return 0, err
		}
		if ack, err = verbs.Address("ibv_ack_cq_events"); err != nil {
			return 0, err
		}
		if err := syscall.SetNonblock(int(ch.FD), false); err != nil {
			return 0, fmt.Errorf("fcntl(ibv_comp_channel, ~O_NONBLOCK) (cgo loop): %w", err)
		}
		channel = uintptr(unsafe.Pointer(ch))
	}
	st := C.perf_cgo_new(e.cloopArgs(), C.uintptr_t(channel), C.uintptr_t(get), C.uintptr_t(ack))
	if st == 0 {
		return 0, errors.New("perf_cgo_new (cgo loop): out of C memory")
	}
	return st, nil
}

// cgoPollTick ticks before a cgo loop's poll, a spin of polls, as
// engine.poll does; not with Config.Events, where the poll may wait, and a
// goroutine that waited is rescheduled when it wakes (engine.poll).
func (e *engine) cgoPollTick() {
	if !e.cfg.Events {
		e.tick(uint32(e.cfg.Spin))
	}
}

// cgoPolled publishes e.done after a cgo loop's poll with Config.Events,
// where no tick does, as engine.poll does.
func (e *engine) cgoPolled() {
	if e.cfg.Events {
		e.progress.Store(int64(e.done))
	}
}

// cgoClient is bwClient with each post and each spin of polls the C
// loop's own, one cgo call each (CgoLoop): what Go adds over the C loop is
// the crossing, and what the Go loop adds over this is hand/ and Go's code
// of the WRs.
func (e *engine) cgoClient() (time.Duration, error) {
	st, err := e.cgoState()
	if err != nil {
		return 0, err
	}
	defer C.perf_cgo_free(st)
	cfg := e.cfg
	plan := cfg.sendPlan()
	var posted, done int
	start := time.Now()
	peak := peakMeter{last: start}
	for done < cfg.Iters {
		for n := plan.next(posted, done); n > 0; n = plan.next(posted, done) {
			e.tick(1)
			if rc := C.perf_cgo_post_send(st, C.int64_t(posted), C.int(n)); rc != 0 {
				return 0, fmt.Errorf("post send (cgo loop): ibv_post_send: %w", syscall.Errno(rc))
			}
			posted += n
		}
		e.cgoPollTick()
		d := int(C.perf_cgo_poll_send(st, C.int(cfg.Spin)))
		if d < 0 {
			r := C.perf_cgo_result(st)
			return 0, cloopErr(&r)
		}
		if d > done {
			done = d
			e.done = d // published at tick's next look, or below
			e.peak = max(e.peak, peak.rate(done, cfg.Size))
		}
		e.cgoPolled()
	}
	return time.Since(start), nil
}

// cgoServer is bwServer with each spin of polls (with Config.Events, each
// wait) and each post the C loop's own, one cgo call each, as cgoClient.
// With events it returns to Go at every wake, as -wait-min 1.
func (e *engine) cgoServer() (time.Duration, error) {
	st, err := e.cgoState()
	if err != nil {
		return 0, err
	}
	defer C.perf_cgo_free(st)
	var got int
	var start time.Time
	for got < e.cfg.Iters {
		e.cgoPollTick()
		n := int(C.perf_cgo_poll_recv(st, C.int(e.cfg.Spin)))
		if n < 0 {
			r := C.perf_cgo_result(st)
			return 0, cloopErr(&r)
		}
		if n > 0 && got == 0 {
			start = time.Now()
		}
		got += n
		e.done += n
		e.cgoPolled()
		e.posted -= n
		if e.posted <= e.cfg.RxDepth/2 {
			k := e.cfg.RxDepth - e.posted
			e.tick(1)
			if rc := C.perf_cgo_post_recv(st, C.int(k)); rc != 0 {
				return 0, fmt.Errorf("post receive (cgo loop): ibv_post_recv: %w", syscall.Errno(rc))
			}
			e.posted += k
		}
	}
	return time.Since(start), nil
}
