/* Finite-difference gradient check of every layer type, through the public
 * API only.
 *
 * Each case builds a tiny network (input -> layers under test -> loss),
 * takes the analytic gradients of pcnn_net_compute_gradients (parameters
 * and input) and compares each coordinate with the central difference
 * (L(v+h) - L(v-h)) / 2h of pcnn_net_compute_loss.  The loss is float32,
 * so the step is large-ish (h = 1e-2 on values of order 0.1..1) and the
 * absolute tolerance has a floor at a few ulps of the loss divided by 2h.
 *
 * Kinks (ReLU at 0, max-pool ties, L1 at the target) break the central
 * difference.  Where the kink sits on the input, the input is drawn from a
 * shuffled grid of values spaced 3h apart and away from 0, so no single
 * perturbation reaches a kink; L1 targets are kept well away from the
 * outputs.  Where kinks sit inside the network (ReLU after a conv), the
 * case is marked KINKS: a mismatching coordinate is retried with steps h/4
 * and h/16 (a kink in reach of h is often out of reach of h/16, while a
 * wrong gradient mismatches at every step); one still mismatching at h/16
 * whose second difference shows a kink within the step is skipped, and the
 * case fails if more than 10% are skipped.
 *
 * Cases named "3d ..." run on volumes (pcnn_net_input3d): conv3d, the 3D
 * pools and every layer that accepts depth.
 * Cancelling cases (a conv followed by batch norm, on larger planes and
 * batches) check the conv's weight gradient where it is a long sum of
 * terms that cancel, on about 24 parameters.  Finite differences of a
 * float32 loss resolve about 1e-3 of a gradient, not the float32 rounding
 * of such a sum: tests/unit/test_wgrad_cancel measures that against
 * float64.
 *
 * Usage: test_gradcheck [--threads N] [--conv A] [--step H] [--seed S] [--verbose]
 *                       [case-substring]
 * --conv sets PCNN_OPT_CONV_ALGORITHM (2: the direct kernel, 3: one GEMM per tap,
 * wherever it applies).
 */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_CONV_ALGORITHM, the 3D calls: pcnn.h section 9 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"
#include "tutil.h"

/* Finite-difference step (--step changes it, to diagnose). */
static double STEP = 1e-2;
#define RTOL 1e-2   /* relative tolerance */
#define ATOL_REL 1e-3 /* absolute tolerance, as a fraction of the case's largest gradient */
#define MAX_SKIP_FRACTION 0.10

enum {
    IN_SPACED = 1, /* input from a shuffled grid spaced 3h apart, away from 0 */
    KINKS = 2,     /* internal kinks: skip coordinates that straddle one */
    L1_AWAY = 4,   /* L1 targets placed away from the outputs */
    PARAMS_ONLY = 8, /* large inputs: check about 24 parameters, no input */
    TARGETS01 = 16  /* targets are probabilities in [0, 1] (BCE on logits) */
};

typedef struct gc_case gc_case;
typedef pcnn_status (*build_fn)(pcnn_net *net, pcnn_layer *x, const gc_case *tc,
                                pcnn_layer **out);

struct gc_case {
    const char *name;
    int c, h, w;    /* one input sample */
    int n;          /* batch */
    int max_batch;  /* finalize with this (0: n) */
    pcnn_loss loss;
    unsigned flags;
    build_fn build;
    int a[6];       /* builder arguments */
    float f;        /* builder argument */
};

/* A case on volumes: input (c, d, h, w). */
typedef struct gc_case3d {
    int d;
    gc_case t;
} gc_case3d;

/* ---- builders --------------------------------------------------------- */

/* A convolution that fits its input: conv3d on volumes, conv2d on images,
 * so that the builders below serve both. */
static pcnn_status conv_any(pcnn_net *net, pcnn_layer *x, int cout, int k, int s, int p,
                            int bias, pcnn_layer **o)
{
    int depth = 1;
    pcnn_status st = pcnn_layer_output_shape3d(x, NULL, &depth, NULL, NULL);
    if (st) return st;
    if (depth > 1) return pcnn_conv3d(net, x, cout, k, s, p, bias, o);
    return pcnn_conv2d(net, x, cout, k, s, p, bias, o);
}

static pcnn_status b_conv(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_conv2d(net, x, t->a[0], t->a[1], t->a[2], t->a[3], t->a[4], o);
}

static pcnn_status b_maxpool(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_maxpool2d(net, x, t->a[0], t->a[1], t->a[2], o);
}

static pcnn_status b_avgpool(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_avgpool2d(net, x, t->a[0], t->a[1], t->a[2], o);
}

static pcnn_status b_gap(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    (void)t;
    return pcnn_global_avgpool(net, x, o);
}

static pcnn_status b_conv_gap_dense(pcnn_net *net, pcnn_layer *x, const gc_case *t,
                                    pcnn_layer **o)
{
    (void)t;
    pcnn_layer *a, *b;
    pcnn_status s;
    if ((s = conv_any(net, x, 4, 3, 1, 1, 1, &a))) return s;
    if ((s = pcnn_global_avgpool(net, a, &b))) return s;
    return pcnn_dense(net, b, 3, 1, o);
}

static pcnn_status b_dense(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_dense(net, x, t->a[0], t->a[1], o);
}

static pcnn_status b_flatten(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    (void)t;
    return pcnn_flatten(net, x, o);
}

/* conv -> flatten -> dense: flatten order must be PyTorch's (C, H, W). */
static pcnn_status b_conv_flatten(pcnn_net *net, pcnn_layer *x, const gc_case *t,
                                  pcnn_layer **o)
{
    pcnn_layer *a, *b;
    pcnn_status s;
    if ((s = conv_any(net, x, 2, 3, 2, 1, 1, &a))) return s;
    if ((s = pcnn_flatten(net, a, &b))) return s;
    if (t->a[0] == 0) {
        *o = b;
        return PCNN_OK;
    }
    return pcnn_dense(net, b, t->a[0], 1, o);
}

static pcnn_status b_relu(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a;
    pcnn_status s;
    if ((s = pcnn_relu(net, x, &a))) return s;
    if (t->a[0] == 0) {
        *o = a;
        return PCNN_OK;
    }
    return conv_any(net, a, t->a[0], 3, 1, 1, 1, o);
}

static pcnn_status b_leaky(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a;
    pcnn_status s;
    if ((s = pcnn_leaky_relu(net, x, t->f, &a))) return s;
    if (t->a[0] == 0) {
        *o = a;
        return PCNN_OK;
    }
    return conv_any(net, a, t->a[0], 3, 1, 1, 1, o);
}

/* conv -> relu -> dense: a ReLU on computed values (KINKS). */
static pcnn_status b_conv_relu_dense(pcnn_net *net, pcnn_layer *x, const gc_case *t,
                                     pcnn_layer **o)
{
    pcnn_layer *a, *b;
    pcnn_status s;
    if ((s = conv_any(net, x, 3, 3, 1, 1, 1, &a))) return s;
    if (t->a[0]) s = pcnn_leaky_relu(net, a, t->f, &b);
    else s = pcnn_relu(net, a, &b);
    if (s) return s;
    return pcnn_dense(net, b, 4, 1, o);
}

/* conv -> batchnorm [-> conv]: a[0] conv bias, a[1] second conv. */
static pcnn_status b_conv_bn(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b;
    pcnn_status s;
    if ((s = conv_any(net, x, 3, 3, 1, 1, t->a[0], &a))) return s;
    if ((s = pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b))) return s;
    if (!t->a[1]) {
        *o = b;
        return PCNN_OK;
    }
    return conv_any(net, b, 2, 3, 1, 1, 1, o);
}

/* conv (a[0] outputs, kernel a[1], padding a[2], no bias) -> batchnorm:
 * batch norm's backward pass hands the conv a gradient with zero mean per
 * channel and no component along its output, so the conv's weight
 * gradient is a sum over batch x pixels that cancels. */
static pcnn_status b_conv_bn_cancel(pcnn_net *net, pcnn_layer *x, const gc_case *t,
                                    pcnn_layer **o)
{
    pcnn_layer *a;
    pcnn_status s;
    if ((s = pcnn_conv2d(net, x, t->a[0], t->a[1], 1, t->a[2], 0, &a))) return s;
    return pcnn_batchnorm(net, a, 1e-5f, 0.1f, o);
}

/* batchnorm on the input, then dense (samples mix through the batch
 * statistics: the input gradient checks that coupling). */
static pcnn_status b_bn_dense(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    (void)t;
    pcnn_layer *a;
    pcnn_status s;
    if ((s = pcnn_batchnorm(net, x, 1e-3f, 0.1f, &a))) return s;
    return pcnn_dense(net, a, 3, 1, o);
}

/* dropout on the input or after a conv, then dense. */
static pcnn_status b_dropout(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a = x, *b;
    pcnn_status s;
    if (t->a[0] && (s = conv_any(net, x, 3, 3, 1, 1, 1, &a))) return s;
    if ((s = pcnn_dropout(net, a, t->f, &b))) return s;
    return pcnn_dense(net, b, 4, 1, o);
}

/* Two convs of x re-joined: x feeds both branches [, then a ReLU, which
 * the add computes itself]. */
static pcnn_status b_add_branches(pcnn_net *net, pcnn_layer *x, const gc_case *t,
                                  pcnn_layer **o)
{
    pcnn_layer *a, *b, *sum;
    pcnn_status s;
    if ((s = conv_any(net, x, 3, 3, 1, 1, 1, &a))) return s;
    if ((s = conv_any(net, x, 3, 1, 1, 0, 0, &b))) return s;
    if (t->a[0]) s = pcnn_add_scaled(net, a, b, t->f, &sum);
    else s = pcnn_add(net, a, b, &sum);
    if (s || !t->a[1]) {
        *o = sum;
        return s;
    }
    return pcnn_relu(net, sum, o);
}

/* add(x, x) (or add_scaled(x, x, f)) [-> relu] then a conv. */
static pcnn_status b_add_self(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a;
    pcnn_status s;
    if (t->a[0]) s = pcnn_add_scaled(net, x, x, t->f, &a);
    else s = pcnn_add(net, x, x, &a);
    if (s) return s;
    if (t->a[1] && (s = pcnn_relu(net, a, &a))) return s;
    return conv_any(net, a, 2, 3, 1, 1, 1, o);
}

/* Residual block on the input: x -> conv -> relu -> conv, added to x
 * (add_scaled when a[0]). */
static pcnn_status b_resblock(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b, *c;
    pcnn_status s;
    if ((s = conv_any(net, x, t->c, 3, 1, 1, 1, &a))) return s;
    if ((s = pcnn_relu(net, a, &b))) return s;
    if ((s = conv_any(net, b, t->c, 3, 1, 1, 1, &c))) return s;
    if (t->a[0]) return pcnn_add_scaled(net, x, c, t->f, o);
    return pcnn_add(net, x, c, o);
}

/* A conv whose output feeds a residual add and the branch of it:
 * c0 -> c1 [-> relu] -> c2, add(c0, c2) -> dense.  c0's weight gradient
 * sums both paths. */
static pcnn_status b_res_feed(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *c0, *c1, *r, *c2, *sum;
    pcnn_status s;
    if ((s = conv_any(net, x, 3, 3, 1, 1, 1, &c0))) return s;
    if ((s = conv_any(net, c0, 3, 3, 1, 1, 1, &c1))) return s;
    r = c1;
    if (t->a[0] && (s = pcnn_relu(net, c1, &r))) return s;
    if ((s = conv_any(net, r, 3, 3, 1, 1, 0, &c2))) return s;
    if (t->a[1]) s = pcnn_add_scaled(net, c0, c2, t->f, &sum);
    else s = pcnn_add(net, c0, c2, &sum);
    if (s) return s;
    return pcnn_dense(net, sum, 3, 1, o);
}

/* [conv ->] pixel shuffle r. */
static pcnn_status b_shuffle(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a = x;
    pcnn_status s;
    if (t->a[1] && (s = pcnn_conv2d(net, x, t->a[1], 3, 1, 1, 1, &a))) return s;
    return pcnn_pixel_shuffle(net, a, t->a[0], o);
}

/* sigmoid (a[1] 0) or tanh (1) [-> conv with a[0] outputs] [-> the other
 * activation when a[2]]. */
static pcnn_status b_squash(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b;
    pcnn_status s;
    if ((s = t->a[1] ? pcnn_tanh(net, x, &a) : pcnn_sigmoid(net, x, &a))) return s;
    if (t->a[0] == 0) {
        *o = a;
        return PCNN_OK;
    }
    if ((s = conv_any(net, a, t->a[0], 3, 1, 1, 1, &b))) return s;
    if (!t->a[2]) {
        *o = b;
        return PCNN_OK;
    }
    return t->a[1] ? pcnn_sigmoid(net, b, o) : pcnn_tanh(net, b, o);
}

static bool is_volume(pcnn_layer *x)
{
    int depth = 1;
    return pcnn_layer_output_shape3d(x, NULL, &depth, NULL, NULL) == PCNN_OK && depth > 1;
}

/* [conv with a[2] outputs ->] upsample by a[0], mode a[1] (2D or 3D by the
 * input). */
static pcnn_status b_upsample(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a = x;
    pcnn_status s;
    if (t->a[2] && (s = conv_any(net, x, t->a[2], 3, 1, 1, 1, &a))) return s;
    const pcnn_upsample_mode mode = (pcnn_upsample_mode)t->a[1];
    if (is_volume(x)) return pcnn_upsample3d(net, a, t->a[0], mode, o);
    return pcnn_upsample2d(net, a, t->a[0], mode, o);
}

/* Transposed convolution: cout, k, s, p, output padding, bias. */
static pcnn_status b_convt(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    const int *a = t->a;
    if (is_volume(x)) return pcnn_conv_transpose3d(net, x, a[0], a[1], a[2], a[3], a[4], a[5], o);
    return pcnn_conv_transpose2d(net, x, a[0], a[1], a[2], a[3], a[4], a[5], o);
}

/* concat of a[0] branches of x: x itself, then convs of 1 + j outputs;
 * a[1]: x once more at the end (a repeated input); a[2]: a conv after. */
static pcnn_status b_concat(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *ins[8] = {x}, *c;
    pcnn_status s;
    int count = 1;
    for (int j = 1; j < t->a[0]; j++)
        if ((s = conv_any(net, x, 1 + j, 3, 1, 1, 1, &ins[count++]))) return s;
    if (t->a[1]) ins[count++] = x;
    if ((s = pcnn_concat(net, ins, count, &c))) return s;
    if (!t->a[2]) {
        *o = c;
        return PCNN_OK;
    }
    return conv_any(net, c, 2, 3, 1, 1, 1, o);
}

/* A U-Net level: conv -> tanh (skip) -> strided conv -> transposed conv
 * (output padding a[0]) or upsampling (a[1]: 1 nearest, 2 linear) ->
 * concat with the skip -> conv. */
static pcnn_status b_unet(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *skip, *down, *up, *cat;
    pcnn_status s;
    const bool vol = is_volume(x);
    if ((s = conv_any(net, x, 3, 3, 1, 1, 1, &a))) return s;
    if ((s = pcnn_tanh(net, a, &skip))) return s;
    if ((s = conv_any(net, skip, 4, 2, 2, 0, 1, &down))) return s;
    if (t->a[1]) {
        const pcnn_upsample_mode m = t->a[1] == 2 ? PCNN_UPSAMPLE_LINEAR : PCNN_UPSAMPLE_NEAREST;
        s = vol ? pcnn_upsample3d(net, down, 2, m, &up) : pcnn_upsample2d(net, down, 2, m, &up);
    } else {
        s = vol ? pcnn_conv_transpose3d(net, down, 3, 2, 2, 0, t->a[0], 1, &up)
                : pcnn_conv_transpose2d(net, down, 3, 2, 2, 0, t->a[0], 1, &up);
    }
    if (s) return s;
    pcnn_layer *ins[2] = {up, skip};
    if ((s = pcnn_concat(net, ins, 2, &cat))) return s;
    return conv_any(net, cat, 2, 3, 1, 1, 1, o);
}

/* A small complete network: conv -> bn -> relu -> maxpool -> dense. */
static pcnn_status b_small_cnn(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b, *c, *d;
    pcnn_status s;
    if ((s = conv_any(net, x, 4, 3, 1, 1, 0, &a))) return s;
    if ((s = pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b))) return s;
    if ((s = pcnn_relu(net, b, &c))) return s;
    if ((s = pcnn_maxpool2d(net, c, 2, 2, 0, &d))) return s;
    return pcnn_dense(net, d, t->a[0], 1, o);
}

static pcnn_status b_conv3d(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_conv3d(net, x, t->a[0], t->a[1], t->a[2], t->a[3], t->a[4], o);
}

static pcnn_status b_maxpool3d(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_maxpool3d(net, x, t->a[0], t->a[1], t->a[2], o);
}

static pcnn_status b_avgpool3d(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    return pcnn_avgpool3d(net, x, t->a[0], t->a[1], t->a[2], o);
}

/* CosmoFlow in miniature: conv3d -> bn -> leaky relu -> avgpool3d ->
 * dropout -> dense. */
static pcnn_status b_small_3d(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b, *c, *d, *e;
    pcnn_status s;
    if ((s = pcnn_conv3d(net, x, 3, 3, 1, 1, 0, &a))) return s;
    if ((s = pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b))) return s;
    if ((s = pcnn_leaky_relu(net, b, t->f, &c))) return s;
    if ((s = pcnn_avgpool3d(net, c, 3, 2, 1, &d))) return s;
    if ((s = pcnn_dropout(net, d, 0.2f, &e))) return s;
    return pcnn_dense(net, e, t->a[0], 1, o);
}

/* conv3d -> batch norm -> ReLU (which the batch norm computes itself) ->
 * dense. */
static pcnn_status b_bn_relu_3d(pcnn_net *net, pcnn_layer *x, const gc_case *t, pcnn_layer **o)
{
    pcnn_layer *a, *b, *c;
    pcnn_status s;
    if ((s = pcnn_conv3d(net, x, 3, 3, 1, 1, 0, &a))) return s;
    if ((s = pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b))) return s;
    if ((s = pcnn_relu(net, b, &c))) return s;
    return pcnn_dense(net, c, t->a[0], 1, o);
}

/* ---- the table -------------------------------------------------------- */

#define MSE PCNN_LOSS_MSE
#define CE PCNN_LOSS_SOFTMAX_CROSS_ENTROPY
#define L1 PCNN_LOSS_L1
#define BCE PCNN_LOSS_BCE_WITH_LOGITS

static const gc_case cases[] = {
    /* conv2d: cout, k, s, p, bias; 3 channels of 7x5, batch 3 */
    {"conv k1 s1 p0 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 1, 1, 0, 1}, 0},
    {"conv k1 s2 p0 nobias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 1, 2, 0, 0}, 0},
    {"conv k3 s1 p0 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 1, 0, 1}, 0},
    {"conv k3 s1 p1 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 1, 1, 1}, 0},
    {"conv k3 s1 p1 nobias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 1, 1, 0}, 0},
    {"conv k3 s2 p0 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 2, 0, 1}, 0},
    {"conv k3 s2 p1 nobias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 2, 1, 0}, 0},
    {"conv k3 s3 p1 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 3, 3, 1, 1}, 0},
    {"conv k3 s2 p2 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {3, 3, 2, 2, 1}, 0},
    {"conv k5 s1 p0 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 5, 1, 0, 1}, 0},
    {"conv k5 s1 p2 nobias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 5, 1, 2, 0}, 0},
    {"conv k5 s3 p2 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {4, 5, 3, 2, 1}, 0},
    {"conv k5 s2 p1 bias", 3, 7, 5, 3, 0, MSE, 0, b_conv, {2, 5, 2, 1, 1}, 0},
    {"conv k3 s1 p1 cin1 8x8 n1", 1, 8, 8, 1, 0, MSE, 0, b_conv, {5, 3, 1, 1, 1}, 0},
    {"conv k3 s1 p1 n3 of max_batch 5", 3, 7, 5, 3, 5, MSE, 0, b_conv, {4, 3, 1, 1, 1}, 0},
    /* pools: k, s, p; distinct inputs so max-pool has no ties */
    {"maxpool k2 s2 p0", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {2, 2, 0}, 0},
    {"maxpool k2 s1 p0", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {2, 1, 0}, 0},
    {"maxpool k2 s2 p1", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {2, 2, 1}, 0},
    {"maxpool k3 s1 p1", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {3, 1, 1}, 0},
    {"maxpool k3 s2 p0", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {3, 2, 0}, 0},
    {"maxpool k3 s2 p1", 2, 7, 5, 2, 0, MSE, IN_SPACED, b_maxpool, {3, 2, 1}, 0},
    {"maxpool k3 s2 p1 n2 of max 4", 2, 7, 5, 2, 4, MSE, IN_SPACED, b_maxpool, {3, 2, 1}, 0},
    {"avgpool k2 s2 p0", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {2, 2, 0}, 0},
    {"avgpool k2 s1 p0", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {2, 1, 0}, 0},
    {"avgpool k2 s2 p1", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {2, 2, 1}, 0},
    {"avgpool k3 s1 p1", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {3, 1, 1}, 0},
    {"avgpool k3 s2 p0", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {3, 2, 0}, 0},
    {"avgpool k3 s2 p1", 2, 7, 5, 2, 0, MSE, 0, b_avgpool, {3, 2, 1}, 0},
    {"global avgpool", 3, 7, 5, 3, 0, MSE, 0, b_gap, {0}, 0},
    {"conv + global avgpool + dense", 3, 7, 5, 3, 0, MSE, 0, b_conv_gap_dense, {0}, 0},
    /* dense: out, bias */
    {"dense flat in, bias", 12, 1, 1, 3, 0, MSE, 0, b_dense, {5, 1}, 0},
    {"dense flat in, nobias", 12, 1, 1, 3, 0, MSE, 0, b_dense, {5, 0}, 0},
    {"dense CHW in, bias", 3, 7, 5, 3, 0, MSE, 0, b_dense, {4, 1}, 0},
    {"dense CHW in, nobias", 3, 7, 5, 3, 0, MSE, 0, b_dense, {4, 0}, 0},
    {"dense n2 of max_batch 4", 3, 4, 5, 2, 4, MSE, 0, b_dense, {3, 1}, 0},
    {"flatten", 3, 7, 5, 3, 0, MSE, 0, b_flatten, {0}, 0},
    {"conv + flatten", 3, 7, 5, 3, 0, MSE, 0, b_conv_flatten, {0}, 0},
    {"conv + flatten + dense", 3, 7, 5, 3, 0, MSE, 0, b_conv_flatten, {3}, 0},
    /* activations on the input (spaced away from 0), then optionally a conv */
    {"relu", 2, 7, 5, 3, 0, MSE, IN_SPACED, b_relu, {0}, 0},
    {"relu + conv", 2, 7, 5, 3, 0, MSE, IN_SPACED, b_relu, {3}, 0},
    {"leaky relu 0.1", 2, 7, 5, 3, 0, MSE, IN_SPACED, b_leaky, {0}, 0.1f},
    {"leaky relu 0.2 + conv", 2, 7, 5, 3, 0, MSE, IN_SPACED, b_leaky, {3}, 0.2f},
    {"conv + relu + dense", 2, 7, 5, 3, 0, MSE, KINKS, b_conv_relu_dense, {0}, 0},
    {"conv + leaky relu + dense", 2, 7, 5, 3, 0, MSE, KINKS, b_conv_relu_dense, {1}, 0.1f},
    /* batchnorm, training mode */
    {"conv + batchnorm", 3, 7, 5, 3, 0, MSE, 0, b_conv_bn, {1, 0}, 0},
    {"conv nobias + batchnorm + conv", 3, 7, 5, 3, 0, MSE, 0, b_conv_bn, {0, 1}, 0},
    {"conv + batchnorm n2", 3, 5, 4, 2, 0, MSE, 0, b_conv_bn, {1, 1}, 0},
    {"conv + batchnorm n3 of max 4", 3, 5, 4, 3, 4, MSE, 0, b_conv_bn, {1, 1}, 0},
    {"batchnorm flat input + dense", 6, 1, 1, 4, 0, MSE, 0, b_bn_dense, {0}, 0},
    /* cancelling weight-gradient sums over long batch x pixel runs, where
     * the direct kernels and the GEMMs per tap (--conv 2, 3) sum in blocks */
    {"cancel: conv k5 1->6 + bn 28x28 n16", 1, 28, 28, 16, 0, MSE, PARAMS_ONLY,
     b_conv_bn_cancel, {6, 5, 2}, 0},
    {"cancel: conv k3 2->12 + bn 32x32 n8", 2, 32, 32, 8, 0, MSE, PARAMS_ONLY,
     b_conv_bn_cancel, {12, 3, 1}, 0},
    {"cancel: conv k3 4->8 + bn 8x8 n32", 4, 8, 8, 32, 0, MSE, PARAMS_ONLY,
     b_conv_bn_cancel, {8, 3, 1}, 0},
    /* dropout: masks fixed within a step */
    {"dropout 0.3 on input + dense", 3, 5, 4, 3, 0, MSE, 0, b_dropout, {0}, 0.3f},
    {"conv + dropout 0.5 + dense", 3, 5, 4, 3, 0, MSE, 0, b_dropout, {1}, 0.5f},
    /* add / add_scaled, DAGs */
    {"add of two branches of x", 2, 7, 5, 3, 0, MSE, 0, b_add_branches, {0}, 0},
    {"add_scaled 0.3 of two branches", 2, 7, 5, 3, 0, MSE, 0, b_add_branches, {1}, 0.3f},
    {"add(x, x) + conv", 2, 7, 5, 3, 0, MSE, 0, b_add_self, {0}, 0},
    {"add_scaled(x, x, -0.7) + conv", 2, 7, 5, 3, 0, MSE, 0, b_add_self, {1}, -0.7f},
    /* the add computes the ReLU after it (the planner's fusion) */
    {"add of two branches + relu", 2, 7, 5, 3, 0, MSE, KINKS, b_add_branches, {0, 1}, 0},
    {"add_scaled 0.3 of branches + relu", 2, 7, 5, 3, 0, MSE, KINKS, b_add_branches, {1, 1}, 0.3f},
    {"add(x, x) + relu + conv", 2, 7, 5, 3, 0, MSE, KINKS, b_add_self, {0, 1}, 0},
    {"add_scaled(x, x, -0.7) + relu + conv", 2, 7, 5, 3, 0, MSE, KINKS, b_add_self, {1, 1}, -0.7f},
    {"residual block add", 3, 6, 5, 3, 0, MSE, KINKS, b_resblock, {0}, 0},
    {"residual block add_scaled 0.1", 3, 6, 5, 3, 0, MSE, KINKS, b_resblock, {1}, 0.1f},
    {"conv feeding residual add (linear)", 2, 6, 5, 3, 0, MSE, 0, b_res_feed, {0, 0}, 0},
    {"conv feeding residual add_scaled 0.5", 2, 6, 5, 3, 0, MSE, 0, b_res_feed, {0, 1}, 0.5f},
    {"conv feeding residual add + relu", 2, 6, 5, 3, 0, MSE, KINKS, b_res_feed, {1, 0}, 0},
    /* pixel shuffle: r, conv channels before it (0: none) */
    {"pixel shuffle r2", 8, 3, 4, 2, 0, MSE, 0, b_shuffle, {2, 0}, 0},
    {"pixel shuffle r3", 9, 2, 3, 2, 0, MSE, 0, b_shuffle, {3, 0}, 0},
    {"conv + pixel shuffle r2", 2, 4, 3, 2, 0, MSE, 0, b_shuffle, {2, 8}, 0},
    /* losses */
    {"cross entropy, dense flat", 12, 1, 1, 4, 0, CE, 0, b_dense, {5, 1}, 0},
    {"cross entropy, dense CHW", 3, 5, 4, 3, 0, CE, 0, b_dense, {4, 1}, 0},
    {"cross entropy, conv+gap+dense", 3, 7, 5, 3, 0, CE, 0, b_conv_gap_dense, {0}, 0},
    {"L1, dense", 12, 1, 1, 4, 0, L1, L1_AWAY, b_dense, {5, 1}, 0},
    {"L1, conv", 3, 7, 5, 2, 0, L1, L1_AWAY, b_conv, {2, 3, 1, 1, 1}, 0},
    {"MSE, conv + pixel shuffle", 2, 4, 3, 3, 0, MSE, 0, b_shuffle, {2, 4}, 0},
    /* sigmoid and tanh: a[0] conv outputs after (0: none), a[1] tanh, a[2]
     * the other one after the conv */
    {"sigmoid", 2, 7, 5, 3, 0, MSE, 0, b_squash, {0, 0, 0}, 0},
    {"tanh", 2, 7, 5, 3, 0, MSE, 0, b_squash, {0, 1, 0}, 0},
    {"sigmoid + conv + tanh", 2, 7, 5, 3, 0, MSE, 0, b_squash, {3, 0, 1}, 0},
    {"tanh + conv + sigmoid", 2, 5, 6, 2, 0, MSE, 0, b_squash, {2, 1, 1}, 0},
    /* BCE on logits: targets in [0, 1] */
    {"BCE logits, conv", 3, 7, 5, 3, 0, BCE, TARGETS01, b_conv, {2, 3, 1, 1, 1}, 0},
    {"BCE logits, dense", 12, 1, 1, 4, 0, BCE, TARGETS01, b_dense, {5, 1}, 0},
    {"BCE logits, tanh + conv", 2, 5, 4, 2, 0, BCE, TARGETS01, b_squash, {3, 1, 0}, 0},
    /* upsampling: factor, mode (0 nearest, 1 linear), conv channels before */
    {"upsample nearest f2", 2, 5, 4, 2, 0, MSE, 0, b_upsample, {2, 0, 0}, 0},
    {"upsample nearest f3 after conv", 2, 3, 5, 2, 0, MSE, 0, b_upsample, {3, 0, 3}, 0},
    {"upsample linear f2", 2, 5, 4, 2, 0, MSE, 0, b_upsample, {2, 1, 0}, 0},
    {"upsample linear f3", 1, 3, 5, 2, 0, MSE, 0, b_upsample, {3, 1, 0}, 0},
    {"upsample linear f2 after conv", 2, 4, 3, 3, 0, MSE, 0, b_upsample, {2, 1, 3}, 0},
    {"upsample linear f1", 2, 3, 4, 2, 0, MSE, 0, b_upsample, {1, 1, 0}, 0},
    /* transposed convolution: cout, k, s, p, output padding, bias */
    {"convt k3 s1 p0 op0 bias", 3, 5, 4, 2, 0, MSE, 0, b_convt, {2, 3, 1, 0, 0, 1}, 0},
    {"convt k3 s2 p1 op1 bias", 3, 5, 4, 2, 0, MSE, 0, b_convt, {2, 3, 2, 1, 1, 1}, 0},
    {"convt k2 s2 p0 op0 nobias", 3, 5, 4, 2, 0, MSE, 0, b_convt, {3, 2, 2, 0, 0, 0}, 0},
    {"convt k4 s3 p1 op2 bias", 2, 3, 5, 2, 0, MSE, 0, b_convt, {2, 4, 3, 1, 2, 1}, 0},
    {"convt k5 s2 p2 op1 bias", 2, 5, 3, 2, 0, MSE, 0, b_convt, {3, 5, 2, 2, 1, 1}, 0},
    {"convt k1 s2 p0 op1 bias", 3, 4, 3, 2, 0, MSE, 0, b_convt, {2, 1, 2, 0, 1, 1}, 0},
    {"convt k3 s3 p2 op0 nobias", 2, 5, 4, 2, 0, MSE, 0, b_convt, {2, 3, 3, 2, 0, 0}, 0},
    {"convt k3 s2 p1 op1 n2 of max 3", 2, 5, 4, 2, 3, MSE, 0, b_convt, {3, 3, 2, 1, 1, 1}, 0},
    /* concat: branches, x repeated at the end, a conv after */
    {"concat x alone", 2, 5, 4, 2, 0, MSE, 0, b_concat, {1, 0, 0}, 0},
    {"concat x, conv", 2, 5, 4, 2, 0, MSE, 0, b_concat, {2, 0, 0}, 0},
    {"concat x, conv, x + conv", 2, 5, 4, 2, 0, MSE, 0, b_concat, {2, 1, 1}, 0},
    {"concat of 4 branches + conv", 2, 3, 5, 2, 0, MSE, 0, b_concat, {4, 0, 1}, 0},
    {"concat 5 inputs, x twice, n2 of 3", 1, 4, 3, 2, 3, MSE, 0, b_concat, {4, 1, 0}, 0},
    /* U-Net levels on even sizes (k2 s2 down and up) */
    {"unet level convt", 2, 6, 4, 2, 0, MSE, 0, b_unet, {0, 0}, 0},
    {"unet level upsample nearest", 2, 6, 4, 2, 0, MSE, 0, b_unet, {0, 1}, 0},
    {"unet level upsample linear", 2, 4, 6, 2, 0, MSE, 0, b_unet, {0, 2}, 0},
    {"unet level convt op1 odd", 2, 7, 5, 2, 0, MSE, 0, b_unet, {1, 0}, 0},
    /* a whole small CNN */
    {"conv+bn+relu+maxpool+dense CE", 3, 6, 6, 3, 0, CE, KINKS, b_small_cnn, {4}, 0},
    /* conv2d with padding >= kernel: windows of pure padding */
    {"conv k1 s1 p1 bias", 3, 5, 4, 2, 0, MSE, 0, b_conv, {3, 1, 1, 1, 1}, 0},
    {"conv k3 s2 p3 bias", 3, 5, 4, 2, 0, MSE, 0, b_conv, {3, 3, 2, 3, 1}, 0},
};

/* Volumes: the depth, then the case as above. */
static const gc_case3d cases3d[] = {
    /* conv3d: cout, k, s, p, bias */
    {3, {"3d conv3d k3 s1 p1 bias", 2, 4, 5, 2, 0, MSE, 0, b_conv3d, {3, 3, 1, 1, 1}, 0}},
    {5, {"3d conv3d k3 s1 p0 nobias", 2, 4, 5, 2, 0, MSE, 0, b_conv3d, {3, 3, 1, 0, 0}, 0}},
    {5, {"3d conv3d k3 s2 p1 nobias", 2, 5, 4, 2, 0, MSE, 0, b_conv3d, {3, 3, 2, 1, 0}, 0}},
    {4, {"3d conv3d k3 s3 p2 bias", 2, 5, 4, 2, 0, MSE, 0, b_conv3d, {2, 3, 3, 2, 1}, 0}},
    {3, {"3d conv3d k2 s1 p2 bias", 2, 3, 4, 2, 0, MSE, 0, b_conv3d, {2, 2, 1, 2, 1}, 0}},
    {3, {"3d conv3d k3 s2 p3 bias", 1, 4, 3, 2, 0, MSE, 0, b_conv3d, {2, 3, 2, 3, 1}, 0}},
    {3, {"3d conv3d k1 s1 p0 bias", 3, 3, 4, 2, 0, MSE, 0, b_conv3d, {2, 1, 1, 0, 1}, 0}},
    {3, {"3d conv3d n2 of max_batch 3", 2, 4, 3, 2, 3, MSE, 0, b_conv3d, {3, 3, 1, 1, 1}, 0}},
    /* rows of 16 and 14: the direct kernels' passes under --conv 2 */
    {3, {"3d conv3d k3 s1 p1 rows of 16", 2, 3, 16, 2, 0, MSE, 0, b_conv3d, {5, 3, 1, 1, 1}, 0}},
    {3, {"3d conv3d k3 s1 p0 rows of 14", 3, 4, 16, 2, 0, MSE, 0, b_conv3d, {4, 3, 1, 0, 0}, 0}},
    {3, {"3d add of conv3d branches, rows of 16", 2, 3, 16, 2, 0, MSE, 0, b_add_branches, {0},
         0}},
    /* 3D pools: k, s, p */
    {5, {"3d maxpool3d k2 s2 p0", 2, 4, 5, 2, 0, MSE, IN_SPACED, b_maxpool3d, {2, 2, 0}, 0}},
    {5, {"3d maxpool3d k3 s2 p1", 2, 5, 4, 2, 0, MSE, IN_SPACED, b_maxpool3d, {3, 2, 1}, 0}},
    {3, {"3d maxpool3d k2 s1 p1", 1, 3, 4, 2, 0, MSE, IN_SPACED, b_maxpool3d, {2, 1, 1}, 0}},
    {5, {"3d avgpool3d k3 s2 p1", 2, 5, 4, 2, 0, MSE, 0, b_avgpool3d, {3, 2, 1}, 0}},
    {3, {"3d avgpool3d k2 s1 p1", 2, 3, 4, 2, 0, MSE, 0, b_avgpool3d, {2, 1, 1}, 0}},
    {5, {"3d avgpool3d k3 s3 p0", 2, 6, 4, 2, 0, MSE, 0, b_avgpool3d, {3, 3, 0}, 0}},
    /* every layer that accepts depth, on volumes */
    {3, {"3d relu + conv3d", 2, 3, 4, 2, 0, MSE, IN_SPACED, b_relu, {2}, 0}},
    {3, {"3d leaky relu 0.1", 2, 3, 4, 2, 0, MSE, IN_SPACED, b_leaky, {0}, 0.1f}},
    {3, {"3d conv3d + leaky relu + dense", 2, 3, 4, 2, 0, MSE, KINKS, b_conv_relu_dense, {1},
     0.01f}},
    {3, {"3d conv3d + batchnorm + conv3d", 2, 3, 4, 3, 0, MSE, 0, b_conv_bn, {0, 1}, 0}},
    {3, {"3d batchnorm + dense", 2, 3, 2, 4, 0, MSE, 0, b_bn_dense, {0}, 0}},
    {3, {"3d dropout 0.3 + dense", 2, 3, 4, 3, 0, MSE, 0, b_dropout, {0}, 0.3f}},
    {3, {"3d conv3d + dropout 0.5 + dense", 2, 3, 4, 3, 0, MSE, 0, b_dropout, {1}, 0.5f}},
    {3, {"3d add of two conv3d branches", 2, 3, 4, 2, 0, MSE, 0, b_add_branches, {0}, 0}},
    {3, {"3d add_scaled 0.3 + relu", 2, 3, 4, 2, 0, MSE, KINKS, b_add_branches, {1, 1}, 0.3f}},
    {5, {"3d global avgpool", 3, 3, 4, 2, 0, MSE, 0, b_gap, {0}, 0}},
    {3, {"3d conv3d + global avgpool + dense", 2, 3, 4, 3, 0, MSE, 0, b_conv_gap_dense, {0}, 0}},
    {3, {"3d dense CDHW in", 2, 3, 4, 2, 0, MSE, 0, b_dense, {3, 1}, 0}},
    {3, {"3d flatten", 2, 3, 4, 2, 0, MSE, 0, b_flatten, {0}, 0}},
    {5, {"3d conv3d + flatten + dense", 2, 4, 3, 2, 0, MSE, 0, b_conv_flatten, {3}, 0}},
    {3, {"3d L1, conv3d", 2, 3, 4, 2, 0, L1, L1_AWAY, b_conv3d, {2, 3, 1, 1, 1}, 0}},
    {3, {"3d sigmoid + conv3d + tanh", 2, 3, 4, 2, 0, MSE, 0, b_squash, {2, 0, 1}, 0}},
    {3, {"3d upsample nearest f2", 2, 3, 4, 2, 0, MSE, 0, b_upsample, {2, 0, 0}, 0}},
    {3, {"3d upsample linear f2 after conv3d", 2, 3, 2, 2, 0, MSE, 0, b_upsample, {2, 1, 2}, 0}},
    {2, {"3d upsample linear f3", 1, 3, 2, 2, 0, MSE, 0, b_upsample, {3, 1, 0}, 0}},
    {3, {"3d convt k3 s2 p1 op1 bias", 2, 3, 4, 2, 0, MSE, 0, b_convt, {2, 3, 2, 1, 1, 1}, 0}},
    {3, {"3d convt k2 s2 p0 op0 nobias", 2, 4, 3, 2, 0, MSE, 0, b_convt, {3, 2, 2, 0, 0, 0}, 0}},
    {2, {"3d convt k3 s1 p1 op0 bias", 3, 3, 3, 2, 0, MSE, 0, b_convt, {2, 3, 1, 1, 0, 1}, 0}},
    {3, {"3d convt k3 s3 p2 op2 bias", 2, 3, 2, 2, 0, MSE, 0, b_convt, {2, 3, 3, 2, 2, 1}, 0}},
    {3, {"3d concat x, conv3d, x + conv3d", 2, 3, 4, 2, 0, MSE, 0, b_concat, {2, 1, 1}, 0}},
    {4, {"3d unet level convt", 1, 4, 4, 2, 0, MSE, 0, b_unet, {0, 0}, 0}},
    {4, {"3d unet level upsample linear", 1, 4, 2, 2, 0, MSE, 0, b_unet, {0, 2}, 0}},
    {3, {"3d BCE logits, conv3d", 2, 3, 4, 2, 0, BCE, TARGETS01, b_conv3d, {2, 3, 1, 1, 1}, 0}},
    {3, {"3d conv3d + batchnorm + relu (fused) + dense", 2, 4, 3, 3, 0, MSE, KINKS, b_bn_relu_3d,
         {3}, 0}},
    {5, {"3d conv3d+bn+leaky+avgpool+dropout+dense", 2, 5, 4, 3, 0, MSE, KINKS, b_small_3d, {4},
     0.3f}},
};

/* ---- the check -------------------------------------------------------- */

typedef struct gc_result {
    double max_abs, max_rel, worst; /* worst = max |a-n| / tolerance */
    /* KINKS cases: coordinates retried with a smaller step, and skipped */
    long checked, retried, skipped;
    const char *worst_what;
    long worst_index;
    double worst_a, worst_n;
    bool ok;
} gc_result;

static int g_threads = 1;
static int g_conv_algorithm = 0;
static bool g_verbose = false;
static uint64_t g_seed = 0;

/* Distinct values, 3h apart and at least 1.5h from 0, shuffled. */
static void fill_spaced(float *x, size_t count, trng *r)
{
    long half = (long)(count / 2);
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(3.0 * STEP * ((double)((long)i - half) + 0.5));
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)trng_below(r, (int)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

static pcnn_status loss_at(pcnn_net *net, const gc_case *tc, const float *x, const int32_t *lab,
                           const float *tgt, double *out)
{
    float l = 0;
    pcnn_status s = pcnn_net_compute_loss(net, tc->n, x, tc->loss == CE ? lab : NULL,
                                          tc->loss == CE ? NULL : tgt, &l);
    *out = l;
    return s;
}

typedef struct coord_ctx {
    const gc_case *tc;
    gc_result *res;
    pcnn_net *net;
    float *p, *x;
    size_t np;
    const int32_t *lab;
    const float *tgt;
    double atol;  /* ATOL_REL * the case's largest analytic gradient */
    double loss0;
} coord_ctx;

/* Losses at v+s and v-s of a parameter (is_param) or an input, and the
 * actual (v+s) - (v-s) in float.  The parameter is left at v in c->p (the
 * next set_params restores it in the network). */
static pcnn_status losses_at(coord_ctx *c, bool is_param, size_t i, double s, double *lp,
                             double *lm, double *den)
{
    float *v = is_param ? &c->p[i] : &c->x[i];
    float v0 = *v, vp = (float)(v0 + s), vm = (float)(v0 - s);
    pcnn_status st = PCNN_OK;
    *den = (double)vp - (double)vm;
    *v = vp;
    if (is_param) st = pcnn_net_set_params(c->net, c->p, c->np);
    if (!st) st = loss_at(c->net, c->tc, c->x, c->lab, c->tgt, lp);
    *v = vm;
    if (!st && is_param) st = pcnn_net_set_params(c->net, c->p, c->np);
    if (!st) st = loss_at(c->net, c->tc, c->x, c->lab, c->tgt, lm);
    *v = v0;
    return st;
}

/* Check one coordinate with analytic gradient a.  In KINKS cases a
 * mismatch is retried with steps h/4 and h/16 (less likely to straddle a
 * kink; a wrong gradient mismatches at every step), and a mismatch left at
 * h/16 that the second difference explains (a kink within the step) is
 * skipped. */
static pcnn_status check_coord(coord_ctx *c, bool is_param, size_t i, double a)
{
    int tries = (c->tc->flags & KINKS) ? 3 : 1;
    double s = STEP, lp = 0, lm = 0, den = 1, n = 0, err = 0, tol = 0;
    int k;
    for (k = 0; k < tries; k++, s /= 4) {
        pcnn_status st = losses_at(c, is_param, i, s, &lp, &lm, &den);
        if (st) return st;
        /* Floor: a few ulps of the float32 loss over the step. */
        double floor_ulps = 8.0 * FLT_EPSILON * fmax(fabs(c->loss0), 1e-3) / den;
        n = (lp - lm) / den;
        err = fabs(a - n);
        tol = fmax(c->atol, floor_ulps) + RTOL * fmax(fabs(a), fabs(n));
        if (g_verbose && (err > tol || k > 0))
            printf("    %s[%zu] step %g: analytic %.6g numeric %.6g (err/tol %.3f)\n",
                   is_param ? "param" : "input", i, s, a, n, err / tol);
        if (err <= tol) break;
    }
    if (k > 0) c->res->retried++;
    if (err > tol && (c->tc->flags & KINKS)) {
        /* Second difference: ~s*f'' where smooth, the slope jump at a kink;
         * a single kink moves the central difference by up to jump/2. */
        double jump = fabs((lp - c->loss0) - (c->loss0 - lm)) / (den / 2);
        if (jump / 2 >= err - tol) {
            c->res->skipped++;
            return PCNN_OK;
        }
    }
    const char *what = is_param ? "param" : "input";
    double mag = fmax(fabs(a), fabs(n));
    c->res->checked++;
    if (err > c->res->max_abs) c->res->max_abs = err;
    /* Relative error where it means something: gradients above atol. */
    if (mag > c->atol && err / mag > c->res->max_rel) c->res->max_rel = err / mag;
    if (err / tol > c->res->worst) {
        c->res->worst = err / tol;
        c->res->worst_what = what;
        c->res->worst_index = (long)i;
        c->res->worst_a = a;
        c->res->worst_n = n;
    }
    return PCNN_OK;
}

static gc_result run_case(const gc_case *tc, int depth, uint64_t seed)
{
    gc_result res = {0};
    res.worst_what = "-";
    pcnn_net *net = NULL;
    pcnn_layer *in, *out;
    float *p = NULL, *g = NULL, *x = NULL, *gx = NULL, *tgt = NULL, *y = NULL;
    int32_t *lab = NULL;
    trng r = {seed};
    size_t np = 0, no = 0;
    size_t nx = (size_t)tc->n * tc->c * depth * tc->h * tc->w;
    int maxb = tc->max_batch ? tc->max_batch : tc->n;

    CK(pcnn_net_create(&net));
    if (depth > 1) CK(pcnn_net_input3d(net, tc->c, depth, tc->h, tc->w, &in));
    else CK(pcnn_net_input(net, tc->c, tc->h, tc->w, &in));
    CK(tc->build(net, in, tc, &out));
    CK(pcnn_net_set_loss(net, out, tc->loss));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, (double)(seed % 1000003)));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, g_threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, g_conv_algorithm));
    CK(pcnn_net_finalize(net, maxb));
    CK(pcnn_net_num_params(net, &np));
    CK(pcnn_net_output_size(net, &no));

    p = calloc(np + 1, sizeof *p);
    g = calloc(np + 1, sizeof *g);
    x = calloc(nx, sizeof *x);
    gx = calloc(nx, sizeof *gx);
    tgt = calloc((size_t)tc->n * no, sizeof *tgt);
    y = calloc((size_t)tc->n * no, sizeof *y);
    lab = calloc((size_t)tc->n, sizeof *lab);
    if (!p || !g || !x || !gx || !tgt || !y || !lab) {
        fprintf(stderr, "  out of memory\n");
        goto fail;
    }

    /* Parameters: the library's init, jittered so biases are non-zero and
     * batch-norm gammas differ from 1. */
    if (np) {
        CK(pcnn_net_get_params(net, p, np));
        for (size_t i = 0; i < np; i++) p[i] += trng_range(&r, -0.2, 0.2);
        CK(pcnn_net_set_params(net, p, np));
    }
    if (tc->flags & IN_SPACED) fill_spaced(x, nx, &r);
    else
        for (size_t i = 0; i < nx; i++) x[i] = trng_range(&r, -1, 1);
    for (int i = 0; i < tc->n; i++) lab[i] = trng_below(&r, (int)no);
    if (tc->flags & L1_AWAY) {
        /* Targets at least 0.2 (= 20h) from the outputs: no kink in reach. */
        CK(pcnn_net_predict(net, tc->n, x, y, (size_t)tc->n * no));
        for (size_t i = 0; i < (size_t)tc->n * no; i++)
            tgt[i] = y[i] + (trng_uniform(&r) < 0.5 ? -1.f : 1.f) * trng_range(&r, 0.2, 0.6);
    } else {
        const double lo = (tc->flags & TARGETS01) ? 0.0 : -1.0;
        for (size_t i = 0; i < (size_t)tc->n * no; i++) tgt[i] = trng_range(&r, lo, 1);
    }
    const int32_t *L = tc->loss == CE ? lab : NULL;
    const float *T = tc->loss == CE ? NULL : tgt;

    float loss_g = 0;
    CK(pcnn_net_compute_gradients(net, tc->n, x, L, T, &loss_g));
    if (np) CK(pcnn_net_get_grads(net, g, np));
    CK(pcnn_net_get_input_grad(net, gx, nx));

    double loss0;
    CK(loss_at(net, tc, x, lab, tgt, &loss0));
    if ((float)loss0 != loss_g) {
        printf("    note: compute_loss %.9g != compute_gradients loss %.9g\n", loss0,
               (double)loss_g);
        if (fabs(loss0 - loss_g) > 1e-5 * fabs(loss0)) goto fail;
    }

    double gmax = 0;
    for (size_t i = 0; i < np; i++) gmax = fmax(gmax, fabs(g[i]));
    for (size_t i = 0; i < nx; i++) gmax = fmax(gmax, fabs(gx[i]));
    coord_ctx cc = {tc, &res, net, p, x, np, lab, tgt, ATOL_REL * gmax, loss0};
    /* Large cases: about 24 parameters, spread over the taps and channels. */
    const size_t every = (tc->flags & PARAMS_ONLY) && np > 24 ? (np / 24) | 1 : 1;
    for (size_t i = 0; i < np; i += every) CK(check_coord(&cc, true, i, g[i]));
    if (np) CK(pcnn_net_set_params(net, p, np));
    for (size_t i = 0; i < nx && !(tc->flags & PARAMS_ONLY); i++)
        CK(check_coord(&cc, false, i, gx[i]));

    long total = res.checked + res.skipped;
    res.ok = res.worst <= 1.0 && res.checked > 0 &&
             (double)res.skipped <= MAX_SKIP_FRACTION * (double)total;
    if (gmax == 0) {
        printf("    all analytic gradients are zero\n");
        res.ok = false;
    }
    goto done;
fail:
    res.ok = false;
    res.worst = INFINITY;
done:
    free(p);
    free(g);
    free(x);
    free(gx);
    free(tgt);
    free(y);
    free(lab);
    pcnn_net_destroy(&net);
    return res;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) g_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--conv") && i + 1 < argc) g_conv_algorithm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) g_verbose = true;
        else if (!strcmp(argv[i], "--step") && i + 1 < argc) STEP = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = strtoull(argv[++i], NULL, 10);
        else filter = argv[i];
    }
    printf("gradcheck: h=%g rtol=%g atol=%g*max|grad| threads=%d conv_algorithm=%d\n", STEP,
           RTOL, ATOL_REL, g_threads, g_conv_algorithm);
    printf("%-38s %9s %9s %6s %9s %9s  %s\n", "case", "max abs", "max rel", "worst",
           "retried", "skipped", "result");
    int failed = 0, run = 0;
    const size_t n2 = sizeof cases / sizeof cases[0], n3 = sizeof cases3d / sizeof cases3d[0];
    for (size_t i = 0; i < n2 + n3; i++) {
        const gc_case *tc = i < n2 ? &cases[i] : &cases3d[i - n2].t;
        const int depth = i < n2 ? 1 : cases3d[i - n2].d;
        if (filter && !strstr(tc->name, filter)) continue;
        /* Seeded by name, so adding cases does not change the others. */
        uint64_t seed = 1469598103934665603ull ^ g_seed;
        for (const char *q = tc->name; *q; q++)
            seed = (seed ^ (unsigned char)*q) * 1099511628211ull;
        gc_result r = run_case(tc, depth, seed);
        run++;
        if (!r.ok) failed++;
        printf("%-38s %9.3g %9.3g %6.3f %4ld/%-4ld %4ld/%-4ld  %s", tc->name, r.max_abs,
               r.max_rel, r.worst, r.retried, r.checked + r.skipped, r.skipped,
               r.checked + r.skipped, r.ok ? "PASS" : "FAIL");
        if (!r.ok && isfinite(r.worst))
            printf("  (worst %s[%ld]: analytic %.6g numeric %.6g)", r.worst_what, r.worst_index,
                   r.worst_a, r.worst_n);
        printf("\n");
    }
    printf("gradcheck: %d of %d cases failed\n", failed, run);
    return failed ? 1 : 0;
}
