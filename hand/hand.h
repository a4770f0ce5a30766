/*
 * C side of package hand: the loops Go cannot run without one cgo crossing
 * per step. Each walks a chain or a CQ in C memory and returns once.
 *
 * Pointers come in as uintptr_t: they always point to C memory (hand's
 * chains and arrays, the provider's objects), and cgo would otherwise check
 * every pointer argument for Go pointers, about 6 ns apiece, as much as the
 * rest of the call's overhead.
 */
#ifndef GOVERBS_HAND_H
#define GOVERBS_HAND_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_verbs.h>

/* Which rdma_post_*v goverbs_cm_post_send calls for each WR. */
enum goverbs_cm_kind {
	GOVERBS_CM_SENDV,
	GOVERBS_CM_READV,
	GOVERBS_CM_WRITEV,
};

/*
 * goverbs_cm_post_recvv calls rdma_post_recvv on id (a struct rdma_cm_id *)
 * once for each of the n WRs from wr (a struct ibv_recv_wr *) on (context = wr_id, the WR's scatter list), stopping at the first
 * failure. It returns 0, or (index << 32 | errno) of the WR that failed.
 */
int64_t goverbs_cm_post_recvv(uintptr_t id, uintptr_t wr, int n);

/*
 * goverbs_cm_post_send is goverbs_cm_post_recvv for rdma_post_sendv,
 * rdma_post_readv and rdma_post_writev: it passes each WR's wr_id,
 * scatter list, send_flags and (read / write) wr.rdma.
 */
int64_t goverbs_cm_post_send(uintptr_t id, int kind, uintptr_t wr, int n);

/*
 * goverbs_poll_ex reaps up to n completions from cq (a struct ibv_cq_ex *)
 * with ibv_start_poll / ibv_next_poll / ibv_end_poll into wc (a struct
 * ibv_wc array; their completion timestamps into ts, a uint64_t array, when
 * wc_flags asks for them). It reads only what wc_flags (enum
 * ibv_create_cq_wc_flags) selects, and of an error completion only wr_id,
 * status, vendor_err and qp_num; the rest of that ibv_wc is zero. It returns
 * the number reaped, or -errno.
 */
int goverbs_poll_ex(uintptr_t cq, uintptr_t wc, uintptr_t ts, int n, uint64_t wc_flags);

#endif
