/* Super-resolution with EDSR-mini: learn to turn 14x14 Fashion-MNIST images
 * (2x2 averages of the originals) back into the 28x28 originals.
 *
 * The network is the `edsr` model of the peer benchmarks (models.py, after
 * seed 001 section 5.4.1) with one channel instead of three: a 3x3 conv
 * head, residual blocks conv-relu-conv whose output is added back scaled by
 * 0.1 (pcnn_add_scaled), a conv to 4x the features, a pixel shuffle (x2),
 * and a 3x3 conv to the output; L1 loss and Adam, data parallel over the
 * ranks.  Rank 0 reports the PSNR on held-out test images against plain
 * bicubic, bilinear and nearest-neighbour upsampling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 edsr_superres [options]\n"
    "  --features N      feature maps (64, as models.py)\n"
    "  --blocks N        residual blocks (8, as models.py)\n"
    "  --train N         training images (3000 of 60000)\n"
    "  --test N          test images for the PSNR (1000 of 10000)\n"
    "  --epochs N        epochs (2)\n"
    "  --batch N         global batch (16)\n"
    "  --lr X            Adam learning rate (0.001)\n"
    "  --threads N       OpenMP threads per rank (0 = OMP_NUM_THREADS)\n"
    "  --seed N          seed (0)\n"
    "  --csv FILE        write the curves (loss and PSNR per epoch) as CSV\n"
    "  --plot FILE.png   draw them with examples/plot_curves.py (implies a CSV)\n"
    "  --data DIR        Fashion-MNIST IDX files (/usr/share/datasets/fashion-mnist)\n";

enum { HR = 28, LR = HR / 2 };
/* Pixels are centred on the Fashion-MNIST mean for training. */
static const float MEAN = 0.2860f;

static pcnn_layer *conv3(pcnn_net *net, pcnn_layer *in, int channels)
{
    pcnn_layer *l;
    EX_CHECK(pcnn_conv2d(net, in, channels, 3, 1, 1, 1, &l));
    return l;
}

static pcnn_net *build_edsr(pcnn_comm *comm, int features, int blocks, double lr, int batch,
                            int threads, int seed)
{
    pcnn_net *net;
    pcnn_layer *x, *y;
    EX_CHECK(pcnn_net_create(&net));
    EX_CHECK(pcnn_net_input(net, 1, LR, LR, &x));
    x = conv3(net, x, features);
    for (int b = 0; b < blocks; b++) { /* x + 0.1 * conv(relu(conv(x))) */
        EX_CHECK(pcnn_relu(net, conv3(net, x, features), &y));
        EX_CHECK(pcnn_add_scaled(net, x, conv3(net, y, features), 0.1f, &x));
    }
    EX_CHECK(pcnn_pixel_shuffle(net, conv3(net, x, 4 * features), 2, &x));
    x = conv3(net, x, 1);
    EX_CHECK(pcnn_net_set_loss(net, x, PCNN_LOSS_L1));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_comm(net, comm));
    ex_trace_enable(net, ex_trace_path(NULL)); /* PCNN_TRACE=FILE */
    EX_CHECK(pcnn_net_finalize(net, batch));
    return net;
}

/* Load `count` images as HR (pixels in [0, 1]) and their 2x2 averages. */
static void load_pairs(const char *dir, const char *images, const char *labels, int count,
                       float **hr, float **lr)
{
    char xp[1024], yp[1024];
    snprintf(xp, sizeof xp, "%s/%s", dir, images);
    snprintf(yp, sizeof yp, "%s/%s", dir, labels);
    pcnn_dataset *d;
    int n;
    EX_CHECK(pcnn_dataset_load_idx(xp, yp, 0.0f, 0.0f, &d)); /* std 0: keep [0, 1] */
    EX_CHECK(pcnn_dataset_info(d, &n, NULL, NULL, NULL));
    if (count < 1 || count > n) ex_fail("%s holds %d images; asked for %d", images, n, count);
    *hr = ex_alloc((size_t)count * HR * HR * sizeof(float));
    *lr = ex_alloc((size_t)count * LR * LR * sizeof(float));
    EX_CHECK(pcnn_dataset_batch(d, 0, count, *hr, NULL, NULL));
    EX_CHECK(pcnn_dataset_destroy(&d));
    for (int i = 0; i < count; i++) {
        const float *h = *hr + (size_t)i * HR * HR;
        float *l = *lr + (size_t)i * LR * LR;
        for (int y = 0; y < LR; y++)
            for (int x = 0; x < LR; x++)
                l[y * LR + x] = 0.25f * (h[2 * y * HR + 2 * x] + h[2 * y * HR + 2 * x + 1] +
                                         h[(2 * y + 1) * HR + 2 * x] +
                                         h[(2 * y + 1) * HR + 2 * x + 1]);
    }
}

static void shift(float *x, size_t count, float by)
{
    for (size_t i = 0; i < count; i++) x[i] += by;
}

/* PSNR in dB of one image against the original, pixels clipped to [0, 1]. */
static double psnr(const float *img, const float *ref, int count)
{
    double se = 0.0;
    for (int i = 0; i < count; i++) {
        double p = img[i] < 0 ? 0 : img[i] > 1 ? 1 : img[i], d = p - ref[i];
        se += d * d;
    }
    return se > 0 ? 10 * log10(count / se) : 99.0;
}

/* Cubic convolution weights for a sample at fraction t past the second of
 * four neighbours (Keys, a = -0.75, as PyTorch's bicubic). */
static void cubic_weights(float t, float w[4])
{
    const float a = -0.75f, d[4] = {1 + t, t, 1 - t, 2 - t};
    for (int i = 0; i < 4; i++) {
        float x = d[i];
        w[i] = x <= 1 ? ((a + 2) * x - (a + 3)) * x * x + 1
                      : ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    }
}

static int clampi(int i, int n)
{
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* 2x upsampling baselines of one LR image with half-pixel centres
 * (PyTorch's align_corners=False): 0 nearest, 1 bilinear, 2 bicubic. */
static void upsample(const float *lr, float *hr, int kind)
{
    for (int y = 0; y < HR; y++)
        for (int x = 0; x < HR; x++) {
            const float sy = (y + 0.5f) / 2 - 0.5f, sx = (x + 0.5f) / 2 - 0.5f;
            if (kind == 0) {
                hr[y * HR + x] = lr[(y / 2) * LR + x / 2];
            } else if (kind == 1) { /* edges clamped to the border pixel */
                const float cy = sy < 0 ? 0 : sy, cx = sx < 0 ? 0 : sx;
                const int y0 = (int)cy, x0 = (int)cx;
                const int y1 = clampi(y0 + 1, LR), x1 = clampi(x0 + 1, LR);
                const float fy = cy - y0, fx = cx - x0;
                hr[y * HR + x] =
                    (1 - fy) * ((1 - fx) * lr[y0 * LR + x0] + fx * lr[y0 * LR + x1]) +
                    fy * ((1 - fx) * lr[y1 * LR + x0] + fx * lr[y1 * LR + x1]);
            } else { /* 4x4 neighbourhood, indices clamped */
                const int y0 = (int)floorf(sy), x0 = (int)floorf(sx);
                float wy[4], wx[4], sum = 0;
                cubic_weights(sy - y0, wy);
                cubic_weights(sx - x0, wx);
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++)
                        sum += wy[i] * wx[j] *
                               lr[clampi(y0 - 1 + i, LR) * LR + clampi(x0 - 1 + j, LR)];
                hr[y * HR + x] = sum;
            }
        }
}

int main(int argc, char **argv)
{
    int provided;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    ex_args_init(argc, argv, usage);
    const int features = ex_arg_int("--features", 64), blocks = ex_arg_int("--blocks", 8);
    const int n_train = ex_arg_int("--train", 3000), n_test = ex_arg_int("--test", 1000);
    const int epochs = ex_arg_int("--epochs", 2), batch = ex_arg_int("--batch", 16);
    const double lr = ex_arg_double("--lr", 1e-3);
    const int threads = ex_arg_int("--threads", 0), seed = ex_arg_int("--seed", 0);
    const char *png = ex_arg_str("--plot", NULL), *csv = ex_arg_str("--csv", NULL);
    const char *dir = ex_arg_str("--data", "/usr/share/datasets/fashion-mnist");
    ex_args_done();
    if (batch < 1 || epochs < 0) ex_fail("--batch must be >= 1 and --epochs >= 0");
    char csv_default[1024];
    if (png && !csv) {
        snprintf(csv_default, sizeof csv_default, "%s.csv", png);
        csv = csv_default;
    }

    float *train_hr, *train_lr, *test_hr, *test_lr;
    load_pairs(dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", n_train,
               &train_hr, &train_lr);
    load_pairs(dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", n_test, &test_hr,
               &test_lr);
    /* The training set, centred: LR inputs, HR images as regression targets. */
    shift(train_lr, (size_t)n_train * LR * LR, -MEAN);
    shift(train_hr, (size_t)n_train * HR * HR, -MEAN);
    pcnn_dataset *train;
    EX_CHECK(pcnn_dataset_create(n_train, 1, LR, LR, train_lr, NULL, train_hr, HR * HR, &train));
    free(train_lr);
    free(train_hr);

    pcnn_comm *comm;
    int rank, ranks;
    EX_CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    EX_CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    pcnn_net *net = build_edsr(comm, features, blocks, lr, batch, threads, seed);
    if (rank == 0)
        printf("libpcnn %s: EDSR-mini x2 super-resolution of Fashion-MNIST (%dx%d -> %dx%d), "
               "%d features, %d residual blocks\n%d training images, %d test images, %d rank(s), "
               "global batch %d, Adam lr %g, L1 loss, progress engine: %s\n",
               pcnn_version_string(), LR, LR, HR, HR, features, blocks, n_train, n_test, ranks,
               batch, lr, ex_engine_name(net));
    ex_print_summary(net, rank);

    /* Baselines on the test images. */
    float *up = ex_alloc((size_t)n_test * HR * HR * sizeof(float));
    double base[3] = {0, 0, 0}; /* nearest, bilinear, bicubic */
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n_test; i++) {
            upsample(test_lr + (size_t)i * LR * LR, up, k);
            base[k] += psnr(up, test_hr + (size_t)i * HR * HR, HR * HR) / n_test;
        }
    if (rank == 0)
        printf("test PSNR of plain upsampling: nearest %.2f dB, bilinear %.2f dB, bicubic "
               "%.2f dB\n", base[0], base[1], base[2]);

    /* Rank r predicts its share of the test images; PSNRs are summed. */
    int first, mine = ex_share(n_test, ranks, rank, &first);
    float *in = ex_alloc((size_t)mine * LR * LR * sizeof(float));
    memcpy(in, test_lr + (size_t)first * LR * LR, (size_t)mine * LR * LR * sizeof(float));
    shift(in, (size_t)mine * LR * LR, -MEAN);

    const int share_max = (batch + ranks - 1) / ranks;
    float *x = ex_alloc((size_t)share_max * LR * LR * sizeof(float));
    float *y = ex_alloc((size_t)share_max * HR * HR * sizeof(float));
    FILE *curves = ex_csv_open(rank == 0 ? csv : NULL, "epoch,train_loss,test_psnr,epoch_seconds");
    const int steps = (n_train + batch - 1) / batch;
    double train_time = 0.0, model_psnr = 0.0;
    for (int epoch = 1; epoch <= epochs; epoch++) {
        EX_CHECK(pcnn_dataset_shuffle(train, (uint64_t)seed, (uint64_t)epoch));
        char label[32];
        snprintf(label, sizeof label, "epoch %d/%d", epoch, epochs);
        ex_progress p;
        ex_progress_start(&p, rank == 0, label, steps);
        double loss_sum = 0.0, t0 = ex_now();
        for (int s = 0; s < steps; s++) {
            const int start = s * batch, count = n_train - start < batch ? n_train - start : batch;
            int f, m = ex_share(count, ranks, rank, &f);
            if (m > 0) EX_CHECK(pcnn_dataset_batch(train, start + f, m, x, NULL, y));
            float loss;
            EX_CHECK(pcnn_net_train_step(net, m, m ? x : NULL, NULL, m ? y : NULL, &loss));
            loss_sum += (double)loss * count;
            ex_progress_update(&p, s + 1, loss_sum / (start + count));
        }
        const double seconds = ex_now() - t0;
        ex_progress_finish(&p);
        train_time += seconds;

        /* PSNR of the model on the test images (inference is local). */
        float *out = ex_alloc((size_t)(mine ? mine : 1) * HR * HR * sizeof(float));
        if (mine) EX_CHECK(pcnn_net_predict(net, mine, in, out, (size_t)mine * HR * HR));
        shift(out, (size_t)mine * HR * HR, MEAN);
        double sum = 0.0;
        for (int i = 0; i < mine; i++)
            sum += psnr(out + (size_t)i * HR * HR, test_hr + (size_t)(first + i) * HR * HR,
                        HR * HR);
        free(out);
        EX_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        model_psnr = sum / n_test;
        if (rank == 0) {
            printf("epoch %d/%d  train L1 %.4f  test PSNR %.2f dB (%+.2f dB over bicubic)  "
                   "%.1f s  %.0f images/s\n",
                   epoch, epochs, loss_sum / n_train, model_psnr, model_psnr - base[2],
                   seconds, n_train / seconds);
            fflush(stdout);
        }
        ex_csv_row(curves, "%d,%.6f,%.4f,%.3f", epoch, loss_sum / n_train, model_psnr, seconds);
    }
    ex_csv_close(&curves);
    if (rank == 0)
        printf("trained %d epochs in %.1f s; test PSNR %.2f dB vs bicubic %.2f, bilinear %.2f, "
               "nearest %.2f dB\n", epochs, train_time, model_psnr, base[2], base[1], base[0]);
    ex_print_timing(net, rank);
    ex_trace_write(net, ex_trace_path(NULL), rank);

    free(up), free(in), free(x), free(y), free(test_hr), free(test_lr);
    EX_CHECK(pcnn_net_destroy(&net));
    EX_CHECK(pcnn_comm_destroy(&comm));
    EX_CHECK(pcnn_dataset_destroy(&train));
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png) return ex_plot(csv, png);
    return 0;
}
