/* In-memory datasets: create/destroy/info argument checks, copies, shuffle
 * determinism and uniformity, batch bounds, and the internal accessors the
 * network uses. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCNN_EXPERIMENTAL /* the 3D calls: pcnn.h section 9 */
#include "data/dataset.h"
#include "pcnn.h"

static int failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define EXPECT_FAIL(call, want, text)                                                     \
    do {                                                                                  \
        pcnn_status got_ = (call);                                                        \
        const char *msg_ = pcnn_last_error();                                             \
        if (getenv("PCNN_TEST_VERBOSE")) printf("  %-12s %s\n", pcnn_status_str(got_), msg_); \
        CHECK(got_ == (want) && strstr(msg_, (text)) != NULL,                             \
              "%s gave %d (%s), message \"%s\"; want %d (%s) mentioning \"%s\"", #call,   \
              (int)got_, pcnn_status_str(got_), msg_, (int)(want), pcnn_status_str(want), \
              (text));                                                                    \
    } while (0)

/* Sample i of a (2, 3, 2) dataset holds i * 100 + element index. */
enum { C = 2, H = 3, W = 2, S = C * H * W };

static void fill(float *x, int n)
{
    for (int i = 0; i < n; i++)
        for (int e = 0; e < S; e++) x[i * S + e] = (float)(i * 100 + e);
}

static void test_create_args(void)
{
    float x[4 * S];
    int32_t labels[4] = {0, 1, 2, 3};
    float targets[4 * 3] = {0};
    fill(x, 4);
    pcnn_dataset *const sentinel = (pcnn_dataset *)&failures;
    pcnn_dataset *d = sentinel;
    const pcnn_status BAD = PCNN_ERR_INVALID_ARGUMENT;

    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, labels, NULL, 0, NULL), BAD, "out is NULL");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, NULL, labels, NULL, 0, &d), BAD, "x is NULL");
    EXPECT_FAIL(pcnn_dataset_create(0, C, H, W, x, labels, NULL, 0, &d), BAD, "n 0");
    EXPECT_FAIL(pcnn_dataset_create(-3, C, H, W, x, labels, NULL, 0, &d), BAD, "n -3");
    EXPECT_FAIL(pcnn_dataset_create(4, 0, H, W, x, labels, NULL, 0, &d), BAD, "(0, 3, 2)");
    EXPECT_FAIL(pcnn_dataset_create(4, C, -1, W, x, labels, NULL, 0, &d), BAD, "(2, -1, 2)");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, 0, x, labels, NULL, 0, &d), BAD, "(2, 3, 0)");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, NULL, NULL, 0, &d), BAD, "neither");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, labels, targets, 3, &d), BAD, "both");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, labels, NULL, 3, &d), BAD,
                "target_count 3 must be 0 with labels");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, NULL, targets, 0, &d), BAD,
                "target_count 0 < 1");
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, NULL, targets, -2, &d), BAD,
                "target_count -2 < 1");
    labels[2] = -7;
    EXPECT_FAIL(pcnn_dataset_create(4, C, H, W, x, labels, NULL, 0, &d), BAD,
                "label -7 of sample 2");
    labels[2] = 2;
    EXPECT_FAIL(pcnn_dataset_create(4, 65536, 65536, 2, x, labels, NULL, 0, &d), BAD,
                "exceeds INT_MAX");
    CHECK(d == sentinel, "out written by a failing call");
}

static void test_create_copy(void)
{
    float x[4 * S];
    int32_t labels[4] = {3, 0, 11, 3};
    fill(x, 4);
    x[5] = NAN; /* allowed here: the network checks inputs */
    x[6] = INFINITY;
    pcnn_dataset *d = NULL;
    CHECK(pcnn_dataset_create(4, C, H, W, x, labels, NULL, 0, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    if (!d) return;
    /* The dataset holds copies. */
    float x0[4 * S];
    memcpy(x0, x, sizeof x);
    for (int i = 0; i < 4 * S; i++) x[i] = -1;
    labels[0] = 99;

    int n = 0, c = 0, h = 0, w = 0;
    CHECK(pcnn_dataset_info(d, &n, &c, &h, &w) == PCNN_OK && n == 4 && c == C && h == H &&
              w == W,
          "info %d %d %d %d", n, c, h, w);
    CHECK(pcnn_dataset_info(d, NULL, NULL, NULL, NULL) == PCNN_OK, "info with NULLs");
    CHECK(pcnn_dataset_info(d, NULL, &c, NULL, NULL) == PCNN_OK && c == C, "info channels");
    EXPECT_FAIL(pcnn_dataset_info(NULL, &n, NULL, NULL, NULL), PCNN_ERR_INVALID_ARGUMENT,
                "data is NULL");
    CHECK(dataset_num_classes(d) == 12, "num_classes %d, want 12", dataset_num_classes(d));

    float bx[4 * S];
    int32_t bl[4];
    CHECK(pcnn_dataset_batch(d, 0, 4, bx, bl, NULL) == PCNN_OK, "%s", pcnn_last_error());
    CHECK(memcmp(bx, x0, sizeof bx) == 0, "batch x differs from the source (NaN bits too)");
    CHECK(bl[0] == 3 && bl[1] == 0 && bl[2] == 11 && bl[3] == 3, "labels %d %d %d %d", bl[0],
          bl[1], bl[2], bl[3]);
    /* Labels-only or x-only copies. */
    CHECK(pcnn_dataset_batch(d, 2, 1, bx, NULL, NULL) == PCNN_OK && bx[0] == 200.0f,
          "x-only batch %g", bx[0]);
    EXPECT_FAIL(pcnn_dataset_batch(d, 0, 1, bx, NULL, bx), PCNN_ERR_INVALID_ARGUMENT,
                "targets requested");

    CHECK(pcnn_dataset_destroy(&d) == PCNN_OK && d == NULL, "destroy did not clear %p",
          (void *)d);
    CHECK(pcnn_dataset_destroy(&d) == PCNN_OK, "destroy of pointer to NULL");
    CHECK(pcnn_dataset_destroy(NULL) == PCNN_OK, "destroy of NULL");
}

static void test_targets(void)
{
    enum { T = 3 };
    float x[5 * S], t[5 * T];
    fill(x, 5);
    for (int i = 0; i < 5 * T; i++) t[i] = 0.5f * (float)i;
    pcnn_dataset *d = NULL;
    CHECK(pcnn_dataset_create(5, C, H, W, x, NULL, t, T, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    if (!d) return;
    CHECK(dataset_num_classes(d) == 0, "regression num_classes %d", dataset_num_classes(d));
    float bx[2 * S], bt[2 * T];
    int32_t bl[2];
    CHECK(pcnn_dataset_batch(d, 3, 2, bx, NULL, bt) == PCNN_OK, "%s", pcnn_last_error());
    for (int k = 0; k < 2; k++) {
        CHECK(bx[k * S] == (float)((3 + k) * 100), "x of position %d", 3 + k);
        for (int j = 0; j < T; j++)
            CHECK(bt[k * T + j] == t[(3 + k) * T + j], "target %d of position %d", j, 3 + k);
    }
    EXPECT_FAIL(pcnn_dataset_batch(d, 0, 1, bx, bl, NULL), PCNN_ERR_INVALID_ARGUMENT,
                "labels requested");
    /* Shuffled targets follow their samples. */
    CHECK(pcnn_dataset_shuffle(d, 5, 1) == PCNN_OK, "shuffle");
    float all_x[5 * S], all_t[5 * T];
    pcnn_dataset_batch(d, 0, 5, all_x, NULL, all_t);
    for (int k = 0; k < 5; k++) {
        int i = (int)all_x[k * S] / 100;
        CHECK(all_t[k * T + 2] == t[i * T + 2], "target of position %d is not sample %d's", k,
              i);
    }
    pcnn_dataset_destroy(&d);
}

/* Volumes (C, D, H, W) with targets: info3d, whole samples copied and
 * shuffled with their targets, the 2D info refusing to drop the depth, the
 * internal view; and a 3D network trains and evaluates on it. */
static void test_volumes(void)
{
    enum { N = 6, VC = 2, VD = 3, VH = 4, VW = 5, VS = VC * VD * VH * VW, T = 2 };
    static float x[N * VS];
    float t[N * T];
    /* Sample i: the values i + [0, 0.5), so the integer part names it. */
    for (int i = 0; i < N * VS; i++) x[i] = (float)(i / VS) + 0.5f * (float)(i % VS) / VS;
    for (int i = 0; i < N * T; i++) t[i] = (float)i * 0.25f - 1.0f;
    pcnn_dataset *d = NULL;
    CHECK(pcnn_dataset_create3d(N, VC, VD, VH, VW, x, NULL, t, T, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    if (!d) return;
    int n = 0, c = 0, dd = 0, h = 0, w = 0;
    CHECK(pcnn_dataset_info3d(d, &n, &c, &dd, &h, &w) == PCNN_OK && n == N && c == VC &&
              dd == VD && h == VH && w == VW,
          "info3d gave %d x (%d, %d, %d, %d)", n, c, dd, h, w);
    CHECK(d->d == VD && d->sample_floats == (size_t)VS, "internal view d %d, %zu floats", d->d,
          d->sample_floats);
    EXPECT_FAIL(pcnn_dataset_info(d, &n, &c, &h, &w), PCNN_ERR_SHAPE, "use pcnn_dataset_info3d");
    CHECK(pcnn_dataset_shuffle(d, 9, 2) == PCNN_OK, "shuffle");
    static float bx[N * VS];
    float bt[N * T];
    CHECK(pcnn_dataset_batch(d, 0, N, bx, NULL, bt) == PCNN_OK, "%s", pcnn_last_error());
    int moved = 0;
    for (int k = 0; k < N; k++) {
        const int i = (int)bx[(size_t)k * VS];
        moved += i != k;
        CHECK(memcmp(bx + (size_t)k * VS, x + (size_t)i * VS, VS * sizeof *x) == 0,
              "position %d is not all of sample %d", k, i);
        CHECK(bt[k * T] == t[i * T] && bt[k * T + 1] == t[i * T + 1],
              "targets of position %d are not sample %d's", k, i);
    }
    CHECK(moved > 0, "the shuffle moved nothing");
    /* An image dataset answers info3d with depth 1. */
    pcnn_dataset *img = NULL;
    CHECK(pcnn_dataset_create(2, VC, VH, VW, x, NULL, t, T, &img) == PCNN_OK, "%s",
          pcnn_last_error());
    CHECK(img && pcnn_dataset_info3d(img, NULL, NULL, &dd, NULL, NULL) == PCNN_OK && dd == 1,
          "an image dataset's depth is %d", dd);
    pcnn_dataset_destroy(&img);

    /* A 3D regression network trains on it: the loss of train_epoch falls. */
    pcnn_net *net = NULL;
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net) == PCNN_OK, "create");
    pcnn_status st = pcnn_net_input3d(net, VC, VD, VH, VW, &l);
    if (!st) st = pcnn_conv3d(net, l, 3, 3, 1, 1, 1, &l);
    if (!st) st = pcnn_avgpool3d(net, l, 2, 1, 0, &l);
    if (!st) st = pcnn_dense(net, l, T, 1, &l);
    if (!st) st = pcnn_net_set_loss(net, l, PCNN_LOSS_MSE);
    if (!st) st = pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-3);
    if (!st) st = pcnn_net_finalize(net, 3);
    double first = 0, loss = 0, acc = 0;
    if (!st) st = pcnn_net_train_epoch(net, d, 3, &first);
    for (int e = 0; e < 5 && !st; e++) st = pcnn_net_train_epoch(net, d, 3, &loss);
    if (!st) st = pcnn_net_evaluate(net, d, &loss, &acc);
    CHECK(st == PCNN_OK && loss < first && isnan(acc), "3D training: %s (%s), loss %g -> %g",
          pcnn_status_str(st), pcnn_last_error(), first, loss);
    pcnn_net_destroy(&net);
    pcnn_dataset_destroy(&d);
}

/* The sample index at each position, read back through the public API. */
static void order_of(const pcnn_dataset *d, int n, int *order)
{
    float *x = malloc((size_t)n * S * sizeof *x);
    int32_t *l = malloc((size_t)n * sizeof *l);
    if (!x || !l) exit(1);
    pcnn_dataset_batch(d, 0, n, x, l, NULL);
    for (int k = 0; k < n; k++) {
        order[k] = l[k];
        CHECK(x[(size_t)k * S + 1] == (float)(l[k] * 100 + 1), "x and label apart at %d", k);
    }
    free(x);
    free(l);
}

static int is_permutation(const int *order, int n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int k = 0; k < n && ok; k++) {
        if (order[k] < 0 || order[k] >= n || seen[order[k]]) ok = 0;
        else seen[order[k]] = 1;
    }
    free(seen);
    return ok;
}

static void test_shuffle(void)
{
    enum { NS = 1000 };
    float *x = malloc(NS * S * sizeof *x);
    int32_t labels[NS];
    if (!x) exit(1);
    fill(x, NS);
    for (int i = 0; i < NS; i++) labels[i] = i;
    pcnn_dataset *d = NULL, *e = NULL;
    CHECK(pcnn_dataset_create(NS, C, H, W, x, labels, NULL, 0, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    CHECK(pcnn_dataset_create(NS, C, H, W, x, labels, NULL, 0, &e) == PCNN_OK, "%s",
          pcnn_last_error());
    free(x);
    if (!d || !e) return;
    static int a[NS], b[NS], c[NS];

    order_of(d, NS, a);
    for (int k = 0; k < NS; k++) CHECK(a[k] == k, "initial order is not file order at %d", k);

    EXPECT_FAIL(pcnn_dataset_shuffle(NULL, 1, 0), PCNN_ERR_INVALID_ARGUMENT, "data is NULL");
    CHECK(pcnn_dataset_shuffle(d, 42, 3) == PCNN_OK, "shuffle");
    order_of(d, NS, a);
    CHECK(is_permutation(a, NS), "(42, 3) is not a permutation");
    int moved = 0;
    for (int k = 0; k < NS; k++) moved += a[k] != k;
    CHECK(moved > NS / 2, "only %d of %d samples moved", moved, NS);

    /* Same key on another dataset, and after other shuffles: same order. */
    CHECK(pcnn_dataset_shuffle(e, 42, 3) == PCNN_OK, "shuffle");
    order_of(e, NS, b);
    CHECK(memcmp(a, b, sizeof a) == 0, "same (seed, epoch) on two datasets differs");
    pcnn_dataset_shuffle(d, 42, 4);
    pcnn_dataset_shuffle(d, 7, 3);
    pcnn_dataset_shuffle(d, 42, 3);
    order_of(d, NS, c);
    CHECK(memcmp(a, c, sizeof a) == 0, "order depends on earlier shuffles");

    /* Other epochs and seeds give other permutations. */
    pcnn_dataset_shuffle(d, 42, 4);
    order_of(d, NS, b);
    CHECK(is_permutation(b, NS) && memcmp(a, b, sizeof a) != 0, "epoch 4 equals epoch 3");
    pcnn_dataset_shuffle(d, 43, 3);
    order_of(d, NS, b);
    CHECK(is_permutation(b, NS) && memcmp(a, b, sizeof a) != 0, "seed 43 equals seed 42");
    /* Extreme keys are fine. */
    CHECK(pcnn_dataset_shuffle(d, UINT64_MAX, UINT64_MAX) == PCNN_OK, "extreme key");
    order_of(d, NS, b);
    CHECK(is_permutation(b, NS), "extreme key: not a permutation");

    /* The internal accessors agree with the public batch. */
    pcnn_dataset_shuffle(d, 42, 3);
    float bx[7 * S], ix[7 * S];
    int32_t bl[7], il[7];
    pcnn_dataset_batch(d, 500, 7, bx, bl, NULL);
    dataset_copy_batch(d, 500, 7, ix, il, NULL);
    CHECK(memcmp(bx, ix, sizeof bx) == 0 && memcmp(bl, il, sizeof bl) == 0,
          "dataset_copy_batch differs from pcnn_dataset_batch");
    for (int k = 0; k < 7; k++)
        CHECK(memcmp(dataset_sample_x(d, 500 + k), bx + k * S, S * sizeof(float)) == 0,
              "dataset_sample_x(%d)", 500 + k);
    pcnn_dataset_destroy(&d);
    pcnn_dataset_destroy(&e);

    /* Uniformity: the 6 orders of 3 samples over 6000 epochs. */
    float x3[3 * S];
    int32_t l3[3] = {0, 1, 2};
    fill(x3, 3);
    CHECK(pcnn_dataset_create(3, C, H, W, x3, l3, NULL, 0, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    int count[3][3][3] = {{{0}}};
    for (uint64_t ep = 0; ep < 6000; ep++) {
        int o[3];
        pcnn_dataset_shuffle(d, 2024, ep);
        order_of(d, 3, o);
        CHECK(is_permutation(o, 3), "epoch %llu", (unsigned long long)ep);
        count[o[0]][o[1]][o[2]]++;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (i != j) {
                int k = 3 - i - j, got = count[i][j][k];
                /* Binomial(6000, 1/6): sd ~29; 6 sd of slack. */
                CHECK(got > 1000 - 175 && got < 1000 + 175, "order %d%d%d appeared %d times", i,
                      j, k, got);
            }
    pcnn_dataset_destroy(&d);

    /* A one-sample dataset shuffles to itself. */
    CHECK(pcnn_dataset_create(1, C, H, W, x3, l3, NULL, 0, &d) == PCNN_OK, "n 1");
    CHECK(pcnn_dataset_shuffle(d, 1, 1) == PCNN_OK, "shuffle n 1");
    pcnn_dataset_destroy(&d);
}

static void test_batch_bounds(void)
{
    float x[6 * S];
    int32_t labels[6] = {0, 1, 2, 3, 4, 5};
    fill(x, 6);
    pcnn_dataset *d = NULL;
    CHECK(pcnn_dataset_create(6, C, H, W, x, labels, NULL, 0, &d) == PCNN_OK, "%s",
          pcnn_last_error());
    if (!d) return;
    /* Guard elements after the caller's buffer stay untouched. */
    float bx[7 * S];
    int32_t bl[7];
    for (int i = 0; i < 7 * S; i++) bx[i] = -5;
    for (int i = 0; i < 7; i++) bl[i] = -5;
    const pcnn_status BAD = PCNN_ERR_INVALID_ARGUMENT;
    EXPECT_FAIL(pcnn_dataset_batch(NULL, 0, 1, bx, bl, NULL), BAD, "data is NULL");
    EXPECT_FAIL(pcnn_dataset_batch(d, 0, 1, NULL, bl, NULL), BAD, "x is NULL");
    EXPECT_FAIL(pcnn_dataset_batch(d, -1, 1, bx, bl, NULL), BAD, "start -1 outside [0, 6)");
    EXPECT_FAIL(pcnn_dataset_batch(d, 6, 1, bx, bl, NULL), BAD, "start 6 outside [0, 6)");
    EXPECT_FAIL(pcnn_dataset_batch(d, 0, 0, bx, bl, NULL), BAD, "count 0 outside [1, 6]");
    EXPECT_FAIL(pcnn_dataset_batch(d, 2, -1, bx, bl, NULL), BAD, "count -1");
    EXPECT_FAIL(pcnn_dataset_batch(d, 2, 5, bx, bl, NULL), BAD, "count 5 outside [1, 4]");
    EXPECT_FAIL(pcnn_dataset_batch(d, 1, INT_MAX, bx, bl, NULL), BAD, "outside [1, 5]");
    EXPECT_FAIL(pcnn_dataset_batch(d, INT_MAX, INT_MAX, bx, bl, NULL), BAD, "start");
    for (int i = 0; i < 7 * S; i++) CHECK(bx[i] == -5, "failed batch wrote x[%d]", i);
    for (int i = 0; i < 7; i++) CHECK(bl[i] == -5, "failed batch wrote label %d", i);

    /* The last partial batch, exactly to the end. */
    CHECK(pcnn_dataset_batch(d, 4, 2, bx, bl, NULL) == PCNN_OK, "%s", pcnn_last_error());
    CHECK(bl[0] == 4 && bl[1] == 5 && bl[2] == -5, "labels %d %d %d", bl[0], bl[1], bl[2]);
    CHECK(bx[0] == 400 && bx[2 * S - 1] == 500 + S - 1 && bx[2 * S] == -5,
          "x edges %g %g %g", bx[0], bx[2 * S - 1], bx[2 * S]);
    CHECK(pcnn_dataset_batch(d, 0, 6, bx, NULL, NULL) == PCNN_OK, "whole dataset");
    pcnn_dataset_destroy(&d);
}

int main(void)
{
    test_create_args();
    test_create_copy();
    test_targets();
    test_volumes();
    test_shuffle();
    test_batch_bounds();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
