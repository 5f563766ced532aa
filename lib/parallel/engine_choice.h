/* Which progress engine a network's exchange uses: this rank's vote from
 * the facts (MPI thread level, ranks on this node, usable cores), and the
 * engine every rank then uses, since blocking and nonblocking collectives
 * do not match each other.  The votes are counted by the caller in one of
 * its agreements (graph/plan.c), so that no untimed collective is needed. */
#ifndef PCNN_PARALLEL_ENGINE_CHOICE_H
#define PCNN_PARALLEL_ENGINE_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "parallel.h"

/* requested: PCNN_OPT_ENGINE (0 automatic, 1 thread, 2 nonblocking).
 * True when this rank would host the communication thread; *shares_core
 * says whether that thread would share its cores with compute threads (it
 * then pauses between tests instead of busy-polling); why receives the
 * reason.  Local. */
bool engine_vote_thread(const pcnn_comm *c, int requested, int threads, bool *shares_core,
                        char *why, size_t size);

/* The engine of every rank, from the number of ranks that voted for the
 * thread: the thread only when all did.  UNSUPPORTED when the thread was
 * requested and some rank cannot host it. */
pcnn_status engine_decide(const pcnn_comm *c, int requested, bool mine, int thread_votes,
                          engine_kind *out, char *why, size_t size);

#endif
