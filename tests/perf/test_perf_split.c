/* The performance model on a spatial network (2 ranks, lib/perf/split_sim.c),
 * against hand computations from a made-up compute table and the model's
 * own collective times:
 *   1. calibrating a spatial network's compute is refused (its layers run
 *      on boxes), clearly, on every rank;
 *   2. each layer costs its box: the split convolutions half a sample's
 *      work per sample, their halos (forward and backward faces) as the
 *      network runs them (in place, staged, kept), no halo for 1x1 nor
 *      element-wise layers, the box dense head the whole batch on half its
 *      columns with its two sums as shuffles and its columns exchange;
 *   3. the halo overlap option off exposes at least as much;
 *   4. what-if: 4 ranks keep the spatial groups and split the samples,
 *      65536 ranks too; 3 ranks, or fewer samples than groups, are refused;
 *   5. the all-along-N distribution predicts what data parallelism does,
 *      bit for bit;
 *   6. validation prints the halo columns beside the measurement;
 *   7. a collective in flight across a timing reset counts from it. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"
#include "../plan/synthetic_model.h"
#include "graph/graph.h"

#define SCALE 1e-9
#define BATCH 2

/* input 2x16x16 -> conv 4 3x3 -> relu -> conv 4 1x1 -> flatten -> dense 3 */
static pcnn_net *make_net(pcnn_comm *comm, const int *parts, int halo_overlap)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
    CK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, halo_overlap));
    CK(pcnn_net_input(net, 2, 16, 16, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_conv2d(net, l, 4, 1, 1, 0, 1, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    if (parts) CK(pcnn_net_set_distribution(net, parts));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

static double layer_time(pcnn_perfmodel *m, int layer, pcnn_time what)
{
    double t;
    CK(pcnn_perfmodel_layer_time(m, layer, what, &t));
    return t;
}

static double coll(pcnn_perfmodel *m, pcnn_collective c, int n, double bytes)
{
    double t;
    CK(pcnn_perfmodel_collective_time(m, c, n, bytes, &t));
    return t;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(b), 1e-12); }

/* n: the samples a rank passes (its group's under a split, its share
 * under data parallelism). */
static void train(pcnn_net *net, int n, int steps)
{
    float x[BATCH * 2 * 16 * 16], t[BATCH * 3];
    for (int i = 0; i < BATCH * 2 * 16 * 16; i++) x[i] = (float)((i * 37) % 23) / 23.0f - 0.5f;
    for (int i = 0; i < BATCH * 3; i++) t[i] = (float)i / 6.0f;
    for (int s = 0; s < steps; s++) CK(pcnn_net_train_step(net, n, x, NULL, t, NULL));
}

static void test_split_costs(pcnn_comm *comm, pcnn_perfmodel *m)
{
    const int split[4] = {1, 1, 2, 1};
    pcnn_net *net = make_net(comm, split, 1);
    train(net, BATCH, 2);
    pcnn_status st = pcnn_perfmodel_calibrate_compute(m, net, 0.2);
    expect(st == PCNN_ERR_INVALID_STATE && strstr(pcnn_last_error(), "spatially distributed"),
           "calibrating a spatial network's compute is refused, naming why");
    synthetic_model(m, net, SCALE);
    double step;
    CK(pcnn_perfmodel_predict(m, net, BATCH, 2, 1, &step));
    const layer_list *ll = net_layer_list(net);
    const double w1 = SCALE * layer_work(ll->items[1]), w5 = SCALE * layer_work(ll->items[5]);
    /* Each rank: 2 samples, half of each. */
    net_layer_split s;
    expect(net_layer_split_of(net, 1, &s) && s.parts[2] == 2, "the door reports the split");
    /* In place, the border cells are computed again (their share of the
     * box: one row of 8 on each rank). */
    const double border = s.in_place ? w1 / 8 : 0;
    expect(close_to(layer_time(m, 1, PCNN_TIME_FORWARD), w1 + border),
           "split 3x3 convolution: forward is its box's work");
    /* Halo faces: one row of 16 points each way, 2 samples; forward of the
     * 2 input channels, backward of the 4 output-gradient channels. */
    const double hf = 2 * coll(m, PCNN_COLL_SENDRECV, 2, 4.0 * BATCH * 2 * 16 / 2);
    const double hb = 2 * coll(m, PCNN_COLL_SENDRECV, 2, 4.0 * BATCH * 4 * 16 / 2);
    const double again = s.staged && !s.keeps_input ? hf : 0;
    if (rank == 0)
        printf("conv 3x3: in place %d, staged %d, kept %d, overlap %d; halo %.3g s, "
               "exposed %.3g s\n", s.in_place, s.staged, s.keeps_input, s.overlap,
               layer_time(m, 1, PCNN_TIME_HALO), layer_time(m, 1, PCNN_TIME_HALO_EXPOSED));
    /* A staged input box (2 samples, 2 channels, 8 rows and the halo's
     * one, 16 wide) is copied in and its gradient back, timed as the
     * halo's, as the exchange does: the exposed halo never exceeds it. */
    double gamma;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_GAMMA_S_PER_BYTE, &gamma));
    const double copy = s.staged ? gamma * 4.0 * BATCH * 2 * (16 / 2 + 1) * 16 : 0;
    const double copies = copy * (2 + (s.staged && !s.keeps_input));
    expect(close_to(layer_time(m, 1, PCNN_TIME_HALO), hf + hb + again + copies) &&
               layer_time(m, 1, PCNN_TIME_HALO_EXPOSED) <= layer_time(m, 1, PCNN_TIME_HALO),
           "split 3x3 convolution: its halo is both faces' exchanges and the staging copies");
    const double exposed = layer_time(m, 1, PCNN_TIME_HALO_EXPOSED);
    expect(exposed >= 0 && (s.overlap || exposed >= hf + hb),
           "its exposed halo: all of it without overlap, at least none with");
    const double w1x1 = SCALE * layer_work(ll->items[3]);
    expect(close_to(layer_time(m, 3, PCNN_TIME_FORWARD), w1x1) &&
               layer_time(m, 3, PCNN_TIME_HALO) == 0 && layer_time(m, 2, PCNN_TIME_HALO) == 0,
           "1x1 convolution and ReLU: their box's work, no halo");
    /* The box dense head: the whole batch on half its columns per rank;
     * its two sums over the ranks (3 x 2 doubles); its columns exchange. */
    const double sums = coll(m, PCNN_COLL_ALLREDUCE, 2, 8.0 * 3 * BATCH);
    const double F = 4 * 16 * 16;
    const double cols = coll(m, PCNN_COLL_ALLREDUCE, 2, 4.0 * 3) +
                        coll(m, PCNN_COLL_ALLGATHER, 2, 4.0 * 3 * F);
    expect(close_to(layer_time(m, 5, PCNN_TIME_FORWARD), w5 * BATCH / 2) &&
               close_to(layer_time(m, 5, PCNN_TIME_SHUFFLE), 2 * sums) &&
               close_to(layer_time(m, 5, PCNN_TIME_COMM), cols) &&
               layer_time(m, 4, PCNN_TIME_FORWARD) == 0,
           "box dense head: half its columns for the batch, two sums, columns exchange");
    double sum_on_thread = 0;
    for (int l = 1; l < ll->count; l++) {
        sum_on_thread += layer_time(m, l, PCNN_TIME_FORWARD) + layer_time(m, l, PCNN_TIME_BACKWARD);
        sum_on_thread += layer_time(m, l, PCNN_TIME_HALO_EXPOSED);
        sum_on_thread += layer_time(m, l, PCNN_TIME_SHUFFLE);
    }
    expect(step >= sum_on_thread, "the step holds every layer's computation and waits");
    double t;
    expect(pcnn_perfmodel_layer_time(m, 1, (pcnn_time)(PCNN_TIME_SHUFFLE + 1), &t) ==
               PCNN_ERR_INVALID_ARGUMENT,
           "layer_time: a category past the shuffle is refused");

    /* 3. Without halo overlap at least as much is exposed. */
    pcnn_net *plain = make_net(comm, split, 0);
    double step_plain;
    CK(pcnn_perfmodel_predict(m, plain, BATCH, 2, 1, &step_plain));
    expect(layer_time(m, -1, PCNN_TIME_HALO_EXPOSED) >= 0 && step_plain >= step - 1e-15,
           "halo overlap off: no less exposed, no faster");

    /* 4. What-if on other numbers of ranks. */
    CK(pcnn_perfmodel_predict(m, net, BATCH, 4, 1, &step));
    expect(close_to(layer_time(m, 1, PCNN_TIME_FORWARD), w1 / 2),
           "4 ranks: two sample groups of 2, one sample each, half of it");
    /* Two groups of one sample: the flatten (not folded: several groups)
     * gathers it from the two halves onto one rank of the group, 4 x 8 x
     * 16 floats each way, among the group's 2 ranks. */
    expect(close_to(layer_time(m, 4, PCNN_TIME_SHUFFLE),
                    2 * coll(m, PCNN_COLL_ALLTOALL, 2, 4.0 * 4 * 8 * 16)),
           "4 ranks: the flatten's shuffle within each sample group of 2");
    CK(pcnn_perfmodel_predict(m, net, 1 << 16, 1 << 16, 1, &step));
    expect(isfinite(step) && step > 0 && isfinite(layer_time(m, -1, PCNN_TIME_SHUFFLE)),
           "65536 ranks in 32768 sample groups: a finite step");
    expect(pcnn_perfmodel_predict(m, net, BATCH, 3, 1, &step) == PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "must divide"),
           "3 ranks: the groups of 2 do not divide them, refused");
    expect(pcnn_perfmodel_predict(m, net, 1, 4, 1, &step) == PCNN_ERR_INVALID_ARGUMENT,
           "1 sample on 2 sample groups: refused");

    /* 6. Validation beside the measurement. */
    CK(pcnn_net_reset_timing(net));
    train(net, BATCH, 3);
    CK(pcnn_perfmodel_predict(m, net, BATCH, 2, 1, &step));
    char table[8192];
    double re, wre[3];
    CK(pcnn_perfmodel_validate(m, net, &re, wre, table, sizeof table, NULL));
    expect(isfinite(re) && strstr(table, "halo exposed") && strstr(table, "exposed halo:"),
           "validation: the halo and shuffle columns, predicted beside measured");
    CK(pcnn_net_destroy(&plain));
    CK(pcnn_net_destroy(&net));
}

static void test_data_parallel_same(pcnn_comm *comm, pcnn_perfmodel *m)
{
    const int along_n[4] = {2, 1, 1, 1};
    pcnn_net *a = make_net(comm, along_n, 1), *b = make_net(comm, NULL, 1);
    synthetic_model(m, a, SCALE);
    double sa, sb, la[6], lb[6];
    CK(pcnn_perfmodel_predict(m, a, 8, 2, 1, &sa));
    for (int l = 0; l < 6; l++) la[l] = layer_time(m, l, PCNN_TIME_EXPOSED);
    CK(pcnn_perfmodel_predict(m, b, 8, 2, 1, &sb));
    for (int l = 0; l < 6; l++) lb[l] = layer_time(m, l, PCNN_TIME_EXPOSED);
    expect(sa == sb && !memcmp(la, lb, sizeof la),
           "all along N: the data-parallel prediction, bit for bit");
    CK(pcnn_net_destroy(&a));
    CK(pcnn_net_destroy(&b));
}

/* 7. An all-gather left in flight at the end of a step, a pause, a reset:
 * the next step's communication does not include the pause. */
static void test_reset_in_flight(pcnn_comm *comm)
{
    pcnn_net *net = make_net(comm, NULL, 1);
    train(net, BATCH / 2, 2);
    const struct timespec pause = {0, 300000000};
    nanosleep(&pause, NULL);
    CK(pcnn_net_reset_timing(net));
    train(net, BATCH / 2, 1);
    double c;
    CK(pcnn_net_time(net, -1, PCNN_TIME_COMM, &c));
    expect(c < 0.15, "a collective in flight across a reset counts from the reset");
    CK(pcnn_net_destroy(&net));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 1));
    if (ranks == 2) {
        test_split_costs(comm, m);
        test_data_parallel_same(comm, m);
        test_reset_in_flight(comm);
    } else if (rank == 0) {
        printf("SKIP: needs 2 ranks\n");
    }
    CK(pcnn_perfmodel_destroy(&m));
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d checks, %d failed\n", checks, failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
