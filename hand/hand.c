/* hand.c: see hand.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

int goverbs_waiter_open(int fd, int wake)
{
	struct epoll_event e = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), err;

	if (ep < 0)
		return -errno;
	e.data.u32 = GOVERBS_FD_READY;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0) {
		e.data.u32 = GOVERBS_WAKE_READY;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, wake, &e) == 0)
			return ep;
	}
	err = errno;
	close(ep);
	return -err;
}

int goverbs_wait_fds(int waiter)
{
	struct epoll_event e[2];
	int n, ret = 0;

	for (;;) {
		n = epoll_wait(waiter, e, 2, -1);
		if (n >= 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	while (n-- > 0)
		ret |= e[n].data.u32;
	return ret;
}

int goverbs_wake_open(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	return fd >= 0 ? fd : -errno;
}

/* The counter cannot overflow: pollFD signals it at most once between drains. */
void goverbs_wake_signal(int wake)
{
	uint64_t one = 1;

	while (write(wake, &one, sizeof one) < 0 && errno == EINTR)
		;
}

void goverbs_wake_drain(int wake)
{
	uint64_t n;

	while (read(wake, &n, sizeof n) < 0 && errno == EINTR)
		;
}

int goverbs_wait_cq_event(uintptr_t get, uintptr_t ack, uintptr_t channel, int waiter, uintptr_t kick_cq,
			  uintptr_t ev)
{
	int (*get_cq_event)(struct ibv_comp_channel *, struct ibv_cq **, void **) =
		(int (*)(struct ibv_comp_channel *, struct ibv_cq **, void **))get;
	void (*ack_cq_events)(struct ibv_cq *, unsigned int) = (void (*)(struct ibv_cq *, unsigned int))ack;
	struct ibv_comp_channel *ch = (struct ibv_comp_channel *)channel;
	struct goverbs_cq_event *e = (struct goverbs_cq_event *)ev;
	int r;

	if (waiter < 0) {
		/* No epoll: the fd is blocking, and the kick ends the read. */
		if (get_cq_event(ch, &e->cq, &e->context) != 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				return GOVERBS_NO_EVENT; /* a handler without SA_RESTART */
			e->err = errno;
			return GOVERBS_READ_FAILED;
		}
		ack_cq_events(e->cq, 1);
		return e->cq == (struct ibv_cq *)kick_cq ? GOVERBS_WOKEN : GOVERBS_EVENT;
	}
	r = goverbs_wait_fds(waiter);
	if (r < 0) {
		e->err = -r;
		return GOVERBS_WAIT_FAILED;
	}
	if (r & GOVERBS_WAKE_READY)
		return GOVERBS_WOKEN;
	if (get_cq_event(ch, &e->cq, &e->context) != 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return GOVERBS_NO_EVENT;
		e->err = errno;
		return GOVERBS_READ_FAILED;
	}
	ack_cq_events(e->cq, 1);
	return GOVERBS_EVENT;
}

/* any_failed reports whether one of the n completions at w failed. */
static int any_failed(const struct ibv_wc *w, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (w[i].status != IBV_WC_SUCCESS)
			return 1;
	return 0;
}

int goverbs_wait_poll_cq(uintptr_t get, uintptr_t ack, uintptr_t channel, int waiter, uintptr_t kick_cq,
			 uintptr_t ev, uintptr_t cq, int n, uintptr_t wc, int armed, int min)
{
	struct ibv_cq *c = (struct ibv_cq *)cq;
	struct goverbs_cq_event *e = (struct goverbs_cq_event *)ev;
	struct ibv_wc *w = (struct ibv_wc *)wc;
	int held = e->polled; /* kept here, and in e at every return */
	int r;

	for (;;) {
		if (!armed) {
			r = ibv_req_notify_cq(c, 0);
			if (r != 0) {
				e->err = r;
				return GOVERBS_ARM_FAILED;
			}
			armed = 1;
		}
		r = ibv_poll_cq(c, n - held, w + held);
		if (r < 0) {
			if (held > 0)
				return GOVERBS_POLLED; /* those first: the next wait's poll fails again */
			e->err = r;
			return GOVERBS_POLL_CQ_FAILED;
		}
		if (r > 0) {
			held += r;
			e->polled = held;
			/* The scan only when the batch would go on: with min 1,
			 * as WaitThread's, never. */
			if (held >= min || held == n || any_failed(w + held - r, r))
				return GOVERBS_POLLED;
			continue; /* more may be queued already: poll before waiting */
		}
		r = goverbs_wait_cq_event(get, ack, channel, waiter, kick_cq, ev);
		if (r == GOVERBS_NO_EVENT)
			continue; /* readable, then read by nobody: poll again */
		if (r != GOVERBS_EVENT || e->cq != c)
			return r;
		armed = 0; /* cq's event disarmed it */
	}
}

static int kick_modify(struct goverbs_kick *k, enum ibv_qp_state state)
{
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int) =
		(int (*)(struct ibv_qp *, struct ibv_qp_attr *, int))k->modify_qp;
	struct ibv_qp_attr a = { .qp_state = state };
	int mask = IBV_QP_STATE, r;

	if (state == IBV_QPS_INIT) {
		a.port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	}
	r = modify_qp(k->qp, &a, mask);
	if (r != 0)
		k->failed = state == IBV_QPS_ERR ? "ibv_modify_qp (to the error state)" : "ibv_modify_qp";
	return r;
}

/* kick_reap polls the kick's CQ until the flushed receive's completion is
 * there, for up to a second. */
static int kick_reap(struct goverbs_kick *k)
{
	struct ibv_wc wc;
	int i, r;

	for (i = 0; i < 10000; i++) {
		r = ibv_poll_cq(k->cq, 1, &wc);
		if (r > 0)
			return 0;
		if (r < 0) {
			k->failed = "ibv_poll_cq";
			return EIO;
		}
		usleep(100);
	}
	k->failed = "ibv_poll_cq (the flushed receive's completion did not come within a second)";
	return ETIMEDOUT;
}

/* kick_ready resets the QP, brings it to INIT and posts its receive; and
 * arms the CQ when arm is set. */
static int kick_ready(struct goverbs_kick *k, int arm)
{
	struct ibv_recv_wr wr = { .wr_id = 0, .num_sge = 0 }, *bad;
	int r;

	if ((r = kick_modify(k, IBV_QPS_RESET)) != 0 || (r = kick_modify(k, IBV_QPS_INIT)) != 0)
		return r;
	if ((r = ibv_post_recv(k->qp, &wr, &bad)) != 0) {
		k->failed = "ibv_post_recv";
		return r;
	}
	if (arm && (r = ibv_req_notify_cq(k->cq, 0)) != 0) {
		k->failed = "ibv_req_notify_cq";
		return r;
	}
	return 0;
}

int goverbs_kick_open(struct goverbs_kick *k, uintptr_t context, uintptr_t channel)
{
	struct ibv_pd *(*alloc_pd)(struct ibv_context *) = (struct ibv_pd * (*)(struct ibv_context *)) k->alloc_pd;
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int) =
		(struct ibv_cq * (*)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int)) k->create_cq;
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *) =
		(struct ibv_qp * (*)(struct ibv_pd *, struct ibv_qp_init_attr *)) k->create_qp;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	int r;

	k->pd = NULL, k->cq = NULL, k->qp = NULL, k->failed = NULL;
	if (!(k->pd = alloc_pd((struct ibv_context *)context))) {
		k->failed = "ibv_alloc_pd";
		goto fail;
	}
	if (!(k->cq = create_cq((struct ibv_context *)context, 1, NULL, (struct ibv_comp_channel *)channel, 0))) {
		k->failed = "ibv_create_cq";
		goto fail;
	}
	ia.send_cq = ia.recv_cq = k->cq;
	if (!(k->qp = create_qp(k->pd, &ia))) {
		k->failed = "ibv_create_qp (RC)";
		goto fail;
	}
	/* Once unarmed, to see that the QP flushes, then armed. */
	if ((r = kick_ready(k, 0)) != 0 || (r = goverbs_kick_signal(k)) != 0 || (r = kick_reap(k)) != 0 ||
	    (r = kick_ready(k, 1)) != 0) {
		errno = r;
		goto fail;
	}
	return 0;
fail:
	r = errno ? errno : EIO;
	goverbs_kick_close(k);
	return r;
}

int goverbs_kick_signal(struct goverbs_kick *k)
{
	return kick_modify(k, IBV_QPS_ERR);
}

int goverbs_kick_rearm(struct goverbs_kick *k)
{
	int r = kick_reap(k);

	return r != 0 ? r : kick_ready(k, 1);
}

void goverbs_kick_close(struct goverbs_kick *k)
{
	int (*destroy_qp)(struct ibv_qp *) = (int (*)(struct ibv_qp *))k->destroy_qp;
	int (*destroy_cq)(struct ibv_cq *) = (int (*)(struct ibv_cq *))k->destroy_cq;
	int (*dealloc_pd)(struct ibv_pd *) = (int (*)(struct ibv_pd *))k->dealloc_pd;

	if (k->qp)
		destroy_qp(k->qp);
	if (k->cq)
		destroy_cq(k->cq);
	if (k->pd)
		dealloc_pd(k->pd);
	k->pd = NULL, k->cq = NULL, k->qp = NULL;
}
