/* The fake libibverbs of the loader case: built into a shared library by
 * TestLoader, which the generated package opens with dlopen. */
#include <errno.h>
#include <sys/types.h>

struct ibv_thing {
	unsigned int id;
};

static struct ibv_thing thing = {42};

int ibv_add_one(int x) { return x + 1; }
struct ibv_thing *ibv_get_thing(void) { return &thing; }
int ibv_twice(int x) { return 2 * x; }

/* -errno returned, errno left by an earlier step (as _ibv_query_gid_table
 * after its ioctl probe): the returned one is the error. */
ssize_t ibv_count_negated(void) { errno = EPROTONOSUPPORT; return -EINVAL; }
/* -1 and errno. */
int ibv_minus_one(void) { errno = EAGAIN; return -1; }
/* A negative code of its own and errno (as ibv_rereg_mr's
 * IBV_REREG_MR_ERR_CMD). */
int ibv_rereg_like(void) { errno = EINVAL; return -4; }
/* An index, or -1 and no errno when there is none to give (as
 * ibv_get_device_index); errno left by an earlier call. */
int ibv_index_like(int ret) { errno = EPROTONOSUPPORT; return ret; }
