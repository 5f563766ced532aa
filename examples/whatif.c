/* What-if scaling study with the performance model (seeds 002 section V
 * and 004): calibrate this machine's links and each network's layers,
 * then predict a training step and the weak-scaling efficiency for 1 to
 * 4096 ranks on 1, 10 and 100 Gbit/s links, for ResNet-20, VGG-11 and
 * CosmoFlow (bench/models.c), every exchange strategy, with overlap; and,
 * on 2 ranks, the hybrid "spatial2": each sample split over a group of 2
 * ranks (along D in 3D, H in 2D: a network finalized with that
 * distribution here), the groups data-parallel, at the same global batch.
 *
 *   mpiexec.mpich -n 2 ./build/examples/whatif [--models resnet20,vgg11,cosmoflow]
 *       [--batch-per-rank B] [--max-ranks 4096] [--links 1,10,100]
 *       [--budget SECONDS] [--csv whatif.csv] [--save MODEL_FILE] [--alpha-us US]
 *       [--warmup STEPS]
 *   /usr/bin/python3 examples/whatif.py whatif.csv whatif.png
 *
 * Link calibration is collective (run on 2 ranks to measure a real link;
 * one rank measures only the local summation and keeps default latency);
 * layers are timed on rank 0 at the per-rank batch (each model's default
 * unless --batch-per-rank), after --warmup training steps.  The latency of every what-if link is the
 * calibrated one of this machine's all-reduce, all-to-all and all-gather.
 * Rank 0 writes the CSV: model, strategy, link, ranks, global batch,
 * predicted step, compute, communication, exposed communication,
 * weak-scaling efficiency T(1) / T(P) (for spatial2, T(1) of one rank
 * without a split). */
#define PCNN_EXPERIMENTAL /* the performance model: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"
#include "pcnn.h"

static const char *strategy_name[3] = {"allreduce", "alltoall_allgather", "fc_gradient"};
#define MAX_LINKS 32

static void usage(FILE *to)
{
    fprintf(to,
            "usage: mpiexec.mpich -n 2 whatif [--models resnet20,vgg11,cosmoflow]\n"
            "         [--batch-per-rank B] [--max-ranks 4096] [--links 1,10,100]\n"
            "         [--budget SECONDS] [--csv whatif.csv] [--save MODEL_FILE]\n"
            "         [--alpha-us LATENCY] [--warmup 5]\n"
            "Calibrates this machine (links: collective; layers: rank 0), then predicts the\n"
            "step time and weak-scaling efficiency of each model for 1..max ranks (powers\n"
            "of two) on each link speed (Gbit/s) and exchange strategy, with overlap.\n"
            "--alpha-us sets the what-if links' latency per message (default: the\n"
            "latencies calibrated here, which a busy machine inflates).  --warmup: training\n"
            "steps on synthetic data before the layers are timed (their speed follows the\n"
            "training state).\n"
            "Plot: /usr/bin/python3 examples/whatif.py whatif.csv whatif.png\n");
}

typedef struct options {
    char models[256], links[128], csv[512], save[512];
    int batch, max_ranks, warmup;
    double budget, alpha_us;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.batch = 0, .max_ranks = 4096, .warmup = 5, .budget = 4.0, .alpha_us = -1};
    snprintf(o->models, sizeof o->models, "resnet20,vgg11,cosmoflow");
    snprintf(o->links, sizeof o->links, "1,10,100");
    snprintf(o->csv, sizeof o->csv, "whatif.csv");
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!v) return -1;
        if (!strcmp(a, "--models")) snprintf(o->models, sizeof o->models, "%s", v);
        else if (!strcmp(a, "--links")) snprintf(o->links, sizeof o->links, "%s", v);
        else if (!strcmp(a, "--csv")) snprintf(o->csv, sizeof o->csv, "%s", v);
        else if (!strcmp(a, "--save")) snprintf(o->save, sizeof o->save, "%s", v);
        else if (!strcmp(a, "--batch-per-rank")) o->batch = atoi(v);
        else if (!strcmp(a, "--max-ranks")) o->max_ranks = atoi(v);
        else if (!strcmp(a, "--budget")) o->budget = atof(v);
        else if (!strcmp(a, "--alpha-us")) o->alpha_us = atof(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else return -1;
    }
    return o->max_ranks >= 1 && o->budget > 0 && o->batch >= 0 && o->warmup >= 0 ? 0 : -1;
}

/* The model's network; with comm and parts, distributed so (collective;
 * NULL where finalize refuses the split, e.g. a layer too small for it). */
static pcnn_net *build_on(const model *md, int batch, pcnn_comm *comm, const int *parts)
{
    builder b = {0};
    pcnn_layer *x;
    CHECK(pcnn_net_create(&b.net));
    if (comm) CHECK(pcnn_net_set_comm(b.net, comm));
    if (md->d > 1) CHECK(pcnn_net_input3d(b.net, md->c, md->d, md->h, md->w, &x));
    else CHECK(pcnn_net_input(b.net, md->c, md->h, md->w, &x));
    pcnn_layer *out = md->build(&b, x);
    CHECK(pcnn_net_set_loss(b.net, out, md->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    if (parts) CHECK(pcnn_net_set_distribution(b.net, parts));
    if (pcnn_net_finalize(b.net, batch) != PCNN_OK) {
        if (!parts) CHECK(PCNN_ERR_INTERNAL);
        fprintf(stderr, "whatif: %s not split: %s\n", md->name, pcnn_last_error());
        CHECK(pcnn_net_destroy(&b.net));
    }
    return b.net;
}

static pcnn_net *build(const model *md, int batch) { return build_on(md, batch, NULL, NULL); }

/* A few training steps on synthetic data before the layers are timed:
 * some kernels' speed follows the training state (max pooling runs
 * several times faster once ReLUs die), and a network trains in that
 * state far longer than in its first steps. */
static void warm_up(pcnn_net *net, const model *md, int batch, int steps)
{
    size_t in_size = (size_t)md->c * md->d * md->h * md->w, out_size;
    CHECK(pcnn_net_output_size(net, &out_size));
    float *x = malloc(sizeof(float) * in_size * (size_t)batch);
    float *t = malloc(sizeof(float) * out_size * (size_t)batch);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    if (!x || !t || !labels) {
        fprintf(stderr, "whatif: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    randn(x, in_size * (size_t)batch);
    randn(t, out_size * (size_t)batch);
    const int ce = md->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    for (int s = 0; s < steps; s++) {
        for (int j = 0; j < batch; j++) labels[j] = (int32_t)(next_u64() % out_size);
        CHECK(pcnn_net_train_step(net, batch, x, ce ? labels : NULL, ce ? NULL : t, NULL));
    }
    free(x);
    free(t);
    free(labels);
}

/* Predict every (strategy, link, ranks) point of one model into the CSV:
 * strategies first..last (-1: the network's own, named "spatial2", from 2
 * ranks up, its efficiency against one[link], the single rank's step of
 * the first strategy, which the others record there). */
static void sweep(pcnn_perfmodel *m, pcnn_net *net, const char *name, int batch,
                  const options *o, FILE *csv, int first, int last, double *one)
{
    char links[128];
    for (int s = first; s <= last; s++) {
        CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, s));
        int link = 0;
        snprintf(links, sizeof links, "%s", o->links);
        for (char *tok = strtok(links, ","); tok; tok = strtok(NULL, ",")) {
            const double gbits = atof(tok);
            CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, gbits));
            double t1 = s < 0 ? one[link] : 0;
            for (int P = s < 0 ? 2 : 1; P <= o->max_ranks; P *= 2) {
                double step, f, b, u, c, e;
                CHECK(pcnn_perfmodel_predict(m, net, batch * P, P, 1, &step));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_FORWARD, &f));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_BACKWARD, &b));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_UPDATE, &u));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_COMM, &c));
                CHECK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_EXPOSED, &e));
                if (P == 1) t1 = step;
                if (P == 1 && s == 0 && link < MAX_LINKS) one[link] = step;
                const char *strategy = s < 0 ? "spatial2" : strategy_name[s];
                fprintf(csv, "%s,%s,%g,%d,%d,%.6g,%.6g,%.6g,%.6g,%.4f\n", name, strategy,
                        gbits, P, batch * P, step, f + b + u, c, e, t1 / step);
                if (P == o->max_ranks || P == 1 || P == 64)
                    printf("  %-9s %-19s %6g Gbit/s  P=%-5d step %9.2f ms  exposed %8.2f ms  "
                           "efficiency %5.1f %%\n",
                           name, strategy, gbits, P, 1e3 * step, 1e3 * e, 100 * t1 / step);
            }
            link++;
        }
    }
    CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, -1));
    CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0));
}

static void print_progress(void *user, pcnn_log_level level, const char *message)
{
    (void)user;
    printf("%s%s\n", level == PCNN_LOG_WARNING ? "warning: " : "  ", message);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    options o;
    const int parsed = parse(argc, argv, &o);
    if (parsed) {
        usage(parsed > 0 ? stdout : stderr);
        return parsed > 0 ? 0 : 2;
    }
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    pcnn_comm *comm;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    /* The calibrations' progress, one line per phase (rank 0 prints). */
    if (rank == 0) CHECK(pcnn_perfmodel_set_log_callback(m, print_progress, NULL));
    CHECK(pcnn_perfmodel_calibrate_comm(m, comm, o.budget));
    if (o.alpha_us >= 0) CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 1e-6 * o.alpha_us));
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    FILE *csv = NULL;
    if (rank == 0) {
        csv = fopen(o.csv, "w");
        if (!csv) {
            fprintf(stderr, "whatif: cannot write %s\n", o.csv);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(csv, "model,strategy,link_gbits,ranks,global_batch,step_s,compute_s,comm_s,"
                     "exposed_s,efficiency\n");
    }
    char models[256];
    snprintf(models, sizeof models, "%s", o.models);
    char *save = NULL;
    for (char *name = strtok_r(models, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const model *md = model_find(name);
        if (!md) {
            if (rank == 0) fprintf(stderr, "whatif: unknown model %s\n", name);
            continue;
        }
        const int batch = o.batch ? o.batch : md->default_batch;
        double one[MAX_LINKS] = {0};
        if (rank == 0) {
            pcnn_net *net = build(md, batch);
            warm_up(net, md, batch, o.warmup);
            CHECK(pcnn_perfmodel_calibrate_compute(m, net, o.budget));
            /* What the figures below rest on, before them (pcnn_perf_flag). */
            char why[2048];
            CHECK(pcnn_perfmodel_confidence(m, 0, NULL, why, sizeof why, NULL));
            printf("%s, %d samples per rank:\n%s", name, batch, why);
            sweep(m, net, name, batch, &o, csv, 0, 2, one);
            CHECK(pcnn_net_destroy(&net));
        }
        if (size != 2) continue;
        /* The same layers split over the two ranks here (the model's
         * compute table, just calibrated, is theirs), predicted on rank 0
         * for every even number of ranks. */
        MPI_Barrier(MPI_COMM_WORLD);
        const int parts[4] = {1, md->d > 1 ? 2 : 1, md->d > 1 ? 1 : 2, 1};
        pcnn_net *split = build_on(md, 2 * batch, comm, parts);
        if (split && rank == 0) sweep(m, split, name, batch, &o, csv, -1, -1, one);
        if (split) CHECK(pcnn_net_destroy(&split));
    }
    if (rank == 0) {
        fclose(csv);
        static char report[1 << 16];
        CHECK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
        printf("\n%s\nwrote %s\n", report, o.csv);
        if (o.save[0]) CHECK(pcnn_perfmodel_save(m, o.save));
    }
    CHECK(pcnn_perfmodel_destroy(&m));
    CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
