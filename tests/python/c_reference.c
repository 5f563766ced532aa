/* The C side of the Python binding's tests and overhead benchmark.
 *
 *   c_reference train MODEL STEPS N X.bin LABELS.bin OUT.bin [world]
 *       builds MODEL, trains STEPS steps of N samples read from X.bin
 *       (float32) and LABELS.bin (int32), and writes to OUT.bin, as
 *       sections of (uint64 count, float32 values): the parameters, the
 *       STEPS losses, the predictions of the first batch, and the loss and
 *       gradients of a compute_gradients call on this rank's share of it.  With `world`, trains over
 *       MPI_COMM_WORLD (pcnn_comm_create_world), each rank passing its
 *       share of every batch; rank 0 writes.
 *   c_reference bench MODEL STEPS N
 *       times STEPS training steps (after 20 warm-up steps) on fixed
 *       data and prints "c_us_per_step <microseconds>".
 *
 * The models are built identically by bindings/python/tests/models.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pcnn.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__, pcnn_last_error(),    \
                    pcnn_status_str(s_));                                                 \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* "mix": every layer kind with state or randomness, Adam with weight decay.
 * "lenet": LeNet-5 with momentum SGD (the Fashion-MNIST example's model).
 * "tiny": one 4 -> 4 dense layer, for timing the per-call overhead. */
static pcnn_net *build(const char *model, int max_batch, pcnn_comm *comm, int *sample,
                       int *outputs)
{
    pcnn_net *net;
    pcnn_layer *in, *a, *b, *c, *d, *e, *f, *g, *h, *i, *y;
    CK(pcnn_net_create(&net));
    if (!strcmp(model, "mix")) {
        CK(pcnn_net_input(net, 3, 12, 10, &in));
        CK(pcnn_conv2d(net, in, 8, 3, 1, 1, 0, &a));
        CK(pcnn_layer_set_init(a, PCNN_INIT_GLOROT_UNIFORM));
        CK(pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b));
        CK(pcnn_relu(net, b, &c));
        CK(pcnn_dropout(net, c, 0.25f, &d));
        CK(pcnn_conv2d(net, d, 8, 3, 1, 1, 0, &e));
        CK(pcnn_add(net, c, e, &f));
        CK(pcnn_maxpool2d(net, f, 2, 2, 0, &g));
        CK(pcnn_conv2d(net, g, 4, 1, 1, 0, 1, &h));
        CK(pcnn_leaky_relu(net, h, 0.1f, &i));
        CK(pcnn_dense(net, i, 5, 1, &y));
        CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
        CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));
        CK(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, 1e-3));
        CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
        *sample = 3 * 12 * 10;
    } else if (!strcmp(model, "lenet")) {
        CK(pcnn_net_input(net, 1, 28, 28, &in));
        CK(pcnn_conv2d(net, in, 6, 5, 1, 2, 1, &a));
        CK(pcnn_relu(net, a, &a));
        CK(pcnn_maxpool2d(net, a, 2, 2, 0, &a));
        CK(pcnn_conv2d(net, a, 16, 5, 1, 0, 1, &a));
        CK(pcnn_relu(net, a, &a));
        CK(pcnn_maxpool2d(net, a, 2, 2, 0, &a));
        CK(pcnn_dense(net, a, 120, 1, &a));
        CK(pcnn_relu(net, a, &a));
        CK(pcnn_dense(net, a, 84, 1, &a));
        CK(pcnn_relu(net, a, &a));
        CK(pcnn_dense(net, a, 10, 1, &y));
        CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
        CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
        CK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, 0.9));
        CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
        *sample = 28 * 28;
    } else if (!strcmp(model, "tiny")) {
        CK(pcnn_net_input(net, 4, 1, 1, &in));
        CK(pcnn_dense(net, in, 4, 1, &y));
        CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 1));
        *sample = 4;
    } else {
        fprintf(stderr, "unknown model %s\n", model);
        exit(2);
    }
    CK(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, max_batch));
    size_t out;
    CK(pcnn_net_output_size(net, &out));
    *outputs = (int)out;
    return net;
}

static void *read_file(const char *path, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, path);
        exit(1);
    }
    fclose(f);
    return p;
}

static void write_section(FILE *f, const float *v, uint64_t n)
{
    fwrite(&n, sizeof n, 1, f);
    fwrite(v, sizeof *v, n, f);
}

static int train(int argc, char **argv)
{
    if (argc < 8) return 2;
    const char *model = argv[2];
    int steps = atoi(argv[3]), n = atoi(argv[4]);
    int world = argc > 8 && !strcmp(argv[8], "world");
    pcnn_comm *comm = NULL;
    int rank = 0, size = 1, sample, outputs;
    if (world) {
        CK(pcnn_comm_create_world(&comm));
        CK(pcnn_comm_info(comm, &rank, &size, NULL));
    }
    pcnn_net *net = build(model, n, comm, &sample, &outputs);
    float *x = read_file(argv[5], (size_t)steps * n * sample * sizeof(float));
    int32_t *lab = read_file(argv[6], (size_t)steps * n * sizeof(int32_t));
    float *losses = calloc((size_t)steps, sizeof(float));
    /* This rank's share, as the library splits a global batch. */
    int base = n / size, extra = n % size;
    int first = rank * base + (rank < extra ? rank : extra);
    int mine = base + (rank < extra ? 1 : 0);
    for (int s = 0; s < steps; s++) {
        const float *xs = x + ((size_t)s * n + first) * sample;
        CK(pcnn_net_train_step(net, mine, mine ? xs : NULL, lab + (size_t)s * n + first,
                               NULL, &losses[s]));
    }
    size_t np;
    CK(pcnn_net_num_params(net, &np));
    float *params = malloc(np * sizeof(float)), *grads = malloc(np * sizeof(float));
    float *pred = malloc((size_t)n * outputs * sizeof(float));
    CK(pcnn_net_get_params(net, params, np));
    CK(pcnn_net_predict(net, n, x, pred, (size_t)n * outputs));
    float gloss;
    CK(pcnn_net_compute_gradients(net, mine, mine ? x + (size_t)first * sample : NULL,
                                  lab + first, NULL, &gloss));
    CK(pcnn_net_get_grads(net, grads, np));
    if (rank == 0) {
        FILE *f = fopen(argv[7], "wb");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", argv[7]);
            return 1;
        }
        write_section(f, params, np);
        write_section(f, losses, (uint64_t)steps);
        write_section(f, pred, (uint64_t)n * outputs);
        write_section(f, &gloss, 1);
        write_section(f, grads, np);
        fclose(f);
    }
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
    free(x), free(lab), free(losses), free(params), free(grads), free(pred);
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int bench(int argc, char **argv)
{
    if (argc < 5) return 2;
    int steps = atoi(argv[3]), n = atoi(argv[4]), sample, outputs;
    pcnn_net *net = build(argv[2], n, NULL, &sample, &outputs);
    float *x = malloc((size_t)n * sample * sizeof(float));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    uint32_t r = 12345;
    for (size_t i = 0; i < (size_t)n * sample; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < n; i++) lab[i] = i % outputs;
    float loss;
    for (int s = 0; s < 20; s++) CK(pcnn_net_train_step(net, n, x, lab, NULL, &loss));
    double t0 = now();
    for (int s = 0; s < steps; s++) CK(pcnn_net_train_step(net, n, x, lab, NULL, &loss));
    printf("c_us_per_step %.3f\n", (now() - t0) / steps * 1e6);
    CK(pcnn_net_destroy(&net));
    free(x), free(lab);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc > 1 && !strcmp(argv[1], "train")) rc = train(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "bench")) rc = bench(argc, argv);
    if (rc == 2) fprintf(stderr, "usage: see the comment at the top of c_reference.c\n");
    return rc;
}
