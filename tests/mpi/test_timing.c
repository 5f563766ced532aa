/* The timing breakdown and the Chrome trace of an overlapped parallel run:
 * every layer reports compute time, communication shows up at P > 1, the
 * report and the trace name what ran, and the numbers are consistent
 * (R in [0, 100], exposed <= step, per-layer sums equal the totals); a
 * failed step adds nothing to them, compute_gradients its passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

static int rank, ranks, failures;

#define CK(call)                                                                     \
    do {                                                                             \
        pcnn_status s_ = (call);                                                     \
        if (s_ != PCNN_OK) {                                                         \
            fprintf(stderr, "rank %d: %s -> %s: %s\n", rank, #call, pcnn_status_str(s_), \
                    pcnn_last_error());                                              \
            MPI_Abort(MPI_COMM_WORLD, 2);                                            \
        }                                                                            \
    } while (0)

static void expect(int ok, const char *what)
{
    if (!ok) failures++;
    printf("rank %d: %s %s\n", rank, ok ? "PASS" : "FAIL", what);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)len + 1, 1);
    if (text && fread(text, 1, (size_t)len, f) != (size_t)len) text[0] = '\0';
    fclose(f);
    return text;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));

    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 16, 16, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 0, &l));
    CK(pcnn_dense(net, l, 32, 1, &l));
    CK(pcnn_dense(net, l, 5, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, 64));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, 8));

    float x[8 * 3 * 16 * 16];
    int32_t y[8];
    for (int i = 0; i < 8 * 3 * 16 * 16; i++) x[i] = (float)((i * 37 + rank) % 17) / 17.0f;
    for (int i = 0; i < 8; i++) y[i] = i % 5;
    const int local = 8 / ranks;
    for (int step = 0; step < 3; step++) CK(pcnn_net_train_step(net, local, x, y, NULL, NULL));

    double step_s, forward_s, comm_s, exposed_s, r, sum_layers = 0.0;
    CK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &step_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &forward_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_COMM, &comm_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_EXPOSED, &exposed_s));
    CK(pcnn_net_overlap_ratio(net, &r));
    for (int i = 0; i < 7; i++) {
        double f;
        CK(pcnn_net_time(net, i, PCNN_TIME_FORWARD, &f));
        sum_layers += f;
    }
    double conv_forward;
    CK(pcnn_net_time(net, 1, PCNN_TIME_FORWARD, &conv_forward));
    expect(step_s > 0 && conv_forward > 0 && forward_s < step_s,
           "step and forward times are positive, forward < step");
    expect(fabs(sum_layers - forward_s) <= 1e-9 + 1e-9 * forward_s,
           "per-layer forward times add up to the network's");
    if (ranks > 1) {
        expect(comm_s > 0, "communication time is measured at P > 1");
        expect(r >= 0 && r <= 100, "overlap ratio within [0, 100]");
    } else {
        expect(comm_s == 0 && isnan(r), "no communication on one rank: R is NaN");
    }
    expect(exposed_s <= step_s, "exposed communication within the step");

    size_t need;
    CK(pcnn_net_timing_report(net, NULL, 0, &need));
    char *report = malloc(need + 1);
    CK(pcnn_net_timing_report(net, report, need + 1, NULL));
    expect(strstr(report, "conv2d") && strstr(report, "overlap ratio") &&
               strlen(report) == need,
           "the timing report lists the layers and R");
    free(report);

    char path[64];
    snprintf(path, sizeof path, "trace_test_rank%d.json", rank);
    CK(pcnn_net_write_trace(net, path));
    char *trace = slurp(path);
    expect(trace && strstr(trace, "\"traceEvents\"") && strstr(trace, "forward 1 conv2d") &&
               strstr(trace, "backward 5 dense") && (ranks == 1 || strstr(trace, "allgather")),
           "the trace holds compute and communication spans");
    expect(trace && strchr(trace, '[') && trace[strlen(trace) - 2] == '}',
           "the trace is a closed JSON document");
    free(trace);
    remove(path);

    CK(pcnn_net_reset_timing(net));
    CK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &step_s));
    expect(step_s == 0, "reset clears the timings");

    /* A step that fails adds nothing to the per-step figures; the passes
     * of compute_gradients are there (a host's own loop reads them). */
    static float big[8 * 3 * 16 * 16];
    for (int i = 0; i < 8 * 3 * 16 * 16; i++) big[i] = 3e38f; /* finite; the sums overflow */
    const pcnn_status failed = pcnn_net_train_step(net, local, big, y, NULL, NULL);
    double backward_s;
    CK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &forward_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_BACKWARD, &backward_s));
    expect(failed == PCNN_ERR_NUMERIC && forward_s == 0 && backward_s == 0,
           "a failed step adds no time");
    float loss;
    CK(pcnn_net_compute_gradients(net, local, x, y, NULL, &loss));
    CK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &forward_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_BACKWARD, &backward_s));
    expect(forward_s > 0 && backward_s > 0, "compute_gradients: its passes are timed");
    CK(pcnn_net_reset_timing(net));
    CK(pcnn_net_train_step(net, local, x, y, NULL, NULL));
    CK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &forward_s));
    CK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &step_s));
    expect(forward_s > 0 && forward_s < step_s, "the next step counts as one");

    pcnn_net_destroy(&net);
    CK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return failures ? 1 : 0;
}
