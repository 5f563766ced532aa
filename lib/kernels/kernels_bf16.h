/* The bf16 operands of the convolutions' and dense layers' products
 * (gemm_bf16.h): im2col and vol2col written straight in bf16 from fp32
 * activations, and a threaded fp32 -> bf16 conversion.  The col matrices
 * are the largest operands (K*K or K^3 times the input), so they are
 * made in bf16 rather than made in fp32 and converted after: at AMX speed
 * that second pass over memory would cost more than the product.  Same
 * layouts and zero padding as their fp32 twins in kernels.h; the values
 * are bf16_from_f32 of theirs (round to nearest even). */
#ifndef PCNN_KERNELS_BF16_H
#define PCNN_KERNELS_BF16_H

#include <stddef.h>

#include "bf16.h"
#include "kernels.h"

/* dst[i] = bf16_from_f32(src[i]), i < n, in blocks over `threads`. */
void bf16_from_f32_parallel(const float *src, bf16 *dst, size_t n, int threads);

/* im2col_rows (kernels.h) in bf16: output rows [g0, g1) of the batch,
 * (C*K*K) rows of (g1-g0)*Wo values with row stride ld.  Single-threaded. */
void im2col_rows_bf16(const float *x, const conv_shape *g, int g0, int g1, bf16 *col, size_t ld);

/* The whole batch's col (C*K*K rows of N*Ho*Wo), rows split over threads. */
void im2col_batch_bf16(const float *x, const conv_shape *g, bf16 *col, int threads);

/* vol2col_band (kernels.h) in bf16: sample s, output planes [d0, d1). */
void vol2col_band_bf16(const float *x, const vol_shape *g, int s, int d0, int d1, bf16 *col,
                       int threads);

/* vol2col_batch (kernels.h) in bf16: the whole batch, rows over threads. */
void vol2col_batch_bf16(const float *x, const vol_shape *g, bf16 *col, int threads);

#endif
