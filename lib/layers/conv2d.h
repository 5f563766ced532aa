/* The convolution layer's state and its algorithms, shared by the files
 * of the layer: conv2d.c (the layer: the algorithm decided per layer at
 * finalize by strategy/conv_choice.h, buffers sized from that decision,
 * and one GEMM per tap, kernels/conv_taps.h), conv2d_gemm.c (im2col +
 * GEMM in bands) and conv2d_direct.c (the direct kernels of
 * kernels/conv_direct.h).  Layout CNHW throughout (layer.h). */
#ifndef PCNN_LAYERS_CONV2D_H
#define PCNN_LAYERS_CONV2D_H

#include <stdbool.h>
#include <stddef.h>

#include "../kernels/bf16.h"
#include "../strategy/conv_choice.h"
#include "layer.h"

typedef struct conv_priv {
    int cout, k, stride, pad;
    bool bias;
    bool pointwise; /* 1x1, stride 1, no padding: col == x */
    conv_choice choice; /* the algorithm and each pass's kernel (decide) */
    conv_choice rules;  /* what the rules decided, with the candidates to time */
    conv_geometry geom; /* what they decided from */
    int cin, h, w, ho, wo, ckk;
    float *col;  /* kept im2col matrix (max_batch columns), or NULL */
    float *wt;   /* taps: the weights repacked by forward for backward */
    bool bf16;   /* bf16 products (conv2d_bf16.c), decided at finalize */
    bf16 *wb;    /* bf16: the weights' bf16 copy, made by each forward */
    bf16 *colb;  /* bf16: the kept im2col matrix in bf16, or NULL */
} conv_priv;

/* The bias parameters, or NULL without a bias. */
static inline const float *conv_bias(const pcnn_layer *l)
{
    const conv_priv *p = l->priv;
    return p->bias ? l->params + (size_t)p->cout * p->ckk : NULL;
}

/* db = the sum of dY over each output channel's pixels (every algorithm). */
void conv_bias_grad(const pcnn_layer *l, const run_ctx *ctx);

/* im2col + GEMM (conv2d_gemm.c).  The im2col matrix of the whole batch, a
 * kept one when keep_col (else the workspace holds per-thread bands, or a
 * recomputed col for dW); forward; backward's dW; backward's dx in bands
 * (no col needed). */
size_t conv_col_floats(const conv_priv *p, int max_batch);
size_t conv_gemm_workspace(const conv_priv *p, int max_batch, bool keep_col, int threads);
void conv_gemm_forward(const pcnn_layer *l, const run_ctx *ctx);
void conv_gemm_weight_grad(const pcnn_layer *l, const run_ctx *ctx);
void conv_gemm_input_grad(const pcnn_layer *l, const run_ctx *ctx, float *dx);

/* bf16 products (conv2d_bf16.c): im2col written in bf16, W converted to
 * wb at each forward, dY converted once per backward for dW and dx, all
 * through gemm_bf16 with fp32 sums; activations stay fp32.  The shared
 * workspace (floats) holds dY in bf16, then per-thread bands or the
 * whole batch's col, and the GEMM's packing workspaces.  setup allocates
 * wb and the kept colb. */
size_t conv_bf16_workspace(const conv_priv *p, int max_batch, int threads);
pcnn_status conv_bf16_setup(pcnn_layer *l, const plan_ctx *pc);
void conv_bf16_forward(const pcnn_layer *l, const run_ctx *ctx);
void conv_bf16_backward(const pcnn_layer *l, const run_ctx *ctx, float *dx);

/* The direct kernels (conv2d_direct.c): stride 1, and the strided forward
 * and dW (whose dx is conv_gemm_input_grad). */
size_t conv_direct_workspace(const conv_priv *p, int max_batch, int threads);
size_t conv_strided_workspace(const conv_priv *p, int max_batch, int threads);
void conv_direct_forward(const pcnn_layer *l, const run_ctx *ctx);
void conv_direct_backward(const pcnn_layer *l, const run_ctx *ctx, float *dx);
void conv_strided_forward(const pcnn_layer *l, const run_ctx *ctx);
void conv_strided_weight_grad(const pcnn_layer *l, const run_ctx *ctx);

#endif
