/* Golden case "funcs": extern prototypes, static inline functions and function-like macros. */
#ifndef GOLDEN_FUNCS_H
#define GOLDEN_FUNCS_H

#include <stddef.h>
#include <stdint.h>

struct ibv_context;
struct ibv_mr;

struct ibv_pd {
	struct ibv_context *context;
	uint32_t handle;
};

struct ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct ibv_recv_wr {
	uint64_t wr_id;
	struct ibv_recv_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
};

struct ibv_qp;

struct ibv_qp_ops {
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
};

struct ibv_qp {
	struct ibv_qp_ops ops;
	uint32_t qp_num;
};

struct ibv_port_attr {
	uint32_t max_msg_sz;
	uint16_t lid;
};

enum ibv_access_flags {
	IBV_ACCESS_LOCAL_WRITE = 1,
	IBV_ACCESS_OPTIONAL_RANGE = 0x3ff00000,
};

/* Extern prototypes. */
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access);
int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr);
void ibv_ack_events(struct ibv_qp *qp, unsigned int nevents);
const char *ibv_node_name(int node);
struct ibv_sge ibv_make_sge(uint64_t addr, uint32_t length);
uint32_t ibv_sge_bytes(struct ibv_sge sge, enum ibv_access_flags flags);
int ibv_log(const char *format, ...);

/* Static inline functions: the data path. */
static inline int ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return qp->ops.post_recv(qp, wr, bad_wr);
}

static inline uint32_t ibv_qp_num(const struct ibv_qp *qp)
{
	return qp->qp_num;
}

static inline struct ibv_mr *__ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
					  unsigned int access, int is_access_const)
{
	if (is_access_const && (access & IBV_ACCESS_OPTIONAL_RANGE) == 0)
		return ibv_reg_mr(pd, addr, length, (int)access);
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

static inline int ___ibv_query_port(struct ibv_context *context, uint8_t port_num,
				    struct ibv_port_attr *port_attr)
{
	return ibv_query_port(context, port_num, port_attr);
}

/* A pointer to an array, as a parameter and as a result: *[4]C.uint in cgo. */
static inline uint32_t (*ibv_row(uint32_t (*grid)[4], int i))[4]
{
	return grid + i;
}

static inline uint32_t ibv_row_sum(const uint32_t (*row)[4])
{
	return (*row)[0] + (*row)[1] + (*row)[2] + (*row)[3];
}

/* A function pointer, and a pointer to one, through a function-like macro:
 * its C wrapper cannot spell their types. */
typedef uint32_t (*ibv_qp_reader)(const struct ibv_qp *qp);

static inline ibv_qp_reader ibv_qp_num_reader(void)
{
	return ibv_qp_num;
}

static inline uint32_t __ibv_apply(struct ibv_qp *qp, ibv_qp_reader fn, ibv_qp_reader *last)
{
	*last = fn;
	return fn(qp);
}

/* Parameters named as Go's predeclared types and constants, which the stub
 * spells: uint32(r), nil. */
static inline uint32_t ibv_mask(uint32_t uint32, int32_t int32, int nil, int iota, int len)
{
	return (uint32 & (uint32_t)int32) + (uint32_t)(nil + iota + len);
}

/* Function-like macros that expand to a call: the stub calls the macro. */
#define ibv_reg_mr(pd, addr, length, access)                                   \
	__ibv_reg_mr(pd, addr, length, access,                                 \
		     __builtin_constant_p(((int)(access) & IBV_ACCESS_OPTIONAL_RANGE) == 0))

#define ibv_query_port(context, port_num, port_attr)                           \
	___ibv_query_port(context, port_num, port_attr)

#define ibv_grid_row(grid, i) ibv_row(grid, i)

#define ibv_apply(qp, fn, last) __ibv_apply(qp, fn, last)

/* Function-like macros with no Go signature: reported as skipped. */
#define ibv_field_avail(type, fld, sz) (offsetof(type, fld) < (sz))
#define ibv_get_op(qp, op) ((qp)->ops.op)
#define ibv_twice(x) ((x) * 2)
#define ibv_two_calls(qp) ibv_qp_num(qp) + ibv_qp_num(qp)
#define ibv_undeclared(x) ibv_nowhere(x)
#define IBV_DECLARE_PTR(type, name) union { type name; uint64_t name##_u64; }

/* const-qualified pointers as parameters and results of the preamble's C
 * wrappers: function-like macros, and static inline functions that leave
 * a provider's -errno in errno through rdma_seterrno (gen.ErrnoCopiers).
 * A wrapper spelling char ** where the function takes const char *const *
 * or const char ** (or const struct ibv_port_attr **) does not compile
 * with gcc 14 and later (incompatible pointer types); one returning a
 * const pointer as non-const is warned about (discarded qualifiers). */
#include <errno.h>

int rdma_seterrno(int ret);

const char *const *ibv_names_from(const char *const *names, const char **first,
				  const struct ibv_port_attr *attr);
const struct ibv_port_attr *ibv_attr_from(const struct ibv_port_attr *const *attrs, int i,
					  const struct ibv_port_attr **last);
const ibv_qp_reader *ibv_reader_from(const ibv_qp_reader *readers, ibv_qp_reader const fallback);

#define ibv_names(names, first, attr) ibv_names_from(names, first, attr)
#define ibv_attr(attrs, i, last) ibv_attr_from(attrs, i, last)
#define ibv_reader(readers, fallback) ibv_reader_from(readers, fallback)

/* Prototypes without parameter names behind macros: the wrapper takes the
 * macro's names, after the pointers or through __typeof__ of the type. */
const char *ibv_label_of(const char *const *, unsigned int);
uint32_t ibv_cell(const uint32_t (*)[4], int);
#define ibv_label(labels, i) ibv_label_of(labels, i)
#define ibv_grid_cell(row, i) ibv_cell(row, i)

static inline const char *const *ibv_find_names(const char *const *names, const char **first)
{
	if (!names[0]) {
		rdma_seterrno(-ENOENT);
		return NULL;
	}
	*first = names[0];
	return names;
}

static inline const struct ibv_port_attr *ibv_find_attr(const struct ibv_port_attr *const *attrs,
							 const struct ibv_port_attr **last)
{
	if (!attrs[0]) {
		rdma_seterrno(-ENOENT);
		return NULL;
	}
	*last = attrs[0];
	return attrs[0];
}

static inline const ibv_qp_reader *ibv_find_reader(const ibv_qp_reader *readers)
{
	if (!readers[0]) {
		rdma_seterrno(-ENOENT);
		return NULL;
	}
	return readers;
}

static inline int ibv_count_names(const char *const *names, const char *const stop)
{
	int n = 0;

	while (names[n] && names[n] != stop)
		n++;
	if (!n)
		return rdma_seterrno(-ENOENT);
	return n;
}

/* A macro over an errno copier: its wrapper makes errno positive too. */
#define ibv_count(names) ibv_count_names(names, (const char *)0)

/* Pointers passed unchecked, each cast back by its wrapper to the type
 * spelled here. A data-path function: every pointer parameter (an array, a
 * const record, a pointer to an array, void *, const char *const *, an
 * out-slot). */
static inline int ibv_post_rows(struct ibv_qp *qp, const struct ibv_sge sges[], int n,
				const uint32_t (*rows)[4], void *ctx, const char *const *names,
				struct ibv_recv_wr **bad_wr)
{
	uint32_t sum = qp->qp_num;

	for (int i = 0; i < n; i++)
		sum += sges[i].length + rows[i][0];
	*bad_wr = (struct ibv_recv_wr *)ctx;
	return names[0] ? (int)sum : -1;
}

/* A handle slot, in a prototype that names no parameter: the wrapper names
 * them. */
int ibv_open_qp(struct ibv_pd *, uint32_t, struct ibv_qp **);

#endif
