/*
 * fakeprov.c: the fake provider's data path and constructors. See fakeprov.h.
 *
 * The WQE and CQE formats below are invented; they only need to cost what a
 * hardware provider's formats cost: 16-byte segments with big-endian fields,
 * 64-byte basic blocks, a wr_id side array indexed by a 16-bit WQE counter
 * that the CQE carries back, and doorbell records written once per call.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakeprov.h"

/* 16-byte WQE segments. */
struct fake_ctrl_seg {
	__be32 idx_opcode;   /* WQE counter << 8 | WR opcode */
	__be32 qpn_ds;       /* QP number << 8 | 16-byte segments in the WQE */
	uint8_t signature;
	uint8_t rsvd[2];
	uint8_t flags;       /* FAKE_CTRL_* */
	__be32 imm;          /* imm_data / invalidate_rkey, as posted */
};

enum {
	FAKE_CTRL_SIGNALED = 1 << 3,
	FAKE_CTRL_SOLICITED = 1 << 1,
	FAKE_CTRL_FENCE = 1 << 7,
};

struct fake_raddr_seg {
	__be64 raddr;
	__be32 rkey;
	__be32 rsvd;
};

struct fake_atomic_seg {
	__be64 swap_add;
	__be64 compare;
};

struct fake_ud_seg {
	__be64 ah;           /* the AH's address: hardware copies an address vector here */
	__be32 dqpn;         /* remote QPN | 1 << 31 */
	__be32 qkey;
};

struct fake_data_seg {
	__be32 byte_count;
	__be32 lkey;
	__be64 addr;
};

#define FAKE_INVALID_LKEY 0x100
#define FAKE_INLINE_SEG 0x80000000u

/* The 64-byte CQE. */
struct fake_cqe {
	__be64 timestamp;
	__be32 src_qp;
	__be32 imm;
	__be32 byte_cnt;
	__be32 qpn;
	__be32 srqn;
	__be32 vendor_err;
	__be32 wc_flags;
	__be16 slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	__be16 pkey_index;
	uint8_t rsvd[16];
	__be16 wqe_counter;
	uint8_t status;
	uint8_t opcode;      /* enum ibv_wc_opcode, low byte */
	uint8_t flags;       /* FAKE_CQE_* */
	uint8_t op_own;      /* owner bit: the ring's pass, mod 2 */
};

_Static_assert(sizeof(struct fake_cqe) == FAKE_CQE_SIZE, "CQE size");
_Static_assert(sizeof(struct fake_ctrl_seg) == 16, "segment size");
_Static_assert(sizeof(struct fake_data_seg) == 16, "segment size");

enum {
	FAKE_CQE_SQ = 1 << 0,   /* the WQE was on a send queue */
	FAKE_CQE_SRQ = 1 << 1,  /* the WQE was on an SRQ */
};

/* Error CQEs carry this where a real device leaves unspecified data. */
#define FAKE_JUNK 0xdeadbeefu

static inline void *wq_seg(struct fake_wq *wq, uint32_t seg)
{
	return wq->buf + (size_t)(seg & (wq->wqe_cnt * 4 - 1)) * 16;
}

static inline int wq_full(const struct fake_wq *wq, uint32_t nbb)
{
	return wq->head - wq->tail + nbb > wq->wqe_cnt;
}

/* The chain index this post call fails at, or -1. */
static inline int wq_fail_index(struct fake_wq *wq)
{
	if (wq->fail_at < 0)
		return -1;
	if (wq->fail_skip) {
		wq->fail_skip--;
		return -1;
	}
	return wq->fail_at;
}

/* The armed doorbell failure, if this post call (which queued every WR) is the one. */
static inline int wq_doorbell_fail(struct fake_wq *wq)
{
	int ret = wq->doorbell_fail;

	if (ret == 0)
		return 0;
	if (wq->doorbell_skip) {
		wq->doorbell_skip--;
		return 0;
	}
	wq->doorbell_fail = 0;
	return ret;
}

static void wq_doorbell(struct fake_wq *wq, uint32_t nreq)
{
	if (!nreq)
		return;
	wq->posted += nreq;
	/* the WQEs must be visible before the device reads the doorbell record */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*wq->dbrec = htobe32(wq->head & 0xffff);
	wq->doorbells++;
}

/* Marks the WQE whose counter is ctr (and every WQE before it) done. */
static inline void wq_release(struct fake_wq *wq, uint16_t ctr)
{
	uint32_t start = wq->tail + (uint16_t)(ctr - (uint16_t)wq->tail);

	wq->tail = start + wq->nbb[start & (wq->wqe_cnt - 1)];
}

static inline struct fake_cqe *cqe_at(const struct fake_cq *cq, uint32_t idx)
{
	return (struct fake_cqe *)(cq->ring + (size_t)(idx & (cq->cqe_cnt - 1)) * FAKE_CQE_SIZE);
}

static void cq_push(struct fake_cq *cq, uint32_t qpn, uint32_t srqn, uint8_t flags, uint16_t ctr,
		    int opcode, uint32_t byte_len, uint32_t wc_flags, uint32_t imm, uint32_t src_qp)
{
	struct fake_cqe *e;
	uint8_t status = IBV_WC_SUCCESS;
	uint32_t vendor_err = 0;

	if (cq->pi - cq->ci >= cq->cqe_cnt) {
		/* a device raises IBV_EVENT_CQ_ERR and drops the completion */
		cq->overrun = 1;
		cq->dropped++;
		return;
	}
	if (cq->inject_n) {
		cq->inject_n--;
		status = (uint8_t)cq->inject_status;
		vendor_err = cq->inject_vendor_err;
	}
	e = cqe_at(cq, cq->pi);
	e->timestamp = htobe64(++cq->ts);
	e->qpn = htobe32(qpn);
	e->srqn = htobe32(srqn);
	e->wqe_counter = htobe16(ctr);
	e->flags = flags;
	e->status = status;
	e->vendor_err = htobe32(vendor_err);
	e->slid = 0;
	e->sl = 0;
	e->dlid_path_bits = 0;
	e->pkey_index = 0;
	memset(e->rsvd, 0, sizeof(e->rsvd));
	if (status == IBV_WC_SUCCESS) {
		e->opcode = (uint8_t)opcode;
		e->byte_cnt = htobe32(byte_len);
		e->wc_flags = htobe32(wc_flags);
		e->imm = htobe32(imm);
		e->src_qp = htobe32(src_qp);
	} else {
		e->opcode = 0xff;
		e->byte_cnt = htobe32(FAKE_JUNK);
		e->wc_flags = htobe32(IBV_WC_GRH | IBV_WC_WITH_IMM);
		e->imm = htobe32(FAKE_JUNK);
		e->src_qp = htobe32(FAKE_JUNK);
	}
	e->op_own = (uint8_t)((cq->pi / cq->cqe_cnt) & 1);
	cq->pi++;
	cq->produced++;
}

/* Receive queues (a QP's own or an SRQ). */
static int post_recv_wq(struct fake_wq *wq, struct fake_cq *cq, const struct fake_recv_cfg *rc,
			uint32_t qpn, uint32_t srqn, uint8_t cqe_flags, int ud,
			struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	uint32_t nreq = 0;
	int err = 0;
	int idx, fail_at = wq_fail_index(wq);

	for (idx = 0; wr; wr = wr->next, idx++) {
		uint32_t seg, nseg, slot, len = 0;
		int i;

		if (idx == fail_at) {
			wq->fail_at = -1;
			err = wq->fail_errno;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			err = EINVAL;
			break;
		}
		if (wq_full(wq, wq->recv_stride)) {
			err = ENOMEM;
			break;
		}
		seg = wq->head * 4;
		nseg = wq->recv_stride * 4;
		for (i = 0; i < wr->num_sge; i++) {
			struct fake_data_seg *d = wq_seg(wq, seg + i);

			d->byte_count = htobe32(wr->sg_list[i].length);
			d->lkey = htobe32(wr->sg_list[i].lkey);
			d->addr = htobe64(wr->sg_list[i].addr);
			len += wr->sg_list[i].length;
		}
		if ((uint32_t)i < nseg) {
			struct fake_data_seg *d = wq_seg(wq, seg + i);

			d->byte_count = 0;
			d->lkey = htobe32(FAKE_INVALID_LKEY);
			d->addr = 0;
			for (i++; (uint32_t)i < nseg; i++)
				memset(wq_seg(wq, seg + i), 0, 16);
		}
		slot = wq->head & (wq->wqe_cnt - 1);
		wq->wrid[slot] = wr->wr_id;
		wq->nbb[slot] = (uint16_t)wq->recv_stride;
		if (wq->mode == FAKE_LOOPBACK && cq) {
			uint32_t flags = rc->wc_flags | (ud && !rc->no_grh ? IBV_WC_GRH : 0);

			cq_push(cq, qpn, srqn, cqe_flags, (uint16_t)wq->head, rc->opcode,
				rc->byte_len ? rc->byte_len : len, flags, rc->imm,
				rc->src_qp ? rc->src_qp : qpn);
		}
		wq->head += wq->recv_stride;
		if (wq->mode == FAKE_SINK)
			wq->tail = wq->head;
		nreq++;
	}
	wq_doorbell(wq, nreq);
	if (err) {
		wq->failed++;
		*bad_wr = wr;
	} else if ((err = wq_doorbell_fail(wq)) != 0) {
		/* every WR queued, then a failure that names none (rxe's post_*_db) */
		wq->failed++;
	}
	return err;
}

/*
 * hold_point is where a post or poll stops while the context's hold is
 * armed (fake_hold_set): the call that finds it armed holds it until it is
 * set off, sleeping 100 us at a time; a call that finds another holding
 * goes on. Unarmed it costs a load and a branch, on both sides of the
 * benchmarks alike.
 */
static inline void hold_point(struct ibv_context *ctx)
{
	struct fake_ctx *c = (struct fake_ctx *)ctx;
	int armed = FAKE_HOLD_ARMED;

	if (__builtin_expect(__atomic_load_n(&c->hold, __ATOMIC_RELAXED) == FAKE_HOLD_OFF, 1))
		return;
	if (!__atomic_compare_exchange_n(&c->hold, &armed, FAKE_HOLD_HOLDING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	while (__atomic_load_n(&c->hold, __ATOMIC_ACQUIRE) == FAKE_HOLD_HOLDING) {
		struct timespec ts = {0, 100000};

		nanosleep(&ts, NULL);
	}
}

void fake_hold_set(struct fake_ctx *c, int hold)
{
	__atomic_store_n(&c->hold, hold, __ATOMIC_RELEASE);
}

int fake_hold_get(struct fake_ctx *c)
{
	return __atomic_load_n(&c->hold, __ATOMIC_ACQUIRE);
}

static int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct fake_qp *qp = (struct fake_qp *)ibqp;

	hold_point(ibqp->context);
	if (qp->srq) {
		*bad_wr = wr;
		return EINVAL;
	}
	return post_recv_wq(&qp->rq, qp->recv_cq, &qp->recv, ibqp->qp_num, 0, 0,
			    ibqp->qp_type == IBV_QPT_UD, wr, bad_wr);
}

static int fake_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad_wr)
{
	struct fake_srq *srq = (struct fake_srq *)ibsrq;

	hold_point(ibsrq->context);
	return post_recv_wq(&srq->rq, srq->cq, &srq->recv, srq->qpn, srq->srqn, FAKE_CQE_SRQ, 0,
			    wr, bad_wr);
}

static int send_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return IBV_WC_SEND;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return -1;
	}
}

/* Whether a QP of this type may post this opcode. */
static int send_opcode_ok(int qp_type, enum ibv_wr_opcode op)
{
	if (send_wc_opcode(op) < 0)
		return 0;
	switch (qp_type) {
	case IBV_QPT_UD:
		return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	case IBV_QPT_UC:
		return op != IBV_WR_RDMA_READ && op != IBV_WR_ATOMIC_CMP_AND_SWP &&
		       op != IBV_WR_ATOMIC_FETCH_AND_ADD;
	default:
		return 1;
	}
}

/* Copies inline data into the ring from byte offset off of the WQE at the head. */
static void wq_copy_inline(struct fake_wq *wq, uint32_t off, const struct ibv_sge *sg, int n)
{
	size_t ring = (size_t)wq->wqe_cnt * FAKE_WQE_BB;
	size_t pos = ((size_t)wq->head * FAKE_WQE_BB + off) & (ring - 1);
	int i;

	for (i = 0; i < n; i++) {
		const uint8_t *src = (const uint8_t *)(uintptr_t)sg[i].addr;
		size_t len = sg[i].length;

		while (len) {
			size_t chunk = ring - pos < len ? ring - pos : len;

			memcpy(wq->buf + pos, src, chunk);
			src += chunk;
			len -= chunk;
			pos = (pos + chunk) & (ring - 1);
		}
	}
}

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct fake_qp *qp = (struct fake_qp *)ibqp;
	struct fake_wq *wq = &qp->sq;
	uint32_t nreq = 0;
	int err = 0;
	int idx, fail_at;

	hold_point(ibqp->context);
	fail_at = wq_fail_index(wq);
	for (idx = 0; wr; wr = wr->next, idx++) {
		uint32_t seg, nseg, nbb, slot, len = 0, i;
		int inl = !!(wr->send_flags & IBV_SEND_INLINE);
		int rdma = 0, atomic = 0, ud = ibqp->qp_type == IBV_QPT_UD;
		int signaled = qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		struct fake_ctrl_seg *ctrl;

		if (idx == fail_at) {
			wq->fail_at = -1;
			err = wq->fail_errno;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge ||
		    !send_opcode_ok(ibqp->qp_type, wr->opcode) || (ud && !wr->wr.ud.ah)) {
			err = EINVAL;
			break;
		}
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			rdma = 1;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			atomic = 1;
			break;
		default:
			break;
		}
		for (i = 0; i < (uint32_t)wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (inl && (len > wq->max_inline || wr->opcode == IBV_WR_RDMA_READ || atomic)) {
			err = EINVAL;
			break;
		}
		nseg = 1 + (rdma || atomic) + atomic + ud;
		nseg += inl ? (4 + len + 15) / 16 : (uint32_t)wr->num_sge;
		nbb = (nseg + 3) / 4;
		if (wq_full(wq, nbb)) {
			err = ENOMEM;
			break;
		}

		seg = wq->head * 4;
		ctrl = wq_seg(wq, seg++);
		ctrl->idx_opcode = htobe32((wq->head & 0xffff) << 8 | (uint32_t)wr->opcode);
		ctrl->qpn_ds = htobe32(ibqp->qp_num << 8 | nseg);
		ctrl->signature = 0;
		ctrl->rsvd[0] = ctrl->rsvd[1] = 0;
		ctrl->flags = (signaled ? FAKE_CTRL_SIGNALED : 0) |
			      (wr->send_flags & IBV_SEND_SOLICITED ? FAKE_CTRL_SOLICITED : 0) |
			      (wr->send_flags & IBV_SEND_FENCE ? FAKE_CTRL_FENCE : 0);
		ctrl->imm = (wr->opcode == IBV_WR_SEND_WITH_IMM ||
			     wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ? wr->imm_data : 0;
		if (ud) {
			struct fake_ud_seg *u = wq_seg(wq, seg++);

			u->ah = htobe64((uint64_t)(uintptr_t)wr->wr.ud.ah);
			u->dqpn = htobe32(wr->wr.ud.remote_qpn | 1u << 31);
			u->qkey = htobe32(wr->wr.ud.remote_qkey);
		}
		if (rdma) {
			struct fake_raddr_seg *r = wq_seg(wq, seg++);

			r->raddr = htobe64(wr->wr.rdma.remote_addr);
			r->rkey = htobe32(wr->wr.rdma.rkey);
			r->rsvd = 0;
		} else if (atomic) {
			struct fake_raddr_seg *r = wq_seg(wq, seg++);
			struct fake_atomic_seg *a = wq_seg(wq, seg++);

			r->raddr = htobe64(wr->wr.atomic.remote_addr);
			r->rkey = htobe32(wr->wr.atomic.rkey);
			r->rsvd = 0;
			if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
				a->swap_add = htobe64(wr->wr.atomic.swap);
				a->compare = htobe64(wr->wr.atomic.compare_add);
			} else {
				a->swap_add = htobe64(wr->wr.atomic.compare_add);
				a->compare = 0;
			}
		}
		if (inl) {
			__be32 *hdr = wq_seg(wq, seg);

			*hdr = htobe32(len | FAKE_INLINE_SEG);
			wq_copy_inline(wq, (seg - wq->head * 4) * 16 + 4, wr->sg_list, wr->num_sge);
		} else {
			for (i = 0; i < (uint32_t)wr->num_sge; i++) {
				struct fake_data_seg *d = wq_seg(wq, seg++);

				d->byte_count = htobe32(wr->sg_list[i].length);
				d->lkey = htobe32(wr->sg_list[i].lkey);
				d->addr = htobe64(wr->sg_list[i].addr);
			}
		}
		for (i = nseg; i < nbb * 4; i++)
			memset(wq_seg(wq, wq->head * 4 + i), 0, 16);

		slot = wq->head & (wq->wqe_cnt - 1);
		wq->wrid[slot] = wr->wr_id;
		wq->nbb[slot] = (uint16_t)nbb;
		if (wq->mode == FAKE_LOOPBACK && signaled && qp->send_cq)
			cq_push(qp->send_cq, ibqp->qp_num, 0, FAKE_CQE_SQ, (uint16_t)wq->head,
				send_wc_opcode(wr->opcode), atomic ? 8 : len, 0, 0, 0);
		wq->head += nbb;
		if (wq->mode == FAKE_SINK)
			wq->tail = wq->head;
		nreq++;
	}
	wq_doorbell(wq, nreq);
	if (err) {
		wq->failed++;
		*bad_wr = wr;
	} else if ((err = wq_doorbell_fail(wq)) != 0) {
		/* every WR queued, then a failure that names none (rxe's post_*_db) */
		wq->failed++;
	}
	return err;
}

static struct fake_wq *cqe_wq(const struct fake_cq *cq, const struct fake_cqe *e)
{
	struct fake_ctx *c = (struct fake_ctx *)cq->ibcq.context;

	if (e->flags & FAKE_CQE_SRQ) {
		struct fake_srq *srq = c->srqs[be32toh(e->srqn) % FAKE_MAX_QP];

		return srq ? &srq->rq : NULL;
	} else {
		struct fake_qp *qp = c->qps[be32toh(e->qpn) % FAKE_MAX_QP];

		if (!qp)
			return NULL;
		return e->flags & FAKE_CQE_SQ ? &qp->sq : &qp->rq;
	}
}

/* Takes the CQE at the consumer index: looks its wr_id up and releases its WQ slots. */
static inline uint64_t cq_take(struct fake_cq *cq, const struct fake_cqe *e)
{
	struct fake_wq *wq = cqe_wq(cq, e);
	uint16_t ctr = be16toh(e->wqe_counter);
	uint64_t wr_id = 0;

	if (wq) {
		wr_id = wq->wrid[ctr & (wq->wqe_cnt - 1)];
		if (!cq->endless)
			wq_release(wq, ctr);
	}
	cq->ci++;
	if (cq->endless && cq->ci == cq->pi)
		cq->ci -= (uint32_t)cq->endless;
	return wr_id;
}

static inline void cq_update_dbrec(struct fake_cq *cq)
{
	cq->dbrec = htobe32(cq->ci & 0xffffff);
}

/*
 * poll_scripted counts a poll (ibv_poll_cq or ibv_start_poll) and plays what
 * HoldPolls and FailPoll scripted for it: 1 when it must find the CQ empty,
 * the scripted failure (negative) when it must fail, 0 when it reads the
 * ring as usual.
 */
static int poll_scripted(struct fake_cq *cq)
{
	int fail = cq->poll_fail;

	cq->poll_calls++;
	if (cq->empty_polls) {
		cq->empty_polls--;
		return 1;
	}
	cq->poll_fail = 0;
	return fail;
}

/* fake_req_notify_cq arms nothing (no events are raised): it returns the
 * errno FailNotify set, once, or 0. */
static int fake_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int fail = cq->notify_fail;

	(void)solicited_only;
	cq->notify_fail = 0;
	return fail;
}

static int fake_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int i;

	hold_point(ibcq->context);
	i = poll_scripted(cq);
	if (i)
		return i > 0 ? 0 : i;
	for (i = 0; i < n && cq->ci != cq->pi; i++) {
		const struct fake_cqe *e = cqe_at(cq, cq->ci);
		struct ibv_wc *w = &wc[i];

		w->wr_id = cq_take(cq, e);
		w->status = (enum ibv_wc_status)e->status;
		w->vendor_err = be32toh(e->vendor_err);
		w->qp_num = be32toh(e->qpn);
		/* on an error a device leaves the rest unspecified: so does this one */
		w->opcode = e->status ? (enum ibv_wc_opcode)FAKE_JUNK : (enum ibv_wc_opcode)e->opcode;
		w->byte_len = be32toh(e->byte_cnt);
		w->imm_data = e->imm;
		w->src_qp = be32toh(e->src_qp);
		w->wc_flags = be32toh(e->wc_flags);
		w->pkey_index = be16toh(e->pkey_index);
		w->slid = be16toh(e->slid);
		w->sl = e->sl;
		w->dlid_path_bits = e->dlid_path_bits;
	}
	if (i) {
		cq_update_dbrec(cq);
		cq->polled += (uint64_t)i;
	}
	return i;
}

/* Extended CQ: ibv_start_poll / ibv_next_poll / ibv_end_poll and the readers. */
static inline int cq_ex_advance(struct fake_cq *cq)
{
	struct fake_cqe *e;

	if (cq->ci == cq->pi)
		return ENOENT;
	e = cqe_at(cq, cq->ci);
	cq->cur = (uint8_t *)e;
	cq->ibcq.status = (enum ibv_wc_status)e->status;
	cq->ibcq.wr_id = cq_take(cq, e);
	cq->polled++;
	return 0;
}

static int fake_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int scripted;

	hold_point(ibcq->context);
	if (attr && attr->comp_mask)
		return EINVAL;
	scripted = poll_scripted(cq);
	if (scripted)
		return scripted > 0 ? ENOENT : -scripted;
	if (cq->start_poll_ret) {
		scripted = cq->start_poll_ret;
		cq->start_poll_ret = 0;
		return scripted;
	}
	return cq_ex_advance(cq);
}

/*
 * A scripted next_poll failure consumes the CQE first, as mlx5's does for
 * one it cannot parse (mlx5_get_next_cqe has advanced cons_index, which
 * end_poll then publishes): that completion is lost.
 */
static int fake_next_poll(struct ibv_cq_ex *ibcq)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int ret = cq->next_poll_ret;

	if (ret) {
		cq->next_poll_ret = 0;
		if (cq_ex_advance(cq))
			return ENOENT;
		return ret;
	}
	return cq_ex_advance(cq);
}

static void fake_end_poll(struct ibv_cq_ex *ibcq)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;

	cq->cur = NULL;
	cq_update_dbrec(cq);
}

#define CUR(ibcq) ((const struct fake_cqe *)((struct fake_cq *)(ibcq))->cur)

static enum ibv_wc_opcode fake_read_opcode(struct ibv_cq_ex *ibcq)
{
	return (enum ibv_wc_opcode)CUR(ibcq)->opcode;
}

static uint32_t fake_read_vendor_err(struct ibv_cq_ex *ibcq)
{
	return be32toh(CUR(ibcq)->vendor_err);
}

static uint32_t fake_read_byte_len(struct ibv_cq_ex *ibcq)
{
	return be32toh(CUR(ibcq)->byte_cnt);
}

static __be32 fake_read_imm_data(struct ibv_cq_ex *ibcq)
{
	return CUR(ibcq)->imm;
}

static uint32_t fake_read_qp_num(struct ibv_cq_ex *ibcq)
{
	return be32toh(CUR(ibcq)->qpn);
}

static uint32_t fake_read_src_qp(struct ibv_cq_ex *ibcq)
{
	return be32toh(CUR(ibcq)->src_qp);
}

static unsigned int fake_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	return be32toh(CUR(ibcq)->wc_flags);
}

static uint32_t fake_read_slid(struct ibv_cq_ex *ibcq)
{
	return be16toh(CUR(ibcq)->slid);
}

static uint8_t fake_read_sl(struct ibv_cq_ex *ibcq)
{
	return CUR(ibcq)->sl;
}

static uint8_t fake_read_dlid_path_bits(struct ibv_cq_ex *ibcq)
{
	return CUR(ibcq)->dlid_path_bits;
}

static uint64_t fake_read_completion_ts(struct ibv_cq_ex *ibcq)
{
	return be64toh(CUR(ibcq)->timestamp);
}

static uint64_t fake_read_completion_wallclock_ns(struct ibv_cq_ex *ibcq)
{
	return be64toh(CUR(ibcq)->timestamp) * 1000;
}

static uint16_t fake_read_cvlan(struct ibv_cq_ex *ibcq)
{
	(void)ibcq;
	return 0;
}

static uint32_t fake_read_flow_tag(struct ibv_cq_ex *ibcq)
{
	(void)ibcq;
	return 0;
}

static void fake_read_tm_info(struct ibv_cq_ex *ibcq, struct ibv_wc_tm_info *tm_info)
{
	(void)ibcq;
	tm_info->tag = 0;
	tm_info->priv = 0;
}

/* Constructors. */

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void *zalloc(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, n ? n : 1))
		return NULL;
	memset(p, 0, n);
	return p;
}

static int wq_init(struct fake_wq *wq, uint32_t wqes, uint32_t stride, uint32_t max_sge,
		   uint32_t max_inline, __be32 *dbrec)
{
	wq->wqe_cnt = pow2_at_least((wqes ? wqes : 1) * stride);
	if (wq->wqe_cnt > 65536)
		return EINVAL;
	wq->buf = zalloc((size_t)wq->wqe_cnt * FAKE_WQE_BB);
	wq->wrid = zalloc((size_t)wq->wqe_cnt * sizeof(*wq->wrid));
	wq->nbb = zalloc((size_t)wq->wqe_cnt * sizeof(*wq->nbb));
	if (!wq->buf || !wq->wrid || !wq->nbb)
		return ENOMEM;
	wq->recv_stride = stride;
	wq->max_sge = max_sge;
	wq->max_inline = max_inline;
	wq->dbrec = dbrec;
	wq->fail_at = -1;
	return 0;
}

static void wq_free(struct fake_wq *wq)
{
	free(wq->buf);
	free(wq->wrid);
	free(wq->nbb);
}

static uint32_t recv_stride(uint32_t max_sge)
{
	/* one 16-byte segment per SGE plus a terminator, in whole basic blocks */
	return pow2_at_least((max_sge + 1 + 3) / 4);
}

struct fake_ctx *fake_ctx_new(void)
{
	struct fake_ctx *c = zalloc(sizeof(*c));

	if (!c)
		return NULL;
	c->ctx.device = &c->dev;
	strcpy(c->dev.name, "fake0");
	strcpy(c->dev.dev_name, "fake0");
	c->dev.node_type = IBV_NODE_CA;
	c->dev.transport_type = IBV_TRANSPORT_IB;
	c->ctx.ops.post_send = fake_post_send;
	c->ctx.ops.post_recv = fake_post_recv;
	c->ctx.ops.post_srq_recv = fake_post_srq_recv;
	c->ctx.ops.poll_cq = fake_poll_cq;
	c->ctx.ops.req_notify_cq = fake_req_notify_cq;
	c->ctx.cmd_fd = -1;
	c->ctx.async_fd = -1;
	c->ctx.num_comp_vectors = 1;
	c->next_qpn = 0x100;
	c->next_srqn = 0x200;
	return c;
}

struct fake_cq *fake_cq_new(struct fake_ctx *c, uint32_t cqe)
{
	struct fake_cq *cq;

	if (c->ncq == FAKE_MAX_QP || cqe == 0 || cqe > (1u << 22))
		return NULL;
	cq = zalloc(sizeof(*cq));
	if (!cq)
		return NULL;
	cq->cqe_cnt = pow2_at_least(cqe);
	cq->ring = zalloc((size_t)cq->cqe_cnt * FAKE_CQE_SIZE);
	if (!cq->ring) {
		free(cq);
		return NULL;
	}
	cq->ibcq.context = &c->ctx;
	cq->ibcq.cqe = (int)cq->cqe_cnt;
	cq->ibcq.start_poll = fake_start_poll;
	cq->ibcq.next_poll = fake_next_poll;
	cq->ibcq.end_poll = fake_end_poll;
	cq->ibcq.read_opcode = fake_read_opcode;
	cq->ibcq.read_vendor_err = fake_read_vendor_err;
	cq->ibcq.read_byte_len = fake_read_byte_len;
	cq->ibcq.read_imm_data = fake_read_imm_data;
	cq->ibcq.read_qp_num = fake_read_qp_num;
	cq->ibcq.read_src_qp = fake_read_src_qp;
	cq->ibcq.read_wc_flags = fake_read_wc_flags;
	cq->ibcq.read_slid = fake_read_slid;
	cq->ibcq.read_sl = fake_read_sl;
	cq->ibcq.read_dlid_path_bits = fake_read_dlid_path_bits;
	cq->ibcq.read_completion_ts = fake_read_completion_ts;
	cq->ibcq.read_cvlan = fake_read_cvlan;
	cq->ibcq.read_flow_tag = fake_read_flow_tag;
	cq->ibcq.read_tm_info = fake_read_tm_info;
	cq->ibcq.read_completion_wallclock_ns = fake_read_completion_wallclock_ns;
	c->cqs[c->ncq++] = cq;
	return cq;
}

static void recv_cfg_init(struct fake_recv_cfg *rc)
{
	rc->opcode = IBV_WC_RECV;
}

struct fake_qp *fake_qp_new(struct fake_ctx *c, const struct fake_qp_attr *a)
{
	struct fake_qp *qp;
	uint32_t qpn = c->next_qpn;

	if (c->qps[qpn % FAKE_MAX_QP])
		return NULL;
	qp = zalloc(sizeof(*qp));
	if (!qp)
		return NULL;
	if (wq_init(&qp->sq, a->max_send_wr, 1, a->max_send_sge, a->max_inline_data,
		    &qp->dbrec[1]) ||
	    wq_init(&qp->rq, a->srq ? 0 : a->max_recv_wr, recv_stride(a->max_recv_sge),
		    a->max_recv_sge, 0, &qp->dbrec[0])) {
		wq_free(&qp->sq);
		wq_free(&qp->rq);
		free(qp);
		return NULL;
	}
	c->next_qpn++;
	qp->ibqp.context = &c->ctx;
	qp->ibqp.send_cq = a->send_cq ? (struct ibv_cq *)&a->send_cq->ibcq : NULL;
	qp->ibqp.recv_cq = a->recv_cq ? (struct ibv_cq *)&a->recv_cq->ibcq : NULL;
	qp->ibqp.srq = a->srq ? &a->srq->ibsrq : NULL;
	qp->ibqp.qp_num = qpn;
	qp->ibqp.handle = qpn;
	qp->ibqp.state = IBV_QPS_RTS;
	qp->ibqp.qp_type = a->qp_type ? (enum ibv_qp_type)a->qp_type : IBV_QPT_RC;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->srq = a->srq;
	qp->sig_all = a->sq_sig_all;
	recv_cfg_init(&qp->recv);
	c->qps[qpn % FAKE_MAX_QP] = qp;
	return qp;
}

struct fake_srq *fake_srq_new(struct fake_ctx *c, struct fake_cq *cq, uint32_t max_wr,
			      uint32_t max_sge)
{
	struct fake_srq *srq;
	uint32_t srqn = c->next_srqn;

	if (c->srqs[srqn % FAKE_MAX_QP])
		return NULL;
	srq = zalloc(sizeof(*srq));
	if (!srq)
		return NULL;
	if (wq_init(&srq->rq, max_wr, recv_stride(max_sge), max_sge, 0, &srq->dbrec)) {
		wq_free(&srq->rq);
		free(srq);
		return NULL;
	}
	c->next_srqn++;
	srq->ibsrq.context = &c->ctx;
	srq->ibsrq.handle = srqn;
	srq->srqn = srqn;
	srq->cq = cq;
	srq->qpn = 0xffffff;
	recv_cfg_init(&srq->recv);
	c->srqs[srqn % FAKE_MAX_QP] = srq;
	return srq;
}

struct ibv_ah *fake_ah_new(struct fake_ctx *c)
{
	struct ibv_ah *ah;

	if (c->nah == FAKE_MAX_QP)
		return NULL;
	ah = zalloc(sizeof(*ah));
	if (!ah)
		return NULL;
	ah->context = &c->ctx;
	ah->handle = (uint32_t)c->nah;
	c->ahs[c->nah++] = ah;
	return ah;
}

struct rdma_cm_id *fake_cm_id_new(struct fake_ctx *c, struct fake_qp *qp, struct fake_srq *srq)
{
	struct rdma_cm_id *id;

	if (c->nid == FAKE_MAX_QP)
		return NULL;
	id = zalloc(sizeof(*id));
	if (!id)
		return NULL;
	id->verbs = &c->ctx;
	id->ps = RDMA_PS_TCP;
	id->port_num = 1;
	if (qp) {
		id->qp = &qp->ibqp;
		id->qp_type = qp->ibqp.qp_type;
		id->send_cq = qp->ibqp.send_cq;
		id->recv_cq = qp->ibqp.recv_cq;
	}
	id->srq = srq ? &srq->ibsrq : NULL;
	c->ids[c->nid++] = id;
	return id;
}

void fake_ctx_free(struct fake_ctx *c)
{
	int i;

	if (!c)
		return;
	for (i = 0; i < FAKE_MAX_QP; i++) {
		if (c->qps[i]) {
			wq_free(&c->qps[i]->sq);
			wq_free(&c->qps[i]->rq);
			free(c->qps[i]);
		}
		if (c->srqs[i]) {
			wq_free(&c->srqs[i]->rq);
			free(c->srqs[i]);
		}
	}
	for (i = 0; i < c->ncq; i++) {
		free(c->cqs[i]->ring);
		free(c->cqs[i]);
	}
	for (i = 0; i < c->nah; i++)
		free(c->ahs[i]);
	for (i = 0; i < c->nid; i++)
		free(c->ids[i]);
	free(c);
}

uint32_t fake_cq_pending(const struct fake_cq *cq)
{
	return cq->pi - cq->ci;
}

const uint8_t *fake_wq_bb(const struct fake_wq *wq, uint32_t idx)
{
	return wq->buf + (size_t)(idx & (wq->wqe_cnt - 1)) * FAKE_WQE_BB;
}
