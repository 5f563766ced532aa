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

#endif
