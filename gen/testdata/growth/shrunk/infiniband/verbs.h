/* Growth case "shrunk": "old" with members dropped from the end of a struct and a struct gone. */
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
};

struct ibv_wc {
	uint64_t wr_id;
	union {
		uint32_t imm_data;
		uint32_t invalidated_rkey;
	};
	uint16_t pkey_index;
};

struct verbs_context {
	int (*query_port)(struct ibv_context *context);
	void *priv;
	size_t sz;
	struct ibv_context context;
};

/* Reserved bytes: rdma-core and the kernel carve new members out of them. */
struct ibv_port_resp_ex {
	uint64_t legacy;
	uint16_t flags2;
	uint8_t reserved[6];
};

#endif
