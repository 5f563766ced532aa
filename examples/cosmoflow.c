/* CosmoFlow (seed 003, Oyama et al., Table 2): regress the parameters of a
 * universe from a 4-channel W^3 volume, reading the volumes from files.
 *
 * 1. A synthetic-universe generator writes training and test sets: each
 *    universe is a Gaussian random field whose power spectrum is set by
 *    its parameters t in [-1, 1]^4 (amplitude, spectral slope, small-scale
 *    cutoff, and the growth between the 4 channels, which stand for 4
 *    redshifts), one .npy file per universe plus a manifest
 *    "<file> <t_1> ... <t_4>" (WAVE2_SPEC B.4).
 * 2. The network of Table 2 for any W: seven 3^3 "same" convolutions
 *    without bias (conv4 stride 2), leaky ReLU after each, 3^3 stride-2
 *    average pooling after conv_i while its output is larger than 2^3
 *    (pool1-5 at W = 128, plus pool6 at 256 and pool7 at 512: fc1 then
 *    always sees 256 x 2^3), dropout 0.2 before each of fc1 (2048), fc2
 *    (256) and fc3 (4 outputs), MSE, Adam 0.9/0.999/1e-8.
 * 3. Data-parallel training straight from the files (box reads of whole
 *    samples, the next batches read ahead on a helper thread), the test
 *    MSE per epoch against the variance of the targets, the timing
 *    breakdown, and a CSV of predicted against true parameters.
 * 4. Or, with --spatial, every universe split across the ranks (seed 003
 *    section 4: spatial or hybrid parallelism): each rank reads only its
 *    box of each volume from the files and trains with
 *    pcnn_net_train_step_local; the convolutions exchange halos, the
 *    layers too small to split gather onto fewer ranks, and the FC head
 *    takes whole samples; the breakdown adds halo and shuffle time. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PCNN_EXPERIMENTAL /* 3D layers and file-backed volumes: section 9 */
#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 cosmoflow [options]\n"
    "  --width W         volume side: samples are 4 x W^3 (32; 128 is the paper's smallest)\n"
    "  --train N         training universes (256)\n"
    "  --test N          test universes (64)\n"
    "  --epochs N        epochs (6)\n"
    "  --batch N         global batch (8)\n"
    "  --lr X            Adam learning rate (0.0005)\n"
    "  --slope X         leaky ReLU slope (0.01)\n"
    "  --dropout P       dropout before each FC layer (0.2)\n"
    "  --channels-scale K divide every conv's channel count by K (1: Table 2)\n"
    "  --prefetch N      batches read ahead on a helper thread (2; 0 = off)\n"
    "  --data DIR        where the universes and manifests go (cosmoflow_data)\n"
    "  --reuse           keep the universes already in DIR if their manifests exist\n"
    "  --f64             write float64 files (converted to float32 when read)\n"
    "  --threads N       OpenMP threads per rank (0 = OMP_NUM_THREADS)\n"
    "  --seed N          seed (0)\n"
    "  --csv FILE        write the curves (train loss and test MSE per epoch)\n"
    "  --plot FILE.png   draw them with examples/plot_curves.py (implies a CSV)\n"
    "  --predictions F   write true and predicted parameters of the test set as CSV\n"
    "  --spatial DIMS    split every universe along DIMS (letters of D, H, W, e.g. D or DH):\n"
    "                    the ranks of a group go 2 per letter, the last letter the rest\n"
    "  --groups G        with --spatial: G sample groups sharing each batch (1)\n"
    "  --hdf5-train P    read the training universes from HDF5 files P (a glob pattern or\n"
    "                    one file) in the published layout: 'full' 4 channels-last counts,\n"
    "                    'unitPar' the 4 parameters (cosmoflow.py --hdf5 --generate-only\n"
    "                    writes DIR/train/*.h5 and DIR/test/*.h5); needs --hdf5-test\n"
    "  --hdf5-test P     the test universes, as --hdf5-train\n"
    "  --hdf5-shift X    samples are log(1 + counts) + X, applied on reading (-2: the\n"
    "                    shift cosmoflow.py --hdf5 puts into its counts)\n";

enum { CHANNELS = 4, PARAMS = 4 };

/* ---- the synthetic universes -------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0; }

static double gaussian(uint64_t *s)
{
    return sqrt(-2.0 * log(uniform(s))) * cos(6.283185307179586 * uniform(s));
}

/* In-place radix-2 FFT of n complex values (re, im) with the given stride;
 * sign -1 forward, +1 inverse (unnormalised). */
static void fft1(double *re, double *im, int n, size_t stride, int sign)
{
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i * stride];
            re[i * stride] = re[j * stride];
            re[j * stride] = t;
            t = im[i * stride];
            im[i * stride] = im[j * stride];
            im[j * stride] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        const double a = sign * 6.283185307179586 / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                const double wr = cos(a * k), wi = sin(a * k);
                const size_t p = (size_t)(i + k) * stride, q = (size_t)(i + k + len / 2) * stride;
                const double xr = re[q] * wr - im[q] * wi, xi = re[q] * wi + im[q] * wr;
                re[q] = re[p] - xr;
                im[q] = im[p] - xi;
                re[p] += xr;
                im[p] += xi;
            }
    }
}

/* 3D FFT of a W^3 grid, along each axis in turn. */
static void fft3(double *re, double *im, int w, int sign)
{
    const size_t n = (size_t)w;
    for (size_t a = 0; a < n * n; a++) fft1(re + a * n, im + a * n, w, 1, sign); /* x */
    for (size_t z = 0; z < n; z++)
        for (size_t x = 0; x < n; x++)
            fft1(re + z * n * n + x, im + z * n * n + x, w, n, sign); /* y */
    for (size_t a = 0; a < n * n; a++) fft1(re + a, im + a, w, n * n, sign); /* z */
}

/* One universe of parameters t: a Gaussian random field with power
 * spectrum P(k) = A k^-(1.5 + t2) exp(-(k / kc)^2), A = exp(t1) (the field's
 * variance), kc = W/8 * 2^t3, normalised so that only A sets the variance;
 * channel c is the field times g^c with g = exp(0.25 t4) (growth between
 * redshifts).  re/im: W^3 scratch each; out: 4 x W^3. */
static void make_universe(const double t[PARAMS], int w, uint64_t seed, double *re, double *im,
                          float *out)
{
    const size_t n = (size_t)w * w * w;
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        re[i] = gaussian(&s);
        im[i] = 0.0;
    }
    fft3(re, im, w, -1);
    const double slope = 1.5 + t[1], kc = w / 8.0 * pow(2.0, t[2]);
    double total = 0.0;
    for (int z = 0; z < w; z++)
        for (int y = 0; y < w; y++)
            for (int x = 0; x < w; x++) {
                const int kz = z <= w / 2 ? z : z - w, ky = y <= w / 2 ? y : y - w,
                          kx = x <= w / 2 ? x : x - w;
                const double kk = sqrt((double)kx * kx + (double)ky * ky + (double)kz * kz);
                const double p = kk == 0 ? 0.0 : pow(kk, -slope) * exp(-(kk / kc) * (kk / kc));
                const size_t i = ((size_t)z * w + y) * w + x;
                re[i] *= sqrt(p);
                im[i] *= sqrt(p);
                total += p;
            }
    fft3(re, im, w, +1);
    /* White noise of unit variance filtered by sqrt(P): variance mean(P)
     * after the 1/n of the inverse transform. */
    const double scale = sqrt(exp(t[0]) / (total / (double)n)) / (double)n;
    const double g = exp(0.25 * t[3]);
    for (int c = 0; c < CHANNELS; c++) {
        const double f = scale * pow(g, c);
        for (size_t i = 0; i < n; i++) out[(size_t)c * n + i] = (float)(re[i] * f);
    }
}

/* A .npy file of a C-order (4, W, W, W) array, float32 or float64. */
static void write_npy(const char *path, const float *x, int w, int f64)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                       "'shape': (%d, %d, %d, %d), }", f64 ? "<f8" : "<f4", CHANNELS, w, w, w);
    const int total = (10 + len + 1 + 63) / 64 * 64, hlen = total - 10;
    unsigned char head[128];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)len);
    memset(head + 10 + len, ' ', (size_t)(total - 10 - len - 1));
    head[total - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) ex_fail("cannot create %s", path);
    const size_t n = (size_t)CHANNELS * w * w * w;
    int ok = fwrite(head, 1, (size_t)total, f) == (size_t)total;
    if (f64) {
        for (size_t i = 0; i < n && ok; i++) {
            double v = x[i];
            ok = fwrite(&v, 8, 1, f) == 1;
        }
    } else {
        ok = ok && fwrite(x, sizeof *x, n, f) == n;
    }
    if (fclose(f) != 0 || !ok) ex_fail("cannot write %s", path);
}

static void draw_targets(uint64_t seed, int index, double t[PARAMS])
{
    uint64_t s = seed * 0x100000001b3ull + (uint64_t)index * 7919u + 17u;
    for (int k = 0; k < PARAMS; k++) t[k] = 2.0 * uniform(&s) - 1.0;
}

/* Universes [0, train) go to train.txt, [train, train + test) to
 * test.txt; rank r writes those with index % ranks == r, rank 0 the
 * manifests. */
static void generate(const char *dir, int w, int train, int test, int f64, uint64_t seed,
                     int rank, int ranks)
{
    const size_t n = (size_t)w * w * w;
    double *re = ex_alloc(n * sizeof *re), *im = ex_alloc(n * sizeof *im);
    float *x = ex_alloc(CHANNELS * n * sizeof *x);
    char path[1200];
    for (int i = rank; i < train + test; i += ranks) {
        double t[PARAMS];
        draw_targets(seed, i, t);
        make_universe(t, w, seed * 1000003u + (uint64_t)i, re, im, x);
        snprintf(path, sizeof path, "%s/universe_%05d.npy", dir, i);
        write_npy(path, x, w, f64);
    }
    free(re);
    free(im);
    free(x);
    if (rank != 0) return;
    for (int part = 0; part < 2; part++) {
        snprintf(path, sizeof path, "%s/%s.txt", dir, part ? "test" : "train");
        FILE *m = fopen(path, "w");
        if (!m) ex_fail("cannot create %s", path);
        fprintf(m, "# synthetic universes: 4 x %d^3 %s; amplitude slope cutoff growth\n", w,
                f64 ? "float64" : "float32");
        const int lo = part ? train : 0, hi = part ? train + test : train;
        for (int i = lo; i < hi; i++) {
            double t[PARAMS];
            draw_targets(seed, i, t);
            fprintf(m, "universe_%05d.npy %.7f %.7f %.7f %.7f\n", i, t[0], t[1], t[2], t[3]);
        }
        if (fclose(m) != 0) ex_fail("cannot write %s", path);
    }
}

/* ---- the network of Table 2 --------------------------------------------- */

static pcnn_layer *conv(pcnn_net *net, pcnn_layer *in, int out, int stride, float slope)
{
    pcnn_layer *c, *r;
    EX_CHECK(pcnn_conv3d(net, in, out, 3, stride, 1, 0, &c));
    EX_CHECK(pcnn_leaky_relu(net, c, slope, &r));
    return r;
}

/* Pool after a conv while its output is larger than 2^3 (B.2's rule that
 * keeps fc1 at 256 x 2^3 for every W). */
static pcnn_layer *maybe_pool(pcnn_net *net, pcnn_layer *in)
{
    int d;
    EX_CHECK(pcnn_layer_output_shape3d(in, NULL, &d, NULL, NULL));
    if (d <= 2) return in;
    pcnn_layer *p;
    EX_CHECK(pcnn_avgpool3d(net, in, 3, 2, 1, &p));
    return p;
}

static pcnn_layer *fc(pcnn_net *net, pcnn_layer *in, int out, float dropout, float slope,
                      int activation)
{
    pcnn_layer *l;
    EX_CHECK(pcnn_dropout(net, in, dropout, &l));
    EX_CHECK(pcnn_dense(net, l, out, 1, &l));
    if (activation) EX_CHECK(pcnn_leaky_relu(net, l, slope, &l));
    return l;
}

/* parts[4] of --spatial DIMS and --groups G over `ranks`; 0 when they do
 * not divide the ranks (parts[0] = 0: no spatial distribution asked). */
static int spatial_parts(const char *dims, int groups, int ranks, int parts[4])
{
    parts[0] = 0;
    parts[1] = parts[2] = parts[3] = 1;
    if (!dims) return 1;
    const int len = (int)strlen(dims);
    if (len < 1 || len > 3 || groups < 1 || ranks % groups != 0) return 0;
    int left = ranks / groups;
    for (int i = 0; i < len; i++) {
        const char *at = strchr("DHW", toupper((unsigned char)dims[i]));
        if (!at || *at == '\0' || parts[1 + (at - "DHW")] != 1) return 0;
        const int share = i + 1 < len ? 2 : left;
        if (left % share != 0) return 0;
        parts[1 + (at - "DHW")] = share;
        left /= share;
    }
    parts[0] = groups;
    return 1;
}

static pcnn_net *build_cosmoflow(pcnn_comm *comm, int w, int scale, float slope, float dropout,
                                 double lr, int batch, int threads, int seed, const int *parts,
                                 pcnn_layer **input)
{
    static const int channels[7] = {16, 32, 64, 128, 256, 256, 256};
    pcnn_net *net;
    pcnn_layer *x;
    EX_CHECK(pcnn_net_create(&net));
    EX_CHECK(pcnn_net_input3d(net, CHANNELS, w, w, w, &x));
    *input = x;
    for (int i = 0; i < 7; i++) {
        int out = channels[i] / scale;
        x = conv(net, x, out < 1 ? 1 : out, i == 3 ? 2 : 1, slope);
        x = maybe_pool(net, x);
    }
    EX_CHECK(pcnn_flatten(net, x, &x));
    x = fc(net, x, 2048 / scale, dropout, slope, 1);
    x = fc(net, x, 256 / scale, dropout, slope, 1);
    x = fc(net, x, PARAMS, dropout, slope, 0);
    EX_CHECK(pcnn_net_set_loss(net, x, PCNN_LOSS_MSE));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_ADAM_BETA1, 0.9));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_ADAM_BETA2, 0.999));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_ADAM_EPSILON, 1e-8));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_comm(net, comm));
    if (parts[0] > 0) {
        EX_CHECK(pcnn_net_set_distribution(net, parts));
        /* The deep layers (2^3 and less) gather onto fewer ranks. */
        EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SPATIAL_FALLBACK, 1));
    }
    EX_CHECK(pcnn_net_finalize(net, batch));
    return net;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

int main(int argc, char **argv)
{
    int provided;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    ex_args_init(argc, argv, usage);
    const int w = ex_arg_int("--width", 32), n_train = ex_arg_int("--train", 256);
    const int n_test = ex_arg_int("--test", 64), epochs = ex_arg_int("--epochs", 6);
    const int batch = ex_arg_int("--batch", 8), scale = ex_arg_int("--channels-scale", 1);
    const double lr = ex_arg_double("--lr", 5e-4);
    const float slope = (float)ex_arg_double("--slope", 0.01);
    const float dropout = (float)ex_arg_double("--dropout", 0.2);
    const int prefetch = ex_arg_int("--prefetch", 2), reuse = ex_arg_flag("--reuse");
    const int f64 = ex_arg_flag("--f64");
    const int threads = ex_arg_int("--threads", 0), seed = ex_arg_int("--seed", 0);
    const char *dir = ex_arg_str("--data", "cosmoflow_data");
    const char *png = ex_arg_str("--plot", NULL), *csv = ex_arg_str("--csv", NULL);
    const char *pred_csv = ex_arg_str("--predictions", NULL);
    const char *spatial = ex_arg_str("--spatial", NULL);
    const int groups = ex_arg_int("--groups", 1);
    const char *h5_train = ex_arg_str("--hdf5-train", NULL);
    const char *h5_test = ex_arg_str("--hdf5-test", NULL);
    const float h5_shift = (float)ex_arg_double("--hdf5-shift", -2.0);
    ex_args_done();
    if (!h5_train != !h5_test) ex_fail("--hdf5-train and --hdf5-test go together");
    if (w < 8 || (w & (w - 1))) ex_fail("--width must be a power of two >= 8");
    if (n_train < 1 || n_test < 1 || batch < 1 || epochs < 0 || scale < 1)
        ex_fail("--train, --test, --batch and --channels-scale must be >= 1, --epochs >= 0");
    char csv_default[1024];
    if (png && !csv) {
        snprintf(csv_default, sizeof csv_default, "%s.csv", png);
        csv = csv_default;
    }

    pcnn_comm *comm;
    int rank, ranks;
    EX_CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    EX_CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    int parts[4];
    if (!spatial_parts(spatial, groups, ranks, parts))
        ex_fail("--spatial %s with --groups %d does not divide %d ranks (letters of DHW, each "
                "once; 2 ranks per letter but the last)", spatial ? spatial : "", groups, ranks);

    /* 1. The universes, written by all ranks. */
    char train_manifest[1100], test_manifest[1100];
    snprintf(train_manifest, sizeof train_manifest, "%s/train.txt", dir);
    snprintf(test_manifest, sizeof test_manifest, "%s/test.txt", dir);
    const int have = h5_train || (reuse && file_exists(train_manifest) &&
                                  file_exists(test_manifest));
    double t0 = ex_now();
    if (!have) {
        if (rank == 0 && mkdir(dir, 0777) != 0 && !file_exists(dir))
            ex_fail("cannot create the directory %s", dir);
        EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
        generate(dir, w, n_train, n_test, f64, (uint64_t)seed, rank, ranks);
        EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    const double gen_seconds = ex_now() - t0;
    pcnn_dataset *train, *test;
    const pcnn_dtype dtype = f64 ? PCNN_DTYPE_F64 : PCNN_DTYPE_F32;
    if (h5_train) { /* each rank reads its box of every sample: a hyperslab */
        const int flags = PCNN_HDF5_VOLUMES | PCNN_HDF5_CHANNELS_LAST;
        EX_CHECK(pcnn_dataset_open_hdf5(h5_train, NULL, NULL, flags, &train));
        EX_CHECK(pcnn_dataset_open_hdf5(h5_test, NULL, NULL, flags, &test));
        EX_CHECK(pcnn_dataset_set_transform(train, -1, 1, 1.0f, h5_shift));
        EX_CHECK(pcnn_dataset_set_transform(test, -1, 1, 1.0f, h5_shift));
    } else {
        EX_CHECK(pcnn_dataset_open_volumes(train_manifest, CHANNELS, w, w, w, dtype, PARAMS,
                                           &train));
        EX_CHECK(pcnn_dataset_open_volumes(test_manifest, CHANNELS, w, w, w, dtype, PARAMS,
                                           &test));
    }
    EX_CHECK(pcnn_dataset_set_prefetch(train, prefetch));
    EX_CHECK(pcnn_dataset_set_prefetch(test, prefetch));
    int n_tr, n_te;
    int dims[4];
    EX_CHECK(pcnn_dataset_info3d(train, &n_tr, &dims[0], &dims[1], &dims[2], &dims[3]));
    if (dims[0] != CHANNELS || dims[1] != w || dims[2] != w || dims[3] != w)
        ex_fail("the training universes are %d x %d x %d x %d, not %d x %d^3 (--width)",
                dims[0], dims[1], dims[2], dims[3], CHANNELS, w);
    EX_CHECK(pcnn_dataset_info3d(test, &n_te, NULL, NULL, NULL, NULL));

    /* The variance of the test targets: the MSE of always predicting their mean. */
    float *tt = ex_alloc((size_t)n_te * PARAMS * sizeof *tt);
    float *probe = ex_alloc((size_t)CHANNELS * w * w * w * sizeof *probe);
    double mean[PARAMS] = {0}, var = 0.0;
    for (int i = 0; i < n_te; i++) {
        const int one[3] = {1, 1, 1}, origin[3] = {0, 0, 0};
        /* A 1-voxel box: the targets without reading the volume. */
        EX_CHECK(pcnn_dataset_batch_box(test, i, 1, origin, one, probe, NULL, tt + i * PARAMS));
        for (int k = 0; k < PARAMS; k++) mean[k] += tt[i * PARAMS + k] / n_te;
    }
    for (int i = 0; i < n_te; i++)
        for (int k = 0; k < PARAMS; k++) {
            double d = tt[i * PARAMS + k] - mean[k];
            var += d * d / ((double)n_te * PARAMS);
        }

    /* 2. The network. */
    pcnn_layer *input;
    pcnn_net *net = build_cosmoflow(comm, w, scale, slope, dropout, lr, batch, threads, seed,
                                    parts, &input);
    /* What a batch is shared among (the sample groups) and this rank's box
     * of every universe (the whole volume without --spatial). */
    int group, sharers, box_start[3], box_count[3];
    EX_CHECK(pcnn_net_group_info(net, &group, &sharers, NULL, NULL));
    EX_CHECK(pcnn_layer_local_box(input, box_start, box_count));
    size_t params;
    EX_CHECK(pcnn_net_num_params(net, &params));
    if (rank == 0) {
        printf("libpcnn %s: CosmoFlow (seed 003, Table 2) on 4 x %d^3 synthetic universes, "
               "%zu parameters\n%d training and %d test universes in %s (%s, %s in %.1f s), "
               "%d rank(s), global batch %d, Adam lr %g, MSE, prefetch %d, progress engine: %s\n",
               pcnn_version_string(), w, params, n_tr, n_te, dir, f64 ? "float64" : "float32",
               have ? "reused" : "generated", gen_seconds, ranks, batch, lr, prefetch,
               ex_engine_name(net));
        printf("variance of the test targets (MSE of predicting their mean): %.4f\n", var);
    }
    ex_print_summary(net, rank);
    if (parts[0] > 0) {
        for (int r = 0; r < ranks; r++) {
            if (r == rank)
                printf("rank %d (sample group %d of %d): distribution {N %d, D %d, H %d, W %d}, "
                       "reads D %d..%d, H %d..%d, W %d..%d of each universe\n", rank, group,
                       sharers, parts[0], parts[1], parts[2], parts[3], box_start[0],
                       box_start[0] + box_count[0] - 1, box_start[1],
                       box_start[1] + box_count[1] - 1, box_start[2],
                       box_start[2] + box_count[2] - 1);
            fflush(stdout);
            EX_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    }

    /* 3. Training from the files. */
    const int share_max = (batch + sharers - 1) / sharers;
    const size_t sample = (size_t)CHANNELS * w * w * w;
    float *x = ex_alloc((size_t)share_max * sample * sizeof *x);
    float *y = ex_alloc((size_t)share_max * PARAMS * sizeof *y);
    FILE *curves = ex_csv_open(rank == 0 ? csv : NULL, "epoch,train_loss,test_mse,epoch_seconds");
    const int steps = (n_tr + batch - 1) / batch;
    double test_mse = NAN, first_mse = NAN, train_time = 0.0;
    EX_CHECK(pcnn_net_evaluate(net, test, &first_mse, NULL));
    if (rank == 0) printf("before training: test MSE %.4f\n", first_mse);
    for (int epoch = 1; epoch <= epochs; epoch++) {
        EX_CHECK(pcnn_dataset_shuffle(train, (uint64_t)seed, (uint64_t)epoch));
        char label[32];
        snprintf(label, sizeof label, "epoch %d/%d", epoch, epochs);
        ex_progress p;
        ex_progress_start(&p, rank == 0, label, steps);
        double loss_sum = 0.0, e0 = ex_now();
        for (int s = 0; s < steps; s++) {
            const int start = s * batch, count = n_tr - start < batch ? n_tr - start : batch;
            int f, m = ex_share(count, sharers, group, &f);
            /* Each rank reads only its share of the batch from the files
             * (spatial: its group's share, only its box of each). */
            if (m > 0)
                EX_CHECK(pcnn_dataset_batch_box(train, start + f, m, box_start, box_count, x,
                                                NULL, y));
            float loss;
            if (parts[0] > 0)
                EX_CHECK(pcnn_net_train_step_local(net, m, m ? x : NULL, NULL, m ? y : NULL,
                                                   &loss));
            else
                EX_CHECK(pcnn_net_train_step(net, m, m ? x : NULL, NULL, m ? y : NULL, &loss));
            loss_sum += (double)loss * count;
            ex_progress_update(&p, s + 1, loss_sum / (start + count));
        }
        const double seconds = ex_now() - e0;
        ex_progress_finish(&p);
        train_time += seconds;
        EX_CHECK(pcnn_net_evaluate(net, test, &test_mse, NULL));
        if (rank == 0) {
            printf("epoch %d/%d: train loss %.4f, test MSE %.4f (%.0f%% of the target "
                   "variance), %.1f s, %.1f samples/s\n", epoch, epochs, loss_sum / n_tr,
                   test_mse, 100.0 * test_mse / var, seconds, n_tr / seconds);
            fflush(stdout);
        }
        ex_csv_row(curves, "%d,%.6f,%.6f,%.3f", epoch, loss_sum / n_tr, test_mse, seconds);
    }
    ex_csv_close(&curves);
    ex_print_timing(net, rank);
    if (parts[0] > 0) {
        double halo, exposed, shuffle, step;
        EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_HALO, &halo));
        EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_HALO_EXPOSED, &exposed));
        EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_SHUFFLE, &shuffle));
        EX_CHECK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &step));
        if (rank == 0)
            printf("spatial breakdown per step (rank 0): halo %.2f ms (%.2f ms exposed), "
                   "shuffle %.2f ms, of %.2f ms\n", halo * 1e3, exposed * 1e3, shuffle * 1e3,
                   step * 1e3);
    }

    /* True against predicted parameters of the test set (rank 0; spatial:
     * inference is collective, every rank passes the whole universe). */
    if (pred_csv && parts[0] > 0) {
        FILE *out = ex_csv_open(rank == 0 ? pred_csv : NULL,
                                "sample,true_amplitude,true_slope,true_cutoff,true_growth,"
                                "pred_amplitude,pred_slope,pred_cutoff,pred_growth");
        float pred[PARAMS], t[PARAMS];
        float *whole = ex_alloc(sample * sizeof *whole);
        for (int i = 0; i < n_te; i++) {
            EX_CHECK(pcnn_dataset_batch(test, i, 1, whole, NULL, t));
            EX_CHECK(pcnn_net_predict_parallel(net, 1, whole, pred, PARAMS));
            ex_csv_row(out, "%d,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f", i, t[0], t[1], t[2],
                       t[3], pred[0], pred[1], pred[2], pred[3]);
        }
        free(whole);
        ex_csv_close(&out);
        if (rank == 0) printf("predictions of the %d test universes: %s\n", n_te, pred_csv);
    }
    if (rank == 0 && pred_csv && parts[0] == 0) {
        FILE *out = ex_csv_open(pred_csv, "sample,true_amplitude,true_slope,true_cutoff,"
                                          "true_growth,pred_amplitude,pred_slope,pred_cutoff,"
                                          "pred_growth");
        float pred[PARAMS], t[PARAMS];
        for (int i = 0; i < n_te; i++) {
            EX_CHECK(pcnn_dataset_batch(test, i, 1, x, NULL, t));
            EX_CHECK(pcnn_net_predict(net, 1, x, pred, PARAMS));
            ex_csv_row(out, "%d,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f", i, t[0], t[1], t[2],
                       t[3], pred[0], pred[1], pred[2], pred[3]);
        }
        ex_csv_close(&out);
        printf("predictions of the %d test universes: %s\n", n_te, pred_csv);
    }
    if (rank == 0 && epochs > 0)
        printf("test MSE %.4f -> %.4f (target variance %.4f) in %.1f s of training\n", first_mse,
               test_mse, var, train_time);

    free(x);
    free(y);
    free(tt);
    free(probe);
    if (h5_train) { /* each rank its box: a spatial split reads its share of the bytes */
        uint64_t a, b;
        EX_CHECK(pcnn_dataset_io_bytes(train, &a, NULL));
        EX_CHECK(pcnn_dataset_io_bytes(test, &b, NULL));
        const double whole = 2.0 * CHANNELS * w * w * w *
                             ((double)n_tr * epochs + (double)n_te * (epochs + 1));
        printf("rank %d read %.2f MB of HDF5 samples, %.0f%% of the whole samples' %.2f MB\n",
               rank, (double)(a + b) / 1e6, 100.0 * (double)(a + b) / whole, whole / 1e6);
    }
    EX_CHECK(pcnn_net_destroy(&net));
    EX_CHECK(pcnn_dataset_destroy(&train));
    EX_CHECK(pcnn_dataset_destroy(&test));
    EX_CHECK(pcnn_comm_destroy(&comm));
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png && ex_plot(csv, png) == 0) printf("curves: %s\n", png);
    return 0;
}
