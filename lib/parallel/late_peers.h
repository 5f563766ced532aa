/* Collectives an aborted progress engine left in flight, settled inside
 * MPI_Finalize.
 *
 * MPI cannot cancel a collective, and MPI_Finalize hangs (MPICH 4.0.2 over
 * UCX) while a rank still has a large one in flight that some peer never
 * posted: after a timeout the ranks have started different numbers of
 * collectives on the engine's communicator.  So an aborted engine hands its
 * communicator, its count of started collectives and the ones still in
 * flight over here, and keeps their buffers; at MPI_Finalize (engine.c's
 * delete callback on MPI_COMM_SELF, where every rank is) the ranks tell each
 * other, by point-to-point messages on that communicator (which never match
 * its collectives), what each started; a rank behind posts the collectives
 * it missed, with the arguments the ranks ahead used and buffers of its own,
 * and every rank completes them all.  Each wait there is bounded
 * (LATE_PEERS_WAIT_S): a peer that never handed its engine over (its
 * network was destroyed healthy, or it never calls MPI_Finalize) leaves
 * that communicator as it was, as before. */
#ifndef PCNN_PARALLEL_LATE_PEERS_H
#define PCNN_PARALLEL_LATE_PEERS_H

#include "engine.h"

#define LATE_PEERS_WAIT_S 10.0

/* Take over `comm` (the caller never frees it now), `started` (how many
 * collectives the engine started on it) and the n requests of in_flight
 * (copied: their MPI handles and arguments; their buffers stay the
 * caller's, never to be freed).  Returns false, taking nothing, when out
 * of memory or MPI is finalised. */
bool late_peers_keep(MPI_Comm comm, long started, request *const *in_flight, int n);

/* Settle everything kept (inside MPI_Finalize, on every rank).  Never
 * waits longer than about 2 * LATE_PEERS_WAIT_S. */
void late_peers_settle(void);

#endif
