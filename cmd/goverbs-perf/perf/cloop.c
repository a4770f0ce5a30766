#include "cloop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

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
			for (int i = 0; i < n; i++) {
				int64_t seq = posted + i;
				struct ibv_send_wr *wr = &wrs[i];
				memset(wr, 0, sizeof *wr);
				wr->wr_id = (uint64_t)seq;
				wr->next = i + 1 < n ? &wrs[i + 1] : NULL;
				wr->sg_list = &sge;
				wr->num_sge = 1;
				wr->opcode = a->opcode;
				if (perf_cloop_signaled(a, seq))
					wr->send_flags = IBV_SEND_SIGNALED;
				if (a->opcode != IBV_WR_SEND) {
					wr->wr.rdma.remote_addr = a->raddr;
					wr->wr.rdma.rkey = a->rkey;
				}
			}
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
		for (int i = 0; i < got; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fail(r, "completion", wc[i].status, wc[i].wr_id);
				goto out;
			}
			done = (int64_t)wc[i].wr_id + 1;
		}
		if (got > 0) {
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
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fail(r, "completion", wc[i].status, wc[i].wr_id);
				goto out;
			}
		}
		if (n > 0 && got == 0)
			start = now_ns();
		got += n;
		posted -= n;
		if (n > 0)
			__atomic_store_n(progress, got, __ATOMIC_RELAXED);
		// Topped up when half used, in one post, as the Go loop does.
		if (posted <= a->rx_depth / 2) {
			int k = a->rx_depth - posted;
			for (int i = 0; i < k; i++) {
				memset(&wrs[i], 0, sizeof wrs[i]);
				wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
				wrs[i].sg_list = &sge;
				wrs[i].num_sge = 1;
			}
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
