// Definitions of the golden header's extern functions, so that the generated
// package links in the golden test's temporary module. Not generated.
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

// The header's function-like macros of the same names would expand these
// definitions.
#undef ibv_reg_mr
#undef ibv_query_port

// A zero length fails as libibverbs does: NULL, errno EINVAL (so does
// ibv_reg_mr_iova2, which the macro reaches when access is not a constant).
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	(void)pd, (void)access;
	if (length == 0) {
		errno = EINVAL;
		return NULL;
	}
	return (struct ibv_mr *)addr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	(void)pd, (void)iova, (void)access;
	if (length == 0) {
		errno = EINVAL;
		return NULL;
	}
	return (struct ibv_mr *)addr;
}

int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr)
{
	(void)context;
	if (port_num == 0)
		return EINVAL; // the convention of ibv_query_port: the errno, returned
	memset(port_attr, 0, sizeof(*port_attr));
	port_attr->lid = port_num;
	port_attr->max_msg_sz = 1u << 31;
	return 0;
}

void ibv_ack_events(struct ibv_qp *qp, unsigned int nevents)
{
	qp->qp_num += nevents;
}

const char *ibv_node_name(int node)
{
	return node == 1 ? "CA" : "unknown";
}

struct ibv_sge ibv_make_sge(uint64_t addr, uint32_t length)
{
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = 7 };
	return s;
}

uint32_t ibv_sge_bytes(struct ibv_sge sge, enum ibv_access_flags flags)
{
	return flags == IBV_ACCESS_LOCAL_WRITE ? sge.length : 0;
}

// The QP is the PD's context, as the stub test arranges; number 0 fails.
int ibv_open_qp(struct ibv_pd *pd, uint32_t num, struct ibv_qp **qp)
{
	if (num == 0)
		return EINVAL;
	*qp = (struct ibv_qp *)pd->context;
	(*qp)->qp_num = num;
	return 0;
}

int ibv_log(const char *format, ...)
{
	(void)format;
	return 0;
}

// librdmacm's: errno is what it is given, which a provider's -errno makes
// negative.
int rdma_seterrno(int ret)
{
	if (ret) {
		errno = ret;
		ret = -1;
	}
	return ret;
}

const char *const *ibv_names_from(const char *const *names, const char **first,
				  const struct ibv_port_attr *attr)
{
	*first = names[attr ? attr->lid : 0];
	return names;
}

const struct ibv_port_attr *ibv_attr_from(const struct ibv_port_attr *const *attrs, int i,
					  const struct ibv_port_attr **last)
{
	*last = attrs[i];
	return attrs[i];
}

const ibv_qp_reader *ibv_reader_from(const ibv_qp_reader *readers, ibv_qp_reader const fallback)
{
	return readers[0] == fallback ? readers : NULL;
}

const char *ibv_label_of(const char *const *labels, unsigned int i)
{
	return labels[i];
}

uint32_t ibv_cell(const uint32_t (*row)[4], int i)
{
	return (*row)[i];
}
