/* The bridge to the per-kernel regressors (regressor.h, seed 004 section
 * 3.1): the model asks them for layers it has not timed and keeps them in
 * its file.  Built without regressor.h, every estimate is NaN and the
 * model uses its timings alone. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/text.h"
#include "perf.h"

#if defined(__has_include)
#if __has_include("regressor.h")
#define PERF_HAVE_REGRESSORS 1
#endif
#endif

#ifdef PERF_HAVE_REGRESSORS
#include "regressor.h"

/* The regressor kind and shape of layer l's pass (0 forward, 1 backward),
 * from its cost class (layers/layer_caps.h); false: its class has no
 * regressor (LAYER_COST_NONE).  No default below: a new class does not
 * compile until it is priced here. */
static bool kind_of(const pcnn_layer *l, int n, int pass, bool dx, perf_kind *kind,
                    perf_shape *s)
{
    const shape in = l->num_inputs ? l->inputs[0]->out : l->out;
    *s = (perf_shape){.batch = n, .cin = in.c, .cout = l->out.c, .d = in.d, .h = in.h,
                      .w = in.w};
    const int b = pass == 0 ? 0 : dx ? 1 : 2;
    layer_window w;
    if (layer_window_of(l, &w)) { /* the kinds priced by window have cubic ones: H says it */
        s->k = w.kernel[1];
        s->stride = w.stride[1];
        s->pad = w.padding[1];
    }
    switch (l->ops->caps.cost) {
    case LAYER_COST_UNDECLARED: /* refused by layer_append */
    case LAYER_COST_NONE:
        return false;
    case LAYER_COST_CONV2D:
        *kind = (perf_kind)(PERF_CONV2D_FWD + b);
        return true;
    case LAYER_COST_CONV3D:
        *kind = (perf_kind)(PERF_CONV3D_FWD + b);
        return true;
    case LAYER_COST_CONV_TRANSPOSE2D:
    case LAYER_COST_CONV_TRANSPOSE3D: {
        /* The adjoint convolution runs from this layer's output to its
         * input: its forward is that convolution's input gradient, its
         * input gradient that convolution's forward, the weight gradients
         * alike. */
        l->ops->caps.window(l, &w);
        *s = (perf_shape){.batch = n, .cin = l->out.c, .cout = in.c, .d = l->out.d,
                          .h = l->out.h, .w = l->out.w, .k = w.kernel[1],
                          .stride = w.stride[1], .pad = w.padding[1]};
        const int adjoint = pass == 0 ? 1 : dx ? 0 : 2;
        const perf_kind base =
            l->ops->caps.cost == LAYER_COST_CONV_TRANSPOSE2D ? PERF_CONV2D_FWD : PERF_CONV3D_FWD;
        *kind = (perf_kind)(base + adjoint);
        return true;
    }
    case LAYER_COST_MAXPOOL2D:
    case LAYER_COST_AVGPOOL2D:
    case LAYER_COST_MAXPOOL3D:
    case LAYER_COST_AVGPOOL3D: {
        const layer_cost_class c = l->ops->caps.cost;
        const bool pool2 = c == LAYER_COST_MAXPOOL2D || c == LAYER_COST_AVGPOOL2D;
        s->pool_max = c == LAYER_COST_MAXPOOL2D || c == LAYER_COST_MAXPOOL3D;
        s->cout = 0; /* pooling reads cin only */
        *kind = pool2 ? (pass ? PERF_POOL2D_BWD : PERF_POOL2D_FWD)
                      : (pass ? PERF_POOL3D_BWD : PERF_POOL3D_FWD);
        return true;
    }
    case LAYER_COST_DENSE:
        s->cin = (int)shape_size(in); /* its features */
        *kind = (perf_kind)(PERF_DENSE_FWD + b);
        return true;
    case LAYER_COST_STREAM:
        /* At its input's shape (a flatten's, not its vector's); by its
         * output where that is larger: an upsampling or a concat writes
         * more than its first input holds. */
        if (shape_size(l->out) > shape_size(in))
            *s = (perf_shape){.batch = n, .cin = l->out.c, .cout = l->out.c, .d = l->out.d,
                              .h = l->out.h, .w = l->out.w};
        *kind = pass ? PERF_RELU_BWD : PERF_RELU_FWD;
        return true;
    case LAYER_COST_BATCHNORM:
        s->fused_relu = l->fused_relu != NULL;
        *kind = pass ? PERF_BATCHNORM_BWD : PERF_BATCHNORM_FWD;
        return true;
    case LAYER_COST_ADD:
        s->fused_relu = l->fused_relu != NULL;
        *kind = pass ? PERF_ADD_BWD : PERF_ADD_FWD;
        return true;
    case LAYER_COST_GLOBAL_AVGPOOL:
        *kind = pass ? PERF_GLOBAL_AVGPOOL_BWD : PERF_GLOBAL_AVGPOOL_FWD;
        return true;
    case LAYER_COST_DROPOUT:
        *kind = pass ? PERF_DROPOUT_BWD : PERF_DROPOUT_FWD;
        return true;
    }
    return false;
}

double perf_regressor_time(pcnn_perfmodel *m, const pcnn_layer *l, int n, int pass, bool dx)
{
    perf_kind kind;
    perf_shape s;
    /* A ReLU fused into its batch norm or add costs nothing of its own:
     * those kinds were timed with the ReLU (perf_shape.fused_relu). */
    if (m->regressors && l->fused_into != NULL) return 0.0;
    if (!m->regressors || !kind_of(l, n, pass, dx, &kind, &s)) return NAN;
    double t = NAN;
    if (!perf_regressor_has(m->regressors, kind)) return NAN;
    if (perf_regressor_predict(m->regressors, kind, &s, &t) != PCNN_OK) {
        error_clear();
        return NAN;
    }
    return t;
}

size_t perf_regressors_bytes(const pcnn_perfmodel *m)
{
    size_t needed = 0;
    if (!m->regressors || perf_regressors_save(m->regressors, NULL, 0, &needed) != PCNN_OK)
        return 0;
    return needed;
}

void perf_regressors_write(const pcnn_perfmodel *m, unsigned char *buf, size_t size)
{
    size_t needed;
    if (m->regressors) perf_regressors_save(m->regressors, buf, size, &needed);
}

pcnn_status perf_regressors_read(pcnn_perfmodel *m, const unsigned char *buf, size_t size)
{
    if (size == 0) return PCNN_OK;
    perf_regressors *set = NULL;
    TRY(perf_regressors_load(buf, size, &set));
    perf_regressors_free(m);
    m->regressors = set;
    return PCNN_OK;
}

void perf_regressors_free(pcnn_perfmodel *m)
{
    perf_regressors *set = m->regressors;
    perf_regressors_destroy(&set);
    m->regressors = NULL;
}

size_t perf_regressors_describe(const pcnn_perfmodel *m, char *buf, size_t size)
{
    text t = text_start(buf, size);
    if (!m->regressors) {
        text_put(&t, "regressors: none fitted\n");
        return t.len;
    }
    text_put(&t, "regressors (held-out median |RE|):\n");
    for (int k = 0; k < PERF_KIND_COUNT; k++) {
        double re;
        int train, test;
        if (!perf_regressor_has(m->regressors, (perf_kind)k)) continue;
        if (perf_regressor_error(m->regressors, (perf_kind)k, &re, &train, &test) != PCNN_OK) {
            error_clear();
            continue;
        }
        text_put(&t, "  %-22s %6.1f %%  (%d train, %d test)\n", perf_kind_name((perf_kind)k),
                 100 * re, train, test);
    }
    return t.len;
}

pcnn_status perf_fit_regressors(pcnn_perfmodel *m, int threads, double budget, uint64_t seed)
{
    perf_calib_config c;
    perf_calib_defaults(&c);
    c.budget_seconds = budget;
    c.threads = threads;
    c.seed = seed;
    c.kinds = perf_kinds_all(); /* pooling, 3D and dropout layers too, not only ResNet's */
    perf_regressors *set = NULL;
    TRY(perf_regressors_calibrate(&c, &set));
    int fitted = 0;
    for (int k = 0; k < PERF_KIND_COUNT; k++) fitted += perf_regressor_has(set, (perf_kind)k);
    if (fitted == 0) { /* the model keeps the regressors it had */
        perf_regressors_destroy(&set);
        return FAIL(PCNN_ERR_TIMEOUT,
                    "budget %g s: no layer kind reached %d timed shapes, nothing fitted "
                    "(a few seconds fit every kind)",
                    budget, c.min_points);
    }
    perf_regressors_free(m);
    m->regressors = set;
    return PCNN_OK;
}

#else /* without regressor.h */

pcnn_status perf_fit_regressors(pcnn_perfmodel *m, int threads, double budget, uint64_t seed)
{
    (void)m, (void)threads, (void)budget, (void)seed;
    return FAIL(PCNN_ERR_UNSUPPORTED, "this build has no kernel regressors");
}

double perf_regressor_time(pcnn_perfmodel *m, const pcnn_layer *l, int n, int pass, bool dx)
{
    (void)m, (void)l, (void)n, (void)pass, (void)dx;
    return NAN;
}

size_t perf_regressors_bytes(const pcnn_perfmodel *m)
{
    (void)m;
    return 0;
}

void perf_regressors_write(const pcnn_perfmodel *m, unsigned char *buf, size_t size)
{
    (void)m, (void)buf, (void)size;
}

pcnn_status perf_regressors_read(pcnn_perfmodel *m, const unsigned char *buf, size_t size)
{
    (void)m, (void)buf;
    if (size == 0) return PCNN_OK;
    return FAIL(PCNN_ERR_UNSUPPORTED, "the model file holds kernel regressors, which this "
                                      "build cannot read");
}

void perf_regressors_free(pcnn_perfmodel *m) { m->regressors = NULL; }

size_t perf_regressors_describe(const pcnn_perfmodel *m, char *buf, size_t size)
{
    (void)m;
    text t = text_start(buf, size);
    text_put(&t, "regressors: not built in\n");
    return t.len;
}

#endif
