/* A data-parallel step runs its forward pass while the step's first
 * agreement travels (lib/graph/step_ahead.c).  What must still hold, at
 * 1-4 ranks:
 *   - shares that change from step to step (each rank's first global
 *     sample moves, so dropout's masks must be those of the agreed
 *     position): parameters equal a single process's on the whole batch;
 *   - a step refused on one rank (a bad label) or with no samples anywhere
 *     changes nothing on any rank, batch norm's running statistics
 *     included, and training goes on. */
#define PCNN_EXPERIMENTAL /* the layer buffers: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

enum { C = 2, H = 7, W = 7, SAMPLE = C * H * W, CLASSES = 3, MAX_SHARE = 3 };

/* conv(2->4, k3, p1) [batchnorm] relu dropout(0.3) dense(->3), the dense
 * layer on the FC gradient if fc (its activations are sent during the
 * forward pass, which then finishes after the agreement); *bn receives
 * the batch norm (NULL: none).  Batch norm's statistics are this
 * rank's (not synchronised: a reduction in the forward pass would keep the
 * step from running ahead), so only the network without it trains as one
 * process does. */
static pcnn_net *build(pcnn_comm *comm, int max_batch, bool with_bn, bool fc, pcnn_layer **bn)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, C, H, W, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 1, &l));
    *bn = NULL;
    if (with_bn) {
        CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
        *bn = l;
    }
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dropout(net, l, 0.3f, &l));
    CK(pcnn_dense(net, l, CLASSES, 1, &l));
    if (fc) CK(pcnn_layer_set_exchange(l, PCNN_EXCHANGE_FC_GRADIENT));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.1));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, 128));
    if (comm) {
        CK(pcnn_net_set_comm(net, comm));
        CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    }
    CK(pcnn_net_finalize(net, max_batch));
    return net;
}

static void make_batch(int step, int n, float *x, int32_t *y)
{
    unsigned s = 99u + 131u * (unsigned)step;
    for (int i = 0; i < n * SAMPLE; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < n; i++) y[i] = (int32_t)((unsigned)(3 * i + step) % CLASSES);
}

/* Rank q's share at a step: 1..MAX_SHARE, a different pattern each step. */
static int share(int step, int q) { return (q + 2 * step) % MAX_SHARE + 1; }

/* The parameters, then the batch norm's running statistics. */
typedef struct state {
    float *v;
    size_t n;
} state;

static state snapshot(pcnn_net *net, pcnn_layer *bn)
{
    size_t np, nb = 0;
    CK(pcnn_net_num_params(net, &np));
    if (bn) CK(pcnn_layer_num_buffers(bn, &nb));
    state s = {malloc((np + nb) * sizeof(float)), np + nb};
    CK(pcnn_net_get_params(net, s.v, np));
    if (bn) CK(pcnn_layer_get_buffers(bn, s.v + np, nb));
    return s;
}

static double rel_diff(state a, state b)
{
    double worst = 0.0, scale = 1e-30;
    for (size_t i = 0; i < a.n; i++) {
        const double d = fabs((double)a.v[i] - b.v[i]);
        worst = isnan(d) ? INFINITY : fmax(worst, d);
        scale = fmax(scale, fabs((double)b.v[i]));
    }
    return worst / scale;
}

static bool same_bits(state a, state b)
{
    return a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof(float));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    const int max_global = MAX_SHARE * ranks;
    pcnn_layer *bn_par, *bn_seq;
    pcnn_net *par, *seq;
    float *x = malloc(sizeof(float) * (size_t)max_global * SAMPLE);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)max_global);
    char what[200];
    for (int fc = 0; fc <= 1; fc++) {
        par = build(comm, max_global, false, fc, &bn_par);
        seq = build(NULL, max_global, false, fc, &bn_seq);
        double worst = 0.0;
        for (int step = 0; step < 6; step++) {
            int global = 0, first = 0;
            for (int q = 0; q < ranks; q++) {
                if (q == rank) first = global;
                global += share(step, q);
            }
            make_batch(step, global, x, y);
            float lp, ls;
            CK(pcnn_net_train_step(par, share(step, rank), x + (size_t)first * SAMPLE, y + first,
                                   NULL, &lp));
            CK(pcnn_net_train_step(seq, global, x, y, NULL, &ls));
            state a = snapshot(par, bn_par), b = snapshot(seq, bn_seq);
            worst = fmax(worst, fmax(rel_diff(a, b), fabs((double)lp - ls) / fabs((double)ls)));
            free(a.v);
            free(b.v);
        }
        snprintf(what, sizeof what, "shares changing every step (dropout's sample positions "
                 "move)%s: parameters and loss equal one process, rel diff %.2e",
                 fc ? ", FC gradient" : "", worst);
        expect(worst < 1e-5, what);
        CK(pcnn_net_destroy(&par));
        CK(pcnn_net_destroy(&seq));
    }

    /* With batch norm, a bad label on the last rank: every rank fails, and
     * nothing changes, though the other ranks' forward passes ran. */
    par = build(comm, max_global, true, false, &bn_par);
    make_batch(99, max_global, x, y);
    float loss;
    CK(pcnn_net_train_step(par, MAX_SHARE, x + (size_t)rank * MAX_SHARE * SAMPLE,
                           y + rank * MAX_SHARE, NULL, &loss));
    state before = snapshot(par, bn_par);
    make_batch(100, max_global, x, y);
    if (rank == ranks - 1) y[rank * MAX_SHARE] = CLASSES; /* out of range */
    pcnn_status st = pcnn_net_train_step(par, MAX_SHARE, x + (size_t)rank * MAX_SHARE * SAMPLE,
                                         y + rank * MAX_SHARE, NULL, &loss);
    state after = snapshot(par, bn_par);
    snprintf(what, sizeof what, "a label refused on rank %d: INVALID_ARGUMENT there, REMOTE "
             "elsewhere, parameters and running statistics bitwise unchanged", ranks - 1);
    expect(st == (rank == ranks - 1 ? PCNN_ERR_INVALID_ARGUMENT : PCNN_ERR_REMOTE) &&
               same_bits(before, after),
           what);
    free(after.v);

    /* No samples anywhere. */
    st = pcnn_net_train_step(par, 0, NULL, NULL, NULL, &loss);
    after = snapshot(par, bn_par);
    expect(st == PCNN_ERR_INVALID_ARGUMENT && same_bits(before, after),
           "no rank passes a sample: INVALID_ARGUMENT everywhere, nothing changed");
    free(after.v);
    free(before.v);

    /* Training goes on, on every rank alike. */
    make_batch(7, max_global, x, y);
    CK(pcnn_net_train_step(par, MAX_SHARE, x + (size_t)rank * MAX_SHARE * SAMPLE,
                           y + rank * MAX_SHARE, NULL, &loss));
    state a = snapshot(par, bn_par);
    size_t np;
    CK(pcnn_net_num_params(par, &np));
    float *r0 = malloc(np * sizeof(float));
    memcpy(r0, a.v, np * sizeof(float));
    MPI_Bcast(r0, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
    expect(memcmp(r0, a.v, np * sizeof(float)) == 0 && isfinite(loss),
           "the next step trains: parameters bitwise identical on every rank");
    free(r0);
    free(a.v);
    free(x);
    free(y);
    CK(pcnn_net_destroy(&par));
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
