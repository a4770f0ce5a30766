/* Golden case "records": every way a C record reaches Go. */
#ifndef GOLDEN_RECORDS_H
#define GOLDEN_RECORDS_H

#include <stdint.h>
#include <pthread.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/types.h>

/* A named union whose first member fills it. */
union ibv_gid {
	uint8_t raw[16];
	struct {
		__be64 subnet_prefix;
		__be64 interface_id;
	} global;
};

/* A named union that none of its members fills. */
union ibv_odd {
	uint8_t bytes[5];
	uint32_t word;
};

struct ibv_rdma_wr {
	uint64_t remote_addr;
	uint32_t rkey;
};

struct ibv_ud_wr {
	struct ibv_ah *ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
};

/* A named member that is a union of structs, like ibv_send_wr.wr. */
struct ibv_send_wr {
	uint64_t wr_id;
	struct ibv_send_wr *next;
	union {
		struct ibv_rdma_wr rdma;
		struct ibv_ud_wr ud;
	} wr;
	int num_sge;
};

/* Anonymous unions: one member fills the union, the other union has none that does. */
struct ibv_wc {
	uint64_t wr_id;
	int status;
	union {
		__be32 imm_data;
		uint32_t invalidated_rkey;
	};
	uint16_t pkey_index;
	union {
		uint64_t wide;
		uint32_t words[3];
		struct {
			uint16_t lo;
			uint8_t hi;
		};
	};
	uint8_t tail;
};

/* An anonymous struct member: its members are promoted, as C does. */
struct ibv_flat {
	uint32_t a;
	struct {
		uint16_t b;
		uint64_t c;
	};
	uint8_t d;
};

/* Nested anonymous records are named after their parent and member. */
struct ibv_outer {
	struct {
		uint32_t x;
		union {
			uint32_t y;
			float z;
		} inner;
	} mid;
	struct {
		int deep;
	} arr[2];
	union {
		struct {
			uint16_t q;
		} in_anon;
		uint64_t pad;
	};
};

/* Flexible array members become accessors; a leading _ [0]uint64 keeps C's alignment. */
struct ibv_flex {
	uint32_t count;
	uint32_t reserved;
	uint64_t data[];
};

struct ibv_flex_small {
	uint16_t len;
	__u64 items[];
};

/* Members from the C library are opaque storage; incomplete types stay behind pointers. */
struct ibv_opaque;

struct ibv_sys {
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	struct sockaddr_in6 addr6;
	struct sockaddr *addr;
	struct timespec ts;
	struct ibv_opaque *handle;
	int (*callback)(struct ibv_wc *wc, void *ctx);
	_Bool ready;
	char name[7];
	double ratio;
};

#endif
