/* Scaling: the same model and global batch on 1 rank and on all ranks of
 * the job (strong scaling; --weak keeps the batch per rank instead), with
 * the speedup and the library's timing breakdown of each run.
 *
 *   mpiexec.mpich -n 2 scaling [--model resnet20|lenet] [--batch 64] [--steps 20]
 *
 * One job measures every configuration: the 1-rank runs use a
 * communicator holding rank 0 only, while the other ranks wait in a
 * barrier that sleeps instead of spinning (MPI implementations busy-poll,
 * which would steal rank 0's second core).  Inputs are synthetic, as in the
 * peer benchmarks: speed does not depend on the values. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 scaling [options]\n"
    "  --model NAME      resnet20 (3x32x32, 10 classes) or lenet (1x28x28) (resnet20)\n"
    "  --batch N         global batch (64)\n"
    "  --steps N         timed steps per configuration, after 3 warm-up steps (20)\n"
    "  --weak            keep the batch per rank: the global batch grows with the ranks\n"
    "  --exchange NAME   a2a (all-to-all + all-gather, the default) or allreduce\n"
    "  --threads N       threads per rank in the multi-rank run (1); the 1-rank runs use 1\n"
    "                    thread and as many threads as the multi-rank run uses cores\n";

/* ---- models (layer for layer the peers' models.py) --------------------- */

static pcnn_layer *lenet(pcnn_net *net)
{
    pcnn_layer *l;
    EX_CHECK(pcnn_net_input(net, 1, 28, 28, &l));
    EX_CHECK(pcnn_conv2d(net, l, 6, 5, 1, 2, 1, &l));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    EX_CHECK(pcnn_conv2d(net, l, 16, 5, 1, 0, 1, &l));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    EX_CHECK(pcnn_dense(net, l, 120, 1, &l));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_dense(net, l, 84, 1, &l));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_dense(net, l, 10, 1, &l));
    return l;
}

static pcnn_layer *conv_bn(pcnn_net *net, pcnn_layer *l, int cout, int k, int stride, int relu)
{
    EX_CHECK(pcnn_conv2d(net, l, cout, k, stride, k / 2, 0, &l));
    EX_CHECK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    if (relu) EX_CHECK(pcnn_relu(net, l, &l));
    return l;
}

/* CIFAR ResNet-20: 3 stages of 3 basic blocks (16, 32, 64 channels), with a
 * 1x1 conv + batch norm shortcut where the shape changes. */
static pcnn_layer *resnet20(pcnn_net *net)
{
    pcnn_layer *l;
    EX_CHECK(pcnn_net_input(net, 3, 32, 32, &l));
    l = conv_bn(net, l, 16, 3, 1, 1);
    int cin = 16;
    for (int stage = 0; stage < 3; stage++) {
        const int cout = 16 << stage;
        for (int b = 0; b < 3; b++) {
            const int stride = stage > 0 && b == 0 ? 2 : 1;
            pcnn_layer *y = conv_bn(net, l, cout, 3, stride, 1);
            y = conv_bn(net, y, cout, 3, 1, 0);
            pcnn_layer *shortcut = stride != 1 || cin != cout ? conv_bn(net, l, cout, 1, stride, 0)
                                                               : l;
            EX_CHECK(pcnn_add(net, y, shortcut, &l));
            EX_CHECK(pcnn_relu(net, l, &l));
            cin = cout;
        }
    }
    EX_CHECK(pcnn_global_avgpool(net, l, &l));
    EX_CHECK(pcnn_dense(net, l, 10, 1, &l));
    return l;
}

/* ---- one configuration ------------------------------------------------- */

typedef struct result {
    int ranks, threads, batch;
    double step, fwd, bwd, upd, comm, exposed, overlap;
} result;

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Train `steps` steps of the model over the ranks of `mpi_comm` and return
 * the per-step times of rank 0. */
static result run(MPI_Comm mpi_comm, const char *model, pcnn_exchange exchange, int batch,
                  int threads, int steps)
{
    pcnn_comm *comm;
    int rank, ranks;
    EX_CHECK(pcnn_comm_create(mpi_comm, &comm));
    EX_CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    pcnn_net *net;
    EX_CHECK(pcnn_net_create(&net));
    pcnn_layer *out = strcmp(model, "lenet") ? resnet20(net) : lenet(net);
    EX_CHECK(pcnn_net_set_loss(net, out, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_comm(net, comm));
    EX_CHECK(pcnn_net_set_exchange(net, exchange));
    ex_trace_enable(net, ex_trace_path(NULL)); /* PCNN_TRACE=FILE */
    EX_CHECK(pcnn_net_finalize(net, batch));

    /* This rank's share of a synthetic batch: uniform inputs, labels. */
    const size_t sample = strcmp(model, "lenet") ? 3 * 32 * 32 : 28 * 28;
    int first;
    const int mine = ex_share(batch, ranks, rank, &first);
    const size_t count = (size_t)mine * sample;
    float *x = ex_alloc(count * sizeof *x);
    int32_t *labels = ex_alloc((size_t)(mine ? mine : 1) * sizeof *labels);
    uint64_t seed = 12345 + (uint64_t)rank;
    for (size_t i = 0; i < count; i++) x[i] = (float)((double)lcg(&seed) / 2147483648.0 - 0.5) * 3;
    for (int i = 0; i < mine; i++) labels[i] = (int32_t)(lcg(&seed) % 10);

    for (int s = 0; s < 3 + steps; s++) {
        if (s == 3) EX_CHECK(pcnn_net_reset_timing(net)); /* forget the warm-up */
        EX_CHECK(pcnn_net_train_step(net, mine, mine ? x : NULL, mine ? labels : NULL, NULL,
                                     NULL));
    }
    result r = {.ranks = ranks, .threads = threads, .batch = batch};
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &r.step));
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &r.fwd));
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_BACKWARD, &r.bwd));
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_UPDATE, &r.upd));
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_COMM, &r.comm));
    EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_EXPOSED, &r.exposed));
    EX_CHECK(pcnn_net_overlap_ratio(net, &r.overlap));
    if (ranks > 1) ex_print_timing(net, rank); /* the multi-rank run in full */
    ex_trace_write(net, ex_trace_path(NULL), rank);
    free(x);
    free(labels);
    EX_CHECK(pcnn_net_destroy(&net));
    EX_CHECK(pcnn_comm_destroy(&comm));
    return r;
}

/* Wait for rank 0 without burning a core: poll a non-blocking barrier and
 * sleep a millisecond between polls. */
static void idle_barrier(MPI_Comm comm)
{
    MPI_Request req;
    int done = 0;
    EX_MPI(MPI_Ibarrier(comm, &req));
    while (!done) {
        EX_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (!done) nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

static void print_row(const char *what, const result *r, const result *base)
{
    const double ms = 1e3;
    printf("%-22s %6d %9.2f %9.0f %8.2fx %8.2f %8.2f %8.2f %8.2f %8.2f", what, r->batch,
           r->step * ms, r->batch / r->step, base->step / r->step * r->batch / base->batch,
           r->fwd * ms, r->bwd * ms, r->upd * ms, r->comm * ms, r->exposed * ms);
    if (r->comm > 0) printf("   %5.1f%%", r->overlap);
    printf("\n");
}

int main(int argc, char **argv)
{
    int provided, rank, ranks;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    EX_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    EX_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    ex_args_init(argc, argv, usage);
    const char *model = ex_arg_str("--model", "resnet20");
    const int batch = ex_arg_int("--batch", 64), steps = ex_arg_int("--steps", 20);
    const int weak = ex_arg_flag("--weak"), threads = ex_arg_int("--threads", 1);
    const char *xname = ex_arg_str("--exchange", "a2a");
    ex_args_done();
    if (strcmp(model, "resnet20") && strcmp(model, "lenet"))
        ex_fail("--model must be resnet20 or lenet, not '%s'", model);
    if (strcmp(xname, "a2a") && strcmp(xname, "allreduce"))
        ex_fail("--exchange must be a2a or allreduce, not '%s'", xname);
    if (batch < ranks || steps < 1 || threads < 1)
        ex_fail("need batch >= ranks (%d), steps >= 1, threads >= 1", ranks);
    const pcnn_exchange exchange =
        strcmp(xname, "a2a") ? PCNN_EXCHANGE_ALLREDUCE : PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    const int multi_batch = weak ? batch * ranks : batch;
    if (rank == 0) {
        printf("libpcnn %s: %s scaling of %s, %s exchange, %d timed steps per run "
               "(after 3 warm-up steps)\n",
               pcnn_version_string(), weak ? "weak" : "strong", model,
               exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "all-to-all + all-gather",
               steps);
        fflush(stdout);
    }

    /* 1 rank: rank 0 alone, with 1 thread, then with as many threads as the
     * multi-rank run occupies cores.  The others sleep meanwhile. */
    MPI_Comm solo;
    EX_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &solo));
    result one = {0}, one_wide = {0}, multi = {0};
    const int wide = ranks * threads;
    if (rank == 0) {
        one = run(solo, model, exchange, batch, 1, steps);
        if (wide > 1) one_wide = run(solo, model, exchange, multi_batch, wide, steps);
        EX_MPI(MPI_Comm_free(&solo));
    }
    idle_barrier(MPI_COMM_WORLD);
    if (ranks > 1) {
        if (rank == 0) printf("%d ranks x %d thread(s):\n", ranks, threads);
        multi = run(MPI_COMM_WORLD, model, exchange, multi_batch, threads, steps);
    }

    if (rank == 0) {
        printf("\n%-22s %6s %9s %9s %9s %8s %8s %8s %8s %8s %8s\n", "configuration", "batch",
               "ms/step", "images/s", "speedup", "forward", "backward", "update", "comm",
               "exposed", "overlap");
        char what[64];
        print_row("1 rank x 1 thread", &one, &one);
        if (wide > 1) {
            snprintf(what, sizeof what, "1 rank x %d threads", wide);
            print_row(what, &one_wide, &one);
        }
        if (ranks > 1) {
            snprintf(what, sizeof what, "%d ranks x %d thread%s", ranks, threads,
                     threads > 1 ? "s" : "");
            print_row(what, &multi, &one);
        }
        printf("speedup = throughput (images/s) relative to 1 rank x 1 thread; times are ms per "
               "step on rank 0;\ncomm = duration of the collectives, exposed = the part the "
               "computation waited for\n");
    }
    EX_MPI(MPI_Finalize());
    return 0;
}
