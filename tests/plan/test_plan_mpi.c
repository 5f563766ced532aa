/* The automatic parallel strategy under mpiexec (2 or 4 ranks):
 *   1. A network planned at batch 1 (convolutions split spatially, a
 *      shuffle, a sample-parallel head) trains 3 steps to the parameters
 *      of one rank training on the whole batch (1e-5).
 *   2. Every rank applies the same plan and reports the same text.
 *   3. One rank with a different model: MISMATCH on every rank, naming it.
 *   4. The options: no spatial dimension allowed, height only, one
 *      distribution for all, a memory cap nothing fits, an option that
 *      differs on one rank.
 *   5. ResNet-20 at batch 128 plans within 10 s (the time is printed; the
 *      target is under 1 s), sample-parallel throughout.
 *   6. A per-rank memory cap that only split candidates meet: one sample
 *      trains split even where the model prices halos above idle ranks. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "core/hash.h"
#include "synthetic_model.h"

static pcnn_comm *world;

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* input 4x32x32 -> conv 8 -> relu -> conv 8 -> relu -> maxpool `pool` ->
 * flatten -> dense `out` */
static pcnn_net *conv_net(pcnn_comm *comm, int pool, int out)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
    CK(pcnn_net_set_exchange(net, PCNN_EXCHANGE_ALLREDUCE));
    CK(pcnn_net_input(net, 4, 32, 32, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, pool, pool, 0, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, out, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    return net;
}

static pcnn_net *small_net(pcnn_comm *comm) { return conv_net(comm, 2, 10); }

/* Pooled by 4 into 2 outputs: the convolutions hold most of the memory. */
static pcnn_net *pooled_net(pcnn_comm *comm) { return conv_net(comm, 4, 2); }

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

static void test_mixed_training(pcnn_perfmodel *m)
{
    pcnn_net *net = small_net(world), *ref = small_net(NULL);
    synthetic_model(m, net, 1e-9);
    const int batch = 1;
    double predicted = 0;
    CK(pcnn_net_plan_distribution(net, m, batch, &predicted));
    const layer_list *ll = net_layer_list(net);
    int parts[16][4];
    for (int i = 0; i < ll->count; i++) CK(pcnn_layer_get_distribution(ll->items[i], parts[i]));
    const int L = ll->count;
    expect(parts[1][0] == 1 && parts[3][0] == 1 && parts[L - 1][0] == ranks && predicted > 0,
           "batch 1: the convolutions split spatially, the dense head sample-parallel");
    /* 2. The same plan everywhere: each part's min and max over the ranks. */
    int lo[64], hi[64];
    memcpy(lo, parts, sizeof(int) * 4 * L);
    memcpy(hi, parts, sizeof(int) * 4 * L);
    MPI_Allreduce(MPI_IN_PLACE, lo, 4 * L, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, hi, 4 * L, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char text[16384];
    size_t needed = 0;
    CK(pcnn_net_plan_report(net, text, sizeof text, &needed));
    unsigned long long h = hash_fnv1a(HASH_FNV1A_BASIS, text, strlen(text)), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    expect(!memcmp(lo, hi, sizeof(int) * 4 * L) && h == h0 && needed < sizeof text,
           "every rank applies the same plan and reports the same text");
    if (rank == 0) printf("%s", text);

    CK(pcnn_net_finalize(net, batch));
    CK(pcnn_net_finalize(ref, batch));
    int group, groups;
    CK(pcnn_net_group_info(net, &group, &groups, NULL, NULL));
    const size_t sample = 4 * 32 * 32;
    float x[4 * 32 * 32], t[10];
    for (int step = 0; step < 3; step++) {
        uint64_t s = 99 + (uint64_t)step;
        for (size_t i = 0; i < sample; i++) x[i] = frand(&s);
        for (int i = 0; i < 10; i++) t[i] = frand(&s);
        float l_net, l_ref;
        CK(pcnn_net_train_step(net, batch, x, NULL, t, &l_net)); /* one group: every rank */
        CK(pcnn_net_train_step(ref, batch, x, NULL, t, &l_ref));
    }
    size_t np;
    CK(pcnn_net_num_params(ref, &np));
    float *a = malloc(np * sizeof *a), *b = malloc(np * sizeof *b);
    CK(pcnn_net_get_params(net, a, np));
    CK(pcnn_net_get_params(ref, b, np));
    const double d = rel_diff(a, b, np);
    if (rank == 0) printf("planned vs one rank after 3 steps: parameters differ by %.2e\n", d);
    expect(groups == 1 && d <= 1e-5, "the planned network trains as one rank (1e-5)");
    free(a);
    free(b);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&ref);
}

static void test_mismatch(pcnn_perfmodel *m)
{
    pcnn_net *net = small_net(world);
    synthetic_model(m, net, 1e-9);
    if (rank == ranks - 1) CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 1e-3));
    const pcnn_status st = pcnn_net_plan_distribution(net, m, 4, NULL);
    char want[64];
    snprintf(want, sizeof want, "performance model on rank %d", ranks - 1);
    expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), want),
           "a different model on one rank: MISMATCH on every rank, naming the rank");
    if (rank == ranks - 1) CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, -1));
    /* One rank's own bad argument fails every rank instead of leaving the
     * others waiting in the plan's agreement. */
    const pcnn_status bad = pcnn_net_plan_distribution(net, m, rank == ranks - 1 ? 0 : 4, NULL);
    expect(rank == ranks - 1 ? bad == PCNN_ERR_INVALID_ARGUMENT
                             : bad != PCNN_OK && strstr(pcnn_last_error(), "other rank(s) failed"),
           "a global batch of 0 on one rank: every rank fails, none waits");
    /* The network is still usable: plan with equal models. */
    CK(pcnn_net_plan_distribution(net, m, 4, NULL));
    CK(pcnn_net_finalize(net, 4));
    pcnn_net_destroy(&net);
}

/* Plan small_net at batch 1 with one option set; the layers' parts. */
static pcnn_status plan_with(pcnn_perfmodel *m, pcnn_option option, double value,
                             int (*parts)[4])
{
    pcnn_net *net = small_net(world);
    synthetic_model(m, net, 1e-9);
    CK(pcnn_net_set_option(net, option, value));
    const pcnn_status st = pcnn_net_plan_distribution(net, m, 1, NULL);
    const layer_list *ll = net_layer_list(net);
    for (int i = 0; st == PCNN_OK && i < ll->count; i++)
        CK(pcnn_layer_get_distribution(ll->items[i], parts[i]));
    pcnn_net_destroy(&net);
    return st;
}

/* Seed 002's case for spatial parallelism: a sample too large for one
 * rank.  Halos priced far above idle ranks (compute nearly free, 1 ms per
 * message) plan one sample sample-parallel; a cap of 0.07 MiB per layer,
 * which the second convolution on a whole sample (about 0.1 MiB) exceeds
 * and on half of one meets, splits the convolutions all the same, and the
 * network trains. */
static void test_memory_cap(pcnn_perfmodel *m)
{
    for (int capped = 0; capped <= 1; capped++) {
        pcnn_net *net = pooled_net(world);
        synthetic_model(m, net, 1e-13);
        CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 1e-3));
        if (capped) CK(pcnn_net_set_option(net, PCNN_OPT_MEMORY_LIMIT_MIB, 0.07));
        CK(pcnn_net_plan_distribution(net, m, 1, NULL));
        int parts[4];
        CK(pcnn_layer_get_distribution(net_layer_list(net)->items[3], parts));
        const bool split = parts[1] * parts[2] * parts[3] > 1;
        float x[4 * 32 * 32], t[2] = {0.5f, -0.5f}, loss = NAN;
        uint64_t s = 3;
        for (int i = 0; i < 4 * 32 * 32; i++) x[i] = frand(&s);
        CK(pcnn_net_finalize(net, 1));
        CK(pcnn_net_train_step(net, 1, x, NULL, t, &loss));
        char what[200];
        snprintf(what, sizeof what, "one sample, halos dear, %s: the second convolution "
                 "{%d, %d, %d, %d}, one step trains (loss %.3g)", capped ? "a 0.07 MiB cap" :
                 "no memory cap", parts[0], parts[1], parts[2], parts[3], loss);
        expect((capped ? split : !split) && isfinite(loss), what);
        CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, -1));
        pcnn_net_destroy(&net);
    }
}

static void test_options(pcnn_perfmodel *m)
{
    int p[16][4];
    const int last = 7;
    CK(plan_with(m, PCNN_OPT_PLAN_SPATIAL_DIMS, 0, p));
    int all_sample = 1;
    for (int i = 0; i <= last; i++) all_sample &= p[i][0] == ranks;
    expect(all_sample, "spatial dimensions mask 0: every layer {P, 1, 1, 1} even at batch 1");
    CK(plan_with(m, PCNN_OPT_PLAN_SPATIAL_DIMS, 2, p));
    expect(p[1][2] == ranks && p[3][2] == ranks && p[1][3] == 1,
           "mask 2 (height): the convolutions split along H only");
    CK(plan_with(m, PCNN_OPT_PLAN_MAX_SPATIAL, 1, p));
    expect(p[1][0] == ranks, "largest spatial group 1: sample parallelism");
    CK(plan_with(m, PCNN_OPT_PLAN_MIXED, 0, p));
    int uniform = 1;
    for (int i = 1; i <= 5; i++) uniform &= !memcmp(p[i], p[0], sizeof p[0]);
    expect(uniform && p[0][0] == 1 && p[last][0] == ranks,
           "one distribution: input to pool alike, the head sample-parallel");
    const pcnn_status st = plan_with(m, PCNN_OPT_MEMORY_LIMIT_MIB, 0.001, p);
    expect(st == PCNN_ERR_SHAPE && strstr(pcnn_last_error(), "no distribution fits"),
           "a memory cap nothing fits: SHAPE on every rank");
    const pcnn_status odd = plan_with(m, PCNN_OPT_PLAN_SPATIAL_DIMS, rank == 0 ? 7 : 3, p);
    expect(odd == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "planning options"),
           "planning options differing on a rank: MISMATCH");
}

static pcnn_layer *conv_bn(pcnn_net *net, pcnn_layer *l, int c, int stride, int relu)
{
    CK(pcnn_conv2d(net, l, c, 3, stride, 1, 0, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    if (relu) CK(pcnn_relu(net, l, &l));
    return l;
}

static void test_resnet20_time(pcnn_perfmodel *m)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, world));
    CK(pcnn_net_input(net, 3, 32, 32, &l));
    l = conv_bn(net, l, 16, 1, 1);
    const int widths[3] = {16, 32, 64};
    for (int stage = 0; stage < 3; stage++)
        for (int block = 0; block < 3; block++) {
            const int stride = stage > 0 && block == 0 ? 2 : 1;
            pcnn_layer *skip = l;
            if (stride == 2) {
                CK(pcnn_conv2d(net, l, widths[stage], 1, 2, 0, 0, &skip));
                CK(pcnn_batchnorm(net, skip, 1e-5f, 0.1f, &skip));
            }
            pcnn_layer *y = conv_bn(net, l, widths[stage], stride, 1);
            y = conv_bn(net, y, widths[stage], 1, 0);
            CK(pcnn_add(net, y, skip, &y));
            CK(pcnn_relu(net, y, &l));
        }
    CK(pcnn_global_avgpool(net, l, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    synthetic_model(m, net, 1e-9);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    double predicted;
    CK(pcnn_net_plan_distribution(net, m, 128, &predicted));
    const double dt = MPI_Wtime() - t0;
    if (rank == 0)
        printf("ResNet-20 (%d layers) on %d ranks, batch 128: planned in %.3f s, predicted "
               "step %.3f ms\n", net_layer_list(net)->count, ranks, dt, 1e3 * predicted);
    expect(dt < 10.0, "ResNet-20 plans within 10 s");
    const layer_list *ll = net_layer_list(net);
    int sample = 1, parts[4];
    for (int i = 0; i < ll->count; i++) {
        CK(pcnn_layer_get_distribution(ll->items[i], parts));
        sample &= parts[0] == ranks;
    }
    expect(sample, "ResNet-20 at batch 128: sample-parallel throughout");
    CK(pcnn_net_finalize(net, 128));
    pcnn_net_destroy(&net);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &world));
    pcnn_perfmodel *m = NULL;
    CK(pcnn_perfmodel_create(&m));
    test_mixed_training(m);
    test_mismatch(m);
    test_options(m);
    test_memory_cap(m);
    test_resnet20_time(m);
    pcnn_perfmodel_destroy(&m);
    pcnn_comm_destroy(&world);
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
