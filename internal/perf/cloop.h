// The bandwidth loops of engine.go written in C, for goverbs-perf -loop c:
// the same work in the same process without a cgo crossing per verb, so
// that what the Go loop costs and what the Go process costs can be told
// apart (BENCHMARKS.md, "How perf-compare runs").
#ifndef GOVERBS_PERF_CLOOP_H
#define GOVERBS_PERF_CLOOP_H

#include <stdint.h>

// perf_cloop_args is one run of a loop. Addresses are of C memory: the QP,
// the CQ and the registered buffer.
struct perf_cloop_args {
	uintptr_t qp, cq;
	uint64_t addr, raddr;
	uint32_t length, lkey, rkey;
	int opcode; // enum ibv_wr_opcode
	int64_t iters; // up to -n's bound, 2^32
	int post_list, cq_mod, tx_depth, rx_depth;
	int posted; // receives already outstanding (server)
	// progress is an int64_t in C memory where the loop stores its
	// completions so far, relaxed, after each poll that found some, for
	// the peer watch (watch.go) to read while it runs.
	uintptr_t progress;
};

// perf_cloop_next and perf_cloop_signaled are the client's posting
// arithmetic, sendPlan.next and sendPlan.signaled of plan.go: how many WRs
// to post next having posted posted and seen done complete (0: poll
// first), and whether WR seq asks for a completion. Both loops stop only
// for the plans that sendPlan.check lets through; a test holds these to
// the Go ones.
static inline int perf_cloop_next(const struct perf_cloop_args *a, int64_t posted, int64_t done)
{
	if (posted >= a->iters || posted - done + a->post_list > a->tx_depth)
		return 0;
	return a->iters - posted < a->post_list ? (int)(a->iters - posted) : a->post_list;
}

static inline int perf_cloop_signaled(const struct perf_cloop_args *a, int64_t seq)
{
	return (seq + 1) % a->cq_mod == 0 || seq + 1 == a->iters;
}

// perf_cloop_result is what a loop reports: its time from the first post
// (client) or the first receive (server) to the last completion, and the
// client's best rate between two polls that returned completions. When
// err is not 0 the loop stopped: err is the failed call's return (an
// errno) or, for a failed completion, its status, and op names the call.
struct perf_cloop_result {
	int64_t ns;
	double peak; // bytes a second
	int err;
	const char *op;
	uint64_t wr_id;
	int posted; // receives still outstanding when the server's loop ends
};

// Both take and return by value: no Go pointer crosses into C.
struct perf_cloop_result perf_cloop_client(struct perf_cloop_args a);
struct perf_cloop_result perf_cloop_server(struct perf_cloop_args a);

// The cgo loop (goverbs-perf -loop cgo, cgoloop.go) is the C loop's
// control in Go: each post and each spin of polls is a cgo call of its
// own, as in the Go loop over hand/, but the call is the C loop's own post
// or poll. Against the Go loop it prices hand/ and Go's code of the loop;
// against the C loop, the crossing alone. Its state is C memory, from
// perf_cgo_new (0 when malloc fails), freed by perf_cgo_free: Go holds it
// as an address.
//
// With a channel (not 0), each poll waits for completion events as
// hand's thread wait does at min 1, with perftest's -e steps: it polls, and
// while a poll finds nothing, it reads the channel's next event (get,
// ibv_get_cq_event, blocking in the channel's read), acknowledges it (ack,
// ibv_ack_cq_events), arms the CQ again and polls again. It returns once a
// poll finds completions: an event may find none, when its completion came
// before the arm and an earlier poll took it. spin is then ignored. The CQ
// must be armed before the first poll, and the channel's fd blocking. get
// and ack are the library's functions, which the C here cannot name:
// libibverbs is loaded at run time.
uintptr_t perf_cgo_new(struct perf_cloop_args a, uintptr_t channel, uintptr_t get, uintptr_t ack);
void perf_cgo_free(uintptr_t st);
// perf_cgo_post_send posts the client's WRs posted to posted+n-1 in one
// ibv_post_send, and returns its return: 0, or an errno.
int perf_cgo_post_send(uintptr_t st, int64_t posted, int n);
// perf_cgo_poll_send polls the client's CQ up to spin times, until a poll
// finds completions, and returns how many WRs are done (the last polled
// completion's wr_id + 1, or as before when none was found), or -1 when a
// poll or a completion failed (perf_cgo_result says which).
int64_t perf_cgo_poll_send(uintptr_t st, int spin);
// perf_cgo_poll_recv polls the server's CQ up to spin times, until a poll
// finds completions, and returns how many receives it found, or -1 as
// perf_cgo_poll_send.
int perf_cgo_poll_recv(uintptr_t st, int spin);
// perf_cgo_post_recv posts k receives in one ibv_post_recv (k at most
// rx_depth), and returns its return: 0, or an errno.
int perf_cgo_post_recv(uintptr_t st, int k);
// perf_cgo_result is what the last failed poll stopped on (err, op, wr_id).
struct perf_cloop_result perf_cgo_result(uintptr_t st);

#endif
