/* Losses on the network output (CNHW) against the caller's NCHW targets. */
#ifndef PCNN_GRAPH_LOSS_H
#define PCNN_GRAPH_LOSS_H

#include "../layers/layer.h"

typedef struct loss_args {
    pcnn_loss kind;
    const float *y;         /* output, CNHW, n samples of shape s */
    shape s;
    int n;
    const int32_t *labels;  /* cross entropy */
    const float *targets;   /* MSE, L1, BCE on logits: NCHW */
    double norm_samples;    /* the loss is a mean over this many samples
                               (the global batch, >= n, with several ranks) */
    double *scratch;        /* max(n, s.c) doubles */
    int threads;
} loss_args;

/* Is kind a loss this library computes? */
bool loss_known(pcnn_loss kind);

/* The sum over the n local samples of the per-sample loss divided by
 * norm_samples (so that summing over ranks gives the global mean).  When dy
 * is not NULL, also writes dLoss/dy (CNHW) for the same normalisation. */
double loss_compute(const loss_args *a, float *dy);

/* Number of the n samples whose argmax output equals the label. */
long loss_count_correct(const float *y, int classes, int n, const int32_t *labels);

#endif
