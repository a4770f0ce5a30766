package hand

/*
// The policy of the generated data-path stubs, applied to arguments that are
// all uintptr_t: noescape always, nocallback only where a pointer argument
// must stay on the Go stack (without it, a local passed by address still
// escapes: verbs.PostRecv's bad_wr slot allocated). These take no pointer
// (every argument is an address in C memory) and never call back, and
// nocallback's runtime bookkeeping measured 2.5-3 ns a call here, so they
// have noescape alone.
#cgo noescape goverbs_post_recv
#cgo noescape goverbs_post_srq_recv
#cgo noescape goverbs_post_send
#cgo noescape goverbs_poll_cq
#cgo noescape goverbs_poll_cq_spin
#cgo noescape goverbs_cm_post_recvv
#cgo noescape goverbs_cm_post_send
#cgo noescape goverbs_poll_ex
#cgo noescape goverbs_poll_ex_spin
#include <stdlib.h>
#include "hand.h"
*/
import "C"

import (
	"strconv"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// PostError is a partial post: WR Index of the chain failed with Errno.
// The Posted WRs before it (those from where the call started) are on the
// queue; the failed WR and every WR after it were not posted and are still
// in the chain, so the next post call starts again at Index.
//
// Unless Unknown: the provider failed without naming the WR (it left
// bad_wr NULL), so whether the WR is on the queue is not known. rdma-core's
// rxe does so in two ways: a receive post to a QP in RESET posts none, and
// a send post whose doorbell fails (a QP in RESET or INIT, among others)
// has queued them all, and runs them once the QP is ready.
// What is in doubt depends on the call:
//
//   - PostRecv, PostSRQRecv and PostSend post the chain with one call: any
//     WR from where the call started may be on the queue. The chain keeps
//     them all; Index is the first of them and Posted 0.
//   - PostRecvv, PostSendv, PostReadv and PostWritev post one WR a call:
//     the Posted WRs before Index went, each with a call that succeeded;
//     WR Index alone may be on the queue; those after it were not posted.
//     The chain keeps WR Index and the rest.
//
// Either way, post the WRs in doubt again only if none can have been
// queued; else Skip them, or Reset the chain (move the QP to ERR and drain
// its CQ to learn which ran).
//
// The chain owns the PostError it returns and reuses it: it is valid until
// the chain's next post call.
type PostError struct {
	Op      string        // the C entry point, e.g. "ibv_post_recv"
	Index   int           // index of the failed WR in the chain (0 is the first WR reserved)
	Posted  int           // WRs this call posted before it
	Errno   syscall.Errno // the error the provider returned
	Unknown bool          // the provider did not say which WR failed: see above

	alone bool // Unknown, and WR Index was posted by a call of its own (rdma_post_*v)
}

func (e *PostError) Error() string {
	switch {
	case e.Unknown && e.alone:
		return e.Op + ": WR " + strconv.Itoa(e.Index) + " failed: " + e.Errno.Error() +
			", naming no WR: it may or may not be on the queue (" + strconv.Itoa(e.Posted) +
			" WRs before it posted, none after it)"
	case e.Unknown:
		return e.Op + ": failed: " + e.Errno.Error() + ", naming no WR: the WRs from " + strconv.Itoa(e.Index) +
			" on may or may not be on the queue"
	}
	return e.Op + ": WR " + strconv.Itoa(e.Index) + " failed: " + e.Errno.Error() +
		" (" + strconv.Itoa(e.Posted) + " WRs before it posted)"
}

// Unwrap returns the errno, for errors.Is(err, syscall.ENOMEM) and the like.
func (e *PostError) Unwrap() error { return e.Errno }

// OpcodeError is a post stopped at a WR it cannot post: WR Index of the
// chain carries Opcode, and Op posts Want alone (rdma_post_sendv a send,
// rdma_post_readv an RDMA read, rdma_post_writev an RDMA write), with none
// of the fields the other opcodes need. As with a PostError, the Posted WRs
// before it (from where the call started) are on the queue; WR Index and
// every WR after it stay pending, for PostSend on the same QP, which posts
// each WR with its own opcode, or for Skip or Reset. errors.Is(err,
// syscall.EINVAL) holds.
//
// The chain owns the OpcodeError it returns and reuses it: it is valid
// until the chain's next post call.
type OpcodeError struct {
	Op     string   // the C entry point the call does the work of, e.g. "rdma_post_writev"
	Index  int      // index in the chain of the first WR of another opcode (0 is the first WR reserved)
	Posted int      // WRs this call posted before it
	Opcode WROpcode // that WR's opcode
	Want   WROpcode // the one opcode Op posts
}

func (e *OpcodeError) Error() string {
	return e.Op + ": WR " + strconv.Itoa(e.Index) + " is " + wrOpcodeString(e.Opcode) + ", but " + e.Op +
		" posts " + wrOpcodeString(e.Want) + " only (" + strconv.Itoa(e.Posted) +
		" WRs before it posted; PostSend posts each WR's own opcode)"
}

// Unwrap returns syscall.EINVAL, the errno of a refused argument.
func (e *OpcodeError) Unwrap() error { return syscall.EINVAL }

// wrOpcodeStrings are enum ibv_wr_opcode's names, by value.
var wrOpcodeStrings = [...]string{
	verbs.WROpRDMAWrite:         "IBV_WR_RDMA_WRITE",
	verbs.WROpRDMAWriteWithImm:  "IBV_WR_RDMA_WRITE_WITH_IMM",
	verbs.WROpSend:              "IBV_WR_SEND",
	verbs.WROpSendWithImm:       "IBV_WR_SEND_WITH_IMM",
	verbs.WROpRDMARead:          "IBV_WR_RDMA_READ",
	verbs.WROpAtomicCmpAndSwp:   "IBV_WR_ATOMIC_CMP_AND_SWP",
	verbs.WROpAtomicFetchAndAdd: "IBV_WR_ATOMIC_FETCH_AND_ADD",
	verbs.WROpLocalInv:          "IBV_WR_LOCAL_INV",
	verbs.WROpBindMW:            "IBV_WR_BIND_MW",
	verbs.WROpSendWithInv:       "IBV_WR_SEND_WITH_INV",
	verbs.WROpTSO:               "IBV_WR_TSO",
	verbs.WROpDriver1:           "IBV_WR_DRIVER1",
	verbs.WROpFlush:             "IBV_WR_FLUSH",
	verbs.WROpAtomicWrite:       "IBV_WR_ATOMIC_WRITE",
}

func wrOpcodeString(op verbs.WROpcode) string {
	if int(op) < len(wrOpcodeStrings) && wrOpcodeStrings[op] != "" {
		return wrOpcodeStrings[op]
	}
	return "opcode " + strconv.FormatUint(uint64(op), 10)
}

// errnoOf turns a provider's return value into an errno: providers return a
// positive errno, some a negative one.
func errnoOf(rc int32) syscall.Errno {
	if rc < 0 {
		rc = -rc
	}
	return syscall.Errno(rc)
}

// cmalloc returns n zeroed bytes of C memory.
func cmalloc(n uintptr) (unsafe.Pointer, error) {
	p := C.calloc(1, C.size_t(n))
	if p == nil {
		return nil, syscall.ENOMEM
	}
	return p, nil
}

func cfree(p unsafe.Pointer) { C.free(p) }

// cptr passes a pointer to C memory to hand.c without cgo's Go-pointer check,
// which costs 7-15 ns per pointer argument, as much as the crossing (see
// hand.h). Only ever for C memory: a uintptr keeps nothing alive, and the GC
// may move or free Go memory under it.
func cptr(p unsafe.Pointer) C.uintptr_t { return C.uintptr_t(uintptr(p)) }

// split decodes goverbs_cm_post_*'s result: 0, or index << 32 | errno,
// with GOVERBS_CM_UNKNOWN beside the errno when the provider named no WR.
func split(r C.int64_t) (k int, errno syscall.Errno, unknown bool) {
	low := uint32(r)
	return int(r >> 32), syscall.Errno(low &^ C.GOVERBS_CM_UNKNOWN), low&C.GOVERBS_CM_UNKNOWN != 0
}
