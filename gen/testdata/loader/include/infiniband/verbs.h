/* Loader case: extern functions of every failure convention, one of them
 * behind a same-named macro; libfake.c defines only some of them. */
#ifndef LOADER_VERBS_H
#define LOADER_VERBS_H

#include <stdint.h>
#include <sys/types.h>

struct ibv_thing {
	uint32_t id;
};

/* In the fake library. */
int ibv_add_one(int x);
struct ibv_thing *ibv_get_thing(void);
int ibv_twice(int x);
#define ibv_twice(x) ibv_twice(x)
ssize_t ibv_count_negated(void);
int ibv_minus_one(void);
int ibv_rereg_like(void);
int ibv_index_like(int ret);
/* Return what they are given, as a provider's poll op would: a count or a
 * provider's negative code; 0, an errno or such a code. */
static inline int ibv_poll_like(int ret) { return ret; }
static inline int ibv_start_poll_like(int ret) { return ret; }
static inline int ibv_add_two(int x) { return ibv_add_one(ibv_add_one(x)); }
static inline int ibv_add_three(int x) { return ibv_add_two(x) + 1; }
/* Parameters named as a stub's locals and the packages it qualifies. */
static inline int ibv_post_shadowed(int r, int err, int syscall, int unsafe) { return r + err + syscall + unsafe; }

/* Not in it: the calls must fail with the convention's value. */
int ibv_missing_errno(struct ibv_thing *t);
int ibv_missing_minus_one(void);
int ibv_missing_rereg_like(void);
int ibv_missing_index_like(void);
struct ibv_thing *ibv_missing_ptr(uint8_t port);
void ibv_missing_void(uint64_t v);
uint16_t ibv_missing_u16(void);
static inline uint16_t ibv_missing_u16_inline(void) { return ibv_missing_u16(); }
/* Two externs newer than release 0.1, present and missing: both checked. */
static inline int ibv_two_newer(void) { return ibv_add_one(0) + ibv_missing_u16(); }
static inline struct ibv_thing *ibv_missing_ptr_inline(uint8_t port) { return ibv_missing_ptr(port); }

#endif
