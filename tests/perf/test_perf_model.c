/* The performance model's pieces against hand computations: the
 * collective formulas (units, P = 1, seed 004's ring all-reduce,
 * monotone in bytes, the measured curve and the fit) and the step
 * simulator on synthetic per-layer tables, with and without overlap. */
#define PCNN_EXPERIMENTAL /* pcnn_collective: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>

#include "../common/expect.h"
#include "pcnn.h"
#include "perf/collectives.h"
#include "perf/sim.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

static void test_units(void)
{
    perf_link k;
    perf_link_defaults(&k);
    k.alpha[PCNN_COLL_ALLREDUCE] = 1e-5;
    k.beta[PCNN_COLL_ALLREDUCE] = 1e-9; /* s per byte: 1 GB/s */
    k.gamma = 2.5e-10;
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        EXPECT(perf_coll_time(&k, (pcnn_collective)c, 1, 1e6, 0, -1) == 0,
               "collective %d on one rank costs nothing", c);
        EXPECT(perf_coll_time(&k, (pcnn_collective)c, 8, 0, 0, -1) == 0,
               "collective %d of 0 bytes costs nothing", c);
    }
    /* Seed 004 eq. 1 at P = 2 (ring and Rabenseifner coincide):
     * 2 (P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma. */
    const double n = 8 << 20;
    const double ring2 = 2 * 1e-5 + 2 * 0.5 * n * 1e-9 + 0.5 * n * 2.5e-10;
    EXPECT(close_to(perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 2, n, 0, -1), ring2),
           "ring all-reduce P=2: %.9g vs %.9g by hand",
           perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 2, n, 0, -1), ring2);
    /* Rabenseifner at P = 8: 2 log2 P alpha + 2 (P-1)/P n beta + (P-1)/P n gamma. */
    const double rab8 = 6 * 1e-5 + 2 * 7.0 / 8 * n * 1e-9 + 7.0 / 8 * n * 2.5e-10;
    EXPECT(close_to(perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 8, n, 0, -1), rab8),
           "Rabenseifner P=8: %.9g vs %.9g", perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 8, n, 0, -1),
           rab8);
    /* A 10 Gbit/s link is beta = 0.8 ns per byte. */
    const double ag = perf_coll_time(&k, PCNN_COLL_ALLGATHER, 4, n, 8e-9 / 10, 0);
    EXPECT(close_to(ag, 3.0 / 4 * n * 0.8e-9), "all-gather at 10 Gbit/s, no latency: %.9g", ag);
    /* Monotone in bytes for every collective and rank count. */
    const int Ps[] = {2, 3, 5, 8, 64, 1000, 4096};
    for (int c = 0; c < PERF_COLLECTIVES; c++)
        for (int p = 0; p < 7; p++) {
            double prev = 0;
            int ok = 1;
            for (double b = 1; b < 4e9; b *= 1.07) {
                const double t = perf_coll_time(&k, (pcnn_collective)c, Ps[p], b, 0, -1);
                if (t < prev) ok = 0;
                prev = t;
            }
            EXPECT(ok, "collective %d on %d ranks is monotone in bytes", c, Ps[p]);
        }
    /* Without latency the switch to Rabenseifner past 2 KiB once made a
     * larger all-reduce cheaper (P = 64: 2042 B 128 us, 2063 B 92 us). */
    k.alpha[PCNN_COLL_ALLREDUCE] = 0;
    for (int p = 0; p < 7; p++) {
        const double below = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, Ps[p], 2040, 0, -1);
        const double above = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, Ps[p], 2070, 0, -1);
        EXPECT(above >= below, "all-reduce on %d ranks, no latency: 2070 B %g s >= 2040 B %g s",
               Ps[p], above, below);
    }
}

static void test_curve_and_fit(void)
{
    perf_link k;
    perf_link_defaults(&k);
    k.ranks = 4;
    k.gamma = 1e-10;
    perf_curve *cv = &k.curve[PCNN_COLL_ALLREDUCE];
    /* A curve made by a known model: the fit must find it back. */
    const double alpha = 3e-6, beta = 2e-10;
    for (int i = 0; i < 10; i++) {
        double t[3];
        cv->bytes[i] = 4096.0 * pow(4, i);
        perf_coll_terms(PCNN_COLL_ALLREDUCE, 4, cv->bytes[i], t);
        cv->seconds[i] = t[0] * alpha + t[1] * beta + t[2] * k.gamma;
    }
    cv->count = 10;
    perf_coll_fit(&k, PCNN_COLL_ALLREDUCE);
    EXPECT(fabs(k.alpha[PCNN_COLL_ALLREDUCE] - alpha) < 1e-6 * alpha, "fit alpha %g",
           k.alpha[PCNN_COLL_ALLREDUCE]);
    EXPECT(fabs(k.beta[PCNN_COLL_ALLREDUCE] - beta) < 1e-6 * beta, "fit beta %g",
           k.beta[PCNN_COLL_ALLREDUCE]);
    /* The measured curve rules at its ranks and sizes (a step MPICH's
     * switch would make), not elsewhere or under a link override. */
    cv->seconds[5] *= 3;
    const double at = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 4, cv->bytes[5], 0, -1);
    EXPECT(close_to(at, cv->seconds[5]), "curve point %g vs %g", at, cv->seconds[5]);
    const double other = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 8, cv->bytes[5], 0, -1);
    EXPECT(other < cv->seconds[5], "other ranks use the formula: %g", other);
    const double mid = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 4, 2 * cv->bytes[5], 0, -1);
    EXPECT(mid > fmin(cv->seconds[5], cv->seconds[6]) && mid < fmax(cv->seconds[5], cv->seconds[6]),
           "interpolated between points: %g", mid);
    /* A noisy point below an earlier one, and sizes below the first: a
     * larger message never costs less. */
    const double kept = cv->seconds[3];
    cv->seconds[3] = 0.5 * cv->seconds[2];
    int rises = 1;
    double prev = 0;
    for (double b = 1; b < cv->bytes[9]; b *= 1.05) {
        const double t = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 4, b, 0, -1);
        rises = rises && t >= prev;
        prev = t;
    }
    EXPECT(rises, "the measured curve, a dip and below its first size: monotone in bytes");
    cv->seconds[3] = kept;
    /* Past the last point (a slow link's sweep stops early): the last
     * segment's straight line, not the fit over every point. */
    cv->seconds[9] *= 2;
    const double far = 8 * cv->bytes[9];
    const double slope = (cv->seconds[9] - cv->seconds[8]) / (cv->bytes[9] - cv->bytes[8]);
    const double want = cv->seconds[9] + (far - cv->bytes[9]) * slope;
    const double past = perf_coll_time(&k, PCNN_COLL_ALLREDUCE, 4, far, 0, -1);
    EXPECT(close_to(past, want), "past the curve along its last segment: %g vs %g", past, want);
}

/* Two layers after the input: forward 1 and 2, backward 3 and 4. */
static sim_layer L3[3] = {{0}, {.fwd = 1, .bwd = 3, .weight = 1},
                          {.fwd = 2, .bwd = 4, .weight = 1}};

/* The contention factor by update size: log-linear between the sizes
 * calibrated (2^18, 2^20, 2^21, 2^22 parameters), the nearest beyond. */
static void test_contention(void)
{
    perf_link k;
    perf_link_defaults(&k);
    EXPECT(perf_contention(&k, 1e6) == 1, "defaults: no contention");
    const double f[PERF_CONTENTION_SIZES] = {1.0, 1.2, 1.4, 2.0};
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) k.mem_contention[i] = f[i];
    EXPECT(perf_contention(&k, 0) == 1 && perf_contention(&k, 1000) == 1, "below the smallest");
    EXPECT(close_to(perf_contention(&k, 1 << 19), 1.1), "2^19: halfway from 2^18 to 2^20 (%g)",
           perf_contention(&k, 1 << 19));
    EXPECT(close_to(perf_contention(&k, 1 << 21), 1.4), "2^21: calibrated");
    EXPECT(close_to(perf_contention(&k, 3 << 20), 1.4 + 0.6 * (log(3.0) - log(2.0)) / log(2.0)),
           "3 Mi: between 2^21 and 2^22 (%g)", perf_contention(&k, 3 << 20));
    EXPECT(perf_contention(&k, 1e9) == 2.0, "beyond the largest");
}

static void test_sim(void)
{
    double per[3][SIM_KINDS];
    /* One rank: a sum. */
    sim_bucket one = {.first_layer = 1, .last_layer = 2, .update = 0.5};
    sim_input in = {.num_layers = 3, .layers = L3, .num_buckets = 1, .buckets = &one,
                    .overlap = true, .parallel = false, .progress = 1, .pre = 0.1,
                    .mid = 0.2, .post = 0.3};
    double t = sim_step(&in, per);
    EXPECT(close_to(t, 0.6 + 10 + 0.5), "one rank: %g", t);
    EXPECT(close_to(per[1][SIM_UPDATE], 0.25) && close_to(per[2][SIM_UPDATE], 0.25),
           "update split by parameters: %g %g", per[1][SIM_UPDATE], per[2][SIM_UPDATE]);
    /* Two buckets, no overlap: everything in turn. */
    sim_bucket two[2] = {{.first_layer = 1, .last_layer = 1, .reduce_comm = 2, .update = 0.5},
                         {.first_layer = 2, .last_layer = 2, .reduce_comm = 1, .update = 0.25}};
    in = (sim_input){.num_layers = 3, .layers = L3, .num_buckets = 2, .buckets = two,
                     .overlap = false, .parallel = true, .progress = 1};
    t = sim_step(&in, per);
    EXPECT(close_to(t, 10 + 3 + 0.75), "no overlap: %g", t);
    EXPECT(close_to(per[1][SIM_EXPOSED], 2) && close_to(per[2][SIM_EXPOSED], 1),
           "no overlap exposes everything: %g %g", per[1][SIM_EXPOSED], per[2][SIM_EXPOSED]);
    /* Overlap, communication thread: layer 2's reduction (1) hides behind
     * layer 1's backward (7..10); layer 1's (2) posted at 10, layer 2's
     * update at the poll (10..10.25), then 1.75 waited, update 0.5. */
    in.overlap = true;
    t = sim_step(&in, per);
    EXPECT(close_to(t, 12.5), "overlap: %g (by hand 12.5)", t);
    EXPECT(close_to(per[1][SIM_EXPOSED], 1.75) && close_to(per[2][SIM_EXPOSED], 0),
           "overlap exposed %g %g (by hand 1.75, 0)", per[1][SIM_EXPOSED], per[2][SIM_EXPOSED]);
    EXPECT(close_to(per[1][SIM_COMM], 2) && close_to(per[2][SIM_COMM], 1), "comm %g %g",
           per[1][SIM_COMM], per[2][SIM_COMM]);
    /* Nonblocking engine at half speed while computing: layer 2's
     * reduction ends at 9, layer 1's has 1.875 left after the update. */
    in.progress = 0.5;
    t = sim_step(&in, per);
    EXPECT(close_to(t, 12.625), "nonblocking: %g (by hand 12.625)", t);
    /* Nonblocking engine that progresses only at the polls between layers,
     * 0.5 s of link work each: layer 2's reduction is done at the poll
     * after layer 1's backward, updated (10..10.25); layer 1's (2) waited
     * whole: 12.25, update 12.75. */
    in.progress = 0;
    in.poll_work = 0.5;
    t = sim_step(&in, per);
    EXPECT(close_to(t, 12.75), "polled: %g (by hand 12.75)", t);
    EXPECT(close_to(per[1][SIM_EXPOSED], 2), "polled exposed %g (by hand 2)", per[1][SIM_EXPOSED]);
    /* The same when the polling thread makes the copies itself (shared
     * memory): the link work done in polls is its time too. */
    in.poll_cpu = 1;
    const double copying = sim_step(&in, per);
    EXPECT(close_to(copying, 13.75), "polls that copy: %g (by hand 13.75: the two polls' "
           "0.5 on the thread)", copying);
    in.poll_cpu = 0;
    in.poll_work = 0;
    /* An all-gather (1.5) left in flight at the end of the step is waited
     * for by layer 1's next forward: steady step 14 (by hand). */
    in.progress = 1;
    two[0].gather_comm = 1.5;
    t = sim_step(&in, per);
    EXPECT(close_to(t, 14.0), "all-gather into the next forward: %g (by hand 14)", t);
    EXPECT(close_to(per[1][SIM_EXPOSED], 3.25), "exposed %g (by hand 1.5 + 1.75)",
           per[1][SIM_EXPOSED]);
    /* Without overlap the all-gather is waited for at once. */
    in.overlap = false;
    t = sim_step(&in, per);
    EXPECT(close_to(t, 10 + 3 + 0.75 + 1.5), "no overlap with all-gather: %g", t);
}

int main(void)
{
    test_contention();
    test_units();
    test_curve_and_fit();
    test_sim();
    if (failures) printf("%d failures\n", failures);
    else printf("perf model: all checks passed\n");
    return failures ? 1 : 0;
}
