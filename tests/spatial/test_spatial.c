/* Spatial and hybrid parallelism (pcnn.h section 9), under mpiexec with 1
 * to 4 ranks.
 *
 *   1. Convolutions on every 2D split of the ranks (P x 1, 1 x P, 2 x 2,
 *      hybrid 2 sample groups x 2), odd sizes 7, 13, 31, kernels 1, 3, 5,
 *      7, strides 1 and 2, padding 0 and k/2: one training step equals a
 *      private one-rank network on the whole batch -- the network's output
 *      (forward), the loss, every weight gradient (summed over the ranks:
 *      the second convolution's input gradient crosses the halo back to
 *      its owners) and the parameters after the update, to 1e-5 relative.
 *   2. Max pooling (padded, odd sizes, windows across blocks): the output
 *      bit for bit; average pooling, dropout (split and in the head) and
 *      batch norm (statistics over the sample group) to 1e-5.
 *   3. Training: 4 steps with momentum and with Adam on a hybrid
 *      distribution (2 sample groups x 2 on 4 ranks; a pure spatial one
 *      on fewer) equal one rank on the global batch, parameters to 1e-5.
 *   4. {P, 1, 1, 1} set explicitly trains bit for bit as a network without
 *      a distribution (today's data parallelism).
 *   5. Box moves: a shuffle from an H split to whole samples and back is
 *      the identity bit for bit (copying, and adding into zeros); a halo
 *      move fills every point of the extended box inside the sample with
 *      its owner's value and leaves the padding alone.
 *   6. pcnn_net_train_step_local on each rank's box trains bit for bit as
 *      pcnn_net_train_step on the group's whole samples.
 *   7. A checkpoint of a spatial network (batch norm's running statistics
 *      included) loads into a one-rank network, bit for bit.
 *   8. Fallback onto fewer ranks (PCNN_OPT_SPATIAL_FALLBACK),
 *      pcnn_net_predict_parallel and pcnn_net_train_epoch equal one rank.
 *   9. A layer too small for its group fails finalize with SHAPE naming it;
 *      bad parts are refused; the box and group queries answer.
 *  10. The halo overlap forced on, off, and chosen by its trials train
 *      alike on odd sizes.
 *  11. A dense layer on each rank's box exchanges its weights by columns:
 *      equal to one rank after training, parameters set between steps and
 *      a checkpoint resumed on one rank; the bytes it sends.
 *  12. Staged inputs kept from forward to backward, or shared and staged
 *      again, train alike.
 *  13. bf16 products (2D and 3D): spatial training equals one-rank bf16
 *      training to bf16 tolerance. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "graph/net.h"
#include "graph/spatial.h"
#include "kernels/bf16.h"
#include "layers/batchnorm.h"
#include "parallel/box_move.h"
#include "pcnn.h"

static pcnn_comm *comm_world;

/* RESIDUAL: x + conv(x), the convolution k x k stride 1 padding k / 2 keeping
 * x's channels (x feeds two layers: their input gradients add up). */
typedef enum op {
    CONV, MAXPOOL, AVGPOOL, BN, RELU, FLATTEN, DENSE, CONV3D, MAXPOOL3D, AVGPOOL3D, DROPOUT,
    RESIDUAL, END
} op;

typedef struct layer_spec {
    op kind;
    int a, k, s, p; /* a: output channels / features */
} layer_spec;

typedef struct model {
    pcnn_net *net;
    pcnn_layer *out, *first; /* the output; the first layer after the input */
    int out_size;
} model;

static uint64_t rng_state;
static int sync_bn; /* PCNN_OPT_SYNC_BATCHNORM of the networks built */
static int depth = 1; /* of the input: > 1 builds 3D networks */
static int halo_overlap = 1; /* PCNN_OPT_HALO_OVERLAP */
static int fallback;         /* PCNN_OPT_SPATIAL_FALLBACK */
static int schedule;         /* PCNN_OPT_HALO_SCHEDULE */
static int conv_algorithm;   /* PCNN_OPT_CONV_ALGORITHM */
static int keep_im2col = 1;  /* PCNN_OPT_KEEP_IM2COL */
static int phased_seen;      /* layers exchanging their halo dimension by dimension */
static int regions_seen;     /* overlapped layers of the spatial networks built */
static int in_place_seen;    /* convolutions run on their input's block in place */
static int kept_seen, shared_seen; /* staged layers keeping their input, or sharing */
static int keep_inputs;      /* spatial.keep_inputs of the networks built */
static int overlap;          /* PCNN_OPT_OVERLAP */
static int precision;        /* PCNN_OPT_PRECISION */
static pcnn_exchange exchange_kind = PCNN_EXCHANGE_ALLREDUCE; /* grads: the global sum */
static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* NULL parts: no distribution; NULL comm: a private one-rank network. */
static pcnn_status build(model *m, pcnn_comm *comm, const int *parts, const layer_spec *spec,
                         int c, int h, int w, int max_batch, pcnn_optimizer optimizer,
                         double lr)
{
    pcnn_net *net;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    CK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, overlap));
    CK(pcnn_net_set_exchange(net, exchange_kind));
    CK(pcnn_net_set_optimizer(net, optimizer));
    CK(pcnn_net_set_option(net, PCNN_OPT_SYNC_BATCHNORM, sync_bn));
    CK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, halo_overlap));
    CK(pcnn_net_set_option(net, PCNN_OPT_SPATIAL_FALLBACK, fallback));
    CK(pcnn_net_set_option(net, PCNN_OPT_HALO_SCHEDULE, schedule));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, conv_algorithm));
    CK(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, keep_im2col));
    CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, precision));
    pcnn_layer *l;
    CK(pcnn_net_input3d(net, c, depth, h, w, &l));
    for (const layer_spec *s = spec; s->kind != END; s++) {
        switch (s->kind) {
        case CONV: CK(pcnn_conv2d(net, l, s->a, s->k, s->s, s->p, 1, &l)); break;
        case MAXPOOL: CK(pcnn_maxpool2d(net, l, s->k, s->s, s->p, &l)); break;
        case AVGPOOL: CK(pcnn_avgpool2d(net, l, s->k, s->s, s->p, &l)); break;
        case BN: /* a = 1: on whole samples, shared among the ranks */
            CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
            if (s->a && parts) CK(pcnn_layer_set_distribution(l, (const int[4]){ranks, 1, 1, 1}));
            break;
        case RELU: CK(pcnn_relu(net, l, &l)); break;
        case FLATTEN: CK(pcnn_flatten(net, l, &l)); break;
        case DENSE:
            CK(pcnn_dense(net, l, s->a, 1, &l));
            /* A dense layer on each rank's box computes in fp32
             * (graph/spatial_dense.c): the same on one rank. */
            if (precision) CK(pcnn_layer_set_precision(l, PCNN_PRECISION_FP32));
            break;
        case DROPOUT: CK(pcnn_dropout(net, l, (float)s->a / 100.0f, &l)); break;
        case CONV3D: CK(pcnn_conv3d(net, l, s->a, s->k, s->s, s->p, 1, &l)); break;
        case MAXPOOL3D: CK(pcnn_maxpool3d(net, l, s->k, s->s, s->p, &l)); break;
        case AVGPOOL3D: CK(pcnn_avgpool3d(net, l, s->k, s->s, s->p, &l)); break;
        case RESIDUAL: {
            int ch, d, h2, w2;
            pcnn_layer *conv;
            CK(pcnn_layer_output_shape3d(l, &ch, &d, &h2, &w2));
            CK(pcnn_conv2d(net, l, ch, s->k, 1, s->k / 2, 1, &conv));
            CK(pcnn_add(net, l, conv, &l));
            break;
        }
        case END: break;
        }
        if (s == spec) m->first = l;
    }
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    if (parts) CK(pcnn_net_set_distribution(net, parts));
    if (parts) net->spatial->keep_inputs = keep_inputs;
    m->net = net;
    m->out = l;
    int oc, od, oh, ow;
    CK(pcnn_layer_output_shape3d(l, &oc, &od, &oh, &ow));
    m->out_size = oc * od * oh * ow;
    const pcnn_status st = pcnn_net_finalize(net, max_batch);
    for (int i = 0; st == PCNN_OK && net->spatial && net->spatial->active &&
                    i < net->spatial->count; i++) {
        const spatial_layer *sl = &net->spatial->layers[i];
        regions_seen += sl->overlap;
        phased_seen += sl->num_phases > 1;
        in_place_seen += sl->in_place;
        kept_seen += sl->keeps_input;
        shared_seen += (sl->moves[0] || sl->moves[1]) && !sl->keeps_input && !sl->in_place;
    }
    return st;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double diff = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (d > diff || isnan(d)) diff = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    return diff / scale;
}

/* This rank's samples of the network's output: group share, then its
 * share within the group (the head's {P, 1, 1, 1}). */
static void head_samples(int groups, int batch, int *first, int *count)
{
    const int g_size = ranks / groups, g = rank / g_size, j = rank % g_size;
    const int gs = batch / groups + (g < batch % groups), g0 = g * (batch / groups) +
                   (g < batch % groups ? g : batch % groups);
    *count = gs / g_size + (j < gs % g_size);
    *first = g0 + j * (gs / g_size) + (j < gs % g_size ? j : gs % g_size);
}

typedef struct outcome {
    double loss, grads, params, output;
    bool output_bitwise;
} outcome;

/* `steps` training steps of the spatial network and of a private one-rank
 * network on the whole batch; the worst relative differences. */
static outcome compare(const layer_spec *spec, int c, int h, int w, const int *parts, int batch,
                       int steps, pcnn_optimizer optimizer)
{
    outcome r = {0, 0, 0, 0, true};
    model seq, sp;
    CK(build(&seq, NULL, NULL, spec, c, h, w, batch, optimizer, 0.05));
    CK(build(&sp, comm_world, parts, spec, c, h, w, batch, optimizer, 0.05));
    size_t np;
    CK(pcnn_net_num_params(seq.net, &np));
    const size_t sample = (size_t)c * depth * h * w;
    float *x = malloc(sizeof(float) * sample * batch);
    float *t = malloc(sizeof(float) * (size_t)seq.out_size * batch);
    float *p_seq = malloc(sizeof(float) * (np + 1)), *p_sp = malloc(sizeof(float) * (np + 1));
    float *g_seq = malloc(sizeof(float) * (np + 1)), *g_sp = malloc(sizeof(float) * (np + 1));
    const int groups = parts[0], g = rank / (ranks / groups);
    const int g0 = g * (batch / groups) + (g < batch % groups ? g : batch % groups);
    const int gn = batch / groups + (g < batch % groups);
    int first, count;
    head_samples(groups, batch, &first, &count);
    for (int step = 0; step < steps; step++) {
        rng_state = 1234 + (uint64_t)step;
        for (size_t i = 0; i < sample * batch; i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)seq.out_size * batch; i++) t[i] = frand();
        float l_seq, l_sp;
        CK(pcnn_net_train_step(seq.net, batch, x, NULL, t, &l_seq));
        CK(pcnn_net_train_step(sp.net, gn, x + (size_t)g0 * sample, NULL,
                               t + (size_t)g0 * seq.out_size, &l_sp));
        const double dl = fabs((double)l_seq - l_sp) / fmax(fabs((double)l_seq), 1e-30);
        if (dl > r.loss) r.loss = dl;
        if (step == 0) {
            CK(pcnn_net_get_grads(seq.net, g_seq, np));
            CK(pcnn_net_get_grads(sp.net, g_sp, np));
            r.grads = rel_diff(g_sp, g_seq, np);
            /* The output: CNHW, this rank's samples of the head. */
            const pcnn_net *a = seq.net, *b = sp.net;
            const int oc = seq.out_size;
            double diff = 0.0, scale = 1e-30;
            for (int ch = 0; ch < oc; ch++)
                for (int i = 0; i < count; i++) {
                    const float u = b->output->y[(size_t)ch * count + i];
                    const float v = a->output->y[(size_t)ch * batch + first + i];
                    if (u != v) r.output_bitwise = false;
                    diff = fmax(diff, fabs((double)u - v));
                    scale = fmax(scale, fabs((double)v));
                }
            /* The largest difference relative to the largest output, on
             * any rank. */
            double both[2] = {diff, scale};
            MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            r.output = both[0] / both[1];
        }
    }
    CK(pcnn_net_get_params(seq.net, p_seq, np));
    CK(pcnn_net_get_params(sp.net, p_sp, np));
    r.params = rel_diff(p_sp, p_seq, np);
    pcnn_net_destroy(&seq.net);
    pcnn_net_destroy(&sp.net);
    free(x);
    free(t);
    free(p_seq);
    free(p_sp);
    free(g_seq);
    free(g_sp);
    return r;
}

/* The output extent of a window along one dimension. */
static int out_extent(int x, int k, int s, int p) { return (x + 2 * p - k) / s + 1; }

static void test_convolutions(const int (*splits)[4], int num_splits)
{
    /* A convolution that keeps its im2col matrix cannot recompute its
     * border (spatial_plan.c): without AVX-512 every convolution here is
     * im2col + GEMM, so keep none, or overlap would never be exercised. */
    keep_im2col = !halo_overlap;
    static const int sizes[] = {7, 13, 31}, kernels[] = {1, 3, 5, 7}, strides[] = {1, 2};
    int cases = 0, bad = 0;
    double worst = 0.0;
    for (int si = 0; si < num_splits; si++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++)
                for (int c = 0; c < 2; c++)
                    for (int pad = 0; pad < 2; pad++) {
                        const int X = sizes[a], k = kernels[b], s = strides[c];
                        const int p = pad ? k / 2 : 0;
                        if (k > X + 2 * p) continue;
                        const int y = out_extent(X, k, s, p);
                        const int *parts = splits[si];
                        if (y < parts[2] || y < parts[3]) continue; /* test 5 */
                        /* A second convolution 3x3 stride 1: its input
                         * gradient crosses the halo back. */
                        const layer_spec spec[] = {{CONV, 3, k, s, p}, {RELU, 0, 0, 0, 0},
                                                   {CONV, 2, 3, 1, 1}, {FLATTEN, 0, 0, 0, 0},
                                                   {END, 0, 0, 0, 0}};
                        const outcome o = compare(spec, 2, X, X, parts, 3, 1, PCNN_OPTIMIZER_SGD);
                        const double e = fmax(fmax(o.loss, o.grads), fmax(o.params, o.output));
                        if (e > worst) worst = e;
                        cases++;
                        if (!(e <= 1e-5)) {
                            bad++;
                            if (rank == 0)
                                printf("  split {%d,%d,%d,%d} X=%d k=%d s=%d p=%d: loss %.2g "
                                       "grads %.2g params %.2g output %.2g\n", parts[0],
                                       parts[1], parts[2], parts[3], X, k, s, p, o.loss,
                                       o.grads, o.params, o.output);
                        }
                    }
    char what[240];
    snprintf(what, sizeof what, "convolutions%s%s: %d cases of split x size x kernel x stride x "
             "padding equal one rank (worst relative difference %.2g)",
             halo_overlap ? " (halo overlapped with the interior" : " (halo first",
             schedule ? ", all neighbours at once)" : ", dimension by dimension)", cases, worst);
    keep_im2col = 1;
    expect(bad == 0 && cases > 0 && (ranks == 1 || !halo_overlap || regions_seen > 0) &&
               (ranks != 4 || schedule || phased_seen > 0) && (ranks == 1 || in_place_seen > 0),
           what);
}

/* Convolutions run on their input's block in place (stride 1, padding
 * k / 2, border cells a small share of the block: parallel/halo.h) where
 * that input also feeds a residual sum, and staged after a strided one
 * (the 5x5 one's border cells are too large a share): 2 steps of momentum
 * equal one rank. */
static void test_in_place(const int *parts)
{
    in_place_seen = 0;
    const layer_spec spec[] = {{CONV, 2, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {RESIDUAL, 0, 3, 0, 0},
                               {CONV, 4, 3, 2, 1}, {RESIDUAL, 0, 5, 0, 0},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    const outcome o = compare(spec, 2, 48, 44, parts, 3, 2, PCNN_OPTIMIZER_MOMENTUM);
    char what[240];
    snprintf(what, sizeof what, "convolutions in place (%d layers) beside residual sums and a "
             "strided convolution on {%d,%d,%d,%d}, 2 steps: loss %.2g gradients %.2g "
             "parameters %.2g", in_place_seen, parts[0], parts[1], parts[2], parts[3], o.loss,
             o.grads, o.params);
    expect(fmax(fmax(o.loss, o.grads), fmax(o.params, o.output)) <= 1e-5 &&
               (ranks == 1 || in_place_seen == 2),
           what);
    if (parts[0] < 2) return;
    /* One sample for two sample groups: the second's ranks join the halos
     * with empty boxes. */
    const outcome e = compare(spec, 2, 48, 44, parts, 1, 2, PCNN_OPTIMIZER_MOMENTUM);
    snprintf(what, sizeof what, "convolutions in place on {%d,%d,%d,%d}, batch 1 (a sample "
             "group without samples): loss %.2g gradients %.2g parameters %.2g", parts[0],
             parts[1], parts[2], parts[3], e.loss, e.grads, e.params);
    expect(fmax(fmax(e.loss, e.grads), fmax(e.params, e.output)) <= 1e-5, what);
}

static void test_pooling_and_batchnorm(const int *parts)
{
    const layer_spec maxpool[] = {{MAXPOOL, 0, 3, 2, 1}, {FLATTEN, 0, 0, 0, 0}, {END, 0, 0, 0, 0}};
    outcome o = compare(maxpool, 2, 13, 13, parts, 3, 1, PCNN_OPTIMIZER_SGD);
    expect(o.output_bitwise && o.loss <= 1e-6, "max pooling 3x3 stride 2 pad 1 on 13x13: the "
           "output bit for bit");
    const layer_spec pools[] = {{CONV, 3, 3, 1, 1}, {MAXPOOL, 0, 2, 2, 0}, {CONV, 2, 3, 1, 1},
                                {AVGPOOL, 0, 3, 2, 1}, {FLATTEN, 0, 0, 0, 0}, {END, 0, 0, 0, 0}};
    o = compare(pools, 2, 15, 15, parts, 3, 1, PCNN_OPTIMIZER_SGD);
    expect(fmax(fmax(o.loss, o.grads), fmax(o.params, o.output)) <= 1e-5,
           "conv, max pool 2x2 on an odd size, conv, avg pool 3x3/2/1: loss, output, "
           "gradients, parameters to 1e-5");
    const layer_spec drop[] = {{CONV, 3, 3, 1, 1}, {DROPOUT, 30, 0, 0, 0}, {RELU, 0, 0, 0, 0},
                               {CONV, 2, 3, 1, 1}, {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0},
                               {DROPOUT, 20, 0, 0, 0}, {END, 0, 0, 0, 0}};
    o = compare(drop, 2, 13, 11, parts, 3, 2, PCNN_OPTIMIZER_SGD);
    expect(fmax(fmax(o.loss, o.grads), fmax(o.params, o.output)) <= 1e-5,
           "dropout on the boxes (masks keyed by the point in the whole sample) and in the "
           "head: 2 steps equal one rank to 1e-5");
    const layer_spec bn[] = {{CONV, 4, 3, 1, 1}, {BN, 0, 0, 0, 0}, {RELU, 0, 0, 0, 0},
                             {CONV, 2, 3, 2, 1}, {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0},
                             {END, 0, 0, 0, 0}};
    o = compare(bn, 2, 13, 11, parts, 3, 1, PCNN_OPTIMIZER_SGD);
    char what[160];
    snprintf(what, sizeof what, "batch norm over the sample group, dense head: loss %.2g "
             "gradients %.2g parameters %.2g", o.loss, o.grads, o.params);
    expect(fmax(fmax(o.loss, o.grads), fmax(o.params, o.output)) <= 1e-5, what);
}

/* A 3D network of depth 9 and height 7 on each split against one rank,
 * two steps of momentum. */
static void compare_volumes(const layer_spec *spec, int w, const char *name,
                            const int (*splits)[4], int num)
{
    depth = 9;
    for (int i = 0; i < num; i++) {
        const outcome o = compare(spec, 2, 7, w, splits[i], 3, 2, PCNN_OPTIMIZER_MOMENTUM);
        char what[200];
        snprintf(what, sizeof what, "%s on {%d,%d,%d,%d}, 9x7x%d: 2 steps: loss %.2g gradients "
                 "%.2g parameters %.2g", name, splits[i][0], splits[i][1], splits[i][2],
                 splits[i][3], w, o.loss, o.grads, o.params);
        expect(fmax(fmax(o.loss, o.grads), o.params) <= 1e-5, what);
    }
    depth = 1;
}

/* 3D: convolutions and pools split along D and H (seed 003's {D_p, H_p})
 * on odd extents, against one rank. */
static void test_volumes(const int (*splits)[4], int num)
{
    const layer_spec spec[] = {{CONV3D, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0},
                               {MAXPOOL3D, 0, 3, 2, 1}, {CONV3D, 2, 3, 1, 1},
                               {AVGPOOL3D, 0, 2, 1, 0}, {FLATTEN, 0, 0, 0, 0},
                               {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    compare_volumes(spec, 5, "3D conv, max pool, conv, avg pool", splits, num);
    /* The direct kernels (where the machine has them), rows long enough for
     * them: a twin's input gradient computed on the part of its box inside
     * the sample only (kernels 3 and 5, padding 1, 2 and 0). */
    const layer_spec direct[] = {{CONV3D, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0},
                                 {CONV3D, 2, 5, 1, 2}, {CONV3D, 3, 3, 1, 1},
                                 {CONV3D, 2, 3, 1, 0}, {FLATTEN, 0, 0, 0, 0},
                                 {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    conv_algorithm = 2;
    compare_volumes(direct, 10, "3D direct convolutions", splits, num);
    conv_algorithm = 0;
    /* Deep blocks along D (16 planes a rank): both 3x3x3 convolutions of
     * one channel run in place. */
    if (ranks == 1) return;
    const layer_spec deep[] = {{CONV3D, 1, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {CONV3D, 1, 3, 1, 1},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    const int along_d[4] = {1, ranks, 1, 1};
    depth = 16 * ranks;
    in_place_seen = 0;
    const outcome o = compare(deep, 2, 5, 4, along_d, 2, 2, PCNN_OPTIMIZER_MOMENTUM);
    depth = 1;
    char what[200];
    snprintf(what, sizeof what, "3D convolutions in place (%d layers) on {1,%d,1,1}, %dx5x4: "
             "2 steps: loss %.2g gradients %.2g parameters %.2g", in_place_seen, ranks,
             16 * ranks, o.loss, o.grads, o.params);
    expect(fmax(fmax(o.loss, o.grads), o.params) <= 1e-5 && in_place_seen == 2, what);
}

static void test_training(const int *parts)
{
    /* Batch norm after the ReLU: a convolution's bias right before a batch
     * norm has a zero gradient, whose rounding noise Adam would blow up
     * to a step of the learning rate. */
    const layer_spec spec[] = {{CONV, 4, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {BN, 0, 0, 0, 0},
                               {MAXPOOL, 0, 2, 2, 0}, {CONV, 4, 5, 1, 2}, {RELU, 0, 0, 0, 0},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 5, 0, 0, 0}, {END, 0, 0, 0, 0}};
    static const pcnn_optimizer opts[] = {PCNN_OPTIMIZER_MOMENTUM, PCNN_OPTIMIZER_ADAM};
    static const char *const names[] = {"momentum", "Adam"};
    /* Several sample groups: batch norm synchronised over every rank, as
     * one rank normalises over the whole batch. */
    sync_bn = parts[0] > 1;
    for (int i = 0; i < 2; i++) {
        const outcome o = compare(spec, 3, 17, 14, parts, 5, 4, opts[i]);
        char what[200];
        snprintf(what, sizeof what, "4 steps of %s on {%d,%d,%d,%d}%s, batch 5: parameters "
                 "%.2g, losses %.2g relative to one rank", names[i], parts[0], parts[1],
                 parts[2], parts[3], sync_bn ? " (batch norm synchronised)" : "", o.params,
                 o.loss);
        expect(o.params <= 1e-5 && o.loss <= 1e-5, what);
    }
    sync_bn = 0;
}

/* bf16 on boxes: every twin multiplies the same bf16 operands as one rank
 * (the same W copy, the same x and dY values), only its fp32 partial
 * sums come in another order; after a step a master weight that differs
 * in its last fp32 bits may round to the neighbouring bf16 value (2^-8
 * relative), which the next steps carry.  2^-10 of the norm on one rank;
 * with several, parameters are the masters rounded to bf16 (the wire's,
 * PCNN_OPT_PRECISION) where one rank keeps fp32 ones, 2^-9 relative from
 * the first step on: 2^-6 (measured up to 7.8e-3 in 3D). */
static double tol_bf16(void) { return ranks > 1 ? 0x1p-6 : 0x1p-10; }

static void test_bf16(const int *parts, const int *volume_parts)
{
    precision = 1;
    const layer_spec spec[] = {{CONV, 4, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {MAXPOOL, 0, 2, 2, 0},
                               {CONV, 4, 5, 1, 2}, {RELU, 0, 0, 0, 0}, {CONV, 3, 3, 2, 1},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 5, 0, 0, 0}, {END, 0, 0, 0, 0}};
    outcome o = compare(spec, 3, 17, 14, parts, 5, 3, PCNN_OPTIMIZER_MOMENTUM);
    char what[200];
    snprintf(what, sizeof what, "bf16, 3 steps on {%d,%d,%d,%d}: parameters %.2g, losses %.2g, "
             "first gradients %.2g relative to one rank in bf16", parts[0], parts[1], parts[2],
             parts[3], o.params, o.loss, o.grads);
    expect(o.params <= tol_bf16() && o.loss <= tol_bf16() && o.grads <= tol_bf16(), what);
    const layer_spec vol[] = {{CONV3D, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {CONV3D, 2, 3, 1, 1},
                              {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    depth = 4 * ranks;
    o = compare(vol, 2, 5, 4, volume_parts, 2, 3, PCNN_OPTIMIZER_MOMENTUM);
    depth = 1;
    snprintf(what, sizeof what, "bf16 3D, 3 steps on {%d,%d,%d,%d}: parameters %.2g, losses "
             "%.2g, first gradients %.2g relative to one rank in bf16", volume_parts[0],
             volume_parts[1], volume_parts[2], volume_parts[3], o.params, o.loss, o.grads);
    expect(o.params <= tol_bf16() && o.loss <= tol_bf16() && o.grads <= tol_bf16(), what);
    precision = 0;
}

static void test_data_parallel_unchanged(void)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {MAXPOOL, 0, 2, 2, 0},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 4, 0, 0, 0}, {END, 0, 0, 0, 0}};
    const int parts[4] = {ranks, 1, 1, 1};
    model a, b;
    CK(build(&a, comm_world, NULL, spec, 2, 9, 9, 2 * ranks, PCNN_OPTIMIZER_ADAM, 0.01));
    CK(build(&b, comm_world, parts, spec, 2, 9, 9, 2 * ranks, PCNN_OPTIMIZER_ADAM, 0.01));
    float x[2 * 2 * 81], t[2 * 4];
    for (int step = 0; step < 3; step++) {
        rng_state = 99 + (uint64_t)(step * ranks + rank);
        for (int i = 0; i < 2 * 2 * 81; i++) x[i] = frand();
        for (int i = 0; i < 8; i++) t[i] = frand();
        float la, lb;
        CK(pcnn_net_train_step(a.net, 2, x, NULL, t, &la));
        CK(pcnn_net_train_step(b.net, 2, x, NULL, t, &lb));
    }
    size_t np;
    CK(pcnn_net_num_params(a.net, &np));
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float));
    CK(pcnn_net_get_params(a.net, pa, np));
    CK(pcnn_net_get_params(b.net, pb, np));
    expect(memcmp(pa, pb, np * sizeof(float)) == 0,
           "{P, 1, 1, 1} set explicitly trains bit for bit as today's data parallelism");
    free(pa);
    free(pb);
    pcnn_net_destroy(&a.net);
    pcnn_net_destroy(&b.net);
}

/* Deep layers smaller than their parts (seed 003 section 4.2): with
 * PCNN_OPT_SPATIAL_FALLBACK they split over fewer ranks and share the
 * samples with the rest; training still equals one rank. */
static void test_fallback(void)
{
    /* The batch norm after the last conv falls back with it (wholly at
     * np 3, where it once kept per-rank statistics). */
    const layer_spec spec[] = {{CONV, 3, 3, 2, 1}, {RELU, 0, 0, 0, 0}, {CONV, 3, 3, 2, 1},
                               {BN, 0, 0, 0, 0}, {MAXPOOL, 0, 3, 2, 1}, {CONV, 2, 3, 1, 1},
                               {BN, 0, 0, 0, 0}, {FLATTEN, 0, 0, 0, 0}, {DENSE, 2, 0, 0, 0},
                               {END, 0, 0, 0, 0}};
    const int parts[4] = {1, 1, ranks, 1};
    fallback = 1;
    const outcome a = compare(spec, 2, 9, 7, parts, 3, 2, PCNN_OPTIMIZER_MOMENTUM);
    const outcome b = compare(spec, 2, 9, 7, parts, 1, 2, PCNN_OPTIMIZER_MOMENTUM);
    model m;
    CK(build(&m, comm_world, parts, spec, 2, 9, 7, 3, PCNN_OPTIMIZER_SGD, 0.1));
    int got[4];
    CK(pcnn_layer_get_distribution(m.net->layers.items[6], got)); /* the last conv, 2 rows */
    const int h = ranks <= 2 ? ranks : ranks == 3 ? 1 : 2;
    const bool fell = got[2] == h && got[0] * got[2] == ranks;
    pcnn_net_destroy(&m.net);
    fallback = 0;
    char what[200];
    snprintf(what, sizeof what, "fallback onto fewer ranks (last conv {%d,%d,%d,%d}): batch 3 "
             "and batch 1 equal one rank (%.2g, %.2g)", got[0], got[1], got[2], got[3],
             fmax(fmax(a.loss, a.grads), a.params), fmax(fmax(b.loss, b.grads), b.params));
    expect(fell && fmax(fmax(a.loss, a.grads), a.params) <= 1e-5 &&
               fmax(fmax(b.loss, b.grads), b.params) <= 1e-5, what);
    /* A batch norm set to whole samples inside a split network still
     * normalises over the group's samples. */
    const layer_spec whole[] = {{CONV, 3, 3, 1, 1}, {BN, 1, 0, 0, 0}, {RELU, 0, 0, 0, 0},
                                {CONV, 2, 3, 1, 1}, {FLATTEN, 0, 0, 0, 0}, {DENSE, 2, 0, 0, 0},
                                {END, 0, 0, 0, 0}};
    const outcome c = compare(whole, 2, 9, 7, parts, 4, 2, PCNN_OPTIMIZER_MOMENTUM);
    snprintf(what, sizeof what, "a batch norm on whole samples {%d,1,1,1} between split "
             "convolutions: batch 4 equals one rank (%.2g)", ranks,
             fmax(fmax(c.loss, c.grads), c.params));
    expect(fmax(fmax(c.loss, c.grads), c.params) <= 1e-5, what);
}

/* Inference under the distribution equals one rank's pcnn_net_predict
 * after the same training (running statistics, dropout off). */
static void test_predict(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {BN, 0, 0, 0, 0}, {RELU, 0, 0, 0, 0},
                               {DROPOUT, 30, 0, 0, 0}, {MAXPOOL, 0, 3, 2, 1},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0}, {END, 0, 0, 0, 0}};
    enum { B = 4, C = 2, H = 11, W = 9 };
    sync_bn = parts[0] > 1;
    model sp, one;
    CK(build(&sp, comm_world, parts, spec, C, H, W, B, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    CK(build(&one, NULL, NULL, spec, C, H, W, B, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    sync_bn = 0;
    float x[B * C * H * W], t[B * 3], ya[B * 3], yb[B * 3];
    rng_state = 4242;
    for (int i = 0; i < B * C * H * W; i++) x[i] = frand();
    for (int i = 0; i < B * 3; i++) t[i] = frand();
    const int groups = parts[0], g = rank / (ranks / groups);
    const int g0 = g * (B / groups) + (g < B % groups ? g : B % groups);
    const int gn = B / groups + (g < B % groups);
    float loss;
    for (int s = 0; s < 2; s++) {
        CK(pcnn_net_train_step(one.net, B, x, NULL, t, &loss));
        CK(pcnn_net_train_step(sp.net, gn, x + (size_t)g0 * C * H * W, NULL, t + g0 * 3, &loss));
    }
    CK(pcnn_net_predict(one.net, B, x, ya, B * 3));
    CK(pcnn_net_predict_parallel(sp.net, gn, x + (size_t)g0 * C * H * W, yb, (size_t)gn * 3));
    const double d = rel_diff(yb, ya + g0 * 3, (size_t)gn * 3);
    char what[160];
    snprintf(what, sizeof what, "predict_parallel after 2 steps equals one rank's predict for "
             "the group's samples (%.2g)", d);
    expect(d <= 1e-5, what);
    /* More samples than max_batch (run in chunks, each collective),
     * shared unevenly: with several groups the last has none (NULL x and
     * out) and waits out the others' chunks. */
    enum { M = 3 * B + 1 };
    static float xm[M * C * H * W], za[M * 3], zb[M * 3];
    for (int i = 0; i < M * C * H * W; i++) xm[i] = frand();
    CK(pcnn_net_predict(one.net, M, xm, za, M * 3));
    const int busy = groups > 1 ? groups - 1 : 1;
    const int m0 = g >= busy ? 0 : g * (M / busy) + (g < M % busy ? g : M % busy);
    const int mn = g >= busy ? 0 : M / busy + (g < M % busy);
    for (int i = 0; i < M * 3; i++) zb[i] = NAN;
    CK(pcnn_net_predict_parallel(sp.net, mn, mn ? xm + (size_t)m0 * C * H * W : NULL,
                                 mn ? zb : NULL, (size_t)mn * 3));
    const double dm = mn ? rel_diff(zb, za + m0 * 3, (size_t)mn * 3) : 0;
    snprintf(what, sizeof what, "predict_parallel of %d samples (a network finalized for %d) "
             "on group %d of %d equals one rank's predict (%.2g)", mn, B, g, groups, dm);
    expect(dm <= 1e-5, what);
    pcnn_net_destroy(&sp.net);
    pcnn_net_destroy(&one.net);
}

/* pcnn_net_train_epoch shares each batch among the sample groups. */
static void test_epoch(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {MAXPOOL, 0, 2, 2, 0},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 2, 0, 0, 0}, {END, 0, 0, 0, 0}};
    enum { N = 7, C = 2, H = 10, W = 9, BATCH = 3 };
    model sp, one;
    CK(build(&sp, comm_world, parts, spec, C, H, W, BATCH, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    CK(build(&one, NULL, NULL, spec, C, H, W, BATCH, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    float x[N * C * H * W], t[N * 2];
    rng_state = 31337;
    for (int i = 0; i < N * C * H * W; i++) x[i] = frand();
    for (int i = 0; i < N * 2; i++) t[i] = frand();
    pcnn_dataset *data;
    CK(pcnn_dataset_create(N, C, H, W, x, NULL, t, 2, &data));
    double la, lb;
    CK(pcnn_net_train_epoch(one.net, data, BATCH, &la));
    CK(pcnn_net_train_epoch(sp.net, data, BATCH, &lb));
    size_t np;
    CK(pcnn_net_num_params(sp.net, &np));
    float *a = malloc(np * sizeof(float)), *b = malloc(np * sizeof(float));
    CK(pcnn_net_get_params(one.net, a, np));
    CK(pcnn_net_get_params(sp.net, b, np));
    const double d = rel_diff(b, a, np);
    char what[160];
    snprintf(what, sizeof what, "train_epoch (7 samples, batch 3) equals one rank: parameters "
             "%.2g, mean loss %.2g", d, fabs(la - lb) / fabs(la));
    expect(d <= 1e-5 && fabs(la - lb) <= 1e-5 * fabs(la), what);
    free(a);
    free(b);
    CK(pcnn_dataset_destroy(&data));
    pcnn_net_destroy(&sp.net);
    pcnn_net_destroy(&one.net);
}

static void test_checkpoint(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {BN, 0, 0, 0, 0}, {RELU, 0, 0, 0, 0},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 2, 0, 0, 0}, {END, 0, 0, 0, 0}};
    model sp, one;
    CK(build(&sp, comm_world, parts, spec, 2, 9, 8, 2 * parts[0], PCNN_OPTIMIZER_ADAM, 0.01));
    CK(build(&one, NULL, NULL, spec, 2, 9, 8, 2, PCNN_OPTIMIZER_ADAM, 0.01));
    float x[2 * 2 * 72], t[4];
    rng_state = 77 + (uint64_t)(rank / (ranks / parts[0]));
    for (int i = 0; i < 2 * 2 * 72; i++) x[i] = frand();
    for (int i = 0; i < 4; i++) t[i] = frand();
    float loss;
    CK(pcnn_net_train_step(sp.net, 2, x, NULL, t, &loss));
    CK(pcnn_net_train_step(sp.net, 2, x, NULL, t, &loss));
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char path[128];
    snprintf(path, sizeof path, "/tmp/pcnn_spatial_%d.ckpt", pid);
    CK(pcnn_net_save(sp.net, path));
    MPI_Barrier(MPI_COMM_WORLD);
    CK(pcnn_net_load(one.net, path));
    size_t np;
    CK(pcnn_net_num_params(sp.net, &np));
    float *a = malloc(np * sizeof(float)), *b = malloc(np * sizeof(float));
    CK(pcnn_net_get_params(sp.net, a, np));
    CK(pcnn_net_get_params(one.net, b, np));
    size_t ns = 0, no = 0;
    const float *ra = batchnorm_running_stats(sp.net->layers.items[2], &ns);
    const float *rb = batchnorm_running_stats(one.net->layers.items[2], &no);
    /* Running statistics are per sample group (equal within a group); one
     * rank loading a file of several takes their mean (checkpoint_state.c). */
    bool stats = ra && rb && ns == no && ns > 0 && ns <= 64;
    float all[4 * 64];
    if (stats) MPI_Allgather(ra, (int)ns, MPI_FLOAT, all, (int)ns, MPI_FLOAT, MPI_COMM_WORLD);
    for (size_t i = 0; stats && i < ns; i++) {
        double sum = 0.0;
        for (int q = 0; q < ranks; q++) sum += all[(size_t)q * ns + i];
        const double mean = sum / ranks;
        stats = ranks == 1 ? rb[i] == ra[i] : fabs((double)rb[i] - mean) <= 1e-6 * fabs(mean) + 1e-7;
    }
    bool moved = false; /* the running statistics left their initial values */
    for (size_t i = 0; ra && i < ns / 2; i++) moved |= ra[i] != 0.0f;
    expect(memcmp(a, b, np * sizeof(float)) == 0 && stats && moved,
           "a spatial network's checkpoint loads into one rank: parameters bit for bit, "
           "running statistics the mean over the saved ranks");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(path);
    free(a);
    free(b);
    pcnn_net_destroy(&sp.net);
    pcnn_net_destroy(&one.net);
}

/* A dense layer on each rank's box (one sample group) exchanges its
 * weights by columns: each rank updates its own, one all-gather brings the
 * others', copied into the parameters when something reads them.  Against
 * one rank, with overlap and all-to-all + all-gather (the defaults):
 * training, parameters set between steps (the others' columns of the last
 * step must not come back over them), and a checkpoint's optimizer state
 * continuing on one rank. */
static void test_columns(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {FLATTEN, 0, 0, 0, 0},
                               {DENSE, 4, 0, 0, 0}, {RELU, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0},
                               {END, 0, 0, 0, 0}};
    enum { C = 2, H = 11, W = 9, N = 3 };
    overlap = 1;
    exchange_kind = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    const outcome trained = compare(spec, C, H, W, parts, N, 4, PCNN_OPTIMIZER_ADAM);
    model sp, one, again;
    CK(build(&sp, comm_world, parts, spec, C, H, W, N, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    CK(build(&one, NULL, NULL, spec, C, H, W, N, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    CK(build(&again, NULL, NULL, spec, C, H, W, N, PCNN_OPTIMIZER_MOMENTUM, 0.05));
    static char summary[1 << 14];
    CK(pcnn_net_summary(sp.net, summary, sizeof summary, NULL));
    uint64_t bytes_sp;
    CK(pcnn_net_exchange_bytes(sp.net, &bytes_sp));
    /* Sent: the convolution's and the last dense layer's all-to-all +
     * all-gather (n - n_r + n_r (P - 1) floats), this rank's columns of
     * the first dense layer's weights to the P - 1 others, its 4 biases
     * allreduced. */
    int start[3], count[3];
    CK(pcnn_layer_local_box(sp.first, start, count));
    const uint64_t P = (uint64_t)ranks, columns = 4 * 3 * (uint64_t)(count[1] * count[2]);
    uint64_t expected = 4 * columns * (P - 1) + 2 * 4 * 4 * (P - 1) / P;
    const uint64_t others[2] = {2 * 3 * 9 + 3, 4 * 3 + 3};
    for (int k = 0; k < 2; k++) {
        const uint64_t own = others[k] / P + ((uint64_t)rank < others[k] % P);
        expected += 4 * (others[k] - own + own * (P - 1));
    }
    size_t np;
    CK(pcnn_net_num_params(sp.net, &np));
    float *a = malloc(np * sizeof(float)), *b = malloc(np * sizeof(float));
    float x[N * C * H * W], t[N * 3];
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char path[128];
    snprintf(path, sizeof path, "/tmp/pcnn_columns_%d.ckpt", pid);
    float loss;
    bool kept_set = false;
    for (int step = 0; step < 4; step++) {
        rng_state = 900 + (uint64_t)step;
        for (int i = 0; i < N * C * H * W; i++) x[i] = frand();
        for (int i = 0; i < N * 3; i++) t[i] = frand();
        if (step == 1) { /* new parameters on every net, after a step */
            for (size_t i = 0; i < np; i++) a[i] = 0.2f * sinf(0.37f * (float)i);
            CK(pcnn_net_set_params(sp.net, a, np));
            CK(pcnn_net_set_params(one.net, a, np));
            CK(pcnn_net_get_params(sp.net, b, np)); /* what was set, not older columns */
            kept_set = memcmp(a, b, np * sizeof(float)) == 0;
        }
        if (step == 3) { /* the spatial net's checkpoint continues on one rank */
            CK(pcnn_net_save(sp.net, path));
            MPI_Barrier(MPI_COMM_WORLD);
            CK(pcnn_net_load(again.net, path));
            CK(pcnn_net_train_step(again.net, N, x, NULL, t, &loss));
        }
        CK(pcnn_net_train_step(sp.net, N, x, NULL, t, &loss));
        CK(pcnn_net_train_step(one.net, N, x, NULL, t, &loss));
    }
    CK(pcnn_net_get_params(sp.net, a, np));
    CK(pcnn_net_get_params(one.net, b, np));
    const double after_set = rel_diff(a, b, np);
    CK(pcnn_net_get_params(again.net, a, np));
    const double resumed = rel_diff(a, b, np);
    char what[400];
    snprintf(what, sizeof what, "the dense layer on each rank's box exchanges by columns "
             "(%llu bytes a step, %llu expected): 4 Adam steps with overlap %.2g; "
             "parameters set between steps (read back %s) %.2g; its checkpoint resumed on one "
             "rank %.2g",
             (unsigned long long)bytes_sp, (unsigned long long)expected, trained.params,
             kept_set ? "bit for bit" : "CHANGED", after_set, resumed);
    expect(strstr(summary, "exchange all-gather of each rank's columns") != NULL &&
               bytes_sp == expected && trained.params <= 1e-5 &&
               trained.loss <= 1e-5 && kept_set && after_set <= 1e-5 && resumed <= 1e-5,
           what);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(path);
    free(a);
    free(b);
    pcnn_net_destroy(&sp.net);
    pcnn_net_destroy(&one.net);
    pcnn_net_destroy(&again.net);
    overlap = 0;
    exchange_kind = PCNN_EXCHANGE_ALLREDUCE;
}

static void test_refusals_and_queries(void)
{
    const layer_spec spec[] = {{CONV, 2, 3, 2, 0}, {FLATTEN, 0, 0, 0, 0}, {END, 0, 0, 0, 0}};
    if (ranks > 1) {
        /* 7 -> conv 3/2/0 -> 3 rows: too few for `ranks + 2`... use H split over
         * all ranks on a 2-row output: 5 -> 2. */
        const int parts[4] = {1, 1, ranks, 1};
        model m;
        pcnn_status st = build(&m, comm_world, parts, spec, 1, ranks == 2 ? 3 : 5, 9, 2,
                               PCNN_OPTIMIZER_SGD, 0.1);
        /* ranks == 2: 3 -> 1 row; else 5 -> 2 rows < ranks. */
        const bool named = strstr(pcnn_last_error(), "layer 1 (conv2d)") != NULL &&
                           strstr(pcnn_last_error(), "too small") != NULL;
        if (!named && rank == 0) printf("  message: %s\n", pcnn_last_error());
        expect(st == PCNN_ERR_SHAPE && named,
               "a layer too small for its group: finalize fails with SHAPE naming the layer");
        pcnn_net_destroy(&m.net);
    }
    pcnn_net *net;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, comm_world));
    const int wrong[4] = {ranks, 2, 1, 1}, zero[4] = {0, 1, 1, ranks};
    expect(pcnn_net_set_distribution(net, wrong) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_set_distribution(net, zero) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_set_distribution(net, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "parts whose product is not P, parts < 1 and NULL are refused");
    pcnn_net_destroy(&net);

    /* Boxes and groups of a 2D split. */
    int parts[4] = {1, 1, ranks, 1};
    if (ranks == 4) parts[0] = 2, parts[2] = 1, parts[3] = 2;
    model m;
    const layer_spec spec2[] = {{CONV, 2, 3, 1, 1}, {FLATTEN, 0, 0, 0, 0}, {END, 0, 0, 0, 0}};
    CK(build(&m, comm_world, parts, spec2, 1, 13, 11, 4, PCNN_OPTIMIZER_SGD, 0.1));
    int start[3], count[3], got[4], group, groups, in_group, size;
    CK(pcnn_layer_local_box(m.first, start, count));
    int c[4] = {rank / (ranks / parts[0]), 0, 0, 0};
    c[2] = (rank / parts[3]) % parts[2];
    c[3] = rank % parts[3];
    const int h0 = c[2] * (13 / parts[2]) + (c[2] < 13 % parts[2] ? c[2] : 13 % parts[2]);
    const int w0 = c[3] * (11 / parts[3]) + (c[3] < 11 % parts[3] ? c[3] : 11 % parts[3]);
    const bool boxed = start[0] == 0 && count[0] == 1 && start[1] == h0 &&
                       count[1] == 13 / parts[2] + (c[2] < 13 % parts[2]) && start[2] == w0 &&
                       count[2] == 11 / parts[3] + (c[3] < 11 % parts[3]);
    CK(pcnn_layer_get_distribution(m.out, got));
    const bool head = got[0] == ranks && got[1] == 1 && got[2] == 1 && got[3] == 1;
    CK(pcnn_layer_get_distribution(m.first, got));
    const bool inherited = memcmp(got, parts, sizeof got) == 0;
    CK(pcnn_net_group_info(m.net, &group, &groups, &in_group, &size));
    const int g_size = ranks / parts[0];
    expect(boxed && head && inherited && groups == parts[0] && size == g_size && group == rank / g_size &&
               in_group == rank % g_size,
           "the convolution inherits the network's distribution and holds its block; flatten "
           "takes {P, 1, 1, 1}; group info");
    pcnn_net_destroy(&m.net);
}

/* A value that names the point (ch, n, d, h, w) exactly. */
static float point_value(int ch, int n, int d, int h, int w)
{
    return (float)((((ch * 7 + n) * 3 + d) * 64 + h) * 64 + w);
}

static void fill_box(float *t, const box *b, int c)
{
    size_t i = 0;
    for (int ch = 0; ch < c; ch++)
        for (int n = b->lo[0]; n < b->hi[0]; n++)
            for (int d = b->lo[1]; d < b->hi[1]; d++)
                for (int h = b->lo[2]; h < b->hi[2]; h++)
                    for (int w = b->lo[3]; w < b->hi[3]; w++) t[i++] = point_value(ch, n, d, h, w);
}

/* Points of b inside [0,H) x [0,W) hold their value, the others `pad`. */
static bool check_box(const float *t, const box *b, int c, int H, int W, float pad)
{
    size_t i = 0;
    bool ok = true;
    for (int ch = 0; ch < c; ch++)
        for (int n = b->lo[0]; n < b->hi[0]; n++)
            for (int d = b->lo[1]; d < b->hi[1]; d++)
                for (int h = b->lo[2]; h < b->hi[2]; h++)
                    for (int w = b->lo[3]; w < b->hi[3]; w++, i++) {
                        const bool in = h >= 0 && h < H && w >= 0 && w < W;
                        ok &= t[i] == (in ? point_value(ch, n, d, h, w) : pad);
                    }
    return ok;
}

/* The same with bf16 messages: this rank's own points (in `own`) exact,
 * the others' rounded to bf16, padding `pad`. */
static bool check_box_bf16(const float *t, const box *b, const box *own, int c, int H, int W,
                           float pad, size_t *rounded)
{
    size_t i = 0;
    bool ok = true;
    for (int ch = 0; ch < c; ch++)
        for (int n = b->lo[0]; n < b->hi[0]; n++)
            for (int d = b->lo[1]; d < b->hi[1]; d++)
                for (int h = b->lo[2]; h < b->hi[2]; h++)
                    for (int w = b->lo[3]; w < b->hi[3]; w++, i++) {
                        const bool in = h >= 0 && h < H && w >= 0 && w < W;
                        const bool mine = h >= own->lo[2] && h < own->hi[2] &&
                                          w >= own->lo[3] && w < own->hi[3];
                        const float v = point_value(ch, n, d, h, w);
                        const float r = bf16_to_f32(bf16_from_f32(v));
                        ok &= t[i] == (!in ? pad : mine ? v : r);
                        *rounded += in && !mine && r != v;
                    }
    return ok;
}

static void test_box_moves(void)
{
    enum { C = 3, B = 5, H = 11, W = 9, MAXP = 8 };
    long timeout = 60000;
    box_mover *m;
    CK(box_mover_create(comm_world, &timeout, &m));
    int start[1] = {0}, count[1] = {B};
    const sample_split split = {1, start, count};
    const int a_parts[4] = {1, 1, ranks, 1}, b_parts[4] = {ranks, 1, 1, 1};
    const int g_parts[4] = {1, 1, ranks > 1 ? 2 : 1, ranks > 1 ? ranks / 2 : 1};
    box a[MAXP], b[MAXP], g[MAXP], e[MAXP];
    for (int q = 0; q < ranks; q++) {
        a[q] = layout_box(a_parts, q, &split, 1, H, W);
        b[q] = layout_box(b_parts, q, &split, 1, H, W);
        g[q] = layout_box(g_parts, q, &split, 1, H, W);
        e[q] = g[q]; /* a 5x5 window, padding 2: two rows and columns around */
        for (int k = 2; k < 4; k++) e[q].lo[k] -= 2, e[q].hi[k] += 2;
    }
    const size_t most = (size_t)C * B * (H + 4) * (W + 4);
    float *src = calloc(most, sizeof(float)), *mid = calloc(most, sizeof(float));
    float *back = calloc(most, sizeof(float));
    fill_box(src, &a[rank], C);
    CK(box_move(m, 1, C, a, b, src, mid, false, 1));
    bool shuffled = check_box(mid, &b[rank], C, H, W, 0);
    CK(box_move(m, 2, C, b, a, mid, back, false, 1));
    bool round = memcmp(src, back, sizeof(float) * C * box_volume(&a[rank])) == 0;
    memset(back, 0, most * sizeof(float));
    CK(box_move(m, 3, C, b, a, mid, back, true, 1));
    round &= memcmp(src, back, sizeof(float) * C * box_volume(&a[rank])) == 0;
    expect(shuffled && round, "shuffle H split -> whole samples -> H split: every point "
           "arrives, and the round trip is the identity bit for bit (copy and add)");
    fill_box(src, &g[rank], C);
    for (size_t i = 0; i < most; i++) mid[i] = -1.0f;
    CK(box_move(m, 4, C, g, e, src, mid, false, 1));
    expect(check_box(mid, &e[rank], C, H, W, -1.0f),
           "halo move of a 5x5 window on a 2D split: corners included, padding untouched");
    /* bf16 messages (a bf16 convolution's input halo), half the bytes;
     * on a split into disjoint boxes (an odd number of ranks leaves g's
     * parts overlapping: a rank's own points then arrive from another). */
    const bool disjoint = g_parts[2] * g_parts[3] == ranks;
    for (size_t i = 0; i < most; i++) mid[i] = -1.0f;
    CK(box_move_post_args(m, &(box_move_args){.tag = 5, .c = C, .threads = 1, .src_boxes = g,
                                              .dst_boxes = e, .src = src, .dst = mid,
                                              .bf16 = true}));
    CK(box_move_finish(m));
    size_t rounded = 0;
    const bool bf16_ok = check_box_bf16(mid, &e[rank], &g[rank], C, H, W, -1.0f, &rounded);
    char what[160];
    snprintf(what, sizeof what, "the same halo in bf16: own points exact, the others' rounded "
             "to nearest even (%zu of them changed by it), padding untouched", rounded);
    if (disjoint) expect(bf16_ok && (ranks == 1 || rounded > 0), what);
    free(src);
    free(mid);
    free(back);
    box_mover_destroy(m);
}

static void test_local_step(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {MAXPOOL, 0, 3, 2, 1},
                               {FLATTEN, 0, 0, 0, 0}, {DENSE, 2, 0, 0, 0}, {END, 0, 0, 0, 0}};
    enum { C = 2, H = 13, W = 10, N = 3 };
    model a, b;
    CK(build(&a, comm_world, parts, spec, C, H, W, N * parts[0], PCNN_OPTIMIZER_MOMENTUM, 0.05));
    CK(build(&b, comm_world, parts, spec, C, H, W, N * parts[0], PCNN_OPTIMIZER_MOMENTUM, 0.05));
    int start[3], count[3];
    pcnn_layer *input = a.net->layers.items[0];
    CK(pcnn_layer_local_box(input, start, count));
    float x[N * C * H * W], xl[N * C * H * W], t[N * 2];
    for (int step = 0; step < 2; step++) {
        rng_state = 555 + (uint64_t)step * 31 + (uint64_t)(rank / (ranks / parts[0]));
        for (int i = 0; i < N * C * H * W; i++) x[i] = frand();
        for (int i = 0; i < N * 2; i++) t[i] = frand();
        size_t k = 0;
        for (int n = 0; n < N; n++)
            for (int ch = 0; ch < C; ch++)
                for (int h = start[1]; h < start[1] + count[1]; h++)
                    for (int w = start[2]; w < start[2] + count[2]; w++)
                        xl[k++] = x[((n * C + ch) * H + h) * W + w];
        float la, lb;
        CK(pcnn_net_train_step(a.net, N, x, NULL, t, &la));
        CK(pcnn_net_train_step_local(b.net, N, xl, NULL, t, &lb));
    }
    size_t np;
    CK(pcnn_net_num_params(a.net, &np));
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float));
    CK(pcnn_net_get_params(a.net, pa, np));
    CK(pcnn_net_get_params(b.net, pb, np));
    expect(memcmp(pa, pb, np * sizeof(float)) == 0, "train_step_local on each rank's box "
           "trains bit for bit as train_step on the group's whole samples");
    /* Each rank checks only its box of whole samples: a NaN in the first or
     * the last rank's box fails the step on every rank, and changes nothing. */
    for (int where = 0; where < 2; where++) {
        const size_t at = where ? (size_t)N * C * H * W - 1 : 0;
        const float keep = x[at];
        x[at] = NAN;
        float loss;
        const pcnn_status st = pcnn_net_train_step(a.net, N, x, NULL, t, &loss);
        /* The rank holding the point says so, before any forward pass. */
        const int h = where ? H - 1 : 0, w = where ? W - 1 : 0;
        const bool mine = h >= start[1] && h < start[1] + count[1] && w >= start[2] &&
                          w < start[2] + count[2];
        const bool said = !mine || strstr(pcnn_last_error(), "input batch contains NaN") != NULL;
        x[at] = keep;
        CK(pcnn_net_get_params(a.net, pb, np));
        char what[200];
        snprintf(what, sizeof what, "a NaN at the %s point of the whole samples: the step fails "
                 "on every rank (%s), found in the input by its box's rank, and changes no "
                 "parameter", where ? "last" : "first", pcnn_status_str(st));
        expect(st != PCNN_OK && said && memcmp(pa, pb, np * sizeof(float)) == 0, what);
    }
    /* The halo exchanges (conv, pool) and the shuffle (flatten) are timed. */
    double halo = 0, exposed = 0, shuffle = 0, conv_halo = 0;
    CK(pcnn_net_time(a.net, -1, PCNN_TIME_HALO, &halo));
    CK(pcnn_net_time(a.net, -1, PCNN_TIME_HALO_EXPOSED, &exposed));
    CK(pcnn_net_time(a.net, -1, PCNN_TIME_SHUFFLE, &shuffle));
    CK(pcnn_net_time(a.net, 1, PCNN_TIME_HALO, &conv_halo));
    char report[4096];
    CK(pcnn_net_timing_report(a.net, report, sizeof report, NULL));
    const bool split = ranks > 1;
    expect(!split || (halo > 0 && conv_halo > 0 && exposed > 0 && exposed <= halo &&
                      shuffle > 0 && strstr(report, "shuffle") != NULL),
           "halo, exposed halo and shuffle time per layer in pcnn_net_time and the report");
    /* One sample group: the dense layer multiplies each rank's box of the
     * flatten's input (spatial_dense.c) instead of a shuffle; several
     * groups: the shuffle (the two trained alike above). */
    static char summary[1 << 14];
    CK(pcnn_net_summary(a.net, summary, sizeof summary, NULL));
    const bool box_dense = strstr(summary, "no shuffle") != NULL;
    expect(box_dense == (split && parts[0] == 1), "the dense layer after a split runs on each "
           "rank's box where every rank holds every sample, and after a shuffle elsewhere");
    free(pa);
    free(pb);
    pcnn_net_destroy(&a.net);
    pcnn_net_destroy(&b.net);
}

/* 10. The overlapped path (each windowed layer's box computed while its
 * halo travels, the border cells again once it is in) forced on in every
 * step, off, and left to its trials (spatial_run.c: after 5 steps each
 * layer keeps the faster way and says so in its choice) train alike on
 * odd sizes: 7 steps with momentum, losses and parameters to 1e-5. */
static void test_overlap_paths(const int *parts)
{
    const layer_spec spec[] = {{CONV, 3, 3, 1, 1}, {RELU, 0, 0, 0, 0}, {CONV, 4, 5, 1, 2},
                               {AVGPOOL, 0, 3, 1, 1}, {CONV, 3, 3, 2, 1}, {RELU, 0, 0, 0, 0},
                               {CONV, 2, 3, 1, 0}, {FLATTEN, 0, 0, 0, 0}, {DENSE, 3, 0, 0, 0},
                               {END, 0, 0, 0, 0}};
    enum { C = 2, H = 17, W = 15, N = 2, STEPS = 7 };
    model m[3]; /* forced on, off, trials */
    for (int k = 0; k < 3; k++) {
        halo_overlap = k != 1;
        CK(build(&m[k], comm_world, parts, spec, C, H, W, N, PCNN_OPTIMIZER_MOMENTUM, 0.005));
    }
    halo_overlap = 1;
    int forced = 0, planned_off = 0;
    if (m[0].net->spatial && m[0].net->spatial->active) {
        spatial *sp = m[0].net->spatial;
        for (int i = 0; i < sp->count; i++)
            if (sp->layers[i].overlap) sp->layers[i].overlap_on = true, forced++;
        sp->overlap_decided = true;
        for (int i = 0; i < m[1].net->spatial->count; i++)
            planned_off += m[1].net->spatial->layers[i].overlap;
    }
    float x[N * C * H * W], t[N * 3];
    double worst_loss = 0.0;
    for (int step = 0; step < STEPS; step++) {
        rng_state = 4321 + (uint64_t)step;
        for (int i = 0; i < N * C * H * W; i++) x[i] = frand();
        for (int i = 0; i < N * 3; i++) t[i] = frand();
        float loss[3];
        for (int k = 0; k < 3; k++) CK(pcnn_net_train_step(m[k].net, N, x, NULL, t, &loss[k]));
        for (int k = 0; k < 3; k += 2)
            worst_loss = fmax(worst_loss, fabs((double)loss[k] - loss[1]) /
                                              fmax(fabs((double)loss[1]), 1e-30));
    }
    size_t np;
    CK(pcnn_net_num_params(m[1].net, &np));
    float *p[3];
    for (int k = 0; k < 3; k++) {
        p[k] = malloc(np * sizeof(float));
        CK(pcnn_net_get_params(m[k].net, p[k], np));
    }
    const double on_off = rel_diff(p[0], p[1], np), trial_off = rel_diff(p[2], p[1], np);
    int decided = 0, said = 0;
    if (m[2].net->spatial && m[2].net->spatial->active) {
        const spatial *sp = m[2].net->spatial;
        for (int i = 0; i < sp->count; i++)
            if (sp->layers[i].overlap) {
                decided += sp->overlap_decided;
                said += m[2].net->layers.items[i]->decision.halo_overlap != 0;
            }
    }
    char what[240];
    snprintf(what, sizeof what, "halo overlap forced on (%d layers), off and chosen by trials "
             "(%d layers decided, %d say so): 7 steps, loss %.2g, parameters %.2g / %.2g",
             forced, decided, said, worst_loss, on_off, trial_off);
    expect(worst_loss <= 1e-5 && on_off <= 1e-5 && trial_off <= 1e-5 && planned_off == 0 &&
               (ranks == 1 || (forced >= 1 && decided == forced && said == forced)),
           what);
    for (int k = 0; k < 3; k++) {
        free(p[k]);
        pcnn_net_destroy(&m[k].net);
    }
}

/* Staged layers keeping their inputs from forward to backward, and sharing
 * one staging that backward fills again: training, 3D layers and the halo
 * overlap's paths equal one rank both ways. */
static void test_kept_inputs(const int *parts, const int (*volume_splits)[4],
                             const int *overlap_split)
{
    const int failed = failures;
    kept_seen = shared_seen = 0;
    keep_inputs = 1;
    test_training(parts);
    test_volumes(volume_splits, 2);
    test_overlap_paths(overlap_split);
    const int kept = kept_seen, shared = shared_seen;
    keep_inputs = -1;
    test_volumes(volume_splits, 2);
    expect(kept > 0 && shared == 0 && shared_seen > 0 && kept_seen == kept &&
               failures == failed,
           "staged inputs kept for backward (training, 3D, overlap) and shared, staged again");
    keep_inputs = 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm_world));

    int splits[4][4], num = 0;
    if (ranks == 1) {
        splits[num][0] = 1, splits[num][1] = 1, splits[num][2] = 1, splits[num][3] = 1, num++;
    } else {
        const int a[4] = {1, 1, ranks, 1}, b[4] = {1, 1, 1, ranks};
        memcpy(splits[num++], a, sizeof a);
        memcpy(splits[num++], b, sizeof b);
        if (ranks == 4) {
            const int c[4] = {1, 1, 2, 2}, d[4] = {2, 1, 1, 2};
            memcpy(splits[num++], c, sizeof c);
            memcpy(splits[num++], d, sizeof d);
        }
    }
    test_convolutions((const int(*)[4])splits, num);
    halo_overlap = 0;
    regions_seen = phased_seen = 0;
    schedule = 1;
    /* 2 x 2 on 4 ranks: corners come as diagonal messages. */
    test_convolutions((const int(*)[4])splits + (ranks == 4 ? 2 : 0), 1);
    expect(regions_seen == 0 && phased_seen == 0, "PCNN_OPT_HALO_OVERLAP 0 and "
           "PCNN_OPT_HALO_SCHEDULE 1: no regions, no phases");
    halo_overlap = 1;
    schedule = 0;
    test_pooling_and_batchnorm(splits[ranks == 4 ? 2 : 0]);
    for (int i = 0; i < num; i++) test_in_place(splits[i]);
    const int hybrid[4] = {2, 1, 1, 2};
    test_training(ranks == 4 ? hybrid : splits[0]);
    int volume_splits[2][4] = {{1, ranks, 1, 1}, {1, 1, ranks, 1}};
    if (ranks == 4) {
        const int a[4] = {1, 2, 2, 1}, b[4] = {2, 2, 1, 1};
        memcpy(volume_splits[0], a, sizeof a);
        memcpy(volume_splits[1], b, sizeof b);
    }
    test_volumes((const int(*)[4])volume_splits, ranks == 1 ? 1 : 2);
    test_bf16(ranks == 4 ? hybrid : splits[0], volume_splits[0]);
    test_data_parallel_unchanged();
    test_box_moves();
    test_local_step(ranks == 4 ? hybrid : splits[ranks == 1 ? 0 : 1]);
    test_checkpoint(ranks == 4 ? hybrid : splits[0]);
    test_fallback();
    test_predict(ranks == 4 ? hybrid : splits[0]);
    test_epoch(ranks == 4 ? hybrid : splits[0]);
    test_refusals_and_queries();
    if (ranks > 1) test_columns(splits[0]);
    if (ranks > 1) test_columns(splits[1]);
    const int overlap_split[4] = {1, 1, ranks == 4 ? 2 : ranks, ranks == 4 ? 2 : 1};
    test_overlap_paths(overlap_split);
    if (ranks > 1) test_kept_inputs(ranks == 4 ? hybrid : splits[0],
                                    (const int(*)[4])volume_splits, overlap_split);

    CK(pcnn_comm_destroy(&comm_world));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
