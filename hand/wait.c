/* wait.c: see wait.h. */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "wait.h"

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
