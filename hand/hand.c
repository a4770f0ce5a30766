/* hand.c: see hand.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hand.h"

/*
 * The chain is cut after last for the call and relinked after it, and the
 * bad_wr slot cleared, here rather than in Go, where each of those pointer
 * stores would sit behind a write-barrier check.
 */
int goverbs_post_recv(uintptr_t qp, uintptr_t first, uintptr_t last, uintptr_t bad)
{
	struct ibv_recv_wr *l = (struct ibv_recv_wr *)last, *next = l->next;
	int ret;

	l->next = NULL;
	*(struct ibv_recv_wr **)bad = NULL;
	ret = ibv_post_recv((struct ibv_qp *)qp, (struct ibv_recv_wr *)first, (struct ibv_recv_wr **)bad);
	l->next = next;
	return ret;
}

int goverbs_post_srq_recv(uintptr_t srq, uintptr_t first, uintptr_t last, uintptr_t bad)
{
	struct ibv_recv_wr *l = (struct ibv_recv_wr *)last, *next = l->next;
	int ret;

	l->next = NULL;
	*(struct ibv_recv_wr **)bad = NULL;
	ret = ibv_post_srq_recv((struct ibv_srq *)srq, (struct ibv_recv_wr *)first,
				(struct ibv_recv_wr **)bad);
	l->next = next;
	return ret;
}

int goverbs_post_send(uintptr_t qp, uintptr_t first, uintptr_t last, uintptr_t bad)
{
	struct ibv_send_wr *l = (struct ibv_send_wr *)last, *next = l->next;
	int ret;

	l->next = NULL;
	*(struct ibv_send_wr **)bad = NULL;
	ret = ibv_post_send((struct ibv_qp *)qp, (struct ibv_send_wr *)first, (struct ibv_send_wr **)bad);
	l->next = next;
	return ret;
}

int goverbs_poll_cq(uintptr_t cq, int n, uintptr_t wc)
{
	return ibv_poll_cq((struct ibv_cq *)cq, n, (struct ibv_wc *)wc);
}

int goverbs_arm_poll_cq(uintptr_t cq, int n, uintptr_t wc)
{
	int r = ibv_req_notify_cq((struct ibv_cq *)cq, 0);

	if (r != 0)
		return GOVERBS_ARM_POLL_FAILED - r;
	return ibv_poll_cq((struct ibv_cq *)cq, n, (struct ibv_wc *)wc);
}

int goverbs_poll_cq_spin(uintptr_t cq, int n, uintptr_t wc, int polls)
{
	int ret = 0;

	while (polls-- > 0) {
		ret = ibv_poll_cq((struct ibv_cq *)cq, n, (struct ibv_wc *)wc);
		if (ret != 0)
			break;
	}
	return ret;
}

/*
 * The rdma_post_*v loops below build each WR as the rdma_post_*v inline of
 * rdma/rdma_verbs.h builds it and post it with the ibv_post_* inline that
 * one calls, but keep the bad_wr rdma_post_*v throws away: a provider that
 * fails naming no WR (rxe, when its send doorbell fails or a receive meets
 * a QP in RESET) may have queued it; a bad_wr other than the WR posted
 * names none either. cm_failed encodes WR i's failure; ret is the
 * provider's return, which some providers (rxe) make negative: it is
 * turned positive, as errnoOf does for ibv_post_*. EIO is a guard; so
 * is the mask, which keeps an absurd return off the flag bits.
 */
static inline int64_t cm_failed(int i, int ret, int unknown)
{
	uint32_t e = ret < 0 ? -(uint32_t)ret : (uint32_t)ret;

	e &= ~(GOVERBS_CM_UNKNOWN | GOVERBS_CM_OPCODE);
	if (e == 0)
		e = EIO;
	if (unknown)
		e |= GOVERBS_CM_UNKNOWN;
	return (int64_t)i << 32 | e;
}

int64_t goverbs_cm_post_recvv(uintptr_t idp, uintptr_t wrp, int n)
{
	struct rdma_cm_id *id = (struct rdma_cm_id *)idp;
	struct ibv_recv_wr *wr = (struct ibv_recv_wr *)wrp;
	int i;

	/*
	 * rdma_post_recvv posts to id->srq when set, else to id->qp. A QP made
	 * on an SRQ the id does not know of (ibv_create_srq, then
	 * rdma_create_qp with it in the attributes) leaves id->srq NULL, and
	 * the post would go to the QP, which refuses it: post to the QP's SRQ
	 * instead.
	 */
	struct ibv_srq *srq = id->srq;

	if (srq == NULL && id->qp != NULL)
		srq = id->qp->srq;

	for (i = 0; i < n; i++) {
		/* Field by field, as rdma_post_recvv: an initialiser would zero
		 * the rest of the WR too, a cost per WR that C's loop lacks. */
		struct ibv_recv_wr one, *bad = NULL;
		int ret;

		one.wr_id = wr[i].wr_id;
		one.next = NULL;
		one.sg_list = wr[i].sg_list;
		one.num_sge = wr[i].num_sge;
		ret = srq != NULL ? ibv_post_srq_recv(srq, &one, &bad) : ibv_post_recv(id->qp, &one, &bad);

		if (ret)
			return cm_failed(i, ret, bad != &one);
	}
	return 0;
}

int64_t goverbs_cm_post_send(uintptr_t idp, int kind, uintptr_t wrp, int n)
{
	struct rdma_cm_id *id = (struct rdma_cm_id *)idp;
	struct ibv_send_wr *wr = (struct ibv_send_wr *)wrp;
	enum ibv_wr_opcode op;
	int i;

	switch (kind) {
	case GOVERBS_CM_SENDV:
		op = IBV_WR_SEND;
		break;
	case GOVERBS_CM_READV:
		op = IBV_WR_RDMA_READ;
		break;
	case GOVERBS_CM_WRITEV:
		op = IBV_WR_RDMA_WRITE;
		break;
	default:
		return cm_failed(0, EINVAL, 0);
	}
	for (i = 0; i < n; i++) {
		const struct ibv_send_wr *w = &wr[i];
		/* Field by field, as rdma_post_sendv and the others: see above. */
		struct ibv_send_wr one, *bad = NULL;
		int ret;

		/*
		 * Checked as the WR is read for its post, not in a pass of its
		 * own first, which read every opcode again straight after Go
		 * wrote it: that pass cost one CI machine 20 ns a WR (make
		 * bench-gate, rdma_post_sendv/8-64); this compare costs under 1.
		 */
		if (w->opcode != op)
			return (int64_t)i << 32 | GOVERBS_CM_OPCODE;
		one.wr_id = w->wr_id;
		one.next = NULL;
		one.sg_list = w->sg_list;
		one.num_sge = w->num_sge;
		one.opcode = op;
		one.send_flags = w->send_flags;
		if (op != IBV_WR_SEND) {
			one.wr.rdma.remote_addr = w->wr.rdma.remote_addr;
			one.wr.rdma.rkey = w->wr.rdma.rkey;
		}
		ret = ibv_post_send(id->qp, &one, &bad);
		if (ret)
			return cm_failed(i, ret, bad != &one);
	}
	return 0;
}

static inline void read_one(struct ibv_cq_ex *cq, struct ibv_wc *w, uint64_t *ts, uint64_t wc_flags)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = cq->wr_id;
	w->status = cq->status;
	if (cq->status != IBV_WC_SUCCESS) {
		/* a device leaves the rest unspecified */
		w->vendor_err = ibv_wc_read_vendor_err(cq);
		if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
			w->qp_num = ibv_wc_read_qp_num(cq);
		if (ts)
			*ts = 0;
		return;
	}
	w->opcode = ibv_wc_read_opcode(cq);
	w->wc_flags = ibv_wc_read_wc_flags(cq);
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		w->byte_len = ibv_wc_read_byte_len(cq);
	if (wc_flags & IBV_WC_EX_WITH_IMM) {
		if (w->wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV))
			w->imm_data = ibv_wc_read_imm_data(cq);
	} else {
		/* not read: the flags that announce it go too, or WC.Imm would answer (0, true) */
		w->wc_flags &= ~(unsigned int)(IBV_WC_WITH_IMM | IBV_WC_WITH_INV);
	}
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		w->qp_num = ibv_wc_read_qp_num(cq);
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		w->src_qp = ibv_wc_read_src_qp(cq);
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		w->slid = (uint16_t)ibv_wc_read_slid(cq);
	if (wc_flags & IBV_WC_EX_WITH_SL)
		w->sl = ibv_wc_read_sl(cq);
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		w->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
	if (ts)
		*ts = ibv_wc_read_completion_ts(cq);
}

int goverbs_poll_ex(uintptr_t cqp, uintptr_t wcp, uintptr_t tsp, int n, uint64_t wc_flags, uintptr_t fail)
{
	struct ibv_cq_ex *cq = (struct ibv_cq_ex *)cqp;
	struct ibv_wc *wc = (struct ibv_wc *)wcp;
	uint64_t *ts = (uint64_t *)tsp;
	struct ibv_poll_cq_attr attr = {0};
	int i = 0, ret;

	if (n <= 0)
		return 0;
	if (!(wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP))
		ts = NULL;
	ret = ibv_start_poll(cq, &attr);
	if (ret == ENOENT)
		return 0;
	if (ret) {
		*(int *)fail = ret;
		return GOVERBS_POLL_FAILED;
	}
	for (;;) {
		read_one(cq, &wc[i], ts ? &ts[i] : NULL, wc_flags);
		if (++i == n)
			break;
		ret = ibv_next_poll(cq);
		if (ret) {
			/* Not ENOENT, drained: a failure, whose completion mlx5, mlx4
			 * and hns have consumed (end_poll publishes it). */
			if (ret != ENOENT)
				*(int *)fail = ret;
			break;
		}
	}
	ibv_end_poll(cq);
	return i;
}

int goverbs_poll_ex_spin(uintptr_t cq, uintptr_t wc, uintptr_t ts, int n, uint64_t wc_flags, uintptr_t fail,
			 int polls)
{
	int ret = 0;

	while (polls-- > 0) {
		ret = goverbs_poll_ex(cq, wc, ts, n, wc_flags, fail);
		if (ret != 0)
			break;
	}
	return ret;
}
