/* The step and log callbacks, on 1 or more ranks:
 *   1. the step callback sees every step of an epoch (step counter, batch
 *      index, batch count, the global loss, the same on every rank);
 *   2. the last rank alone asks to stop after the second step: every rank
 *      returns PCNN_OK after two steps, agrees that the epoch stopped early,
 *      and the next epoch runs whole; a request after the last step stops
 *      nothing;
 *   3. the log callback hears a convolution algorithm that does not apply
 *      (taps asked for a strided convolution) and nothing for one it does;
 *   4. (2 ranks or more) one rank destroys its network: the others' step
 *      times out and the log callback hears of it once. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"
#include "../common/mpi_check.h"

enum { N = 32, BATCH = 8, SAMPLE = 3 * 8 * 8 };

typedef struct seen {
    int calls, stop_at_batch; /* -1: never stop */
    int64_t steps[16];
    int batches[16], of[16];
    double losses[16];
} seen;

static int on_step(void *user, int64_t step, int batch, int batches, double loss)
{
    seen *s = user;
    if (s->calls < 16) {
        s->steps[s->calls] = step;
        s->batches[s->calls] = batch;
        s->of[s->calls] = batches;
        s->losses[s->calls] = loss;
    }
    s->calls++;
    return batch == s->stop_at_batch;
}

typedef struct logged {
    int count, warnings;
    char last[512];
} logged;

static void on_log(void *user, pcnn_log_level level, const char *message)
{
    logged *l = user;
    l->count++;
    if (level == PCNN_LOG_WARNING) {
        l->warnings++;
        snprintf(l->last, sizeof l->last, "%s", message);
    }
}

static pcnn_net *build(pcnn_comm *comm, int stride, int algorithm, logged *log, long timeout)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (log) CK(pcnn_net_set_log_callback(net, on_log, log));
    CK(pcnn_net_input(net, 3, 8, 8, &l));
    CK(pcnn_conv2d(net, l, 4, 3, stride, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 1, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    if (timeout) CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, (double)timeout));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

static double step_counter(const pcnn_net *net)
{
    double s;
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &s));
    return s;
}

static int same_everywhere(double v)
{
    double lo = v, hi = v;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

static void step_callbacks(pcnn_comm *comm, pcnn_dataset *data)
{
    pcnn_net *net = build(comm, 1, 0, NULL, 0);
    seen s = {.stop_at_batch = -1};
    CK(pcnn_net_set_step_callback(net, on_step, &s));
    double mean;
    CK(pcnn_net_train_epoch(net, data, BATCH, &mean));
    int ok = s.calls == N / BATCH;
    double sum = 0.0;
    for (int k = 0; ok && k < s.calls; k++) {
        ok &= s.steps[k] == k && s.batches[k] == k && s.of[k] == N / BATCH;
        ok &= isfinite(s.losses[k]) && s.losses[k] > 0 && same_everywhere(s.losses[k]);
        sum += s.losses[k];
    }
    expect(ok, "the step callback sees each step: counter, batch, batches and the global loss");
    expect(fabs(sum / s.calls - mean) < 1e-6 * mean,
           "the epoch's mean loss is the mean of the losses the callback saw");
    int stopped = -1;
    CK(pcnn_net_stopped_early(net, &stopped));
    expect(stopped == 0, "a whole epoch did not stop early");

    /* Only the last rank asks, after the second step (batch 1); without a
     * communicator every rank has a network of its own, and asks. */
    s = (seen){.stop_at_batch = !comm || rank == ranks - 1 ? 1 : -1};
    const double before = step_counter(net);
    const pcnn_status st = pcnn_net_train_epoch(net, data, BATCH, &mean);
    CK(pcnn_net_stopped_early(net, &stopped));
    expect(st == PCNN_OK && stopped == 1 && same_everywhere(stopped),
           "one rank's request stops the epoch on every rank, PCNN_OK everywhere");
    expect(step_counter(net) == before + 2 && s.calls == 2 && same_everywhere(s.calls),
           "every rank made exactly the two steps before the request");
    expect(fabs(mean - 0.5 * (s.losses[0] + s.losses[1])) < 1e-6 * mean && same_everywhere(mean),
           "the mean loss covers the steps trained, the same on every rank");

    s = (seen){.stop_at_batch = -1};
    CK(pcnn_net_train_epoch(net, data, BATCH, &mean));
    CK(pcnn_net_stopped_early(net, &stopped));
    expect(s.calls == N / BATCH && stopped == 0, "the next epoch runs whole");

    s = (seen){.stop_at_batch = !comm || rank == 0 ? N / BATCH - 1 : -1};
    const double at = step_counter(net);
    CK(pcnn_net_train_epoch(net, data, BATCH, &mean));
    CK(pcnn_net_stopped_early(net, &stopped));
    expect(step_counter(net) == at + N / BATCH && stopped == 0,
           "a request after the last step stops nothing");

    CK(pcnn_net_set_step_callback(net, NULL, NULL));
    s.calls = 0;
    CK(pcnn_net_train_epoch(net, data, BATCH, &mean));
    expect(s.calls == 0, "a removed callback is not called");
    expect(pcnn_net_set_step_callback(NULL, on_step, NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_stopped_early(net, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "NULL arguments are refused");
    CK(pcnn_net_destroy(&net));
}

static void log_fallbacks(pcnn_comm *comm)
{
    logged log = {0};
    pcnn_net *net = build(comm, 2, 3, &log, 0); /* taps asked; layer 1 has stride 2 */
    expect(log.warnings == 1 && strstr(log.last, "layer 1 (conv2d)") &&
               strstr(log.last, "gemm (taps need stride 1)"),
           "the log callback hears the one convolution where taps do not apply");
    CK(pcnn_net_destroy(&net));
    log = (logged){0};
    net = build(comm, 1, 3, &log, 0);
    expect(log.warnings == 0, "no warning when the algorithm asked for applies everywhere");
    CK(pcnn_net_destroy(&net));
}

static void log_timeout(pcnn_dataset *data)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    logged log = {0};
    pcnn_net *net = build(comm, 1, 0, &log, 500);
    double mean;
    CK(pcnn_net_train_epoch(net, data, BATCH, &mean));
    const int quiet = log.warnings == 0;
    pcnn_status st = PCNN_OK;
    if (rank == ranks - 1) {
        CK(pcnn_net_destroy(&net));
    } else {
        st = pcnn_net_train_epoch(net, data, BATCH, &mean);
        (void)pcnn_net_train_epoch(net, data, BATCH, &mean); /* refused: no second message */
    }
    const int heard = rank == ranks - 1 ? log.warnings == 0
                                        : st == PCNN_ERR_TIMEOUT && log.warnings == 1 &&
                                              strstr(log.last, "timed out") != NULL;
    expect(quiet && heard, "the log callback hears once that a collective timed out");
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    float *x = malloc(sizeof(float) * N * SAMPLE);
    int32_t labels[N];
    for (int i = 0; i < N * SAMPLE; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N; i++) labels[i] = (i * 3) % 10;
    pcnn_dataset *data;
    CK(pcnn_dataset_create(N, 3, 8, 8, x, labels, NULL, 0, &data));
    pcnn_comm *comm = NULL;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));

    step_callbacks(comm, data);
    step_callbacks(NULL, data); /* networks of one process */
    log_fallbacks(comm);
    CK(pcnn_comm_destroy(&comm));
    if (ranks > 1) log_timeout(data);

    CK(pcnn_dataset_destroy(&data));
    free(x);
    if (rank == 0) printf("%d checks, %d failed\n", checks, failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
