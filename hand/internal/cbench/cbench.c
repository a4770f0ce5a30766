/* cbench.c: see cbench.h. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cbench.h"

/* Keeps the compiler from dropping reads of polled completions. */
static volatile uint64_t cb_sink;

void cb_empty(void)
{
}

void cb_empty3(void *a, void *b, void *c)
{
	(void)a;
	(void)b;
	(void)c;
}

void cb_empty4u(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d)
{
	(void)a;
	(void)b;
	(void)c;
	(void)d;
}

/* A prelinked chain like hand's: cap WRs, cap SGEs (one per WR), the bad_wr slot. */
struct recv_chain {
	struct ibv_recv_wr *wr;
	struct ibv_sge *sge;
	struct ibv_recv_wr **bad;
};

static void *recv_chain_new(struct recv_chain *c, int n)
{
	char *mem = calloc(1, (size_t)n * (sizeof(*c->wr) + sizeof(*c->sge)) + sizeof(*c->bad));
	int i;

	if (!mem)
		return NULL;
	c->wr = (struct ibv_recv_wr *)mem;
	c->sge = (struct ibv_sge *)(mem + (size_t)n * sizeof(*c->wr));
	c->bad = (struct ibv_recv_wr **)(mem + (size_t)n * (sizeof(*c->wr) + sizeof(*c->sge)));
	for (i = 0; i < n; i++) {
		c->wr[i].next = i + 1 < n ? &c->wr[i + 1] : NULL;
		c->wr[i].sg_list = &c->sge[i];
	}
	return mem;
}

static inline void recv_fill(struct recv_chain *c, int n, uint64_t *id)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &c->wr[i];
		struct ibv_sge *s = &c->sge[i];

		w->wr_id = (*id)++;
		w->num_sge = 1;
		s->addr = CB_ADDR + (uint64_t)i * CB_LEN;
		s->length = CB_LEN;
		s->lkey = CB_LKEY;
	}
}

int cb_post_recv(struct ibv_qp *qp, int n, int64_t iters)
{
	struct recv_chain c;
	void *mem = recv_chain_new(&c, n);
	uint64_t id = 0;
	int64_t it;
	int ret = 0;

	if (!mem)
		return ENOMEM;
	for (it = 0; it < iters; it++) {
		struct ibv_recv_wr *last = &c.wr[n - 1], *save;

		recv_fill(&c, n, &id);
		save = last->next;
		last->next = NULL;
		ret = ibv_post_recv(qp, c.wr, c.bad);
		last->next = save;
		if (ret)
			break;
	}
	free(mem);
	return ret;
}

int cb_post_srq_recv(struct ibv_srq *srq, int n, int64_t iters)
{
	struct recv_chain c;
	void *mem = recv_chain_new(&c, n);
	uint64_t id = 0;
	int64_t it;
	int ret = 0;

	if (!mem)
		return ENOMEM;
	for (it = 0; it < iters; it++) {
		struct ibv_recv_wr *last = &c.wr[n - 1], *save;

		recv_fill(&c, n, &id);
		save = last->next;
		last->next = NULL;
		ret = ibv_post_srq_recv(srq, c.wr, c.bad);
		last->next = save;
		if (ret)
			break;
	}
	free(mem);
	return ret;
}

struct send_chain {
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	struct ibv_send_wr **bad;
	uint8_t *inl;   /* CB_INLINE_LEN bytes of staging per WR */
};

static void *send_chain_new(struct send_chain *c, int n, int inl)
{
	size_t wrs = (size_t)n * sizeof(*c->wr), sges = (size_t)n * sizeof(*c->sge);
	char *mem = calloc(1, wrs + sges + sizeof(*c->bad) + (inl ? (size_t)n * CB_INLINE_LEN : 0));
	int i;

	if (!mem)
		return NULL;
	c->wr = (struct ibv_send_wr *)mem;
	c->sge = (struct ibv_sge *)(mem + wrs);
	c->bad = (struct ibv_send_wr **)(mem + wrs + sges);
	c->inl = inl ? (uint8_t *)(mem + wrs + sges + sizeof(*c->bad)) : NULL;
	for (i = 0; i < n; i++) {
		c->wr[i].next = i + 1 < n ? &c->wr[i + 1] : NULL;
		c->wr[i].sg_list = &c->sge[i];
	}
	return mem;
}

static const uint8_t cb_inline_src[CB_INLINE_LEN] = "goverbs-inline!";

static inline void send_fill(struct send_chain *c, int n, int kind, struct ibv_ah *ah, uint64_t *id)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &c->wr[i];
		struct ibv_sge *s = &c->sge[i];
		uint64_t raddr = CB_RADDR + (uint64_t)i * CB_LEN;

		w->wr_id = (*id)++;
		w->num_sge = 1;
		w->send_flags = IBV_SEND_SIGNALED;
		w->imm_data = 0; /* as hand's SendChain: zero unless the opcode carries one */
		s->addr = CB_ADDR + (uint64_t)i * CB_LEN;
		s->length = CB_LEN;
		s->lkey = CB_LKEY;
		switch (kind) {
		case CB_SEND:
			w->opcode = IBV_WR_SEND;
			break;
		case CB_SEND_IMM:
			w->opcode = IBV_WR_SEND_WITH_IMM;
			w->imm_data = htobe32((uint32_t)i);
			break;
		case CB_WRITE:
			w->opcode = IBV_WR_RDMA_WRITE;
			w->wr.rdma.remote_addr = raddr;
			w->wr.rdma.rkey = CB_RKEY;
			break;
		case CB_WRITE_IMM:
			w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			w->imm_data = htobe32((uint32_t)i);
			w->wr.rdma.remote_addr = raddr;
			w->wr.rdma.rkey = CB_RKEY;
			break;
		case CB_READ:
			w->opcode = IBV_WR_RDMA_READ;
			w->wr.rdma.remote_addr = raddr;
			w->wr.rdma.rkey = CB_RKEY;
			break;
		case CB_CAS:
			w->opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			s->length = 8;
			w->wr.atomic.remote_addr = raddr;
			w->wr.atomic.rkey = CB_RKEY;
			w->wr.atomic.compare_add = (uint64_t)i;
			w->wr.atomic.swap = (uint64_t)i + 1;
			break;
		case CB_FAA:
			w->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			s->length = 8;
			w->wr.atomic.remote_addr = raddr;
			w->wr.atomic.rkey = CB_RKEY;
			w->wr.atomic.compare_add = 1;
			break;
		case CB_INLINE:
			w->opcode = IBV_WR_SEND;
			w->send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
			memcpy(c->inl + (size_t)i * CB_INLINE_LEN, cb_inline_src, CB_INLINE_LEN);
			s->addr = (uint64_t)(uintptr_t)(c->inl + (size_t)i * CB_INLINE_LEN);
			s->length = CB_INLINE_LEN;
			s->lkey = 0;
			break;
		case CB_UD:
			w->opcode = IBV_WR_SEND;
			w->wr.ud.ah = ah;
			w->wr.ud.remote_qpn = CB_REMOTE_QPN;
			w->wr.ud.remote_qkey = CB_QKEY;
			break;
		}
	}
}

int cb_post_send(struct ibv_qp *qp, int kind, struct ibv_ah *ah, int n, int64_t iters)
{
	struct send_chain c;
	void *mem;
	uint64_t id = 0;
	int64_t it;
	int ret = 0;

	if (kind < 0 || kind >= CB_NKINDS)
		return EINVAL;
	mem = send_chain_new(&c, n, kind == CB_INLINE);
	if (!mem)
		return ENOMEM;
	for (it = 0; it < iters; it++) {
		struct ibv_send_wr *last = &c.wr[n - 1], *save;

		send_fill(&c, n, kind, ah, &id);
		save = last->next;
		last->next = NULL;
		ret = ibv_post_send(qp, c.wr, c.bad);
		last->next = save;
		if (ret)
			break;
	}
	free(mem);
	return ret;
}

/*
 * rdma_post_*v post one WR each: a chain of n is n calls, each given its
 * context, scatter list and (read / write) remote address from the chain.
 */
int cb_rdma_post(struct rdma_cm_id *id, int kind, int n, int64_t iters)
{
	struct send_chain c;
	void *mem = send_chain_new(&c, n, 0);
	uint64_t ctx = 0;
	int64_t it;
	int ret = 0, i;

	if (!mem)
		return ENOMEM;
	for (it = 0; it < iters && !ret; it++) {
		for (i = 0; i < n; i++) {
			struct ibv_send_wr *w = &c.wr[i];
			struct ibv_sge *s = &c.sge[i];

			w->wr_id = ctx++;
			w->num_sge = 1;
			w->send_flags = kind == CB_RECVV ? 0 : IBV_SEND_SIGNALED;
			s->addr = CB_ADDR + (uint64_t)i * CB_LEN;
			s->length = CB_LEN;
			s->lkey = CB_LKEY;
			if (kind == CB_READV || kind == CB_WRITEV) {
				w->wr.rdma.remote_addr = CB_RADDR + (uint64_t)i * CB_LEN;
				w->wr.rdma.rkey = CB_RKEY;
			}
		}
		for (i = 0; i < n; i++) {
			struct ibv_send_wr *w = &c.wr[i];
			void *uctx = (void *)(uintptr_t)w->wr_id;

			switch (kind) {
			case CB_RECVV:
				ret = rdma_post_recvv(id, uctx, w->sg_list, w->num_sge);
				break;
			case CB_SENDV:
				ret = rdma_post_sendv(id, uctx, w->sg_list, w->num_sge,
						      (int)w->send_flags);
				break;
			case CB_READV:
				ret = rdma_post_readv(id, uctx, w->sg_list, w->num_sge,
						      (int)w->send_flags, w->wr.rdma.remote_addr,
						      w->wr.rdma.rkey);
				break;
			case CB_WRITEV:
				ret = rdma_post_writev(id, uctx, w->sg_list, w->num_sge,
						       (int)w->send_flags, w->wr.rdma.remote_addr,
						       w->wr.rdma.rkey);
				break;
			default:
				ret = -1;
				errno = EINVAL;
			}
			if (ret) {
				ret = errno;
				break;
			}
		}
	}
	free(mem);
	return ret;
}

int cb_poll(struct ibv_cq *cq, int n, int64_t iters)
{
	struct ibv_wc *wc = calloc((size_t)n, sizeof(*wc));
	uint64_t sum = 0;
	int64_t it;
	int ret = 0, i, got;

	if (!wc)
		return ENOMEM;
	for (it = 0; it < iters; it++) {
		got = ibv_poll_cq(cq, n, wc);
		if (got != n) {
			ret = -1;
			break;
		}
		for (i = 0; i < got; i++)
			sum += wc[i].wr_id + wc[i].status;
	}
	cb_sink = sum;
	free(wc);
	return ret;
}

int cb_poll_empty(struct ibv_cq *cq, int n, int polls, int64_t iters)
{
	struct ibv_wc *wc = calloc((size_t)n, sizeof(*wc));
	int64_t it;
	int ret = 0, j;

	if (!wc)
		return ENOMEM;
	for (it = 0; it < iters && !ret; it++)
		for (j = 0; j < polls; j++)
			if (ibv_poll_cq(cq, n, wc) != 0) {
				ret = -1;
				break;
			}
	free(wc);
	return ret;
}

/*
 * The reader is hand.c's own goverbs_poll_ex, the loop of start_poll,
 * next_poll and the ibv_wc_read_* calls a C program would write: Go's side
 * runs the same machine code over the same buffers, so the case measures
 * what Go adds around it. Two separately compiled copies of that loop ran up
 * to 16 ns per completion apart in one process and not in another: code
 * placement, not Go.
 */
int cb_poll_ex(cb_poll_ex_reader reader, struct ibv_cq_ex *cq, struct ibv_wc *wc, uint64_t *ts,
	       int *fail, int n, int64_t iters, uint64_t wc_flags)
{
	uint64_t sum = 0;
	int64_t it;
	int got, i;

	for (it = 0; it < iters; it++) {
		got = reader((uintptr_t)cq, (uintptr_t)wc, (uintptr_t)ts, n, wc_flags, (uintptr_t)fail);
		if (*fail) {
			got = *fail;
			*fail = 0;
			return got > 0 ? got : EIO;
		}
		if (got != n)
			return -1;
		for (i = 0; i < n; i++)
			sum += wc[i].wr_id + wc[i].status;
	}
	cb_sink = sum;
	return 0;
}
