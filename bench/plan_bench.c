/* The automatic parallel strategy against measurement (issue 16, spec D.2
 * T5): for a network and R ranks, time a training step under every
 * uniform distribution the planner considers and under the planned one,
 * and print predicted vs measured with the pairwise ranking agreement.
 *
 *   E="env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"
 *   $E mpiexec.mpich -n 2 build/bench/plan_bench plane --batch 1 --size 256
 *   $E mpiexec.mpich -n 2 build/bench/plan_bench resnet20 --batch 64
 *   $E mpiexec.mpich -n 4 build/bench/plan_bench plane --batch 8 --size 256 --grow
 *   options: --batch B (global), --iters N (10), --size S (plane: S x S,
 *   256), --budget-comm S (2), --budget-compute S (5), --threads T (1),
 *   --model-file PATH (also save the model there), --verbose
 *   (print the plan's report), --grow (below).
 *
 * --grow: the adaptive batch scheduler's growing batch, b = 1, 2, 4, ...,
 * B, two ways (issue 16): "idle", today's rule (seed 001 section 5.2), a
 * sample-parallel network where min(R, b) ranks compute and the others
 * idle; and "replan", the network planned for b (what the scheduler's
 * re-plan proposes: spatial groups at small b).  One JSON line per b with
 * both measured and predicted steps, then a summary: seconds per sample
 * summed over the batches (an epoch at each b) and replan / idle.
 *
 * MODEL: lenet, resnet20, vgg11, cosmoflow (bench/models.c) or plane (18
 * channels at S x S, conv-BN-ReLU blocks with max pooling, a pooled dense
 * head: seed 002's mesh network scaled down).  The model is calibrated
 * once (links on all ranks; compute on rank 0 on a one-rank twin of the
 * network at the global batch) and shared (pcnn_perfmodel_share), so every
 * rank plans with the same model.  The networks of every uniform
 * distribution and the planned one are measured side by side, in three
 * rounds.  Output, from rank 0: one JSON line per
 * distribution {"parts", "predicted_ms", "measured_ms"}, then a summary
 * line: pairwise ranking agreement of the uniform candidates, the planned
 * step over the best measured uniform one and over pure sample
 * parallelism (targets: agreement >= 0.9, planned <= 1.05 x best and
 * <= 1.02 x sample). */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

#define MAX_UNIFORM 64

static int rank, ranks;
static int plane_size = 256;

static pcnn_layer *conv_bn_relu(pcnn_net *net, pcnn_layer *l, int c)
{
    CHECK(pcnn_conv2d(net, l, c, 3, 1, 1, 0, &l));
    CHECK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CHECK(pcnn_relu(net, l, &l));
    return l;
}

static pcnn_layer *plane(builder *b, pcnn_layer *l)
{
    l = conv_bn_relu(b->net, l, 16);
    CHECK(pcnn_maxpool2d(b->net, l, 2, 2, 0, &l));
    l = conv_bn_relu(b->net, l, 16);
    CHECK(pcnn_maxpool2d(b->net, l, 2, 2, 0, &l));
    l = conv_bn_relu(b->net, l, 32);
    CHECK(pcnn_global_avgpool(b->net, l, &l));
    CHECK(pcnn_flatten(b->net, l, &l));
    CHECK(pcnn_dense(b->net, l, 10, 1, &l));
    return l;
}

static model plane_model = {"plane", 18, 1, 256, 256, 1, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, plane};

static pcnn_layer *last_input; /* of the last network built */

static pcnn_net *build(const model *md, pcnn_comm *comm, int threads)
{
    builder b = {0};
    pcnn_layer *in;
    CHECK(pcnn_net_create(&b.net));
    if (comm) CHECK(pcnn_net_set_comm(b.net, comm));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_THREADS, threads));
    if (md->d > 1) CHECK(pcnn_net_input3d(b.net, md->c, md->d, md->h, md->w, &in));
    else CHECK(pcnn_net_input(b.net, md->c, md->h, md->w, &in));
    last_input = in;
    pcnn_layer *out = md->build(&b, in);
    CHECK(pcnn_net_set_loss(b.net, out, md->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    /* Regression on random targets diverges at the default rate (CosmoFlow:
     * NaN by step 10); timing needs finite values. */
    if (md->loss == PCNN_LOSS_MSE) CHECK(pcnn_net_set_option(b.net, PCNN_OPT_LEARNING_RATE, 1e-3));
    return b.net;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median step seconds (the slowest rank's) after 2 warm-ups; each rank
 * passes its sample group's share of the batch. */
static double measure(pcnn_net *net, const model *md, int batch, int iters)
{
    int group = rank, groups = ranks;
    CHECK(pcnn_net_group_info(net, &group, &groups, NULL, NULL));
    const int n = batch / groups + (group < batch % groups);
    const size_t in_size = (size_t)md->c * md->d * md->h * md->w;
    size_t out_size;
    CHECK(pcnn_net_output_size(net, &out_size));
    float *x = malloc(sizeof(float) * in_size * (size_t)(n ? n : 1));
    float *t = malloc(sizeof(float) * out_size * (size_t)(n ? n : 1));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    randn(x, in_size * (size_t)(n ? n : 1));
    randn(t, out_size * (size_t)(n ? n : 1));
    for (int j = 0; j < n; j++) labels[j] = (int32_t)(j % (int)out_size);
    const bool ce = md->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    double *wall = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < 2 + iters; i++) {
        const double t0 = MPI_Wtime();
        CHECK(pcnn_net_train_step(net, n, x, ce ? labels : NULL, ce ? NULL : t, NULL));
        if (i >= 2) wall[i - 2] = MPI_Wtime() - t0;
    }
    qsort(wall, (size_t)iters, sizeof(double), cmp);
    double median = iters % 2 ? wall[iters / 2] : 0.5 * (wall[iters / 2 - 1] + wall[iters / 2]);
    MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(wall);
    free(x);
    free(t);
    free(labels);
    return median;
}

/* --grow: idle ranks vs re-planned networks for b = 1, 2, 4, ..., max. */
static void grow(const model *md, pcnn_comm *comm, pcnn_perfmodel *m, int max, int iters,
                 int threads)
{
    double idle_sum = 0, replan_sum = 0;
    for (int b = 1;; b = b * 2 > max && b < max ? max : b * 2) {
        pcnn_net *idle = build(md, comm, threads);
        CHECK(pcnn_net_finalize(idle, max));
        const int active = b < ranks ? b : ranks;
        double idle_pred = NAN;
        if (pcnn_perfmodel_predict(m, idle, b, active, 1, &idle_pred) != PCNN_OK)
            idle_pred = NAN;
        const double idle_ms = 1e3 * measure(idle, md, b, iters);
        pcnn_net_destroy(&idle);
        pcnn_net *net = build(md, comm, threads);
        double predicted = NAN;
        CHECK(pcnn_net_plan_distribution(net, m, b, &predicted));
        int first[4];
        CHECK(pcnn_layer_get_distribution(last_input, first));
        CHECK(pcnn_net_finalize(net, b));
        const double replan_ms = 1e3 * measure(net, md, b, iters);
        pcnn_net_destroy(&net);
        idle_sum += idle_ms / b;
        replan_sum += replan_ms / b;
        if (rank == 0)
            printf("{\"model\": \"%s\", \"mode\": \"grow\", \"ranks\": %d, \"batch\": %d, "
                   "\"idle_active_ranks\": %d, \"idle_ms\": %.3f, \"idle_predicted_ms\": %.3f, "
                   "\"replan_first_layer\": [%d, %d, %d, %d], \"replan_ms\": %.3f, "
                   "\"replan_predicted_ms\": %.3f}\n",
                   md->name, ranks, b, active, idle_ms, 1e3 * idle_pred, first[0], first[1],
                   first[2], first[3], replan_ms, 1e3 * predicted);
        if (b >= max) break;
    }
    if (rank == 0)
        printf("{\"model\": \"%s\", \"mode\": \"grow\", \"summary\": true, "
               "\"idle_ms_per_sample_summed\": %.3f, \"replan_ms_per_sample_summed\": %.3f, "
               "\"replan_over_idle\": %.3f}\n",
               md->name, idle_sum, replan_sum, replan_sum / idle_sum);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        if (rank == 0)
            printf("usage: mpiexec.mpich -n R plan_bench lenet|resnet20|vgg11|cosmoflow|plane\n"
                   "  [--batch B] [--iters N] [--size S] [--budget-comm S]\n"
                   "  [--budget-compute S] [--threads T] [--model-file PATH] [--verbose] [--grow]\n");
        MPI_Finalize();
        return argc < 2;
    }
    const model *md = !strcmp(argv[1], "plane") ? &plane_model : model_find(argv[1]);
    if (!md) {
        if (rank == 0) fprintf(stderr, "plan_bench: unknown model %s\n", argv[1]);
        MPI_Finalize();
        return 1;
    }
    int batch = md->default_batch, iters = 10, threads = 1, verbose = 0, grow_mode = 0;
    double budget_comm = 2, budget_compute = 5;
    char path[512] = "";
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--verbose")) { verbose = 1; continue; }
        if (!strcmp(argv[i], "--grow")) { grow_mode = 1; continue; }
        if (!strcmp(argv[i], "--batch")) batch = atoi(v);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(v);
        else if (!strcmp(argv[i], "--size")) plane_size = atoi(v);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(v);
        else if (!strcmp(argv[i], "--budget-comm")) budget_comm = atof(v);
        else if (!strcmp(argv[i], "--budget-compute")) budget_compute = atof(v);
        else if (!strcmp(argv[i], "--model-file")) snprintf(path, sizeof path, "%s", v);
        i++;
    }
    plane_model.h = plane_model.w = plane_size;
    if (iters < 1) iters = 1;
    pcnn_comm *comm = NULL;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));

    /* The model: links everywhere, compute on rank 0's one-rank twin. */
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    const double c0 = MPI_Wtime();
    if (ranks > 1) CHECK(pcnn_perfmodel_calibrate_comm(m, comm, budget_comm));
    if (rank == 0) {
        pcnn_net *twin = build(md, NULL, threads);
        CHECK(pcnn_net_finalize(twin, batch));
        const size_t in_size = (size_t)md->c * md->d * md->h * md->w;
        size_t out_size;
        CHECK(pcnn_net_output_size(twin, &out_size));
        float *x = malloc(sizeof(float) * in_size * (size_t)batch);
        float *t = malloc(sizeof(float) * out_size * (size_t)batch);
        int32_t *labels = calloc((size_t)batch, sizeof(int32_t));
        randn(x, in_size * (size_t)batch);
        randn(t, out_size * (size_t)batch);
        const bool ce = md->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
        CHECK(pcnn_net_train_step(twin, batch, x, ce ? labels : NULL, ce ? NULL : t, NULL));
        CHECK(pcnn_perfmodel_calibrate_compute(m, twin, budget_compute));
        free(x);
        free(t);
        free(labels);
        pcnn_net_destroy(&twin);
    }
    CHECK(pcnn_perfmodel_share(m, comm, 0)); /* rank 0's model on every rank */
    if (path[0] && rank == 0) CHECK(pcnn_perfmodel_save(m, path));
    const double calib_s = MPI_Wtime() - c0;
    if (grow_mode) {
        grow(md, comm, m, batch, iters, threads);
        pcnn_perfmodel_destroy(&m);
        pcnn_comm_destroy(&comm);
        MPI_Finalize();
        return 0;
    }

    /* The plan. */
    pcnn_net *net = build(md, comm, threads);
    double predicted = 0;
    const double p0 = MPI_Wtime();
    CHECK(pcnn_net_plan_distribution(net, m, batch, &predicted));
    const double plan_s = MPI_Wtime() - p0;
    size_t needed = 0;
    CHECK(pcnn_net_plan_report(net, NULL, 0, &needed));
    char *report = malloc(needed + 1);
    CHECK(pcnn_net_plan_report(net, report, needed + 1, NULL));
    if (verbose && rank == 0) printf("%s", report);
    int uparts[MAX_UNIFORM][4], nu = 0;
    double upred[MAX_UNIFORM], umeas[MAX_UNIFORM + 1];
    for (const char *s = strstr(report, "\nuniform {"); s && nu < MAX_UNIFORM;
         s = strstr(s + 1, "\nuniform {")) {
        int *q = uparts[nu];
        double ms;
        if (sscanf(s, "\nuniform {%d, %d, %d, %d}: %lf ms", &q[0], &q[1], &q[2], &q[3], &ms) == 5)
            upred[nu++] = ms;
    }
    int chosen[4] = {0};
    {
        const char *s = strstr(report, "chosen path:");
        if (s) s = strstr(s, " 1:{");
        if (s) sscanf(s, " 1:{%d,%d,%d,%d}", &chosen[0], &chosen[1], &chosen[2], &chosen[3]);
    }

    /* Every uniform distribution and the planned network, finalized side
     * by side and measured in rounds, each network in turn in every round
     * (the median of its rounds), so that a drift of a shared machine or a
     * link during the run falls on all of them alike. */
    pcnn_net *nets[MAX_UNIFORM + 1];
    pcnn_status built[MAX_UNIFORM + 1];
    for (int u = 0; u < nu; u++) {
        nets[u] = build(md, comm, threads);
        CHECK(pcnn_net_set_distribution(nets[u], uparts[u]));
        built[u] = pcnn_net_finalize(nets[u], batch);
        if (built[u] != PCNN_OK && rank == 0)
            printf("{\"model\": \"%s\", \"parts\": [%d, %d, %d, %d], \"error\": \"%s\"}\n",
                   md->name, uparts[u][0], uparts[u][1], uparts[u][2], uparts[u][3],
                   pcnn_last_error());
    }
    nets[nu] = net;
    built[nu] = pcnn_net_finalize(net, batch);
    CHECK(built[nu]);
    enum { ROUNDS = 3 };
    double rounds[MAX_UNIFORM + 1][ROUNDS];
    const int per_round = iters / ROUNDS > 0 ? iters / ROUNDS : 1;
    for (int r = 0; r < ROUNDS; r++)
        for (int u = 0; u <= nu; u++)
            rounds[u][r] = built[u] == PCNN_OK ? measure(nets[u], md, batch, per_round) : NAN;
    for (int u = 0; u <= nu; u++) {
        qsort(rounds[u], ROUNDS, sizeof(double), cmp);
        umeas[u] = rounds[u][ROUNDS / 2];
    }
    const double planned = umeas[nu];
    for (int u = 0; u < nu && rank == 0; u++)
        printf("{\"model\": \"%s\", \"plan\": \"uniform\", \"parts\": [%d, %d, %d, %d], "
               "\"predicted_ms\": %.3f, \"measured_ms\": %.3f}\n", md->name, uparts[u][0],
               uparts[u][1], uparts[u][2], uparts[u][3], upred[u], 1e3 * umeas[u]);
    for (int u = 0; u <= nu; u++) pcnn_net_destroy(&nets[u]);
    if (rank == 0)
        printf("{\"model\": \"%s\", \"ranks\": %d, \"batch\": %d, \"calibration_s\": %.2f, "
               "\"planning_s\": %.4f, \"plan\": \"planned\", \"first_layer\": [%d, %d, %d, %d], "
               "\"predicted_ms\": %.3f, \"measured_ms\": %.3f}\n",
               md->name, ranks, batch, calib_s, plan_s, chosen[0], chosen[1], chosen[2],
               chosen[3], 1e3 * predicted, 1e3 * planned);
    int pairs = 0, agree = 0;
    double best = INFINITY, sample = NAN;
    for (int i = 0; i < nu; i++) {
        if (isnan(umeas[i])) continue;
        if (uparts[i][0] == ranks) sample = umeas[i];
        best = fmin(best, umeas[i]);
        for (int j = i + 1; j < nu; j++) {
            if (isnan(umeas[j])) continue;
            pairs++;
            /* The planner's order: cost, then the candidate order on a
             * tie (plan_factorisations). */
            agree += (upred[i] <= upred[j]) == (umeas[i] < umeas[j]);
        }
    }
    if (rank == 0)
        printf("{\"model\": \"%s\", \"summary\": true, \"pairwise_agreement\": %.3f, "
               "\"pairs\": %d, \"planned_over_best_uniform\": %.3f, "
               "\"planned_over_sample\": %.3f}\n",
               md->name, pairs ? (double)agree / pairs : NAN, pairs, planned / best,
               planned / sample);
    free(report);
    pcnn_perfmodel_destroy(&m);
    pcnn_comm_destroy(&comm);
    MPI_Finalize();
    return 0;
}
