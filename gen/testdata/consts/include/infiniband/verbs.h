/* Golden case "consts": enums, integer macros and macros that alias a tag. */
#ifndef GOLDEN_CONSTS_H
#define GOLDEN_CONSTS_H

#include <stdint.h>

/* Signed: it has a negative enumerator. */
enum ibv_signed {
	IBV_SIGNED_NEG = -1,
	IBV_SIGNED_ZERO,
	IBV_SIGNED_BIG = 100,
};

/* Unsigned: gcc makes an enum without negative values unsigned. */
enum ibv_access_flags {
	IBV_ACCESS_LOCAL_WRITE = 1,
	IBV_ACCESS_REMOTE_WRITE = (1 << 1),
	IBV_ACCESS_TOP = (1U << 31),
};

/* A 64-bit enum (GNU extension). */
enum ibv_wide {
	IBV_WIDE_BIT = 1ULL << 40,
};

/* An anonymous enum: its constants take the underlying type. */
enum {
	IBV_ANON_ONE = 1,
	IBV_ANON_TWO = 2,
};

/* Digits on both sides of an underscore must not merge: 2_5 is not 25. */
enum ibv_rate {
	IBV_RATE_2_5_GBPS = 2,
	IBV_RATE_25_GBPS = 15,
};

#define IBV_SHIFTED (1ULL << 34)
#define IBV_NEGATIVE (-5)
#define IBV_HEX 0x1234
#define IBV_EXPR (2 * 3 + IBV_HEX)
#define IBV_SMALL ((uint8_t)7)
#define IBV_POINTER ((void *)-1)
#define IBV_X_2_5 1
#define IBV_X_25 2
#define IBV_STRING "not an integer"

/* Tags in the kernel's spelling, and macros giving them the library's. */
struct ib_uverbs_thing {
	uint32_t handle;
};

enum ib_uverbs_kind {
	IB_UVERBS_KIND_A,
	IB_UVERBS_KIND_B,
};

#define ibv_thing ib_uverbs_thing
#define ibv_kind ib_uverbs_kind

struct ibv_user {
	struct ibv_thing thing;
	enum ibv_kind kind;
	enum ibv_signed s;
	enum ibv_wide w;
};

/* A value of 2^63 or more: gcc makes the enum unsigned (finish_enum), an
   anonymous one too; cc/v4 makes them signed. */
enum ibv_u64 {
	IBV_U64_MAX = 0xFFFFFFFFFFFFFFFFULL,
	IBV_U64_ONE = 1,
};

enum {
	IBV_ANON_TOP = 1ULL << 63,
};

/* Macros naming an enumerator have its type: int when its value fits one,
   whatever its enum's type (cc/v4 gives them the enum's), else the enum's. */
#define IBV_REF_LOCAL_WRITE IBV_ACCESS_LOCAL_WRITE
#define IBV_REF_TOP (IBV_ACCESS_TOP)
#define IBV_REF_MAX IBV_U64_MAX

#endif
