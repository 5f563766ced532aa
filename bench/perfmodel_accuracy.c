/* Accuracy of the performance model (issue 15 targets, seed 004 metrics):
 * for each model, exchange strategy and overlap setting, train a few steps,
 * predict the step from the calibrated model, and compare (step RE, WRE^T
 * of forward, backward and update).  Also the calibration cost.
 *
 *   OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \
 *     mpiexec.mpich -n 1 ./build/bench/perfmodel_accuracy --threads 2   # 1 rank x 2 threads
 *   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
 *     mpiexec.mpich -n 2 ./build/bench/perfmodel_accuracy --threads 1   # 2 ranks x 1 thread
 *   options: [--models lenet,resnet20,vgg11,edsr,cosmoflow] [--iters 20]
 *            [--warmup 10] [--budget-comm 2] [--budget-compute 5] [--verbose]
 *            [--repeat] [--calibrate-once]
 *
 * One JSON line per case from rank 0, then a JSON summary and the same as
 * a readable table with the targets beside each number, overall and per
 * model: median and largest |RE| of the step (targets: median 5 %, none
 * above 10 %) against the library's mean step time ("re") and against the
 * median wall time of a step ("re_median", robust to preempted steps);
 * median, largest and mean WRE^T of FP, BP and WU (target 5 %); and
 * the seconds the link and compute calibration took per model (target for
 * ResNet-20 on 2 ranks: under 10 s together).  Each case's layers are
 * timed halfway through its measured steps (its training state: how many
 * ReLUs are dead changes some kernels' speed), then, on several ranks,
 * the ranks' pace is compared: every case calibrates the network it
 * predicts, as a user would.  On a shared machine whose speed drifts by
 * tens of percent within minutes, one calibration for a model's six cases
 * measured the drift more than the model (--calibrate-once: the first
 * case's for all six, as this benchmark did before).
 * On one rank the strategies are all the same (no exchange): only overlap
 * on and off are run.
 *
 * --repeat measures each case twice (two windows of --iters steps on the
 * same network) and reports the second window against the first by the
 * same metrics: the measurement's own repeatability, the floor under any
 * model's error on this machine.  The model is validated on the second. */
#define PCNN_EXPERIMENTAL /* the performance model: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"
#include "pcnn.h"

static int rank, ranks;

static const char *strategy_name[3] = {"allreduce", "alltoall_allgather", "fc_gradient"};

static pcnn_net *build(const model *md, pcnn_comm *comm, int strategy, int overlap, int threads,
                       int batch)
{
    builder b = {0};
    if (strategy == 2) b.dense_exchange = 1 + PCNN_EXCHANGE_FC_GRADIENT;
    pcnn_layer *in;
    CHECK(pcnn_net_create(&b.net));
    if (md->d > 1) CHECK(pcnn_net_input3d(b.net, md->c, md->d, md->h, md->w, &in));
    else CHECK(pcnn_net_input(b.net, md->c, md->h, md->w, &in));
    pcnn_layer *out = md->build(&b, in);
    CHECK(pcnn_net_set_loss(b.net, out, md->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    /* Regression on random targets diverges at the default rate within the
     * measured steps (CosmoFlow-mini: NaN at step 19); timing needs finite
     * values, not learning. */
    if (md->loss == PCNN_LOSS_MSE)
        CHECK(pcnn_net_set_option(b.net, PCNN_OPT_LEARNING_RATE, 1e-3));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_THREADS, threads));
    if (comm) {
        CHECK(pcnn_net_set_comm(b.net, comm));
        CHECK(pcnn_net_set_exchange(b.net, strategy == 0 ? PCNN_EXCHANGE_ALLREDUCE
                                                         : PCNN_EXCHANGE_ALLTOALL_ALLGATHER));
    }
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_OVERLAP, overlap));
    CHECK(pcnn_net_finalize(b.net, batch));
    return b.net;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and largest of v[0..n) (n >= 1; v is not changed). */
static void median_max(const double *v, int n, double *median, double *max)
{
    double sorted[128];
    memcpy(sorted, v, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmp);
    *median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    *max = sorted[n - 1];
}

/* Train iters steps after the warm-up ones (timing reset in between); returns
 * the median wall time of a step (the library's breakdown is a mean, which
 * a preempted step on a shared machine pulls up). */
static int warmup = 10; /* steps before the measured ones (--warmup) */

/* A measured window: per layer forward, backward and update, and the step. */
enum { MAX_LAYERS = 1024 };
typedef struct window {
    int layers;
    double t[MAX_LAYERS][3];
    double step;
} window;

static void read_window(const pcnn_net *net, window *w)
{
    static const pcnn_time stage[3] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD, PCNN_TIME_UPDATE};
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &w->step));
    w->layers = 0;
    /* Layer 0 is the input; the first index past the last is an error. */
    for (int l = 1; l < MAX_LAYERS; l++) {
        double v[3];
        bool ok = true;
        for (int s = 0; s < 3 && ok; s++) ok = pcnn_net_time(net, l, stage[s], &v[s]) == PCNN_OK;
        if (!ok) break;
        memcpy(w->t[w->layers++], v, sizeof v);
    }
}

/* Window b against window a as validate compares a prediction with a
 * measurement: step RE and WRE^T of each stage. */
static void compare_windows(const window *a, const window *b, double *re, double wre[3])
{
    *re = (b->step - a->step) / a->step;
    for (int s = 0; s < 3; s++) {
        double err = 0, sum = 0;
        for (int l = 0; l < a->layers && l < b->layers; l++) {
            err += fabs(b->t[l][s] - a->t[l][s]);
            sum += a->t[l][s];
        }
        wre[s] = sum > 0 ? err / sum : 0;
    }
}

static double train(pcnn_net *net, const model *md, int batch, int iters, pcnn_perfmodel *m,
                    pcnn_comm *comm, double budget, double comm_seconds, const char *name)
{
    double *wall = malloc(sizeof(double) * (size_t)iters);
    const int mine = batch / ranks + (rank < batch % ranks);
    size_t in_size = (size_t)md->c * md->d * md->h * md->w, out_size;
    CHECK(pcnn_net_output_size(net, &out_size));
    float *x = malloc(sizeof(float) * in_size * (size_t)mine);
    float *t = malloc(sizeof(float) * out_size * (size_t)mine);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)mine);
    for (int i = 0; i <= rank; i++) randn(x, in_size * (size_t)mine);
    randn(t, out_size * (size_t)mine);
    const bool ce = md->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    for (int i = 0; i < warmup + iters; i++) {
        /* Calibrate in the middle of the measured steps: some kernels'
         * speed follows the training state (max pooling's branches get
         * predictable as ReLUs die: LeNet's second pool runs 3.8 times
         * faster at step 15 than at step 0 with lr 0.01), so a snapshot
         * halfway matches the mean over the steps best.  Calibration
         * neither records into the timing nor changes the parameters. */
        if (i == warmup + iters / 2 && m) {
            const double c0 = MPI_Wtime();
            CHECK(pcnn_perfmodel_calibrate_compute(m, net, budget));
            if (comm) CHECK(pcnn_perfmodel_calibrate_pace(m, comm));
            double spent = MPI_Wtime() - c0;
            MPI_Allreduce(MPI_IN_PLACE, &spent, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0)
                printf("{\"model\": \"%s\", \"compute_calibration_s\": %.2f, "
                       "\"calibration_total_s\": %.2f}\n",
                       name, spent, spent + comm_seconds);
        }
        if (i == warmup) CHECK(pcnn_net_reset_timing(net));
        for (int j = 0; j < mine; j++) labels[j] = (int32_t)(next_u64() % out_size);
        const double t0 = MPI_Wtime();
        CHECK(pcnn_net_train_step(net, mine, x, ce ? labels : NULL, ce ? NULL : t, NULL));
        if (i >= warmup) wall[i - warmup] = MPI_Wtime() - t0;
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

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    char models[256] = "lenet,resnet20,vgg11,edsr,cosmoflow";
    int threads = 1, iters = 20, verbose = 0, repeat = 0, once = 0;
    double budget_comm = 2, budget_compute = 5;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--help")) {
            if (rank == 0)
                printf("usage: mpiexec.mpich -n 1|2 perfmodel_accuracy [--threads T] [--iters N]\n"
                       "  [--warmup N] [--models a,b] [--budget-comm S] [--budget-compute S]\n"
                       "  [--verbose] [--repeat] [--calibrate-once]\n");
            MPI_Finalize();
            return 0;
        }
        if (!strcmp(argv[i], "--verbose")) { verbose = 1; continue; }
        if (!strcmp(argv[i], "--repeat")) { repeat = 1; continue; }
        if (!strcmp(argv[i], "--calibrate-once")) { once = 1; continue; }
        if (!strcmp(argv[i], "--models")) snprintf(models, sizeof models, "%s", v);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(v);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(v);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(v);
        else if (!strcmp(argv[i], "--budget-comm")) budget_comm = atof(v);
        else if (!strcmp(argv[i], "--budget-compute")) budget_compute = atof(v);
        i++;
    }
    pcnn_comm *comm = NULL;
    if (ranks > 1) CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    double t0 = MPI_Wtime();
    if (comm) CHECK(pcnn_perfmodel_calibrate_comm(m, comm, budget_comm));
    const double comm_seconds = MPI_Wtime() - t0;
    if (rank == 0) printf("{\"link_calibration_s\": %.2f, \"ranks\": %d, \"threads\": %d}\n",
                          comm_seconds, ranks, threads);

    double res[128], res_med[128], wres[3][128], exposed_re[128];
    double floor_re[128], floor_wre[3][128]; /* --repeat: window against window */
    static window first, second;
    int exposed_cases = 0;
    const char *case_model[128];
    int cases = 0;
    char *save = NULL;
    for (char *name = strtok_r(models, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const model *md = model_find(name);
        if (!md) {
            if (rank == 0) fprintf(stderr, "perfmodel_accuracy: unknown model '%s' skipped\n", name);
            continue;
        }
        const int batch = md->default_batch;
        bool calibrated = false;
        for (int s = 0; s < (ranks > 1 ? 3 : 1); s++)
            for (int overlap = 0; overlap <= 1; overlap++) {
                pcnn_net *net = build(md, comm, s, overlap, threads, batch);
                pcnn_perfmodel *timer = calibrated && once ? NULL : m;
                double median_step =
                    train(net, md, batch, iters, timer, comm, budget_compute, comm_seconds, name);
                calibrated = true;
                double rep_re = 0, rep_wre[3] = {0};
                if (repeat) {
                    read_window(net, &first);
                    median_step = train(net, md, batch, iters, NULL, NULL, 0, 0, name);
                    read_window(net, &second);
                    compare_windows(&first, &second, &rep_re, rep_wre);
                }
                double step, re, wre[3];
                CHECK(pcnn_perfmodel_predict(m, net, batch, ranks, overlap, &step));
                static char table[1 << 16];
                CHECK(pcnn_perfmodel_validate(m, net, &re, wre, table, sizeof table, NULL));
                double measured, exposed, exposed_predicted;
                CHECK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &measured));
                CHECK(pcnn_net_time(net, -1, PCNN_TIME_EXPOSED, &exposed));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_EXPOSED, &exposed_predicted));
                if (rank == 0) {
                    if (verbose) printf("%s", table);
                    printf("{\"model\": \"%s\", \"strategy\": \"%s\", \"overlap\": %d, "
                           "\"measured_ms\": %.3f, \"median_ms\": %.3f, \"predicted_ms\": %.3f, "
                           "\"re\": %.4f, \"re_median\": %.4f, "
                           "\"wre_fp\": %.4f, \"wre_bp\": %.4f, \"wre_wu\": %.4f, "
                           "\"exposed_ms\": %.3f, \"exposed_predicted_ms\": %.3f}\n",
                           name, ranks > 1 ? strategy_name[s] : "none", overlap, 1e3 * measured,
                           1e3 * median_step, 1e3 * step, re, (step - median_step) / median_step,
                           wre[0], wre[1], wre[2], 1e3 * exposed, 1e3 * exposed_predicted);
                    if (repeat)
                        printf("{\"model\": \"%s\", \"repeat\": true, \"re\": %.4f, "
                               "\"wre_fp\": %.4f, \"wre_bp\": %.4f, \"wre_wu\": %.4f}\n",
                               name, rep_re, rep_wre[0], rep_wre[1], rep_wre[2]);
                    fflush(stdout);
                }
                /* Exposed communication where it is a part of the step
                 * worth predicting (issue 15: within 20 % at 200 Mbit/s). */
                if (exposed > 0.05 * measured && exposed_cases < 128)
                    exposed_re[exposed_cases++] = fabs(exposed_predicted - exposed) / exposed;
                if (cases < 128) {
                    res[cases] = fabs(re);
                    res_med[cases] = fabs((step - median_step) / median_step);
                    floor_re[cases] = fabs(rep_re);
                    for (int k = 0; k < 3; k++) {
                        wres[k][cases] = wre[k];
                        floor_wre[k][cases] = rep_wre[k];
                    }
                    case_model[cases] = md->name;
                    cases++;
                }
                CHECK(pcnn_net_destroy(&net));
            }
    }
    if (rank == 0 && cases) {
        double med, max, med2, max2, wmed[3], wmax[3], mean[3] = {0};
        median_max(res, cases, &med, &max);
        median_max(res_med, cases, &med2, &max2);
        int over = 0;
        for (int i = 0; i < cases; i++) over += res[i] > 0.10;
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < cases; i++) mean[k] += wres[k][i];
            mean[k] /= cases;
            median_max(wres[k], cases, &wmed[k], &wmax[k]);
        }
        printf("{\"summary\": true, \"cases\": %d, \"median_abs_re\": %.4f, \"max_abs_re\": %.4f, "
               "\"cases_over_10pct\": %d, \"mean_wre_fp\": %.4f, \"mean_wre_bp\": %.4f, "
               "\"mean_wre_wu\": %.4f, \"median_wre_fp\": %.4f, \"median_wre_bp\": %.4f, "
               "\"median_wre_wu\": %.4f, \"max_wre_fp\": %.4f, \"max_wre_bp\": %.4f, "
               "\"max_wre_wu\": %.4f, \"median_abs_re_median\": %.4f, "
               "\"max_abs_re_median\": %.4f}\n",
               cases, med, max, over, mean[0], mean[1], mean[2], wmed[0], wmed[1], wmed[2],
               wmax[0], wmax[1], wmax[2], med2, max2);
        /* The same for people: targets of issue 15 beside each number. */
        printf("\n%d cases, %d rank(s) x %d thread(s)\n", cases, ranks, threads);
        printf("  step |RE| (mean step)    median %5.1f %%  max %5.1f %%  (targets 5 %%, 10 %%)  "
               "%d case(s) over 10 %%\n", 100 * med, 100 * max, over);
        printf("  step |RE| (median step)  median %5.1f %%  max %5.1f %%\n", 100 * med2,
               100 * max2);
        if (exposed_cases) {
            double emed, emax;
            median_max(exposed_re, exposed_cases, &emed, &emax);
            printf("  exposed communication    median %5.1f %%  max %5.1f %%  over %d case(s) "
                   "where it is >= 5 %% of the step (target 20 %% at 200 Mbit/s)\n",
                   100 * emed, 100 * emax, exposed_cases);
        }
        static const char *pass[3] = {"FP", "BP", "WU"};
        for (int k = 0; k < 3; k++)
            printf("  WRE^T %s                 median %5.1f %%  max %5.1f %%  mean %5.1f %%  "
                   "(target 5 %%)\n", pass[k], 100 * wmed[k], 100 * wmax[k], 100 * mean[k]);
        if (repeat) {
            double fm, fx;
            median_max(floor_re, cases, &fm, &fx);
            printf("  repeatability (a second window against the first, same metrics):\n"
                   "  step |RE|                median %5.1f %%  max %5.1f %%\n", 100 * fm,
                   100 * fx);
            for (int k = 0; k < 3; k++) {
                median_max(floor_wre[k], cases, &fm, &fx);
                printf("  WRE^T %s                 median %5.1f %%  max %5.1f %%\n", pass[k],
                       100 * fm, 100 * fx);
            }
        }
        for (int i = 0; i < cases; i++) {
            bool first = true;
            for (int j = 0; j < i; j++) first = first && strcmp(case_model[j], case_model[i]);
            if (!first) continue;
            double v[128], w[3][128];
            int n = 0;
            for (int j = i; j < cases; j++) {
                if (strcmp(case_model[j], case_model[i])) continue;
                v[n] = res[j];
                for (int k = 0; k < 3; k++) w[k][n] = wres[k][j];
                n++;
            }
            double mm, mx, f, b, u, unused;
            median_max(v, n, &mm, &mx);
            median_max(w[0], n, &f, &unused);
            median_max(w[1], n, &b, &unused);
            median_max(w[2], n, &u, &unused);
            printf("  %-10s %2d case(s): |RE| median %5.1f %% max %5.1f %%; median WRE^T FP "
                   "%4.1f %% BP %4.1f %% WU %4.1f %%\n", case_model[i], n, 100 * mm, 100 * mx,
                   100 * f, 100 * b, 100 * u);
        }
    }
    CHECK(pcnn_perfmodel_destroy(&m));
    if (comm) CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
