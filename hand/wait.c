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
