/*
 * fakeprov: a verbs "provider" with no device behind it, for unit tests and
 * benchmarks of the hand/ fast paths.
 *
 * It builds a real struct ibv_context whose ops.post_send, ops.post_recv,
 * ops.post_srq_recv and ops.poll_cq point at the functions in fakeprov.c, and
 * real ibv_qp / ibv_srq / ibv_cq_ex / ibv_ah / rdma_cm_id objects that point at
 * it, so the static inline dispatch of infiniband/verbs.h and
 * rdma/rdma_verbs.h runs unchanged.
 *
 * Each posted WR costs what a hardware provider's post costs: it is checked,
 * written as a 64-byte WQE with big-endian fields into a ring, its wr_id is
 * kept in a side array, and one doorbell record is written per post call.
 * In loopback mode every WR (every signaled WR on a send queue) also writes a
 * 64-byte big-endian CQE into its CQ; poll_cq and the extended CQ ops decode
 * them back and release the WQ slots.
 *
 * Not thread-safe: one thread per provider, but for the hold (below), which
 * keeps one call stopped inside the provider while another thread looks on.
 */
#ifndef GOVERBS_FAKEPROV_H
#define GOVERBS_FAKEPROV_H

#include <stdint.h>
#include "../../../headers/vendored/include/infiniband/verbs.h"
#include "../../../headers/vendored/include/rdma/rdma_cma.h"

#define FAKE_WQE_BB 64      /* bytes in a WQE basic block */
#define FAKE_CQE_SIZE 64    /* bytes in a CQE */
#define FAKE_MAX_QP 256     /* QPs (and SRQs) per context */

/* What a post does besides writing WQEs. */
enum fake_mode {
	FAKE_LOOPBACK = 0, /* each WR completes at once: a CQE is written */
	FAKE_SINK = 1,     /* no CQE; the WQ slot is released at once */
};

/* A work queue: a ring of 64-byte basic blocks. */
struct fake_wq {
	uint8_t *buf;          /* wqe_cnt * FAKE_WQE_BB bytes */
	uint64_t *wrid;        /* wr_id per basic block (at a WQE's first block) */
	uint16_t *nbb;         /* basic blocks used by the WQE starting there */
	uint32_t wqe_cnt;      /* basic blocks in the ring, a power of two */
	uint32_t head, tail;   /* producer / consumer counters, in basic blocks */
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t recv_stride;  /* receive WQs: basic blocks per WQE */
	__be32 *dbrec;         /* doorbell record */
	int mode;              /* enum fake_mode */
	/* one-shot failure: after fail_skip more post calls, the next one fails
	 * at chain index fail_at */
	int fail_at;           /* -1 when disarmed */
	int fail_errno;        /* as returned: negative for a provider that returns -errno */
	uint32_t fail_skip;
	/* one-shot: after doorbell_skip more post calls that queue every WR,
	 * the next one returns this after queueing every WR, without setting
	 * bad_wr, as rxe does when its doorbell fails; 0 when disarmed */
	int doorbell_fail;
	uint32_t doorbell_skip;
	/* counters */
	uint64_t posted;       /* WRs accepted */
	uint64_t doorbells;    /* doorbell record writes */
	uint64_t failed;       /* post calls that returned an error */
};

struct fake_cq;

/* What a receive completion reports (loopback mode). */
struct fake_recv_cfg {
	uint32_t byte_len;  /* 0: the sum of the WR's SGE lengths */
	uint32_t wc_flags;  /* IBV_WC_WITH_IMM, ...; UD QPs add IBV_WC_GRH unless no_grh */
	uint32_t imm;       /* host order; written big-endian into the CQE */
	uint32_t src_qp;    /* 0: the receiving QP's own number */
	int opcode;         /* IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM */
	int no_grh;         /* a UD datagram that came without a GRH */
};

struct fake_qp {
	struct ibv_qp ibqp;    /* first: a struct ibv_qp * is a struct fake_qp * */
	struct fake_wq sq, rq;
	struct fake_cq *send_cq, *recv_cq;
	struct fake_srq *srq;
	int sig_all;
	struct fake_recv_cfg recv;
	__be32 dbrec[2];       /* [0] receive, [1] send, as mlx5 lays them out */
};

struct fake_srq {
	struct ibv_srq ibsrq;  /* first */
	struct fake_wq rq;
	struct fake_cq *cq;    /* where loopback receive completions go */
	uint32_t srqn;
	uint32_t qpn;          /* QP number reported in its completions */
	struct fake_recv_cfg recv;
	__be32 dbrec;
};

struct fake_cq {
	struct ibv_cq_ex ibcq; /* first: usable as struct ibv_cq * and ibv_cq_ex * */
	uint8_t *ring;         /* cqe_cnt * FAKE_CQE_SIZE bytes */
	uint32_t cqe_cnt;      /* a power of two */
	uint32_t pi, ci;       /* producer / consumer counters */
	__be32 dbrec;
	uint8_t *cur;          /* extended polling: the current CQE */
	/* endless: when not 0, the number of CQEs that polling cycles through
	 * without consuming them (the CQEs pending when it was set) */
	uint32_t endless;
	/* status injection: the next inject_n CQEs carry this status */
	uint32_t inject_n;
	int inject_status;
	uint32_t inject_vendor_err;
	/* overrun: a CQE arrived with the ring full (IBV_EVENT_CQ_ERR) */
	int overrun;
	uint64_t dropped;
	uint64_t produced, polled;
	uint64_t ts;           /* completion timestamp counter */
	/* poll_cq: its calls, how many of the next ones find the ring empty
	 * whatever it holds, and a failure (a negative return) for the one
	 * after those */
	uint64_t poll_calls;
	uint32_t empty_polls;
	int poll_fail;
	int notify_fail; /* errno the next ibv_req_notify_cq returns, 0 for none */
	/* one-shot, returned as is (0 when disarmed): by the next ibv_start_poll
	 * that is not held, which consumes nothing; by the next ibv_next_poll,
	 * after it consumes its CQE (ENOENT instead when there is none) */
	int start_poll_ret;
	int next_poll_ret;
};

struct fake_ctx {
	struct ibv_context ctx; /* first */
	struct ibv_device dev;
	uint32_t next_qpn;
	uint32_t next_srqn;
	struct fake_qp *qps[FAKE_MAX_QP];   /* by qpn % FAKE_MAX_QP */
	struct fake_srq *srqs[FAKE_MAX_QP]; /* by srqn % FAKE_MAX_QP */
	struct fake_cq *cqs[FAKE_MAX_QP];
	int ncq;
	struct ibv_ah *ahs[FAKE_MAX_QP];
	int nah;
	struct rdma_cm_id *ids[FAKE_MAX_QP];
	int nid;
	/* enum fake_hold, read and written atomically: the one field another
	 * thread may touch while a call runs */
	int hold;
};

/* The hold: armed, the next post or poll call (ibv_post_send,
 * ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq, ibv_start_poll) of any
 * object of the context stops as it starts, holding, until the hold is
 * set back to FAKE_HOLD_OFF; calls that start meanwhile go on. */
enum fake_hold {
	FAKE_HOLD_OFF = 0,
	FAKE_HOLD_ARMED = 1,
	FAKE_HOLD_HOLDING = 2,
};

struct fake_qp_attr {
	int qp_type;           /* IBV_QPT_RC, IBV_QPT_UC or IBV_QPT_UD */
	struct fake_cq *send_cq, *recv_cq;
	struct fake_srq *srq;  /* NULL: the QP has its own receive queue */
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline_data;
	int sq_sig_all;
};

struct fake_ctx *fake_ctx_new(void);
void fake_ctx_free(struct fake_ctx *c); /* frees every object made from it */

struct fake_cq *fake_cq_new(struct fake_ctx *c, uint32_t cqe);
struct fake_qp *fake_qp_new(struct fake_ctx *c, const struct fake_qp_attr *a);
struct fake_srq *fake_srq_new(struct fake_ctx *c, struct fake_cq *cq, uint32_t max_wr,
			      uint32_t max_sge);
struct ibv_ah *fake_ah_new(struct fake_ctx *c);
struct rdma_cm_id *fake_cm_id_new(struct fake_ctx *c, struct fake_qp *qp, struct fake_srq *srq);

void fake_hold_set(struct fake_ctx *c, int hold);
int fake_hold_get(struct fake_ctx *c);

/* Completions waiting in a CQ. */
uint32_t fake_cq_pending(const struct fake_cq *cq);

/* The 64 bytes of the basic block at counter value idx of a WQ. */
const uint8_t *fake_wq_bb(const struct fake_wq *wq, uint32_t idx);

#endif
