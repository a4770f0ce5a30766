/* Loader case: an older release's header (a pinned tree the Since table
 * is made from), which already declared ibv_missing_ptr. */
#ifndef LOADER_OLD_VERBS_H
#define LOADER_OLD_VERBS_H

struct ibv_thing;

struct ibv_thing *ibv_missing_ptr(unsigned char port);

#endif
