/* The peers' reference models (/work/shared/bench/models.py), built layer
 * for layer through the public API, and synthetic data: shared by the
 * benchmarks. */
#ifndef PCNN_BENCH_MODELS_H
#define PCNN_BENCH_MODELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcnn.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        pcnn_status s_ = (call);                                                            \
        if (s_ != PCNN_OK) {                                                                \
            fprintf(stderr, "bench: %s: %s (%s)\n", #call, pcnn_last_error(),              \
                    pcnn_status_str(s_));                                                   \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* The network under construction and its forward FLOPs per sample. */
typedef struct builder {
    pcnn_net *net;
    double flops;
    int dense_exchange; /* 0: the network's choice; 1 + a pcnn_exchange: every dense layer's */
} builder;

typedef struct model {
    const char *name;
    int c, d, h, w, default_batch; /* d: 1 for images, the depth of volumes */
    pcnn_loss loss;
    pcnn_layer *(*build)(builder *, pcnn_layer *);
} model;

/* NULL for an unknown name. */
const model *model_find(const char *name);

/* Standard-normal floats from a fixed seed (reproducible). */
void randn(float *x, size_t n);
/* Uniform in (0, 1), and raw 64-bit draws, from the same stream. */
double uniform(void);
uint64_t next_u64(void);

#endif
