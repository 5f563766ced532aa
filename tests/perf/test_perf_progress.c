/* The calibrations' progress through the model's log callback
 * (pcnn_perfmodel_set_log_callback), under mpiexec with 1 or 2 ranks:
 *   1. calibrate_comm reports its start with the budget, the summation,
 *      and on 2 ranks the memory contention, one line per collective's
 *      sweep naming its sizes, the nonblocking progress and its end, in
 *      that order, every line at INFO, one line without a newline each;
 *   2. calibrate_compute reports its start (the layer count), the warm-up
 *      and repetitions, each batch timed, and its end; calibrate_pace its
 *      pace;
 *   3. the callback survives pcnn_perfmodel_share (the host's, not the
 *      root's); removed (NULL), nothing more is heard;
 *   4. a NULL model is INVALID_ARGUMENT. */
#define PCNN_EXPERIMENTAL
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"

#define MAX_LINES 64
typedef struct heard {
    int count, not_info, with_newline;
    char lines[MAX_LINES][256];
} heard;

static void on_log(void *user, pcnn_log_level level, const char *message)
{
    heard *h = user;
    if (level != PCNN_LOG_INFO) h->not_info++;
    if (strchr(message, '\n')) h->with_newline++;
    if (h->count < MAX_LINES) snprintf(h->lines[h->count], sizeof h->lines[0], "%s", message);
    h->count++;
}

/* The index of the first line from `from` on that contains `text`, or -1. */
static int find(const heard *h, int from, const char *text)
{
    for (int i = from; i < h->count && i < MAX_LINES; i++)
        if (strstr(h->lines[i], text)) return i;
    return -1;
}

/* Do the texts appear in this order? */
static int in_order(const heard *h, const char *const *texts, int n)
{
    int at = 0;
    for (int i = 0; i < n; i++) {
        const int found = find(h, at, texts[i]);
        if (found < 0) {
            if (rank == 0) printf("  missing after line %d: \"%s\"\n", at, texts[i]);
            return 0;
        }
        at = found + 1;
    }
    return 1;
}

static void print(const heard *h)
{
    for (int i = 0; rank == 0 && i < h->count && i < MAX_LINES; i++)
        printf("  [%d] %s\n", i, h->lines[i]);
}

static pcnn_net *small_net(void)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 8, 8, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, 8));
    return net;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    heard *h = calloc(1, sizeof *h);
    CK(pcnn_perfmodel_set_log_callback(m, on_log, h));

    /* 1. The link. */
    CK(pcnn_perfmodel_calibrate_comm(m, comm, 0.5));
    print(h);
    if (ranks == 1) {
        const char *const want[] = {"calibrate_comm: 1 rank(s), budget 0.5 s",
                                    "calibrate_comm: summation timed, gamma",
                                    "calibrate_comm: one rank, no link to measure: done"};
        expect(in_order(h, want, 3) && h->count == 3, "calibrate_comm on one rank: 3 lines");
    } else {
        const char *const want[] = {"calibrate_comm: 2 rank(s), budget 0.5 s",
                                    "calibrate_comm: summation timed",
                                    "calibrate_comm: memory contention timed",
                                    "calibrate_comm: all-reduce swept",
                                    "calibrate_comm: all-to-all swept",
                                    "calibrate_comm: all-gather swept",
                                    "calibrate_comm: send-recv swept",
                                    "calibrate_comm: nonblocking progress timed",
                                    "calibrate_comm: done in"};
        expect(in_order(h, want, 9) && h->count == 9,
               "calibrate_comm: start, summation, contention, 4 sweeps, progress, end");
        expect(find(h, 0, "sizes 8 B..") >= 0 || find(h, 0, "1 size (8 B)") >= 0,
               "a sweep names its sizes from 8 B");
    }
    expect(h->not_info == 0 && h->with_newline == 0, "INFO lines without a newline");

    /* 2. The layers and the pace. */
    pcnn_net *net = small_net();
    h->count = 0;
    CK(pcnn_perfmodel_calibrate_compute(m, net, 0.3));
    CK(pcnn_perfmodel_calibrate_pace(m, comm));
    print(h);
    const char *const compute[] = {"calibrate_compute: 4 layers at batches 8 and 4",
                                   "calibrate_compute: warm-up pass",
                                   "calibrate_compute: batch 8 timed",
                                   "calibrate_compute: batch 4 timed",
                                   "calibrate_compute: done in",
                                   "calibrate_pace: the slowest rank's step"};
    expect(in_order(h, compute, 6) && h->count == 6,
           "calibrate_compute: start, warm-up, both batches, end; calibrate_pace: the pace");

    /* 3. Kept through share; removed. */
    CK(pcnn_perfmodel_share(m, comm, 0));
    h->count = 0;
    CK(pcnn_perfmodel_calibrate_pace(m, comm));
    expect(h->count == 1, "the callback outlives pcnn_perfmodel_share");
    CK(pcnn_perfmodel_set_log_callback(m, NULL, h));
    h->count = 0;
    CK(pcnn_perfmodel_calibrate_pace(m, comm));
    expect(h->count == 0, "removed: nothing heard");

    /* 4. */
    expect(pcnn_perfmodel_set_log_callback(NULL, on_log, h) == PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "model is NULL"),
           "a NULL model: INVALID_ARGUMENT");

    CK(pcnn_net_destroy(&net));
    CK(pcnn_perfmodel_destroy(&m));
    CK(pcnn_comm_destroy(&comm));
    free(h);
    const int result = failures;
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return result ? 1 : 0;
}
