/* Growth case "front-tail": verbs_context grew at its end, after the anchor, like an ordinary struct. */
#ifndef GROWTH_VERBS_H
#define GROWTH_VERBS_H

#include <stddef.h>
#include <stdint.h>

enum ibv_mtu {
	IBV_MTU_256 = 1,
	IBV_MTU_512 = 2,
};

struct ibv_context {
	void *device;
	int cmd_fd;
};

struct ibv_port_attr {
	enum ibv_mtu max_mtu;
	uint32_t max_msg_sz;
	uint16_t lid;
	uint8_t active_width;
	uint8_t active_speed;
};

struct ibv_wc {
	uint64_t wr_id;
	union {
		uint32_t imm_data;
		uint32_t invalidated_rkey;
	};
	uint16_t pkey_index;
};

struct ibv_send_wr {
	uint64_t wr_id;
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			void *ah;
			uint32_t remote_qpn;
		} ud;
	} wr;
	int num_sge;
};

struct verbs_context {
	int (*query_port)(struct ibv_context *context);
	void *priv;
	size_t sz;
	struct ibv_context context;
	void *(*after_the_anchor)(void);
};

/* Reserved bytes: rdma-core and the kernel carve new members out of them. */
struct ibv_port_resp_ex {
	uint64_t legacy;
	uint16_t flags2;
	uint8_t reserved[6];
};

#endif
