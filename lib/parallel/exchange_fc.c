/* The communication-efficient gradient of a dense layer (seed 001 section
 * 4.1.1, fig. 4.1).  Rank r owns the weight columns of its feature slice
 * F_r.  Per step:
 *   forward   all-to-all of the input activations A (F x b_q per rank):
 *             rank r receives rows F_r from every rank (F_r x B in blocks);
 *   backward  all-gather of the output errors E (K x b_q): every rank gets
 *             K x B (in blocks);
 *   update    the dense layer computes dW[:, F_r] and db from the gathered
 *             blocks; the optimizer updates the packed slice and the bias,
 *             then an all-gather of the packed weight slices, unpacked into
 *             W before the layer's next forward.
 *
 * bf16 on the wire: activations, errors and weight slices travel as bf16
 * (rounded where they are sent, widened where they arrive, before the
 * gradient); the owner updates fp32 masters of its columns and of the
 * bias (exchange_masters) and every rank's weights and bias are the
 * masters rounded (the bias is updated alike everywhere, rounded alike). */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"
#include "../layers/dense.h"
#include "decomp.h"
#include "exchange_strategy.h"

typedef struct fc_gradient {
    const pcnn_layer *layer;
    int out, features;
    bool bias;
    int *feat_counts, *feat_displs;   /* F_p and its first feature */
    int *batch;                       /* samples of each rank this step */
    /* Collective arguments (per rank), refreshed each step. */
    int *act_scounts, *act_sdispls, *act_rcounts, *act_rdispls;
    int *err_counts, *err_displs, *w_counts, *w_displs;
    float *act_recv;   /* [q][F_r][b_q] */
    float *err_all;    /* [q][K][b_q] */
    float *w_stage;    /* [p][K][F_p]: packed weight slices */
    float *grad_slice; /* K x F_r */
    size_t capacity;   /* samples the buffers hold (all ranks together) */
    /* bf16: what travels (same layouts as their fp32 twins above). */
    bf16 *act_send16;  /* F x b: this rank's input matrix rounded */
    bf16 *act_recv16, *err16, *w16;
    bool act_posted, err_posted;
} fc_gradient;

enum { FC_ACTIVATIONS, FC_ERRORS };

/* The per-rank tables, allocated and freed together. */
enum { FC_TABLES = 11 };
static void fc_tables(fc_gradient *fc, int **tables[FC_TABLES])
{
    int **all[FC_TABLES] = {&fc->feat_counts, &fc->feat_displs, &fc->batch, &fc->act_scounts,
                            &fc->act_sdispls, &fc->act_rcounts, &fc->act_rdispls,
                            &fc->err_counts, &fc->err_displs, &fc->w_counts, &fc->w_displs};
    for (int i = 0; i < FC_TABLES; i++) tables[i] = all[i];
}

static int *ints(int n, size_t *bytes)
{
    *bytes += (size_t)n * sizeof(int);
    return mem_calloc((size_t)n, sizeof(int));
}

static pcnn_status fc_plan(exchange *x, bucket *b)
{
    const pcnn_layer *l = bucket_layer(x, b)->layer;
    const dense_shape d = dense_get_shape(l);
    const int P = x->ranks, r = x->rank, layer = b->first_layer;
    fc_gradient *fc = mem_calloc(1, sizeof *fc);
    if (!fc) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange of layer %d", layer);
    b->impl = fc;
    *fc = (fc_gradient){.layer = l, .out = d.out, .features = d.features, .bias = d.bias};
    size_t bytes = 0;
    int **tables[FC_TABLES];
    fc_tables(fc, tables);
    for (int i = 0; i < FC_TABLES; i++) {
        *tables[i] = ints(P, &bytes);
        if (!*tables[i])
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange tables of layer %d", layer);
    }
    for (int p = 0; p < P; p++) {
        long first;
        fc->feat_counts[p] = decomp_share(d.features, P, p, &first);
        fc->feat_displs[p] = (int)first;
        fc->w_counts[p] = fc->feat_counts[p] * d.out;
        fc->w_displs[p] = fc->feat_displs[p] * d.out;
    }
    const int fr = fc->feat_counts[r], local = x->setup.max_batch;
    fc->capacity = (size_t)P * (size_t)local;
    const size_t k = (size_t)d.out;
    if ((double)fc->capacity * (double)(k > (size_t)fr ? k : (size_t)fr) > 2147483647.0 ||
        (double)k * d.features > 2147483647.0)
        return FAIL(PCNN_ERR_UNSUPPORTED, "FC exchange of layer %d: messages beyond 2^31 floats",
                    layer);
    fc->act_recv = mem_alloc_floats((size_t)fr * fc->capacity);
    fc->err_all = mem_alloc_floats(k * fc->capacity);
    fc->w_stage = mem_alloc_floats(k * (size_t)d.features);
    fc->grad_slice = mem_alloc_floats(k * (size_t)fr);
    if (!fc->act_recv || !fc->err_all || !fc->w_stage || !fc->grad_slice)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange buffers of layer %d", layer);
    bytes += ((size_t)fr * fc->capacity + k * fc->capacity + k * (size_t)d.features +
              k * (size_t)fr) * sizeof(float);
    if (x->bf16) {
        const size_t send = (size_t)d.features * (size_t)local, recv = (size_t)fr * fc->capacity;
        const size_t err = k * fc->capacity, w = k * (size_t)d.features;
        fc->act_send16 = mem_alloc((send ? send : 1) * sizeof(bf16));
        fc->act_recv16 = mem_alloc((recv ? recv : 1) * sizeof(bf16));
        fc->err16 = mem_alloc((err ? err : 1) * sizeof(bf16));
        fc->w16 = mem_alloc((w ? w : 1) * sizeof(bf16));
        if (!fc->act_send16 || !fc->act_recv16 || !fc->err16 || !fc->w16)
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "bf16 FC exchange buffers of layer %d", layer);
        bytes += (send + recv + err + w) * sizeof(bf16);
        b->round_params = true;
    }
    x->memory_bytes += bytes;

    /* Optimizer state: the packed weight slice, then the whole bias. */
    b->state_count = k * (size_t)fr + (d.bias ? k : 0);
    /* Eqs. 4.2-4.4 for a full local batch. */
    const uint64_t f4 = x->bf16 ? sizeof(bf16) : sizeof(float);
    x->bytes_per_step += (uint64_t)(d.features - fr) * local * f4;
    x->bytes_per_step += (uint64_t)k * local * (P - 1) * f4;
    x->bytes_per_step += (uint64_t)k * fr * (P - 1) * f4;
    return PCNN_OK;
}

static void fc_free(bucket *b)
{
    fc_gradient *fc = b->impl;
    if (!fc) return;
    int **tables[FC_TABLES];
    fc_tables(fc, tables);
    for (int i = 0; i < FC_TABLES; i++) mem_free(*tables[i]);
    mem_free(fc->act_recv);
    mem_free(fc->err_all);
    mem_free(fc->w_stage);
    mem_free(fc->grad_slice);
    mem_free(fc->act_send16);
    mem_free(fc->act_recv16);
    mem_free(fc->err16);
    mem_free(fc->w16);
    mem_free(fc);
    b->impl = NULL;
}

static void fc_prepare(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    const int tag = b->first_layer;
    b->reduce[FC_ACTIVATIONS] =
        (request){.kind = REQ_ALLTOALLV, .recv = fc->act_recv, .scounts = fc->act_scounts, .sdispls = fc->act_sdispls,
                  .rcounts = fc->act_rcounts, .rdispls = fc->act_rdispls, .tag = tag};
    b->reduce[FC_ERRORS] = (request){.kind = REQ_ALLGATHERV, .recv = fc->err_all,
                                     .rcounts = fc->err_counts, .rdispls = fc->err_displs,
                                     .tag = tag};
    b->num_reduce = 2;
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = fc->w_stage, .rcounts = fc->w_counts,
                          .rdispls = fc->w_displs, .tag = tag};
    if (!x->bf16) return;
    b->reduce[FC_ACTIVATIONS].send = fc->act_send16;
    b->reduce[FC_ACTIVATIONS].recv = fc->act_recv16;
    b->reduce[FC_ERRORS].recv = fc->err16;
    b->gather.recv = fc->w16;
    for (int q = 0; q < b->num_reduce; q++) b->reduce[q].bf16 = true;
    b->gather.bf16 = true;
}

/* The batch split of this step, from the step's batch agreement. */
static void fc_begin_step(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    const int fr = fc->feat_counts[x->rank];
    int base = 0;
    for (int q = 0; q < x->ranks; q++) {
        fc->batch[q] = comm_batch_of(x->comm, q);
        fc->act_rcounts[q] = fr * fc->batch[q];
        fc->act_rdispls[q] = fr * base;
        fc->err_counts[q] = fc->out * fc->batch[q];
        fc->err_displs[q] = fc->out * base;
        base += fc->batch[q];
    }
    const int mine = fc->batch[x->rank];
    for (int p = 0; p < x->ranks; p++) {
        fc->act_scounts[p] = fc->feat_counts[p] * mine;
        fc->act_sdispls[p] = fc->feat_displs[p] * mine;
    }
    fc->act_posted = fc->err_posted = false;
}

static void post_activations(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    if (fc->act_posted) return;
    /* The input matrix is F x b (rows are features): rank p's rows are one
     * contiguous block.  It stays untouched until the next forward pass. */
    const float *input = dense_input_matrix(fc->layer);
    if (x->bf16)
        bf16_from_f32_array(input, fc->act_send16,
                            (size_t)fc->features * (size_t)fc->batch[x->rank]);
    else
        b->reduce[FC_ACTIVATIONS].send = (float *)input;
    engine_post(x->engine, &b->reduce[FC_ACTIVATIONS]);
    fc->act_posted = true;
}

static void post_errors(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    if (fc->err_posted) return;
    engine_post(x->engine, &b->reduce[FC_ERRORS]);
    fc->err_posted = true;
}

/* dy lives in a gradient buffer that lower layers reuse: copy this rank's
 * K x b block into place for the in-place all-gather. */
static void fc_before_backward(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    const size_t count = (size_t)fc->out * (size_t)fc->batch[x->rank];
    if (x->bf16)
        bf16_from_f32_array(fc->layer->dy, fc->err16 + fc->err_displs[x->rank], count);
    else
        memcpy(fc->err_all + fc->err_displs[x->rank], fc->layer->dy, count * sizeof(float));
    if (x->setup.overlap) post_errors(x, b);
}

static void fc_post_reduce(exchange *x, bucket *b)
{
    post_activations(x, b);
    post_errors(x, b);
}

static void fc_update(exchange *x, bucket *b)
{
    fc_gradient *fc = b->impl;
    const pcnn_layer *l = fc->layer;
    const int k = fc->out, f = fc->features, fr = fc->feat_counts[x->rank];
    const int lo = fc->feat_displs[x->rank];
    if (x->bf16) { /* every rank's blocks widened, the own ones too (the same bits everywhere) */
        size_t samples = 0;
        for (int q = 0; q < x->ranks; q++) samples += (size_t)fc->batch[q];
        bf16_to_f32_array(fc->act_recv16, fc->act_recv, (size_t)fr * samples);
        bf16_to_f32_array(fc->err16, fc->err_all, (size_t)k * samples);
    }
    const dense_blocks blocks = {
        .ranks = x->ranks, .batch = fc->batch, .features = fr,
        .errors = fc->err_all, .err_displs = fc->err_displs,
        .acts = fc->act_recv, .act_displs = fc->act_rdispls,
    };
    float *db = l->grads + (size_t)k * f;
    dense_slice_gradient(l, &blocks, fc->grad_slice, fc->bias ? db : NULL, x->setup.threads);
    /* Pack this rank's weight columns, update them with their state. */
    float *mine = fc->w_stage + fc->w_displs[x->rank];
    for (int row = 0; row < k; row++)
        memcpy(mine + (size_t)row * fr, l->params + (size_t)row * f + lo,
               (size_t)fr * sizeof(float));
    const size_t nw = (size_t)k * fr;
    exchange_apply_update(x, b, mine, fc->grad_slice, 0, nw);
    if (fc->bias) exchange_apply_update(x, b, l->params + (size_t)k * f, db, nw, (size_t)k);
    /* bf16: the own columns as updated (the masters rounded), exactly. */
    if (x->bf16) bf16_from_f32_array(mine, fc->w16 + fc->w_displs[x->rank], nw);
}

static void fc_post_gather(exchange *x, bucket *b) { engine_post(x->engine, &b->gather); }

static void fc_unpack(exchange *x, bucket *b)
{
    const fc_gradient *fc = b->impl;
    float *w = fc->layer->params;
    const int k = fc->out, f = fc->features;
    for (int p = 0; p < x->ranks; p++) {
        const int fp = fc->feat_counts[p], lo = fc->feat_displs[p];
        const float *src = fc->w_stage + fc->w_displs[p];
        const bf16 *src16 = x->bf16 ? fc->w16 + fc->w_displs[p] : NULL;
        for (int row = 0; row < k; row++) {
            float *dst = w + (size_t)row * f + lo;
            if (src16)
                bf16_to_f32_array(src16 + (size_t)row * fp, dst, (size_t)fp);
            else
                memcpy(dst, src + (size_t)row * fp, (size_t)fp * sizeof(float));
        }
    }
}

/* Rank p's state: its weight columns [first_p, +F_p) of every row, packed
 * row by row (K x F_p), then the whole bias (the same on every rank). */
static void fc_runs(const exchange *x, const bucket *b, int rank, owned_run_fn fn, void *arg)
{
    const dense_shape d = dense_get_shape(bucket_layer(x, b)->layer);
    long first;
    const size_t fp = (size_t)decomp_share(d.features, x->ranks, rank, &first);
    const size_t k = (size_t)d.out, f = (size_t)d.features;
    for (size_t row = 0; row < k; row++)
        fn(arg, (owned_run){row * fp, b->lo + row * f + (size_t)first, fp});
    if (d.bias) fn(arg, (owned_run){k * fp, b->lo + k * f, k});
}

const exchange_ops exchange_fc_ops = {
    .name = "FC gradient",
    .plan = fc_plan,
    .free = fc_free,
    .prepare = fc_prepare,
    .begin_step = fc_begin_step,
    .after_forward = post_activations,
    .before_backward = fc_before_backward,
    .post_reduce = fc_post_reduce,
    .update = fc_update,
    .post_gather = fc_post_gather,
    .unpack = fc_unpack,
    .owned_runs = fc_runs,
};
