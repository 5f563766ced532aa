/* Strided windows on uneven splits (pcnn.h section 9), under mpiexec: a
 * layer whose stride skips part of a rank's block may still read, on a
 * neighbour, points that the block's owner never reads itself.  Every
 * halo schedule must deliver them (and return their gradients):
 *
 *   max pool 2x2 stride 2 on 5x5, conv 2x2 stride 2 on 5x5 (2 x 2 ranks:
 *   the second block's window reads the first block's last column) and
 *   conv 3x3 stride 2 padding 1 on 11x11 (4 x 4 ranks), after a 3x3
 *   convolution that receives their input gradient, on {1, 1, 2, 2} at 4
 *   ranks ({1, 1, 4, 4} at 16, {1, 1, P, 1} otherwise), with the halo
 *   overlapped and not: one training step equals a private one-rank
 *   network on the whole batch -- the layer's output (forward), the
 *   gradient reaching its input (over each rank's box) and every weight
 *   gradient, to 1e-5 relative; that step and an inference allocate
 *   nothing (the halo buffers are sized at finalize).
 * Also: distributions set before pcnn_net_set_comm are checked at
 * finalize, and a message beyond MPI's int count is refused. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "core/memory.h"
#include "graph/net.h"
#include "graph/spatial.h"
#include "parallel/box_move.h"
#include "pcnn.h"

enum { B = 3, C = 2, PROBE = 2 }; /* PROBE: the layer under test */

typedef struct layer_case {
    const char *name;
    bool pool;
    int x, k, s, p;
} layer_case;

/* Input, conv 3x3 (its gradient crosses the halo back), the layer under
 * test, flatten; NULL comm: one rank. */
static pcnn_net *build(pcnn_comm *comm, const int *parts, const layer_case *lc, int overlap)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
    CK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, 0));
    CK(pcnn_net_set_exchange(net, PCNN_EXCHANGE_ALLREDUCE));
    CK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, overlap));
    CK(pcnn_net_input(net, C, lc->x, lc->x, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    if (lc->pool) CK(pcnn_maxpool2d(net, l, lc->k, lc->s, lc->p, &l));
    else CK(pcnn_conv2d(net, l, 2, lc->k, lc->s, lc->p, 1, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    if (parts) CK(pcnn_net_set_distribution(net, parts));
    CK(pcnn_net_finalize(net, B));
    return net;
}

/* The largest difference between the spatial network's y (or dy) of layer
 * `at` over this rank's box and one rank's over the whole batch, relative
 * to the largest of one rank's values there, over all ranks. */
static double box_diff(const pcnn_net *one, const pcnn_net *sp, int at, bool grad)
{
    const pcnn_layer *a = one->layers.items[at], *b = sp->layers.items[at];
    const float *want = grad ? a->dy : a->y, *got = grad ? b->dy : b->y;
    const shape s = a->out;
    box m = {{0, 0, 0, 0}, {B, s.d, s.h, s.w}};
    if (net_is_spatial(sp)) m = sp->spatial->layers[at].mine;
    double both[2] = {0.0, 1e-30}; /* difference, scale */
    size_t i = 0;
    for (int ch = 0; ch < s.c; ch++)
        for (int n = m.lo[0]; n < m.hi[0]; n++)
            for (int d = m.lo[1]; d < m.hi[1]; d++)
                for (int h = m.lo[2]; h < m.hi[2]; h++)
                    for (int w = m.lo[3]; w < m.hi[3]; w++, i++) {
                        const double v = want[((((size_t)ch * B + (size_t)n) * (size_t)s.d +
                                                (size_t)d) * (size_t)s.h + (size_t)h) *
                                                  (size_t)s.w + (size_t)w];
                        const double e = fabs((double)got[i] - v);
                        both[0] = isnan(e) ? INFINITY : fmax(both[0], e);
                        both[1] = fmax(both[1], fabs(v));
                    }
    MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return both[0] / both[1];
}

static void test_case(pcnn_comm *world, const int *parts, const layer_case *lc, int overlap)
{
    const int y = (lc->x + 2 * lc->p - lc->k) / lc->s + 1;
    if (y < parts[2] || y < parts[3]) return; /* too small for the split */
    pcnn_net *one = build(NULL, NULL, lc, overlap), *sp = build(world, parts, lc, overlap);
    const size_t sample = (size_t)C * lc->x * lc->x;
    float x[B * C * 11 * 11], t[B * 3 * 6 * 6], loss; /* t: more than any output */
    unsigned v = 12345;
    for (size_t i = 0; i < B * sample; i++) x[i] = (float)((v = v * 1103515245u + 12345u) >> 9) /
                                                   (float)(1u << 23) - 1.0f;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i] = (float)(i % 7) / 7.0f - 0.5f;
    CK(pcnn_net_train_step(one, B, x, NULL, t, &loss));
    /* Its first step and an inference allocate nothing (the halo buffers
     * are sized at finalize: one rank failing alone there would leave the
     * others waiting). */
    pcnn_debug_fail_allocation(0); /* counts from here */
    CK(pcnn_net_train_step(sp, B, x, NULL, t, &loss));
    size_t np;
    CK(pcnn_net_num_params(one, &np));
    float ga[256], gb[256];
    CK(pcnn_net_get_grads(one, ga, np));
    CK(pcnn_net_get_grads(sp, gb, np));
    double gw = 0.0, scale = 1e-30;
    for (size_t i = 0; i < np; i++) {
        const double e = fabs((double)ga[i] - gb[i]);
        gw = isnan(e) ? INFINITY : fmax(gw, e);
        scale = fmax(scale, fabs((double)ga[i]));
    }
    gw /= scale;
    const double fwd = box_diff(one, sp, PROBE, false), dx = box_diff(one, sp, PROBE - 1, true);
    float out[B * 3 * 6 * 6];
    CK(pcnn_net_predict_parallel(sp, B, x, out, sizeof out / sizeof out[0]));
    const long allocations = pcnn_debug_allocations();
    const int phases = net_is_spatial(sp) ? sp->spatial->layers[PROBE].num_phases : 0;
    char what[280];
    snprintf(what, sizeof what, "%s on {%d,%d,%d,%d}, halo %s (%d phases): output %.2g, input "
             "gradient %.2g, weight gradients %.2g relative to one rank; %ld allocations in "
             "the first step and an inference", lc->name, parts[0], parts[1], parts[2],
             parts[3], overlap ? "overlapped" : "first", phases, fwd, dx, gw, allocations);
    expect(fwd <= 1e-5 && dx <= 1e-5 && gw <= 1e-5 && np <= 256 && allocations == 0, what);
    pcnn_net_destroy(&one);
    pcnn_net_destroy(&sp);
}

/* Distributions set before pcnn_net_set_comm are checked at finalize
 * against the communicator's ranks; the network's default follows it. */
static void test_set_before_comm(pcnn_comm *world)
{
    if (ranks == 1) return;
    const int one[4] = {1, 1, 1, 1}, all[4] = {ranks, 1, 1, 1};
    pcnn_status got[3];
    for (int c = 0; c < 3; c++) {
        pcnn_net *net;
        pcnn_layer *in, *l;
        CK(pcnn_net_create(&net));
        CK(pcnn_net_input(net, C, 5, 5, &in));
        CK(pcnn_conv2d(net, in, 2, 3, 1, 1, 1, &l));
        CK(pcnn_flatten(net, l, &l));
        CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
        if (c == 0) CK(pcnn_net_set_distribution(net, one));
        else CK(pcnn_layer_set_distribution(in, one));
        CK(pcnn_net_set_comm(net, world));
        if (c == 2) CK(pcnn_layer_set_distribution(in, all)); /* set again: fine */
        got[c] = pcnn_net_finalize(net, 2);
        if (c == 1 && !strstr(pcnn_last_error(), "layer 0")) got[c] = PCNN_OK;
        pcnn_net_destroy(&net);
    }
    expect(got[0] == PCNN_ERR_INVALID_ARGUMENT && got[1] == PCNN_ERR_INVALID_ARGUMENT &&
               got[2] == PCNN_OK,
           "a distribution set for 1 rank before pcnn_net_set_comm fails finalize with "
           "INVALID_ARGUMENT (naming the layer); set again after it, it finalizes");
}

/* A message larger than MPI's int count is refused before anything is
 * posted, and the mover stays failed. */
static void test_huge_message(pcnn_comm *world)
{
    if (ranks == 1) return;
    long timeout = 60000;
    box_mover *m;
    CK(box_mover_create(world, &timeout, &m));
    box src[64], dst[64];
    for (int q = 0; q < ranks && q < 64; q++) {
        src[q] = (box){{0, 0, 0, 0}, {0, 0, 0, 0}};
        dst[q] = (box){{0, 0, 0, 0}, {1, 1, 65536, 32768}}; /* 2^31 points */
    }
    src[0] = dst[0];
    float dummy = 0.0f;
    const pcnn_status st = box_move_post(m, 1, 1, src, dst, &dummy, &dummy, false, 1);
    expect(ranks > 64 || (st == PCNN_ERR_UNSUPPORTED && box_mover_error(m) != PCNN_OK),
           "a halo message of 2^31 floats is refused (UNSUPPORTED), nothing posted");
    box_mover_destroy(m);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *world;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &world));
    int parts[4] = {1, 1, ranks, 1};
    if (ranks == 4) parts[2] = parts[3] = 2;
    if (ranks == 16) parts[2] = parts[3] = 4;
    static const layer_case cases[] = {
        {"max pool 2x2 stride 2 on 5x5", true, 5, 2, 2, 0},
        {"conv 2x2 stride 2 on 5x5", false, 5, 2, 2, 0},
        {"conv 3x3 stride 2 padding 1 on 11x11", false, 11, 3, 2, 1},
    };
    for (int overlap = 1; overlap >= 0; overlap--)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            test_case(world, parts, &cases[c], overlap);
    test_set_before_comm(world);
    test_huge_message(world);
    CK(pcnn_comm_destroy(&world));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures || checks == 0 ? 1 : 0;
}
