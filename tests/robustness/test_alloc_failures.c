/* Out of memory at every allocation point (SQLite-style).
 *
 * A scenario exercises every public call that allocates: building a network
 * with every layer type, options, finalize (Adam state, trace ring),
 * training steps, epochs, evaluation, summaries, a Chrome trace, in-memory
 * and IDX datasets (one gzip-compressed), a second network trained
 * through a (one-rank) communicator, and a third of volumes (conv3d with its
 * kept vol2col matrix, 3D pools) trained from a dataset of volumes.  A reference run counts its N
 * allocations (lib/core/memory.h's hook: every mem_alloc / mem_calloc /
 * mem_realloc) and records its results; then for n = 1..N the scenario runs
 * again with allocation n failing.  For each n:
 *   - the call during which allocation n happens must fail with
 *     PCNN_ERR_OUT_OF_MEMORY (no other status, no later call, no success:
 *     a swallowed failure is an error);
 *   - retrying that call must succeed and the scenario must end with results
 *     bitwise equal to the reference (a failed call changed nothing) -
 *     except pcnn_net_finalize, whose documented answer to a retry is
 *     INVALID_STATE "a previous finalize failed";
 *   - its message names that call, once, wherever the allocation was
 *     (tests/common/api_message.h);
 *   - after everything is destroyed, no block is live (no leak).
 * Also: training steps, epochs, evaluation and prediction allocate nothing.
 *
 * Links the internal static library, which always has the hook. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_KEEP_IM2COL, PCNN_OPT_CONV_ALGORITHM, 3D: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/api_message.h"
#include "core/memory.h"
#include "pcnn.h"

#define N_SAMPLES 8
#define C 4
#define H 8
#define W 8
#define CLASSES 3
#define MAXB 4

static float g_x[N_SAMPLES * C * H * W];
static int32_t g_lab[N_SAMPLES];
static float g_t[N_SAMPLES * 2]; /* regression targets of the volumes */
static char g_images[64], g_labels[64], g_trace[64];

/* What a scenario produced, compared with the reference run. */
typedef struct result {
    float losses[4];
    double epoch_loss, eval_loss, eval_acc, idx_loss, vol_loss;
    float pred[2 * CLASSES];
    uint32_t params_crc, idx_params_crc, vol_params_crc;
    size_t summary_len;
    bool finished;
} result;

/* How one run went. */
typedef struct run {
    long fail_at;           /* the injected allocation (0: none) */
    result res;
    const char *failed_call;/* the call that reported the failure */
    pcnn_status failed_st;
    char message[512];
    long before_call;       /* allocations before that call */
    int retried;            /* failed calls that succeeded on retry */
    bool finalize_failed;   /* ended at a failed finalize */
    bool step_allocated;    /* a training/inference call allocated */
    bool bad;               /* an unexpected outcome (message printed) */
} run;

static void fail_run(run *r, const char *fmt, const char *call, pcnn_status st)
{
    r->bad = true;
    fprintf(stderr, "FAIL allocation %ld: ", r->fail_at);
    fprintf(stderr, fmt, call, pcnn_status_str(st));
    fprintf(stderr, " (%s)\n", pcnn_last_error());
}

/* A failing call: it must be the one during which allocation n happened,
 * and report OUT_OF_MEMORY.  Returns true if the scenario may retry it. */
static bool on_failure(run *r, const char *call, pcnn_status st, long before)
{
    const long after = pcnn_debug_allocations();
    if (r->failed_call) {
        fail_run(r, "%s failed (%s) after an earlier failure was retried", call, st);
        return false;
    }
    r->failed_call = call;
    r->failed_st = st;
    r->before_call = before;
    snprintf(r->message, sizeof r->message, "%s", pcnn_last_error());
    if (r->fail_at == 0) fail_run(r, "%s failed (%s) without any injected failure", call, st);
    else if (!(before < r->fail_at && r->fail_at <= after))
        fail_run(r, "%s failed (%s) but the injected failure was elsewhere", call, st);
    else if (st != PCNN_ERR_OUT_OF_MEMORY)
        fail_run(r, "%s answered an allocation failure with %s, not out of memory", call, st);
    else {
        char func[64];
        snprintf(func, sizeof func, "%.*s", (int)strcspn(call, "("), call);
        const char *why = api_message_problem(r->message, func);
        if (why) {
            r->bad = true;
            fprintf(stderr, "FAIL allocation %ld: %s: the message %s: \"%s\"\n", r->fail_at,
                    call, why, r->message);
        }
    }
    return !r->bad;
}

/* Run `call`; on failure check it and retry once (the hook fails only once). */
#define STEP(call)                                                              \
    do {                                                                        \
        long before_ = pcnn_debug_allocations();                                \
        pcnn_status st_ = (call);                                               \
        if (st_ != PCNN_OK) {                                                   \
            if (!on_failure(r, #call, st_, before_)) goto done;                 \
            st_ = (call);                                                       \
            if (st_ != PCNN_OK) {                                               \
                fail_run(r, "retrying %s failed with %s", #call, st_);          \
                goto done;                                                      \
            }                                                                   \
            r->retried++;                                                       \
        }                                                                       \
    } while (0)

/* Training and inference must not allocate at all. */
#define NO_ALLOC_STEP(call)                                                     \
    do {                                                                        \
        long before_ = pcnn_debug_allocations();                                \
        STEP(call);                                                             \
        if (pcnn_debug_allocations() != before_) {                              \
            r->step_allocated = true;                                           \
            fail_run(r, "%s allocated (%s)", #call, PCNN_OK);                   \
        }                                                                       \
    } while (0)

/* Finalize: a failure is final by contract.  Check the retry answer. */
#define FINALIZE(net, batch)                                                    \
    do {                                                                        \
        long before_ = pcnn_debug_allocations();                                \
        pcnn_status st_ = pcnn_net_finalize(net, batch);                        \
        if (st_ != PCNN_OK) {                                                   \
            if (!on_failure(r, "pcnn_net_finalize", st_, before_)) goto done;  \
            st_ = pcnn_net_finalize(net, batch);                                \
            if (st_ != PCNN_ERR_INVALID_STATE ||                                \
                !strstr(pcnn_last_error(), "a previous finalize failed"))       \
                fail_run(r, "%s: retry answered %s, not INVALID_STATE", "finalize", st_); \
            r->finalize_failed = true;                                          \
            goto done;                                                          \
        }                                                                       \
    } while (0)

static uint32_t crc_params(const pcnn_net *net, float *buf, size_t count)
{
    if (pcnn_net_get_params(net, buf, count) != PCNN_OK) return 0;
    return (uint32_t)crc32(0, (const unsigned char *)buf, (uInt)(count * sizeof(float)));
}

static void scenario(run *r)
{
    pcnn_net *net = NULL, *net2 = NULL, *net3 = NULL;
    pcnn_dataset *data = NULL, *idx = NULL, *vol = NULL;
    pcnn_comm *comm = NULL;
    float *buf = NULL;
    pcnn_layer *in, *a, *b, *c, *d, *e, *f, *g, *h, *k, *l, *m, *o, *y, *y2, *in2, *v;
    result *res = &r->res;

    /* Every layer type; a residual add makes the graph a DAG. */
    STEP(pcnn_net_create(&net));
    STEP(pcnn_net_input(net, C, H, W, &in));
    STEP(pcnn_conv2d(net, in, 8, 3, 1, 1, 0, &a));       /* (8, 8, 8) */
    STEP(pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b));
    STEP(pcnn_relu(net, b, &c));
    STEP(pcnn_pixel_shuffle(net, c, 2, &d));             /* (2, 16, 16) */
    STEP(pcnn_conv2d(net, d, C, 3, 2, 1, 1, &e));        /* (4, 8, 8) */
    STEP(pcnn_add_scaled(net, in, e, 0.5f, &f));
    STEP(pcnn_leaky_relu(net, f, 0.1f, &g));
    STEP(pcnn_maxpool2d(net, g, 2, 2, 0, &h));           /* (4, 4, 4) */
    STEP(pcnn_dropout(net, h, 0.25f, &k));
    STEP(pcnn_avgpool2d(net, k, 3, 1, 1, &l));           /* (4, 4, 4) */
    STEP(pcnn_add(net, l, h, &m));
    STEP(pcnn_global_avgpool(net, m, &o));               /* (4, 1, 1) */
    STEP(pcnn_flatten(net, o, &o));
    STEP(pcnn_dense(net, o, CLASSES, 1, &y));
    STEP(pcnn_layer_set_init(y, PCNN_INIT_GLOROT_UNIFORM));
    STEP(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    STEP(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    STEP(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    STEP(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    STEP(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, 64));
    STEP(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, 1));
    FINALIZE(net, MAXB);

    size_t np = 0;
    STEP(pcnn_net_num_params(net, &np));
    buf = malloc((np + N_SAMPLES * C * H * W) * sizeof(float)); /* the test's own memory */
    if (!buf) goto done;
    STEP(pcnn_dataset_create(N_SAMPLES, C, H, W, g_x, g_lab, NULL, 0, &data));
    STEP(pcnn_dataset_shuffle(data, 3, 1));
    NO_ALLOC_STEP(pcnn_net_train_step(net, MAXB, g_x, g_lab, NULL, &res->losses[0]));
    NO_ALLOC_STEP(pcnn_net_train_step(net, 2, g_x + 2 * C * H * W, g_lab + 2, NULL,
                                      &res->losses[1]));
    NO_ALLOC_STEP(pcnn_net_train_epoch(net, data, MAXB, &res->epoch_loss));
    NO_ALLOC_STEP(pcnn_net_compute_gradients(net, 3, g_x, g_lab, NULL, &res->losses[2]));
    NO_ALLOC_STEP(pcnn_net_get_input_grad(net, buf, 3 * C * H * W));
    NO_ALLOC_STEP(pcnn_net_compute_loss(net, 2, g_x, g_lab, NULL, &res->losses[3]));
    NO_ALLOC_STEP(pcnn_net_evaluate(net, data, &res->eval_loss, &res->eval_acc));
    NO_ALLOC_STEP(pcnn_net_predict(net, 2, g_x, res->pred, 2 * CLASSES));
    char text[4096];
    STEP(pcnn_net_summary(net, text, sizeof text, &res->summary_len));
    size_t needed;
    STEP(pcnn_net_timing_report(net, text, sizeof text, &needed));
    STEP(pcnn_net_write_trace(net, g_trace));
    res->params_crc = crc_params(net, buf, np);

    /* A second network, over a communicator of one rank, trained from IDX
     * files (the labels gzip-compressed). */
    STEP(pcnn_dataset_load_idx(g_images, g_labels, 0.5f, 0.25f, &idx));
    STEP(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    STEP(pcnn_net_create(&net2));
    STEP(pcnn_net_input(net2, 1, 6, 6, &in2));
    STEP(pcnn_conv2d(net2, in2, 2, 3, 1, 0, 1, &y2));
    STEP(pcnn_dense(net2, y2, CLASSES, 1, &y2));
    STEP(pcnn_net_set_loss(net2, y2, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    STEP(pcnn_net_set_optimizer(net2, PCNN_OPTIMIZER_MOMENTUM));
    STEP(pcnn_net_set_option(net2, PCNN_OPT_THREADS, 1));
    STEP(pcnn_net_set_option(net2, PCNN_OPT_CONV_ALGORITHM, 3)); /* keeps repacked weights */
    STEP(pcnn_net_set_comm(net2, comm));
    FINALIZE(net2, MAXB);
    NO_ALLOC_STEP(pcnn_net_train_epoch(net2, idx, 3, &res->idx_loss));
    size_t np2 = 0;
    STEP(pcnn_net_num_params(net2, &np2));
    res->idx_params_crc = np2 <= np ? crc_params(net2, buf, np2) : 0;

    /* Volumes: (2, 4, 4, 4) samples with 2 targets each. */
    STEP(pcnn_dataset_create3d(N_SAMPLES, 2, 4, 4, 4, g_x, NULL, g_t, 2, &vol));
    STEP(pcnn_net_create(&net3));
    STEP(pcnn_net_input3d(net3, 2, 4, 4, 4, &v));
    STEP(pcnn_conv3d(net3, v, 3, 3, 1, 1, 1, &v));
    STEP(pcnn_maxpool3d(net3, v, 2, 2, 0, &v));
    STEP(pcnn_avgpool3d(net3, v, 3, 1, 1, &v));
    STEP(pcnn_dense(net3, v, 2, 1, &v));
    STEP(pcnn_net_set_loss(net3, v, PCNN_LOSS_MSE));
    STEP(pcnn_net_set_option(net3, PCNN_OPT_THREADS, 1));
    STEP(pcnn_net_set_option(net3, PCNN_OPT_KEEP_IM2COL, 1));
    FINALIZE(net3, MAXB);
    NO_ALLOC_STEP(pcnn_net_train_epoch(net3, vol, 3, &res->vol_loss));
    size_t np3 = 0;
    STEP(pcnn_net_num_params(net3, &np3));
    res->vol_params_crc = np3 <= np ? crc_params(net3, buf, np3) : 0;
    res->finished = true;

done:
    pcnn_net_destroy(&net3);
    pcnn_dataset_destroy(&vol);
    pcnn_net_destroy(&net2);
    pcnn_comm_destroy(&comm);
    pcnn_net_destroy(&net);
    pcnn_dataset_destroy(&data);
    pcnn_dataset_destroy(&idx);
    free(buf);
}

static bool same_result(const result *a, const result *b)
{
    return a->finished && b->finished && memcmp(a->losses, b->losses, sizeof a->losses) == 0 &&
           a->epoch_loss == b->epoch_loss && a->eval_loss == b->eval_loss &&
           a->eval_acc == b->eval_acc && a->idx_loss == b->idx_loss &&
           a->vol_loss == b->vol_loss && a->vol_params_crc == b->vol_params_crc &&
           memcmp(a->pred, b->pred, sizeof a->pred) == 0 && a->params_crc == b->params_crc &&
           a->idx_params_crc == b->idx_params_crc && a->summary_len == b->summary_len;
}

static void write_idx_files(void)
{
    /* 5 images of 6x6 (raw IDX) and their labels (gzip). */
    unsigned char img[16 + 5 * 36] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 6};
    for (int i = 0; i < 5 * 36; i++) img[16 + i] = (unsigned char)(i * 53 % 256);
    unsigned char lab[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 0, 2, 1, 1, 0};
    strcpy(g_images, "/tmp/pcnn-oom-img-XXXXXX");
    strcpy(g_labels, "/tmp/pcnn-oom-lab-XXXXXX");
    strcpy(g_trace, "/tmp/pcnn-oom-trace-XXXXXX");
    int fi = mkstemp(g_images), fl = mkstemp(g_labels), ft = mkstemp(g_trace);
    if (fi < 0 || fl < 0 || ft < 0 || write(fi, img, sizeof img) != (ssize_t)sizeof img) {
        fprintf(stderr, "cannot write temporary files\n");
        exit(1);
    }
    close(fi);
    close(ft);
    gzFile gz = gzdopen(fl, "wb");
    if (!gz || gzwrite(gz, lab, sizeof lab) != (int)sizeof lab || gzclose(gz) != Z_OK) {
        fprintf(stderr, "cannot write the gzip labels\n");
        exit(1);
    }
}

int main(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    for (int i = 0; i < N_SAMPLES * C * H * W; i++) g_x[i] = (float)((i * 29) % 97) / 97.0f - 0.5f;
    for (int i = 0; i < N_SAMPLES; i++) g_lab[i] = (int32_t)(i * 7 % CLASSES);
    for (int i = 0; i < N_SAMPLES * 2; i++) g_t[i] = (float)(i % 5) * 0.25f - 0.5f;
    write_idx_files();

    int failures = 0;
    const long live0 = pcnn_debug_live_allocations();
    run ref = {0};
    pcnn_debug_fail_allocation(0);
    scenario(&ref);
    const long total = pcnn_debug_allocations();
    if (ref.bad || !ref.res.finished || ref.failed_call) {
        fprintf(stderr, "FAIL the reference run did not finish: %s: %s\n",
                ref.failed_call ? ref.failed_call : "?", ref.message);
        return 1;
    }
    if (pcnn_debug_live_allocations() != live0) {
        fprintf(stderr, "FAIL the reference run leaks %ld blocks\n",
                pcnn_debug_live_allocations() - live0);
        failures++;
    }
    if (total < 50) {
        fprintf(stderr, "FAIL only %ld allocations: is the hook compiled in?\n", total);
        failures++;
    }

    const bool verbose = getenv("PCNN_TEST_VERBOSE") != NULL; /* list every point */
    int retried = 0, finalize_failures = 0, leaks = 0;
    for (long n = 1; n <= total; n++) {
        run r = {.fail_at = n};
        const long live_before = pcnn_debug_live_allocations();
        pcnn_debug_fail_allocation(n);
        scenario(&r);
        pcnn_debug_fail_allocation(0);
        const long live = pcnn_debug_live_allocations() - live_before;
        if (!r.failed_call && !r.bad)
            fail_run(&r, "%s: allocation failure swallowed (every call succeeded)%s", "", PCNN_OK);
        if (r.failed_call && !r.bad && !r.finalize_failed && !same_result(&r.res, &ref.res))
            fail_run(&r, "after retrying %s the results differ from the reference (%s)",
                     r.failed_call, r.failed_st);
        if (live != 0) {
            fprintf(stderr, "FAIL allocation %ld (in %s): %ld blocks leaked\n", n,
                    r.failed_call ? r.failed_call : "?", live);
            leaks++;
            r.bad = true;
        }
        if (verbose)
            printf("allocation %3ld: %-40.40s %s\n", n, r.failed_call ? r.failed_call : "-",
                   r.message);
        failures += r.bad;
        retried += r.retried;
        finalize_failures += r.finalize_failed;
    }
    /* Failing allocation total + 1 never happens: the walk is complete. */
    run past = {.fail_at = total + 1};
    pcnn_debug_fail_allocation(total + 1);
    scenario(&past);
    pcnn_debug_fail_allocation(0);
    if (past.failed_call || !same_result(&past.res, &ref.res)) {
        fprintf(stderr, "FAIL the scenario is not deterministic in its allocations\n");
        failures++;
    }
    unlink(g_images);
    unlink(g_labels);
    unlink(g_trace);
    MPI_Finalize();
    printf("%ld allocation points walked: %d recovered by retrying the call, %d at finalize "
           "(rebuild required), %d leaks\n",
           total, retried, finalize_failures, leaks);
    printf("%ld passed, %d failed\n", total - failures, failures);
    return failures ? 1 : 0;
}
