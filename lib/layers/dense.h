/* What the dense layer offers the exchange room for the communication-
 * efficient FC gradient (seed 001 section 4.1.1). */
#ifndef PCNN_LAYERS_DENSE_H
#define PCNN_LAYERS_DENSE_H

#include <stdbool.h>

#include "layer.h"

typedef struct dense_shape {
    int out;      /* K */
    int features; /* F */
    bool bias;
} dense_shape;

bool layer_is_dense(const pcnn_layer *l);
dense_shape dense_get_shape(const pcnn_layer *l);
/* The F x n input matrix of the last forward pass (row f, column sample). */
const float *dense_input_matrix(const pcnn_layer *l);

/* The whole batch's output errors and a slice of its input rows, gathered
 * by the FC gradient exchange in blocks of each rank's samples. */
typedef struct dense_blocks {
    int ranks;
    const int *batch;          /* samples of rank q */
    int features;              /* rows of the slice, F_r */
    const float *errors;       /* K x b_q blocks at err_displs[q] */
    const int *err_displs;
    const float *acts;         /* F_r x b_q blocks at act_displs[q] */
    const int *act_displs;
} dense_blocks;

/* dW[:, F_r] = sum over q of E_q A_q^T (K x F_r, in rank order) and, when
 * db is not NULL, db = the row sums of every E_q: the dense layer's weight
 * gradient over the whole batch for one slice of features (seed 001
 * section 4.1.1). */
void dense_slice_gradient(const pcnn_layer *l, const dense_blocks *b, float *dw_slice, float *db,
                          int threads);

#endif
