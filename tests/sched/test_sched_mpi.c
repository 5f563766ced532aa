/* The scheduler over P ranks (run under mpiexec with 1, 2 or 3):
 *   - theta equals a direct computation from the full parameter vectors,
 *     whether the layers' parameters are sharded (all-to-all + all-gather),
 *     replicated (allreduce) or mixed;
 *   - a run whose batch grows from 2 (one computing rank) to 16 (all ranks)
 *     equals a single-rank run under the same schedule (relative 1e-5),
 *     driven by one call per epoch and by the host with its own steps;
 *   - all ranks take the same decisions when K comes from theta;
 *   - the saved state is the same on every rank and restores exactly;
 *   - a network planned too small for the degree-of-parallelism rule is
 *     refused with the max_batch it needs. */
#include <string.h>

#include "sched_util.h"

static int rank, ranks;

static void abort_job(void) { MPI_Abort(MPI_COMM_WORLD, 2); }

/* A check that holds on every rank; printed once. */
static void expect_all(int ok, const char *what)
{
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all) failures++;
    if (rank == 0) printf("%s %s (P = %d)\n", all ? "PASS" : "FAIL", what, ranks);
}

/* The same bits on every rank. */
static int same_on_all_ranks(const void *data, int bytes)
{
    unsigned char *all = malloc((size_t)bytes * (size_t)ranks);
    MPI_Allgather(data, bytes, MPI_BYTE, all, bytes, MPI_BYTE, MPI_COMM_WORLD);
    int same = 1;
    for (int r = 1; r < ranks; r++)
        same &= memcmp(all, all + (size_t)r * bytes, (size_t)bytes) == 0;
    free(all);
    return same;
}

static void test_theta(pcnn_comm *comm, pcnn_exchange exchange, int first_exchange,
                       double bucket_bytes, const char *name)
{
    pcnn_net *net = build_net(comm, exchange, first_exchange, bucket_bytes, PCNN_OPTIMIZER_SGD, 8);
    size_t count;
    CK(pcnn_net_num_params(net, &count));
    float *w0 = malloc(count * sizeof(float)), *w = malloc(count * sizeof(float));
    CK(pcnn_net_get_params(net, w0, count));
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 2, 8, 0.1, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INITIAL_LOSS, 2.5));
    int ok = 1;
    double thetas[3];
    uint64_t seed = 1234; /* the same moves on every rank */
    for (int e = 0; e < 3; e++) {
        CK(pcnn_scheduler_begin_epoch(s, NULL, NULL));
        for (size_t i = 0; i < count; i++) w[i] = w0[i] + (float)((e + 1) * 0.1 * uniform(&seed));
        CK(pcnn_net_set_params(net, w, count));
        /* Each rank reports its own loss; their mean is 1.5 - 0.2 e. */
        const double loss = 1.5 - 0.2 * e + 0.01 * (rank - (ranks - 1) / 2.0);
        CK(pcnn_scheduler_end_epoch(s, loss));
        CK(pcnn_net_get_params(net, w, count));
        const double direct = (2.5 - (1.5 - 0.2 * e)) / distance(w0, w, count);
        CK(pcnn_scheduler_theta(s, e + 1, &thetas[e]));
        if (!(fabs(thetas[e] - direct) <= 1e-10 * fabs(direct))) {
            ok = 0;
            printf("rank %d %s epoch %d: theta %.17g, direct %.17g\n", rank, name, e + 1,
                   thetas[e], direct);
        }
    }
    char what[160];
    snprintf(what, sizeof what, "theta equals the direct computation: %s", name);
    expect_all(ok, what);
    snprintf(what, sizeof what, "theta bit-identical on all ranks: %s", name);
    expect_all(same_on_all_ranks(thetas, sizeof thetas), what);
    pcnn_scheduler_destroy(&s);
    pcnn_net_destroy(&net);
    free(w0);
    free(w);
}

static pcnn_scheduler *growing_sched(pcnn_net *net, int start, int interval)
{
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, start, 16, 0.05, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INTERVAL_EPOCHS, interval));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_THETA_THRESHOLD, 0.5));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_EPOCHS, 1));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_THRESHOLD, 0.05));
    return s;
}

/* The host's own epoch: ask for B, train this rank's share of each batch
 * with pcnn_net_train_step, report the loss. */
static double host_epoch(pcnn_scheduler *s, pcnn_net *net, pcnn_dataset *data, int n_total,
                         float *x, int32_t *y)
{
    int batch;
    CK(pcnn_scheduler_begin_epoch(s, &batch, NULL));
    double sum = 0.0;
    for (int start = 0; start < n_total; start += batch) {
        const int total = n_total - start < batch ? n_total - start : batch;
        int first, n;
        CK(pcnn_scheduler_share(s, total, &first, &n));
        if (n) CK(pcnn_dataset_batch(data, start + first, n, x, y, NULL));
        float loss;
        CK(pcnn_net_train_step(net, n, n ? x : NULL, y, NULL, &loss));
        if (start == 0 && sched_get(s, PCNN_SCHED_EPOCH) == 0)
            CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INITIAL_LOSS, loss));
        sum += (double)loss * total;
    }
    CK(pcnn_scheduler_end_epoch(s, sum / n_total));
    return sum / n_total;
}

/* B = 2, 4, 8, 16, 16 (K = 1): one computing rank, then 2, then all. */
static void test_growing_equals_sequential(pcnn_comm *comm, int host_driven)
{
    enum { N = 32, EPOCHS = 5 };
    pcnn_dataset *data = make_data(N, 3);
    pcnn_net *par = build_net(comm, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLREDUCE,
                              1 << 20, PCNN_OPTIMIZER_MOMENTUM, 16);
    pcnn_net *seq = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_MOMENTUM, 16);
    pcnn_scheduler *sp = growing_sched(par, 2, 1), *ss = growing_sched(seq, 2, 1);
    size_t count;
    CK(pcnn_net_num_params(seq, &count));
    float *wp = malloc(count * sizeof(float)), *ws = malloc(count * sizeof(float));
    float *x = malloc(sizeof(float) * 16 * 162);
    int32_t y[16];
    float *zero = calloc(count, sizeof(float));
    double worst = 0.0, worst_element = 0.0, worst_loss = 0.0, worst_theta = 0.0;
    int same_decisions = 1, active_ok = 1;
    for (int e = 0; e < EPOCHS; e++) {
        const int b = (int)sched_get(sp, PCNN_SCHED_BATCH);
        const int want_active = b / 2 < 1 ? 1 : b / 2 > ranks ? ranks : b / 2;
        active_ok &= sched_get(sp, PCNN_SCHED_ACTIVE_RANKS) == want_active;
        CK(pcnn_dataset_shuffle(data, 21, (uint64_t)e));
        double lp, ls;
        if (host_driven) lp = host_epoch(sp, par, data, N, x, y);
        else CK(pcnn_scheduler_train_epoch(sp, data, &lp));
        CK(pcnn_scheduler_train_epoch(ss, data, &ls));
        CK(pcnn_net_get_params(par, wp, count));
        CK(pcnn_net_get_params(seq, ws, count));
        /* Relative to the parameter vector: float summation order differs
         * between P ranks and one, and 32 momentum steps amplify it. */
        double d = distance(wp, ws, count) / distance(ws, zero, count);
        if (d > worst) worst = d;
        d = max_rel_diff(wp, ws, count);
        if (d > worst_element) worst_element = d;
        d = fabs(lp - ls) / fabs(ls);
        if (d > worst_loss) worst_loss = d;
        d = fabs(sched_get(sp, PCNN_SCHED_THETA) - sched_get(ss, PCNN_SCHED_THETA)) /
            fabs(sched_get(ss, PCNN_SCHED_THETA));
        if (d > worst_theta || isnan(d)) worst_theta = isnan(d) ? INFINITY : d;
        same_decisions &= sched_get(sp, PCNN_SCHED_BATCH) == sched_get(ss, PCNN_SCHED_BATCH) &&
                          sched_get(sp, PCNN_SCHED_LEARNING_RATE) ==
                              sched_get(ss, PCNN_SCHED_LEARNING_RATE) &&
                          sched_get(sp, PCNN_SCHED_DECAYS) == sched_get(ss, PCNN_SCHED_DECAYS);
    }
    const char *how = host_driven ? "host-driven epochs" : "pcnn_scheduler_train_epoch";
    char what[200];
    snprintf(what, sizeof what, "%s: growing batch equals one rank (params %.2e, largest "
             "element %.2e, loss %.2e, theta %.2e)", how, worst, worst_element, worst_loss,
             worst_theta);
    expect_all(worst <= 1e-5 && worst_loss <= 1e-5 && worst_theta <= 1e-4, what);
    snprintf(what, sizeof what, "%s: same B, lr and decays as one rank; B reached 16", how);
    expect_all(same_decisions && sched_get(sp, PCNN_SCHED_BATCH) == 16, what);
    snprintf(what, sizeof what, "%s: active ranks min(P, B/2) each epoch", how);
    expect_all(active_ok, what);
    pcnn_scheduler_destroy(&sp);
    pcnn_scheduler_destroy(&ss);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
    pcnn_dataset_destroy(&data);
    free(wp);
    free(ws);
    free(x);
    free(zero);
}

/* K from theta: every rank must hold the same decisions after every epoch,
 * and the saved state must be the same bytes everywhere and restore. */
static void test_agreement_and_state(pcnn_comm *comm)
{
    enum { N = 32, EPOCHS = 6 };
    pcnn_dataset *data = make_data(N, 4);
    pcnn_net *net = build_net(comm, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, -1, 256,
                              PCNN_OPTIMIZER_MOMENTUM, 16);
    pcnn_scheduler *s = growing_sched(net, 4, 0);
    int agree_ok = 1;
    for (int e = 0; e < EPOCHS; e++) {
        CK(pcnn_dataset_shuffle(data, 5, (uint64_t)e));
        CK(pcnn_scheduler_train_epoch(s, data, NULL));
        double rec[8];
        const pcnn_sched_option opts[8] = {PCNN_SCHED_EPOCH, PCNN_SCHED_BATCH,
                                           PCNN_SCHED_LEARNING_RATE, PCNN_SCHED_INTERVAL,
                                           PCNN_SCHED_THETA, PCNN_SCHED_DECAYS,
                                           PCNN_SCHED_EVENTS, PCNN_SCHED_INITIAL_LOSS};
        for (int i = 0; i < 8; i++) rec[i] = sched_get(s, opts[i]);
        agree_ok &= same_on_all_ranks(rec, sizeof rec);
        if (rank == 0)
            printf("  epoch %g: B %g lr %g K %g theta %.5f decays %g events %g\n", rec[0], rec[1],
                   rec[2], rec[3], rec[4], rec[5], rec[6]);
    }
    expect_all(agree_ok, "all ranks agree on every decision (K from theta)");

    size_t bytes;
    CK(pcnn_scheduler_state_bytes(s, &bytes));
    unsigned char *blob = malloc(bytes);
    CK(pcnn_scheduler_save_state(s, blob, bytes));
    expect_all(same_on_all_ranks(blob, (int)bytes), "saved state identical on all ranks");
    pcnn_scheduler *t = growing_sched(net, 4, 0);
    CK(pcnn_scheduler_load_state(t, blob, bytes));
    int same = 1;
    for (int o = PCNN_SCHED_EPOCH; o <= PCNN_SCHED_EVENTS; o++) {
        double a = sched_get(s, (pcnn_sched_option)o), b = sched_get(t, (pcnn_sched_option)o);
        same &= memcmp(&a, &b, sizeof a) == 0;
    }
    /* Saving the restored scheduler must give the same bytes: the same
     * fields, thetas and w_0 slices. */
    unsigned char *again = malloc(bytes);
    CK(pcnn_scheduler_save_state(t, again, bytes));
    same &= memcmp(blob, again, bytes) == 0;
    expect_all(same, "state restores exactly (re-saved bytes equal)");
    pcnn_scheduler_destroy(&s);
    pcnn_scheduler_destroy(&t);
    pcnn_net_destroy(&net);
    pcnn_dataset_destroy(&data);
    free(blob);
    free(again);
}

/* P >= 2: a network planned for max_batch 4 gives each rank 2 samples, but
 * a batch of 3 has one computing rank needing 3. */
static void test_plan_too_small(pcnn_comm *comm)
{
    if (ranks < 2) return;
    pcnn_net *net = build_net(comm, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, -1, 0, PCNN_OPTIMIZER_SGD, 4);
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 2, 4, 0.1, &s));
    pcnn_status st = pcnn_scheduler_begin_epoch(s, NULL, NULL);
    char want[64];
    snprintf(want, sizeof want, "max_batch >= %d", 2 * ranks + 1);
    expect_all(st == PCNN_ERR_SHAPE && strstr(pcnn_last_error(), want) != NULL,
               "a network planned too small is refused, naming the max_batch needed");
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_MIN_LOCAL_SAMPLES, rank == 0 ? 0 : 1));
    st = pcnn_scheduler_begin_epoch(s, NULL, NULL);
    expect_all(st == PCNN_ERR_MISMATCH, "ranks with different options fail together");
    pcnn_scheduler_destroy(&s);
    pcnn_net_destroy(&net);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    test_theta(comm, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, -1, 0, "sharded (all-to-all + all-gather)");
    test_theta(comm, PCNN_EXCHANGE_ALLREDUCE, -1, 1 << 20, "replicated (allreduce, one bucket)");
    test_theta(comm, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLREDUCE, 256, "mixed");
    test_growing_equals_sequential(comm, 0);
    test_growing_equals_sequential(comm, 1);
    test_agreement_and_state(comm);
    test_plan_too_small(comm);
    pcnn_comm_destroy(&comm);
    if (rank == 0) printf("%d failure(s)\n", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
