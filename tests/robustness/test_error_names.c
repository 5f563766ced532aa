/* Error messages name the public function the host called, once
 * (lib/core/error.h's API scope), wherever the failure is found:
 *   - deep inside finalize, by the planner, for an impossible network;
 *   - inside a public function the library calls itself (an epoch's steps);
 *   - in the checkpoint code, which re-states its helpers' messages, and in
 *     the scheduler, for a damaged file or blob and at every allocation
 *     (tests/robustness/test_alloc_failures.c walks the other calls);
 *   - on two threads at once, each failing its own calls.
 * Every message is checked with tests/common/api_message.h: it starts with
 * "<function>: " and names no other function.  Links the internal static
 * library for the allocation-failure hook. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/api_message.h"
#include "core/memory.h"
#include "pcnn.h"

#define C 2
#define H 6
#define W 6
#define CLASSES 3
#define MAXB 4

static int failures;
static float g_x[8 * C * H * W];
static int32_t g_lab[8];
static char g_path[64], g_bad_path[64];

#define OK(call)                                                                      \
    do {                                                                              \
        pcnn_status ok_ = (call);                                                     \
        if (ok_ != PCNN_OK) {                                                         \
            fprintf(stderr, "setup failed at line %d: %s -> %s: %s\n", __LINE__,      \
                    #call, pcnn_status_str(ok_), pcnn_last_error());                  \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

/* A failed call: its status and the shape of its message. */
static void expect_named(int line, pcnn_status got, pcnn_status want, const char *func,
                         const char *text)
{
    const char *msg = pcnn_last_error();
    const char *why = got != want ? "status" : api_message_problem(msg, func);
    if (!why && text && !strstr(msg, text)) why = "message lacks the expected text";
    if (!why) return;
    failures++;
    fprintf(stderr, "FAIL line %d: %s: %s (%s, want %s): \"%s\"\n", line, func, why,
            pcnn_status_str(got), pcnn_status_str(want), msg);
}

#define EXPECT_NAMED(want, text, fn, ...)                                             \
    expect_named(__LINE__, fn(__VA_ARGS__), want, #fn, text)

/* conv 3x3 -> relu -> dense, cross entropy, momentum (optimizer state for
 * the checkpoint), planned for `max_batch` samples (0: not finalized). */
static pcnn_status build(pcnn_net **out, int channels, int max_batch)
{
    pcnn_net *net;
    pcnn_layer *in, *a, *y;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input(net, channels, H, W, &in));
    OK(pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &a));
    OK(pcnn_relu(net, a, &a));
    OK(pcnn_dense(net, a, CLASSES, 1, &y));
    OK(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    OK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    *out = net;
    if (max_batch == 0) return PCNN_OK; /* the caller finalizes */
    pcnn_status st = pcnn_net_finalize(net, max_batch);
    if (st != PCNN_OK) pcnn_net_destroy(out);
    return st;
}

/* Finalize fails in its helpers: the graph check (a layer that leads to
 * nothing: a dead end), the size check (2^30 samples), and every allocation of
 * the planner, the layers' setup and the profiler.  Each message names
 * pcnn_net_finalize. */
static void impossible_finalize(void)
{
    pcnn_net *net;
    pcnn_layer *in, *a, *y;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input(net, C, H, W, &in));
    OK(pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &a));
    OK(pcnn_relu(net, a, &y));
    OK(pcnn_net_set_loss(net, a, PCNN_LOSS_MSE));
    EXPECT_NAMED(PCNN_ERR_INVALID_STATE, "does not lead to the output", pcnn_net_finalize, net, MAXB);
    pcnn_net_destroy(&net);

    net = NULL;
    expect_named(__LINE__, build(&net, C, 1 << 30), PCNN_ERR_SHAPE, "pcnn_net_finalize",
                 "exceeds 2^31");
    if (net) pcnn_net_destroy(&net);

    long walked = 0;
    for (long n = 1;; n++) {
        pcnn_net *fresh = NULL;
        OK(build(&fresh, C, 0));
        pcnn_debug_fail_allocation(n);
        pcnn_status st = pcnn_net_finalize(fresh, MAXB);
        const long attempted = pcnn_debug_allocations();
        pcnn_debug_fail_allocation(0);
        pcnn_net_destroy(&fresh);
        if (attempted < n) break; /* finalize made fewer allocations: all walked */
        expect_named(__LINE__, st, PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize", NULL);
        walked++;
    }
    if (walked < 10) {
        failures++;
        fprintf(stderr, "FAIL finalize made only %ld allocations\n", walked);
    }
    printf("finalize: %ld allocation failures checked\n", walked);
}

/* pcnn_net_train_epoch runs its batches through pcnn_net_train_step: a NaN
 * found by the step is reported under the epoch, once. */
static void nested_call(pcnn_net *net)
{
    static float x[4 * C * H * W];
    memcpy(x, g_x, sizeof x);
    x[3 * C * H * W + 5] = NAN;
    pcnn_dataset *d;
    OK(pcnn_dataset_create(4, C, H, W, x, g_lab, NULL, 0, &d));
    double loss = 0;
    EXPECT_NAMED(PCNN_ERR_NUMERIC, "NaN", pcnn_net_train_epoch, net, d, 2, &loss);
    /* The scope closed with the epoch: the next failure names its own call. */
    EXPECT_NAMED(PCNN_ERR_INVALID_ARGUMENT, "NaN", pcnn_net_set_option, net,
                 PCNN_OPT_LEARNING_RATE, NAN);
    pcnn_dataset_destroy(&d);
}

/* Damaged and mismatched checkpoints and scheduler blobs. */
static void bad_files(pcnn_net *net)
{
    EXPECT_NAMED(PCNN_ERR_IO, "/nonexistent-dir/x.ckpt", pcnn_net_save, net,
                 "/nonexistent-dir/x.ckpt");
    EXPECT_NAMED(PCNN_ERR_IO, "/nonexistent-dir/x.ckpt", pcnn_net_load, net,
                 "/nonexistent-dir/x.ckpt");
    OK(pcnn_net_save(net, g_path));

    FILE *in = fopen(g_path, "rb"), *out = fopen(g_bad_path, "wb");
    if (!in || !out) {
        fprintf(stderr, "cannot copy %s\n", g_path);
        exit(2);
    }
    int c, n = 0;
    while ((c = fgetc(in)) != EOF) fputc(n++ == 40 ? c ^ 0x10 : c, out);
    fclose(in);
    fclose(out);
    EXPECT_NAMED(PCNN_ERR_CORRUPT, NULL, pcnn_net_load, net, g_bad_path);
    char extra[4];
    size_t extra_bytes;
    EXPECT_NAMED(PCNN_ERR_CORRUPT, NULL, pcnn_net_load_extra, net, g_bad_path, extra,
                 sizeof extra, &extra_bytes);

    pcnn_net *other = NULL;
    OK(build(&other, C + 1, MAXB));
    EXPECT_NAMED(PCNN_ERR_MISMATCH, NULL, pcnn_net_load, other, g_path);
    pcnn_net_destroy(&other);

    pcnn_scheduler *s;
    OK(pcnn_scheduler_create(net, 2, 4, 0.05, &s));
    size_t bytes;
    OK(pcnn_scheduler_state_bytes(s, &bytes));
    unsigned char *blob = malloc(bytes);
    OK(pcnn_scheduler_save_state(s, blob, bytes));
    blob[0] ^= 1;
    EXPECT_NAMED(PCNN_ERR_CORRUPT, "magic", pcnn_scheduler_load_state, s, blob, bytes);
    blob[0] ^= 1;
    blob[bytes - 1] ^= 1;
    EXPECT_NAMED(PCNN_ERR_CORRUPT, "checksum", pcnn_scheduler_load_state, s, blob, bytes);
    free(blob);
    pcnn_scheduler_destroy(&s);
}

/* Out of memory at every allocation of the checkpoint and scheduler calls. */
static pcnn_net *g_net;
static pcnn_scheduler *g_sched;
static unsigned char g_blob[1 << 16];
static char g_extra[16];

static pcnn_status call_sched_create(void)
{
    pcnn_scheduler *s;
    pcnn_status st = pcnn_scheduler_create(g_net, 2, 4, 0.05, &s);
    if (st == PCNN_OK) pcnn_scheduler_destroy(&s);
    return st;
}
static pcnn_status call_save(void) { return pcnn_net_save(g_net, g_path); }
static pcnn_status call_load(void) { return pcnn_net_load(g_net, g_path); }
static pcnn_status call_save_extra(void)
{
    return pcnn_net_save_extra(g_net, g_path, "extra", 5);
}
static pcnn_status call_load_extra(void)
{
    size_t n;
    return pcnn_net_load_extra(g_net, g_path, g_extra, sizeof g_extra, &n);
}
static pcnn_status call_sched_save(void)
{
    return pcnn_scheduler_save_state(g_sched, g_blob, sizeof g_blob);
}
static pcnn_status call_sched_load(void)
{
    size_t bytes;
    OK(pcnn_scheduler_state_bytes(g_sched, &bytes));
    return pcnn_scheduler_load_state(g_sched, g_blob, bytes);
}
static pcnn_status call_summary(void)
{
    char text[2048];
    return pcnn_net_summary(g_net, text, sizeof text, NULL);
}

typedef struct oom_case {
    const char *func;
    pcnn_status (*call)(void);
} oom_case;

static void out_of_memory(pcnn_net *net)
{
    static const oom_case cases[] = {
        {"pcnn_scheduler_create", call_sched_create},
        {"pcnn_net_save", call_save},
        {"pcnn_net_load", call_load},
        {"pcnn_net_save_extra", call_save_extra},
        {"pcnn_net_load_extra", call_load_extra},
        {"pcnn_scheduler_save_state", call_sched_save},
        {"pcnn_scheduler_load_state", call_sched_load},
        {"pcnn_net_summary", call_summary},
    };
    g_net = net;
    OK(pcnn_scheduler_create(net, 2, 4, 0.05, &g_sched));
    OK(call_sched_save());
    long walked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const oom_case *k = &cases[i];
        if (k->call == call_load || k->call == call_load_extra) OK(call_save_extra());
        pcnn_debug_fail_allocation(0);
        OK(k->call());
        const long total = pcnn_debug_allocations();
        for (long n = 1; n <= total; n++) {
            pcnn_debug_fail_allocation(n);
            pcnn_status st = k->call();
            pcnn_debug_fail_allocation(0);
            expect_named(__LINE__, st, PCNN_ERR_OUT_OF_MEMORY, k->func, NULL);
            walked++;
        }
    }
    pcnn_scheduler_destroy(&g_sched);
    if (walked < 10) {
        failures++;
        fprintf(stderr, "FAIL only %ld allocation failures walked: is the hook compiled in?\n",
                walked);
    }
    printf("out of memory: %ld injected failures checked\n", walked);
}

/* Two threads fail different calls, one of them nested, many times over:
 * each must always read its own message. */
typedef struct worker {
    pcnn_net *net;
    pcnn_dataset *nan_data;
    int bad;
    char last[512];
} worker;

static void *run_epochs(void *arg)
{
    worker *w = arg;
    double loss;
    for (int i = 0; i < 300 && !w->bad; i++) {
        pcnn_status st = pcnn_net_train_epoch(w->net, w->nan_data, 2, &loss);
        const char *msg = pcnn_last_error();
        if (st != PCNN_ERR_NUMERIC || api_message_problem(msg, "pcnn_net_train_epoch")) {
            w->bad = 1;
            snprintf(w->last, sizeof w->last, "%s", msg);
        }
    }
    return NULL;
}

static void *run_bad_shuffles(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 20000 && !w->bad; i++) {
        pcnn_status st = pcnn_dataset_shuffle(NULL, 1, (uint64_t)i);
        const char *msg = pcnn_last_error();
        if (st != PCNN_ERR_INVALID_ARGUMENT || api_message_problem(msg, "pcnn_dataset_shuffle")) {
            w->bad = 1;
            snprintf(w->last, sizeof w->last, "%s", msg);
        }
    }
    return NULL;
}

static void two_threads(void)
{
    static float x[2 * C * H * W];
    memcpy(x, g_x, sizeof x);
    x[7] = INFINITY;
    worker w[2] = {{0}, {0}};
    OK(build(&w[0].net, C, MAXB));
    OK(pcnn_dataset_create(2, C, H, W, x, g_lab, NULL, 0, &w[0].nan_data));
    pthread_t t[2];
    pthread_create(&t[0], NULL, run_epochs, &w[0]);
    pthread_create(&t[1], NULL, run_bad_shuffles, &w[1]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (w[i].bad) {
            failures++;
            fprintf(stderr, "FAIL thread %d read \"%s\"\n", i, w[i].last);
        }
    pcnn_dataset_destroy(&w[0].nan_data);
    pcnn_net_destroy(&w[0].net);
}

/* The checker itself: what it must accept and refuse. */
static void checker(void)
{
    static const struct {
        const char *msg;
        int ok;
    } rows[] = {
        {"pcnn_f: layer 2 (conv2d): kernel 7", 1},
        {"pcnn_f: cannot open '/tmp/a_b.ckpt': No such file", 1},
        {"pcnn_f: PCNN_OPT_ENGINE: 3", 1},
        {"pcnn_f: pcnn_g: x", 0},
        {"pcnn_f: plan_slices: out of memory", 0},
        {"pcnn_f: x (reported by rank 0: pcnn_f: y)", 0},
        {"pcnn_fg: x", 0},
        {"plan: x", 0},
        {"pcnn_f: ", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if ((api_message_problem(rows[i].msg, "pcnn_f") == NULL) != rows[i].ok) {
            failures++;
            fprintf(stderr, "FAIL checker on \"%s\"\n", rows[i].msg);
        }
}

int main(void)
{
    checker();
    for (size_t i = 0; i < sizeof g_x / sizeof *g_x; i++) g_x[i] = (float)((i * 37) % 11) * 0.1f;
    for (int i = 0; i < 8; i++) g_lab[i] = i % CLASSES;
    snprintf(g_path, sizeof g_path, "/tmp/pcnn-error-names-%d.ckpt", (int)getpid());
    snprintf(g_bad_path, sizeof g_bad_path, "/tmp/pcnn-error-names-%d.bad", (int)getpid());

    impossible_finalize();
    pcnn_net *net = NULL;
    OK(build(&net, C, MAXB));
    nested_call(net);
    bad_files(net);
    out_of_memory(net);
    pcnn_net_destroy(&net);
    two_threads();

    remove(g_path);
    remove(g_bad_path);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("error names: all checks passed\n");
    return 0;
}
