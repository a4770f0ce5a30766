package perf

/*
#cgo CFLAGS: -I${SRCDIR}/../../../headers/vendored/include
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
)

// cgoState is the cgo loop's state in C memory (cloop.h's perf_cgo),
// made before the loop; perf_cgo_free frees it. (Returning a func that
// frees it would allocate the closure in the timed loop.)
func (e *engine) cgoState() (C.uintptr_t, error) {
	st := C.perf_cgo_new(e.cloopArgs())
	if st == 0 {
		return 0, errors.New("perf_cgo_new (cgo loop): out of C memory")
	}
	return st, nil
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
		e.tick(uint32(cfg.Spin))
		d := int(C.perf_cgo_poll_send(st, C.int(cfg.Spin)))
		if d < 0 {
			r := C.perf_cgo_result(st)
			return 0, cloopErr(&r)
		}
		if d > done {
			done = d
			e.done = d // published at tick's next look
			e.peak = max(e.peak, peak.rate(done, cfg.Size))
		}
	}
	return time.Since(start), nil
}

// cgoServer is bwServer busy-polling, with each spin of polls and each
// post the C loop's own, one cgo call each, as cgoClient.
func (e *engine) cgoServer() (time.Duration, error) {
	st, err := e.cgoState()
	if err != nil {
		return 0, err
	}
	defer C.perf_cgo_free(st)
	var got int
	var start time.Time
	for got < e.cfg.Iters {
		e.tick(uint32(e.cfg.Spin))
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
