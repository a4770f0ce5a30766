/* Loader case: a package whose library is not installed anywhere. */
#ifndef LOADER_CMA_H
#define LOADER_CMA_H

#include <infiniband/verbs.h>

struct ibv_thing *rdma_absent_ptr(void);
int rdma_absent_int(void);
int rdma_absent_value(void);
/* Parameters named as a stub's locals and the packages it qualifies. */
static inline int rdma_shadowed(struct ibv_thing *verbs, int r, int err) { return verbs && r == 1 && err == 2 ? 0 : -1; }

#endif
