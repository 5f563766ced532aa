/* Data-parallel training equals sequential training on the same global
 * batch: run under mpiexec with 1, 2, 3 or 4 ranks.  Every rank also trains
 * a private single-process copy of the network on the whole batch, and the
 * parameters must agree (relative 1e-5) after every case.  Images with
 * class labels, and volumes (3D convolutions and pools) with regression
 * targets.  bf16 products too: ranks bitwise equal, and equal to one-rank
 * bf16 training to bf16 tolerance (BF16_TOL); precisions that differ
 * between ranks fail finalize with PCNN_ERR_MISMATCH. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ACTIVE_ENGINE, PCNN_OPT_ENGINE, the 3D calls: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

typedef struct config {
    pcnn_exchange exchange;
    pcnn_optimizer optimizer;
    int batch;          /* global */
    double bucket_bytes;
    int dropout;
    double weight_decay;
    int engine;         /* PCNN_OPT_ENGINE */
    int no_overlap;     /* PCNN_OPT_OVERLAP 0 */
    int fc;             /* dense layers: 0 default (eq. 4.8 decides), 1 FC gradient,
                           2 the network's exchange, chosen explicitly */
    int volume;         /* the 3D network (build_volume) */
    int precision;      /* PCNN_OPT_PRECISION */
} config;

/* bf16 against one rank: both compute with the same bf16 operands, but a
 * rank's partial sums are added in another order (as in fp32, 1e-5); a
 * master weight differing in its last fp32 bits can round to the next
 * bf16 value, a 2^-8 relative change of one operand, which the next steps
 * carry on.  Max |difference| / max |parameter| after 4 steps stays well
 * below 2^-8. */
#define BF16_TOL 0x1p-10
/* With several ranks bf16 also travels on the wire (pcnn.h,
 * PCNN_OPT_PRECISION): gradients are rounded to bf16 before the owners sum
 * them and every rank computes with the masters rounded to bf16 (2^-9
 * relative each), where one rank keeps fp32 parameters; momentum and Adam
 * carry each step's difference on (Adam turns a gradient's sign, however
 * small, into a step of the learning rate).  Measured after 4 steps: up to
 * 1.8e-2 of the largest parameter (3D, Adam), so 2^-5. */
#define BF16_WIRE_TOL 0x1p-5

/* Floats per sample: (2, 9, 9) images or (2, 5, 6, 4) volumes. */
static int sample_floats(const config *c) { return c->volume ? 2 * 5 * 6 * 4 : 2 * 81; }

/* Network options shared by both networks, then finalize. */
static pcnn_net *configure(pcnn_net *net, const config *c, pcnn_comm *comm, int max_batch);

/* conv3d(2->4, k3, p1, bias) leaky maxpool3d(k2) conv3d(4->3, k3, s2, p1, no bias) leaky
 * avgpool3d(k3, s1, p1) [dropout] dense(->5) leaky dense(->4), MSE on 4 targets. */
static pcnn_net *build_volume(const config *c, pcnn_comm *comm, int max_batch)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input3d(net, 2, 5, 6, 4, &l));
    CK(pcnn_conv3d(net, l, 4, 3, 1, 1, 1, &l));
    CK(pcnn_leaky_relu(net, l, 0.1f, &l));
    CK(pcnn_maxpool3d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv3d(net, l, 3, 3, 2, 1, 0, &l));
    CK(pcnn_leaky_relu(net, l, 0.1f, &l));
    CK(pcnn_avgpool3d(net, l, 3, 1, 1, &l));
    if (c->dropout) CK(pcnn_dropout(net, l, 0.25f, &l));
    CK(pcnn_dense(net, l, 5, 1, &l));
    if (c->fc) CK(pcnn_layer_set_exchange(l, c->fc == 1 ? PCNN_EXCHANGE_FC_GRADIENT : c->exchange));
    CK(pcnn_leaky_relu(net, l, 0.1f, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    return configure(net, c, comm, max_batch);
}

/* conv(2->5,k3,p1) relu maxpool conv(5->3,k3) [dropout] dense(->7) relu dense(->4): parameter
 * counts are odd, so slices are uneven for P = 2, 3, 4. */
static pcnn_net *build(const config *c, pcnn_comm *comm, int max_batch)
{
    if (c->volume) return build_volume(c, comm, max_batch);
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 9, 9, &l));
    CK(pcnn_conv2d(net, l, 5, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 0, 0, &l));
    if (c->dropout) CK(pcnn_dropout(net, l, 0.25f, &l));
    CK(pcnn_dense(net, l, 7, 1, &l));
    if (c->fc) CK(pcnn_layer_set_exchange(l, c->fc == 1 ? PCNN_EXCHANGE_FC_GRADIENT : c->exchange));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    if (c->fc) CK(pcnn_layer_set_exchange(l, c->fc == 1 ? PCNN_EXCHANGE_FC_GRADIENT : c->exchange));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    return configure(net, c, comm, max_batch);
}

static pcnn_net *configure(pcnn_net *net, const config *c, pcnn_comm *comm, int max_batch)
{
    CK(pcnn_net_set_optimizer(net, c->optimizer));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, c->optimizer == PCNN_OPTIMIZER_ADAM ? 0.01 : 0.1));
    CK(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, c->weight_decay));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 42));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, c->bucket_bytes));
    CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, c->precision));
    if (comm) {
        CK(pcnn_net_set_comm(net, comm));
        CK(pcnn_net_set_exchange(net, c->exchange));
        CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, c->engine));
        CK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, !c->no_overlap));
        CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    }
    CK(pcnn_net_finalize(net, max_batch));
    return net;
}

static void make_batch(int step, int n, float *x, int32_t *y)
{
    unsigned s = 1234u + 977u * (unsigned)step;
    for (int i = 0; i < n * 2 * 81; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < n; i++) y[i] = (int32_t)((unsigned)(i * 7 + step) % 4u);
}

/* Volumes and 4 regression targets per sample. */
static void make_volumes(int step, int n, int sample, float *x, float *t)
{
    unsigned s = 4321u + 577u * (unsigned)step;
    for (int i = 0; i < n * sample; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < n * 4; i++) t[i] = (float)((i * 5 + step) % 7) / 7.0f - 0.4f;
}

/* max |a - b| / max |b|: relative to the scale of the parameters. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    return worst / scale;
}

static void run_case(const config *c, pcnn_comm *comm, const char *name)
{
    const int steps = 4;
    pcnn_net *par = build(c, comm, c->batch);
    pcnn_net *seq = build(c, NULL, c->batch);
    const int S = sample_floats(c);
    float *x = malloc(sizeof(float) * (size_t)c->batch * S);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)c->batch);
    float *t = malloc(sizeof(float) * (size_t)c->batch * 4);
    double worst_loss = 0.0;
    for (int step = 0; step < steps; step++) {
        /* Uneven shares: the first batch % ranks ranks take one more. */
        int base = c->batch / ranks, extra = c->batch % ranks;
        int mine = base + (rank < extra), first = rank * base + (rank < extra ? rank : extra);
        if (c->volume) make_volumes(step, c->batch, S, x, t);
        else make_batch(step, c->batch, x, y);
        const int32_t *labels = c->volume ? NULL : y;
        const float *targets = c->volume ? t : NULL;
        float lp, ls;
        CK(pcnn_net_train_step(par, mine, mine ? x + (size_t)first * S : NULL,
                               labels ? labels + first : NULL,
                               targets ? targets + (size_t)first * 4 : NULL, &lp));
        CK(pcnn_net_train_step(seq, c->batch, x, labels, targets, &ls));
        double d = fabs((double)lp - ls) / fabs((double)ls);
        if (d > worst_loss) worst_loss = d;
    }
    size_t n;
    CK(pcnn_net_num_params(seq, &n));
    float *wp = malloc(n * sizeof(float)), *ws = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(par, wp, n));
    CK(pcnn_net_get_params(seq, ws, n));
    double worst = max_rel_diff(wp, ws, n);
    /* All ranks must hold bitwise identical parameters. */
    float *r0 = malloc(n * sizeof(float));
    memcpy(r0, wp, n * sizeof(float));
    MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int identical = memcmp(r0, wp, n * sizeof(float)) == 0;
    char what[256];
    snprintf(what, sizeof what, "%-46s params rel diff %.2e, loss rel diff %.2e, ranks identical %d",
             name, worst, worst_loss, identical);
    /* The FC gradient's dW comes from the gathered fp32 blocks, in fp32:
     * against one rank's bf16 dW it differs by bf16's product error. */
    const double tol = !c->precision ? 1e-5 : ranks > 1 ? BF16_WIRE_TOL : c->fc ? 0x1p-7 : BF16_TOL;
    expect(worst < tol && worst_loss < tol && identical, what);
    free(r0);
    free(wp);
    free(ws);
    free(x);
    free(y);
    free(t);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

/* Train the same case with overlap on and off: bitwise equal parameters. */
static void check_overlap_bitwise(pcnn_comm *comm, pcnn_exchange exchange, int engine, int fc)
{
    float *w[2] = {NULL, NULL};
    size_t n = 0;
    for (int o = 0; o < 2; o++) {
        config c = {.exchange = exchange, .optimizer = PCNN_OPTIMIZER_ADAM,
                    .batch = 3 * ranks + 1, .bucket_bytes = 200, .dropout = 1,
                    .weight_decay = 1e-4, .engine = engine, .no_overlap = o, .fc = fc};
        pcnn_net *net = build(&c, comm, c.batch);
        float x[64 * 162];
        int32_t y[64];
        int base = c.batch / ranks, extra = c.batch % ranks;
        int mine = base + (rank < extra), first = rank * base + (rank < extra ? rank : extra);
        for (int step = 0; step < 5; step++) {
            make_batch(step, c.batch, x, y);
            CK(pcnn_net_train_step(net, mine, x + first * 162, y + first, NULL, NULL));
        }
        double active;
        CK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &active));
        if (ranks > 1 && (int)active != engine) failures++;
        CK(pcnn_net_num_params(net, &n));
        w[o] = malloc(n * sizeof(float));
        CK(pcnn_net_get_params(net, w[o], n));
        pcnn_net_destroy(&net);
    }
    char what[160];
    snprintf(what, sizeof what, "%s%s, %s engine: overlapped == not overlapped, bitwise",
             exchange ? "alltoall+allgather" : "allreduce", fc ? " + FC gradient" : "",
             engine == 1 ? "thread" : "nonblocking");
    expect(memcmp(w[0], w[1], n * sizeof(float)) == 0, what);
    free(w[0]);
    free(w[1]);
}

/* Bytes per step against seed 001 section 4.2, computed independently. */
static void check_bytes(pcnn_comm *comm)
{
    for (int e = 0; e < 2; e++) {
        config c = {.exchange = e ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER : PCNN_EXCHANGE_ALLREDUCE,
                    .optimizer = PCNN_OPTIMIZER_SGD, .batch = 8, .fc = 2};
        pcnn_net *net = build(&c, comm, 8);
        /* Layers with parameters, one bucket each (bucket_bytes 0). */
        const long layer_params[] = {5 * 2 * 9 + 5, 3 * 5 * 9, 7 * 3 * 2 * 2 + 7, 4 * 7 + 4};
        uint64_t expected = 0;
        for (int k = 0; k < 4; k++) {
            long m = layer_params[k];
            if (ranks == 1) continue;
            if (!e) {
                expected += 2 * (uint64_t)m * 4 * (ranks - 1) / ranks;
            } else {
                long mine = m / ranks + (rank < m % ranks);
                expected += (uint64_t)(m - mine) * 4 + (uint64_t)mine * 4 * (ranks - 1);
            }
        }
        uint64_t got;
        CK(pcnn_net_exchange_bytes(net, &got));
        char what[160];
        snprintf(what, sizeof what, "bytes per step, %s: %llu (formula %llu)",
                 e ? "alltoall+allgather" : "allreduce", (unsigned long long)got,
                 (unsigned long long)expected);
        expect(got == expected, what);
        pcnn_net_destroy(&net);
    }
    /* FC gradient on both dense layers: eqs. 4.2-4.4 with b = 8 / P samples. */
    config c = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = PCNN_OPTIMIZER_SGD,
                .batch = 8, .fc = 1};
    pcnn_net *net = build(&c, comm, 8);
    const long conv_params[] = {5 * 2 * 9 + 5, 3 * 5 * 9};
    const long fc_shapes[2][2] = {{7, 12}, {4, 7}}; /* K, F */
    uint64_t expected = 0;
    if (ranks > 1) {
        long b = (8 + ranks - 1) / ranks;
        for (int k = 0; k < 2; k++) {
            long m = conv_params[k], mine = m / ranks + (rank < m % ranks);
            expected += (uint64_t)(m - mine) * 4 + (uint64_t)mine * 4 * (ranks - 1);
        }
        for (int k = 0; k < 2; k++) {
            long K = fc_shapes[k][0], F = fc_shapes[k][1], fr = F / ranks + (rank < F % ranks);
            expected += (uint64_t)((F - fr) * b + K * b * (ranks - 1) + K * fr * (ranks - 1)) * 4;
        }
    }
    uint64_t got;
    CK(pcnn_net_exchange_bytes(net, &got));
    char what[160];
    snprintf(what, sizeof what, "bytes per step, FC gradient (eqs. 4.2-4.4): %llu (formula %llu)",
             (unsigned long long)got, (unsigned long long)expected);
    expect(got == expected, what);
    pcnn_net_destroy(&net);
}

/* Ranks that build different networks fail together at finalize. */
static void check_mismatch(pcnn_comm *comm)
{
    if (ranks < 2) return;
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, 8, 8, &l));
    CK(pcnn_conv2d(net, l, rank == 1 ? 4 : 3, 3, 1, 1, 1, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_comm(net, comm));
    pcnn_status st = pcnn_net_finalize(net, 4);
    int ok = st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "layer 1") != NULL;
    expect(ok, "different networks on different ranks: PCNN_ERR_MISMATCH naming layer 1 on all");
    pcnn_net_destroy(&net);

    /* Precisions that differ: the network's, then one layer's. */
    for (int layer = 0; layer <= 1; layer++) {
        CK(pcnn_net_create(&net));
        CK(pcnn_net_input(net, 1, 8, 8, &l));
        CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
        if (layer && rank == 1) CK(pcnn_layer_set_precision(l, PCNN_PRECISION_BF16));
        CK(pcnn_dense(net, l, 3, 1, &l));
        CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
        if (!layer) CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, rank == 1));
        CK(pcnn_net_set_comm(net, comm));
        st = pcnn_net_finalize(net, 4);
        ok = st == PCNN_ERR_MISMATCH &&
             strstr(pcnn_last_error(), layer ? "precision (pcnn_layer_set_precision"
                                             : "PCNN_OPT_PRECISION") != NULL;
        expect(ok, layer ? "a layer bf16 on rank 1 only: PCNN_ERR_MISMATCH naming its precision"
                         : "bf16 on rank 1 only: PCNN_ERR_MISMATCH naming PCNN_OPT_PRECISION");
        if (!ok && rank == 0) printf("  %s: %s\n", pcnn_status_str(st), pcnn_last_error());
        pcnn_net_destroy(&net);
    }

    /* One rank's bad input fails every rank, nobody hangs. */
    config c = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = PCNN_OPTIMIZER_SGD,
                .batch = 4};
    net = build(&c, comm, 4 * ranks);
    float x[4 * 162] = {0};
    int32_t y[4] = {0, 1, 2, rank == 1 ? 9 : 3};
    st = pcnn_net_train_step(net, 4, x, y, NULL, NULL);
    ok = rank == 1 ? st == PCNN_ERR_INVALID_ARGUMENT : st == PCNN_ERR_REMOTE;
    expect(ok, "an invalid label on rank 1: INVALID_ARGUMENT there, REMOTE elsewhere");
    x[5] = NAN;
    y[3] = 3;
    st = pcnn_net_train_step(net, 4, x, y, NULL, NULL);
    expect(st == PCNN_ERR_NUMERIC, "NaN input on every rank: NUMERIC everywhere");
    x[5] = rank == 1 ? INFINITY : 0.0f;
    st = pcnn_net_train_step(net, 4, x, y, NULL, NULL);
    ok = rank == 1 ? st == PCNN_ERR_NUMERIC : st == PCNN_ERR_REMOTE;
    expect(ok, "Inf input on rank 1 only: NUMERIC there, REMOTE elsewhere");
    pcnn_net_destroy(&net);
}

/* compute_gradients on a parallel network is local: after training steps
 * have left exchanges in flight, it must return this rank's own gradient
 * (equal to a private network's with the same parameters) and change no
 * parameter.  It once posted the exchange and raced with it. */
static void check_local_gradients(pcnn_comm *comm, pcnn_exchange exchange, int engine)
{
    config c = {.exchange = exchange, .optimizer = PCNN_OPTIMIZER_ADAM, .batch = 3 * ranks,
                .engine = engine};
    pcnn_net *par = build(&c, comm, c.batch), *seq = build(&c, NULL, c.batch);
    float *x = malloc(sizeof(float) * (size_t)c.batch * 162);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)c.batch);
    for (int step = 0; step < 3; step++) {
        make_batch(step, c.batch, x, y);
        CK(pcnn_net_train_step(par, 3, x + (size_t)rank * 3 * 162, y + rank * 3, NULL, NULL));
    }
    size_t n;
    CK(pcnn_net_num_params(par, &n));
    float *before = malloc(n * sizeof(float)), *after = malloc(n * sizeof(float));
    float *gp = malloc(n * sizeof(float)), *gs = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(par, before, n));
    CK(pcnn_net_set_params(seq, before, n));
    make_batch(9, c.batch, x, y);
    float lp, ls;
    CK(pcnn_net_compute_gradients(par, 3, x + (size_t)rank * 3 * 162, y + rank * 3, NULL, &lp));
    CK(pcnn_net_compute_gradients(seq, 3, x + (size_t)rank * 3 * 162, y + rank * 3, NULL, &ls));
    CK(pcnn_net_get_grads(par, gp, n));
    CK(pcnn_net_get_grads(seq, gs, n));
    CK(pcnn_net_get_params(par, after, n));
    char what[160];
    snprintf(what, sizeof what, "compute_gradients is local (%s, %s engine)",
             exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "alltoall+allgather",
             engine == 1 ? "thread" : "nonblocking");
    expect(lp == ls && !memcmp(gp, gs, n * sizeof(float)) &&
               !memcmp(before, after, n * sizeof(float)), what);
    free(before), free(after), free(gp), free(gs), free(x), free(y);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

/* A sub-communicator: the even ranks train, the odd ones do not take part. */
static void check_subcomm(void)
{
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    if (rank % 2 == 0) {
        pcnn_comm *comm;
        CK(pcnn_comm_create(half, &comm));
        int size;
        CK(pcnn_comm_info(comm, NULL, &size, NULL));
        config c = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                    .optimizer = PCNN_OPTIMIZER_MOMENTUM, .batch = 5};
        pcnn_net *net = build(&c, comm, 5);
        float x[5 * 162];
        int32_t y[5];
        make_batch(0, 5, x, y);
        int mine = 5 / size + ((rank / 2) < 5 % size);
        int first = (rank / 2) * (5 / size) + ((rank / 2) < 5 % size ? rank / 2 : 5 % size);
        CK(pcnn_net_train_step(net, mine, x + first * 162, y + first, NULL, NULL));
        pcnn_net_destroy(&net);
        CK(pcnn_comm_destroy(&comm));
    }
    MPI_Comm_free(&half);
    expect(1, "training on a sub-communicator (even ranks) while the others idle");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    /* Through the Fortran handle, as Fortran hosts and mpi4py pass it. */
    CK(pcnn_comm_create_fortran(MPI_Comm_c2f(MPI_COMM_WORLD), &comm));
    if (rank == 0) printf("data-parallel equivalence on %d rank(s)\n", ranks);

    const pcnn_exchange exchanges[] = {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLTOALL_ALLGATHER};
    const pcnn_optimizer optimizers[] = {PCNN_OPTIMIZER_SGD, PCNN_OPTIMIZER_MOMENTUM,
                                         PCNN_OPTIMIZER_ADAM};
    const char *oname[] = {"sgd", "momentum", "adam"};
    for (int e = 0; e < 2; e++)
        for (int o = 0; o < 3; o++)
            for (int b = 0; b < 2; b++) {
                config c = {.exchange = exchanges[e], .optimizer = optimizers[o],
                            .batch = b ? 4 * ranks + 3 : 4 * ranks,
                            .bucket_bytes = b ? 0 : 1 << 20, .dropout = o == 1,
                            .weight_decay = o == 2 ? 1e-3 : 0};
                char name[128];
                snprintf(name, sizeof name, "%s %s batch %d%s%s",
                         e ? "alltoall+allgather" : "allreduce", oname[o], c.batch,
                         c.bucket_bytes == 0 ? " per-layer" : " fused", c.dropout ? " dropout" : "");
                run_case(&c, comm, name);
            }
    /* The FC communication-efficient gradient (seed 001 section 4.1.1). */
    for (int o = 0; o < 3; o++)
        for (int b = 0; b < 2; b++) {
            config c = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = optimizers[o],
                        .batch = b ? 2 * ranks + 1 : 2 * ranks, .dropout = o == 0,
                        .weight_decay = o == 1 ? 1e-3 : 0, .fc = 1, .no_overlap = b};
            char name[128];
            snprintf(name, sizeof name, "FC gradient %s batch %d%s", oname[o], c.batch,
                     b ? " no overlap" : "");
            run_case(&c, comm, name);
        }
    config fc_idle = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                      .optimizer = PCNN_OPTIMIZER_MOMENTUM, .batch = 1, .fc = 1, .engine = 2};
    run_case(&fc_idle, comm, "FC gradient momentum batch 1 (idle ranks), nonblocking");
    /* A batch smaller than the number of ranks: some ranks get no sample. */
    config tiny = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = PCNN_OPTIMIZER_ADAM,
                   .batch = 1};
    run_case(&tiny, comm, "alltoall+allgather adam batch 1 (idle ranks)");
    /* Volumes: conv3d, max and average 3D pooling, dense, MSE. */
    for (int e = 0; e < 2; e++)
        for (int o = 0; o < 3; o += 2) {
            config c = {.exchange = exchanges[e], .optimizer = optimizers[o],
                        .batch = 2 * ranks + e, .bucket_bytes = e ? 0 : 1 << 20,
                        .dropout = o == 2, .weight_decay = o == 2 ? 1e-3 : 0, .volume = 1};
            char name[128];
            snprintf(name, sizeof name, "3D %s %s batch %d%s",
                     e ? "alltoall+allgather" : "allreduce", oname[o], c.batch,
                     c.dropout ? " dropout" : "");
            run_case(&c, comm, name);
        }
    config fc3 = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = PCNN_OPTIMIZER_MOMENTUM,
                  .batch = 2 * ranks + 1, .fc = 1, .volume = 1};
    run_case(&fc3, comm, "3D FC gradient momentum");

    for (int e = 0; e < 2; e++)
        for (int engine = 1; engine <= 2; engine++)
            check_overlap_bitwise(comm, exchanges[e], engine, e);
    for (int e = 0; e < 2; e++)
        for (int engine = 1; engine <= 2; engine++) check_local_gradients(comm, exchanges[e], engine);
    /* The nonblocking engine against sequential training. */
    config nb = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER, .optimizer = PCNN_OPTIMIZER_MOMENTUM,
                 .batch = 4 * ranks + 1, .dropout = 1, .engine = 2};
    run_case(&nb, comm, "alltoall+allgather momentum, nonblocking engine");
    /* bf16 products: both exchanges, an FC gradient (its dW in fp32 from
     * the gathered blocks), volumes. */
    for (int e = 0; e < 2; e++) {
        config c = {.exchange = exchanges[e], .optimizer = e ? PCNN_OPTIMIZER_ADAM
                                                             : PCNN_OPTIMIZER_SGD,
                    .batch = 4 * ranks + e, .bucket_bytes = 1 << 20, .precision = 1};
        char name[128];
        snprintf(name, sizeof name, "bf16 %s %s batch %d", e ? "alltoall+allgather" : "allreduce",
                 e ? "adam" : "sgd", c.batch);
        run_case(&c, comm, name);
        c.volume = 1;
        c.batch = 2 * ranks + e;
        snprintf(name, sizeof name, "bf16 3D %s batch %d", e ? "alltoall+allgather" : "allreduce",
                 c.batch);
        run_case(&c, comm, name);
    }
    config fcb = {.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                  .optimizer = PCNN_OPTIMIZER_MOMENTUM, .batch = 2 * ranks + 1, .fc = 1,
                  .precision = 1};
    run_case(&fcb, comm, "bf16 FC gradient momentum");
    check_bytes(comm);
    check_mismatch(comm);
    CK(pcnn_comm_destroy(&comm));
    check_subcomm();
    if (rank == 0) printf("%d failure(s)\n", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
