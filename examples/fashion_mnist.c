/* Train LeNet-5 on Fashion-MNIST over MPI ranks: the flagship example.
 *
 * The host owns MPI: it initialises it, hands libpcnn its communicator, and
 * drives the training loop itself, one global batch at a time, each rank
 * passing only its share of the batch.  Momentum SGD at lr 0.05 (the peer
 * script's setting) with a one-epoch linear warm-up and x0.1 after epoch 3:
 * without the warm-up, lr 0.05 with momentum 0.9 ends near 88.8% after 5
 * epochs; with it, above 89%.  Rank 0 prints the model summary, a progress
 * bar, per-epoch metrics, and at the end the library's timing breakdown
 * with the overlap ratio of the gradient exchange. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdlib.h>
#include <string.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 fashion_mnist [options]\n"
    "  --epochs N          epochs (5)\n"
    "  --batch N           global batch, split over the ranks (64)\n"
    "  --lr X              learning rate of momentum SGD (0.05)\n"
    "  --momentum X        momentum (0.9)\n"
    "  --warmup N          ramp the learning rate up over the first N epochs (1; 0 = off)\n"
    "  --decay-every N     multiply the learning rate by --decay every N epochs (3; 0 = off)\n"
    "  --decay X           the decay factor (0.1)\n"
    "  --exchange NAME     a2a (all-to-all + all-gather, the default) or allreduce\n"
    "  --no-overlap        exchange after the backward pass instead of during it\n"
    "  --engine NAME       progress engine: auto, thread or nonblocking (auto: the\n"
    "                      communication thread when MPI provides THREAD_MULTIPLE)\n"
    "  --threads N         OpenMP threads per rank (0 = OMP_NUM_THREADS)\n"
    "  --seed N            initialisation and shuffling seed (0)\n"
    "  --precision NAME    fp32 (the default) or bf16: bf16 products with fp32\n"
    "                      sums and master weights (PCNN_OPT_PRECISION)\n"
    "  --train-limit N     train on N images per epoch (all 60000)\n"
    "  --csv FILE          write the training curves as CSV\n"
    "  --plot FILE.png     draw the curves with examples/plot_curves.py (implies a CSV)\n"
    "  --trace FILE        write the last steps of all ranks as one Chrome trace FILE\n"
    "                      (also: PCNN_TRACE=FILE in the environment)\n"
    "  --data DIR          Fashion-MNIST IDX files (/usr/share/datasets/fashion-mnist)\n";

/* LeNet-5, layer for layer the `lenet` of the peer benchmarks (models.py):
 * conv5 (pad 2) relu pool, conv5 relu pool, dense 120, 84, 10.  Weights use
 * Glorot-uniform initialisation, close in scale to PyTorch's default. */
static pcnn_layer *add_lenet(pcnn_net *net)
{
    pcnn_layer *l;
    EX_CHECK(pcnn_net_input(net, 1, 28, 28, &l));
    EX_CHECK(pcnn_conv2d(net, l, 6, 5, 1, 2, 1, &l));
    EX_CHECK(pcnn_layer_set_init(l, PCNN_INIT_GLOROT_UNIFORM));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    EX_CHECK(pcnn_conv2d(net, l, 16, 5, 1, 0, 1, &l));
    EX_CHECK(pcnn_layer_set_init(l, PCNN_INIT_GLOROT_UNIFORM));
    EX_CHECK(pcnn_relu(net, l, &l));
    EX_CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    const int widths[] = {120, 84, 10};
    for (int i = 0; i < 3; i++) {
        EX_CHECK(pcnn_dense(net, l, widths[i], 1, &l));
        EX_CHECK(pcnn_layer_set_init(l, PCNN_INIT_GLOROT_UNIFORM));
        if (i < 2) EX_CHECK(pcnn_relu(net, l, &l));
    }
    return l;
}

static pcnn_dataset *load(const char *dir, const char *images, const char *labels)
{
    char xp[1024], yp[1024];
    snprintf(xp, sizeof xp, "%s/%s", dir, images);
    snprintf(yp, sizeof yp, "%s/%s", dir, labels);
    pcnn_dataset *d;
    /* Scaled to [0, 1], then normalised as the peer script does. */
    EX_CHECK(pcnn_dataset_load_idx(xp, yp, 0.2860f, 0.3530f, &d));
    return d;
}

int main(int argc, char **argv)
{
    int provided;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    ex_args_init(argc, argv, usage);
    const int epochs = ex_arg_int("--epochs", 5), batch = ex_arg_int("--batch", 64);
    const double lr = ex_arg_double("--lr", 0.05), momentum = ex_arg_double("--momentum", 0.9);
    const int warmup = ex_arg_int("--warmup", 1), decay_every = ex_arg_int("--decay-every", 3);
    const double decay = ex_arg_double("--decay", 0.1);
    const char *xname = ex_arg_str("--exchange", "a2a");
    const int overlap = !ex_arg_flag("--no-overlap");
    const int engine = ex_engine_option(ex_arg_str("--engine", "auto"));
    const int threads = ex_arg_int("--threads", 0), seed = ex_arg_int("--seed", 0);
    const int train_limit = ex_arg_int("--train-limit", 0);
    const char *png = ex_arg_str("--plot", NULL), *trace = ex_arg_str("--trace", NULL);
    const char *csv = ex_arg_str("--csv", NULL);
    const char *dir = ex_arg_str("--data", "/usr/share/datasets/fashion-mnist");
    const char *precision = ex_arg_str("--precision", "fp32");
    ex_args_done();
    if (strcmp(precision, "fp32") && strcmp(precision, "bf16"))
        ex_fail("--precision must be fp32 or bf16, not '%s'", precision);
    if (strcmp(xname, "a2a") && strcmp(xname, "allreduce"))
        ex_fail("--exchange must be a2a or allreduce, not '%s'", xname);
    if (batch < 1 || epochs < 0 || warmup < 0 || decay_every < 0 || train_limit < 0)
        ex_fail("--batch must be >= 1; --epochs, --warmup, --decay-every, --train-limit >= 0");
    const pcnn_exchange exchange =
        strcmp(xname, "a2a") ? PCNN_EXCHANGE_ALLREDUCE : PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    char csv_default[1024];
    if (png && !csv) { /* the plot needs a CSV: put it next to the PNG */
        snprintf(csv_default, sizeof csv_default, "%s.csv", png);
        csv = csv_default;
    }

    pcnn_dataset *train = load(dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
    pcnn_dataset *test = load(dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");
    int n_train;
    EX_CHECK(pcnn_dataset_info(train, &n_train, NULL, NULL, NULL));
    if (train_limit > 0 && train_limit < n_train) n_train = train_limit;

    /* libpcnn works on a duplicate of the host's communicator. */
    pcnn_comm *comm;
    int rank, ranks;
    EX_CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    EX_CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));

    pcnn_net *net;
    EX_CHECK(pcnn_net_create(&net));
    EX_CHECK(pcnn_net_set_loss(net, add_lenet(net), PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, momentum));
    const int steps_per_epoch = (n_train + batch - 1) / batch;
    if (decay_every > 0) {
        EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_DECAY_EVERY_STEPS,
                                     (double)decay_every * steps_per_epoch));
        EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_DECAY_FACTOR, decay));
    }
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_WARMUP_STEPS, (double)warmup * steps_per_epoch));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, strcmp(precision, "bf16") == 0
                                                              ? PCNN_PRECISION_BF16
                                                              : PCNN_PRECISION_FP32));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, overlap));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    trace = ex_trace_path(trace);
    ex_trace_enable(net, trace);
    EX_CHECK(pcnn_net_set_comm(net, comm));
    EX_CHECK(pcnn_net_set_exchange(net, exchange));
    EX_CHECK(pcnn_net_finalize(net, batch)); /* collective: ranks agree on the model */

    uint64_t bytes;
    EX_CHECK(pcnn_net_exchange_bytes(net, &bytes));
    if (rank == 0) {
        printf("libpcnn %s: LeNet-5 on Fashion-MNIST (%d training, 10000 test images)\n"
               "%d rank(s), global batch %d, momentum SGD lr %g momentum %g, warm-up %d "
               "epoch(s), x%g every %d epochs\n%s exchange%s, %.1f kB sent per step per rank, "
               "progress engine: %s\n",
               pcnn_version_string(), n_train, ranks, batch, lr, momentum, warmup, decay,
               decay_every,
               exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "all-to-all + all-gather",
               overlap ? " overlapped with back-propagation" : " after back-propagation",
               (double)bytes / 1e3, ex_engine_name(net));
    }
    ex_print_summary(net, rank);

    /* Staging buffers for this rank's share of a global batch. */
    const int share_max = (batch + ranks - 1) / ranks;
    float *x = ex_alloc((size_t)share_max * 28 * 28 * sizeof *x);
    int32_t *labels = ex_alloc((size_t)share_max * sizeof *labels);
    FILE *curves = ex_csv_open(rank == 0 ? csv : NULL,
                               "epoch,train_loss,test_loss,test_accuracy,epoch_seconds");
    double train_time = 0.0, accuracy = 0.0;
    for (int epoch = 1; epoch <= epochs; epoch++) {
        /* Every rank shuffles identically: the order depends on (seed, epoch). */
        EX_CHECK(pcnn_dataset_shuffle(train, (uint64_t)seed, (uint64_t)epoch));
        char label[32];
        snprintf(label, sizeof label, "epoch %d/%d", epoch, epochs);
        ex_progress p;
        ex_progress_start(&p, rank == 0, label, steps_per_epoch);
        double loss_sum = 0.0, t0 = ex_now();
        for (int step = 0; step < steps_per_epoch; step++) {
            const int start = step * batch;
            const int count = n_train - start < batch ? n_train - start : batch;
            int first, mine = ex_share(count, ranks, rank, &first);
            if (mine > 0) EX_CHECK(pcnn_dataset_batch(train, start + first, mine, x, labels, NULL));
            float loss; /* the mean over the global batch, the same on all ranks */
            EX_CHECK(pcnn_net_train_step(net, mine, mine ? x : NULL, mine ? labels : NULL, NULL,
                                         &loss));
            loss_sum += (double)loss * count;
            ex_progress_update(&p, step + 1, loss_sum / (start + count));
        }
        const double seconds = ex_now() - t0;
        ex_progress_finish(&p);
        train_time += seconds;
        double test_loss;
        EX_CHECK(pcnn_net_evaluate(net, test, &test_loss, &accuracy)); /* collective */
        if (rank == 0) {
            printf("epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  "
                   "%.2f s  %.0f images/s\n",
                   epoch, epochs, loss_sum / n_train, test_loss, 100 * accuracy, seconds,
                   n_train / seconds);
            fflush(stdout);
        }
        ex_csv_row(curves, "%d,%.6f,%.6f,%.6f,%.3f", epoch, loss_sum / n_train, test_loss,
                   accuracy, seconds);
    }
    ex_csv_close(&curves);
    if (rank == 0)
        printf("trained %d epochs in %.2f s; final test accuracy %.2f%%\n", epochs, train_time,
               100 * accuracy);
    ex_print_timing(net, rank);
    ex_trace_write(net, trace, rank);

    free(x);
    free(labels);
    EX_CHECK(pcnn_net_destroy(&net)); /* before its communicator */
    EX_CHECK(pcnn_comm_destroy(&comm));
    EX_CHECK(pcnn_dataset_destroy(&train));
    EX_CHECK(pcnn_dataset_destroy(&test));
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png) return ex_plot(csv, png);
    return 0;
}
