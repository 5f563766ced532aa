/* In-situ training: a simulation trains its own CNN surrogate while it runs.
 *
 * The simulation is Gray-Scott reaction-diffusion on a periodic N x N grid,
 *   du/dt = Du lap(u) - u v^2 + F (1 - u)
 *   dv/dt = Dv lap(v) + u v^2 - (F + k) v
 * (Du 0.16, Dv 0.08, explicit Euler with dt 1; the default F and k keep
 * the patterns moving for good), split by rows over all MPI ranks, with a
 * one-row halo exchanged between neighbours every time step.  Every --every
 * steps each training rank cuts patches out of its own subdomain, the state
 * (u, v) --horizon steps earlier as input and the change since then as
 * target, and trains a small CNN on them with libpcnn: the surrogate learns
 * to jump --horizon time steps at once.  Its convolutions are unpadded, so
 * it predicts only the centre of each patch, from a margin of real
 * neighbours on every side rather than from zero padding.
 *
 * Training runs on a sub-communicator made with MPI_Comm_split: by default
 * every rank trains on its own subdomain (data parallel: each rank's patches
 * are its share of the global batch); with --train-ranks 1 only rank 0
 * trains and the others only simulate.  The simulation is coupled through
 * its halos, so it moves at the pace of the slowest rank either way.
 *
 * The error printed is the relative L2 error of the predicted change,
 * ||pred - true|| / ||true||, on patches of a column strip that training
 * never sees: 1.0 is "predict no change", 0 is perfect. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec -n 2 insitu_gray_scott [options]\n"
    "  --grid N          global grid N x N (128)\n"
    "  --steps N         simulation time steps (6000)\n"
    "  --every N         harvest samples and train every N steps (100)\n"
    "  --horizon N       the surrogate predicts N steps ahead (10)\n"
    "  --samples N       new patches per training rank per harvest (32)\n"
    "  --train-steps N   training steps per harvest (10)\n"
    "  --batch N         global training batch (32)\n"
    "  --lr X            Adam learning rate (0.002)\n"
    "  --train-ranks N   ranks that train (all); the others only simulate\n"
    "  --feed F --kill K Gray-Scott parameters (0.018, 0.051)\n"
    "  --seed N          initial condition and sampling seed (1)\n"
    "  --threads N       OpenMP threads per training rank (0 = OMP_NUM_THREADS)\n"
    "  --engine NAME     progress engine: auto, thread or nonblocking (auto)\n"
    "  --csv FILE        write the error curve as CSV\n"
    "  --plot FILE.png   draw it with examples/plot_curves.py (implies a CSV)\n";

/* Patches: the CNN's four unpadded 3x3 convolutions see MARGIN cells on
 * each side, so an input of IN x IN cells gives an output of OUT x OUT. */
enum { OUT = 16, MARGIN = 4, IN = OUT + 2 * MARGIN, CH = 2 };
enum { IN_FLOATS = CH * IN * IN, OUT_FLOATS = CH * OUT * OUT };
/* Targets are the change over the horizon divided by this, to be O(1). */
static const double TARGET_SCALE = 0.02;

/* ---- the simulation ---------------------------------------------------- */

typedef struct sim {
    int n, ny, row0;       /* global width, local rows, first global row */
    double *u, *v, *u2, *v2; /* (ny + 2) x n: rows 0 and ny + 1 are halos */
    double *u_old, *v_old;   /* owned rows at the start of the horizon */
    double du, dv, feed, kill;
    int up, down;            /* neighbour ranks (periodic) */
    double halo_seconds;     /* time spent in (and waiting for) the halo exchange */
} sim;

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

#define AT(f, y, x) ((f)[(size_t)(y) * (size_t)s->n + (size_t)(x)])

/* u = 1, v = 0 everywhere, plus small squares of (0.5, 0.25) at random
 * places.  Every rank draws the same global squares and keeps its rows. */
static void sim_init(sim *s, uint64_t seed)
{
    uint64_t r = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int y = 0; y < s->ny + 2; y++)
        for (int x = 0; x < s->n; x++) AT(s->u, y, x) = 1.0, AT(s->v, y, x) = 0.0;
    const int squares = s->n * s->n / 512, side = 6;
    for (int q = 0; q < squares; q++) {
        int cy = (int)(rng_uniform(&r) * s->n), cx = (int)(rng_uniform(&r) * s->n);
        for (int dy = 0; dy < side; dy++)
            for (int dx = 0; dx < side; dx++) {
                int gy = (cy + dy) % s->n, x = (cx + dx) % s->n, y = gy - s->row0 + 1;
                if (y < 1 || y > s->ny) continue;
                AT(s->u, y, x) = 0.5;
                AT(s->v, y, x) = 0.25;
            }
    }
}

/* Send our first owned row up and our last one down; receive the halos. */
static void sim_halo(sim *s, MPI_Comm world)
{
    double *f[2] = {s->u, s->v};
    for (int i = 0; i < 2; i++) {
        EX_MPI(MPI_Sendrecv(&AT(f[i], 1, 0), s->n, MPI_DOUBLE, s->up, i,
                            &AT(f[i], s->ny + 1, 0), s->n, MPI_DOUBLE, s->down, i, world,
                            MPI_STATUS_IGNORE));
        EX_MPI(MPI_Sendrecv(&AT(f[i], s->ny, 0), s->n, MPI_DOUBLE, s->down, 2 + i,
                            &AT(f[i], 0, 0), s->n, MPI_DOUBLE, s->up, 2 + i, world,
                            MPI_STATUS_IGNORE));
    }
}

/* One explicit Euler step (dt = 1) with the five-point Laplacian. */
static void sim_step(sim *s, MPI_Comm world)
{
    const double t0 = ex_now();
    sim_halo(s, world);
    s->halo_seconds += ex_now() - t0;
    const int n = s->n;
    for (int y = 1; y <= s->ny; y++)
        for (int x = 0; x < n; x++) {
            const int xl = x ? x - 1 : n - 1, xr = x + 1 < n ? x + 1 : 0;
            const double u = AT(s->u, y, x), v = AT(s->v, y, x);
            const double lu = AT(s->u, y - 1, x) + AT(s->u, y + 1, x) + AT(s->u, y, xl) +
                              AT(s->u, y, xr) - 4 * u;
            const double lv = AT(s->v, y - 1, x) + AT(s->v, y + 1, x) + AT(s->v, y, xl) +
                              AT(s->v, y, xr) - 4 * v;
            const double uvv = u * v * v;
            AT(s->u2, y, x) = u + s->du * lu - uvv + s->feed * (1 - u);
            AT(s->v2, y, x) = v + s->dv * lv + uvv - (s->feed + s->kill) * v;
        }
    double *t = s->u;
    s->u = s->u2, s->u2 = t;
    t = s->v;
    s->v = s->v2, s->v2 = t;
}

/* Remember the owned rows: the inputs of the next harvest. */
static void sim_snapshot(sim *s)
{
    memcpy(s->u_old, &AT(s->u, 1, 0), (size_t)s->ny * s->n * sizeof(double));
    memcpy(s->v_old, &AT(s->v, 1, 0), (size_t)s->ny * s->n * sizeof(double));
}

/* One sample at local owned row y0 and column x0 (no wrap): input the
 * IN x IN state at the snapshot, target the change of its central
 * OUT x OUT cells since then, channels (u, v), NCHW. */
static void cut_patch(const sim *s, int y0, int x0, float *in, float *target)
{
    const double *old[2] = {s->u_old, s->v_old}, *now[2] = {s->u, s->v};
    for (int c = 0; c < CH; c++) {
        for (int y = 0; y < IN; y++)
            for (int x = 0; x < IN; x++)
                in[(c * IN + y) * IN + x] = (float)old[c][(size_t)(y0 + y) * s->n + x0 + x];
        for (int y = 0; y < OUT; y++)
            for (int x = 0; x < OUT; x++) {
                const int gy = y0 + MARGIN + y, gx = x0 + MARGIN + x;
                const double change = now[c][(size_t)(gy + 1) * s->n + gx] -
                                      old[c][(size_t)gy * s->n + gx];
                target[(c * OUT + y) * OUT + x] = (float)(change / TARGET_SCALE);
            }
    }
}

/* ---- the surrogate ----------------------------------------------------- */

/* Four unpadded 3x3 convolutions, 2 -> 32 -> 32 -> 32 -> 2 channels. */
static pcnn_net *build_surrogate(pcnn_comm *comm, double lr, int batch, int threads, int seed,
                                 int engine)
{
    pcnn_net *net;
    pcnn_layer *l;
    EX_CHECK(pcnn_net_create(&net));
    EX_CHECK(pcnn_net_input(net, CH, IN, IN, &l));
    for (int i = 0; i < 3; i++) {
        EX_CHECK(pcnn_conv2d(net, l, 32, 3, 1, 0, 1, &l));
        EX_CHECK(pcnn_relu(net, l, &l));
    }
    EX_CHECK(pcnn_conv2d(net, l, CH, 3, 1, 0, 1, &l));
    EX_CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    EX_CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    EX_CHECK(pcnn_net_set_comm(net, comm));
    EX_CHECK(pcnn_net_finalize(net, batch));
    return net;
}

/* What a training rank keeps: the network, a ring buffer of its samples
 * (replay memory), staging for one batch share, and the held-out patches. */
typedef struct trainer {
    pcnn_net *net;
    MPI_Comm comm;           /* the training ranks (the host's, for its own sums) */
    int capacity, count, next;
    float *mem_x, *mem_y;
    int local_batch;
    float *bx, *by;
    int evals;
    float *ex, *ey, *pred;
    uint64_t rng;
} trainer;

static void remember(trainer *t, const float *x, const float *y)
{
    memcpy(t->mem_x + (size_t)t->next * IN_FLOATS, x, IN_FLOATS * sizeof(float));
    memcpy(t->mem_y + (size_t)t->next * OUT_FLOATS, y, OUT_FLOATS * sizeof(float));
    t->next = (t->next + 1) % t->capacity;
    if (t->count < t->capacity) t->count++;
}

/* Relative L2 error of the predicted change on the held-out strip, summed
 * over the training ranks. */
static double heldout_error(trainer *t, const sim *s, int strip_x)
{
    for (int i = 0; i < t->evals; i++) /* tiles: two columns, OUT rows apart */
        cut_patch(s, (i / 2) * OUT, strip_x + (i % 2) * OUT, t->ex + (size_t)i * IN_FLOATS,
                  t->ey + (size_t)i * OUT_FLOATS);
    const size_t count = (size_t)t->evals * OUT_FLOATS;
    EX_CHECK(pcnn_net_predict(t->net, t->evals, t->ex, t->pred, count)); /* local */
    double sums[2] = {0, 0};
    for (size_t i = 0; i < count; i++) {
        sums[0] += ((double)t->pred[i] - t->ey[i]) * ((double)t->pred[i] - t->ey[i]);
        sums[1] += (double)t->ey[i] * t->ey[i];
    }
    EX_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, t->comm));
    return sums[1] > 0 ? sqrt(sums[0] / sums[1]) : NAN;
}

/* `steps` training steps; each rank draws its batch share from its own
 * memory.  Returns the mean training loss (global, equal on all ranks). */
static double train(trainer *t, int steps)
{
    double loss_sum = 0.0;
    for (int k = 0; k < steps; k++) {
        for (int b = 0; b < t->local_batch; b++) {
            const size_t j = (size_t)(rng_uniform(&t->rng) * t->count);
            memcpy(t->bx + (size_t)b * IN_FLOATS, t->mem_x + j * IN_FLOATS,
                   IN_FLOATS * sizeof(float));
            memcpy(t->by + (size_t)b * OUT_FLOATS, t->mem_y + j * OUT_FLOATS,
                   OUT_FLOATS * sizeof(float));
        }
        float loss;
        const int nb = t->local_batch;
        EX_CHECK(pcnn_net_train_step(t->net, nb, nb ? t->bx : NULL, NULL, nb ? t->by : NULL,
                                     &loss)); /* collective over the training ranks */
        loss_sum += loss;
    }
    return steps ? loss_sum / steps : NAN;
}

int main(int argc, char **argv)
{
    /* The host owns MPI.  MPI_THREAD_MULTIPLE lets libpcnn run its
     * communication thread while this thread computes. */
    int provided, rank, ranks;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    EX_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    EX_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    ex_args_init(argc, argv, usage);
    const int n = ex_arg_int("--grid", 128), steps = ex_arg_int("--steps", 6000);
    const int every = ex_arg_int("--every", 100), horizon = ex_arg_int("--horizon", 10);
    const int samples = ex_arg_int("--samples", 32), train_steps = ex_arg_int("--train-steps", 10);
    const int batch = ex_arg_int("--batch", 32), train_ranks = ex_arg_int("--train-ranks", ranks);
    const double lr = ex_arg_double("--lr", 2e-3);
    const double feed = ex_arg_double("--feed", 0.018), kill = ex_arg_double("--kill", 0.051);
    const int seed = ex_arg_int("--seed", 1), threads = ex_arg_int("--threads", 0);
    const char *png = ex_arg_str("--plot", NULL), *csv = ex_arg_str("--csv", NULL);
    const int engine = ex_engine_option(ex_arg_str("--engine", "auto"));
    ex_args_done();
    char csv_default[1024];
    if (png && !csv) { /* the plot needs a CSV: put it next to the PNG */
        snprintf(csv_default, sizeof csv_default, "%s.csv", png);
        csv = csv_default;
    }
    if (every < 1 || horizon < 1 || horizon > every || samples < 1 || train_steps < 0 ||
        train_ranks < 1 || train_ranks > ranks || batch < train_ranks)
        ex_fail("need 1 <= horizon <= every, samples >= 1, train-ranks in [1, %d] and "
                "batch >= train-ranks", ranks);

    /* The rows are split over all ranks.  The last IN + OUT columns are the
     * held-out strip, which training patches never touch. */
    sim s = {.n = n, .du = 0.16, .dv = 0.08, .feed = feed, .kill = kill};
    s.ny = ex_share(n, ranks, rank, &s.row0);
    s.up = (rank + ranks - 1) % ranks;
    s.down = (rank + 1) % ranks;
    const int strip = IN + OUT, strip_x = n - strip;
    if (s.ny < IN || strip_x < IN)
        ex_fail("each rank needs at least %d rows and the grid at least %d columns: use a "
                "larger --grid (rank %d has %d rows)", IN, IN + strip, rank, s.ny);
    const size_t cells = (size_t)(s.ny + 2) * n;
    s.u = ex_alloc(cells * sizeof(double));
    s.v = ex_alloc(cells * sizeof(double));
    s.u2 = ex_alloc(cells * sizeof(double));
    s.v2 = ex_alloc(cells * sizeof(double));
    s.u_old = ex_alloc(cells * sizeof(double));
    s.v_old = ex_alloc(cells * sizeof(double));
    sim_init(&s, (uint64_t)seed);

    /* The training sub-communicator: ranks 0 .. train_ranks - 1. */
    const int trains = rank < train_ranks;
    trainer t = {.comm = MPI_COMM_NULL};
    EX_MPI(MPI_Comm_split(MPI_COMM_WORLD, trains ? 0 : MPI_UNDEFINED, rank, &t.comm));
    pcnn_comm *comm = NULL;
    if (trains) {
        EX_CHECK(pcnn_comm_create(t.comm, &comm)); /* collective over the training ranks */
        t.net = build_surrogate(comm, lr, batch, threads, seed, engine);
        int first;
        t.local_batch = ex_share(batch, train_ranks, rank, &first);
        t.capacity = 64 * samples;
        t.mem_x = ex_alloc((size_t)t.capacity * IN_FLOATS * sizeof(float));
        t.mem_y = ex_alloc((size_t)t.capacity * OUT_FLOATS * sizeof(float));
        t.bx = ex_alloc((size_t)t.local_batch * IN_FLOATS * sizeof(float));
        t.by = ex_alloc((size_t)t.local_batch * OUT_FLOATS * sizeof(float));
        t.evals = 2 * ((s.ny - IN) / OUT + 1);
        t.ex = ex_alloc((size_t)t.evals * IN_FLOATS * sizeof(float));
        t.ey = ex_alloc((size_t)t.evals * OUT_FLOATS * sizeof(float));
        t.pred = ex_alloc((size_t)t.evals * OUT_FLOATS * sizeof(float));
        t.rng = (uint64_t)seed * 1000003u + (uint64_t)rank + 7;
    }
    if (rank == 0) {
        printf("libpcnn %s: in-situ training of a CNN surrogate for Gray-Scott "
               "reaction-diffusion\n"
               "grid %d x %d over %d rank(s), F %.4f k %.4f; every %d steps each of %d "
               "training rank(s) adds %d patches and trains %d steps (global batch %d, Adam "
               "lr %g)\nsurrogate: (u, v) on %dx%d cells at t -> change of the central %dx%d "
               "by t + %d; held out: the last %d columns; engine: %s\n",
               pcnn_version_string(), n, n, ranks, feed, kill, every, train_ranks, samples,
               train_steps, batch, lr, IN, IN, OUT, OUT, horizon, strip,
               ex_engine_name(t.net));
        ex_print_summary(t.net, rank);
        printf("%8s %10s %12s %16s %9s %9s\n", "step", "samples", "train loss",
               "held-out error", "sim s", "train s");
        printf("(loss and error: means over the harvests since the previous line)\n");
        fflush(stdout);
    }
    FILE *curves = ex_csv_open(rank == 0 ? csv : NULL, "step,train_mse_loss,heldout_rel_l2_error");

    double t_sim = 0.0, t_train = 0.0, err = NAN, sum_loss = 0.0, sum_err = 0.0;
    int tests = 0;
    const int print_every = steps / every / 12 > 1 ? steps / every / 12 : 1;
    for (int step = 0; step <= steps; step++) {
        double t0 = ex_now();
        if (step > 0) sim_step(&s, MPI_COMM_WORLD);
        t_sim += ex_now() - t0;
        if (step > 0 && step % every == 0 && trains) {
            /* Test on the held-out strip, then learn from new patches. */
            t0 = ex_now();
            err = heldout_error(&t, &s, strip_x);
            float x[IN_FLOATS], y[OUT_FLOATS];
            for (int i = 0; i < samples; i++) {
                const int y0 = (int)(rng_uniform(&t.rng) * (s.ny - IN + 1));
                const int x0 = (int)(rng_uniform(&t.rng) * (strip_x - IN + 1));
                cut_patch(&s, y0, x0, x, y);
                remember(&t, x, y);
            }
            const double loss = train(&t, train_steps);
            t_train += ex_now() - t0;
            ex_csv_row(curves, "%d,%.6g,%.6g", step, loss, err);
            /* Print about 12 lines, each with the means since the last one. */
            sum_loss += loss, sum_err += err, tests++;
            if (rank == 0 && (step / every % print_every == 0 || step + every > steps)) {
                printf("%8d %10d %12.5f %16.4f %9.2f %9.2f\n", step,
                       step / every * samples * train_ranks, sum_loss / tests, sum_err / tests,
                       t_sim, t_train);
                fflush(stdout);
                sum_loss = sum_err = 0.0, tests = 0;
            }
        }
        /* Keep the state that the next harvest learns from. */
        if ((step + horizon) % every == 0) sim_snapshot(&s);
    }
    ex_csv_close(&curves);

    /* Where the time went on each rank (simulation time includes waiting in
     * the halo exchange for the ranks that train), then the library's
     * breakdown of the training steps. */
    double mine[3] = {t_sim, s.halo_seconds, t_train};
    double *all = ex_alloc(3 * (size_t)ranks * sizeof(double));
    EX_MPI(MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("final held-out error %.4f (1.0 = predicting no change)\n", err);
        for (int r = 0; r < ranks; r++)
            printf("rank %d: simulation %.2f s (halo exchange %.2f s), harvest + training "
                   "%.2f s%s\n", r, all[3 * r], all[3 * r + 1], all[3 * r + 2],
                   r < train_ranks ? "" : " (simulates only)");
    }
    free(all);
    if (trains) ex_print_timing(t.net, rank);

    EX_CHECK(pcnn_net_destroy(&t.net)); /* before its communicator */
    EX_CHECK(pcnn_comm_destroy(&comm));
    if (t.comm != MPI_COMM_NULL) EX_MPI(MPI_Comm_free(&t.comm));
    free(s.u), free(s.v), free(s.u2), free(s.v2), free(s.u_old), free(s.v_old);
    free(t.mem_x), free(t.mem_y), free(t.bx), free(t.by), free(t.ex), free(t.ey), free(t.pred);
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png) return ex_plot(csv, png);
    return 0;
}
