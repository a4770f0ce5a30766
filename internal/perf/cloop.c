#include "cloop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../headers/vendored/include/infiniband/verbs.h"

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Up to 16 completions a poll, as the Go side's Poller.
enum { POLL_BATCH = 16 };

// fail records a failed call: its return, or a completion's status.
static void fail(struct perf_cloop_result *r, const char *op, int err, uint64_t wr_id)
{
	r->op = op;
	r->err = err;
	r->wr_id = wr_id;
}

// failed_wc records in r the first of the n completions in wc whose
// status is not success, and reports whether there was one.
static int failed_wc(struct perf_cloop_result *r, const struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			fail(r, "completion", wc[i].status, wc[i].wr_id);
			return 1;
		}
	}
	return 0;
}

// fill_send makes the client's WRs posted to posted+n-1 in wrs, a chain.
static void fill_send(const struct perf_cloop_args *a, struct ibv_send_wr *wrs, struct ibv_sge *sge, int64_t posted, int n)
{
	for (int i = 0; i < n; i++) {
		int64_t seq = posted + i;
		struct ibv_send_wr *wr = &wrs[i];
		memset(wr, 0, sizeof *wr);
		wr->wr_id = (uint64_t)seq;
		wr->next = i + 1 < n ? &wrs[i + 1] : NULL;
		wr->sg_list = sge;
		wr->num_sge = 1;
		wr->opcode = a->opcode;
		if (perf_cloop_signaled(a, seq))
			wr->send_flags = IBV_SEND_SIGNALED;
		if (a->opcode != IBV_WR_SEND) {
			wr->wr.rdma.remote_addr = a->raddr;
			wr->wr.rdma.rkey = a->rkey;
		}
	}
}

// fill_recv makes k receives of sge in wrs, a chain.
static void fill_recv(struct ibv_recv_wr *wrs, struct ibv_sge *sge, int k)
{
	for (int i = 0; i < k; i++) {
		memset(&wrs[i], 0, sizeof wrs[i]);
		wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
		wrs[i].sg_list = sge;
		wrs[i].num_sge = 1;
	}
}

struct perf_cloop_result perf_cloop_client(struct perf_cloop_args args)
{
	const struct perf_cloop_args *a = &args;
	struct perf_cloop_result res, *r = &res;
	struct ibv_qp *qp = (struct ibv_qp *)a->qp;
	struct ibv_cq *cq = (struct ibv_cq *)a->cq;
	struct ibv_sge sge = { .addr = a->addr, .length = a->length, .lkey = a->lkey };
	struct ibv_send_wr *wrs = calloc(a->post_list, sizeof *wrs), *bad;
	struct ibv_wc wc[POLL_BATCH];
	int64_t posted = 0, done = 0, last_done = 0;
	int64_t start, last;
	int64_t *progress = (int64_t *)a->progress;

	memset(r, 0, sizeof *r);
	if (!wrs) {
		fail(r, "calloc", ENOMEM, 0);
		return res;
	}
	start = last = now_ns();
	while (done < a->iters) {
		for (int n; (n = perf_cloop_next(a, posted, done)) > 0;) {
			fill_send(a, wrs, &sge, posted, n);
			int rc = ibv_post_send(qp, wrs, &bad);
			if (rc) {
				fail(r, "ibv_post_send", rc, bad ? bad->wr_id : 0);
				goto out;
			}
			posted += n;
		}
		int got = ibv_poll_cq(cq, POLL_BATCH, wc);
		if (got < 0) {
			fail(r, "ibv_poll_cq", -got, 0);
			goto out;
		}
		if (failed_wc(r, wc, got))
			goto out;
		if (got > 0) {
			done = (int64_t)wc[got - 1].wr_id + 1;
			__atomic_store_n(progress, done, __ATOMIC_RELAXED);
			int64_t t = now_ns();
			if (t > last) {
				double rate = (double)(done - last_done) * a->length * 1e9 / (double)(t - last);
				if (rate > r->peak)
					r->peak = rate;
			}
			last = t;
			last_done = done;
		}
	}
	r->ns = now_ns() - start;
out:
	free(wrs);
	return res;
}

struct perf_cloop_result perf_cloop_server(struct perf_cloop_args args)
{
	const struct perf_cloop_args *a = &args;
	struct perf_cloop_result res, *r = &res;
	struct ibv_qp *qp = (struct ibv_qp *)a->qp;
	struct ibv_cq *cq = (struct ibv_cq *)a->cq;
	struct ibv_sge sge = { .addr = a->addr, .length = a->length, .lkey = a->lkey };
	struct ibv_recv_wr *wrs = calloc(a->rx_depth, sizeof *wrs), *bad;
	struct ibv_wc wc[POLL_BATCH];
	int64_t got = 0;
	int posted = a->posted;
	int64_t start = 0;
	int64_t *progress = (int64_t *)a->progress;

	memset(r, 0, sizeof *r);
	if (!wrs) {
		fail(r, "calloc", ENOMEM, 0);
		return res;
	}
	while (got < a->iters) {
		int n = ibv_poll_cq(cq, POLL_BATCH, wc);
		if (n < 0) {
			fail(r, "ibv_poll_cq", -n, 0);
			goto out;
		}
		if (failed_wc(r, wc, n))
			goto out;
		if (n > 0 && got == 0)
			start = now_ns();
		got += n;
		posted -= n;
		if (n > 0)
			__atomic_store_n(progress, got, __ATOMIC_RELAXED);
		// Topped up when half used, in one post, as the Go loop does.
		if (posted <= a->rx_depth / 2) {
			int k = a->rx_depth - posted;
			fill_recv(wrs, &sge, k);
			int rc = ibv_post_recv(qp, wrs, &bad);
			if (rc) {
				fail(r, "ibv_post_recv", rc, 0);
				goto out;
			}
			posted += k;
		}
	}
	r->ns = now_ns() - start;
out:
	r->posted = posted;
	free(wrs);
	return res;
}

// perf_cgo is the cgo loop's state (cloop.h).
struct perf_cgo {
	struct perf_cloop_args a;
	struct ibv_sge sge;
	struct perf_cloop_result r; // the last failed poll's
	int64_t done;               // client: the last polled wr_id + 1
	struct ibv_send_wr *send;   // post_list of them
	struct ibv_recv_wr *recv;   // rx_depth of them
	struct ibv_wc wc[POLL_BATCH];
	// With events (channel not NULL): the library's functions, and
	// whether the last poll found nothing, so that the next waits first.
	struct ibv_comp_channel *channel;
	int (*get)(struct ibv_comp_channel *, struct ibv_cq **, void **);
	void (*ack)(struct ibv_cq *, unsigned int);
	int drained;
};

uintptr_t perf_cgo_new(struct perf_cloop_args a, uintptr_t channel, uintptr_t get, uintptr_t ack)
{
	struct perf_cgo *st = calloc(1, sizeof *st);
	if (!st)
		return 0;
	st->a = a;
	st->channel = (struct ibv_comp_channel *)channel;
	st->get = (int (*)(struct ibv_comp_channel *, struct ibv_cq **, void **))get;
	st->ack = (void (*)(struct ibv_cq *, unsigned int))ack;
	st->sge = (struct ibv_sge){ .addr = a.addr, .length = a.length, .lkey = a.lkey };
	st->send = calloc(a.post_list, sizeof *st->send);
	st->recv = calloc(a.rx_depth, sizeof *st->recv);
	if (!st->send || !st->recv) {
		perf_cgo_free((uintptr_t)st);
		return 0;
	}
	return (uintptr_t)st;
}

void perf_cgo_free(uintptr_t p)
{
	struct perf_cgo *st = (struct perf_cgo *)p;
	free(st->send);
	free(st->recv);
	free(st);
}

int perf_cgo_post_send(uintptr_t p, int64_t posted, int n)
{
	struct perf_cgo *st = (struct perf_cgo *)p;
	struct ibv_send_wr *bad;
	fill_send(&st->a, st->send, &st->sge, posted, n);
	return ibv_post_send((struct ibv_qp *)st->a.qp, st->send, &bad);
}

// cgo_poll polls up to spin times, until a poll finds completions, and
// returns how many it found, or -1 with st->r saying why.
static int cgo_poll(struct perf_cgo *st, int spin)
{
	struct ibv_cq *cq = (struct ibv_cq *)st->a.cq;
	int got = 0;
	if (st->channel) {
		// Until a poll finds completions, as hand's thread wait: an event
		// whose completion an earlier poll took finds nothing.
		do {
			if (st->drained) {
				struct ibv_cq *ev_cq;
				void *ev_ctx;
				if (st->get(st->channel, &ev_cq, &ev_ctx)) {
					fail(&st->r, "ibv_get_cq_event", errno, 0);
					return -1;
				}
				st->ack(ev_cq, 1);
				int rc = ibv_req_notify_cq(cq, 0);
				if (rc) {
					fail(&st->r, "ibv_req_notify_cq", rc, 0);
					return -1;
				}
			}
			got = ibv_poll_cq(cq, POLL_BATCH, st->wc);
			st->drained = got == 0;
		} while (got == 0);
	} else {
		for (int i = 0; i < spin && got == 0; i++)
			got = ibv_poll_cq(cq, POLL_BATCH, st->wc);
	}
	if (got < 0) {
		fail(&st->r, "ibv_poll_cq", -got, 0);
		return -1;
	}
	return failed_wc(&st->r, st->wc, got) ? -1 : got;
}

int64_t perf_cgo_poll_send(uintptr_t p, int spin)
{
	struct perf_cgo *st = (struct perf_cgo *)p;
	int got = cgo_poll(st, spin);
	if (got < 0)
		return -1;
	if (got > 0)
		st->done = (int64_t)st->wc[got - 1].wr_id + 1;
	return st->done;
}

int perf_cgo_poll_recv(uintptr_t p, int spin)
{
	return cgo_poll((struct perf_cgo *)p, spin);
}

int perf_cgo_post_recv(uintptr_t p, int k)
{
	struct perf_cgo *st = (struct perf_cgo *)p;
	struct ibv_recv_wr *bad;
	fill_recv(st->recv, &st->sge, k);
	return ibv_post_recv((struct ibv_qp *)st->a.qp, st->recv, &bad);
}

struct perf_cloop_result perf_cgo_result(uintptr_t p)
{
	return ((struct perf_cgo *)p)->r;
}
