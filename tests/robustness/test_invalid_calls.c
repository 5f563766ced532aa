/* Hostile input: invalid calls to every public entry point of pcnn.h.
 *
 * Each CASE row is one invalid call.  It must return the specific status of
 * the row, leave every output argument untouched (pcnn.h: results are
 * written only on success), and leave a pcnn_last_error() message that
 * starts with "<the public function>: ", names no other function (even when
 * the failure is found by another public function the call makes), and
 * contains the row's distinctive text (the parameter, the value, the layer).  Before each row a different
 * failing call plants a stale message, so a row whose function forgets to
 * record one fails.  Rows are grouped by the state the handles are in
 * (fresh, built, finalized, datasets, MPI before/after init/finalize).
 *
 * Run as a single process: it initialises MPI itself (singleton), after the
 * rows that need MPI uninitialised, and finalises it before the rows that
 * need it finalised.  Prints the number of invalid calls tested. */
#define PCNN_EXPERIMENTAL /* tuning options of pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/api_message.h"
#include "pcnn.h"

static int cases, failures;

/* Output arguments: rows pass these, and they must keep their sentinels. */
#define SENTINEL_PTR ((void *)(uintptr_t)0x5e5e5e40)
static pcnn_net *o_net;
static pcnn_layer *o_layer;
static pcnn_dataset *o_data;
static pcnn_comm *o_comm;
static pcnn_perfmodel *o_model;
static size_t o_size;
static double o_dbl;
static float o_flt;
static int o_int;
static uint64_t o_u64;
static const char *o_str;
static float o_buf[4096];

static void reset_outputs(void)
{
    o_net = SENTINEL_PTR;
    o_layer = SENTINEL_PTR;
    o_data = SENTINEL_PTR;
    o_comm = SENTINEL_PTR;
    o_model = SENTINEL_PTR;
    o_str = SENTINEL_PTR;
    o_size = 0x5e5e;
    o_dbl = -7.25;
    o_flt = -7.25f;
    o_int = -777;
    o_u64 = 0x5e5e;
    for (size_t i = 0; i < sizeof o_buf / sizeof *o_buf; i++) o_buf[i] = -7.25f;
    /* A stale message from another function: a row must replace it. */
    pcnn_net_time(NULL, 0, PCNN_TIME_STEP, NULL);
}

static const char *untouched_outputs(void)
{
    if (o_net != SENTINEL_PTR) return "net handle";
    if (o_layer != SENTINEL_PTR) return "layer handle";
    if (o_data != SENTINEL_PTR) return "dataset handle";
    if (o_comm != SENTINEL_PTR) return "comm handle";
    if (o_model != SENTINEL_PTR) return "performance model handle";
    if (o_str != SENTINEL_PTR) return "string";
    if (o_size != 0x5e5e) return "size_t";
    if (o_dbl != -7.25) return "double";
    if (o_flt != -7.25f) return "float";
    if (o_int != -777) return "int";
    if (o_u64 != 0x5e5e) return "uint64_t";
    for (size_t i = 0; i < sizeof o_buf / sizeof *o_buf; i++)
        if (o_buf[i] != -7.25f) return "buffer";
    return NULL;
}

static void check(int line, const char *func, const char *args, pcnn_status got,
                  pcnn_status want, const char *want_text)
{
    cases++;
    const char *msg = pcnn_last_error();
    const char *written = untouched_outputs();
    const char *why = got != want ? "status" : api_message_problem(msg, func);
    if (!why && !strstr(msg, want_text)) why = "message lacks the expected text";
    if (!why && written) why = written;
    if (!why) return;
    failures++;
    fprintf(stderr, "FAIL line %d: %s(%s): %s\n  want %s, text \"%s\"\n  got  %s: \"%s\"\n",
            line, func, args, written && why == written ? "wrote an output on failure" : why,
            pcnn_status_str(want), want_text, pcnn_status_str(got), msg ? msg : "(null)");
}

/* One row: expected status, distinctive message text, the call. */
#define CASE(want, text, fn, ...)                                              \
    do {                                                                       \
        reset_outputs();                                                       \
        pcnn_status case_st_ = fn(__VA_ARGS__);                                \
        check(__LINE__, #fn, #__VA_ARGS__, case_st_, want, text);              \
    } while (0)

/* A setup call that must succeed. */
#define OK(call)                                                               \
    do {                                                                       \
        pcnn_status ok_st_ = (call);                                           \
        if (ok_st_ != PCNN_OK) {                                               \
            fprintf(stderr, "setup failed at line %d: %s -> %s: %s\n", __LINE__, #call, \
                    pcnn_status_str(ok_st_), pcnn_last_error());               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define E_ARG PCNN_ERR_INVALID_ARGUMENT
#define E_STATE PCNN_ERR_INVALID_STATE
#define E_SHAPE PCNN_ERR_SHAPE

/* Input (2, 6, 6) -> conv 4x3x3 pad 1 -> relu -> maxpool 2 -> dense 3. */
typedef struct fixture {
    pcnn_net *net;
    pcnn_layer *in, *conv, *relu, *pool, *dense;
} fixture;

static fixture build(pcnn_loss loss, int finalize_batch)
{
    fixture f;
    OK(pcnn_net_create(&f.net));
    OK(pcnn_net_input(f.net, 2, 6, 6, &f.in));
    OK(pcnn_conv2d(f.net, f.in, 4, 3, 1, 1, 1, &f.conv));
    OK(pcnn_relu(f.net, f.conv, &f.relu));
    OK(pcnn_maxpool2d(f.net, f.relu, 2, 2, 0, &f.pool));
    OK(pcnn_dense(f.net, f.pool, 3, 1, &f.dense));
    OK(pcnn_net_set_option(f.net, PCNN_OPT_THREADS, 1));
    if (finalize_batch > 0) {
        OK(pcnn_net_set_loss(f.net, f.dense, loss));
        OK(pcnn_net_finalize(f.net, finalize_batch));
    }
    return f;
}

#define SAMPLE (2 * 6 * 6)
#define MAXB 4

static float g_x[2 * MAXB * SAMPLE], g_bad_x[MAXB * SAMPLE], g_t[2 * MAXB * 3], g_bad_t[MAXB * 3];
static int32_t g_lab[2 * MAXB], g_lab_high[MAXB], g_lab_neg[MAXB];

static void make_data(void)
{
    for (int i = 0; i < 2 * MAXB * SAMPLE; i++) g_x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    memcpy(g_bad_x, g_x, sizeof g_bad_x);
    for (int i = 0; i < 2 * MAXB * 3; i++) g_t[i] = (float)(i % 5) * 0.25f;
    memcpy(g_bad_t, g_t, sizeof g_bad_t);
    g_bad_t[5] = NAN;
    for (int i = 0; i < 2 * MAXB; i++) g_lab[i] = i % 3;
    for (int i = 0; i < MAXB; i++) {
        g_lab_high[i] = i % 3;
        g_lab_neg[i] = i % 3;
    }
    g_lab_high[2] = 3; /* == classes */
    g_lab_neg[1] = -1;
}

/* ---------------------------------------------------------------------- */

static void fresh_and_building(void)
{
    /* pcnn_net_create / input */
    CASE(E_ARG, "out is NULL", pcnn_net_create, NULL);
    pcnn_net *net;
    OK(pcnn_net_create(&net));
    CASE(E_ARG, "net is NULL", pcnn_net_input, NULL, 1, 2, 2, &o_layer);
    CASE(E_ARG, "out is NULL", pcnn_net_input, net, 1, 2, 2, NULL);
    CASE(E_ARG, "(0, 4, 4)", pcnn_net_input, net, 0, 4, 4, &o_layer);
    CASE(E_ARG, "(3, -4, 4)", pcnn_net_input, net, 3, -4, 4, &o_layer);
    CASE(E_ARG, "more than 2^31", pcnn_net_input, net, 65536, 65536, 2, &o_layer);
    /* Finalizing an empty network, or one without a loss. */
    CASE(E_STATE, "no input", pcnn_net_finalize, net, 4);
    pcnn_layer *in;
    OK(pcnn_net_input(net, 2, 6, 6, &in));
    CASE(E_STATE, "already has an input", pcnn_net_input, net, 2, 6, 6, &o_layer);
    CASE(E_STATE, "no loss", pcnn_net_finalize, net, 4);

    /* Layers: NULL and foreign handles. */
    pcnn_net *other;
    pcnn_layer *other_in;
    OK(pcnn_net_create(&other));
    OK(pcnn_net_input(other, 2, 6, 6, &other_in));
    CASE(E_ARG, "net is NULL", pcnn_conv2d, NULL, in, 4, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "input layer 0 is NULL", pcnn_conv2d, net, NULL, 4, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "out is NULL", pcnn_conv2d, net, in, 4, 3, 1, 1, 1, NULL);
    CASE(E_ARG, "belongs to another network", pcnn_conv2d, net, other_in, 4, 3, 1, 1, 1,
         &o_layer);
    CASE(E_ARG, "belongs to another network", pcnn_relu, net, other_in, &o_layer);
    CASE(E_ARG, "input layer 0 is NULL", pcnn_relu, net, NULL, &o_layer);
    CASE(E_ARG, "net is NULL", pcnn_flatten, NULL, in, &o_layer);
    CASE(E_ARG, "out is NULL", pcnn_global_avgpool, net, in, NULL);
    CASE(E_ARG, "input layer 1 is NULL", pcnn_add, net, in, NULL, &o_layer);
    CASE(E_ARG, "input layer 1 belongs to another network", pcnn_add, net, in, other_in,
         &o_layer);

    /* conv2d arguments and shapes. */
    CASE(E_ARG, "out_channels 0", pcnn_conv2d, net, in, 0, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "kernel 0", pcnn_conv2d, net, in, 4, 0, 1, 0, 1, &o_layer);
    CASE(E_ARG, "stride -2", pcnn_conv2d, net, in, 4, 3, -2, 1, 1, &o_layer);
    CASE(E_ARG, "padding -1 must be >= 0", pcnn_conv2d, net, in, 4, 3, 1, -1, 1, &o_layer);
    CASE(E_SHAPE, "kernel 9 larger than padded input 8x8", pcnn_conv2d, net, in, 4, 9, 1, 1, 1,
         &o_layer);
    /* pooling */
    CASE(E_ARG, "kernel 0", pcnn_maxpool2d, net, in, 0, 1, 0, &o_layer);
    CASE(E_ARG, "stride 0", pcnn_maxpool2d, net, in, 2, 0, 0, &o_layer);
    CASE(E_ARG, "padding 2 must be in [0, kernel/2 = 1]", pcnn_maxpool2d, net, in, 3, 1, 2,
         &o_layer);
    CASE(E_SHAPE, "kernel 7 larger than padded input 6x6", pcnn_maxpool2d, net, in, 7, 1, 0,
         &o_layer);
    CASE(E_ARG, "stride -1", pcnn_avgpool2d, net, in, 2, -1, 0, &o_layer);
    CASE(E_ARG, "padding -1", pcnn_avgpool2d, net, in, 2, 2, -1, &o_layer);
    CASE(E_SHAPE, "kernel 9 larger than padded input 8x8", pcnn_avgpool2d, net, in, 9, 1, 1,
         &o_layer);
    /* dense, activations, normalisation, dropout */
    CASE(E_ARG, "out_features 0", pcnn_dense, net, in, 0, 1, &o_layer);
    CASE(E_ARG, "out_features -5", pcnn_dense, net, in, -5, 1, &o_layer);
    CASE(E_ARG, "slope nan", pcnn_leaky_relu, net, in, NAN, &o_layer);
    CASE(E_ARG, "slope -0.1", pcnn_leaky_relu, net, in, -0.1f, &o_layer);
    CASE(E_ARG, "slope inf", pcnn_leaky_relu, net, in, INFINITY, &o_layer);
    CASE(E_ARG, "eps 0", pcnn_batchnorm, net, in, 0.0f, 0.1f, &o_layer);
    CASE(E_ARG, "eps nan", pcnn_batchnorm, net, in, NAN, 0.1f, &o_layer);
    CASE(E_ARG, "eps -1", pcnn_batchnorm, net, in, -1.0f, 0.1f, &o_layer);
    CASE(E_ARG, "momentum 1.5", pcnn_batchnorm, net, in, 1e-5f, 1.5f, &o_layer);
    CASE(E_ARG, "momentum nan", pcnn_batchnorm, net, in, 1e-5f, NAN, &o_layer);
    CASE(E_ARG, "p 1 must be in [0, 1)", pcnn_dropout, net, in, 1.0f, &o_layer);
    CASE(E_ARG, "p -0.1", pcnn_dropout, net, in, -0.1f, &o_layer);
    CASE(E_ARG, "p nan", pcnn_dropout, net, in, NAN, &o_layer);
    /* add: shapes must match, scale finite */
    pcnn_layer *conv, *pool, *relu;
    OK(pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &conv));
    OK(pcnn_maxpool2d(net, conv, 2, 2, 0, &pool));
    CASE(E_SHAPE, "(4, 6, 6) of layer 1 and (4, 3, 3) of layer 2 differ", pcnn_add, net, conv,
         pool, &o_layer);
    CASE(E_SHAPE, "(2, 6, 6) of layer 0 and (4, 6, 6) of layer 1 differ", pcnn_add_scaled, net,
         in, conv, 0.5f, &o_layer);
    CASE(E_ARG, "b_scale nan", pcnn_add_scaled, net, conv, conv, NAN, &o_layer);
    CASE(E_ARG, "b_scale -inf", pcnn_add_scaled, net, conv, conv, -INFINITY, &o_layer);
    /* pixel shuffle */
    CASE(E_ARG, "upscale 0", pcnn_pixel_shuffle, net, conv, 0, &o_layer);
    CASE(E_SHAPE, "4 channels do not divide by upscale^2 = 9", pcnn_pixel_shuffle, net, conv, 3,
         &o_layer);
    /* encoder-decoder layers (section 9.5) */
    CASE(E_ARG, "input layer 0 is NULL", pcnn_sigmoid, net, NULL, &o_layer);
    CASE(E_ARG, "input layer 0 is NULL", pcnn_tanh, net, NULL, &o_layer);
    CASE(E_ARG, "layer 3 (upsample2d): factor 0 must be >= 1", pcnn_upsample2d, net, conv, 0,
         PCNN_UPSAMPLE_NEAREST, &o_layer);
    CASE(E_ARG, "mode 7 is neither PCNN_UPSAMPLE_NEAREST (0) nor PCNN_UPSAMPLE_LINEAR (1)",
         pcnn_upsample3d, net, conv, 2, (pcnn_upsample_mode)7, &o_layer);
    CASE(E_ARG, "layer 3 (conv_transpose2d): output_padding 2 must be >= 0 and smaller than "
         "the stride 2", pcnn_conv_transpose2d, net, conv, 4, 3, 2, 1, 2, 1, &o_layer);
    CASE(E_ARG, "output_padding -1", pcnn_conv_transpose3d, net, conv, 4, 3, 2, 1, -1, 1,
         &o_layer);
    CASE(E_ARG, "kernel 0 must be >= 1", pcnn_conv_transpose2d, net, conv, 4, 0, 1, 0, 0, 1,
         &o_layer);
    CASE(E_ARG, "out_channels 0", pcnn_conv_transpose2d, net, conv, 0, 3, 1, 0, 0, 1, &o_layer);
    CASE(E_SHAPE, "kernel 1, stride 1, padding 4, output_padding 0 give no output on a 1x6x6 "
         "input", pcnn_conv_transpose2d, net, conv, 4, 1, 1, 4, 0, 1, &o_layer);
    OK(pcnn_relu(net, pool, &relu));

    /* Queries and settings of layers. */
    CASE(E_ARG, "layer is NULL", pcnn_layer_output_shape, NULL, &o_int, &o_int, &o_int);
    CASE(E_ARG, "layer is NULL", pcnn_layer_info, NULL, &o_int, &o_str);
    CASE(E_ARG, "layer is NULL", pcnn_layer_num_params, NULL, &o_size);
    CASE(E_ARG, "count is NULL", pcnn_layer_num_params, conv, NULL);
    CASE(E_ARG, "layer is NULL", pcnn_layer_set_init, NULL, PCNN_INIT_HE_UNIFORM);
    CASE(E_ARG, "layer 3 (relu) has no weights", pcnn_layer_set_init, relu,
         PCNN_INIT_HE_UNIFORM);
    CASE(E_ARG, "unknown init 17", pcnn_layer_set_init, conv, (pcnn_init)17);
    CASE(E_ARG, "unknown init -1", pcnn_layer_set_init, conv, (pcnn_init)-1);

    /* Losses and optimizers. */
    CASE(E_ARG, "net is NULL", pcnn_net_set_loss, NULL, relu, PCNN_LOSS_MSE);
    CASE(E_ARG, "output is NULL", pcnn_net_set_loss, net, NULL, PCNN_LOSS_MSE);
    CASE(E_ARG, "unknown loss 4", pcnn_net_set_loss, net, relu, (pcnn_loss)4);
    CASE(E_ARG, "output cannot be the input", pcnn_net_set_loss, net, in, PCNN_LOSS_MSE);
    CASE(E_ARG, "belongs to another network", pcnn_net_set_loss, net, other_in, PCNN_LOSS_MSE);
    CASE(E_SHAPE, "layer 3 (relu) gives (4, 3, 3)", pcnn_net_set_loss, net, relu,
         PCNN_LOSS_SOFTMAX_CROSS_ENTROPY);
    pcnn_layer *one;
    OK(pcnn_dense(net, relu, 1, 1, &one));
    CASE(E_SHAPE, "at least 2 classes", pcnn_net_set_loss, net, one,
         PCNN_LOSS_SOFTMAX_CROSS_ENTROPY);
    CASE(E_ARG, "net is NULL", pcnn_net_set_optimizer, NULL, PCNN_OPTIMIZER_ADAM);
    CASE(E_ARG, "unknown optimizer 3", pcnn_net_set_optimizer, net, (pcnn_optimizer)3);
    CASE(E_ARG, "unknown optimizer -1", pcnn_net_set_optimizer, net, (pcnn_optimizer)-1);

    /* Exchange choices before any communicator. */
    CASE(E_ARG, "net is NULL", pcnn_net_set_exchange, NULL, PCNN_EXCHANGE_ALLREDUCE);
    CASE(E_ARG, "unknown exchange 9", pcnn_net_set_exchange, net, (pcnn_exchange)9);
    CASE(E_ARG, "layer is NULL", pcnn_layer_set_exchange, NULL, PCNN_EXCHANGE_ALLREDUCE);
    CASE(E_ARG, "unknown exchange -3", pcnn_layer_set_exchange, conv, (pcnn_exchange)-3);
    CASE(E_ARG, "layer 3 (relu) has no parameters", pcnn_layer_set_exchange, relu,
         PCNN_EXCHANGE_ALLREDUCE);
    CASE(E_ARG, "layer is NULL", pcnn_batchnorm_set_sync, NULL, 1);
    CASE(E_ARG, "layer 3 (relu) is not a batch norm", pcnn_batchnorm_set_sync, relu, 1);
    CASE(E_ARG, "net is NULL", pcnn_net_set_comm, NULL, SENTINEL_PTR);
    CASE(E_ARG, "comm is NULL", pcnn_net_set_comm, net, NULL);

    /* Distributions (section 9): without a communicator only {1, 1, 1, 1}. */
    static const int two_parts[4] = {1, 1, 2, 1}, bad_parts[4] = {1, 0, 1, 1};
    int parts4[4], box3[3], cnt3[3], grp;
    CASE(E_ARG, "net is NULL", pcnn_net_set_distribution, NULL, two_parts);
    CASE(E_ARG, "parts is NULL", pcnn_net_set_distribution, net, NULL);
    CASE(E_ARG, "must be the communicator's 1 ranks", pcnn_net_set_distribution, net,
         two_parts);
    CASE(E_ARG, "parts[1] = 0 must be >= 1", pcnn_net_set_distribution, net, bad_parts);
    CASE(E_ARG, "layer is NULL", pcnn_layer_set_distribution, NULL, two_parts);
    CASE(E_ARG, "must be the communicator's 1 ranks", pcnn_layer_set_distribution, conv,
         two_parts);
    CASE(E_ARG, "layer is NULL", pcnn_layer_get_distribution, NULL, parts4);
    CASE(E_ARG, "parts is NULL", pcnn_layer_get_distribution, conv, NULL);
    CASE(E_ARG, "layer is NULL", pcnn_layer_local_box, NULL, box3, cnt3);
    CASE(E_ARG, "count is NULL", pcnn_layer_local_box, conv, box3, NULL);
    CASE(E_STATE, "not finalized", pcnn_layer_local_box, conv, box3, cnt3);
    CASE(E_ARG, "net is NULL", pcnn_net_group_info, NULL, &grp, &grp, &grp, &grp);
    CASE(E_ARG, "net is NULL", pcnn_net_train_step_local, NULL, 1, SENTINEL_PTR, NULL, NULL,
         NULL);
    CASE(E_STATE, "not finalized", pcnn_net_train_step_local, net, 1, SENTINEL_PTR, NULL, NULL,
         NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_predict_parallel, NULL, 1, SENTINEL_PTR, SENTINEL_PTR, 1);
    CASE(E_STATE, "not finalized", pcnn_net_predict_parallel, net, 1, SENTINEL_PTR, SENTINEL_PTR,
         1);

    /* Options: unknown, NaN/Inf, out of range, not integral, read-only. */
    CASE(E_ARG, "net is NULL", pcnn_net_set_option, NULL, PCNN_OPT_LEARNING_RATE, 0.1);
    CASE(E_ARG, "unknown option 99", pcnn_net_set_option, net, (pcnn_option)99, 1.0);
    CASE(E_ARG, "unknown option -1", pcnn_net_set_option, net, (pcnn_option)-1, 1.0);
    CASE(E_ARG, "value is NaN", pcnn_net_set_option, net, PCNN_OPT_LEARNING_RATE, NAN);
    CASE(E_ARG, "learning rate 0", pcnn_net_set_option, net, PCNN_OPT_LEARNING_RATE, 0.0);
    CASE(E_ARG, "learning rate -0.5", pcnn_net_set_option, net, PCNN_OPT_LEARNING_RATE, -0.5);
    CASE(E_ARG, "learning rate inf", pcnn_net_set_option, net, PCNN_OPT_LEARNING_RATE,
         INFINITY);
    CASE(E_ARG, "momentum 1 must be in [0, 1)", pcnn_net_set_option, net, PCNN_OPT_MOMENTUM,
         1.0);
    CASE(E_ARG, "momentum -0.5", pcnn_net_set_option, net, PCNN_OPT_MOMENTUM, -0.5);
    CASE(E_ARG, "weight decay -1", pcnn_net_set_option, net, PCNN_OPT_WEIGHT_DECAY, -1.0);
    CASE(E_ARG, "weight decay inf", pcnn_net_set_option, net, PCNN_OPT_WEIGHT_DECAY, INFINITY);
    CASE(E_ARG, "Adam beta 1 must be in [0, 1)", pcnn_net_set_option, net,
         PCNN_OPT_ADAM_BETA1, 1.0);
    CASE(E_ARG, "Adam beta -0.1", pcnn_net_set_option, net, PCNN_OPT_ADAM_BETA2, -0.1);
    CASE(E_ARG, "Adam epsilon 0", pcnn_net_set_option, net, PCNN_OPT_ADAM_EPSILON, 0.0);
    CASE(E_ARG, "Adam epsilon inf", pcnn_net_set_option, net, PCNN_OPT_ADAM_EPSILON, INFINITY);
    CASE(E_ARG, "seed -1", pcnn_net_set_option, net, PCNN_OPT_SEED, -1.0);
    CASE(E_ARG, "seed 1.5", pcnn_net_set_option, net, PCNN_OPT_SEED, 1.5);
    CASE(E_ARG, "seed 1.15292e+18", pcnn_net_set_option, net, PCNN_OPT_SEED, 0x1p60);
    CASE(E_ARG, "step count 2.5", pcnn_net_set_option, net, PCNN_OPT_WARMUP_STEPS, 2.5);
    CASE(E_ARG, "step count -3", pcnn_net_set_option, net, PCNN_OPT_DECAY_EVERY_STEPS, -3.0);
    CASE(E_ARG, "decay factor 0", pcnn_net_set_option, net, PCNN_OPT_DECAY_FACTOR, 0.0);
    CASE(E_ARG, "decay factor 1.5", pcnn_net_set_option, net, PCNN_OPT_DECAY_FACTOR, 1.5);
    CASE(E_ARG, "threads -1", pcnn_net_set_option, net, PCNN_OPT_THREADS, -1.0);
    CASE(E_ARG, "threads 5000", pcnn_net_set_option, net, PCNN_OPT_THREADS, 5000.0);
    CASE(E_ARG, "threads inf", pcnn_net_set_option, net, PCNN_OPT_THREADS, INFINITY);
    CASE(E_ARG, "0 or 1, not 2", pcnn_net_set_option, net, PCNN_OPT_KEEP_IM2COL, 2.0);
    CASE(E_ARG, "0 or 1, not 0.5", pcnn_net_set_option, net, PCNN_OPT_CHECK_NUMERICS, 0.5);
    CASE(E_ARG, "step -1", pcnn_net_set_option, net, PCNN_OPT_STEP, -1.0);
    CASE(E_STATE, "effective learning rate is read-only", pcnn_net_set_option, net,
         PCNN_OPT_EFFECTIVE_LEARNING_RATE, 0.1);
    CASE(E_ARG, "overlap is a flag: 0 or 1, not -1", pcnn_net_set_option, net,
         PCNN_OPT_OVERLAP, -1.0);
    CASE(E_ARG, "engine 3", pcnn_net_set_option, net, PCNN_OPT_ENGINE, 3.0);
    CASE(E_STATE, "active engine is read-only", pcnn_net_set_option, net,
         PCNN_OPT_ACTIVE_ENGINE, 1.0);
    CASE(E_ARG, "comm_core -2", pcnn_net_set_option, net, PCNN_OPT_COMM_CORE, -2.0);
    CASE(E_ARG, "comm_core 1.5", pcnn_net_set_option, net, PCNN_OPT_COMM_CORE, 1.5);
    CASE(E_ARG, "timeout_ms -1", pcnn_net_set_option, net, PCNN_OPT_TIMEOUT_MS, -1.0);
    CASE(E_ARG, "timeout_ms inf", pcnn_net_set_option, net, PCNN_OPT_TIMEOUT_MS, INFINITY);
    CASE(E_ARG, "trace_events 1e+09", pcnn_net_set_option, net, PCNN_OPT_TRACE_EVENTS, 1e9);
    CASE(E_ARG, "conv_algorithm 4 must be 0", pcnn_net_set_option, net, PCNN_OPT_CONV_ALGORITHM, 4.0);
    CASE(E_ARG, "bucket_bytes -1", pcnn_net_set_option, net, PCNN_OPT_BUCKET_BYTES, -1.0);
    CASE(E_ARG, "bucket_bytes 1e+10", pcnn_net_set_option, net, PCNN_OPT_BUCKET_BYTES, 1e10);
    CASE(E_ARG, "net is NULL", pcnn_net_get_option, NULL, PCNN_OPT_SEED, &o_dbl);
    CASE(E_ARG, "value is NULL", pcnn_net_get_option, net, PCNN_OPT_SEED, NULL);
    CASE(E_ARG, "unknown option 33", pcnn_net_get_option, net, (pcnn_option)33, &o_dbl);
    CASE(E_ARG, "precision 2", pcnn_net_set_option, net, PCNN_OPT_PRECISION, 2.0);
    CASE(E_ARG, "sync_batchnorm is a flag", pcnn_net_set_option, net, PCNN_OPT_SYNC_BATCHNORM,
         2.0);
    CASE(E_ARG, "unknown option 99", pcnn_net_option_info, (pcnn_option)99, &o_dbl, &o_dbl,
         &o_int, &o_str);
    CASE(E_ARG, "unknown option -1", pcnn_net_option_info, (pcnn_option)-1, &o_dbl, NULL, &o_int,
         &o_str);
    CASE(E_ARG, "unknown option -2147483648", pcnn_net_option_info, (pcnn_option)INT32_MIN, NULL,
         NULL, NULL, NULL);

    /* Everything that needs a finalized network, before finalize. */
    CASE(E_STATE, "not finalized", pcnn_net_train_step, net, 1, g_x, g_lab, NULL, &o_flt);
    CASE(E_STATE, "not finalized", pcnn_net_compute_gradients, net, 1, g_x, g_lab, NULL,
         &o_flt);
    CASE(E_STATE, "not finalized", pcnn_net_compute_loss, net, 1, g_x, g_lab, NULL, &o_flt);
    CASE(E_STATE, "not finalized", pcnn_net_predict, net, 1, g_x, o_buf, 4096);
    CASE(E_STATE, "not finalized", pcnn_net_num_params, net, &o_size);
    CASE(E_STATE, "not finalized", pcnn_net_output_size, net, &o_size);
    CASE(E_STATE, "not finalized", pcnn_net_memory_bytes, net, &o_size);
    CASE(E_STATE, "not finalized", pcnn_net_get_params, net, o_buf, 10);
    CASE(E_STATE, "not finalized", pcnn_net_set_params, net, g_x, 10);
    CASE(E_STATE, "not finalized", pcnn_net_get_grads, net, o_buf, 10);
    CASE(E_STATE, "not finalized", pcnn_layer_get_params, conv, o_buf, 76);
    CASE(E_STATE, "not finalized", pcnn_layer_set_params, conv, g_x, 76);
    CASE(E_STATE, "not finalized", pcnn_net_get_input_grad, net, o_buf, 4096);
    CASE(E_STATE, "not finalized", pcnn_net_exchange_bytes, net, &o_u64);
    CASE(E_STATE, "not finalized", pcnn_net_time, net, -1, PCNN_TIME_STEP, &o_dbl);
    CASE(E_STATE, "not finalized", pcnn_net_overlap_ratio, net, &o_dbl);
    CASE(E_STATE, "not finalized", pcnn_net_reset_timing, net);
    CASE(E_STATE, "not finalized", pcnn_net_timing_report, net, NULL, 0, &o_size);
    CASE(E_STATE, "not finalized", pcnn_net_write_trace, net, "/tmp/pcnn_never_written.json");
    CASE(E_STATE, "not finalized", pcnn_net_write_trace_merged, net,
         "/tmp/pcnn_never_written.json");

    /* Graph checks at finalize: a layer that does not reach the output
     * (relu 3 feeds the 1-class dense 4; the output is pool 2). */
    CASE(E_ARG, "max_batch 0", pcnn_net_finalize, net, 0);
    CASE(E_ARG, "max_batch -3", pcnn_net_finalize, net, -3);
    CASE(E_ARG, "net is NULL", pcnn_net_finalize, NULL, 4);
    OK(pcnn_net_set_loss(net, pool, PCNN_LOSS_MSE));
    CASE(E_STATE, "layer 4 (dense) does not lead to the output", pcnn_net_finalize, net, 4);
    /* A graph error changes nothing: fix the graph and finalize again. */
    CASE(E_STATE, "layer 4 (dense) does not lead to the output", pcnn_net_finalize, net, 4);
    OK(pcnn_net_set_loss(net, one, PCNN_LOSS_MSE));
    OK(pcnn_net_finalize(net, 4));
    OK(pcnn_net_destroy(&net));
    OK(pcnn_net_destroy(&other));

    /* Batches whose activations exceed 2^31 values, and int overflow of
     * a convolution's output planes. */
    fixture f = build(PCNN_LOSS_MSE, 0);
    OK(pcnn_net_set_loss(f.net, f.dense, PCNN_LOSS_MSE));
    CASE(E_SHAPE, "batch 2147483647 x 72 values per sample exceeds 2^31", pcnn_net_finalize,
         f.net, 2147483647);
    OK(pcnn_net_destroy(&f.net));
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input(net, 1, 46000, 46000, &in));
    CASE(E_SHAPE, "sizes overflow", pcnn_conv2d, net, in, 2, 1, 1, 0, 1, &o_layer);
    OK(pcnn_net_destroy(&net));
}

/* Volumes: pcnn.h section 9's 3D calls, and the 2D layers that refuse depth. */
static void volumes(void)
{
    pcnn_net *net;
    pcnn_layer *in, *conv, *pool, *flat, *img, *img_conv;
    OK(pcnn_net_create(&net));
    CASE(E_ARG, "net is NULL", pcnn_net_input3d, NULL, 2, 5, 6, 6, &o_layer);
    CASE(E_ARG, "out is NULL", pcnn_net_input3d, net, 2, 5, 6, 6, NULL);
    CASE(E_ARG, "input shape (2, 0, 6, 6) must be positive", pcnn_net_input3d, net, 2, 0, 6, 6,
         &o_layer);
    CASE(E_ARG, "input shape (2, 5, 6, -6) must be positive", pcnn_net_input3d, net, 2, 5, 6,
         -6, &o_layer);
    CASE(E_ARG, "(8, 1024, 1024, 1024) has more than 2^31", pcnn_net_input3d, net, 8, 1024,
         1024, 1024, &o_layer);
    OK(pcnn_net_input3d(net, 2, 5, 6, 6, &in));
    CASE(E_STATE, "already has an input", pcnn_net_input3d, net, 2, 5, 6, 6, &o_layer);
    CASE(E_STATE, "already has an input", pcnn_net_input, net, 2, 6, 6, &o_layer);

    /* conv3d arguments and shapes. */
    CASE(E_ARG, "net is NULL", pcnn_conv3d, NULL, in, 4, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "input layer 0 is NULL", pcnn_conv3d, net, NULL, 4, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "out is NULL", pcnn_conv3d, net, in, 4, 3, 1, 1, 1, NULL);
    CASE(E_ARG, "out_channels 0", pcnn_conv3d, net, in, 0, 3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "kernel -3", pcnn_conv3d, net, in, 4, -3, 1, 1, 1, &o_layer);
    CASE(E_ARG, "stride 0", pcnn_conv3d, net, in, 4, 3, 0, 1, 1, &o_layer);
    CASE(E_ARG, "layer 1 (conv3d): padding -1 must be >= 0", pcnn_conv3d, net, in, 4, 3, 1, -1,
         1, &o_layer);
    CASE(E_SHAPE, "kernel 8 larger than padded input 7x8x8", pcnn_conv3d, net, in, 4, 8, 1, 1,
         1, &o_layer);
    /* 3D pools */
    CASE(E_ARG, "input layer 0 is NULL", pcnn_maxpool3d, net, NULL, 2, 2, 0, &o_layer);
    CASE(E_ARG, "kernel 0", pcnn_maxpool3d, net, in, 0, 1, 0, &o_layer);
    CASE(E_ARG, "stride -2", pcnn_avgpool3d, net, in, 2, -2, 0, &o_layer);
    CASE(E_ARG, "layer 1 (maxpool3d): padding 2 must be in [0, kernel/2 = 1]", pcnn_maxpool3d,
         net, in, 3, 1, 2, &o_layer);
    CASE(E_ARG, "layer 1 (avgpool3d): padding -1 must be in [0, kernel/2 = 1]", pcnn_avgpool3d,
         net, in, 3, 1, -1, &o_layer);
    CASE(E_SHAPE, "kernel 6 larger than padded input 5x6x6", pcnn_avgpool3d, net, in, 6, 1, 0,
         &o_layer);
    /* 2D layers refuse volumes; pixel shuffle has no 3D form. */
    CASE(E_SHAPE, "input is 3D (depth 5): use pcnn_conv3d", pcnn_conv2d, net, in, 4, 3, 1, 1, 1,
         &o_layer);
    CASE(E_SHAPE, "input is 3D (depth 5): use the 3D pooling", pcnn_maxpool2d, net, in, 2, 2, 0,
         &o_layer);
    CASE(E_SHAPE, "input is 3D (depth 5): use the 3D pooling", pcnn_avgpool2d, net, in, 2, 2, 0,
         &o_layer);
    CASE(PCNN_ERR_UNSUPPORTED, "layer 1 (pixel_shuffle): 2D only, but the input is 3D (depth 5)",
         pcnn_pixel_shuffle, net, in, 1, &o_layer);
    CASE(E_SHAPE, "layer 1 (upsample2d): the input is a volume (depth 5): use pcnn_upsample3d",
         pcnn_upsample2d, net, in, 2, PCNN_UPSAMPLE_LINEAR, &o_layer);
    CASE(E_SHAPE, "the input is a volume (depth 5): use pcnn_conv_transpose3d",
         pcnn_conv_transpose2d, net, in, 2, 2, 2, 0, 0, 1, &o_layer);
    /* add: depth must match too */
    OK(pcnn_conv3d(net, in, 4, 3, 1, 1, 1, &conv));
    OK(pcnn_maxpool3d(net, conv, 2, 2, 0, &pool));
    CASE(E_SHAPE, "(4, 5, 6, 6) of layer 1 and (4, 2, 3, 3) of layer 2 differ", pcnn_add, net,
         conv, pool, &o_layer);
    /* Shape queries: the 2D one refuses to drop the depth. */
    CASE(E_SHAPE, "layer 1 (conv3d) has a 3D output (depth 5): use pcnn_layer_output_shape3d",
         pcnn_layer_output_shape, conv, &o_int, &o_int, &o_int);
    CASE(E_ARG, "layer is NULL", pcnn_layer_output_shape3d, NULL, &o_int, &o_int, &o_int,
         &o_int);
    OK(pcnn_flatten(net, pool, &flat));
    int c = 0, d = 0, h = 0, w = 0;
    OK(pcnn_layer_output_shape(flat, &c, &h, &w));
    OK(pcnn_layer_output_shape3d(flat, NULL, &d, NULL, NULL));
    if (c != 4 * 2 * 3 * 3 || h != 1 || w != 1 || d != 1) {
        fprintf(stderr, "FAIL: flatten of (4, 2, 3, 3) gave (%d, %d, %d, %d)\n", c, d, h, w);
        failures++;
    }
    OK(pcnn_dense(net, flat, 3, 1, &flat));
    OK(pcnn_net_set_loss(net, flat, PCNN_LOSS_MSE));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    OK(pcnn_net_finalize(net, 2));
    CASE(E_STATE, "the network is finalized", pcnn_net_input3d, net, 1, 2, 2, 2, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_conv3d, net, pool, 2, 1, 1, 0, 1, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_maxpool3d, net, pool, 2, 1, 0, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_avgpool3d, net, pool, 2, 1, 0, &o_layer);

    /* Datasets of volumes, and against networks of another depth. */
    CASE(E_ARG, "out is NULL", pcnn_dataset_create3d, 2, 1, 2, 2, 2, g_x, g_lab, NULL, 0, NULL);
    CASE(E_ARG, "x is NULL", pcnn_dataset_create3d, 2, 1, 2, 2, 2, NULL, g_lab, NULL, 0,
         &o_data);
    CASE(E_ARG, "n 0 < 1", pcnn_dataset_create3d, 0, 1, 2, 2, 2, g_x, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "sample shape (1, 0, 2, 2) has a dimension < 1", pcnn_dataset_create3d, 2, 1, 0,
         2, 2, g_x, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "(got both)", pcnn_dataset_create3d, 2, 1, 2, 2, 2, g_x, g_lab, g_t, 3, &o_data);
    CASE(E_ARG, "target_count 0 < 1 with targets", pcnn_dataset_create3d, 2, 1, 2, 2, 2, g_x,
         NULL, g_t, 0, &o_data);
    CASE(E_ARG, "(2, 1024, 1024, 1024) exceeds INT_MAX floats", pcnn_dataset_create3d, 1, 2,
         1024, 1024, 1024, g_x, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "data is NULL", pcnn_dataset_info3d, NULL, &o_int, &o_int, &o_int, &o_int,
         &o_int);
    pcnn_dataset *vol, *flat_data;
    static float vx[2 * 2 * 5 * 6 * 6]; /* two (2, 5, 6, 6) volumes */
    OK(pcnn_dataset_create3d(2, 2, 5, 6, 6, vx, NULL, g_t, 3, &vol));
    OK(pcnn_dataset_create(2, 2, 6, 6, g_x, NULL, g_t, 3, &flat_data));
    CASE(E_SHAPE, "the samples are 3D (depth 5): use pcnn_dataset_info3d", pcnn_dataset_info, vol,
         &o_int, &o_int, &o_int, &o_int);
    CASE(E_SHAPE, "dataset samples are (2, 1, 6, 6) but the network input is (2, 5, 6, 6)",
         pcnn_net_evaluate, net, flat_data, &o_dbl, &o_dbl);
    OK(pcnn_net_destroy(&net));
    /* A 2D network and a dataset of volumes. */
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input(net, 2, 6, 6, &img));
    OK(pcnn_conv2d(net, img, 3, 3, 1, 1, 1, &img_conv));
    OK(pcnn_net_set_loss(net, img_conv, PCNN_LOSS_MSE));
    OK(pcnn_net_finalize(net, 2));
    CASE(E_SHAPE, "dataset samples are (2, 5, 6, 6) but the network input is (2, 1, 6, 6)",
         pcnn_net_train_epoch, net, vol, 2, &o_dbl);
    OK(pcnn_net_destroy(&net));
    pcnn_dataset_destroy(&vol);
    pcnn_dataset_destroy(&flat_data);
    /* One sample's output columns must fit an int (a batch's size is finalize's). */
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input3d(net, 1, 1, 1, 1, &in));
    CASE(E_SHAPE, "sizes overflow", pcnn_conv3d, net, in, 1, 1, 1, 1000, 0, &o_layer);
    /* Products bounded factor by factor, not wrapped: 2^22 outputs per axis
     * (2^66 in all), a 2^21 kernel (K^3 = 2^63). */
    CASE(E_SHAPE, "sizes overflow (1 channels x kernel 3^3, output 1 x 4194304x4194304x4194304)",
         pcnn_conv3d, net, in, 1, 3, 2, 4194304, 0, &o_layer);
    CASE(E_SHAPE, "sizes overflow (1 channels x kernel 2097152^3", pcnn_conv3d, net, in, 1,
         2097152, 1, 1048576, 0, &o_layer);
    CASE(E_SHAPE, "sizes overflow (1 channels x kernel 2097152^3", pcnn_conv3d, net, in, 1,
         2097152, 1, 1048576, 1, &o_layer);
    OK(pcnn_net_destroy(&net));
    /* 2D: C*K*K = 2^20 * 2^44 wraps to 0 in 64 bits. */
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input(net, 1048576, 1, 1, &in));
    CASE(E_SHAPE, "sizes overflow (1048576 channels x kernel 4194304", pcnn_conv2d, net, in, 1,
         4194304, 1, 2097152, 0, &o_layer);
    OK(pcnn_net_destroy(&net));
    /* A sample of 2^64 floats wraps a size_t product to 0. */
    CASE(E_ARG, "(4194304, 4194304, 1048576, 1) exceeds INT_MAX floats", pcnn_dataset_create3d,
         1, 4194304, 4194304, 1048576, 1, g_x, g_lab, NULL, 0, &o_data);
}

static void finalized(void)
{
    fixture f = build(PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, MAXB);
    pcnn_net *net = f.net;

    /* Building after finalize. */
    CASE(E_STATE, "the network is finalized", pcnn_net_input, net, 1, 2, 2, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_conv2d, net, f.pool, 2, 1, 1, 0, 1,
         &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_dense, net, f.dense, 2, 1, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_relu, net, f.dense, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_global_avgpool, net, f.pool, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_add, net, f.dense, f.dense, &o_layer);
    CASE(E_STATE, "the network is finalized", pcnn_net_set_loss, net, f.dense, PCNN_LOSS_MSE);
    CASE(E_STATE, "before finalize", pcnn_net_set_optimizer, net, PCNN_OPTIMIZER_ADAM);
    CASE(E_STATE, "already finalized", pcnn_layer_set_init, f.conv, PCNN_INIT_GLOROT_NORMAL);
    CASE(E_STATE, "before finalize", pcnn_net_set_exchange, net, PCNN_EXCHANGE_ALLREDUCE);
    CASE(E_STATE, "before finalize", pcnn_layer_set_exchange, f.conv, PCNN_EXCHANGE_ALLREDUCE);
    CASE(E_STATE, "before finalize", pcnn_net_set_comm, net, SENTINEL_PTR);
    CASE(E_STATE, "already finalized", pcnn_net_finalize, net, MAXB);
    /* Options fixed at finalize. */
    CASE(E_STATE, "seed must be set before finalize", pcnn_net_set_option, net, PCNN_OPT_SEED,
         1.0);
    CASE(E_STATE, "threads must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_THREADS, 1.0);
    CASE(E_STATE, "keep_im2col must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_KEEP_IM2COL, 0.0);
    CASE(E_STATE, "overlap must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_OVERLAP, 0.0);
    CASE(E_STATE, "engine must be chosen before finalize", pcnn_net_set_option, net,
         PCNN_OPT_ENGINE, 2.0);
    CASE(E_STATE, "comm_core must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_COMM_CORE, 0.0);
    CASE(E_STATE, "trace_events must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_TRACE_EVENTS, 8.0);
    CASE(E_STATE, "bucket_bytes must be set before finalize", pcnn_net_set_option, net,
         PCNN_OPT_BUCKET_BYTES, 4096.0);

    /* Batches: counts, NULLs, labels, NaN/Inf. */
    CASE(E_ARG, "net is NULL", pcnn_net_train_step, NULL, 1, g_x, g_lab, NULL, &o_flt);
    CASE(E_ARG, "batch of 0 samples: must be in [1, 4]", pcnn_net_train_step, net, 0, g_x,
         g_lab, NULL, &o_flt);
    CASE(E_ARG, "batch of -1 samples", pcnn_net_train_step, net, -1, g_x, g_lab, NULL, &o_flt);
    CASE(E_ARG, "batch of 5 samples: must be in [1, 4]", pcnn_net_train_step, net, 5, g_x,
         g_lab, NULL, &o_flt);
    CASE(E_ARG, "x is NULL", pcnn_net_train_step, net, 2, NULL, g_lab, NULL, &o_flt);
    CASE(E_ARG, "labels is NULL", pcnn_net_train_step, net, 2, g_x, NULL, g_t, &o_flt);
    CASE(E_ARG, "label 3 of sample 2 is outside [0, 3)", pcnn_net_train_step, net, 4, g_x,
         g_lab_high, NULL, &o_flt);
    CASE(E_ARG, "label -1 of sample 1 is outside [0, 3)", pcnn_net_train_step, net, 4, g_x,
         g_lab_neg, NULL, &o_flt);
    g_bad_x[100] = NAN;
    CASE(PCNN_ERR_NUMERIC, "input batch contains NaN or Inf", pcnn_net_train_step, net, 4,
         g_bad_x, g_lab, NULL, &o_flt);
    g_bad_x[100] = g_x[100];
    g_bad_x[SAMPLE - 1] = -INFINITY;
    CASE(PCNN_ERR_NUMERIC, "input batch contains NaN or Inf", pcnn_net_compute_gradients, net,
         1, g_bad_x, g_lab, NULL, &o_flt);
    CASE(PCNN_ERR_NUMERIC, "input batch contains NaN or Inf", pcnn_net_compute_loss, net, 1,
         g_bad_x, g_lab, NULL, &o_flt);
    CASE(E_ARG, "batch of 9 samples", pcnn_net_compute_gradients, net, 9, g_x, g_lab, NULL,
         &o_flt);
    CASE(E_ARG, "label 3 of sample 2", pcnn_net_compute_loss, net, 3, g_x, g_lab_high, NULL,
         &o_flt);
    CASE(E_ARG, "n = 0 must be >= 1", pcnn_net_predict, net, 0, g_x, o_buf, 4096);
    CASE(E_ARG, "x is NULL", pcnn_net_predict, net, 1, NULL, o_buf, 4096);
    CASE(E_ARG, "out is NULL", pcnn_net_predict, net, 1, g_x, NULL, 4096);
    CASE(E_SHAPE, "out holds 11 floats; 4 samples need 12", pcnn_net_predict, net, 4, g_x,
         o_buf, 11);
    /* Predict runs in chunks of max_batch: NaN in the second chunk must
     * fail before the first chunk's outputs are written. */
    static float x8[2 * MAXB * SAMPLE];
    memcpy(x8, g_x, sizeof x8);
    x8[(2 * MAXB - 1) * SAMPLE + 3] = NAN;
    CASE(PCNN_ERR_NUMERIC, "contain NaN or Inf", pcnn_net_predict, net, 2 * MAXB, x8, o_buf,
         4096);

    /* Counts and parameter copies. */
    size_t np = 0;
    OK(pcnn_net_num_params(net, &np));
    CASE(E_ARG, "count is NULL", pcnn_net_num_params, net, NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_num_params, NULL, &o_size);
    CASE(E_ARG, "count is NULL", pcnn_net_output_size, net, NULL);
    CASE(E_ARG, "bytes is NULL", pcnn_net_memory_bytes, net, NULL);
    CASE(E_SHAPE, "count 10 differs from the 187 parameters", pcnn_net_get_params, net, o_buf,
         10);
    CASE(E_SHAPE, "count 188 differs from the 187 parameters", pcnn_net_set_params, net, g_x,
         np + 1);
    CASE(E_SHAPE, "count 0 differs", pcnn_net_get_grads, net, o_buf, 0);
    CASE(E_ARG, "buf is NULL", pcnn_net_get_params, net, NULL, np);
    CASE(E_ARG, "buf is NULL", pcnn_net_set_params, net, NULL, np);
    CASE(E_ARG, "net is NULL", pcnn_net_get_grads, NULL, o_buf, np);
    CASE(E_SHAPE, "layer 1 (conv2d) has 76 parameters, count is 75", pcnn_layer_get_params,
         f.conv, o_buf, 75);
    CASE(E_SHAPE, "layer 2 (relu) has 0 parameters, count is 1", pcnn_layer_set_params, f.relu,
         g_x, 1);
    CASE(E_ARG, "layer is NULL", pcnn_layer_get_params, NULL, o_buf, 76);
    CASE(E_ARG, "buf is NULL", pcnn_layer_set_params, f.conv, NULL, 76);
    CASE(E_STATE, "call pcnn_net_compute_gradients first", pcnn_net_get_input_grad, net, o_buf,
         4096);
    float loss = 0;
    OK(pcnn_net_compute_gradients(net, 2, g_x, g_lab, NULL, &loss));
    CASE(E_SHAPE, "buf holds 143 floats; the input gradient has 144", pcnn_net_get_input_grad,
         net, o_buf, 2 * SAMPLE - 1);
    CASE(E_ARG, "buf is NULL", pcnn_net_get_input_grad, net, NULL, 2 * SAMPLE);

    /* Summary and timing. */
    CASE(E_ARG, "net is NULL", pcnn_net_summary, NULL, NULL, 0, &o_size);
    CASE(E_ARG, "buf is NULL but size is 10", pcnn_net_summary, net, NULL, 10, &o_size);
    CASE(E_ARG, "buf is NULL but size is 7", pcnn_net_timing_report, net, NULL, 7, &o_size);
    CASE(E_ARG, "layer -2: must be -1 (all) or in [0, 5)", pcnn_net_time, net, -2,
         PCNN_TIME_FORWARD, &o_dbl);
    CASE(E_ARG, "layer 5: must be -1 (all) or in [0, 5)", pcnn_net_time, net, 5,
         PCNN_TIME_FORWARD, &o_dbl);
    CASE(E_ARG, "unknown timing 9", pcnn_net_time, net, -1, (pcnn_time)9, &o_dbl);
    CASE(E_ARG, "unknown timing -1", pcnn_net_time, net, 1, (pcnn_time)-1, &o_dbl);
    CASE(E_ARG, "seconds_per_step is NULL", pcnn_net_time, net, 1, PCNN_TIME_COMM, NULL);
    CASE(E_ARG, "percent is NULL", pcnn_net_overlap_ratio, net, NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_reset_timing, NULL);
    CASE(E_STATE, "tracing is off", pcnn_net_write_trace, net, "/tmp/pcnn_never_written.json");
    CASE(E_STATE, "tracing is off", pcnn_net_write_trace_merged, net,
         "/tmp/pcnn_never_written.json");
    CASE(E_ARG, "bytes_per_step is NULL", pcnn_net_exchange_bytes, net, NULL);

    /* Datasets against the network. */
    pcnn_dataset *d_shape, *d_classes, *d_reg, *d_ok;
    OK(pcnn_dataset_create(2, 1, 6, 6, g_x, g_lab, NULL, 0, &d_shape));
    int32_t many[4] = {0, 1, 7, 2};
    OK(pcnn_dataset_create(4, 2, 6, 6, g_x, many, NULL, 0, &d_classes));
    OK(pcnn_dataset_create(4, 2, 6, 6, g_x, NULL, g_t, 3, &d_reg));
    OK(pcnn_dataset_create(4, 2, 6, 6, g_x, g_lab, NULL, 0, &d_ok));
    CASE(E_ARG, "data is NULL", pcnn_net_evaluate, net, NULL, &o_dbl, &o_dbl);
    CASE(E_SHAPE, "dataset samples are (1, 6, 6) but the network input is (2, 6, 6)",
         pcnn_net_evaluate, net, d_shape, &o_dbl, &o_dbl);
    CASE(E_SHAPE, "dataset has labels up to 7 but the network outputs 3 classes",
         pcnn_net_evaluate, net, d_classes, &o_dbl, &o_dbl);
    CASE(E_ARG, "cross entropy needs a dataset with labels", pcnn_net_train_epoch, net, d_reg, 2,
         &o_dbl);
    CASE(E_ARG, "batch 0 must be in [1, 4]", pcnn_net_train_epoch, net, d_ok, 0, &o_dbl);
    CASE(E_ARG, "batch 5 must be in [1, 4]", pcnn_net_train_epoch, net, d_ok, 5, &o_dbl);
    CASE(E_ARG, "net is NULL", pcnn_net_train_epoch, NULL, d_ok, 2, &o_dbl);
    CASE(E_SHAPE, "dataset samples are (1, 6, 6)", pcnn_net_train_epoch, net, d_shape, 2,
         &o_dbl);
    /* NaN in a dataset: the epoch stops at the step that meets it. */
    pcnn_dataset *d_nan;
    g_bad_x[100] = NAN;
    OK(pcnn_dataset_create(4, 2, 6, 6, g_bad_x, g_lab, NULL, 0, &d_nan));
    g_bad_x[100] = g_x[100];
    CASE(PCNN_ERR_NUMERIC, "input batch contains NaN or Inf", pcnn_net_train_epoch, net, d_nan,
         4, &o_dbl);
    pcnn_dataset_destroy(&d_nan);

    /* A regression network: targets. */
    fixture g = build(PCNN_LOSS_MSE, MAXB);
    CASE(E_ARG, "targets is NULL", pcnn_net_train_step, g.net, 2, g_x, g_lab, NULL, &o_flt);
    CASE(PCNN_ERR_NUMERIC, "targets contain NaN or Inf", pcnn_net_train_step, g.net, 2, g_x,
         NULL, g_bad_t, &o_flt);
    CASE(PCNN_ERR_NUMERIC, "targets contain NaN or Inf", pcnn_net_compute_loss, g.net, 2, g_x,
         NULL, g_bad_t, &o_flt);
    CASE(E_SHAPE, "the loss needs 3 targets per sample; the dataset has 0", pcnn_net_evaluate,
         g.net, d_ok, &o_dbl, NULL);
    pcnn_dataset *d_reg2;
    OK(pcnn_dataset_create(2, 2, 6, 6, g_x, NULL, g_t, 2, &d_reg2));
    CASE(E_SHAPE, "needs 3 targets per sample; the dataset has 2", pcnn_net_train_epoch, g.net,
         d_reg2, 2, &o_dbl);

    /* A network with tracing: an unwritable path. */
    fixture t = build(PCNN_LOSS_MSE, 0);
    OK(pcnn_net_set_option(t.net, PCNN_OPT_TRACE_EVENTS, 16));
    OK(pcnn_net_set_loss(t.net, t.dense, PCNN_LOSS_MSE));
    OK(pcnn_net_finalize(t.net, 2));
    CASE(E_ARG, "path is NULL", pcnn_net_write_trace, t.net, NULL);
    /* Found by the shared atomic-file writer, reported under the call. */
    CASE(PCNN_ERR_IO, "/nonexistent-dir/trace.json", pcnn_net_write_trace, t.net,
         "/nonexistent-dir/trace.json");
    /* Section 9: the callbacks and the merged trace (written locally by a
     * network without a communicator). */
    CASE(E_ARG, "net is NULL", pcnn_net_set_step_callback, NULL, NULL, NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_set_log_callback, NULL, NULL, NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_stopped_early, NULL, &o_int);
    CASE(E_ARG, "stopped is NULL", pcnn_net_stopped_early, t.net, NULL);
    CASE(E_ARG, "net is NULL", pcnn_net_write_trace_merged, NULL, "/tmp/pcnn_never_written.json");
    CASE(E_ARG, "path is NULL", pcnn_net_write_trace_merged, t.net, NULL);
    CASE(PCNN_ERR_IO, "/nonexistent-dir/trace.json", pcnn_net_write_trace_merged, t.net,
         "/nonexistent-dir/trace.json");

    pcnn_dataset_destroy(&d_shape);
    pcnn_dataset_destroy(&d_classes);
    pcnn_dataset_destroy(&d_reg);
    pcnn_dataset_destroy(&d_reg2);
    pcnn_dataset_destroy(&d_ok);
    OK(pcnn_net_destroy(&t.net));
    OK(pcnn_net_destroy(&g.net));
    OK(pcnn_net_destroy(&net));
}

/* Write `len` bytes to a fresh temporary file; returns its path. */
static const char *temp_file(char *path, const void *bytes, size_t len)
{
    /* No underscore: a random lower-case suffix would read as a "name: "
     * prefix to api_message_problem. */
    strcpy(path, "/tmp/pcnn-invalid-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, bytes, len) != (ssize_t)len) {
        fprintf(stderr, "cannot write a temporary file\n");
        exit(1);
    }
    close(fd);
    return path;
}

static void datasets(void)
{
    /* pcnn_dataset_create */
    CASE(E_ARG, "out is NULL", pcnn_dataset_create, 2, 1, 2, 2, g_x, g_lab, NULL, 0, NULL);
    CASE(E_ARG, "x is NULL", pcnn_dataset_create, 2, 1, 2, 2, NULL, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "n 0 < 1", pcnn_dataset_create, 0, 1, 2, 2, g_x, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "n -4 < 1", pcnn_dataset_create, -4, 1, 2, 2, g_x, g_lab, NULL, 0, &o_data);
    CASE(E_ARG, "sample shape (1, 0, 2)", pcnn_dataset_create, 2, 1, 0, 2, g_x, g_lab, NULL, 0,
         &o_data);
    CASE(E_ARG, "(got both)", pcnn_dataset_create, 2, 1, 2, 2, g_x, g_lab, g_t, 3, &o_data);
    CASE(E_ARG, "(got neither)", pcnn_dataset_create, 2, 1, 2, 2, g_x, NULL, NULL, 0, &o_data);
    CASE(E_ARG, "target_count 3 must be 0 with labels", pcnn_dataset_create, 2, 1, 2, 2, g_x,
         g_lab, NULL, 3, &o_data);
    CASE(E_ARG, "label -1 of sample 1 < 0", pcnn_dataset_create, 2, 1, 2, 2, g_x, g_lab_neg,
         NULL, 0, &o_data);
    CASE(E_ARG, "target_count 0 < 1 with targets", pcnn_dataset_create, 2, 1, 2, 2, g_x, NULL,
         g_t, 0, &o_data);
    CASE(E_ARG, "(65536, 65536, 2) exceeds INT_MAX floats", pcnn_dataset_create, 1, 65536,
         65536, 2, g_x, g_lab, NULL, 0, &o_data);

    /* Queries, shuffles and batches. */
    pcnn_dataset *d, *r;
    OK(pcnn_dataset_create(4, 2, 6, 6, g_x, g_lab, NULL, 0, &d));
    OK(pcnn_dataset_create(4, 2, 6, 6, g_x, NULL, g_t, 3, &r));
    CASE(E_ARG, "data is NULL", pcnn_dataset_info, NULL, &o_int, &o_int, &o_int, &o_int);
    CASE(E_ARG, "data is NULL", pcnn_dataset_shuffle, NULL, 1, 2);
    CASE(E_ARG, "data is NULL", pcnn_dataset_batch, NULL, 0, 1, o_buf, NULL, NULL);
    CASE(E_ARG, "x is NULL", pcnn_dataset_batch, d, 0, 1, NULL, NULL, NULL);
    CASE(E_ARG, "start -1 outside [0, 4)", pcnn_dataset_batch, d, -1, 1, o_buf, NULL, NULL);
    CASE(E_ARG, "start 4 outside [0, 4)", pcnn_dataset_batch, d, 4, 1, o_buf, NULL, NULL);
    CASE(E_ARG, "count 0 outside [1, 4]", pcnn_dataset_batch, d, 0, 0, o_buf, NULL, NULL);
    CASE(E_ARG, "count 3 outside [1, 2] (start 2 of 4 samples)", pcnn_dataset_batch, d, 2, 3,
         o_buf, NULL, NULL);
    CASE(E_ARG, "labels requested but the dataset holds regression targets", pcnn_dataset_batch,
         r, 0, 1, o_buf, (int32_t *)&o_int, NULL);
    CASE(E_ARG, "targets requested but the dataset holds class labels", pcnn_dataset_batch, d,
         0, 1, o_buf, NULL, o_buf);
    pcnn_dataset_destroy(&d);
    pcnn_dataset_destroy(&r);

    /* IDX files: paths, normalisation, missing and malformed files. */
    char images[64], labels[64], bad[64], short_labels[64];
    unsigned char img[16 + 2 * 4] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2};
    unsigned char lab[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 0};
    unsigned char lab3[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 0, 2};
    unsigned char junk[24] = {0x50, 0x4b, 3, 4};
    temp_file(images, img, sizeof img);
    temp_file(labels, lab, sizeof lab);
    temp_file(bad, junk, sizeof junk);
    temp_file(short_labels, lab3, sizeof lab3);
    pcnn_dataset *ok = NULL;
    OK(pcnn_dataset_load_idx(images, labels, 0.0f, 0.0f, &ok)); /* the files are valid */
    pcnn_dataset_destroy(&ok);
    CASE(E_ARG, "images_path is NULL", pcnn_dataset_load_idx, NULL, labels, 0, 0, &o_data);
    CASE(E_ARG, "labels_path is NULL", pcnn_dataset_load_idx, images, NULL, 0, 0, &o_data);
    CASE(E_ARG, "out is NULL", pcnn_dataset_load_idx, images, labels, 0, 0, NULL);
    CASE(E_ARG, "mean nan is not finite", pcnn_dataset_load_idx, images, labels, NAN, 1.0f, &o_data);
    CASE(E_ARG, "std -1 must be finite and >= 0", pcnn_dataset_load_idx, images, labels, 0.5f,
         -1.0f, &o_data);
    CASE(E_ARG, "std nan must be finite", pcnn_dataset_load_idx, images, labels, 0.5f, NAN,
         &o_data);
    CASE(E_ARG, "mean inf is not finite", pcnn_dataset_load_idx, images, labels, INFINITY, 1.0f,
         &o_data);
    CASE(PCNN_ERR_IO, "cannot open '/nonexistent/images.idx'", pcnn_dataset_load_idx,
         "/nonexistent/images.idx", labels, 0, 0, &o_data);
    CASE(PCNN_ERR_CORRUPT, "bad magic 0x504b0304, not an IDX file", pcnn_dataset_load_idx, bad,
         labels, 0, 0, &o_data);
    CASE(PCNN_ERR_CORRUPT, "count mismatch", pcnn_dataset_load_idx, images, short_labels, 0, 0,
         &o_data);
    /* The files swapped: a labels file where images are expected. */
    CASE(PCNN_ERR_CORRUPT, "1 dimensions, expected 3", pcnn_dataset_load_idx, labels, images,
         0, 0, &o_data);
    unlink(images);
    unlink(labels);
    unlink(bad);
    unlink(short_labels);
}

/* pcnn_dataset_open_volumes: *out stays untouched on every failure. */
static void volume_files(void)
{
    char manifest[64];
    temp_file(manifest, "# nothing\n", 10);
    CASE(E_ARG, "out is NULL", pcnn_dataset_open_volumes, manifest, 1, 2, 2, 2, PCNN_DTYPE_F32,
         1, NULL);
    CASE(E_ARG, "manifest is NULL", pcnn_dataset_open_volumes, NULL, 1, 2, 2, 2, PCNN_DTYPE_F32,
         1, &o_data);
    CASE(E_ARG, "sample shape (1, 0, 2, 2) has a dimension < 1", pcnn_dataset_open_volumes,
         manifest, 1, 0, 2, 2, PCNN_DTYPE_F32, 1, &o_data);
    CASE(E_ARG, "(4194304, 4194304, 1048576, 1) exceeds INT_MAX floats",
         pcnn_dataset_open_volumes, manifest, 4194304, 4194304, 1048576, 1, PCNN_DTYPE_F32, 1,
         &o_data);
    CASE(E_ARG, "dtype 9", pcnn_dataset_open_volumes, manifest, 1, 2, 2, 2, (pcnn_dtype)9, 1,
         &o_data);
    CASE(E_ARG, "target_count 0 < 1", pcnn_dataset_open_volumes, manifest, 1, 2, 2, 2,
         PCNN_DTYPE_F32, 0, &o_data);
    CASE(PCNN_ERR_IO, "cannot open the manifest /nonexistent/m.txt", pcnn_dataset_open_volumes,
         "/nonexistent/m.txt", 1, 2, 2, 2, PCNN_DTYPE_F32, 1, &o_data);
    CASE(PCNN_ERR_CORRUPT, "no sample", pcnn_dataset_open_volumes, manifest, 1, 2, 2, 2,
         PCNN_DTYPE_F32, 1, &o_data);
    unlink(manifest);
}

/* The performance model (pcnn.h section 9): NULL handles, NaN and negative
 * sizes, knobs out of range, and calls in the wrong state (no calibration,
 * no prediction, no measured step, another network's table). */
static void perfmodel_calls(void)
{
    pcnn_perfmodel *m, *empty;
    OK(pcnn_perfmodel_create(&m));
    OK(pcnn_perfmodel_create(&empty));
    fixture f = build(PCNN_LOSS_MSE, MAXB), open = build(PCNN_LOSS_MSE, 0);
    /* Another network: a dense layer on the same input. */
    fixture other;
    OK(pcnn_net_create(&other.net));
    OK(pcnn_net_input(other.net, 2, 6, 6, &other.in));
    OK(pcnn_dense(other.net, other.in, 3, 1, &other.dense));
    OK(pcnn_net_set_loss(other.net, other.dense, PCNN_LOSS_MSE));
    OK(pcnn_net_finalize(other.net, MAXB));
    double *wre = (double *)(void *)o_buf;
    char *text = (char *)o_buf;

    CASE(E_ARG, "out is NULL", pcnn_perfmodel_create, NULL);
    CASE(E_ARG, "out is NULL", pcnn_perfmodel_load, "/tmp/whatever.pcnnperf", NULL);
    CASE(E_ARG, "path is NULL", pcnn_perfmodel_load, NULL, &o_model);
    CASE(PCNN_ERR_IO, "/nonexistent-dir/m.pcnnperf", pcnn_perfmodel_load,
         "/nonexistent-dir/m.pcnnperf", &o_model);
    char junk_path[64];
    const char junk[64] = "PCNNPERX this is not a performance model";
    temp_file(junk_path, junk, sizeof junk);
    CASE(PCNN_ERR_CORRUPT, junk_path, pcnn_perfmodel_load, junk_path, &o_model);
    unlink(junk_path);
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_save, NULL, "/tmp/m.pcnnperf");
    CASE(E_ARG, "path is NULL", pcnn_perfmodel_save, m, NULL);
    CASE(PCNN_ERR_IO, "/nonexistent-dir/m.pcnnperf", pcnn_perfmodel_save, m,
         "/nonexistent-dir/m.pcnnperf");
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_share, NULL, NULL, 0);
    CASE(E_ARG, "comm is NULL", pcnn_perfmodel_share, m, NULL, 0);

    /* Calibration. */
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_calibrate_comm, NULL, NULL, 1.0);
    CASE(E_ARG, "comm is NULL", pcnn_perfmodel_calibrate_comm, m, NULL, 1.0);
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_calibrate_compute, NULL, f.net, 1.0);
    CASE(E_ARG, "net is NULL", pcnn_perfmodel_calibrate_compute, m, NULL, 1.0);
    CASE(E_ARG, "budget_seconds nan", pcnn_perfmodel_calibrate_compute, m, f.net, NAN);
    CASE(E_ARG, "budget_seconds -1", pcnn_perfmodel_calibrate_compute, m, f.net, -1.0);
    CASE(E_ARG, "budget_seconds inf", pcnn_perfmodel_calibrate_compute, m, f.net, INFINITY);
    CASE(E_STATE, "finalize", pcnn_perfmodel_calibrate_compute, m, open.net, 1.0);
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_fit_regressors, NULL, 1, 1.0, 1);
    CASE(E_ARG, "threads 0", pcnn_perfmodel_fit_regressors, m, 0, 1.0, 1);
    CASE(E_ARG, "threads -2", pcnn_perfmodel_fit_regressors, m, -2, 1.0, 1);
    CASE(E_ARG, "budget_seconds 0", pcnn_perfmodel_fit_regressors, m, 1, 0.0, 1);
    CASE(E_ARG, "budget_seconds nan", pcnn_perfmodel_fit_regressors, m, 1, NAN, 1);

    /* Knobs. */
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_set_param, NULL, PCNN_PERF_LINK_GBITS, 1);
    CASE(E_ARG, "value is NaN", pcnn_perfmodel_set_param, m, PCNN_PERF_LINK_GBITS, NAN);
    CASE(E_ARG, "link bandwidth -1 Gbit/s", pcnn_perfmodel_set_param, m, PCNN_PERF_LINK_GBITS,
         -1);
    CASE(E_ARG, "alpha -2 s", pcnn_perfmodel_set_param, m, PCNN_PERF_ALPHA_S, -2);
    CASE(E_ARG, "beta -1e-09 s/byte", pcnn_perfmodel_set_param, m, PCNN_PERF_BETA_S_PER_BYTE,
         -1e-9);
    CASE(E_ARG, "beta inf s/byte", pcnn_perfmodel_set_param, m, PCNN_PERF_BETA_S_PER_BYTE,
         INFINITY);
    CASE(E_ARG, "gamma 0 s/byte", pcnn_perfmodel_set_param, m, PCNN_PERF_GAMMA_S_PER_BYTE, 0);
    CASE(E_ARG, "strategy 7", pcnn_perfmodel_set_param, m, PCNN_PERF_STRATEGY, 7);
    CASE(E_ARG, "engine 3", pcnn_perfmodel_set_param, m, PCNN_PERF_ENGINE, 3);
    CASE(E_ARG, "nonblocking progress 1.5", pcnn_perfmodel_set_param, m,
         PCNN_PERF_NONBLOCKING_PROGRESS, 1.5);
    CASE(E_ARG, "compute source 0.5", pcnn_perfmodel_set_param, m, PCNN_PERF_COMPUTE_SOURCE,
         0.5);
    CASE(E_ARG, "unknown parameter 99", pcnn_perfmodel_set_param, m, (pcnn_perf_param)99, 1);
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_get_param, NULL, PCNN_PERF_ALPHA_S, &o_dbl);
    CASE(E_ARG, "value is NULL", pcnn_perfmodel_get_param, m, PCNN_PERF_ALPHA_S, NULL);
    CASE(E_ARG, "unknown parameter -1", pcnn_perfmodel_get_param, m, (pcnn_perf_param)-1,
         &o_dbl);

    /* Collectives. */
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_collective_time, NULL, PCNN_COLL_ALLREDUCE, 4,
         8, &o_dbl);
    CASE(E_ARG, "seconds is NULL", pcnn_perfmodel_collective_time, m, PCNN_COLL_ALLREDUCE, 4, 8,
         NULL);
    CASE(E_ARG, "unknown collective 4", pcnn_perfmodel_collective_time, m, (pcnn_collective)4,
         4, 8, &o_dbl);
    CASE(E_ARG, "ranks -3", pcnn_perfmodel_collective_time, m, PCNN_COLL_ALLGATHER, -3, 8,
         &o_dbl);
    CASE(E_ARG, "bytes -1", pcnn_perfmodel_collective_time, m, PCNN_COLL_ALLTOALL, 4, -1,
         &o_dbl);
    CASE(E_ARG, "bytes nan", pcnn_perfmodel_collective_time, m, PCNN_COLL_SENDRECV, 2, NAN,
         &o_dbl);
    CASE(E_ARG, "bytes inf", pcnn_perfmodel_collective_time, m, PCNN_COLL_SENDRECV, 2, INFINITY,
         &o_dbl);

    /* Predictions before and after a compute calibration. */
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_predict, NULL, f.net, 4, 1, 1, &o_dbl);
    CASE(E_ARG, "net is NULL", pcnn_perfmodel_predict, m, NULL, 4, 1, 1, &o_dbl);
    CASE(E_STATE, "finalize", pcnn_perfmodel_predict, m, open.net, 4, 1, 1, &o_dbl);
    CASE(E_STATE, "no compute calibration", pcnn_perfmodel_predict, m, f.net, 4, 1, 1, &o_dbl);
    CASE(E_STATE, "no prediction yet", pcnn_perfmodel_layer_time, m, -1, PCNN_TIME_STEP, &o_dbl);
    CASE(E_STATE, "no prediction yet", pcnn_perfmodel_validate, m, f.net, &o_dbl, wre, NULL, 0,
         &o_size);
    OK(pcnn_perfmodel_calibrate_compute(m, f.net, 0.05));
    CASE(E_ARG, "global_batch 0", pcnn_perfmodel_predict, m, f.net, 0, 1, 1, &o_dbl);
    CASE(E_ARG, "global_batch -8", pcnn_perfmodel_predict, m, f.net, -8, 1, 1, &o_dbl);
    CASE(E_ARG, "ranks 0", pcnn_perfmodel_predict, m, f.net, 4, 0, 1, &o_dbl);
    CASE(E_ARG, "ranks -4", pcnn_perfmodel_predict, m, f.net, 4, -4, 1, &o_dbl);
    CASE(E_ARG, "overlap 2", pcnn_perfmodel_predict, m, f.net, 4, 1, 2, &o_dbl);
    CASE(PCNN_ERR_MISMATCH, "another network", pcnn_perfmodel_predict, m, other.net, 4, 1, 1,
         &o_dbl);
    OK(pcnn_perfmodel_predict(m, f.net, MAXB, 1, 1, NULL));
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_layer_time, NULL, 0, PCNN_TIME_FORWARD, &o_dbl);
    CASE(E_ARG, "seconds is NULL", pcnn_perfmodel_layer_time, m, 0, PCNN_TIME_FORWARD, NULL);
    CASE(E_ARG, "layer 5: must be -1 (all) or in [0, 5)", pcnn_perfmodel_layer_time, m, 5,
         PCNN_TIME_FORWARD, &o_dbl);
    CASE(E_ARG, "layer -2", pcnn_perfmodel_layer_time, m, -2, PCNN_TIME_FORWARD, &o_dbl);
    CASE(E_ARG, "unknown timing 42", pcnn_perfmodel_layer_time, m, 0, (pcnn_time)42, &o_dbl);

    /* Validation: no measured step yet, then another network. */
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_validate, NULL, f.net, &o_dbl, wre, NULL, 0,
         &o_size);
    CASE(E_ARG, "buf is NULL but size is 64", pcnn_perfmodel_validate, m, f.net, &o_dbl, wre,
         NULL, 64, &o_size);
    CASE(E_ARG, "net is NULL", pcnn_perfmodel_validate, m, NULL, &o_dbl, wre, text, 64,
         &o_size);
    CASE(E_STATE, "no measured training step", pcnn_perfmodel_validate, m, f.net, &o_dbl, wre, text, 64, &o_size);
    OK(pcnn_net_train_step(f.net, MAXB, g_x, NULL, g_t, NULL));
    CASE(PCNN_ERR_MISMATCH, "another network", pcnn_perfmodel_validate, m, other.net, &o_dbl,
         wre, text, 64, &o_size);
    OK(pcnn_perfmodel_predict(m, f.net, 4 * MAXB, 4, 1, NULL));
    CASE(PCNN_ERR_MISMATCH, "was for 4 ranks; the network runs on 1", pcnn_perfmodel_validate,
         m, f.net, &o_dbl, wre, text, 64, &o_size);
    OK(pcnn_perfmodel_predict(m, f.net, MAXB, 1, 1, NULL));
    CASE(E_ARG, "model is NULL", pcnn_perfmodel_report, NULL, text, 64, &o_size);
    CASE(E_ARG, "buf is NULL but size is 8", pcnn_perfmodel_report, m, NULL, 8, &o_size);
    /* Attaching a model (PCNN_EXCHANGE_AUTO, the scheduler's re-plan), and
     * the exchange a layer takes. */
    pcnn_exchange kind;
    CASE(E_ARG, "net is NULL", pcnn_net_set_perfmodel, NULL, m);
    OK(pcnn_net_set_perfmodel(open.net, m));
    OK(pcnn_net_set_perfmodel(open.net, NULL));
    CASE(E_ARG, "unknown exchange 3", pcnn_layer_set_exchange, open.conv, PCNN_EXCHANGE_AUTO);
    CASE(E_ARG, "layer is NULL", pcnn_layer_get_exchange, NULL, &kind);
    CASE(E_ARG, "exchange is NULL", pcnn_layer_get_exchange, f.conv, NULL);
    CASE(E_STATE, "decided at pcnn_net_finalize", pcnn_layer_get_exchange, open.conv, &kind);
    CASE(E_ARG, "(relu) has no parameters", pcnn_layer_get_exchange, f.relu, &kind);
    OK(pcnn_layer_get_exchange(f.conv, &kind));
    /* A model calibrated on nothing cannot predict another network either. */
    CASE(E_STATE, "no compute calibration", pcnn_perfmodel_predict, empty, other.net, 4, 64, 0,
         &o_dbl);

    OK(pcnn_net_destroy(&f.net));
    OK(pcnn_net_destroy(&open.net));
    OK(pcnn_net_destroy(&other.net));
    OK(pcnn_perfmodel_destroy(&m));
    OK(pcnn_perfmodel_destroy(&empty));
}

/* Communicators before MPI is initialised: INVALID_STATE, not a crash. */
static void mpi_before_init(void)
{
    CASE(E_ARG, "out is NULL", pcnn_comm_create, MPI_COMM_WORLD, NULL);
    CASE(E_STATE, "MPI is not initialised", pcnn_comm_create, MPI_COMM_WORLD, &o_comm);
    CASE(E_STATE, "MPI is not initialised", pcnn_comm_create_fortran, 0, &o_comm);
    CASE(E_ARG, "out is NULL", pcnn_comm_create_world, NULL);
    CASE(E_ARG, "comm is NULL", pcnn_comm_info, NULL, &o_int, &o_int, &o_int);
}

static void mpi_initialised(void)
{
    CASE(E_ARG, "comm is MPI_COMM_NULL", pcnn_comm_create, MPI_COMM_NULL, &o_comm);
    CASE(E_ARG, "is not a valid communicator", pcnn_comm_create_fortran,
         MPI_Comm_c2f(MPI_COMM_NULL), &o_comm);
    /* Handles MPICH would assert on (built-in kind, no such built-in) or
     * read beyond its table for (direct kind): refused before MPI sees
     * them; with Open MPI, indices beyond its table. */
    const uint32_t bad_handles[] = {0x44000002u, 0x44000003u, 0x44000007u, 0x44ffffffu,
                                    0x45000000u, 0x84000008u, 0x84000023u, 0x84000025u,
                                    0x840000b5u, 0x840000c8u, 0x84000200u, 0x84ffffffu, 0xc4ffffffu};
    for (size_t i = 0; i < sizeof bad_handles / sizeof bad_handles[0]; i++)
        CASE(E_ARG, "is not a valid communicator", pcnn_comm_create_fortran,
             (MPI_Fint)bad_handles[i], &o_comm);
    pcnn_comm *comm;
    OK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    fixture f = build(PCNN_LOSS_MSE, 0);
    OK(pcnn_net_set_comm(f.net, comm));
    CASE(E_STATE, "1 network(s) still use this communicator", pcnn_comm_destroy, &comm);
    pcnn_perfmodel *m;
    OK(pcnn_perfmodel_create(&m));
    CASE(E_ARG, "budget_seconds -1", pcnn_perfmodel_calibrate_comm, m, comm, -1.0);
    CASE(E_ARG, "budget_seconds nan", pcnn_perfmodel_calibrate_comm, m, comm, NAN);
    OK(pcnn_perfmodel_destroy(&m));
    OK(pcnn_net_set_loss(f.net, f.dense, PCNN_LOSS_MSE));
    OK(pcnn_net_finalize(f.net, 2));
    CASE(E_STATE, "before finalize", pcnn_net_set_comm, f.net, comm);
    CASE(E_STATE, "1 network(s) still use this communicator", pcnn_comm_destroy, &comm);
    OK(pcnn_net_destroy(&f.net));
    OK(pcnn_comm_destroy(&comm));
}

static void mpi_finalised(void)
{
    CASE(E_STATE, "already finalised", pcnn_comm_create, MPI_COMM_WORLD, &o_comm);
    CASE(E_STATE, "already finalised", pcnn_comm_create_fortran, 0, &o_comm);
    CASE(E_STATE, "already finalised", pcnn_comm_create_world, &o_comm);
}

/* Calls that are not errors by contract: no-ops and never-failing queries. */
static int benign(void)
{
    int bad = 0;
    pcnn_net *nn = NULL;
    pcnn_dataset *nd = NULL;
    pcnn_comm *nc = NULL;
    pcnn_perfmodel *nm = NULL;
    bad += pcnn_net_destroy(NULL) != PCNN_OK || pcnn_net_destroy(&nn) != PCNN_OK;
    bad += pcnn_dataset_destroy(NULL) != PCNN_OK || pcnn_dataset_destroy(&nd) != PCNN_OK;
    bad += pcnn_comm_destroy(NULL) != PCNN_OK || pcnn_comm_destroy(&nc) != PCNN_OK;
    bad += pcnn_perfmodel_destroy(NULL) != PCNN_OK || pcnn_perfmodel_destroy(&nm) != PCNN_OK;
    bad += strcmp(pcnn_status_str((pcnn_status)99), "unknown status") != 0;
    bad += strcmp(pcnn_status_str((pcnn_status)-1), "unknown status") != 0;
    bad += pcnn_last_error() == NULL;
    bad += pcnn_version_number() != PCNN_VERSION_NUMBER || pcnn_version_string() == NULL;
    if (bad) fprintf(stderr, "FAIL %d no-op or query calls misbehaved\n", bad);
    return bad;
}

int main(void)
{
    make_data();
    mpi_before_init();
    fresh_and_building();
    volumes();
    finalized();
    datasets();
    volume_files();
    perfmodel_calls();
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    mpi_initialised();
    MPI_Finalize();
    mpi_finalised();
    failures += benign();
    printf("%d invalid calls tested, %d failed\n", cases, failures);
    return failures ? 1 : 0;
}
