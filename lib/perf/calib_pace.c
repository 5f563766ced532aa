/* The ranks' pace (pcnn_perfmodel_calibrate_pace): a synchronous step
 * waits at every collective for its slowest rank, so where one rank's core
 * runs slower (a shared VM's vCPUs differed by 30 % for minutes at a time)
 * every rank's step is that rank's.  Each rank's compute table prices its
 * own step; comparing their totals tells each rank how much longer the
 * slowest one computes, and a prediction of several ranks runs at that
 * pace, the difference waited for as exposed communication.  A whole-step
 * ratio, not per layer: a slow core is slow at every layer, and a maximum
 * per layer would add the timings' noise of every rank. */
#include "../core/error.h"
#include "../parallel/parallel.h"
#include "perf.h"

#define PACE_TIMEOUT_MS 120000L

double perf_compute_total(const perf_compute *c)
{
    double total = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const perf_layer *p = &c->layers[l];
        const double n = c->batch_hi;
        total += perf_line_at(p->fwd, n, c->batch_lo) + perf_line_at(p->bwd_w, n, c->batch_lo) +
                 perf_line_at(p->bwd_x, n, c->batch_lo) + (p->update > 0 ? p->update : 0);
    }
    return total;
}

pcnn_status perf_calibrate_pace(pcnn_perfmodel *m, pcnn_comm *comm, pcnn_status local,
                                const char *func)
{
    TRY(comm_check_usable(comm, func));
    perf_compute *c = m ? &m->compute : NULL;
    const double own = c ? perf_compute_total(c) : 0;
    pcnn_status st = local;
    if (st == PCNN_OK && !(c->num_layers > 0 && own > 0))
        st = error_set(PCNN_ERR_INVALID_STATE, func,
                       "no compute calibration on rank %d (pcnn_perfmodel_calibrate_compute "
                       "first)", comm->rank);
    /* The same network everywhere: its layers' fingerprint and count. */
    const uint64_t words[2] = {c ? c->fingerprint : 0, c ? (uint64_t)c->num_layers : 0};
    word_difference d;
    st = agree_words(comm, st, words, 2, PACE_TIMEOUT_MS, func, &d);
    if (st == PCNN_ERR_MISMATCH)
        return error_set(PCNN_ERR_MISMATCH, func,
                         "rank %d calibrated another network than rank 0 (%s differs)", d.rank,
                         d.index ? "its layer count" : "its layers");
    TRY(st);
    double slowest = own;
    MPI_Request req;
    const int code = MPI_Iallreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm->comm,
                                    &req);
    TRY(comm_complete(comm, code, &req, PACE_TIMEOUT_MS, func, "MPI_Allreduce (pace)"));
    c->pace = slowest > own ? slowest / own : 1;
    if (!(c->pace < 1e3)) c->pace = 999; /* the range a model file holds */
    perf_log(m, PCNN_LOG_INFO, "calibrate_pace: the slowest rank's step of computation is "
             "%.3f times this rank's (%d ranks)", c->pace, comm->size);
    return PCNN_OK;
}
