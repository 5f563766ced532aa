/* A dense layer fed through a flatten by a spatially split layer, run on
 * each rank's box (spatial.h box_dense).
 *
 * Without it the flatten gathers every sample whole onto the rank that
 * holds it in the sample-parallel head: with one sample on two ranks, one
 * rank then multiplies all of W while the other waits (CosmoFlow's first
 * dense layer is 4.2M of its 4.3M parameters).  Instead each rank
 * multiplies the columns of W that its box of the input holds:
 *
 *   forward   Y_partial = W[:, box] X_box on every rank, summed over the
 *             ranks (K x batch values), each keeping its own samples' rows
 *             of the sample-parallel head, plus the bias;
 *   backward  the head's dY rows summed into K x batch on every rank, then
 *             dW[:, box] = dY X_box^T (the other columns 0: the gradient
 *             exchange's sum over ranks completes W), db from this rank's
 *             own rows, and dX_box = W[:, box]^T dY, straight into the box
 *             of the flatten's input.
 *
 * Only where every rank holds every sample (one sample group): a group's
 * samples could otherwise have head rows on another group's ranks.  The
 * box's features in W come in runs: f = ((c D + d) H + h) W + w, so a box
 * whole along W (and H) covers runs of whole rows (and planes), one GEMM
 * each. */
#include <stdio.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "../layers/dense.h"
#include "spatial.h"

static bool split_parts(const int *parts)
{
    return parts[LAYOUT_D] * parts[LAYOUT_H] * parts[LAYOUT_W] > 1;
}

void spatial_plan_box_dense(pcnn_net *net)
{
    spatial *sp = net->spatial;
    if (sp->groups != 1) return;
    for (int i = 2; i < sp->count; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (!layer_is_dense(l) || l->num_inputs != 1 || split_parts(sp->layers[i].parts))
            continue;
        const pcnn_layer *f = l->inputs[0];
        const spatial_layer *sf = &sp->layers[f->index];
        if (!f->ops->caps.folds_into_dense || f->num_consumers != 1 || f == net->output ||
            split_parts(sf->parts) || memcmp(sf->parts, sp->layers[i].parts, sizeof sf->parts))
            continue;
        const pcnn_layer *src = f->inputs[0];
        const int *ps = sp->layers[src->index].parts;
        if (src->index == 0 || !split_parts(ps) || ps[LAYOUT_N] != 1) continue;
        sp->layers[f->index].folded = true;
        sp->layers[f->index].direct = false;
        sp->layers[i].box_dense = true;
        l->exchange_by_columns = true;
        l->decision.box_dense = true;
        /* Its products here are this file's fp32 GEMMs, not the layer's. */
        if (l->decision.precision > 0) l->decision.precision = 0;
    }
}

/* The box of the flatten's input this rank holds, and its runs of
 * consecutive features. */
typedef struct runs {
    const pcnn_layer *src; /* the flatten's input */
    const float *x;        /* its box: C x n x bd x bh x bw */
    float *dx;
    int n;                 /* samples (all of the batch) */
    int c, lo[3], ext[3], whole[3];
    int len;               /* features per run */
    size_t vol;            /* bd * bh * bw: one sample's stride in the box */
} runs;

/* The runs of box b of the flatten's input src (its samples: b's). */
static runs runs_in(const pcnn_layer *src, const box *b)
{
    runs r = {.src = src, .x = src->y, .dx = src->dy, .n = box_extent(b, LAYOUT_N),
              .c = src->out.c, .whole = {src->out.d, src->out.h, src->out.w}};
    for (int k = 0; k < 3; k++) {
        r.lo[k] = b->lo[LAYOUT_D + k];
        r.ext[k] = box_extent(b, LAYOUT_D + k);
    }
    r.vol = (size_t)r.ext[0] * (size_t)r.ext[1] * (size_t)r.ext[2];
    r.len = r.ext[2];
    if (r.ext[2] == r.whole[2]) {
        r.len *= r.ext[1];
        if (r.ext[1] == r.whole[1]) r.len *= r.ext[0];
    }
    return r;
}

static const pcnn_layer *source_of(const pcnn_net *net, int i)
{
    return net->layers.items[i]->inputs[0]->inputs[0];
}

static runs runs_of(const pcnn_net *net, int i)
{
    const pcnn_layer *src = source_of(net, i);
    return runs_in(src, &net->spatial->layers[src->index].mine);
}

static size_t run_count(const runs *r)
{
    return r->vol == 0 ? 0 : (size_t)r->c * (r->vol / (size_t)r->len);
}

/* Run k: its first feature in W, and its offset in one channel's box. */
static void run_at(const runs *r, size_t k, size_t *feature, size_t *offset, int *channel)
{
    const size_t per_channel = r->vol / (size_t)r->len;
    *channel = (int)(k / per_channel);
    *offset = (k % per_channel) * (size_t)r->len;
    const size_t row = *offset / (size_t)r->ext[2]; /* (d, h) of the run's start */
    const size_t h = row % (size_t)r->ext[1], d = row / (size_t)r->ext[1];
    *feature = (((size_t)*channel * r->whole[0] + r->lo[0] + d) * r->whole[1] + r->lo[1] + h) *
                   r->whole[2] + (size_t)r->lo[2];
}

pcnn_status spatial_box_dense_columns(const pcnn_net *net, int i, exchange_columns *out,
                                      int **tables)
{
    const spatial *sp = net->spatial;
    const pcnn_layer *src = source_of(net, i);
    const int P = sp->ranks, *parts = sp->layers[src->index].parts;
    const sample_split split = {sp->groups, sp->fixed_start, sp->fixed_count};
    size_t total = 0;
    for (int q = 0; q < P; q++) {
        const box b = layout_box(parts, q, &split, src->out.d, src->out.h, src->out.w);
        const runs r = runs_in(src, &b);
        total += run_count(&r);
    }
    if (total > INT32_MAX / 2)
        return FAIL(PCNN_ERR_UNSUPPORTED, "layer %d: %zu runs of columns", i, total);
    int *t = mem_calloc((size_t)P + 1 + 2 * total, sizeof *t);
    if (!t) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "column runs of layer %d", i);
    int *start = t, *first = t + P + 1, *len = first + total;
    int k = 0;
    for (int q = 0; q < P; q++) {
        start[q] = k;
        const box b = layout_box(parts, q, &split, src->out.d, src->out.h, src->out.w);
        const runs r = runs_in(src, &b);
        for (size_t j = 0; j < run_count(&r); j++, k++) {
            size_t f, off;
            int ch;
            run_at(&r, j, &f, &off, &ch);
            first[k] = (int)f;
            len[k] = r.len;
        }
    }
    start[P] = k;
    const dense_shape d = dense_get_shape(net->layers.items[i]);
    *out = (exchange_columns){.out = d.out, .features = d.features, .bias = d.bias, .ranks = P,
                              .start = start, .first = first, .len = len};
    *tables = t;
    return PCNN_OK;
}

/* Sum values (count) over the ranks, through the group reducer in double. */
static pcnn_status sum_over_ranks(pcnn_net *net, float *values, size_t count)
{
    spatial *sp = net->spatial;
    for (size_t k = 0; k < count; k++) sp->box_dense_sums[k] = values[k];
    TRY(reducer_sum(sp->group_reducer, sp->box_dense_sums, (int)count));
    for (size_t k = 0; k < count; k++) values[k] = (float)sp->box_dense_sums[k];
    return PCNN_OK;
}

/* One pass of box dense layer i: its shape, its input's box and runs,
 * this rank's rows of the head (samples first .. first + rows), and where
 * its columns of W are: packed by the columns exchange (run k of row o at
 * o ld + k len), else in the weights (at o features + the run's first
 * feature). */
typedef struct pass {
    pcnn_layer *l;
    dense_shape s;
    runs r;
    int first, rows;
    const float *own;
    int ld;
} pass;

/* Run k's columns of W, the first of feature f: rows p->ld apart. */
static const float *columns_at(const pass *p, size_t k, size_t f)
{
    return p->own ? p->own + k * (size_t)p->r.len : p->l->params + f;
}

/* The pass, or false when this rank's step already failed: it then joins
 * the sums with zeros, as split batch norms join theirs, so that no rank
 * waits for it (the step fails anyway). */
static bool pass_of(pcnn_net *net, int i, bool failed, pass *p)
{
    spatial *sp = net->spatial;
    const box *mine = &sp->layers[i].mine;
    p->l = net->layers.items[i];
    p->s = dense_get_shape(p->l);
    p->r = runs_of(net, i);
    p->first = mine->lo[LAYOUT_N];
    p->rows = box_extent(mine, LAYOUT_N);
    p->own = failed ? NULL : exchange_own_columns(net->exchange, i);
    p->ld = p->own ? (int)(run_count(&p->r) * (size_t)p->r.len) : p->s.features;
    if (!failed) return true;
    const size_t count = (size_t)p->s.out * (size_t)p->r.n;
    memset(sp->box_dense_rows, 0, count * sizeof(float));
    (void)sum_over_ranks(net, sp->box_dense_rows, count);
    return false;
}

pcnn_status spatial_box_dense_forward(pcnn_net *net, int i, bool train, bool failed)
{
    pass p;
    if (!pass_of(net, i, failed, &p)) return PCNN_OK;
    pcnn_layer *l = p.l;
    const runs r = p.r;
    const int K = p.s.out, first = p.first, rows = p.rows;
    float *part = net->spatial->box_dense_rows; /* K x n */
    const double t0 = clock_now();
    memset(part, 0, (size_t)K * (size_t)r.n * sizeof *part);
    const size_t count = run_count(&r);
    for (size_t k = 0; k < count && r.n > 0; k++) {
        size_t f, off;
        int ch;
        run_at(&r, k, &f, &off, &ch);
        gemm(false, true, K, r.n, r.len, 1.0f, columns_at(&p, k, f), p.ld,
             r.x + (size_t)ch * r.n * r.vol + off, (int)r.vol, 1.0f, part, r.n, net->threads);
    }
    const double t1 = clock_now();
    TRY(sum_over_ranks(net, part, (size_t)K * (size_t)r.n));
    const double t2 = clock_now();
    const float *bias = p.s.bias ? l->params + (size_t)K * p.s.features : NULL;
    for (int o = 0; o < K; o++) {
        const float b = bias ? bias[o] : 0.0f;
        for (int j = 0; j < rows; j++)
            l->y[(size_t)o * rows + j] = part[(size_t)o * r.n + first + j] + b;
    }
    if (train) {
        const double t3 = clock_now();
        timing_layer(&net->profile, i, TIMING_FORWARD, (t1 - t0) + (t3 - t2));
        timing_layer(&net->profile, i, TIMING_SHUFFLE, t2 - t1);
        trace_span(&net->profile, i, TRACE_FORWARD, t0, t3);
    }
    return PCNN_OK;
}

pcnn_status spatial_box_dense_backward(pcnn_net *net, int i, bool failed)
{
    pass p;
    if (!pass_of(net, i, failed, &p)) return PCNN_OK;
    pcnn_layer *l = p.l;
    const runs r = p.r;
    const int K = p.s.out, first = p.first, rows = p.rows;
    float *dy = net->spatial->box_dense_rows; /* K x n: every rank's rows */
    const double t0 = clock_now();
    memset(dy, 0, (size_t)K * (size_t)r.n * sizeof *dy);
    for (int o = 0; o < K; o++)
        memcpy(dy + (size_t)o * r.n + first, l->dy + (size_t)o * rows, (size_t)rows * sizeof *dy);
    /* db from this rank's own rows (the ranks' sum is the batch's), before
     * dX: the flatten's input gradient may share l->dy's memory. */
    float *dw = l->grads;
    if (p.s.bias) {
        float *db = dw + (size_t)K * p.s.features;
        for (int o = 0; o < K; o++) {
            double sum = 0.0;
            for (int j = 0; j < rows; j++) sum += l->dy[(size_t)o * rows + j];
            db[o] = (float)sum;
        }
    }
    TRY(sum_over_ranks(net, dy, (size_t)K * (size_t)r.n));
    const double t1 = clock_now();
    /* dW: 0 outside the box's runs (they follow each other in W).  Under
     * the columns exchange written once: it reads and writes this rank's
     * columns only, so the zeros stay until the gradients are summed whole
     * (saves an 8 MB memset per step for CosmoFlow's head on two ranks). */
    spatial_layer *sl = &net->spatial->layers[i];
    const bool by_columns = p.own != NULL; /* the columns exchange's packed block */
    const bool zero_others = !sl->others_zero || !by_columns;
    const size_t count = run_count(&r);
    size_t next = 0; /* the first feature after the last run written */
    const bool add_dx = l->inputs[0]->accumulate_dx[0];
    for (size_t k = 0; k < count; k++) {
        size_t f, off;
        int ch;
        run_at(&r, k, &f, &off, &ch);
        for (int o = 0; o < K && zero_others; o++)
            memset(dw + (size_t)o * p.s.features + next, 0, (f - next) * sizeof *dw);
        next = f + (size_t)r.len;
        const float *x = r.x + (size_t)ch * r.n * r.vol + off;
        gemm(false, false, K, r.len, r.n, 1.0f, dy, r.n, x, (int)r.vol, 0.0f, dw + f, p.s.features,
             net->threads);
        gemm(true, false, r.n, r.len, K, 1.0f, dy, r.n, columns_at(&p, k, f), p.ld,
             add_dx ? 1.0f : 0.0f, r.dx + (size_t)ch * r.n * r.vol + off, (int)r.vol,
             net->threads);
    }
    for (int o = 0; o < K && zero_others; o++)
        memset(dw + (size_t)o * p.s.features + next, 0, ((size_t)p.s.features - next) * sizeof *dw);
    sl->others_zero = by_columns;
    const double t2 = clock_now();
    timing_layer(&net->profile, i, TIMING_BACKWARD, t2 - t1);
    timing_layer(&net->profile, i, TIMING_SHUFFLE, t1 - t0);
    trace_span(&net->profile, i, TRACE_BACKWARD, t0, t2);
    return PCNN_OK;
}

void spatial_box_dense_grads_written(pcnn_net *net)
{
    spatial *sp = net->spatial;
    for (int i = 0; i < sp->count; i++) sp->layers[i].others_zero = false;
}
