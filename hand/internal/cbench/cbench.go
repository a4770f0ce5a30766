// Package cbench holds the C reference loops of the hand/ benchmarks: each
// function runs N iterations of the work the Go fast path does per iteration,
// in a single cgo call, so a benchmark calling it once with b.N measures the
// C cost per operation on the same fake provider in the same run.
//
// The WRs it posts carry the values below; the Go benchmarks post the same.
// It is for benchmarks only.
package cbench

/*
#cgo noescape cb_empty3
#cgo nocallback cb_empty3
#cgo noescape cb_empty4u
#cgo nocallback cb_empty4u
#cgo noescape cb_empty_post
#cgo nocallback cb_empty_post
#cgo noescape cb_empty_poll
#cgo nocallback cb_empty_poll
#cgo noescape cb_empty_rdma4
#cgo nocallback cb_empty_rdma4
#cgo noescape cb_empty_rdma5
#cgo nocallback cb_empty_rdma5
#cgo noescape cb_empty_rdma7
#cgo nocallback cb_empty_rdma7
#include "cbench.h"

// Empty functions of the generated data-path stubs' C shapes: the
// arguments a stub passes (pointers as unsigned char *, which cgo does not
// check, as the stubs pass them), its result, and errno where the stub
// reads it. static inline, as the stubs' wrappers are, so that the call cgo
// makes is the same length.
static inline int cb_empty_post(unsigned char *a, unsigned char *b, unsigned char *c) { return 0; }
static inline int cb_empty_poll(unsigned char *cq, int n, unsigned char *wc) { return n; }
static inline int cb_empty_rdma4(unsigned char *id, unsigned char *ctx, unsigned char *sgl, int nsge) { return 0; }
static inline int cb_empty_rdma5(unsigned char *id, unsigned char *ctx, unsigned char *sgl, int nsge, int flags) { return 0; }
static inline int cb_empty_rdma7(unsigned char *id, unsigned char *ctx, unsigned char *sgl, int nsge, int flags,
	uint64_t raddr, uint32_t rkey) { return 0; }
*/
import "C"

import (
	"syscall"
	"unsafe"
)

// What WR i of a benchmark chain carries.
const (
	Addr      = C.CB_ADDR // local address of WR i: Addr + i*Len
	Len       = C.CB_LEN
	LKey      = C.CB_LKEY
	RAddr     = C.CB_RADDR // remote address of WR i: RAddr + i*Len
	RKey      = C.CB_RKEY
	QKey      = C.CB_QKEY
	RemoteQPN = C.CB_REMOTE_QPN
	InlineLen = C.CB_INLINE_LEN
)

// Signaled is IBV_SEND_SIGNALED, the send flag every benchmark WR carries,
// as an untyped constant: it fits a flags parameter or field of any integer
// type, whichever Go type the generated packages give it.
const Signaled = C.IBV_SEND_SIGNALED

// InlineData is what inline sends carry (InlineLen bytes, NUL included).
const InlineData = "goverbs-inline!\x00"

// SendKind selects the send WR a benchmark posts.
type SendKind int

// The send kinds. Every one is signaled; UD sends use one AH, RemoteQPN and QKey.
const (
	Send     SendKind = C.CB_SEND
	SendImm  SendKind = C.CB_SEND_IMM // imm_data = htobe32(i)
	Write    SendKind = C.CB_WRITE
	WriteImm SendKind = C.CB_WRITE_IMM // imm_data = htobe32(i)
	Read     SendKind = C.CB_READ
	CAS      SendKind = C.CB_CAS // compare i, swap i+1, length 8
	FAA      SendKind = C.CB_FAA // add 1, length 8
	Inline   SendKind = C.CB_INLINE
	UD       SendKind = C.CB_UD
)

// RDMAKind selects the rdma_post_*v a benchmark calls.
type RDMAKind int

// The rdma_verbs.h vectored posts.
const (
	Recvv  RDMAKind = C.CB_RECVV
	Sendv  RDMAKind = C.CB_SENDV
	Readv  RDMAKind = C.CB_READV
	Writev RDMAKind = C.CB_WRITEV
)

// Empty is an empty cgo call: the cost of one crossing.
func Empty() { C.cb_empty() }

// EmptyPtr3 is an empty cgo call taking three pointers (to C memory): the
// crossing plus cgo's check of each pointer argument for Go pointers, which
// every generated stub with pointer parameters pays (ibv_post_recv has three).
func EmptyPtr3(a, b, c unsafe.Pointer) { C.cb_empty3(a, b, c) }

// EmptyUintptr4 is an empty cgo call taking four addresses as uintptr_t, as
// hand's posts do: the crossing plus the arguments, with nothing to check.
func EmptyUintptr4(a, b, c, d uintptr) {
	C.cb_empty4u(C.uintptr_t(a), C.uintptr_t(b), C.uintptr_t(c), C.uintptr_t(d))
}

// EmptyPost, EmptyPoll and EmptyRDMA4/5/7 are empty cgo calls of the
// shapes of the generated data-path stubs: ibv_post_send, ibv_post_recv
// and ibv_post_srq_recv (three pointers, an int back); ibv_poll_cq (two
// pointers and a count); rdma_post_recvv (4 arguments), rdma_post_sendv (5),
// rdma_post_readv and rdma_post_writev (7), which read errno. Each is what
// one crossing of that stub costs with nothing done in C: BenchmarkGenerated
// holds each stub to C plus its own.
func EmptyPost(p unsafe.Pointer) int {
	return int(C.cb_empty_post((*C.uchar)(p), (*C.uchar)(p), (*C.uchar)(p)))
}

// EmptyPoll: see EmptyPost.
func EmptyPoll(p unsafe.Pointer, n int) int {
	return int(C.cb_empty_poll((*C.uchar)(p), C.int(n), (*C.uchar)(p)))
}

// EmptyRDMA4: see EmptyPost.
func EmptyRDMA4(p unsafe.Pointer) error {
	r, err := C.cb_empty_rdma4((*C.uchar)(p), (*C.uchar)(p), (*C.uchar)(p), 1)
	if r == 0 {
		return nil
	}
	return err
}

// EmptyRDMA5: see EmptyPost.
func EmptyRDMA5(p unsafe.Pointer) error {
	r, err := C.cb_empty_rdma5((*C.uchar)(p), (*C.uchar)(p), (*C.uchar)(p), 1, Signaled)
	if r == 0 {
		return nil
	}
	return err
}

// EmptyRDMA7: see EmptyPost.
func EmptyRDMA7(p unsafe.Pointer) error {
	r, err := C.cb_empty_rdma7((*C.uchar)(p), (*C.uchar)(p), (*C.uchar)(p), 1, Signaled, RAddr, RKey)
	if r == 0 {
		return nil
	}
	return err
}

func errnoErr(r C.int) error {
	if r == 0 {
		return nil
	}
	if r < 0 {
		return syscall.EAGAIN
	}
	return syscall.Errno(r)
}

// PostRecv posts iters chains of n receive WRs to qp (a struct ibv_qp *).
func PostRecv(qp unsafe.Pointer, n, iters int) error {
	return errnoErr(C.cb_post_recv((*C.struct_ibv_qp)(qp), C.int(n), C.int64_t(iters)))
}

// PostSRQRecv posts iters chains of n receive WRs to srq (a struct ibv_srq *).
func PostSRQRecv(srq unsafe.Pointer, n, iters int) error {
	return errnoErr(C.cb_post_srq_recv((*C.struct_ibv_srq)(srq), C.int(n), C.int64_t(iters)))
}

// PostSend posts iters chains of n send WRs of one kind to qp; ah is the
// struct ibv_ah * of UD sends (nil otherwise).
func PostSend(qp unsafe.Pointer, kind SendKind, ah unsafe.Pointer, n, iters int) error {
	return errnoErr(C.cb_post_send((*C.struct_ibv_qp)(qp), C.int(kind), (*C.struct_ibv_ah)(ah),
		C.int(n), C.int64_t(iters)))
}

// RDMAPost calls an rdma_post_*v n times per iteration on id (a struct rdma_cm_id *).
func RDMAPost(id unsafe.Pointer, kind RDMAKind, n, iters int) error {
	return errnoErr(C.cb_rdma_post((*C.struct_rdma_cm_id)(id), C.int(kind), C.int(n), C.int64_t(iters)))
}

// Poll reaps n completions per iteration from cq (a struct ibv_cq *); an
// iteration that gets fewer fails with EAGAIN.
func Poll(cq unsafe.Pointer, n, iters int) error {
	return errnoErr(C.cb_poll((*C.struct_ibv_cq)(cq), C.int(n), C.int64_t(iters)))
}

// PollEmpty polls cq (a struct ibv_cq *) for up to n completions polls
// times per iteration, and fails with EAGAIN if a poll finds any.
func PollEmpty(cq unsafe.Pointer, n, polls, iters int) error {
	return errnoErr(C.cb_poll_empty((*C.struct_ibv_cq)(cq), C.int(n), C.int(polls), C.int64_t(iters)))
}

// PollEx reaps n completions per iteration from cq (a struct ibv_cq_ex *)
// with reader, a C function of goverbs_poll_ex's signature, into wc (n
// struct ibv_wc) and ts (n uint64_t), with fail (an int) for its failure,
// all C memory, reading the fields wcFlags (enum ibv_create_cq_wc_flags)
// selects; an iteration that gets fewer fails with EAGAIN, a failure with
// its errno (EIO for a provider's negative code).
func PollEx(reader, cq, wc, ts, fail unsafe.Pointer, n, iters int, wcFlags uint64) error {
	return errnoErr(C.cb_poll_ex(C.cb_poll_ex_reader(reader), (*C.struct_ibv_cq_ex)(cq),
		(*C.struct_ibv_wc)(wc), (*C.uint64_t)(ts), (*C.int)(fail), C.int(n), C.int64_t(iters),
		C.uint64_t(wcFlags)))
}
