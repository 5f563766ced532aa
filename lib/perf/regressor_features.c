/* The regressors' input features (regressor.h, perf_features): the log of
 * each shape field a kind reads, then the log of its work and traffic, and
 * for convolutions which kernel the library will run for each pass. */
#include <math.h>

#include "../core/error.h"
#include "../kernels/conv_direct.h"
#include "../kernels/kernels.h"
#include "../strategy/conv_choice.h"
#include "regressor_set.h"

static const char *const kind_names[PERF_KIND_COUNT] = {
    [PERF_CONV2D_FWD] = "conv2d_fwd",
    [PERF_CONV2D_BWD] = "conv2d_bwd",
    [PERF_CONV2D_BWD_WEIGHTS] = "conv2d_bwd_weights",
    [PERF_CONV3D_FWD] = "conv3d_fwd",
    [PERF_CONV3D_BWD] = "conv3d_bwd",
    [PERF_CONV3D_BWD_WEIGHTS] = "conv3d_bwd_weights",
    [PERF_DENSE_FWD] = "dense_fwd",
    [PERF_DENSE_BWD] = "dense_bwd",
    [PERF_DENSE_BWD_WEIGHTS] = "dense_bwd_weights",
    [PERF_POOL2D_FWD] = "pool2d_fwd",
    [PERF_POOL2D_BWD] = "pool2d_bwd",
    [PERF_POOL3D_FWD] = "pool3d_fwd",
    [PERF_POOL3D_BWD] = "pool3d_bwd",
    [PERF_GLOBAL_AVGPOOL_FWD] = "global_avgpool_fwd",
    [PERF_GLOBAL_AVGPOOL_BWD] = "global_avgpool_bwd",
    [PERF_RELU_FWD] = "relu_fwd",
    [PERF_RELU_BWD] = "relu_bwd",
    [PERF_BATCHNORM_FWD] = "batchnorm_fwd",
    [PERF_BATCHNORM_BWD] = "batchnorm_bwd",
    [PERF_ADD_FWD] = "add_fwd",
    [PERF_ADD_BWD] = "add_bwd",
    [PERF_DROPOUT_FWD] = "dropout_fwd",
    [PERF_DROPOUT_BWD] = "dropout_bwd",
    [PERF_UPDATE] = "update",
};

const char *perf_kind_name(perf_kind kind)
{
    return kind >= 0 && kind < PERF_KIND_COUNT ? kind_names[kind] : NULL;
}

perf_kind perf_kind_family(perf_kind kind)
{
    switch (kind) {
    case PERF_CONV2D_BWD: case PERF_CONV2D_BWD_WEIGHTS: return PERF_CONV2D_FWD;
    case PERF_CONV3D_BWD: case PERF_CONV3D_BWD_WEIGHTS: return PERF_CONV3D_FWD;
    case PERF_DENSE_BWD: case PERF_DENSE_BWD_WEIGHTS: return PERF_DENSE_FWD;
    case PERF_POOL2D_BWD: return PERF_POOL2D_FWD;
    case PERF_POOL3D_BWD: return PERF_POOL3D_FWD;
    case PERF_GLOBAL_AVGPOOL_BWD: return PERF_GLOBAL_AVGPOOL_FWD;
    case PERF_RELU_BWD: return PERF_RELU_FWD;
    case PERF_BATCHNORM_BWD: return PERF_BATCHNORM_FWD;
    case PERF_ADD_BWD: return PERF_ADD_FWD;
    case PERF_DROPOUT_BWD: return PERF_DROPOUT_FWD;
    default: return kind;
    }
}

typedef struct feature_list {
    double *v;
    int n;
    double work, bytes; /* the baseline's terms (perf_kernel_work) */
} feature_list;

static void put_log(feature_list *f, double x) { f->v[f->n++] = log1p(x); }
static void put_raw(feature_list *f, double x) { f->v[f->n++] = x; }

/* Share of the 16-float vectors (AVX-512) that a run of n contiguous
 * elements fills: the loops of the element-wise kernels, pooling's output
 * rows and OpenBLAS's blocks run whole vectors plus a slower tail, so 17
 * costs nearly what 32 does -- a step no smooth function of log n gives
 * the MLP. */
static double vector_fill(double n) { return n / (16.0 * ceil(n / 16.0)); }

#define CHECK_FIELD(cond, name, fmt, ...)                                             \
    do {                                                                              \
        if (!(cond)) return FAIL(PCNN_ERR_SHAPE, "%s: " fmt, (name), __VA_ARGS__);     \
    } while (0)

/* Output extent of a window of k with stride s and padding p over n. */
static int out_extent(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

static pcnn_status check_volume(const char *name, const perf_shape *s, bool flat)
{
    CHECK_FIELD(s->batch >= 1, name, "batch %d must be >= 1", s->batch);
    CHECK_FIELD(s->cin >= 1, name, "channels %d must be >= 1", s->cin);
    if (flat) return PCNN_OK;
    CHECK_FIELD(s->d >= 1 && s->h >= 1 && s->w >= 1, name, "extent %d x %d x %d must be >= 1",
                s->d, s->h, s->w);
    return PCNN_OK;
}

static pcnn_status check_window(const char *name, const perf_shape *s, bool volume, bool pool)
{
    CHECK_FIELD(s->k >= 1 && s->stride >= 1 && s->pad >= 0, name,
                "kernel %d, stride %d must be >= 1 and padding %d >= 0", s->k, s->stride, s->pad);
    CHECK_FIELD(!pool || s->pad <= s->k / 2, name, "padding %d exceeds kernel/2 = %d", s->pad,
                s->k / 2);
    CHECK_FIELD(s->k <= s->h + 2 * s->pad && s->k <= s->w + 2 * s->pad &&
                    (!volume || s->k <= s->d + 2 * s->pad),
                name, "kernel %d exceeds the padded input %d x %d x %d (padding %d)", s->k, s->d,
                s->h, s->w, s->pad);
    return PCNN_OK;
}

/* The kernel of each pass of a 2D convolution, as conv_decide picks it
 * for the layer: the algorithm (one-hot), then per pass whether it runs
 * the grid or the channel-lane direct kernel (neither: a GEMM), and the
 * share of the direct grid that is output pixels (what the grid kernel
 * wastes on padding).  The passes of one layer may differ (a strided
 * direct layer computes dx by GEMM), and each backward kind's time
 * follows its own passes. */
static void conv2d_choice_features(const perf_shape *s, int threads, feature_list *f)
{
    const conv_geometry g = {.cin = s->cin, .cout = s->cout, .k = s->k, .stride = s->stride,
                             .pad = s->pad, .h = s->h, .w = s->w, .batch = s->batch,
                             .threads = threads, .keep_im2col = true,
                             .direct_available = direct_conv_available()};
    conv_choice c;
    conv_decide(&g, (conv_algorithm)s->algorithm, &c);
    put_raw(f, c.algorithm == CONV_ALGO_GEMM);
    put_raw(f, c.algorithm == CONV_ALGO_DIRECT);
    put_raw(f, c.algorithm == CONV_ALGO_TAPS);
    const conv_kernel passes[3] = {c.forward, c.input_grad, c.weight_grad};
    for (int i = 0; i < 3; i++) {
        put_raw(f, passes[i] == CONV_KERNEL_DIRECT_GRID);
        put_raw(f, passes[i] == CONV_KERNEL_DIRECT_CHANNELS);
    }
    direct_grid grid;
    direct_grid_init(&grid, 1, s->h, s->w, s->k, 1, s->pad);
    put_raw(f, (double)grid.ho * grid.wo / ((double)grid.hp * grid.wp));
}

/* Which passes of a 3D convolution run the direct kernels (vol_direct*.c)
 * rather than vol2col + GEMM: the rule of direct_choice in
 * lib/layers/conv3d.c, which is private to the layer and decided from the
 * same fields; test_regressor checks the two agree through the layer's
 * summary.  Stride 1, kernel <= 5, not 1x1x1 without padding, output rows
 * of at least 4; under auto each pass at rows of at least 8 (dx: input
 * rows, and padding <= k - 1), under direct every pass that can, under
 * GEMM none. */
typedef struct conv3d_passes {
    bool forward, dw, dx;
} conv3d_passes;

static conv3d_passes conv3d_direct_passes(const perf_shape *s, int ow)
{
    conv3d_passes d = {false, false, false};
    const bool pointwise = s->k == 1 && s->stride == 1 && s->pad == 0;
    if (!vol_direct_available() || pointwise || s->stride != 1 || s->k > 5 || ow < 4) return d;
    const bool dx_fits = s->pad <= s->k - 1 && s->w >= 4;
    if (s->algorithm == CONV_ALGO_DIRECT) {
        d.forward = d.dw = true;
        d.dx = dx_fits;
    } else if (s->algorithm == CONV_ALGO_AUTO) {
        d.forward = d.dw = ow >= 8;
        d.dx = dx_fits && s->w >= 8;
    }
    return d;
}

/* Share of the vector lanes the direct 3D kernels fill along a row of n
 * outputs: rows of up to 8 go two to a vector of 16, longer ones over
 * whole vectors (vol_direct.c, vol_direct_wgrad.c). */
static double row_lane_fill(int n) { return n <= 8 ? n / 8.0 : vector_fill(n); }

/* The 3D convolution's passes (direct or not), the lanes its rows fill
 * (forward and dW along output rows, dx along input rows) and the share
 * of the output-channel blocks that are real channels. */
static void conv3d_choice_features(const perf_shape *s, int ow, feature_list *f)
{
    const conv3d_passes d = conv3d_direct_passes(s, ow);
    put_raw(f, d.forward);
    put_raw(f, d.dw);
    put_raw(f, d.dx);
    put_raw(f, row_lane_fill(ow));
    put_raw(f, row_lane_fill(s->w));
    const int block = vol_direct_block(s->cout);
    put_raw(f, s->cout / ((double)block * ((s->cout + block - 1) / block)));
}

static pcnn_status conv_features(perf_kind family, const perf_shape *s, int threads,
                                 feature_list *f)
{
    const char *name = perf_kind_name(family);
    const bool volume = family == PERF_CONV3D_FWD;
    TRY(check_volume(name, s, false));
    CHECK_FIELD(s->cout >= 1, name, "output channels %d must be >= 1", s->cout);
    CHECK_FIELD(volume || s->d == 1, name, "depth %d of a 2D convolution must be 1", s->d);
    CHECK_FIELD(s->algorithm >= 0 && s->algorithm <= 3, name, "algorithm %d not in 0..3",
                s->algorithm);
    TRY(check_window(name, s, volume, false));
    const double od = volume ? out_extent(s->d, s->k, s->stride, s->pad) : 1;
    const double oh = out_extent(s->h, s->k, s->stride, s->pad);
    const double ow = out_extent(s->w, s->k, s->stride, s->pad);
    const double taps = (double)s->k * s->k * (volume ? s->k : 1);
    const double out_px = od * oh * ow, in_px = (double)s->d * s->h * s->w;
    put_log(f, s->batch);
    put_log(f, s->cin);
    put_log(f, s->cout);
    if (volume) put_log(f, s->d);
    put_log(f, s->h);
    put_log(f, s->w);
    put_log(f, s->k);
    put_log(f, s->stride);
    put_log(f, s->pad);
    f->work = 2.0 * s->batch * s->cin * s->cout * taps * out_px; /* flops */
    f->bytes = 4.0 * (s->batch * (s->cin * in_px + s->cout * out_px) + s->cin * s->cout * taps);
    put_log(f, f->work);
    put_log(f, f->bytes);
    put_log(f, 4.0 * s->batch * s->cin * taps * out_px);                         /* im2col */
    if (volume)
        conv3d_choice_features(s, (int)ow, f);
    else
        conv2d_choice_features(s, threads, f);
    return PCNN_OK;
}

static pcnn_status pool_features(perf_kind family, const perf_shape *s, feature_list *f)
{
    const char *name = perf_kind_name(family);
    const bool volume = family == PERF_POOL3D_FWD;
    TRY(check_volume(name, s, false));
    CHECK_FIELD(volume || s->d == 1, name, "depth %d of 2D pooling must be 1", s->d);
    CHECK_FIELD(s->pool_max == 0 || s->pool_max == 1, name, "pool_max %d must be 0 or 1",
                s->pool_max);
    TRY(check_window(name, s, volume, true));
    const double od = volume ? out_extent(s->d, s->k, s->stride, s->pad) : 1;
    const double out_px =
        od * out_extent(s->h, s->k, s->stride, s->pad) * out_extent(s->w, s->k, s->stride, s->pad);
    const double taps = (double)s->k * s->k * (volume ? s->k : 1);
    put_log(f, s->batch);
    put_log(f, s->cin);
    if (volume) put_log(f, s->d);
    put_log(f, s->h);
    put_log(f, s->w);
    put_log(f, s->k);
    put_log(f, s->stride);
    put_log(f, s->pad);
    put_raw(f, s->pool_max);
    f->work = (double)s->batch * s->cin * out_px * taps; /* window reads */
    f->bytes = 4.0 * s->batch * s->cin * ((double)s->d * s->h * s->w + out_px);
    put_log(f, f->work);
    put_log(f, f->bytes);
    /* 2D max pooling 2x2, stride 2, no padding has kernels of its own
     * (lib/layers/pool2d.c); the others loop along output rows. */
    const int ow = out_extent(s->w, s->k, s->stride, s->pad);
    put_raw(f, !volume && s->pool_max && s->k == 2 && s->stride == 2 && s->pad == 0);
    put_log(f, ow);
    put_raw(f, vector_fill(ow));
    put_raw(f, vector_fill(s->w));
    return PCNN_OK;
}

/* Element-wise layers and global pooling: batch, channels, extents,
 * elements, and the fused ReLU of batch norm and add. */
static pcnn_status elementwise_features(perf_kind family, const perf_shape *s, feature_list *f)
{
    const char *name = perf_kind_name(family);
    TRY(check_volume(name, s, false));
    const bool fusable = family == PERF_BATCHNORM_FWD || family == PERF_ADD_FWD;
    CHECK_FIELD(!fusable || s->fused_relu == 0 || s->fused_relu == 1, name,
                "fused_relu %d must be 0 or 1", s->fused_relu);
    put_log(f, s->batch);
    put_log(f, s->cin);
    put_log(f, s->d);
    put_log(f, s->h);
    put_log(f, s->w);
    f->work = (double)s->batch * s->cin * s->d * s->h * s->w; /* elements */
    f->bytes = 4.0 * f->work * (family == PERF_ADD_FWD ? 3 : 2);
    put_log(f, f->work);
    if (fusable) put_raw(f, s->fused_relu);
    /* Per-channel kernels (batch norm, global pooling) loop over planes. */
    const double plane = (double)s->d * s->h * s->w;
    put_log(f, plane);
    put_raw(f, vector_fill(plane));
    return PCNN_OK;
}

/* Whether the dense forward (Y = W X, no transposes) runs as one sgemv per
 * sample rather than one sgemm: the rule of gemm_serial in
 * lib/kernels/gemm.c (a batch under 64 and at most 2^20 multiply-adds),
 * whose limits are private to it, as it applies on one thread (with more,
 * gemm splits larger products first).  Several times slower per flop than
 * the GEMM just past the limit: a step the other features do not locate. */
static bool dense_forward_by_gemv(const perf_shape *s)
{
    return s->batch < 64 && (double)s->cout * s->batch * s->cin <= (double)(1 << 20);
}

pcnn_status perf_features(perf_kind kind, const perf_shape *shape, int threads, double *out,
                          int *count)
{
    double work[2];
    return perf_kernel_work(kind, shape, threads, out, count, work);
}

pcnn_status perf_kernel_work(perf_kind kind, const perf_shape *shape, int threads, double *out,
                             int *count, double work[2])
{
    REQUIRE_PTR(shape);
    REQUIRE_PTR(out);
    REQUIRE_PTR(count);
    REQUIRE(perf_kind_name(kind) != NULL, PCNN_ERR_INVALID_ARGUMENT, "unknown kernel kind %d",
            (int)kind);
    REQUIRE(threads >= 1, PCNN_ERR_INVALID_ARGUMENT, "threads %d must be >= 1", threads);
    feature_list f = {out, 0, 0, 0};
    const perf_kind family = perf_kind_family(kind);
    const perf_shape *s = shape;
    switch (family) {
    case PERF_CONV2D_FWD:
    case PERF_CONV3D_FWD: TRY(conv_features(family, s, threads, &f)); break;
    case PERF_POOL2D_FWD:
    case PERF_POOL3D_FWD: TRY(pool_features(family, s, &f)); break;
    case PERF_DENSE_FWD: {
        const char *name = perf_kind_name(kind);
        TRY(check_volume(name, s, true));
        CHECK_FIELD(s->cout >= 1, name, "output features %d must be >= 1", s->cout);
        put_log(&f, s->batch);
        put_log(&f, s->cin);
        put_log(&f, s->cout);
        f.work = 2.0 * s->batch * s->cin * s->cout;
        f.bytes = 4.0 * ((double)s->batch * (s->cin + s->cout) + (double)s->cin * s->cout);
        put_log(&f, f.work);
        put_log(&f, f.bytes);
        /* The GEMMs' dimensions against OpenBLAS's vector blocks. */
        put_raw(&f, vector_fill(s->batch));
        put_raw(&f, vector_fill(s->cin));
        put_raw(&f, vector_fill(s->cout));
        put_raw(&f, dense_forward_by_gemv(s));
        break;
    }
    case PERF_UPDATE: {
        CHECK_FIELD(s->params >= 1, "update", "params %lld must be >= 1", (long long)s->params);
        CHECK_FIELD(s->optimizer >= PCNN_OPTIMIZER_SGD && s->optimizer <= PCNN_OPTIMIZER_ADAM,
                    "update", "unknown optimizer %d", s->optimizer);
        f.work = (double)s->params;
        f.bytes = 4.0 * (double)s->params * (2 + s->optimizer); /* params, grads, state */
        put_log(&f, f.work);
        put_raw(&f, s->optimizer == PCNN_OPTIMIZER_SGD);
        put_raw(&f, s->optimizer == PCNN_OPTIMIZER_MOMENTUM);
        put_raw(&f, s->optimizer == PCNN_OPTIMIZER_ADAM);
        break;
    }
    default: TRY(elementwise_features(family, s, &f)); break;
    }
    *count = f.n;
    work[0] = f.work;
    work[1] = f.bytes;
    return PCNN_OK;
}
