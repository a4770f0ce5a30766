/* Growth case "grown": "old" grown the way rdma-core grows, which keeps the ABI. */
#ifndef GROWTH_VERBS_H
#define GROWTH_VERBS_H

#include <stddef.h>
#include <stdint.h>

enum ibv_mtu {
	IBV_MTU_256 = 1,
	IBV_MTU_512 = 2,
	IBV_MTU_1024 = 3,
};

struct ibv_context {
	void *device;
	int cmd_fd;
	void *abi_compat;
};

struct ibv_port_attr {
	enum ibv_mtu max_mtu;
	uint32_t max_msg_sz;
	uint16_t lid;
	uint8_t active_width;
	uint8_t active_speed;
	uint32_t active_speed_ex;
};

struct ibv_wc {
	uint64_t wr_id;
	union {
		uint32_t imm_data;
		uint32_t invalidated_rkey;
		uint8_t raw[4];
	};
	uint16_t pkey_index;
	uint16_t slid;
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
			uint32_t remote_qkey;
		} ud;
	} wr;
	int num_sge;
	int send_flags;
};

/* New members in front; the embedded ibv_context, the last member, grew at its end. */
struct verbs_context {
	void *(*alloc_buf)(size_t size);
	int (*free_buf)(void *buf);
	int (*query_port)(struct ibv_context *context);
	void *priv;
	size_t sz;
	struct ibv_context context;
};

struct ibv_new_in_this_release {
	int x;
};

/* Reserved bytes: four of them now hold speed_ex. */
struct ibv_port_resp_ex {
	uint64_t legacy;
	uint16_t flags2;
	uint8_t reserved[2];
	uint32_t speed_ex;
};

#endif
