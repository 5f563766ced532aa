/* Which progress engine a network's exchange uses: gathers the facts (MPI
 * thread level, ranks on this node, usable cores) and makes every rank
 * agree on one engine, since blocking and nonblocking collectives do not
 * match each other.  Collective. */
#ifndef PCNN_PARALLEL_ENGINE_CHOICE_H
#define PCNN_PARALLEL_ENGINE_CHOICE_H

#include <stddef.h>

#include "engine.h"

/* requested: PCNN_OPT_ENGINE (0 automatic, 1 thread, 2 nonblocking).
 * UNSUPPORTED when the thread was requested and some rank lacks
 * MPI_THREAD_MULTIPLE. */
pcnn_status engine_choose(MPI_Comm comm, int thread_level, int requested, int threads,
                          engine_kind *out, char *why, size_t size);

#endif
