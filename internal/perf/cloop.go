package perf

/*
#include <stdlib.h>
#include "cloop.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

// Loop is the language of the bandwidth loops (-loop).
type Loop string

const (
	// GoLoop runs the loops of engine.go over hand/: a cgo crossing per
	// post and per poll.
	GoLoop Loop = "go"
	// CLoop runs the same loops written in C (cloop.c) in the same process,
	// one crossing a run: against GoLoop it prices the Go loop, against
	// perftest the Go process around it.
	CLoop Loop = "c"
	// CgoLoop runs the loops in Go with CLoop's own post and poll, a cgo
	// crossing each (cgoloop.go): against CLoop it prices the crossings,
	// and against GoLoop what hand/ and Go's code of the WRs add to them.
	// With Config.Events its polls wait in C as hand's thread wait does
	// at min 1, which prices hand's wait around that C.
	CgoLoop Loop = "cgo"
)

// cloopArgs describes the engine's run to cloop.c.
func (e *engine) cloopArgs() C.struct_perf_cloop_args {
	var op verbs.WROpcode
	switch e.cfg.Mode {
	case SendBW:
		op = verbs.WROpSend
	case WriteBW:
		op = verbs.WROpRDMAWrite
	case ReadBW:
		op = verbs.WROpRDMARead
	}
	return C.struct_perf_cloop_args{
		qp:        C.uintptr_t(uintptr(unsafe.Pointer(e.qp.Raw()))),
		cq:        C.uintptr_t(uintptr(unsafe.Pointer(e.cq.Raw()))),
		addr:      C.uint64_t(e.sge.Addr),
		raddr:     C.uint64_t(e.raddr),
		length:    C.uint32_t(e.sge.Length),
		lkey:      C.uint32_t(e.sge.LKey),
		rkey:      C.uint32_t(e.rkey),
		opcode:    C.int(op),
		iters:     C.int64_t(e.cfg.Iters),
		post_list: C.int(e.cfg.PostList),
		cq_mod:    C.int(e.cfg.CQMod),
		tx_depth:  C.int(e.cfg.TxDepth),
		rx_depth:  C.int(e.cfg.RxDepth),
		posted:    C.int(e.posted),
		progress:  C.uintptr_t(uintptr(unsafe.Pointer(e.cprogress))),
	}
}

// newCProgress allocates the C loop's progress count (perf_cloop_args
// progress) in C memory, 0: C stores into it while Go reads it.
func newCProgress() *int64 {
	p := (*int64)(C.malloc(8)) // cgo's malloc never returns nil
	*p = 0
	return p
}

func freeCProgress(p *int64) { C.free(unsafe.Pointer(p)) }

// cloopErr is the error of a C loop that stopped, nil when it finished.
func cloopErr(r *C.struct_perf_cloop_result) error {
	if r.err == 0 {
		return nil
	}
	op := C.GoString(r.op)
	if op == "completion" {
		return fmt.Errorf("completion of WR %d: %w", uint64(r.wr_id), hand.StatusError(verbs.WCStatus(r.err)))
	}
	return fmt.Errorf("%s (C loop): %w", op, syscall.Errno(r.err))
}

// cloopClient is bwClient in C.
func (e *engine) cloopClient() (time.Duration, error) {
	r := C.perf_cloop_client(e.cloopArgs())
	if err := cloopErr(&r); err != nil {
		return 0, err
	}
	e.peak = float64(r.peak)
	return time.Duration(r.ns), nil
}

// cloopServer is bwServer in C.
func (e *engine) cloopServer() (time.Duration, error) {
	r := C.perf_cloop_server(e.cloopArgs())
	e.posted = int(r.posted)
	if err := cloopErr(&r); err != nil {
		return 0, err
	}
	return time.Duration(r.ns), nil
}

// cloopPlan asks cloop.h's perf_cloop_next and perf_cloop_signaled what
// p.next(posted, done) and p.signaled(posted) say, for the test that
// holds the C loop to the Go one.
func cloopPlan(p sendPlan, posted, done int) (next int, signaled bool) {
	a := C.struct_perf_cloop_args{iters: C.int64_t(p.Iters), post_list: C.int(p.PostList), cq_mod: C.int(p.CQMod), tx_depth: C.int(p.TxDepth)}
	return int(C.perf_cloop_next(&a, C.int64_t(posted), C.int64_t(done))), C.perf_cloop_signaled(&a, C.int64_t(posted)) != 0
}
