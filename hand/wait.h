/*
 * C side of hand's waits (wait_*.go): the thread waits' blocking steps, one
 * cgo crossing a wake. Pointers come in as uintptr_t, as in hand.h.
 */
#ifndef GOVERBS_WAIT_H
#define GOVERBS_WAIT_H

#include "hand.h"

/*
 * The thread wait (pollFD.waitThreadHeld) where it cannot block in the
 * read itself (an fd without a kick: cqKick in wait_kick.go, which a
 * completion channel has unless its device refuses it): goverbs_waiter_open makes an
 * epoll instance, the waiter, watching fd and wake for input, or returns
 * -errno; goverbs_wait_fds blocks the calling thread in epoll_wait on it
 * until fd or wake is readable (an error or hang-up on fd counts as
 * readable: the read then reports it), retrying on EINTR. It returns
 * GOVERBS_FD_READY, GOVERBS_WAKE_READY or both, or -errno. epoll, not
 * poll(2): the two fds are looked up and hooked into their wait queues
 * once, not at every wait (send_bw -e at 64 B: about 550 fewer kernel
 * instructions a message, make perf-insns). goverbs_wake_open makes the eventfd
 * (non-blocking, close-on-exec) that goverbs_wake_signal makes readable
 * and goverbs_wake_drain makes empty again; goverbs_wake_open returns
 * -errno when it fails.
 */
enum {
	GOVERBS_FD_READY = 1,
	GOVERBS_WAKE_READY = 2,
};
int goverbs_waiter_open(int fd, int wake);
int goverbs_wait_fds(int waiter);
int goverbs_wake_open(void);
void goverbs_wake_signal(int wake);
void goverbs_wake_drain(int wake);

/*
 * What goverbs_wait_cq_event writes: the event's CQ and context, or errno;
 * and what goverbs_wait_poll_cq adds: how many completions it polled.
 */
struct goverbs_cq_event {
	struct ibv_cq *cq;
	void *context;
	int err;
	int polled;
};

/* goverbs_wait_cq_event's results. */
enum {
	GOVERBS_EVENT = 0,       /* ev->cq and ev->context hold an event, acknowledged */
	GOVERBS_WOKEN = 1,       /* wake is readable, nothing read; or the kick's event was read, acknowledged */
	GOVERBS_NO_EVENT = 2,    /* the fd was readable but the read found nothing (EAGAIN), or was interrupted */
	GOVERBS_WAIT_FAILED = 3, /* ev->err is epoll_wait's errno (waiter given) */
	GOVERBS_READ_FAILED = 4, /* ev->err is ibv_get_cq_event's errno */
	/* goverbs_wait_poll_cq's own: */
	GOVERBS_POLLED = 5,       /* wc holds ev->polled completions */
	GOVERBS_ARM_FAILED = 6,   /* ev->err is ibv_req_notify_cq's errno */
	GOVERBS_POLL_CQ_FAILED = 7, /* ev->err is ibv_poll_cq's negative result */
};

/*
 * goverbs_wait_cq_event is CompChannel.WaitThread's one cgo crossing a wake:
 * one event read with get (ibv_get_cq_event) and acknowledged with ack
 * (ibv_ack_cq_events). With waiter -1 the channel's fd is blocking and
 * the read is the wait, which an event of kick_cq, the channel's kick's
 * CQ (cqKick), ends as GOVERBS_WOKEN. Otherwise it first calls
 * goverbs_wait_fds on waiter (which watches the channel's fd and a wake),
 * and reads, from the non-blocking fd, only when the fd alone is readable.
 * get and ack are the loaded library's functions (verbs.Address): this
 * file cannot name the generated loader's trampolines, which live in
 * package verbs.
 */
int goverbs_wait_cq_event(uintptr_t get, uintptr_t ack, uintptr_t channel, int waiter, uintptr_t kick_cq,
			  uintptr_t ev);

/*
 * goverbs_wait_poll_cq is Poller.WaitThread's one cgo crossing a wake, the
 * loop perftest's -e runs: it arms cq unless armed says it is armed
 * (ibv_req_notify_cq), polls it into wc, and while it holds fewer than min
 * completions, polls again, and when a poll finds nothing, waits for the
 * channel's next event (goverbs_wait_cq_event); an event of cq disarmed
 * it, so it arms it again before it polls. wc has room for n; ev->polled
 * is how many it holds, which the caller sets (0 to start a wait, or what
 * an earlier call left) and each poll adds to, at every return. It returns
 * GOVERBS_POLLED, with cq left armed, once it holds at least min, or n, or
 * a completion whose status is not success, or when a poll fails with some
 * held; GOVERBS_EVENT with another CQ's event in ev, acknowledged, for Go
 * to file; GOVERBS_WOKEN; or a failure. The caller holds cq (it may not be
 * destroyed during the call) and the channel's turn.
 */
int goverbs_wait_poll_cq(uintptr_t get, uintptr_t ack, uintptr_t channel, int waiter, uintptr_t kick_cq,
			 uintptr_t ev, uintptr_t cq, int n, uintptr_t wc, int armed, int min);

#endif
