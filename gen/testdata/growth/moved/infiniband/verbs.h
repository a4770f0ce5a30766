/* Growth case "moved": "old" with members moved and an enumerator renumbered. */
#ifndef GROWTH_VERBS_H
#define GROWTH_VERBS_H

#include <stddef.h>
#include <stdint.h>

enum ibv_mtu {
	IBV_MTU_128 = 1,
	IBV_MTU_256,
	IBV_MTU_512,
};

struct ibv_context {
	void *device;
	int cmd_fd;
};

/* lmc inserted in the middle: active_width and active_speed move. */
struct ibv_port_attr {
	enum ibv_mtu max_mtu;
	uint32_t max_msg_sz;
	uint16_t lid;
	uint8_t lmc;
	uint8_t active_width;
	uint8_t active_speed;
};

/* The anonymous union's members widened. */
struct ibv_wc {
	uint64_t wr_id;
	union {
		uint64_t imm_data;
		uint32_t invalidated_rkey;
	};
	uint16_t pkey_index;
};

/* rkey moved inside the anonymous struct of the named union member. */
struct ibv_send_wr {
	uint64_t wr_id;
	union {
		struct {
			uint64_t remote_addr;
			uint32_t flags;
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
};

/* A new member before the reserved bytes pushes them past their old end: that is no reuse. */
struct ibv_port_resp_ex {
	uint64_t legacy;
	uint16_t flags2;
	uint32_t flags3;
	uint8_t reserved[2];
};

#endif
