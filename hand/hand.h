/*
 * C side of package hand: the data-path entry points (the verbs.h posts and
 * poll, and the loops Go cannot run without one cgo crossing per step, which
 * walk a chain or a CQ in C memory and return once).
 *
 * Pointers come in as uintptr_t: they always point to C memory (hand's
 * chains and arrays, the provider's objects), and cgo would otherwise check
 * every pointer argument for Go pointers (runtime.cgoCheckPointer, 7-15 ns
 * apiece here, as much as the crossing itself).
 */
#ifndef GOVERBS_HAND_H
#define GOVERBS_HAND_H

#include <stdint.h>
/*
 * Before rdma-core's headers: every call by C name to an extern function of
 * libibverbs or librdmacm, from an inline function of the headers or from
 * hand.c, reaches the trampoline of package generated/verbs or
 * generated/rdmacm, whose C symbols carry the package's own prefix (see
 * gen/emit_loader.go). Without them such a call references the bare name,
 * which nothing in the program defines, and the link fails.
 *
 * rdma-core's headers are the vendored ones the generated packages were made
 * from, named by a path relative to this file: GCC looks for a quoted
 * include in the including file's directory before any -I, CPATH or
 * C_INCLUDE_PATH directory, so a site's own rdma-core headers (a
 * CGO_CFLAGS=-I/opt/ofed/include) never replace them.
 */
#include "../generated/verbs/zverbs_names.h"
#include "../generated/rdmacm/zrdmacm_names.h"
#include "../headers/vendored/include/infiniband/verbs.h"
#include "../headers/vendored/include/rdma/rdma_verbs.h"

/*
 * goverbs_post_recv, goverbs_post_srq_recv and goverbs_post_send post the WRs
 * first to last of a prelinked chain (struct ibv_recv_wr or ibv_send_wr) with
 * the static inline ibv_post_recv, ibv_post_srq_recv or ibv_post_send: they
 * cut the chain after last, clear *bad (the bad_wr slot) and restore last's
 * next afterwards. goverbs_poll_cq is ibv_poll_cq. They return what the
 * inline returns. Every pointer is C memory (a provider's QP, SRQ or CQ, a
 * chain, its bad_wr slot, a WC array), hence uintptr_t, as above.
 */
int goverbs_post_recv(uintptr_t qp, uintptr_t first, uintptr_t last, uintptr_t bad);
int goverbs_post_srq_recv(uintptr_t srq, uintptr_t first, uintptr_t last, uintptr_t bad);
int goverbs_post_send(uintptr_t qp, uintptr_t first, uintptr_t last, uintptr_t bad);
int goverbs_poll_cq(uintptr_t cq, int n, uintptr_t wc);

/*
 * goverbs_poll_cq_spin calls ibv_poll_cq up to polls times, stopping at the
 * first call that returns completions or fails, and returns what that call
 * returned (0 when every call found the CQ empty): a busy-polling loop in Go
 * crosses into C once per polls empty polls instead of once for each.
 */
int goverbs_poll_cq_spin(uintptr_t cq, int n, uintptr_t wc, int polls);

/*
 * goverbs_arm_poll_cq arms cq for its next completion (ibv_req_notify_cq, any
 * completion) and then polls it once, a waiter's step before it parks in one
 * crossing: it returns what ibv_poll_cq returned, or, when the arm failed,
 * GOVERBS_ARM_POLL_FAILED minus the arm's errno (a poll's failure is the
 * provider's own small negative code, far above it).
 */
enum { GOVERBS_ARM_POLL_FAILED = -0x40000000 };
int goverbs_arm_poll_cq(uintptr_t cq, int n, uintptr_t wc);

/* Which rdma_post_*v goverbs_cm_post_send does for each WR. */
enum goverbs_cm_kind {
	GOVERBS_CM_SENDV,
	GOVERBS_CM_READV,
	GOVERBS_CM_WRITEV,
};

/*
 * goverbs_cm_post_recvv does what rdma_post_recvv does on id (a struct
 * rdma_cm_id *) once for each of the n WRs from wr (a struct ibv_recv_wr *)
 * on: it builds a WR of its own as that inline does (wr_id = context, the
 * WR's scatter list, next NULL) and posts it with ibv_post_srq_recv to
 * id->srq, or to id->qp->srq when id->srq is NULL, else with ibv_post_recv
 * to id->qp; unlike rdma_post_recvv it keeps the bad_wr the post returns.
 * It stops at the first failure and returns 0, or index << 32 | errno of
 * the WR that failed, with GOVERBS_CM_UNKNOWN set beside the errno when the
 * provider failed without naming that WR (bad_wr left NULL): it may be on
 * the queue. The WRs before index were posted; those after it were not.
 */
#define GOVERBS_CM_UNKNOWN 0x80000000u
int64_t goverbs_cm_post_recvv(uintptr_t id, uintptr_t wr, int n);

/*
 * goverbs_cm_post_send is goverbs_cm_post_recvv for rdma_post_sendv,
 * rdma_post_readv and rdma_post_writev, posting with ibv_post_send to
 * id->qp: each WR gets the opcode of kind, and the WR's wr_id, scatter
 * list, send_flags and (read / write) wr.rdma. Every WR must already
 * carry that opcode: the rdma_post_*v take no other and would drop what
 * another needs (immediate data, atomic operands). When one does not, it
 * stops there, before posting it, and returns index << 32 |
 * GOVERBS_CM_OPCODE: the WRs before index were posted, as for a failure.
 */
#define GOVERBS_CM_OPCODE 0x40000000u
int64_t goverbs_cm_post_send(uintptr_t id, int kind, uintptr_t wr, int n);

/*
 * goverbs_poll_ex reaps up to n completions from cq (a struct ibv_cq_ex *)
 * with ibv_start_poll / ibv_next_poll / ibv_end_poll into wc (a struct
 * ibv_wc array; their completion timestamps into ts, a uint64_t array, when
 * wc_flags asks for them). It reads only what wc_flags (enum
 * ibv_create_cq_wc_flags) selects, and of an error completion only wr_id,
 * status, vendor_err and qp_num; the rest of that ibv_wc is zero. It returns
 * the number reaped, or GOVERBS_POLL_FAILED when ibv_start_poll failed.
 *
 * fail points to an int, 0 on entry, where a failure's value goes as the
 * provider returned it: start_poll's, with GOVERBS_POLL_FAILED (end_poll is
 * then not called, as ibv_create_cq_ex(3) says); next_poll's, with the
 * count of completions read before it, at least 1 (end_poll is called, and
 * the completion that failed is lost where the provider consumed it, as
 * mlx5, mlx4 and hns do). It is kept raw because its sign does not decode
 * it: providers return a positive errno (EBUSY, to retry, while mlx5 reads
 * its clock for IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) or a
 * negative code of their own (mlx5, mlx4 and hns CQ_POLL_ERR, -2, which is
 * -ENOENT too; irdma -EINVAL).
 */
enum { GOVERBS_POLL_FAILED = -1 };
int goverbs_poll_ex(uintptr_t cq, uintptr_t wc, uintptr_t ts, int n, uint64_t wc_flags, uintptr_t fail);

/* goverbs_poll_ex_spin is goverbs_poll_ex as goverbs_poll_cq_spin is
 * ibv_poll_cq: up to polls calls, stopping at the first that reaps or fails. */
int goverbs_poll_ex_spin(uintptr_t cq, uintptr_t wc, uintptr_t ts, int n, uint64_t wc_flags, uintptr_t fail,
			 int polls);

#endif
