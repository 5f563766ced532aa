#include "fc_exchange.h"

#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "../kernels/kernels.h"
#include "../layers/dense.h"
#include "parallel.h"

struct fc_exchange {
    int layer, out, features, ranks, rank;
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
};

static int *ints(int n, size_t *bytes)
{
    *bytes += (size_t)n * sizeof(int);
    return mem_calloc((size_t)n, sizeof(int));
}

pcnn_status fc_plan(pcnn_net *net, bucket *b, exchange_plan *plan)
{
    const pcnn_layer *l = net->layers.items[b->first_layer];
    const dense_shape d = dense_get_shape(l);
    const int P = net->comm->size, r = net->comm->rank;
    fc_exchange *fc = mem_calloc(1, sizeof *fc);
    if (!fc) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange of layer %d", b->first_layer);
    b->fc = fc;
    *fc = (fc_exchange){.layer = b->first_layer, .out = d.out, .features = d.features,
                        .ranks = P, .rank = r, .bias = d.bias};
    size_t bytes = 0;
    fc->feat_counts = ints(P, &bytes);
    fc->feat_displs = ints(P, &bytes);
    fc->batch = ints(P, &bytes);
    fc->act_scounts = ints(P, &bytes);
    fc->act_sdispls = ints(P, &bytes);
    fc->act_rcounts = ints(P, &bytes);
    fc->act_rdispls = ints(P, &bytes);
    fc->err_counts = ints(P, &bytes);
    fc->err_displs = ints(P, &bytes);
    fc->w_counts = ints(P, &bytes);
    fc->w_displs = ints(P, &bytes);
    if (!fc->feat_counts || !fc->feat_displs || !fc->batch || !fc->act_scounts ||
        !fc->act_sdispls || !fc->act_rcounts || !fc->act_rdispls || !fc->err_counts ||
        !fc->err_displs || !fc->w_counts || !fc->w_displs)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange tables of layer %d", fc->layer);
    for (int p = 0; p < P; p++) {
        long first;
        fc->feat_counts[p] = partition_count(d.features, P, p, &first);
        fc->feat_displs[p] = (int)first;
        fc->w_counts[p] = fc->feat_counts[p] * d.out;
        fc->w_displs[p] = fc->feat_displs[p] * d.out;
    }
    const int fr = fc->feat_counts[r], local = net->max_batch;
    fc->capacity = (size_t)P * (size_t)local;
    const size_t k = (size_t)d.out;
    if ((double)fc->capacity * (double)(k > (size_t)fr ? k : (size_t)fr) > 2147483647.0 ||
        (double)k * d.features > 2147483647.0)
        return FAIL(PCNN_ERR_UNSUPPORTED, "FC exchange of layer %d: messages beyond 2^31 floats",
                    fc->layer);
    fc->act_recv = mem_alloc_floats((size_t)fr * fc->capacity);
    fc->err_all = mem_alloc_floats(k * fc->capacity);
    fc->w_stage = mem_alloc_floats(k * (size_t)d.features);
    fc->grad_slice = mem_alloc_floats(k * (size_t)fr);
    if (!fc->act_recv || !fc->err_all || !fc->w_stage || !fc->grad_slice)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "FC exchange buffers of layer %d", fc->layer);
    bytes += ((size_t)fr * fc->capacity + k * fc->capacity + k * (size_t)d.features +
              k * (size_t)fr) * sizeof(float);
    plan->memory_bytes += bytes;

    /* Optimizer state: the packed weight slice, then the whole bias. */
    b->owned_lo = 0;
    b->owned_count = k * (size_t)fr + (d.bias ? k : 0);
    /* Eqs. 4.2-4.4 for a full local batch. */
    const uint64_t f4 = sizeof(float);
    plan->bytes_per_step += (uint64_t)(d.features - fr) * local * f4;
    plan->bytes_per_step += (uint64_t)k * local * (P - 1) * f4;
    plan->bytes_per_step += (uint64_t)k * fr * (P - 1) * f4;
    return PCNN_OK;
}

void fc_free(bucket *b)
{
    fc_exchange *fc = b->fc;
    if (!fc) return;
    int **tables[] = {&fc->feat_counts, &fc->feat_displs, &fc->batch, &fc->act_scounts,
                      &fc->act_sdispls, &fc->act_rcounts, &fc->act_rdispls, &fc->err_counts,
                      &fc->err_displs, &fc->w_counts, &fc->w_displs};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) mem_free(*tables[i]);
    mem_free(fc->act_recv);
    mem_free(fc->err_all);
    mem_free(fc->w_stage);
    mem_free(fc->grad_slice);
    mem_free(fc);
    b->fc = NULL;
}

void fc_prepare_requests(bucket *b)
{
    fc_exchange *fc = b->fc;
    b->reduce = (request){.kind = REQ_ALLTOALLV, .recv = fc->act_recv,
                          .scounts = fc->act_scounts, .sdispls = fc->act_sdispls,
                          .rcounts = fc->act_rcounts, .rdispls = fc->act_rdispls,
                          .tag = fc->layer};
    b->errors = (request){.kind = REQ_ALLGATHERV, .recv = fc->err_all,
                          .rcounts = fc->err_counts, .rdispls = fc->err_displs,
                          .tag = fc->layer};
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = fc->w_stage, .rcounts = fc->w_counts,
                          .rdispls = fc->w_displs, .tag = fc->layer};
}

void fc_set_counts(bucket *b, const double *gather, int ranks, int rank)
{
    fc_exchange *fc = b->fc;
    const int fr = fc->feat_counts[rank];
    int base = 0;
    for (int q = 0; q < ranks; q++) {
        fc->batch[q] = (int)gather[2 * q + 1];
        fc->act_rcounts[q] = fr * fc->batch[q];
        fc->act_rdispls[q] = fr * base;
        fc->err_counts[q] = fc->out * fc->batch[q];
        fc->err_displs[q] = fc->out * base;
        base += fc->batch[q];
    }
    const int mine = fc->batch[rank];
    for (int p = 0; p < ranks; p++) {
        fc->act_scounts[p] = fc->feat_counts[p] * mine;
        fc->act_sdispls[p] = fc->feat_displs[p] * mine;
    }
}

void fc_post_activations(pcnn_net *net, bucket *b, engine *e)
{
    /* The input matrix is F x b (rows are features): rank p's rows are one
     * contiguous block.  It stays untouched until the next forward pass. */
    b->reduce.send = (float *)dense_input_matrix(net->layers.items[b->first_layer]);
    engine_post(e, &b->reduce);
}

void fc_capture_errors(pcnn_net *net, bucket *b)
{
    /* dy lives in a gradient buffer that lower layers reuse: copy this
     * rank's K x b block into place for the in-place all-gather. */
    fc_exchange *fc = b->fc;
    const pcnn_layer *l = net->layers.items[b->first_layer];
    const size_t count = (size_t)fc->out * (size_t)fc->batch[fc->rank];
    memcpy(fc->err_all + fc->err_displs[fc->rank], l->dy, count * sizeof(float));
}

void fc_post_errors(bucket *b, engine *e) { engine_post(e, &b->errors); }

void fc_update(pcnn_net *net, bucket *b)
{
    fc_exchange *fc = b->fc;
    pcnn_layer *l = net->layers.items[b->first_layer];
    const int k = fc->out, f = fc->features, fr = fc->feat_counts[fc->rank];
    const int lo = fc->feat_displs[fc->rank];
    /* dW[:, F_r] = sum over source ranks of E_q A_q^T, in rank order. */
    bool first = true;
    for (int q = 0; q < fc->ranks; q++) {
        const int bq = fc->batch[q];
        if (bq == 0) continue;
        gemm(false, true, k, fr, bq, 1.0f, fc->err_all + fc->err_displs[q], bq,
             fc->act_recv + fc->act_rdispls[q], bq, first ? 0.0f : 1.0f, fc->grad_slice, fr,
             net->threads);
        first = false;
    }
    float *db = l->grads + (size_t)k * f;
    if (fc->bias) {
        for (int row = 0; row < k; row++) {
            double s = 0.0;
            for (int q = 0; q < fc->ranks; q++) {
                const float *e = fc->err_all + fc->err_displs[q] + (size_t)row * fc->batch[q];
                for (int j = 0; j < fc->batch[q]; j++) s += e[j];
            }
            db[row] = (float)s;
        }
    }
    /* Pack this rank's weight columns, update them with their state. */
    float *mine = fc->w_stage + fc->w_displs[fc->rank];
    for (int row = 0; row < k; row++)
        memcpy(mine + (size_t)row * fr, l->params + (size_t)row * f + lo, (size_t)fr * sizeof(float));
    float *m = net->optim.m ? net->optim.m + b->state_offset : NULL;
    float *v = net->optim.v ? net->optim.v + b->state_offset : NULL;
    const size_t nw = (size_t)k * fr;
    optim_update(net->optimizer, &net->opt.hyper, net->xplan.lr, net->opt.weight_decay,
                 net->step + 1, mine, fc->grad_slice, m, v, nw, net->threads);
    if (fc->bias)
        optim_update(net->optimizer, &net->opt.hyper, net->xplan.lr, net->opt.weight_decay,
                     net->step + 1, l->params + (size_t)k * f, db, m ? m + nw : NULL,
                     v ? v + nw : NULL, (size_t)k, net->threads);
}

void fc_unpack_weights(pcnn_net *net, const bucket *b)
{
    const fc_exchange *fc = b->fc;
    pcnn_layer *l = net->layers.items[b->first_layer];
    const int k = fc->out, f = fc->features;
    for (int p = 0; p < fc->ranks; p++) {
        const int fp = fc->feat_counts[p], lo = fc->feat_displs[p];
        const float *src = fc->w_stage + fc->w_displs[p];
        for (int row = 0; row < k; row++)
            memcpy(l->params + (size_t)row * f + lo, src + (size_t)row * fp,
                   (size_t)fp * sizeof(float));
    }
}
