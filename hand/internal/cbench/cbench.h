/*
 * cbench: C reference loops for the hand/ benchmarks.
 *
 * Each function runs `iters` iterations of exactly the work the Go fast path
 * does per benchmark iteration, in one call, so a Go benchmark that calls it
 * once with b.N reports the C cost per operation: fill a prelinked chain of n
 * WRs in calloc'd memory (same layout as hand's chains: WRs, then SGEs, then
 * the bad_wr slot), cut it after WR n-1, post it through the static inline,
 * restore the link; or poll n completions and read wr_id and status of each.
 */
#ifndef GOVERBS_CBENCH_H
#define GOVERBS_CBENCH_H

#include <stdint.h>
#include "../../../headers/vendored/include/infiniband/verbs.h"
#include "../../../headers/vendored/include/rdma/rdma_verbs.h"

/* The values every benchmark WR carries (the Go benchmarks use the same). */
#define CB_ADDR 0x10000ull        /* local address of WR i: CB_ADDR + i * CB_LEN */
#define CB_LEN 64u
#define CB_LKEY 0x1234u
#define CB_RADDR 0x200000ull      /* remote address of WR i: CB_RADDR + i * CB_LEN */
#define CB_RKEY 0x5678u
#define CB_QKEY 0x11111111u
#define CB_REMOTE_QPN 0x42u
#define CB_INLINE_LEN 16u

/* Which send WR each benchmark posts. */
enum cb_send_kind {
	CB_SEND,
	CB_SEND_IMM,
	CB_WRITE,
	CB_WRITE_IMM,
	CB_READ,
	CB_CAS,
	CB_FAA,
	CB_INLINE,
	CB_UD,
	CB_NKINDS,
};

/* Which rdma_post_*v each benchmark calls. */
enum cb_rdma_kind {
	CB_RECVV,
	CB_SENDV,
	CB_READV,
	CB_WRITEV,
};

void cb_empty(void);
/* An empty call taking three pointers: what cgo's pointer checks add. */
void cb_empty3(void *a, void *b, void *c);
/* The same with four uintptr_t, as hand's posts take them: no check. */
void cb_empty4u(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d);

/* All return 0, or the errno of the first failure. */
int cb_post_recv(struct ibv_qp *qp, int n, int64_t iters);
int cb_post_srq_recv(struct ibv_srq *srq, int n, int64_t iters);
int cb_post_send(struct ibv_qp *qp, int kind, struct ibv_ah *ah, int n, int64_t iters);
int cb_rdma_post(struct rdma_cm_id *id, int kind, int n, int64_t iters);

/* Polls n completions per iteration; returns 0 or -1 when a poll came back short. */
int cb_poll(struct ibv_cq *cq, int n, int64_t iters);

/* polls times per iteration, an ibv_poll_cq of up to n completions from cq,
 * which must stay empty: the C side of a busy-poll's empty spins. */
int cb_poll_empty(struct ibv_cq *cq, int n, int polls, int64_t iters);
/* A reader of up to n completions of an extended CQ into wc (and ts), with
 * the signature of hand.c's goverbs_poll_ex: the count, or a negative value
 * after a failure, whose value it stores into *fail (an int, 0 on entry). */
typedef int (*cb_poll_ex_reader)(uintptr_t cq, uintptr_t wc, uintptr_t ts, int n, uint64_t wc_flags,
				 uintptr_t fail);
/* Extended polling: calls reader for n completions per iteration into wc and
 * ts (arrays of n), checks *fail, then reads wr_id and status of each;
 * returns 0, -1 when a poll came back short, or, after a failure, its value
 * if an errno, else EIO, and clears *fail, as ExPoller.Poll does. */
int cb_poll_ex(cb_poll_ex_reader reader, struct ibv_cq_ex *cq, struct ibv_wc *wc, uint64_t *ts,
	       int *fail, int n, int64_t iters, uint64_t wc_flags);

#endif
