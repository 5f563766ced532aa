/* Adaptive batch size (seed 001 chapter 5) on Fashion-MNIST: a small CNN
 * trained three ways under the same stopping rule, side by side.
 *
 *   mpiexec.mpich -n 2 adaptive_batch [--mode all|fixed|linear|adaptive]
 *       [--small 32] [--large 1024] [--lr 0.025] [--warmup 3]
 *       [--growth 4] [--rule root|linear] [--theta 0.2] [--interval 0]
 *       [--epochs 30] [--stop-decays 2] [--patience 2] [--plateau 0.05]
 *       [--threads 1] [--engine 2] [--seed 0] [--csv curves.csv] [--auto 0]
 *       [--data /usr/share/datasets/fashion-mnist]
 *
 *   fixed     batch --small at learning rate --lr: the best-tuned small
 *             batch (32 beat 64 and 128 here at the same noise scale);
 *   linear    batch --large at --lr x large / small (the linear scaling
 *             rule), with --warmup epochs of gradual warm-up;
 *   adaptive  the scheduler from B_s = --small to B_m = --large starting at
 *             --lr: K from theta (saturated under a --theta relative change,
 *             or K = --interval), B times --growth every K epochs with the
 *             learning rate following by the --rule.
 * The defaults are the configuration measured for the report: growth 4
 * and the root rule kept the accuracy of the small batch while reaching
 * B_m after three growths; the linear rule at lr 0.8 and B 1024 lost it.
 * All three decay the learning rate on training-loss plateaus (the
 * scheduler's rule: --patience epochs without a --plateau relative
 * improvement) and stop at their --stop-decays-th decay (converged) or
 * after --epochs.  Rank 0 prints each epoch and a table of test accuracy,
 * epochs, training wall time and the epochs spent at B = --large.
 * --engine 2 (non-blocking collectives) suits ranks that fill every core:
 * a communication thread would compete with them for the cores.
 * --auto S (S > 0) lets the performance model choose each layer's gradient
 * exchange (PCNN_EXCHANGE_AUTO): links and compute calibrated in about S
 * seconds each, rank 0's model shared with every rank, and at every batch
 * growth the scheduler's re-plan switches the exchanges it prices cheaper
 * at the new batch (printed by rank 0 as it happens).
 *
 * Model: conv3x3(16)-BN-ReLU-maxpool2, conv3x3(32)-BN-ReLU-maxpool2,
 * dense(10), trained with momentum SGD (0.9). */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pcnn.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "error: %s (%s)\n", pcnn_last_error(), pcnn_status_str(s_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

typedef struct options {
    const char *mode, *data, *csv;
    int small, large, warmup, epochs, stop_decays, patience, interval, threads, seed, engine;
    double lr, plateau, growth, theta, auto_s;
    int root;
} options;

typedef struct result {
    char name[32];
    double accuracy, best_accuracy, seconds;
    int epochs, epochs_at_large;
} result;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static pcnn_net *build_cnn(pcnn_comm *comm, int max_batch, const options *o)
{
    pcnn_net *net;
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, 1, 28, 28, &l));
    CHECK(pcnn_conv2d(net, l, 16, 3, 1, 1, 0, &l));
    CHECK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_conv2d(net, l, 32, 3, 1, 1, 0, &l));
    CHECK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_dense(net, l, 10, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, 0.9));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, o->seed));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, o->threads));
    CHECK(pcnn_net_set_comm(net, comm));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, o->engine));
    if (o->auto_s > 0) CHECK(pcnn_net_set_exchange(net, PCNN_EXCHANGE_AUTO));
    CHECK(pcnn_net_finalize(net, max_batch));
    return net;
}

/* Rank 0 prints what the library tells its log: the re-plans. */
static void print_log(void *user, pcnn_log_level level, const char *message)
{
    (void)level;
    if (*(const int *)user == 0 && strstr(message, "re-plan")) printf("  [model] %s\n", message);
}

/* Rank 0 prints the calibrations' progress (one line per phase). */
static void print_progress(void *user, pcnn_log_level level, const char *message)
{
    if (*(const int *)user == 0) {
        printf("  [calibration]%s %s\n", level == PCNN_LOG_WARNING ? " warning:" : "", message);
        fflush(stdout);
    }
}

/* --auto: a model of this machine and network, the same on every rank,
 * attached so that the scheduler's batch changes re-plan the exchanges. */
static pcnn_perfmodel *attach_model(pcnn_net *net, pcnn_comm *comm, const options *o,
                                    const int *rank)
{
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    CHECK(pcnn_perfmodel_set_log_callback(m, print_progress, (void *)rank));
    CHECK(pcnn_perfmodel_calibrate_comm(m, comm, o->auto_s));
    CHECK(pcnn_perfmodel_calibrate_compute(m, net, o->auto_s));
    CHECK(pcnn_perfmodel_share(m, comm, 0));
    CHECK(pcnn_net_set_log_callback(net, print_log, (void *)rank));
    CHECK(pcnn_net_set_perfmodel(net, m));
    return m;
}

/* One training run under a scheduler from b_start to b_max. */
static result train(const char *name, int b_start, int b_max, double lr, int warmup,
                    const options *o, pcnn_comm *comm, pcnn_dataset *train_set,
                    pcnn_dataset *test_set, FILE *csv, int rank)
{
    pcnn_net *net = build_cnn(comm, b_max, o);
    pcnn_perfmodel *model = o->auto_s > 0 ? attach_model(net, comm, o, &rank) : NULL;
    pcnn_scheduler *s;
    CHECK(pcnn_scheduler_create(net, b_start, b_max, lr, &s));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_WARMUP_EPOCHS, warmup));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_INTERVAL_EPOCHS, o->interval));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_EPOCHS, o->patience));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_THRESHOLD, o->plateau));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_GROWTH_FACTOR, o->growth));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_THETA_THRESHOLD, o->theta));
    CHECK(pcnn_scheduler_set_option(s, PCNN_SCHED_LR_RULE,
                                    o->root ? PCNN_SCHED_LR_ROOT : PCNN_SCHED_LR_LINEAR));
    result r = {.accuracy = 0};
    snprintf(r.name, sizeof r.name, "%s", name);
    if (rank == 0) printf("\n== %s: batch %d..%d, lr %g, warm-up %d epochs\n", name, b_start,
                          b_max, lr, warmup);
    for (int e = 1; e <= o->epochs; e++) {
        double batch, rate, active, decays, theta, k;
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_BATCH, &batch));
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_LEARNING_RATE, &rate));
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_ACTIVE_RANKS, &active));
        CHECK(pcnn_dataset_shuffle(train_set, (uint64_t)o->seed, (uint64_t)e));
        double t0 = now(), loss, test_loss, acc;
        CHECK(pcnn_scheduler_train_epoch(s, train_set, &loss));
        const double dt = now() - t0;
        CHECK(pcnn_net_evaluate(net, test_set, &test_loss, &acc));
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_THETA, &theta));
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_INTERVAL, &k));
        CHECK(pcnn_scheduler_get_option(s, PCNN_SCHED_DECAYS, &decays));
        r.seconds += dt;
        r.epochs = e;
        r.epochs_at_large += (int)batch == o->large;
        r.accuracy = acc;
        if (acc > r.best_accuracy) r.best_accuracy = acc;
        if (rank == 0) {
            printf("%-9s epoch %2d  B %4d on %g rank(s)  lr %.4f  loss %.4f  theta %.4f  K %g  "
                   "test %.2f%%  %.2f s\n", name, e, (int)batch, active, rate, loss, theta, k,
                   100 * acc, dt);
            fflush(stdout);
        }
        if (csv)
            fprintf(csv, "%s,%d,%d,%.6g,%.6f,%.6f,%.6f,%.3f\n", name, e, (int)batch, rate, loss,
                    theta, acc, dt);
        if (decays >= o->stop_decays) break; /* converged: the rate decayed enough */
    }
    pcnn_scheduler_destroy(&s);
    pcnn_net_destroy(&net);
    pcnn_perfmodel_destroy(&model); /* after the network that points to it */
    return r;
}

static const char usage[] =
    "usage: mpiexec.mpich -n 2 adaptive_batch [options]\n"
    "  --mode NAME         all, fixed, linear or adaptive (all)\n"
    "  --small N           the small batch B_s: fixed's batch, adaptive's start (32)\n"
    "  --large N           the large batch B_m: linear's batch, adaptive's end (1024)\n"
    "  --lr X              learning rate at --small; linear uses X * large / small (0.025)\n"
    "  --warmup N          linear: warm-up epochs (3)\n"
    "  --growth X          adaptive: batch growth factor (4)\n"
    "  --rule NAME         adaptive: learning rate follows the batch by root or linear (root)\n"
    "  --theta X           adaptive: relative change under which theta saturates (0.2)\n"
    "  --interval N        adaptive: grow every N epochs instead (0 = from theta)\n"
    "  --epochs N          at most N epochs per method (30)\n"
    "  --stop-decays N     stop at the N-th plateau decay of the learning rate (2)\n"
    "  --patience N        epochs without a --plateau improvement before a decay (2)\n"
    "  --plateau X         relative improvement of the training loss that counts (0.05)\n"
    "  --threads N         OpenMP threads per rank (1)\n"
    "  --engine N          0 auto, 1 communication thread, 2 non-blocking collectives (2)\n"
    "  --seed N            initialisation and shuffling seed (0)\n"
    "  --csv FILE          per-epoch curves of every method as CSV\n"
    "  --auto S            the performance model picks the exchanges, re-planned at each\n"
    "                      batch growth; calibration budget S s (0: off)\n"
    "  --data DIR          Fashion-MNIST IDX files (/usr/share/datasets/fashion-mnist)\n";

/* 1: options parsed; 0: an error (reported); 2: --help printed. */
static int parse(int argc, char **argv, options *o, int rank)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (rank == 0) fputs(usage, stdout);
            return 2;
        }
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            if (rank == 0) fprintf(stderr, "option %s needs a value\n%s", k, usage);
            return 0;
        }
        if (!strcmp(k, "--mode")) o->mode = v;
        else if (!strcmp(k, "--data")) o->data = v;
        else if (!strcmp(k, "--csv")) o->csv = v;
        else if (!strcmp(k, "--small")) o->small = atoi(v);
        else if (!strcmp(k, "--large")) o->large = atoi(v);
        else if (!strcmp(k, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(k, "--epochs")) o->epochs = atoi(v);
        else if (!strcmp(k, "--stop-decays")) o->stop_decays = atoi(v);
        else if (!strcmp(k, "--patience")) o->patience = atoi(v);
        else if (!strcmp(k, "--interval")) o->interval = atoi(v);
        else if (!strcmp(k, "--threads")) o->threads = atoi(v);
        else if (!strcmp(k, "--engine")) o->engine = atoi(v);
        else if (!strcmp(k, "--seed")) o->seed = atoi(v);
        else if (!strcmp(k, "--lr")) o->lr = atof(v);
        else if (!strcmp(k, "--plateau")) o->plateau = atof(v);
        else if (!strcmp(k, "--growth")) o->growth = atof(v);
        else if (!strcmp(k, "--theta")) o->theta = atof(v);
        else if (!strcmp(k, "--auto")) o->auto_s = atof(v);
        else if (!strcmp(k, "--rule")) o->root = !strcmp(v, "root");
        else {
            if (rank == 0) fprintf(stderr, "unknown option %s\n%s", k, usage);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    options o = {.mode = "all", .data = "/usr/share/datasets/fashion-mnist", .small = 32,
                 .large = 1024, .warmup = 3, .epochs = 30, .stop_decays = 2, .patience = 2,
                 .interval = 0, .threads = 1, .seed = 0, .lr = 0.025, .plateau = 0.05,
                 .growth = 4, .root = 1, .theta = 0.2, .engine = 2};
    int world_rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    const int parsed = parse(argc, argv, &o, world_rank);
    if (parsed == 2) { /* --help: nothing else to do */
        MPI_Finalize();
        return 0;
    }
    if (!parsed) MPI_Abort(MPI_COMM_WORLD, 2);
    char xtr[512], ytr[512], xte[512], yte[512];
    snprintf(xtr, sizeof xtr, "%s/train-images-idx3-ubyte.gz", o.data);
    snprintf(ytr, sizeof ytr, "%s/train-labels-idx1-ubyte.gz", o.data);
    snprintf(xte, sizeof xte, "%s/t10k-images-idx3-ubyte.gz", o.data);
    snprintf(yte, sizeof yte, "%s/t10k-labels-idx1-ubyte.gz", o.data);
    pcnn_dataset *train_set, *test_set;
    CHECK(pcnn_dataset_load_idx(xtr, ytr, 0.2860f, 0.3530f, &train_set));
    CHECK(pcnn_dataset_load_idx(xte, yte, 0.2860f, 0.3530f, &test_set));
    pcnn_comm *comm;
    int rank, ranks;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    if (rank == 0)
        printf("libpcnn %s: adaptive batch size on Fashion-MNIST, %d rank(s) x %d thread(s)\n",
               pcnn_version_string(), ranks, o.threads);
    FILE *csv = o.csv && rank == 0 ? fopen(o.csv, "w") : NULL;
    if (csv) fprintf(csv, "method,epoch,batch,lr,train_loss,theta,test_accuracy,epoch_seconds\n");

    const int all = !strcmp(o.mode, "all");
    result results[3];
    int n = 0;
    if (all || !strcmp(o.mode, "fixed"))
        results[n++] = train("fixed", o.small, o.small, o.lr, 0, &o, comm, train_set, test_set,
                             csv, rank);
    if (all || !strcmp(o.mode, "linear"))
        results[n++] = train("linear", o.large, o.large, o.lr * o.large / o.small, o.warmup, &o,
                             comm, train_set, test_set, csv, rank);
    if (all || !strcmp(o.mode, "adaptive"))
        results[n++] = train("adaptive", o.small, o.large, o.lr, 0, &o, comm, train_set, test_set,
                             csv, rank);
    if (rank == 0) {
        printf("\n%-9s  %9s  %9s  %6s  %10s  %14s\n", "method", "test acc", "best acc", "epochs",
               "train s", "epochs at B_m");
        for (int i = 0; i < n; i++)
            printf("%-9s  %8.2f%%  %8.2f%%  %6d  %10.1f  %8d (%3.0f%%)\n", results[i].name,
                   100 * results[i].accuracy, 100 * results[i].best_accuracy, results[i].epochs,
                   results[i].seconds, results[i].epochs_at_large,
                   100.0 * results[i].epochs_at_large / results[i].epochs);
    }
    if (csv) fclose(csv);
    pcnn_comm_destroy(&comm);
    pcnn_dataset_destroy(&train_set);
    pcnn_dataset_destroy(&test_set);
    MPI_Finalize();
    return 0;
}
