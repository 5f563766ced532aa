/* In-situ training: a simulation trains its own CNN surrogate while it runs,
 * and never waits for it.
 *
 * The simulation is Gray-Scott reaction-diffusion on a periodic N x N grid,
 *   du/dt = Du lap(u) - u v^2 + F (1 - u)
 *   dv/dt = Dv lap(v) + u v^2 - (F + k) v
 * (Du 0.16, Dv 0.08, explicit Euler with dt 1; the default F and k keep
 * the patterns moving for good), split by rows over the simulation ranks,
 * with a one-row halo exchanged between neighbours every time step.  The
 * learner ranks train a small CNN with libpcnn to jump --horizon time steps
 * at once: input the state (u, v) of a patch, target the change of its
 * centre since then.  Its convolutions are unpadded, so it predicts only
 * the centre of each patch, from a margin of real neighbours on every side.
 *
 * The two sides never wait for each other during the run:
 *   - Simulation and learning are different ranks (MPI_Comm_split): the
 *     halo exchange couples simulation ranks only, and libpcnn's collectives
 *     couple learner ranks only.
 *   - Every --every steps a simulation rank cuts --samples training patches
 *     and a few held-out ones (a column strip that training never sees) and
 *     hands them to its learner with MPI_Isend from a bounded queue of
 *     --queue buffers.  A buffer is reused once MPI_Test says its send
 *     completed; when every buffer is still in flight (the learner is
 *     behind) the harvest is dropped: the learner gets a subsample of the
 *     harvests, and the simulation goes on at once.  It calls only MPI_Test
 *     on the queue, never a wait, until its last step.
 *   - A learner drains whatever has arrived (MPI_Iprobe), tests the
 *     surrogate on the held-out patches, adds the new patches to a replay
 *     memory and trains --train-steps steps on it, collectively with the
 *     other learners; when nothing new has arrived it sleeps briefly.
 * Before that, the simulation runs --baseline-steps steps alone (no
 * harvests, learners idle) from the same initial state, so the run prints
 * "simulation steps per second without and with training" side by side.
 *
 * The error printed is the relative L2 error of the predicted change,
 * ||pred - true|| / ||true||, on the held-out patches of each harvest
 * before the learner trains on it: 1.0 is "predict no change", 0 perfect. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#define PCNN_EXPERIMENTAL       /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/example.h"

static const char usage[] =
    "usage: mpiexec.mpich -n 2 insitu_gray_scott [options]   (at least 2 ranks)\n"
    "  --grid N            global grid N x N (512)\n"
    "  --steps N           simulation time steps with training (6000)\n"
    "  --baseline-steps N  simulation steps without training first, for the\n"
    "                      steps-per-second comparison (2000; 0 = skip)\n"
    "  --every N           harvest patches every N steps (100)\n"
    "  --horizon N         the surrogate predicts N steps ahead (10)\n"
    "  --samples N         training patches per simulation rank per harvest (32)\n"
    "  --queue N           harvests in flight per simulation rank before new ones\n"
    "                      are dropped (4)\n"
    "  --learners N        ranks that learn (1); the others simulate\n"
    "  --train-steps N     training steps per learning round (10)\n"
    "  --batch N           global training batch (32)\n"
    "  --lr X              Adam learning rate (0.002)\n"
    "  --feed F --kill K   Gray-Scott parameters (0.018, 0.051)\n"
    "  --seed N            initial condition and sampling seed (1)\n"
    "  --threads N         OpenMP threads per learner rank (0 = OMP_NUM_THREADS)\n"
    "  --engine NAME       progress engine: auto, thread or nonblocking (auto)\n"
    "  --csv FILE          write the learning curve as CSV\n"
    "  --plot FILE.png     draw it with examples/plot_curves.py (implies a CSV)\n";

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
    int up, down;            /* neighbour ranks in the simulation communicator (periodic) */
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

/* ---- the hand-off ------------------------------------------------------ */

/* A harvest message, floats: step, training patches n, held-out patches m,
 * then n (input, target) pairs, then m pairs. */
enum { HDR = 3, PAIR = IN_FLOATS + OUT_FLOATS, TAG_DATA = 1, TAG_END = 2 };

/* The held-out tiles of a rank's rows: two columns of the strip, OUT rows
 * apart. */
static int heldout_count(int ny)
{
    return 2 * ((ny - IN) / OUT + 1);
}

/* A simulation rank's bounded queue of sends to its learner. */
typedef struct outbox {
    int slots, floats, learner;
    float *buf;           /* slots x floats */
    MPI_Request *req;     /* MPI_REQUEST_NULL: the slot is free */
    MPI_Status *st;       /* (a real array: GCC flags MPI_STATUSES_IGNORE here) */
    long sent, dropped;
    double seconds;       /* cutting patches, MPI_Isend, MPI_Test */
} outbox;

/* A free slot, or -1 when every one is still in flight.  Never waits. */
static int outbox_free_slot(outbox *o)
{
    for (int i = 0; i < o->slots; i++) {
        int done = 1;
        if (o->req[i] != MPI_REQUEST_NULL) EX_MPI(MPI_Test(&o->req[i], &done, MPI_STATUS_IGNORE));
        if (done) return i;
    }
    return -1;
}

/* Cut patches out of the subdomain and post their send, or drop them. */
static void harvest(outbox *o, const sim *s, int step, int samples, int strip_x,
                    uint64_t *rng)
{
    const double t0 = ex_now();
    const int slot = outbox_free_slot(o);
    if (slot < 0) { /* the learner is behind: drop this harvest, go on */
        o->dropped++;
        o->seconds += ex_now() - t0;
        return;
    }
    float *m = o->buf + (size_t)slot * o->floats, *p = m + HDR;
    const int evals = heldout_count(s->ny);
    m[0] = (float)step, m[1] = (float)samples, m[2] = (float)evals;
    for (int i = 0; i < samples; i++, p += PAIR) {
        const int y0 = (int)(rng_uniform(rng) * (s->ny - IN + 1));
        const int x0 = (int)(rng_uniform(rng) * (strip_x - IN + 1));
        cut_patch(s, y0, x0, p, p + IN_FLOATS);
    }
    for (int i = 0; i < evals; i++, p += PAIR)
        cut_patch(s, (i / 2) * OUT, strip_x + (i % 2) * OUT, p, p + IN_FLOATS);
    EX_MPI(MPI_Isend(m, (int)(p - m), MPI_FLOAT, o->learner, TAG_DATA, MPI_COMM_WORLD,
                     &o->req[slot]));
    o->sent++;
    o->seconds += ex_now() - t0;
}

/* Keep the sends moving (MPI progresses a large send only inside MPI
 * calls); completes nothing by force. */
static void outbox_progress(outbox *o)
{
    int done;
    EX_MPI(MPI_Testall(o->slots, o->req, &done, o->st));
}

/* A barrier that sleeps while it waits: MPICH's MPI_Barrier busy-polls, which
 * on an oversubscribed node would slow the simulation it waits for. */
static void sleepy_barrier(MPI_Comm comm)
{
    MPI_Request r;
    int done = 0;
    EX_MPI(MPI_Ibarrier(comm, &r));
    for (;;) {
        EX_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
        if (done) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* ---- the simulation ranks' loop ---------------------------------------- */

typedef struct sim_report {
    double baseline_rate, training_rate, halo_seconds, handoff_seconds, drain_seconds;
    long sent, dropped;
} sim_report;

/* `steps` time steps; with an outbox, a harvest every `every` steps.
 * Returns the wall time of the loop. */
static double simulate(sim *s, MPI_Comm sims, int steps, int every, int horizon, int samples,
                       int strip_x, outbox *o, uint64_t *rng)
{
    const double t0 = ex_now();
    for (int step = 1; step <= steps; step++) {
        sim_step(s, sims);
        if (o && step % every == 0) harvest(o, s, step, samples, strip_x, rng);
        else if (o) outbox_progress(o);
        if (o && (step + horizon) % every == 0) sim_snapshot(s);
    }
    return ex_now() - t0;
}

/* ---- the learner ranks' loop ------------------------------------------- */

typedef struct learner {
    pcnn_net *net;
    MPI_Comm comm;           /* the learner ranks */
    int capacity, count, next;
    float *mem_x, *mem_y;
    int local_batch;
    float *bx, *by, *msg, *pred;
    int msg_floats;
    uint64_t rng;
    long received, rounds;
    double train_seconds, idle_seconds;
} learner;

static void remember(learner *t, const float *x, const float *y)
{
    memcpy(t->mem_x + (size_t)t->next * IN_FLOATS, x, IN_FLOATS * sizeof(float));
    memcpy(t->mem_y + (size_t)t->next * OUT_FLOATS, y, OUT_FLOATS * sizeof(float));
    t->next = (t->next + 1) % t->capacity;
    if (t->count < t->capacity) t->count++;
}

/* Test on a message's held-out patches (adding to sums[0] the squared
 * error, to sums[1] the squared truth), then remember its training ones.
 * Returns the message's step. */
static int take_harvest(learner *t, const float *m, double sums[2])
{
    const int n = (int)m[1], evals = (int)m[2];
    const float *p = m + HDR;
    for (int i = 0; i < n; i++, p += PAIR) remember(t, p, p + IN_FLOATS);
    for (int i = 0; i < evals; i++, p += PAIR) {
        EX_CHECK(pcnn_net_predict(t->net, 1, p, t->pred, OUT_FLOATS)); /* local */
        for (int k = 0; k < OUT_FLOATS; k++) {
            const double d = (double)t->pred[k] - p[IN_FLOATS + k];
            sums[0] += d * d;
            sums[1] += (double)p[IN_FLOATS + k] * p[IN_FLOATS + k];
        }
    }
    return (int)m[0];
}

/* `steps` training steps, each rank drawing its batch share from its own
 * memory (none while it is empty).  Returns the mean global loss. */
static double train(learner *t, int steps)
{
    double loss_sum = 0.0;
    const int nb = t->count ? t->local_batch : 0;
    for (int k = 0; k < steps; k++) {
        for (int b = 0; b < nb; b++) {
            const size_t j = (size_t)(rng_uniform(&t->rng) * t->count);
            memcpy(t->bx + (size_t)b * IN_FLOATS, t->mem_x + j * IN_FLOATS,
                   IN_FLOATS * sizeof(float));
            memcpy(t->by + (size_t)b * OUT_FLOATS, t->mem_y + j * OUT_FLOATS,
                   OUT_FLOATS * sizeof(float));
        }
        float loss;
        EX_CHECK(pcnn_net_train_step(t->net, nb, nb ? t->bx : NULL, NULL, nb ? t->by : NULL,
                                     &loss)); /* collective over the learners */
        loss_sum += loss;
    }
    return steps ? loss_sum / steps : NAN;
}

/* Rounds until every simulation rank has ended: drain what arrived, test,
 * learn.  Rank 0 prints about `lines` lines and writes the CSV. */
static void learn(learner *t, int my_sims, int train_steps, int rank, int lines, int steps,
                  FILE *curves)
{
    int ended = 0;
    double sum_loss = 0.0, sum_err = 0.0, last_err = NAN;
    int tests = 0, last_printed = 0;
    const double t_start = ex_now();
    for (;;) {
        /* Drain: every message that has arrived, without waiting. */
        double g[5] = {0, 0, 0, 0, 0}; /* new harvests, ended, err^2, truth^2, max step */
        for (;;) {
            int flag;
            MPI_Status st;
            EX_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            if (!flag) break;
            int count;
            EX_MPI(MPI_Get_count(&st, MPI_FLOAT, &count));
            if (count > t->msg_floats) ex_fail("a harvest of %d floats, room for %d", count,
                                               t->msg_floats);
            EX_MPI(MPI_Recv(t->msg, count, MPI_FLOAT, st.MPI_SOURCE, st.MPI_TAG,
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (st.MPI_TAG == TAG_END) {
                ended++;
                continue;
            }
            const int step = take_harvest(t, t->msg, g + 2);
            if (step > g[4]) g[4] = step;
            g[0] += 1;
            t->received++;
        }
        g[1] = ended == my_sims;
        double sums[5];
        EX_MPI(MPI_Allreduce(g, sums, 4, MPI_DOUBLE, MPI_SUM, t->comm));
        EX_MPI(MPI_Allreduce(g + 4, sums + 4, 1, MPI_DOUBLE, MPI_MAX, t->comm));
        int lsize;
        EX_MPI(MPI_Comm_size(t->comm, &lsize));
        if (sums[0] == 0) {
            if (sums[1] == lsize) break; /* every simulation rank ended, all drained */
            const double t0 = ex_now();
            nanosleep(&(struct timespec){0, 500000}, NULL); /* nothing new: idle */
            t->idle_seconds += ex_now() - t0;
            continue;
        }
        const double t0 = ex_now();
        const double loss = train(t, train_steps);
        t->train_seconds += ex_now() - t0;
        t->rounds++;
        last_err = sums[3] > 0 ? sqrt(sums[2] / sums[3]) : NAN;
        ex_csv_row(curves, "%d,%.6g,%.6g", (int)sums[4], loss, last_err);
        sum_loss += loss, sum_err += last_err, tests++;
        const int step = (int)sums[4];
        if (rank == 0 && (step - last_printed >= steps / lines || step == steps)) {
            printf("%8d %8ld %12.5f %16.4f %9.2f\n", step, t->rounds, sum_loss / tests,
                   sum_err / tests, ex_now() - t_start);
            fflush(stdout);
            sum_loss = sum_err = 0.0, tests = 0, last_printed = step;
        }
    }
    if (rank == 0) printf("final held-out error %.4f (1.0 = predicting no change)\n", last_err);
}

int main(int argc, char **argv)
{
    /* The host owns MPI.  MPI_THREAD_MULTIPLE lets libpcnn run its
     * communication thread while the learner's thread computes. */
    int provided, rank, ranks;
    EX_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    EX_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    EX_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    ex_args_init(argc, argv, usage);
    const int n = ex_arg_int("--grid", 512), steps = ex_arg_int("--steps", 6000);
    const int baseline_steps = ex_arg_int("--baseline-steps", 2000);
    const int every = ex_arg_int("--every", 100), horizon = ex_arg_int("--horizon", 10);
    const int samples = ex_arg_int("--samples", 32), queue = ex_arg_int("--queue", 4);
    const int learners = ex_arg_int("--learners", 1);
    const int train_steps = ex_arg_int("--train-steps", 10), batch = ex_arg_int("--batch", 32);
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
    if (ranks < 2) ex_fail("run on at least 2 ranks: learners and simulation are separate ranks");
    if (every < 1 || horizon < 1 || horizon > every || samples < 1 || train_steps < 1 ||
        queue < 1 || learners < 1 || learners >= ranks || batch < learners || steps < every ||
        baseline_steps < 0)
        ex_fail("need 1 <= horizon <= every <= steps, samples, queue, train-steps >= 1, "
                "learners in [1, %d], batch >= learners, baseline-steps >= 0", ranks - 1);

    /* Ranks 0 .. learners - 1 learn, the others simulate. */
    const int learns = rank < learners, nsims = ranks - learners;
    MPI_Comm mine;
    EX_MPI(MPI_Comm_split(MPI_COMM_WORLD, learns, rank, &mine));
    const int strip = IN + OUT, strip_x = n - strip;
    const size_t max_rows = (size_t)(n + nsims - 1) / nsims;
    const int max_evals = heldout_count((int)max_rows);
    const int msg_floats = HDR + (samples + max_evals) * PAIR;

    sim s = {.n = n, .du = 0.16, .dv = 0.08, .feed = feed, .kill = kill};
    outbox o = {0};
    learner t = {.comm = MPI_COMM_NULL};
    pcnn_comm *comm = NULL;
    uint64_t rng = (uint64_t)seed * 1000003u + (uint64_t)rank + 7;
    if (!learns) {
        const int me = rank - learners;
        s.ny = ex_share(n, nsims, me, &s.row0);
        s.up = (me + nsims - 1) % nsims;
        s.down = (me + 1) % nsims;
        if (s.ny < IN || strip_x < IN)
            ex_fail("each simulation rank needs at least %d rows and the grid at least %d "
                    "columns: use a larger --grid (rank %d has %d rows)", IN, IN + strip, rank,
                    s.ny);
        const size_t cells = (size_t)(s.ny + 2) * n;
        s.u = ex_alloc(cells * sizeof(double));
        s.v = ex_alloc(cells * sizeof(double));
        s.u2 = ex_alloc(cells * sizeof(double));
        s.v2 = ex_alloc(cells * sizeof(double));
        s.u_old = ex_alloc(cells * sizeof(double));
        s.v_old = ex_alloc(cells * sizeof(double));
        o.slots = queue, o.floats = msg_floats, o.learner = me % learners;
        o.buf = ex_alloc((size_t)queue * msg_floats * sizeof(float));
        o.req = ex_alloc((size_t)queue * sizeof *o.req);
        o.st = ex_alloc((size_t)queue * sizeof *o.st);
        for (int i = 0; i < queue; i++) o.req[i] = MPI_REQUEST_NULL;
    } else {
        t.comm = mine;
        EX_CHECK(pcnn_comm_create(t.comm, &comm)); /* collective over the learners */
        t.net = build_surrogate(comm, lr, batch, threads, seed, engine);
        int first;
        t.local_batch = ex_share(batch, learners, rank, &first);
        t.capacity = 64 * samples;
        t.mem_x = ex_alloc((size_t)t.capacity * IN_FLOATS * sizeof(float));
        t.mem_y = ex_alloc((size_t)t.capacity * OUT_FLOATS * sizeof(float));
        t.bx = ex_alloc((size_t)(t.local_batch ? t.local_batch : 1) * IN_FLOATS * sizeof(float));
        t.by = ex_alloc((size_t)(t.local_batch ? t.local_batch : 1) * OUT_FLOATS * sizeof(float));
        t.msg_floats = msg_floats;
        t.msg = ex_alloc((size_t)msg_floats * sizeof(float));
        t.pred = ex_alloc(OUT_FLOATS * sizeof(float));
        t.rng = rng;
    }
    if (rank == 0) {
        printf("libpcnn %s: in-situ training of a CNN surrogate for Gray-Scott "
               "reaction-diffusion\n"
               "grid %d x %d on %d simulation rank(s), F %.4f k %.4f; %d learner rank(s) "
               "(global batch %d, Adam lr %g, %d steps per round)\n"
               "every %d steps each simulation rank hands %d patches to its learner through a "
               "queue of %d nonblocking sends (dropped when full)\nsurrogate: (u, v) on %dx%d "
               "cells at t -> change of the central %dx%d by t + %d; held out: the last %d "
               "columns; engine: %s\n",
               pcnn_version_string(), n, n, nsims, feed, kill, learners, batch, lr,
               train_steps, every, samples, queue, IN, IN, OUT, OUT, horizon, strip,
               ex_engine_name(t.net));
        ex_print_summary(t.net, rank);
        fflush(stdout);
    }

    /* 1. The simulation alone: its speed without training. */
    sim_report rep = {0};
    if (baseline_steps > 0) {
        if (rank == 0) {
            printf("simulating %d steps without training...\n", baseline_steps);
            fflush(stdout);
        }
        if (!learns) {
            sim_init(&s, (uint64_t)seed);
            rep.baseline_rate = baseline_steps / simulate(&s, mine, baseline_steps, every,
                                                          horizon, samples, strip_x, NULL, &rng);
            s.halo_seconds = 0.0;
        }
        sleepy_barrier(MPI_COMM_WORLD); /* between the phases only */
    }

    /* 2. The same simulation while the learners train on its harvests. */
    if (rank == 0) {
        printf("simulating %d steps with training:\n%8s %8s %12s %16s %9s\n", steps, "step",
               "rounds", "train loss", "held-out error", "learner s");
        printf("(loss and error: means over the rounds since the previous line)\n");
        fflush(stdout);
    }
    FILE *curves = ex_csv_open(rank == 0 ? csv : NULL, "step,train_mse_loss,heldout_rel_l2_error");
    if (!learns) {
        sim_init(&s, (uint64_t)seed);
        rep.training_rate = steps / simulate(&s, mine, steps, every, horizon, samples, strip_x,
                                             &o, &rng);
        /* The simulation is over: now it may wait for the last sends. */
        const double t0 = ex_now();
        float end = 0;
        EX_MPI(MPI_Send(&end, 1, MPI_FLOAT, o.learner, TAG_END, MPI_COMM_WORLD));
        EX_MPI(MPI_Waitall(o.slots, o.req, o.st));
        rep.drain_seconds = ex_now() - t0;
        rep.halo_seconds = s.halo_seconds, rep.handoff_seconds = o.seconds;
        rep.sent = o.sent, rep.dropped = o.dropped;
    } else {
        int my_sims = 0;
        for (int k = 0; k < nsims; k++) my_sims += k % learners == rank;
        learn(&t, my_sims, train_steps, rank, 12, steps, curves);
    }
    ex_csv_close(&curves);

    /* The figure: simulation steps per second without and with training. */
    enum { NR = 11 };
    double mine_r[NR] = {rep.baseline_rate, rep.training_rate, rep.halo_seconds,
                         rep.handoff_seconds, rep.drain_seconds, (double)rep.sent,
                         (double)rep.dropped, t.train_seconds, t.idle_seconds,
                         (double)t.received, (double)t.rounds};
    double *all = ex_alloc(NR * (size_t)ranks * sizeof(double));
    EX_MPI(MPI_Gather(mine_r, NR, MPI_DOUBLE, all, NR, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        for (int r = 0; r < ranks; r++) {
            const double *a = all + NR * r;
            if (r < learners) {
                printf("rank %d (learner): %.0f harvests in %.0f rounds, training %.2f s, idle "
                       "(nothing new) %.2f s\n", r, a[9], a[10], a[7], a[8]);
                continue;
            }
            printf("rank %d (simulation): %.0f steps/s without training, %.0f steps/s with "
                   "training (%.2fx); halo exchange %.2f s, hand-off %.3f s, harvests sent "
                   "%.0f, dropped %.0f (learner behind), final drain %.2f s\n",
                   r, a[0], a[1], a[0] > 0 ? a[1] / a[0] : NAN, a[2], a[3], a[5], a[6], a[4]);
        }
        double base = 0, with = 0;
        for (int r = learners; r < ranks; r++) base += all[NR * r], with += all[NR * r + 1];
        base /= nsims, with /= nsims;
        if (baseline_steps > 0)
            printf("simulation steps per second: %.0f without training, %.0f with training "
                   "(%.2fx)\n", base, with, with / base);
        else
            printf("simulation steps per second: %.0f with training (no baseline run)\n", with);
        fflush(stdout);
    }
    free(all);
    if (learns) ex_print_timing(t.net, rank);

    if (learns) {
        EX_CHECK(pcnn_net_destroy(&t.net)); /* before its communicator */
        EX_CHECK(pcnn_comm_destroy(&comm));
    }
    EX_MPI(MPI_Comm_free(&mine));
    free(s.u), free(s.v), free(s.u2), free(s.v2), free(s.u_old), free(s.v_old);
    free(o.buf), free(o.req), free(o.st);
    free(t.mem_x), free(t.mem_y), free(t.bx), free(t.by), free(t.msg), free(t.pred);
    EX_MPI(MPI_Finalize());
    if (rank == 0 && png) return ex_plot(csv, png);
    return 0;
}
