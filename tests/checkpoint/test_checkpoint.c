/* Checkpoints on one process (internal build: the tests look at optimizer
 * state, batch-norm statistics and the file layout directly).
 *
 *   test_checkpoint resume    save after N steps, load into a fresh network,
 *                             train M more: bitwise the N+M run (SGD,
 *                             momentum, Adam; batch norm, dropout, warm-up,
 *                             decay, weight decay)
 *   test_checkpoint process   the same with the save in another process
 *   test_checkpoint mismatch  networks built differently: MISMATCH naming it
 *   test_checkpoint corrupt   every truncation and many bit flips: CORRUPT,
 *                             crafted newer files: UNSUPPORTED, I/O errors
 *                             and out of memory at every allocation
 *   test_checkpoint values    intact files (checksums valid) holding values no
 *                             run produces (NaN or infinite parameters and
 *                             optimizer state, negative second moments and
 *                             variances, options out of range): CORRUPT
 *                             naming the field; step 2^53 round trip
 *   test_checkpoint cleanup   temporaries of interrupted saves (made by hand,
 *                             or by SIGKILL during a save) are removed by the
 *                             next save and pcnn_checkpoint_cleanup, nothing
 *                             else is
 *   test_checkpoint format    a saved file, read field by field with the
 *                             test's own decoding, CRC-32 and FNV-1a, agrees
 *                             with docs/checkpoint-format.md
 *   test_checkpoint v1 CORPUS version-1 files (tests/checkpoint/corpus/v1_*)
 *                             load, hash as documented for version 1, and
 *                             saved again are the committed v2_* files
 *   test_checkpoint kill      a child saving in a loop is SIGKILLed at random
 *                             moments: the file always loads, and is one of
 *                             the versions written
 * The child modes (child-save, kill-child) are run by the tests above;
 * `test_checkpoint corpus DIR` writes the fuzzer's seed files of the
 * current version (v2_*); the v1_* seeds were written by version 1 and are
 * kept as they are.  `v1` compares the v1_* files, loaded and saved again,
 * with the v2_* files: rewrite those only with a build whose training step
 * still gives the v1_* parameters. */
#define PCNN_EXPERIMENTAL /* pcnn_checkpoint_cleanup */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/memory.h"
#include "graph/net.h"
#include "core/le.h"
#include "io/checkpoint_format.h"
#include "layers/batchnorm.h"
#include "pcnn.h"

static int failures;
static char dir[256];

#define CK(call)                                                                      \
    do {                                                                              \
        pcnn_status ck_ = (call);                                                     \
        if (ck_ != PCNN_OK) {                                                         \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,       \
                    pcnn_status_str(ck_), pcnn_last_error());                         \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

static void expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!ok) failures++;
}

/* ------------------------------------------------------------------ */
/* Networks and data                                                    */
/* ------------------------------------------------------------------ */

#define C_IN 3
#define HW 8
#define SAMPLE (C_IN * HW * HW)
#define BATCH 6

typedef struct variant {
    pcnn_optimizer optimizer;
    int max_batch;
    int conv_channels;  /* 6 normally */
    float dropout;      /* 0.3 normally */
    int extra_layer;    /* an extra relu at the end */
    pcnn_loss loss;
    double seed;
    int options;        /* set the training options (else leave defaults) */
    double bucket_bytes;
    pcnn_exchange exchange;
} variant;

static variant base_variant(pcnn_optimizer o)
{
    return (variant){.optimizer = o, .max_batch = BATCH, .conv_channels = 6, .dropout = 0.3f,
                     .loss = PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, .seed = 11, .options = 1,
                     .bucket_bytes = 1048576, .exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER};
}

/* conv(3->6,k3,p1) bn relu maxpool2 dropout conv(6->4,k3,p1) bn relu dense(10). */
static pcnn_net *build(const variant *v)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, C_IN, HW, HW, &l));
    CK(pcnn_conv2d(net, l, v->conv_channels, 3, 1, 1, 1, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_dropout(net, l, v->dropout, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 0, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    if (v->extra_layer) CK(pcnn_relu(net, l, &l));
    CK(pcnn_net_set_loss(net, l, v->loss));
    CK(pcnn_net_set_optimizer(net, v->optimizer));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, v->seed));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 2));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, v->bucket_bytes));
    CK(pcnn_net_set_exchange(net, v->exchange));
    if (v->options) {
        CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, v->optimizer == PCNN_OPTIMIZER_ADAM ? 0.01 : 0.05));
        CK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, 0.8));
        CK(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, 1e-3));
        CK(pcnn_net_set_option(net, PCNN_OPT_ADAM_BETA1, 0.85));
        CK(pcnn_net_set_option(net, PCNN_OPT_ADAM_BETA2, 0.99));
        CK(pcnn_net_set_option(net, PCNN_OPT_ADAM_EPSILON, 1e-6));
        CK(pcnn_net_set_option(net, PCNN_OPT_WARMUP_STEPS, 3));
        CK(pcnn_net_set_option(net, PCNN_OPT_DECAY_EVERY_STEPS, 4));
        CK(pcnn_net_set_option(net, PCNN_OPT_DECAY_FACTOR, 0.5));
    }
    CK(pcnn_net_finalize(net, v->max_batch));
    return net;
}

static void make_batch(int step, float *x, int32_t *y, float *t)
{
    unsigned s = 777u + 1009u * (unsigned)step;
    for (int i = 0; i < BATCH * SAMPLE; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < BATCH; i++) y[i] = (int32_t)((unsigned)(i * 3 + step) % 10u);
    for (int i = 0; i < BATCH * 10; i++) t[i] = (float)((i * 7 + step) % 5) * 0.25f;
}

static void train(pcnn_net *net, int from, int to)
{
    static float x[BATCH * SAMPLE], t[BATCH * 10];
    static int32_t y[BATCH];
    for (int step = from; step < to; step++) {
        make_batch(step, x, y, t);
        int cross = net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
        CK(pcnn_net_train_step(net, BATCH, x, cross ? y : NULL, cross ? NULL : t, NULL));
    }
}

/* Everything that decides the rest of a run, bitwise. */
static int same_state(pcnn_net *a, pcnn_net *b, char *why, size_t size)
{
    snprintf(why, size, "identical");
    if (a->num_params != b->num_params || a->step != b->step) {
        snprintf(why, size, "counts or step differ (%llu vs %llu)", (unsigned long long)a->step,
                 (unsigned long long)b->step);
        return 0;
    }
    size_t n = a->num_params;
    float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(a, pa, n));
    CK(pcnn_net_get_params(b, pb, n));
    int ok = memcmp(pa, pb, n * sizeof(float)) == 0;
    if (!ok) snprintf(why, size, "parameters differ");
    free(pa);
    free(pb);
    const float *sa[2] = {a->optim.m, a->optim.v}, *sb[2] = {b->optim.m, b->optim.v};
    for (int k = 0; k < 2 && ok; k++) {
        if ((sa[k] == NULL) != (sb[k] == NULL)) ok = 0;
        else if (sa[k] && memcmp(sa[k], sb[k], a->optim.count * sizeof(float)) != 0) ok = 0;
        if (!ok) snprintf(why, size, "optimizer state %s differs", k ? "v" : "m");
    }
    for (int i = 0; i < a->layers.count && ok; i++) {
        size_t ca, cb;
        const float *ra = batchnorm_running_stats(a->layers.items[i], &ca);
        const float *rb = batchnorm_running_stats(b->layers.items[i], &cb);
        if (ca != cb || (ca && memcmp(ra, rb, ca * sizeof(float)) != 0)) {
            ok = 0;
            snprintf(why, size, "batch-norm statistics of layer %d differ", i);
        }
    }
    static const pcnn_option opts[] = {PCNN_OPT_LEARNING_RATE, PCNN_OPT_MOMENTUM,
                                       PCNN_OPT_WEIGHT_DECAY, PCNN_OPT_ADAM_BETA1,
                                       PCNN_OPT_ADAM_BETA2, PCNN_OPT_ADAM_EPSILON,
                                       PCNN_OPT_WARMUP_STEPS, PCNN_OPT_DECAY_EVERY_STEPS,
                                       PCNN_OPT_DECAY_FACTOR, PCNN_OPT_EFFECTIVE_LEARNING_RATE};
    for (size_t k = 0; k < sizeof opts / sizeof *opts && ok; k++) {
        double va, vb;
        CK(pcnn_net_get_option(a, opts[k], &va));
        CK(pcnn_net_get_option(b, opts[k], &vb));
        if (va != vb) {
            ok = 0;
            snprintf(why, size, "option %d differs: %g vs %g", (int)opts[k], va, vb);
        }
    }
    return ok;
}

static const char *opt_name(pcnn_optimizer o)
{
    return o == PCNN_OPTIMIZER_SGD ? "SGD" : o == PCNN_OPTIMIZER_MOMENTUM ? "momentum" : "Adam";
}

static void path_in_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* ------------------------------------------------------------------ */
/* resume: fresh network in the same process                            */
/* ------------------------------------------------------------------ */

enum { N_STEPS = 5, M_STEPS = 6 };

static void test_resume(void)
{
    for (int o = 0; o <= PCNN_OPTIMIZER_ADAM; o++) {
        const variant v = base_variant((pcnn_optimizer)o);
        char path[300], why[128];
        path_in_dir(path, sizeof path, "resume.ckpt");
        pcnn_net *whole = build(&v);
        train(whole, 0, N_STEPS + M_STEPS);

        pcnn_net *first = build(&v);
        train(first, 0, N_STEPS);
        CK(pcnn_net_save(first, path));
        /* A fresh network: default options, another max_batch, bucket size
         * and exchange (none of which may matter). */
        variant fresh_v = v;
        fresh_v.options = 0;
        fresh_v.max_batch = 2 * BATCH;
        fresh_v.bucket_bytes = 64;
        fresh_v.exchange = PCNN_EXCHANGE_ALLREDUCE;
        pcnn_net *resumed = build(&fresh_v);
        CK(pcnn_net_load(resumed, path));
        int at_save = same_state(first, resumed, why, sizeof why);
        expect(at_save, "%s: loaded state equals the saved network (%s)", opt_name(v.optimizer), why);
        train(resumed, N_STEPS, N_STEPS + M_STEPS);
        train(first, N_STEPS, N_STEPS + M_STEPS); /* saving changed nothing */
        expect(same_state(whole, resumed, why, sizeof why),
               "%s: %d steps, save, load into a fresh network, %d steps == %d steps bitwise (%s)",
               opt_name(v.optimizer), N_STEPS, M_STEPS, N_STEPS + M_STEPS, why);
        expect(same_state(whole, first, why, sizeof why),
               "%s: the saving network trains on unchanged (%s)", opt_name(v.optimizer), why);
        /* Inference uses the running statistics: the same outputs. */
        float x[BATCH * SAMPLE], t[BATCH * 10], ya[BATCH * 10], yb[BATCH * 10];
        int32_t y[BATCH];
        make_batch(99, x, y, t);
        CK(pcnn_net_predict(whole, BATCH, x, ya, sizeof ya / sizeof *ya));
        CK(pcnn_net_predict(resumed, BATCH, x, yb, sizeof yb / sizeof *yb));
        expect(memcmp(ya, yb, sizeof ya) == 0, "%s: predictions after resume bitwise equal",
               opt_name(v.optimizer));
        pcnn_net_destroy(&whole);
        pcnn_net_destroy(&first);
        pcnn_net_destroy(&resumed);
        remove(path);
    }
}

/* A file written by 2 ranks (crafted with the format's writer from a real
 * one: rank 1's statistics are rank 0's times 3) loads on one process
 * with the mean of the two ranks' running statistics. */
static void test_bn_mean(void)
{
    char path[300], crafted[300];
    path_in_dir(path, sizeof path, "bn.ckpt");
    path_in_dir(crafted, sizeof crafted, "bn2.ckpt");
    const variant v = base_variant(PCNN_OPTIMIZER_SGD);
    pcnn_net *net = build(&v);
    train(net, 0, 3);
    CK(pcnn_net_save(net, path));
    FILE *f = fopen(path, "rb");
    static unsigned char img[1 << 20];
    size_t len = fread(img, 1, sizeof img, f);
    fclose(f);
    ckpt_view view;
    CK(ckpt_parse(img, len, "test", &view));
    const size_t bn = view.meta.bn_floats;
    float *stats = malloc(2 * bn * sizeof(float)), *params = malloc(net->num_params * sizeof(float));
    ckpt_decode_floats(view.bn, stats, bn);
    for (size_t i = 0; i < bn; i++) stats[bn + i] = 3.0f * stats[i];
    ckpt_decode_floats(view.params, params, net->num_params);
    ckpt_meta meta = view.meta;
    meta.ranks = 2;
    f = fopen(crafted, "wb");
    ckpt_writer w;
    ckpt_begin(&w, f, 4);
    ckpt_section(&w, CKPT_SEC_META, CKPT_FLAG_REQUIRED);
    ckpt_put_meta(&w, &meta);
    ckpt_section(&w, CKPT_SEC_LAYERS, CKPT_FLAG_REQUIRED);
    ckpt_put_bytes(&w, view.layers, (size_t)meta.num_layers * CKPT_LAYER_BYTES);
    ckpt_section(&w, CKPT_SEC_PARAMS, CKPT_FLAG_REQUIRED);
    ckpt_put_floats(&w, params, net->num_params);
    ckpt_section(&w, CKPT_SEC_BN_STATS, CKPT_FLAG_REQUIRED);
    ckpt_put_floats(&w, stats, 2 * bn);
    int written = ckpt_finish(&w);
    fclose(f);
    variant fresh_v = v;
    fresh_v.options = 0;
    pcnn_net *resumed = build(&fresh_v);
    pcnn_status st = pcnn_net_load(resumed, crafted);
    int ok = written && st == PCNN_OK;
    size_t at = 0;
    for (int i = 0; i < resumed->layers.count && ok; i++) {
        size_t count;
        const float *s = batchnorm_running_stats(resumed->layers.items[i], &count);
        for (size_t j = 0; j < count; j++, at++)
            ok = ok && s[j] == (float)(((double)stats[at] + (double)stats[bn + at]) / 2);
    }
    expect(ok && at == bn, "a file of 2 ranks restores the mean of their batch-norm statistics "
           "on 1 (%s, %zu statistics)", pcnn_status_str(st), at);
    free(stats);
    free(params);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&resumed);
    remove(path);
    remove(crafted);
}

/* ------------------------------------------------------------------ */
/* process: save in a child process, load here                          */
/* ------------------------------------------------------------------ */

static int run_self(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int child_save(const char *path, int optimizer)
{
    const variant v = base_variant((pcnn_optimizer)optimizer);
    pcnn_net *net = build(&v);
    train(net, 0, N_STEPS);
    CK(pcnn_net_save(net, path));
    pcnn_net_destroy(&net);
    return 0;
}

static void test_process(const char *self)
{
    for (int o = 0; o <= PCNN_OPTIMIZER_ADAM; o++) {
        char path[300], opt[8], why[128];
        path_in_dir(path, sizeof path, "process.ckpt");
        snprintf(opt, sizeof opt, "%d", o);
        char *argv[] = {(char *)self, "child-save", path, opt, dir, NULL};
        int rc = run_self(argv);
        expect(rc == 0, "%s: child process trained %d steps and saved (exit %d)",
               opt_name((pcnn_optimizer)o), N_STEPS, rc);
        const variant v = base_variant((pcnn_optimizer)o);
        pcnn_net *whole = build(&v);
        train(whole, 0, N_STEPS + M_STEPS);
        variant fresh_v = v;
        fresh_v.options = 0;
        pcnn_net *resumed = build(&fresh_v);
        CK(pcnn_net_load(resumed, path));
        train(resumed, N_STEPS, N_STEPS + M_STEPS);
        expect(same_state(whole, resumed, why, sizeof why),
               "%s: saved by another process, resumed here: == uninterrupted bitwise (%s)",
               opt_name((pcnn_optimizer)o), why);
        pcnn_net_destroy(&whole);
        pcnn_net_destroy(&resumed);
        remove(path);
    }
}

/* ------------------------------------------------------------------ */
/* mismatch                                                             */
/* ------------------------------------------------------------------ */

static void test_mismatch(void)
{
    char path[300];
    path_in_dir(path, sizeof path, "mismatch.ckpt");
    const variant v = base_variant(PCNN_OPTIMIZER_MOMENTUM);
    pcnn_net *net = build(&v);
    train(net, 0, 2);
    CK(pcnn_net_save(net, path));
    pcnn_net_destroy(&net);

    struct {
        const char *what, *needle;
        variant v;
    } cases[6];
    for (int i = 0; i < 6; i++) cases[i].v = v;
    cases[0].what = "conv channels 6 -> 5", cases[0].needle = "layer 1 differs";
    cases[0].v.conv_channels = 5;
    cases[1].what = "dropout rate 0.3 -> 0.5", cases[1].needle = "layer 5 (dropout) differs";
    cases[1].v.dropout = 0.5f;
    cases[2].what = "an extra relu after the output", cases[2].needle = "layer 9 (dense) differs";
    cases[2].v.extra_layer = 1;
    cases[3].what = "optimizer momentum -> Adam", cases[3].needle = "optimizer differs";
    cases[3].v.optimizer = PCNN_OPTIMIZER_ADAM;
    cases[4].what = "loss cross entropy -> MSE", cases[4].needle = "loss differs";
    cases[4].v.loss = PCNN_LOSS_MSE;
    cases[5].what = "seed 11 -> 12", cases[5].needle = "seed differs";
    cases[5].v.seed = 12;
    for (int i = 0; i < 6; i++) {
        pcnn_net *other = build(&cases[i].v);
        size_t n = other->num_params;
        float *before = malloc(n * sizeof(float)), *after = malloc(n * sizeof(float));
        CK(pcnn_net_get_params(other, before, n));
        pcnn_status st = pcnn_net_load(other, path);
        CK(pcnn_net_get_params(other, after, n));
        const char *msg = pcnn_last_error();
        expect(st == PCNN_ERR_MISMATCH && strstr(msg, cases[i].needle) &&
                   memcmp(before, after, n * sizeof(float)) == 0 && other->step == 0,
               "%s: %s (%s), network unchanged", cases[i].what, pcnn_status_str(st), msg);
        free(before);
        free(after);
        pcnn_net_destroy(&other);
    }
    /* What a resume may change. */
    variant fine = v;
    fine.max_batch = 1;
    fine.bucket_bytes = 0;
    fine.exchange = PCNN_EXCHANGE_ALLREDUCE;
    fine.options = 0;
    pcnn_net *ok = build(&fine);
    pcnn_status st = pcnn_net_load(ok, path);
    expect(st == PCNN_OK && ok->step == 2,
           "other max_batch, bucket size, exchange and options load (%s)", pcnn_status_str(st));
    pcnn_net_destroy(&ok);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* corrupt                                                              */
/* ------------------------------------------------------------------ */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static void spill(const char *path, const unsigned char *buf, size_t len)
{
    remove(path); /* truncating a file makes ext4 flush it on close: slow */
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* Files of the test directory whose name starts with `base` + ".pcnn-tmp.". */
static int count_temps(const char *base)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s.pcnn-tmp.", base);
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *ent; d && (ent = readdir(d));)
        n += strncmp(ent->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

/* A tiny network whose file has every section: conv + batch norm, dense,
 * Adam (m and v), and 16 extra bytes. */
static pcnn_net *tiny(void)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 3, 3, &l));
    CK(pcnn_conv2d(net, l, 2, 1, 1, 0, 1, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, 4));
    return net;
}

static void train_tiny(pcnn_net *net)
{
    float x[4 * 18];
    int32_t y[4] = {0, 1, 2, 1};
    for (int i = 0; i < 4 * 18; i++) x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    CK(pcnn_net_train_step(net, 4, x, y, NULL, NULL));
}

/* Set the header CRC after an edit of the header. */
static void fix_header_crc(unsigned char *buf)
{
    uint32_t hb = le_get_u32(buf + 12);
    le_put_u32(buf + hb - 4, ckpt_crc32(0, buf, hb - 4));
}

/* Entry of section id in the table (NULL if none). */
static unsigned char *entry_of(unsigned char *buf, uint32_t id)
{
    uint32_t n = le_get_u32(buf + 16);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *e = buf + CKPT_HEADER_FIXED + (size_t)i * CKPT_ENTRY_BYTES;
        if (le_get_u32(e) == id) return e;
    }
    return NULL;
}

static pcnn_status load_bytes(pcnn_net *net, const char *path, const unsigned char *buf,
                              size_t len)
{
    spill(path, buf, len);
    return pcnn_net_load(net, path);
}

static int params_equal(pcnn_net *net, const float *ref)
{
    return memcmp(net->params, ref, net->num_params * sizeof(float)) == 0 && net->step == 0;
}

static void test_corrupt(void)
{
    char good[300], bad[300];
    path_in_dir(good, sizeof good, "good.ckpt");
    path_in_dir(bad, sizeof bad, "bad.ckpt");
    pcnn_net *src = tiny();
    train_tiny(src);
    const unsigned char extra[16] = "scheduler state";
    CK(pcnn_net_save_extra(src, good, extra, sizeof extra));
    size_t len;
    unsigned char *img = slurp(good, &len);
    unsigned char *work = malloc(len);
    pcnn_net *dst = tiny();
    float *ref = malloc(dst->num_params * sizeof(float));
    memcpy(ref, dst->params, dst->num_params * sizeof(float));
    printf("     small checkpoint: %zu bytes, %zu parameters\n", len, src->num_params);

    /* Truncation at every length. */
    int wrong = 0, changed = 0;
    for (size_t cut = 0; cut < len; cut++) {
        pcnn_status st = load_bytes(dst, bad, img, cut);
        if (st != PCNN_ERR_CORRUPT) {
            if (wrong++ < 3)
                fprintf(stderr, "  cut at %zu: %s: %s\n", cut, pcnn_status_str(st), pcnn_last_error());
        }
        changed += !params_equal(dst, ref);
    }
    expect(wrong == 0 && changed == 0, "truncated at each of %zu lengths: CORRUPT every time "
           "(%d not), network unchanged (%d changed)", len, wrong, changed);

    /* A huge sparse file of another kind (1 TiB, no block written): its
     * magic is read first, so it is refused as CORRUPT at once; it was
     * read whole before (OUT_OF_MEMORY here, 7.6 s and 3.1 GiB at 3 GiB). */
    {
        FILE *f = fopen(bad, "wb");
        fputs("NOTMAGIC and then nothing", f);
        fclose(f);
        if (truncate(bad, (off_t)1 << 40) == 0) {
            const pcnn_status st = pcnn_net_load(dst, bad);
            expect(st == PCNN_ERR_CORRUPT && strstr(pcnn_last_error(), "bad magic") &&
                       memcmp(dst->params, ref, dst->num_params * sizeof(float)) == 0,
                   "a 1 TiB sparse file of another kind: CORRUPT from its magic (%s: %s)",
                   pcnn_status_str(st), pcnn_last_error());
        } else {
            printf("     (no 1 TiB sparse file here: %s)\n", strerror(errno));
        }
        remove(bad);
    }

    /* Trailing bytes. */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, img, len);
    longer[len] = 0;
    expect(load_bytes(dst, bad, longer, len + 1) == PCNN_ERR_CORRUPT, "one trailing byte: CORRUPT");
    free(longer);

    /* Every bit of every byte flipped, one at a time. */
    wrong = changed = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(work, img, len);
            work[i] ^= (unsigned char)(1u << bit);
            ckpt_view view;
            pcnn_status st = ckpt_parse(work, len, "flip", &view);
            /* Through the real file for one bit per byte. */
            if (bit == (int)(i % 8)) {
                pcnn_status fs = load_bytes(dst, bad, work, len);
                if (st == PCNN_ERR_CORRUPT) st = fs;
                changed += !params_equal(dst, ref);
            }
            if (st != PCNN_ERR_CORRUPT && wrong++ < 3)
                fprintf(stderr, "  flip byte %zu bit %d: %s: %s\n", i, bit, pcnn_status_str(st),
                        pcnn_last_error());
        }
    expect(wrong == 0 && changed == 0, "each of %zu single-bit flips: CORRUPT every time (%d "
           "not; %zu through pcnn_net_load), network unchanged (%d changed)", 8 * len, wrong,
           len, changed);

    /* Intact files that this reader must refuse or accept. */
    memcpy(work, img, len);
    le_put_u32(work + 8, CKPT_VERSION + 1);
    fix_header_crc(work);
    pcnn_status st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_UNSUPPORTED && params_equal(dst, ref),
           "intact file of format version %u: %s (%s)", CKPT_VERSION + 1, pcnn_status_str(st),
           pcnn_last_error());
    memcpy(work, img, len);
    le_put_u32(work + 8, 0);
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_UNSUPPORTED && params_equal(dst, ref),
           "intact file of format version 0: %s", pcnn_status_str(st));
    memcpy(work, img, len);
    le_put_u32(work + 8, CKPT_VERSION + 1);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_CORRUPT, "version field damaged (header CRC fails): %s",
           pcnn_status_str(st));
    memcpy(work, img, len);
    unsigned char *e = entry_of(work, CKPT_SEC_EXTRA);
    le_put_u32(e, 99);
    le_put_u32(e + 4, CKPT_FLAG_REQUIRED);
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_UNSUPPORTED, "unknown required section: %s (%s)", pcnn_status_str(st),
           pcnn_last_error());
    le_put_u32(e + 4, 0);
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_OK && dst->step == 1, "unknown optional section is skipped: %s",
           pcnn_status_str(st));
    pcnn_net_destroy(&dst);
    dst = tiny();

    /* Hostile length fields with valid checksums: refused, nothing huge
     * allocated (the run would die or crawl otherwise). */
    memcpy(work, img, len);
    e = entry_of(work, CKPT_SEC_PARAMS);
    le_put_u64(e + 16, 1ull << 62);
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_CORRUPT, "section length 2^62: %s (%s)", pcnn_status_str(st),
           pcnn_last_error());
    memcpy(work, img, len);
    e = entry_of(work, CKPT_SEC_META);
    unsigned char *meta = work + le_get_u64(e + 8);
    le_put_u64(meta + 24, (1ull << 61) + 5); /* num_params */
    le_put_u32(e + 24, ckpt_crc32(0, meta, CKPT_META_BYTES));
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_CORRUPT, "parameter count 2^61+5 (checksums valid): %s (%s)",
           pcnn_status_str(st), pcnn_last_error());
    memcpy(work, img, len);
    le_put_u32(work + 12, 0xfffffff0u); /* header size */
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_CORRUPT, "header size 2^32-16: %s", pcnn_status_str(st));

    /* Files that are not checkpoints, or not there. */
    char missing[300];
    path_in_dir(missing, sizeof missing, "no-such-file.ckpt");
    st = pcnn_net_load(dst, missing);
    expect(st == PCNN_ERR_IO, "missing file: %s (%s)", pcnn_status_str(st), pcnn_last_error());
    st = pcnn_net_load(dst, dir);
    expect(st == PCNN_ERR_IO, "a directory: %s", pcnn_status_str(st));
    st = load_bytes(dst, bad, img, 0);
    expect(st == PCNN_ERR_CORRUPT, "empty file: %s", pcnn_status_str(st));
    memset(work, 'x', len);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_CORRUPT, "text file: %s", pcnn_status_str(st));

    /* Extra bytes round trip; too small a buffer changes nothing. */
    unsigned char back[64] = {0};
    size_t got = 0;
    st = pcnn_net_load_extra(dst, good, back, 4, &got);
    expect(st == PCNN_ERR_SHAPE && got == sizeof extra && params_equal(dst, ref),
           "extra bytes into a 4-byte buffer: %s, needs %zu, network unchanged",
           pcnn_status_str(st), got);
    st = pcnn_net_load_extra(dst, good, back, sizeof back, &got);
    expect(st == PCNN_OK && got == sizeof extra && memcmp(back, extra, sizeof extra) == 0 &&
               dst->step == 1, "extra bytes round trip: %s, %zu bytes", pcnn_status_str(st), got);
    pcnn_net_destroy(&dst);
    dst = tiny();
    st = pcnn_net_load(dst, good);
    expect(st == PCNN_OK && dst->step == 1, "pcnn_net_load ignores the extra bytes: %s",
           pcnn_status_str(st));
    pcnn_net_destroy(&dst);
    dst = tiny();

    /* Arguments and order of calls. */
    pcnn_net *unfinished;
    CK(pcnn_net_create(&unfinished));
    expect(pcnn_net_save(NULL, good) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_load(dst, NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_save(dst, "") == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_save_extra(dst, good, NULL, 3) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_load_extra(dst, good, NULL, 3, NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_net_save(unfinished, good) == PCNN_ERR_INVALID_STATE &&
               pcnn_net_load(unfinished, good) == PCNN_ERR_INVALID_STATE,
           "NULL or empty arguments: INVALID_ARGUMENT; before finalize: INVALID_STATE");
    pcnn_net_destroy(&unfinished);

    /* A save that cannot complete leaves the previous file intact and no
     * temporary behind: the target is a non-empty directory here. */
    char blocked[300], inside[340];
    path_in_dir(blocked, sizeof blocked, "blocked.ckpt");
    mkdir(blocked, 0700);
    snprintf(inside, sizeof inside, "%s/keep", blocked);
    spill(inside, img, 1);
    st = pcnn_net_save(src, blocked);
    int leftovers = 0;
    DIR *d = opendir(dir);
    for (struct dirent *ent; d && (ent = readdir(d));) leftovers += strstr(ent->d_name, ".pcnn-tmp.") != NULL;
    if (d) closedir(d);
    expect(st == PCNN_ERR_IO && leftovers == 0, "save over a directory: %s (%s), %d temporaries left",
           pcnn_status_str(st), pcnn_last_error(), leftovers);
    remove(inside);
    rmdir(blocked);
    char nodir[300];
    path_in_dir(nodir, sizeof nodir, "no-such-dir/x.ckpt");
    st = pcnn_net_save(src, nodir);
    expect(st == PCNN_ERR_IO, "save into a missing directory: %s", pcnn_status_str(st));
    size_t len2;
    unsigned char *again = slurp(good, &len2);
    expect(len2 == len && memcmp(again, img, len) == 0, "the good file is untouched");
    free(again);

    free(ref);
    free(work);
    free(img);
    pcnn_net_destroy(&src);
    pcnn_net_destroy(&dst);
    remove(good);
    remove(bad);
}

/* Out of memory at each allocation of a save and of a load: the call
 * fails with OUT_OF_MEMORY (or succeeds), leaks nothing, leaves no
 * temporary, and a failed load leaves the network as it was. */
static void test_out_of_memory(void)
{
    char good[300], out[300];
    path_in_dir(good, sizeof good, "oom-good.ckpt");
    path_in_dir(out, sizeof out, "oom.ckpt");
    pcnn_net *src = tiny();
    train_tiny(src);
    CK(pcnn_net_save_extra(src, good, "x", 1));
    pcnn_net *dst = tiny();
    float *ref = malloc(dst->num_params * sizeof(float));
    memcpy(ref, dst->params, dst->num_params * sizeof(float));
    const char *what[2] = {"save", "load"};
    for (int k = 0; k < 2; k++) {
        pcnn_debug_fail_allocation(0);
        CK(k ? pcnn_net_load(dst, good) : pcnn_net_save_extra(src, out, "x", 1));
        const long count = pcnn_debug_allocations();
        if (k) { /* start again from the untouched network */
            pcnn_net_destroy(&dst);
            dst = tiny();
        }
        int bad = 0, failed = 0;
        for (long n = 1; n <= count; n++) {
            const long live = pcnn_debug_live_allocations();
            pcnn_debug_fail_allocation(n);
            pcnn_status st = k ? pcnn_net_load(dst, good) : pcnn_net_save_extra(src, out, "x", 1);
            pcnn_debug_fail_allocation(0);
            failed += st != PCNN_OK;
            int leftovers = 0;
            DIR *d = opendir(dir);
            for (struct dirent *ent; d && (ent = readdir(d));)
                leftovers += strstr(ent->d_name, ".pcnn-tmp.") != NULL;
            if (d) closedir(d);
            int ok = (st == PCNN_OK || st == PCNN_ERR_OUT_OF_MEMORY) &&
                     pcnn_debug_live_allocations() == live && leftovers == 0;
            if (k && st != PCNN_OK) ok = ok && params_equal(dst, ref);
            if (k && st == PCNN_OK) { /* loaded: back to the untouched network */
                pcnn_net_destroy(&dst);
                dst = tiny();
            }
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s, allocation %ld fails: %s (%s)\n", what[k], n,
                        pcnn_status_str(st), pcnn_last_error());
        }
        expect(bad == 0 && failed > 0, "%s out of memory at each of its %ld allocations: "
               "OUT_OF_MEMORY (%d times) or OK, no leak, no temporary, network unchanged "
               "(%d bad)", what[k], count, failed, bad);
    }
    free(ref);
    pcnn_net_destroy(&src);
    pcnn_net_destroy(&dst);
    remove(good);
    remove(out);
}

/* ------------------------------------------------------------------ */
/* values: intact files (valid checksums) with values no run produces   */
/* ------------------------------------------------------------------ */

/* Recompute the CRC of section `id` and the header's after an edit. */
static void reseal(unsigned char *img, uint32_t id)
{
    unsigned char *e = entry_of(img, id);
    le_put_u32(e + 24, ckpt_crc32(0, img + le_get_u64(e + 8), (size_t)le_get_u64(e + 16)));
    fix_header_crc(img);
}

static unsigned char *section_of(unsigned char *img, uint32_t id)
{
    return img + le_get_u64(entry_of(img, id) + 8);
}

static void patch_f32(unsigned char *img, uint32_t id, size_t index, float x)
{
    le_put_f32(section_of(img, id) + 4 * index, x);
    reseal(img, id);
}

static void patch_meta_u64(unsigned char *img, int offset, uint64_t x)
{
    le_put_u64(section_of(img, CKPT_SEC_META) + offset, x);
    reseal(img, CKPT_SEC_META);
}

static void patch_meta_f64(unsigned char *img, int offset, double x)
{
    le_put_f64(section_of(img, CKPT_SEC_META) + offset, x);
    reseal(img, CKPT_SEC_META);
}

/* Load `work` into dst: CORRUPT with every one of the `needles` in the
 * message, and dst unchanged. */
static void expect_refused(pcnn_net *dst, const char *path, const unsigned char *work,
                           size_t len, const float *ref, const char *what, const char *needle1,
                           const char *needle2)
{
    pcnn_status st = load_bytes(dst, path, work, len);
    const char *msg = pcnn_last_error();
    expect(st == PCNN_ERR_CORRUPT && strstr(msg, needle1) && (!needle2 || strstr(msg, needle2)) &&
               params_equal(dst, ref),
           "%s: %s (%s), network unchanged", what, pcnn_status_str(st), msg);
}

static void test_values(void)
{
    char good[300], bad[300];
    path_in_dir(good, sizeof good, "values-good.ckpt");
    path_in_dir(bad, sizeof bad, "values-bad.ckpt");
    pcnn_net *src = tiny(); /* input; conv 6 params; batch norm 4 (+4 statistics); dense 57 */
    train_tiny(src);
    CK(pcnn_net_save(src, good));
    size_t len;
    unsigned char *img = slurp(good, &len), *work = malloc(len);
    pcnn_net *dst = tiny();
    float *ref = malloc(dst->num_params * sizeof(float));
    memcpy(ref, dst->params, dst->num_params * sizeof(float));
    expect(src->num_params == 67 && load_bytes(dst, bad, img, len) == PCNN_OK,
           "the untouched file loads (%zu parameters)", src->num_params);
    pcnn_net_destroy(&dst);
    dst = tiny();

    const struct {
        uint32_t id;
        size_t index;
        float x;
        const char *what, *needle1, *needle2;
    } floats[] = {
        {CKPT_SEC_PARAMS, 7, NAN, "a NaN parameter", "parameters section: value 7 ",
         "layer 2 (batchnorm), its value 1) is nan"},
        {CKPT_SEC_PARAMS, 66, INFINITY, "an infinite parameter", "parameters section: value 66 ",
         "layer 3 (dense), its value 56) is inf"},
        {CKPT_SEC_OPTIM_M, 3, -INFINITY, "an infinite first moment",
         "optimizer m (Adam's first moment) section: value 3 ", "is -inf"},
        {CKPT_SEC_OPTIM_V, 10, -0.25f, "a negative second moment",
         "optimizer v (Adam's second moment) section: value 10 ", "is -0.25; it must be finite "
         "and >= 0"},
        {CKPT_SEC_OPTIM_V, 0, NAN, "a NaN second moment",
         "optimizer v (Adam's second moment) section: value 0 ", "layer 1 (conv2d), its value 0"},
        {CKPT_SEC_BN_STATS, 3, -1.0f, "a negative running variance",
         "batch-norm statistics section: rank 0, layer 2 (batchnorm), running variance of "
         "channel 1 is -1", NULL},
        {CKPT_SEC_BN_STATS, 0, NAN, "a NaN running mean",
         "running mean of channel 0 is nan", NULL},
    };
    for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++) {
        memcpy(work, img, len);
        patch_f32(work, floats[k].id, floats[k].index, floats[k].x);
        expect_refused(dst, bad, work, len, ref, floats[k].what, floats[k].needle1,
                       floats[k].needle2);
    }

    pcnn_status st;
    const struct {
        int offset;
        bool count;
        uint64_t u;
        double d;
        const char *what, *needle;
    } meta[] = {
        {40, true, (1ull << 53) + 1, 0, "step 2^53+1", "meta field step = 9007199254740993 is "
         "out of range: step takes integers in [0, 9007199254740992]"},
        {32, true, 1ull << 60, 0, "seed 2^60", "meta field seed = 1152921504606846976"},
        {104, true, (3ull << 60) + 1, 0, "warm-up not a double", "meta field warmup_steps"},
        {56, false, 0, NAN, "learning rate NaN", "meta field learning_rate = nan"},
        {56, false, 0, 0.0, "learning rate 0", "meta field learning_rate = 0 "},
        {72, false, 0, -1.0, "negative weight decay", "meta field weight_decay = -1 "},
        {88, false, 0, 1.0, "Adam beta2 = 1", "meta field beta2 = 1 "},
        {96, false, 0, INFINITY, "infinite Adam epsilon", "meta field epsilon = inf"},
        {120, false, 0, 1.5, "decay factor 1.5", "meta field decay_factor = 1.5 "},
    };
    for (size_t k = 0; k < sizeof meta / sizeof meta[0]; k++) {
        memcpy(work, img, len);
        if (meta[k].count) patch_meta_u64(work, meta[k].offset, meta[k].u);
        else patch_meta_f64(work, meta[k].offset, meta[k].d);
        expect_refused(dst, bad, work, len, ref, meta[k].what, meta[k].needle, NULL);
    }

    /* Crafted records with valid checksums: a header flag no reader defines,
     * a layer kind of 16 characters without its NUL, and parameter counts
     * moved from one layer to the next (the same sum, the hashes kept). */
    memcpy(work, img, len);
    le_put_u32(work + 20, 1);
    fix_header_crc(work);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_UNSUPPORTED && strstr(pcnn_last_error(), "header flags 0x1") &&
               params_equal(dst, ref),
           "header flags 1: %s (%s), network unchanged", pcnn_status_str(st), pcnn_last_error());
    memcpy(work, img, len);
    memcpy(section_of(work, CKPT_SEC_LAYERS) + 1 * CKPT_LAYER_BYTES + 32, "conv2dconv2dconv", 16);
    reseal(work, CKPT_SEC_LAYERS);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "conv2dconv2dconv") &&
               params_equal(dst, ref),
           "a 16-character kind without NUL: %s (%s), network unchanged", pcnn_status_str(st),
           pcnn_last_error());
    memcpy(work, img, len);
    unsigned char *records = section_of(work, CKPT_SEC_LAYERS);
    le_put_u64(records + 1 * CKPT_LAYER_BYTES + 8, le_get_u64(records + CKPT_LAYER_BYTES + 8) + 1);
    le_put_u64(records + 2 * CKPT_LAYER_BYTES + 8,
               le_get_u64(records + 2 * CKPT_LAYER_BYTES + 8) - 1);
    reseal(work, CKPT_SEC_LAYERS);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "layer 1 differs") &&
               params_equal(dst, ref),
           "parameter counts shifted by one: %s (%s), network unchanged", pcnn_status_str(st),
           pcnn_last_error());

    /* What a run can produce still loads: -0 and 0 second moments, a
     * negative first moment, a zero running variance. */
    memcpy(work, img, len);
    patch_f32(work, CKPT_SEC_OPTIM_V, 5, -0.0f);
    patch_f32(work, CKPT_SEC_OPTIM_V, 6, 0.0f);
    patch_f32(work, CKPT_SEC_OPTIM_M, 2, -3.0f);
    patch_f32(work, CKPT_SEC_BN_STATS, 2, 0.0f);
    st = load_bytes(dst, bad, work, len);
    expect(st == PCNN_OK && dst->step == 1, "-0 and 0 second moments, a negative first moment, "
           "a zero variance: %s", pcnn_status_str(st));
    pcnn_net_destroy(&dst);
    free(ref);
    free(work);
    free(img);
    pcnn_net_destroy(&src);
    remove(good);
    remove(bad);
}

/* Every step the library accepts it saves and loads back; at the top of
 * PCNN_OPT_STEP's range, training stops instead of leaving the range. */
static void test_step_range(void)
{
    char path[300];
    path_in_dir(path, sizeof path, "step.ckpt");
    const double top = 9007199254740992.0; /* 2^53 */
    pcnn_net *net = tiny(), *back = tiny();
    CK(pcnn_net_set_option(net, PCNN_OPT_STEP, top - 1));
    train_tiny(net);
    double step = 0;
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &step));
    CK(pcnn_net_save(net, path));
    pcnn_status st = pcnn_net_load(back, path);
    expect(step == top && st == PCNN_OK && back->step == (1ull << 53),
           "a step from 2^53-1 to 2^53, saved and loaded: %s, step %llu", pcnn_status_str(st),
           (unsigned long long)back->step);

    float *before = malloc(net->num_params * sizeof(float));
    memcpy(before, net->params, net->num_params * sizeof(float));
    float x[4 * 18] = {0};
    int32_t y[4] = {0, 1, 2, 1};
    st = pcnn_net_train_step(net, 4, x, y, NULL, NULL);
    expect(st == PCNN_ERR_INVALID_STATE && strstr(pcnn_last_error(), "pcnn_net_train_step: the "
           "step counter is at its maximum 9007199254740992") && net->step == (1ull << 53) &&
               memcmp(before, net->params, net->num_params * sizeof(float)) == 0,
           "a step at 2^53: %s (%s), parameters and step unchanged", pcnn_status_str(st),
           pcnn_last_error());

    CK(pcnn_net_set_option(net, PCNN_OPT_STEP, top));
    CK(pcnn_net_save(net, path));
    pcnn_net_destroy(&back);
    back = tiny();
    st = pcnn_net_load(back, path);
    expect(st == PCNN_OK && back->step == (1ull << 53), "step 2^53 set, saved and loaded: %s",
           pcnn_status_str(st));
    free(before);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&back);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* cleanup: temporaries of interrupted saves                            */
/* ------------------------------------------------------------------ */

/* The host part of a temporary's name, from docs/checkpoint-format.md. */
static void doc_host(char *out)
{
    char name[256] = "";
    if (gethostname(name, sizeof name - 1) != 0 || !name[0]) strcpy(name, "localhost");
    size_t n = 0;
    for (; name[n] && n < 32; n++) {
        char c = name[n];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_';
        out[n] = keep ? c : '_';
    }
    out[n] = '\0';
}

/* A pid that no process of this host has now. */
static pid_t dead_pid(void)
{
    for (;;) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        int status;
        waitpid(pid, &status, 0);
        if (kill(pid, 0) != 0 && errno == ESRCH) return pid;
    }
}

/* dir/name into path[1024]. */
static void name_in_dir(char *path, const char *name)
{
    if (snprintf(path, 1024, "%s/%s", dir, name) >= 1024) {
        fprintf(stderr, "path too long: %s\n", name);
        exit(2);
    }
}

static void touch(const char *name)
{
    char path[1024];
    name_in_dir(path, name);
    spill(path, (const unsigned char *)"x", 1);
}

static int exists(const char *name)
{
    char path[1024];
    struct stat sb;
    name_in_dir(path, name);
    return lstat(path, &sb) == 0;
}

static void remove_name(const char *name)
{
    char path[1024];
    name_in_dir(path, name);
    if (remove(path) != 0) rmdir(path);
}

/* Stale temporaries made by hand next to decoys that must all survive. */
static void test_cleanup_names(void)
{
    char host[40], path[300];
    doc_host(host);
    path_in_dir(path, sizeof path, "c.ckpt");
    const long dead = (long)dead_pid(), me = (long)getpid(), parent = (long)getppid();
    enum { STALE = 2, KEEP = 12 };
    char stale[STALE][200], keep[KEEP][200];
    snprintf(stale[0], 200, "c.ckpt.pcnn-tmp.%s.%ld.0", host, dead);
    snprintf(stale[1], 200, "c.ckpt.pcnn-tmp.%s.%ld.18446744073709551615", host, dead);
    snprintf(keep[0], 200, "c.ckpt.pcnn-tmp.%s.%ld.3", host, me);       /* this process */
    snprintf(keep[1], 200, "c.ckpt.pcnn-tmp.%s.%ld.3", host, parent);   /* a live one */
    snprintf(keep[2], 200, "c.ckpt.pcnn-tmp.other-host.%ld.3", dead);   /* another host */
    snprintf(keep[3], 200, "c.ckpt.pcnn-tmp.%s.%ld.3x", host, dead);
    snprintf(keep[4], 200, "c.ckpt.pcnn-tmp.%s.%ld.", host, dead);
    snprintf(keep[5], 200, "c.ckpt.pcnn-tmp.%s.x%ld.3", host, dead);
    snprintf(keep[6], 200, "c.ckpt.pcnn-tmp.%s.%ld.123456789012345678901", host, dead);
    snprintf(keep[7], 200, "cc.ckpt.pcnn-tmp.%s.%ld.3", host, dead);    /* another target */
    snprintf(keep[8], 200, "c.ckpt.tmp.%ld.3", dead);                   /* not our pattern */
    snprintf(keep[9], 200, "c.ckpt.pcnn-tmp.%s.%ld.4", host, dead);     /* a directory */
    snprintf(keep[10], 200, "c.ckpt.pcnn-tmp.%s.%ld.5", host, dead);    /* a symbolic link */
    snprintf(keep[11], 200, "link-target");
    for (int i = 0; i < STALE; i++) touch(stale[i]);
    for (int i = 0; i < 9; i++) touch(keep[i]);
    char sub[1024], link[1024];
    name_in_dir(sub, keep[9]);
    mkdir(sub, 0700);
    touch(keep[11]);
    name_in_dir(link, keep[10]);
    expect(symlink("link-target", link) == 0, "symbolic link made");

    pcnn_net *net = tiny();
    CK(pcnn_net_save(net, path));
    int gone = 0, kept = 0;
    for (int i = 0; i < STALE; i++) gone += !exists(stale[i]);
    for (int i = 0; i < KEEP; i++) kept += exists(keep[i]);
    expect(gone == STALE && kept == KEEP && exists("c.ckpt") && count_temps("c.ckpt") == 9,
           "a save removed the %d stale temporaries of dead processes (%d) and kept all %d "
           "decoys (%d) and its own file", STALE, gone, KEEP, kept);

    /* The call does the same alone, and counts. */
    touch(stale[0]);
    int removed = -1;
    pcnn_status st = pcnn_checkpoint_cleanup(path, &removed);
    kept = 0;
    for (int i = 0; i < KEEP; i++) kept += exists(keep[i]);
    expect(st == PCNN_OK && removed == 1 && !exists(stale[0]) && kept == KEEP,
           "pcnn_checkpoint_cleanup: %s, removed %d, kept %d", pcnn_status_str(st), removed,
           kept);
    st = pcnn_checkpoint_cleanup(path, &removed);
    expect(st == PCNN_OK && removed == 0, "again: nothing to remove (%d)", removed);
    char slash[310], nodir[310];
    snprintf(slash, sizeof slash, "%s/", dir);
    path_in_dir(nodir, sizeof nodir, "no-such-dir/c.ckpt");
    expect(pcnn_checkpoint_cleanup(NULL, NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_checkpoint_cleanup("", NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_checkpoint_cleanup(slash, NULL) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_checkpoint_cleanup(nodir, &removed) == PCNN_ERR_IO && removed == 0 &&
               strstr(pcnn_last_error(), "pcnn_checkpoint_cleanup: cannot read the directory"),
           "NULL, empty or directory path: INVALID_ARGUMENT; missing directory: IO (%s)",
           pcnn_last_error());
    for (int i = 0; i < KEEP; i++) remove_name(keep[i]);
    pcnn_net_destroy(&net);
    remove(path);
}

static pcnn_net *big(void);

/* kill -9 during a save leaves a temporary; the next save removes it. */
static void test_cleanup_kill(const char *self)
{
    char path[300];
    path_in_dir(path, sizeof path, "k.ckpt");
    pcnn_net *net = big();
    CK(pcnn_net_save(net, path));
    touch("k.ckpt.keep"); /* a neighbour that must survive */
    int rounds = 0, left = 0;
    while (left == 0 && rounds < 20) {
        rounds++;
        pid_t pid = fork();
        if (pid == 0) {
            char *argv[] = {(char *)self, "kill-child", path, "1", dir, NULL};
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        /* Kill it in the middle of a save: as soon as its temporary shows. */
        const struct timespec poll = {0, 200000L};
        for (int i = 0; i < 50000 && count_temps("k.ckpt") == 0; i++) nanosleep(&poll, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        left = count_temps("k.ckpt");
    }
    CK(pcnn_net_save(net, path));
    expect(left >= 1 && count_temps("k.ckpt") == 0 && exists("k.ckpt.keep") && exists("k.ckpt"),
           "SIGKILL during a save (round %d of up to 20) left %d temporary; the next save "
           "removed it and nothing else", rounds, left);
    remove_name("k.ckpt.keep");
    pcnn_net_destroy(&net);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* format, v1: the bytes against docs/checkpoint-format.md              */
/* ------------------------------------------------------------------ */

/* Everything below reads the file with code written from the document
 * alone (its own byte decoding, CRC and FNV-1a), so a file that passes
 * proves that the document and the writer agree. */

#define DOC_V1_BASIS 1469598103934665603ull  /* version 1's offset basis */
#define DOC_V2_BASIS 0xcbf29ce484222325ull   /* the standard one, from version 2 */

static uint64_t doc_uint(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v * 256 + p[i];
    return v;
}

/* CRC-32/ISO-HDLC bit by bit: reflected polynomial 0xEDB88320, initial
 * value and final xor 0xFFFFFFFF. */
static uint32_t doc_crc32(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static uint64_t doc_fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* "every number is fed as 8 little-endian bytes" */
static uint64_t doc_fnv_number(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
    return h;
}

static uint64_t doc_layer_hash(const pcnn_net *net, const pcnn_layer *l, uint64_t basis)
{
    char config[128] = "";
    if (l->ops->describe) l->ops->describe(l, config, sizeof config);
    uint64_t h = doc_fnv(basis, l->ops->kind, strlen(l->ops->kind) + 1);
    h = doc_fnv(h, config, strlen(config) + 1);
    const int64_t shape[4] = {l->out.c, l->out.d, l->out.h, l->out.w};
    for (int k = 0; k < 4; k++) h = doc_fnv_number(h, (uint64_t)shape[k]);
    h = doc_fnv_number(h, (uint64_t)l->num_inputs);
    for (int j = 0; j < l->num_inputs; j++) h = doc_fnv_number(h, (uint64_t)l->inputs[j]->index);
    h = doc_fnv_number(h, l->num_params);
    return doc_fnv_number(h, l == net->output ? 1 : 0);
}

/* The file img[0, len) of format `version`, hashed with `basis`, checked
 * field by field against the document and the network it was saved from
 * (or loaded into).  Returns the number of disagreements, naming each
 * on stderr unless `what` is NULL. */
static int check_against_doc(const unsigned char *img, size_t len, pcnn_net *net,
                             uint32_t version, uint64_t basis, const char *what)
{
    int bad = 0;
#define DOC(cond, ...)                                               \
    do {                                                             \
        if (!(cond)) {                                               \
            bad++;                                                   \
            if (what) {                                              \
                fprintf(stderr, "  %s: ", what);                     \
                fprintf(stderr, __VA_ARGS__);                        \
                fprintf(stderr, "\n");                               \
            }                                                        \
        }                                                            \
    } while (0)
    if (len < 36 || memcmp(img, "PCNNCKPT", 8) != 0) {
        DOC(0, "no magic");
        return bad;
    }
    DOC(doc_uint(img + 8, 4) == version, "version field %llu, want %u",
        (unsigned long long)doc_uint(img + 8, 4), version);
    const uint64_t S = doc_uint(img + 16, 4), H = doc_uint(img + 12, 4);
    if (S < 1 || S > 64 || H != 36 + 32 * S || H > len) {
        DOC(0, "header size %llu for %llu sections", (unsigned long long)H, (unsigned long long)S);
        return bad;
    }
    DOC(doc_uint(img + 20, 4) == 0, "header flags not 0");
    DOC(doc_uint(img + 24, 8) == len, "file size field %llu, file %zu bytes",
        (unsigned long long)doc_uint(img + 24, 8), len);
    DOC(doc_uint(img + H - 4, 4) == doc_crc32(img, H - 4), "header CRC-32");

    const unsigned char *sec[8] = {0};
    uint64_t sec_len[8] = {0}, at = H, last_id = 0;
    for (uint64_t i = 0; i < S; i++) {
        const unsigned char *e = img + 32 + 32 * i;
        const uint64_t id = doc_uint(e, 4), off = doc_uint(e + 8, 8), n = doc_uint(e + 16, 8);
        if (off != at || n > len - at) {
            DOC(0, "section %llu: offset %llu, %llu bytes", (unsigned long long)i,
                (unsigned long long)off, (unsigned long long)n);
            return bad;
        }
        DOC(id > last_id && id <= 7, "section %llu has id %llu after %llu", (unsigned long long)i,
            (unsigned long long)id, (unsigned long long)last_id);
        DOC(doc_uint(e + 4, 4) == (id == 7 ? 0u : 1u), "section id %llu flags %llu",
            (unsigned long long)id, (unsigned long long)doc_uint(e + 4, 4));
        DOC(doc_uint(e + 24, 4) == doc_crc32(img + off, (size_t)n), "section id %llu CRC-32",
            (unsigned long long)id);
        DOC(doc_uint(e + 28, 4) == 0, "section id %llu reserved field", (unsigned long long)id);
        if (id <= 7) {
            sec[id] = img + off;
            sec_len[id] = n;
        }
        last_id = id;
        at = off + n;
    }
    DOC(at == len, "the last section ends at %llu of %zu", (unsigned long long)at, len);
    const uint64_t L = (uint64_t)net->layers.count;
    if (!sec[1] || sec_len[1] != 128 || !sec[2] || sec_len[2] != 48 * L || !sec[3] ||
        sec_len[3] != 4 * (uint64_t)net->num_params) {
        DOC(0, "META, LAYERS or PARAMS missing or of the wrong size");
        return bad;
    }

    /* LAYERS: each record's hash recomputed from the network. */
    uint64_t def = basis;
    for (uint64_t i = 0; i < L; i++) {
        const pcnn_layer *l = net->layers.items[i];
        const unsigned char *r = sec[2] + 48 * i;
        const uint64_t h = doc_layer_hash(net, l, basis);
        DOC(doc_uint(r, 8) == h, "layer %llu hash %016llx, the document says %016llx",
            (unsigned long long)i, (unsigned long long)doc_uint(r, 8), (unsigned long long)h);
        DOC(doc_uint(r + 8, 8) == l->num_params && doc_uint(r + 16, 4) == (uint64_t)l->out.c &&
                doc_uint(r + 20, 4) == (uint64_t)l->out.h &&
                doc_uint(r + 24, 4) == (uint64_t)l->out.w && doc_uint(r + 28, 4) == 0,
            "layer %llu: parameters, shape or reserved field", (unsigned long long)i);
        char kind[17] = {0};
        memcpy(kind, r + 32, 16);
        DOC(strcmp(kind, l->ops->kind) == 0, "layer %llu kind '%s'", (unsigned long long)i, kind);
        def = doc_fnv_number(def, h);
    }
    /* META: the definition hash over the layer hashes, L, loss, optimizer. */
    def = doc_fnv_number(doc_fnv_number(doc_fnv_number(def, L), (uint64_t)net->loss),
                         (uint64_t)net->optimizer);
    const unsigned char *m = sec[1];
    DOC(doc_uint(m, 8) == def, "definition hash %016llx, the document says %016llx",
        (unsigned long long)doc_uint(m, 8), (unsigned long long)def);
    DOC(doc_uint(m + 8, 4) == L && doc_uint(m + 12, 4) == (uint64_t)net->optimizer &&
            doc_uint(m + 16, 4) == (uint64_t)net->loss && doc_uint(m + 20, 4) == 1 &&
            doc_uint(m + 24, 8) == net->num_params && doc_uint(m + 32, 8) == net->opt.seed &&
            doc_uint(m + 40, 8) == net->step,
        "META counts, kinds, seed or step");
    uint64_t lr_bits;
    memcpy(&lr_bits, &net->opt.learning_rate, 8);
    DOC(doc_uint(m + 56, 8) == lr_bits, "META learning rate");
    /* PARAMS: the parameters' float32 bit patterns. */
    int params_differ = 0;
    for (size_t i = 0; i < net->num_params; i++) {
        uint32_t bits;
        memcpy(&bits, &net->params[i], 4);
        params_differ += doc_uint(sec[3] + 4 * i, 4) != bits;
    }
    DOC(params_differ == 0, "%d parameters differ", params_differ);
    DOC((sec[4] != NULL) == (net->optimizer != PCNN_OPTIMIZER_SGD) &&
            (sec[5] != NULL) == (net->optimizer == PCNN_OPTIMIZER_ADAM),
        "optimizer sections present as the optimizer needs");
#undef DOC
    return bad;
}

/* A checkpoint written now matches the document field by field, hashed
 * with the standard FNV-1a basis, and carries version 2. */
static void test_format(void)
{
    expect(doc_crc32("123456789", 9) == 0xcbf43926u && doc_fnv(DOC_V2_BASIS, "a", 1) ==
               0xaf63dc4c8601ec8cull && doc_fnv(DOC_V2_BASIS, "foobar", 6) ==
               0x85944171f73967e8ull,
           "the test's own CRC-32 and FNV-1a give the published check values");
    char path[300];
    path_in_dir(path, sizeof path, "format.ckpt");
    pcnn_net *net = tiny();
    train_tiny(net);
    CK(pcnn_net_save_extra(net, path, "scheduler", 9));
    size_t len = 0;
    unsigned char *img = slurp(path, &len);
    if (!img) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    int bad = check_against_doc(img, len, net, 2, DOC_V2_BASIS, "version 2 file");
    expect(bad == 0, "a saved file (%zu bytes) is version 2 and agrees with "
           "docs/checkpoint-format.md in every header, table, META and LAYERS field, both "
           "CRCs and both hashes (standard FNV-1a basis) (%d disagreements)", len, bad);
    int v1_bad = check_against_doc(img, len, net, 2, DOC_V1_BASIS, NULL);
    expect(v1_bad >= 2, "its hashes are not version 1's (%d fields differ)", v1_bad);
    free(img);
    pcnn_net_destroy(&net);
    remove(path);
}

static void read_corpus(const char *corpus, const char *name, unsigned char **img, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", corpus, name);
    *img = slurp(path, len);
    if (!*img) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
}

/* Files written by version 1 (tests/checkpoint/corpus/v1_*, hashed with
 * the basis that lost a digit) still load and hash as the document says
 * for version 1; saved again they are, byte for byte, the committed
 * version-2 files (v2_*, written from the same network and state). */
static void test_v1(const char *corpus)
{
    char path[300], relabelled[300];
    path_in_dir(path, sizeof path, "upgraded.ckpt");
    path_in_dir(relabelled, sizeof relabelled, "relabelled.ckpt");
    static const char *names[2][2] = {
        {"v1_tiny_adam_untrained.ckpt", "v2_tiny_adam_untrained.ckpt"},
        {"v1_tiny_adam_bn_extra.ckpt", "v2_tiny_adam_bn_extra.ckpt"}};
    for (int k = 0; k < 2; k++) {
        const char *name = names[k][0];
        size_t len = 0, len2 = 0, len_v2 = 0;
        unsigned char *img, *v2;
        read_corpus(corpus, name, &img, &len);
        read_corpus(corpus, names[k][1], &v2, &len_v2);
        pcnn_net *net = tiny();
        unsigned char extra[16] = {0};
        size_t extra_bytes = 0;
        spill(path, img, len);
        pcnn_status st = pcnn_net_load_extra(net, path, extra, sizeof extra, &extra_bytes);
        const int want_step = k; /* untrained: step 0; the other after one step */
        expect(st == PCNN_OK && le_get_u32(img + 8) == 1 && net->step == (uint64_t)want_step &&
                   extra_bytes == (k ? 9u : 0u) && (!k || memcmp(extra, "scheduler", 9) == 0),
               "%s: version-1 file loads (%s%s%s), step %llu, %zu extra bytes", name,
               pcnn_status_str(st), st ? ": " : "", st ? pcnn_last_error() : "",
               (unsigned long long)net->step, extra_bytes);
        if (k == 0) { /* untrained: the parameters a fresh network starts from */
            pcnn_net *fresh = tiny();
            expect(memcmp(fresh->params, net->params, net->num_params * sizeof(float)) == 0,
                   "%s holds the initial parameters of the same network", name);
            pcnn_net_destroy(&fresh);
        }
        int bad = check_against_doc(img, len, net, 1, DOC_V1_BASIS, name);
        expect(bad == 0, "%s agrees with the document's version 1 (basis 1469598103934665603) "
               "(%d disagreements)", name, bad);

        /* Saved again: the version-2 file. */
        CK(pcnn_net_save_extra(net, path, extra, extra_bytes));
        unsigned char *img2 = slurp(path, &len2);
        if (!img2) {
            fprintf(stderr, "cannot read %s\n", path);
            exit(2);
        }
        bad = check_against_doc(img2, len2, net, 2, DOC_V2_BASIS, "re-saved");
        expect(bad == 0 && len2 == len_v2 && memcmp(img2, v2, len2) == 0,
               "%s re-saved: version 2 with the standard basis as documented (%d "
               "disagreements), identical to the committed %s", name, bad, names[k][1]);
        pcnn_net *other = tiny();
        st = pcnn_net_load(other, path);
        expect(st == PCNN_OK && memcmp(other->params, net->params,
                                       net->num_params * sizeof(float)) == 0,
               "the re-saved file loads with the same parameters: %s", pcnn_status_str(st));
        pcnn_net_destroy(&other);

        /* The version field decides the basis: relabelled, neither fits. */
        const unsigned char *files[2] = {img, img2};
        const size_t lens[2] = {len, len2};
        for (int f = 0; f < 2; f++) {
            unsigned char *work = malloc(lens[f]);
            memcpy(work, files[f], lens[f]);
            le_put_u32(work + 8, f ? 1 : 2);
            fix_header_crc(work);
            other = tiny();
            st = load_bytes(other, relabelled, work, lens[f]);
            expect(st == PCNN_ERR_MISMATCH && other->step == 0,
                   "%s relabelled version %d (hashes still version %d's): %s",
                   f ? "the re-saved file" : name, f ? 1 : 2, f ? 2 : 1, pcnn_status_str(st));
            pcnn_net_destroy(&other);
            free(work);
        }
        free(img2);
        free(img);
        free(v2);
        pcnn_net_destroy(&net);
    }
    remove(path);
    remove(relabelled);
}

/* ------------------------------------------------------------------ */
/* kill: SIGKILL during saves                                           */
/* ------------------------------------------------------------------ */

/* 256 x 1024 dense layer, Adam: ~3 MiB files, long enough to be hit. */
static pcnn_net *big(void)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, 16, 16, &l));
    CK(pcnn_dense(net, l, 1024, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, 1));
    return net;
}

/* Version k: step k and parameters that depend on k everywhere. */
static void fill_version(float *w, size_t n, long k)
{
    for (size_t i = 0; i < n; i++) w[i] = (float)k + (float)(i % 1000) * 1e-3f;
}

static int kill_child(const char *path, long start)
{
    pcnn_net *net = big();
    size_t n = net->num_params;
    float *w = malloc(n * sizeof(float));
    for (long k = start;; k++) {
        fill_version(w, n, k);
        CK(pcnn_net_set_params(net, w, n));
        CK(pcnn_net_set_option(net, PCNN_OPT_STEP, (double)k));
        CK(pcnn_net_save(net, path));
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void test_kill(const char *self)
{
    char path[300];
    path_in_dir(path, sizeof path, "kill.ckpt");
    pcnn_net *net = big();
    size_t n = net->num_params;
    float *w = malloc(n * sizeof(float)), *expect_w = malloc(n * sizeof(float));
    fill_version(w, n, 0);
    CK(pcnn_net_set_params(net, w, n));
    double t0 = now();
    CK(pcnn_net_save(net, path));
    const double save_s = now() - t0;
    printf("     one save of %zu parameters (Adam): %.1f ms\n", n, 1e3 * save_s);

    const int rounds = 100;
    long last = 0;
    int bad = 0, mid_write = 0, advanced = 0;
    unsigned rng = 12345u;
    for (int r = 0; r < rounds; r++) {
        char start[32];
        snprintf(start, sizeof start, "%ld", last + 1);
        pid_t pid = fork();
        if (pid == 0) {
            char *argv[] = {(char *)self, "kill-child", path, start, dir, NULL};
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        /* Up to ~4 saves' worth of time after a start-up of unknown length. */
        rng = rng * 1664525u + 1013904223u;
        double wait_s = 0.005 + (double)(rng >> 8) / 16777216.0 * (0.05 + 6 * save_s);
        struct timespec ts = {(time_t)wait_s, (long)((wait_s - (time_t)wait_s) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        /* A temporary of the interrupted save may remain: the cleanup call
         * removes exactly it. */
        int left = count_temps("kill.ckpt"), removed = -1;
        CK(pcnn_checkpoint_cleanup(path, &removed));
        if (removed != left || count_temps("kill.ckpt") != 0) {
            if (bad++ < 3)
                fprintf(stderr, "  round %d: %d temporaries left, cleanup removed %d, %d remain\n",
                        r, left, removed, count_temps("kill.ckpt"));
        }
        mid_write += left;
        pcnn_status st = pcnn_net_load(net, path);
        long k = (long)net->step;
        fill_version(expect_w, n, k);
        CK(pcnn_net_get_params(net, w, n));
        if (st != PCNN_OK || k < last || memcmp(w, expect_w, n * sizeof(float)) != 0) {
            if (bad++ < 3)
                fprintf(stderr, "  round %d: %s (%s), version %ld after %ld\n", r,
                        pcnn_status_str(st), pcnn_last_error(), k, last);
        }
        advanced += k > last;
        if (k > last) last = k;
    }
    expect(bad == 0, "%d SIGKILLs during a save loop: the file always loaded and held a whole "
           "version (%d bad); %d rounds advanced it, last version %ld, %d kills left a "
           "temporary (interrupted mid-save), each removed by pcnn_checkpoint_cleanup",
           rounds, bad, advanced, last, mid_write);
    free(w);
    free(expect_w);
    pcnn_net_destroy(&net);
    remove(path);
}

/* ------------------------------------------------------------------ */

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pcnn_ckpt_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 5 && strcmp(argv[1], "child-save") == 0) {
        snprintf(dir, sizeof dir, "%s", argv[4]);
        return child_save(argv[2], atoi(argv[3]));
    }
    if (argc >= 5 && strcmp(argv[1], "kill-child") == 0) {
        snprintf(dir, sizeof dir, "%s", argv[4]);
        return kill_child(argv[2], atol(argv[3]));
    }
    if (argc >= 3 && strcmp(argv[1], "corpus") == 0) { /* seeds for fuzz_checkpoint.c */
        char path[600];
        pcnn_net *net = tiny();
        snprintf(path, sizeof path, "%s/v%u_tiny_adam_untrained.ckpt", argv[2], CKPT_VERSION);
        CK(pcnn_net_save(net, path));
        train_tiny(net);
        snprintf(path, sizeof path, "%s/v%u_tiny_adam_bn_extra.ckpt", argv[2], CKPT_VERSION);
        CK(pcnn_net_save_extra(net, path, "scheduler", 9));
        pcnn_net_destroy(&net);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "v1") == 0 && argc < 3)) {
        fprintf(stderr, "usage: %s resume|process|mismatch|corrupt|values|cleanup|format|kill | v1 CORPUS | "
                "corpus DIR\n", argv[0]);
        return 2;
    }
    make_dir();
    if (strcmp(argv[1], "resume") == 0) {
        test_resume();
        test_bn_mean();
    }
    else if (strcmp(argv[1], "process") == 0) test_process(argv[0]);
    else if (strcmp(argv[1], "mismatch") == 0) test_mismatch();
    else if (strcmp(argv[1], "corrupt") == 0) {
        test_corrupt();
        test_out_of_memory();
    }
    else if (strcmp(argv[1], "format") == 0) test_format();
    else if (strcmp(argv[1], "v1") == 0) test_v1(argv[2]);
    else if (strcmp(argv[1], "kill") == 0) test_kill(argv[0]);
    else if (strcmp(argv[1], "values") == 0) {
        test_values();
        test_step_range();
    }
    else if (strcmp(argv[1], "cleanup") == 0) {
        test_cleanup_names();
        test_cleanup_kill(argv[0]);
    }
    else {
        fprintf(stderr, "unknown test %s\n", argv[1]);
        failures++;
    }
    rmdir(dir);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
