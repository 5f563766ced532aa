/* Checkpoints of 3D networks, through the public API: a network of volumes
 * (conv3d, batch norm, leaky ReLU, 3D pools, dropout, dense; Adam) saved
 * after a few steps and loaded into a fresh copy continues bit for bit as
 * the original does; a network that differs only in the input's depth (the
 * same layers, kinds, channels, heights, widths and parameter counts) is
 * refused with MISMATCH and left untouched: the layer records' hashes
 * cover the depth (docs/checkpoint-format.md), so format 2 needs no new
 * field for it. */
#define PCNN_EXPERIMENTAL /* the 3D calls: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/expect.h"
#include "pcnn.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define BATCH 3
#define MAX_SAMPLE (2 * 6 * 5 * 4)

/* (2, depth, 5, 4) -> conv3d 4 -> bn -> leaky -> maxpool3d 2 -> conv3d 3 s2
 * -> avgpool3d k3 s1 p1 -> global avgpool -> dropout -> dense 3: parameter
 * counts do not depend on the depth. */
static pcnn_net *build(int depth)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input3d(net, 2, depth, 5, 4, &l));
    CK(pcnn_conv3d(net, l, 4, 3, 1, 1, 0, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_leaky_relu(net, l, 0.01f, &l));
    CK(pcnn_maxpool3d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv3d(net, l, 3, 3, 2, 1, 1, &l));
    CK(pcnn_avgpool3d(net, l, 3, 1, 1, &l));
    CK(pcnn_global_avgpool(net, l, &l));
    CK(pcnn_dropout(net, l, 0.3f, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

static void train(pcnn_net *net, int depth, int from, int to)
{
    float x[BATCH * MAX_SAMPLE], t[BATCH * 3];
    const int n = BATCH * 2 * depth * 5 * 4;
    for (int step = from; step < to; step++) {
        for (int i = 0; i < n; i++) x[i] = (float)((i * 31 + step * 7) % 97) / 48.0f - 1.0f;
        for (int i = 0; i < BATCH * 3; i++) t[i] = (float)((i + step) % 5) * 0.25f - 0.5f;
        CK(pcnn_net_train_step(net, BATCH, x, NULL, t, NULL));
    }
}

static float *params(pcnn_net *net, size_t *n)
{
    CK(pcnn_net_num_params(net, n));
    float *p = malloc(*n * sizeof *p);
    if (!p) exit(2);
    CK(pcnn_net_get_params(net, p, *n));
    return p;
}

int main(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/pcnn_ckpt3d_%ld.ckpt", (long)getpid());
    pcnn_net *a = build(6);
    train(a, 6, 0, 3);
    CK(pcnn_net_save(a, path));

    /* Resume: the loaded copy takes the same next steps, bit for bit (the
     * Adam moments, batch-norm statistics and the step counter that drives
     * dropout all came along). */
    pcnn_net *b = build(6);
    CK(pcnn_net_load(b, path));
    size_t na, nb;
    float *pa = params(a, &na), *pb = params(b, &nb);
    EXPECT(na == nb && memcmp(pa, pb, na * sizeof *pa) == 0, "loaded parameters differ");
    free(pa), free(pb);
    train(a, 6, 3, 6);
    train(b, 6, 3, 6);
    pa = params(a, &na), pb = params(b, &nb);
    EXPECT(memcmp(pa, pb, na * sizeof *pa) == 0, "the resumed network trains differently");
    float ya[BATCH * 3], yb[BATCH * 3], x[BATCH * MAX_SAMPLE];
    for (int i = 0; i < BATCH * MAX_SAMPLE; i++) x[i] = (float)(i % 13) / 13.0f;
    CK(pcnn_net_predict(a, BATCH, x, ya, BATCH * 3));
    CK(pcnn_net_predict(b, BATCH, x, yb, BATCH * 3));
    EXPECT(memcmp(ya, yb, sizeof ya) == 0, "the resumed network predicts differently");
    free(pa), free(pb);

    /* Another depth: every record's kind, C, H, W and parameter count agree,
     * only the hashed depth differs. */
    pcnn_net *c = build(5);
    size_t nc;
    float *before = params(c, &nc);
    EXPECT(nc == na, "the depth changed the parameter count (%zu, %zu)", nc, na);
    const pcnn_status st = pcnn_net_load(c, path);
    EXPECT(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "layer 0 (input) differs") &&
               strstr(pcnn_last_error(), "depth"),
           "a network of depth 5 loaded a depth-6 checkpoint: %s: %s", pcnn_status_str(st),
           pcnn_last_error());
    float *after = params(c, &nc);
    EXPECT(memcmp(before, after, nc * sizeof *before) == 0, "a refused load changed parameters");
    free(before), free(after);

    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
    pcnn_net_destroy(&c);
    remove(path);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("3D checkpoints: resume bit for bit, depth mismatch refused\n");
    return 0;
}
