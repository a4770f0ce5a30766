/* Loader case: a package whose library is not installed anywhere. */
#ifndef LOADER_CMA_H
#define LOADER_CMA_H

#include <infiniband/verbs.h>

struct ibv_thing *rdma_absent_ptr(void);
int rdma_absent_int(void);
int rdma_absent_value(void);

#endif
