/* A U-Net surrogate of a simulation: learn the state of a 2D heat equation
 * --horizon time steps ahead from the current state, data parallel over the
 * ranks, and compare it on held-out states with persistence (predicting no
 * change, the baseline any surrogate must beat).
 *
 * The simulation is u_t = lap(u) on an N x N grid, zero outside it
 * (Dirichlet), explicit Euler with dt 0.2 and the five-point Laplacian.
 * Each sample starts from a few Gaussian blobs of random place, width and
 * sign, run a random number of steps (so that sharp and smooth states both
 * occur); the input is that state, the target the state --horizon steps
 * later.  Every rank generates the same samples (cheap) and trains on its
 * share of each global batch.
 *
 * The U-Net (pcnn.h section 9.5): two 3x3 convolutions per level, a
 * stride-2 convolution down, a transposed convolution (lower level) and a
 * nearest upsampling + 3x3 convolution (upper level) up, each joined to
 * the encoder's features of its size by concatenation, a 1x1 convolution
 * to one channel, added to the input (the network learns the change; its
 * output is still the next state).  MSE loss, Adam.
 *
 * Rank 0 prints per epoch the test MSE against persistence's.  The exit
 * status is 0 when the final test MSE is at least --min-gain times lower
 * than persistence's, 2 otherwise (the smoke test relies on it). */
#define PCNN_EXPERIMENTAL /* pcnn.h section 9.5: concat, conv_transpose2d, upsample2d */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 unet_surrogate [options]\n"
    "  --grid N          grid N x N, a multiple of 4 (32)\n"
    "  --horizon N       time steps predicted ahead (10)\n"
    "  --train N         training states (768)\n"
    "  --test N          held-out states (128)\n"
    "  --features N      channels of the first level; x2 per level down (16)\n"
    "  --epochs N        epochs (6)\n"
    "  --batch N         global batch (16)\n"
    "  --lr X            Adam learning rate (0.002)\n"
    "  --min-gain X      exit 2 unless persistence's MSE / test MSE >= X (5)\n"
    "  --threads N       OpenMP threads per rank (0 = OMP_NUM_THREADS)\n"
    "  --seed N          data and initialisation seed (0)\n"
    "  --csv FILE        write the curves (loss and MSEs per epoch) as CSV\n"
    "  --plot FILE.png   draw them with examples/plot_curves.py (implies a CSV)\n";

/* ---- the simulation ---------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* One explicit step of u_t = lap(u), dt 0.2 (stable below 0.25). */
static void heat_step(const double *u, double *v, int n)
{
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            const double c = u[y * n + x];
            const double up = y > 0 ? u[(y - 1) * n + x] : 0.0;
            const double down = y < n - 1 ? u[(y + 1) * n + x] : 0.0;
            const double left = x > 0 ? u[y * n + x - 1] : 0.0;
            const double right = x < n - 1 ? u[y * n + x + 1] : 0.0;
            v[y * n + x] = c + 0.2 * (up + down + left + right - 4.0 * c);
        }
}

/* Sample i: (state, state `horizon` steps later), as floats.  Depends only
 * on (seed, i), so every rank draws the same. */
static void make_sample(uint64_t seed, int i, int n, int horizon, double *a, double *b,
                        float *x, float *y)
{
    uint64_t r = (seed * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)i * 0xD1B54A32D192ED03ULL) ^ 1;
    for (int k = 0; k < 4; k++) rng_next(&r);
    for (int p = 0; p < n * n; p++) a[p] = 0.0;
    const int blobs = 3 + (int)(rng_uniform(&r) * 5);
    for (int k = 0; k < blobs; k++) {
        const double cy = rng_uniform(&r) * n, cx = rng_uniform(&r) * n;
        const double width = 1.0 + 3.0 * rng_uniform(&r), amp = 2.0 * rng_uniform(&r) - 1.0;
        for (int yy = 0; yy < n; yy++)
            for (int xx = 0; xx < n; xx++) {
                const double d2 = (yy - cy) * (yy - cy) + (xx - cx) * (xx - cx);
                a[yy * n + xx] += amp * exp(-d2 / (2.0 * width * width));
            }
    }
    const int warm = (int)(rng_uniform(&r) * 2 * horizon);
    for (int s = 0; s < warm; s++) {
        heat_step(a, b, n);
        memcpy(a, b, (size_t)n * n * sizeof *a);
    }
    for (int p = 0; p < n * n; p++) x[p] = (float)a[p];
    for (int s = 0; s < horizon; s++) {
        heat_step(a, b, n);
        memcpy(a, b, (size_t)n * n * sizeof *a);
    }
    for (int p = 0; p < n * n; p++) y[p] = (float)a[p];
}

static void make_set(uint64_t seed, int first, int count, int n, int horizon, float *x, float *y)
{
    double *a = ex_alloc((size_t)n * n * sizeof *a), *b = ex_alloc((size_t)n * n * sizeof *b);
    for (int i = 0; i < count; i++)
        make_sample(seed, first + i, n, horizon, a, b, x + (size_t)i * n * n,
                    y + (size_t)i * n * n);
    free(a);
    free(b);
}

/* ---- the U-Net ----------------------------------------------------------- */

static pcnn_layer *conv_relu(pcnn_net *net, pcnn_layer *in, int channels, int stride)
{
    pcnn_layer *c, *r;
    EX_CHECK(pcnn_conv2d(net, in, channels, 3, stride, 1, 1, &c));
    EX_CHECK(pcnn_relu(net, c, &r));
    return r;
}

static pcnn_net *build_unet(pcnn_comm *comm, int n, int f, double lr, int batch, int threads,
                            int seed)
{
    pcnn_net *net;
    pcnn_layer *x, *e1, *e2, *mid, *up, *cat[2], *d, *out, *next;
    EX_CHECK(pcnn_net_create(&net));
    EX_CHECK(pcnn_net_input(net, 1, n, n, &x));
    e1 = conv_relu(net, conv_relu(net, x, f, 1), f, 1);                     /* f x N */
    e2 = conv_relu(net, conv_relu(net, e1, 2 * f, 2), 2 * f, 1);            /* 2f x N/2 */
    mid = conv_relu(net, conv_relu(net, e2, 4 * f, 2), 4 * f, 1);           /* 4f x N/4 */
    EX_CHECK(pcnn_conv_transpose2d(net, mid, 2 * f, 2, 2, 0, 0, 1, &up));   /* 2f x N/2 */
    cat[0] = up, cat[1] = e2;
    EX_CHECK(pcnn_concat(net, cat, 2, &d));
    d = conv_relu(net, d, 2 * f, 1);
    EX_CHECK(pcnn_upsample2d(net, d, 2, PCNN_UPSAMPLE_NEAREST, &up));       /* 2f x N */
    cat[0] = conv_relu(net, up, f, 1), cat[1] = e1;
    EX_CHECK(pcnn_concat(net, cat, 2, &d));
    d = conv_relu(net, d, f, 1);
    EX_CHECK(pcnn_conv2d(net, d, 1, 1, 1, 0, 1, &out));
    EX_CHECK(pcnn_add(net, x, out, &next)); /* next state = current + learned change */
    EX_CHECK(pcnn_net_set_loss(net, next, PCNN_LOSS_MSE));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_comm(net, comm));
    ex_trace_enable(net, ex_trace_path(NULL)); /* PCNN_TRACE=FILE */
    EX_CHECK(pcnn_net_finalize(net, batch));
    return net;
}

/* Sum over [a, a + count) of squared differences. */
static double sum_sq(const float *a, const float *b, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return s;
}

int main(int argc, char **argv)
{
    int provided;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    ex_args_init(argc, argv, usage);
    const int n = ex_arg_int("--grid", 32), horizon = ex_arg_int("--horizon", 10);
    const int n_train = ex_arg_int("--train", 768), n_test = ex_arg_int("--test", 128);
    const int features = ex_arg_int("--features", 16), epochs = ex_arg_int("--epochs", 6);
    const int batch = ex_arg_int("--batch", 16);
    const double lr = ex_arg_double("--lr", 2e-3), min_gain = ex_arg_double("--min-gain", 5.0);
    const int threads = ex_arg_int("--threads", 0), seed = ex_arg_int("--seed", 0);
    const char *png = ex_arg_str("--plot", NULL), *csv = ex_arg_str("--csv", NULL);
    ex_args_done();
    if (n < 4 || n % 4) ex_fail("--grid must be a positive multiple of 4 (two levels down)");
    if (horizon < 1 || n_train < 1 || n_test < 1 || features < 1 || batch < 1 || epochs < 0)
        ex_fail("--horizon, --train, --test, --features and --batch must be >= 1, --epochs >= 0");
    char csv_default[1024];
    if (png && !csv) {
        snprintf(csv_default, sizeof csv_default, "%s.csv", png);
        csv = csv_default;
    }
    const size_t cells = (size_t)n * n;

    /* Training states from samples [0, n_train), held-out ones after. */
    float *train_x = ex_alloc(n_train * cells * sizeof(float));
    float *train_y = ex_alloc(n_train * cells * sizeof(float));
    float *test_x = ex_alloc(n_test * cells * sizeof(float));
    float *test_y = ex_alloc(n_test * cells * sizeof(float));
    const double t_data = ex_now();
    make_set((uint64_t)seed, 0, n_train, n, horizon, train_x, train_y);
    make_set((uint64_t)seed, n_train, n_test, n, horizon, test_x, test_y);
    pcnn_dataset *train;
    EX_CHECK(pcnn_dataset_create(n_train, 1, n, n, train_x, NULL, train_y, (int)cells, &train));
    free(train_x);
    free(train_y);
    const double persistence = sum_sq(test_x, test_y, n_test * cells) / (n_test * cells);

    pcnn_comm *comm;
    int rank, ranks;
    EX_CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    EX_CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    pcnn_net *net = build_unet(comm, n, features, lr, batch, threads, seed);
    if (rank == 0)
        printf("libpcnn %s: U-Net surrogate of the 2D heat equation on %dx%d, %d steps ahead\n"
               "%d training and %d held-out states (%.1f s to simulate), %d rank(s), "
               "global batch %d, Adam lr %g, MSE loss, progress engine: %s\n"
               "persistence (predict no change): test MSE %.3e\n",
               pcnn_version_string(), n, n, horizon, n_train, n_test, ex_now() - t_data, ranks,
               batch, lr, ex_engine_name(net), persistence);
    ex_print_summary(net, rank);

    /* Rank r predicts its share of the held-out states; errors are summed. */
    int first, mine = ex_share(n_test, ranks, rank, &first);
    float *out = ex_alloc((mine ? mine : 1) * cells * sizeof(float));
    const int share_max = (batch + ranks - 1) / ranks;
    float *x = ex_alloc(share_max * cells * sizeof(float));
    float *y = ex_alloc(share_max * cells * sizeof(float));
    FILE *curves =
        ex_csv_open(rank == 0 ? csv : NULL, "epoch,train_loss,test_mse,persistence_mse,gain");
    const int steps = (n_train + batch - 1) / batch;
    double train_time = 0.0, mse = persistence;
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

        double sum = 0.0;
        if (mine) {
            EX_CHECK(pcnn_net_predict(net, mine, test_x + first * cells, out, mine * cells));
            sum = sum_sq(out, test_y + first * cells, mine * cells);
        }
        EX_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        mse = sum / (n_test * cells);
        if (rank == 0) {
            printf("epoch %d/%d  train MSE %.3e  test MSE %.3e  persistence %.3e  "
                   "(%.1fx better)  %.1f s  %.0f states/s\n",
                   epoch, epochs, loss_sum / n_train, mse, persistence, persistence / mse,
                   seconds, n_train / seconds);
            fflush(stdout);
        }
        ex_csv_row(curves, "%d,%.6e,%.6e,%.6e,%.3f", epoch, loss_sum / n_train, mse,
                   persistence, persistence / mse);
    }
    ex_csv_close(&curves);
    const int beats = mse * min_gain <= persistence;
    if (rank == 0)
        printf("trained %d epochs in %.1f s; test MSE %.3e vs persistence %.3e: %.1fx better "
               "(%s the %.1fx asked)\n", epochs, train_time, mse, persistence, persistence / mse,
               beats ? "meets" : "FAILS", min_gain);
    ex_print_timing(net, rank);
    ex_trace_write(net, ex_trace_path(NULL), rank);

    free(out), free(x), free(y), free(test_x), free(test_y);
    EX_CHECK(pcnn_net_destroy(&net));
    EX_CHECK(pcnn_comm_destroy(&comm));
    EX_CHECK(pcnn_dataset_destroy(&train));
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png && ex_plot(csv, png)) return 1;
    return beats ? 0 : 2;
}
