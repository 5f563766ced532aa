/* The scheduling policy on scripted numbers: sequences of (training loss,
 * distance ||w_0 - w_i||) must give exactly the K, batch and learning-rate
 * decisions of Algorithm 3 and section 5.1.5, and the degree-of-parallelism
 * rule exactly the shares of section 5.2.1. */
#include <math.h>
#include <stdio.h>

#include "../common/expect.h"
#include "parallel/decomp.h"
#include "sched/sched.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

/* One scripted epoch and the decisions expected after it. */
typedef struct step {
    double loss, distance;
    long k;          /* K after the epoch (0: unknown) */
    int batch;       /* B of the next epoch */
    double lr;       /* learning rate of the next epoch, before warm-up */
    unsigned events;
} step;

enum { FOUND = PCNN_SCHED_EVENT_INTERVAL_FOUND, GREW = PCNN_SCHED_EVENT_BATCH_GREW,
       DECAYED = PCNN_SCHED_EVENT_LR_DECAYED };

static void run_script(const char *name, const sched_config *c, double f0, const step *steps,
                       int count)
{
    sched_state s = {0};
    sched_state_init(c, &s);
    s.initial_loss = f0;
    int before = failures;
    for (int i = 0; i < count; i++) {
        const step *e = &steps[i];
        pcnn_status st = sched_end_epoch(c, &s, e->loss, e->distance, "test");
        EXPECT(st == PCNN_OK, "%s epoch %d: status %d", name, i + 1, (int)st);
        const double theta = (f0 - e->loss) / e->distance;
        EXPECT(s.epoch == i + 1, "%s: epoch counter %ld", name, s.epoch);
        EXPECT(s.theta[i] == theta, "%s epoch %d: theta %.17g, expected %.17g", name, i + 1,
               s.theta[i], theta);
        EXPECT(s.interval == e->k, "%s epoch %d: K %ld, expected %ld", name, i + 1, s.interval,
               e->k);
        EXPECT(s.batch == e->batch, "%s epoch %d: B %d, expected %d", name, i + 1, s.batch,
               e->batch);
        EXPECT(close_to(s.lr, e->lr), "%s epoch %d: lr %.17g, expected %.17g", name, i + 1, s.lr,
               e->lr);
        EXPECT(s.events == e->events, "%s epoch %d: events %u, expected %u", name, i + 1,
               s.events, e->events);
    }
    sched_state_free(&s);
    printf("%s %s (%d epochs)\n", failures == before ? "PASS" : "FAIL", name, count);
}

/* K from theta, linear rule, growth to B_m, then two plateaus. */
static void script_theta_then_plateaus(void)
{
    sched_config c;
    sched_config_default(&c, 32, 256, 0.05);
    const step steps[] = {
        {1.30, 1.0, 0, 32, 0.05, 0},           /* theta 1.0 */
        {0.80, 2.0, 0, 32, 0.05, 0},           /* 0.75: moved 25 % */
        {0.60, 2.5, 3, 64, 0.10, FOUND | GREW}, /* 0.68: moved 9.3 % < 10 %: K = 3 = n */
        {0.50, 3.0, 3, 64, 0.10, 0},
        {0.45, 3.2, 3, 64, 0.10, 0},
        {0.40, 3.4, 3, 128, 0.20, GREW},       /* n = 6 */
        {0.36, 3.6, 3, 128, 0.20, 0},
        {0.33, 3.7, 3, 128, 0.20, 0},
        {0.30, 3.8, 3, 256, 0.40, GREW},       /* n = 9: B reaches B_m */
        {0.28, 3.9, 3, 256, 0.40, 0},
        {0.27, 4.0, 3, 256, 0.40, 0},
        {0.26, 4.1, 3, 256, 0.40, 0},          /* n = 12: B = B_m, no growth */
        {0.2590, 4.2, 3, 256, 0.40, 0},        /* < 1 % better: stale 1 */
        {0.2585, 4.3, 3, 256, 0.40, 0},        /* stale 2 */
        {0.2580, 4.4, 3, 256, 0.005, DECAYED}, /* stale 3: first plateau, mu_0 * beta */
        {0.2000, 4.5, 3, 256, 0.005, 0},       /* improves */
        {0.1990, 4.6, 3, 256, 0.005, 0},
        {0.1985, 4.7, 3, 256, 0.005, 0},
        {0.1990, 4.8, 3, 256, 0.0005, DECAYED}, /* later plateau: times beta */
    };
    run_script("theta_K_linear_growth_plateaus", &c, 2.3, steps,
               (int)(sizeof steps / sizeof steps[0]));
}

/* A change of exactly the threshold is not "less than" it (values chosen
 * to be exact in binary). */
static void script_threshold_is_strict(void)
{
    sched_config c;
    sched_config_default(&c, 16, 64, 0.1);
    c.theta_threshold = 0.125;
    c.plateau_epochs = 0;
    const step steps[] = {
        {1.0, 1.0, 0, 16, 0.1, 0},                 /* theta 1 */
        {0.25, 2.0, 0, 16, 0.1, 0},                /* 0.875: change exactly 0.125 */
        {0.4375, 2.0, 3, 32, 0.2, FOUND | GREW},   /* 0.78125: change 0.107 < 0.125 */
        {0.5, 4.0, 3, 32, 0.2, 0},
        {0.5, 4.0, 3, 32, 0.2, 0},
        {0.5, 4.0, 3, 64, 0.4, GREW},
        {0.5, 4.0, 3, 64, 0.4, 0},
        {0.5, 4.0, 3, 64, 0.4, 0},
        {0.5, 4.0, 3, 64, 0.4, 0},                 /* B_m: stays */
    };
    run_script("threshold_strict", &c, 2.0, steps, (int)(sizeof steps / sizeof steps[0]));
}

/* K given, root rule, growth 3 clamped at B_m. */
static void script_fixed_k_root_rule(void)
{
    sched_config c;
    sched_config_default(&c, 10, 100, 0.01);
    c.interval = 2;
    c.growth = 3;
    c.lr_rule = PCNN_SCHED_LR_ROOT;
    c.plateau_epochs = 0;
    const step steps[] = {
        {2.0, 1.0, 2, 10, 0.01, 0},
        {1.5, 2.0, 2, 30, 0.01 * sqrt(3.0), GREW},
        {1.0, 3.0, 2, 30, 0.01 * sqrt(3.0), 0},
        {0.9, 4.0, 2, 90, 0.01 * 3.0, GREW},
        {0.8, 5.0, 2, 90, 0.03, 0},
        {0.7, 6.0, 2, 100, 0.01 * sqrt(10.0), GREW}, /* 270 clamped to B_m */
        {0.6, 7.0, 2, 100, 0.01 * sqrt(10.0), 0},
        {0.5, 8.0, 2, 100, 0.01 * sqrt(10.0), 0},
    };
    run_script("fixed_K_root_rule_clamp", &c, 2.5, steps, (int)(sizeof steps / sizeof steps[0]));
}

/* A plateau before B_m.  Growth restarts the plateau rule (the epoch
 * after it sets the new best), and later growth leaves the decayed
 * learning rate alone. */
static void script_decay_before_max(void)
{
    sched_config c;
    sched_config_default(&c, 32, 256, 0.05);
    c.interval = 3;
    c.plateau_epochs = 1;
    const step steps[] = {
        {1.0, 1.0, 3, 32, 0.05, 0},           /* best 1.0 */
        {0.5, 2.0, 3, 32, 0.05, 0},           /* best 0.5 */
        {0.5, 3.0, 3, 64, 0.1, GREW},         /* flat, but growth restarts the rule */
        {0.5, 4.0, 3, 64, 0.1, 0},            /* best 0.5 under (64, 0.1) */
        {0.5, 4.5, 3, 64, 0.005, DECAYED},    /* plateau before B_m: mu_0 * beta */
        {0.3, 5.0, 3, 128, 0.005, GREW},      /* growth keeps the decayed rate */
        {0.3, 6.0, 3, 128, 0.005, 0},
        {0.3, 7.0, 3, 128, 0.0005, DECAYED},
        {0.2, 7.5, 3, 256, 0.0005, GREW},
        {0.2, 8.0, 3, 256, 0.0005, 0},
        {0.2, 8.5, 3, 256, 0.00005, DECAYED},
    };
    run_script("decay_before_max", &c, 2.0, steps, (int)(sizeof steps / sizeof steps[0]));
}

/* Warm-up ramps the learning rate and keeps K from being fixed on warm-up
 * epochs even when their theta is flat. */
static void script_warmup(void)
{
    sched_config c;
    sched_config_default(&c, 8, 64, 0.3);
    c.warmup_epochs = 3;
    c.plateau_epochs = 0;
    sched_state s = {0};
    sched_state_init(&c, &s);
    s.initial_loss = 3.0;
    const double want_lr[] = {0.1, 0.2, 0.3, 0.3, 0.3};
    const double loss[] = {2.0, 1.0, 0.0, -1.0, -1.04};  /* theta 1, 1, 1, 1, 1.01 */
    const double dist[] = {1.0, 2.0, 3.0, 4.0, 4.0};
    const long want_k[] = {0, 0, 0, 0, 5};
    int before = failures;
    for (int i = 0; i < 5; i++) {
        EXPECT(close_to(sched_epoch_lr(&c, &s), want_lr[i]), "warm-up epoch %d: lr %g", i + 1,
               sched_epoch_lr(&c, &s));
        EXPECT(sched_end_epoch(&c, &s, loss[i], dist[i], "test") == PCNN_OK, "warm-up end");
        EXPECT(s.interval == want_k[i], "warm-up epoch %d: K %ld, expected %ld", i + 1,
               s.interval, want_k[i]);
    }
    EXPECT(s.batch == 16, "warm-up: K = 5 grows at n = 5, B %d", s.batch);
    sched_state_free(&s);

    /* Warm-up epochs do not count for the plateau rule either. */
    c.plateau_epochs = 1;
    c.interval = 100;
    sched_state_init(&c, &s);
    s.initial_loss = 3.0;
    const unsigned want_events[] = {0, 0, 0, 0, DECAYED};
    for (int i = 0; i < 5; i++) {
        EXPECT(sched_end_epoch(&c, &s, 1.0, 1.0, "test") == PCNN_OK, "warm-up end");
        EXPECT(s.events == want_events[i], "flat loss, epoch %d: events %u", i + 1, s.events);
    }
    sched_state_free(&s);
    printf("%s warmup\n", failures == before ? "PASS" : "FAIL");
}

/* Undefined or unusable thetas never fix K; errors leave the state alone. */
static void script_degenerate(void)
{
    sched_config c;
    sched_config_default(&c, 4, 8, 0.1);
    c.plateau_epochs = 0;
    sched_state s = {0};
    sched_state_init(&c, &s);
    int before = failures;
    EXPECT(sched_end_epoch(&c, &s, 1.0, 1.0, "test") == PCNN_ERR_INVALID_STATE,
           "F(w_0) unknown must be INVALID_STATE");
    s.initial_loss = 1.0;
    EXPECT(sched_end_epoch(&c, &s, NAN, 1.0, "test") == PCNN_ERR_NUMERIC, "NaN loss");
    EXPECT(s.epoch == 0, "a failed epoch is not counted");
    EXPECT(sched_end_epoch(&c, &s, 1.0, 0.0, "test") == PCNN_OK && isnan(s.theta[0]),
           "distance 0: theta NaN");
    EXPECT(sched_end_epoch(&c, &s, 1.0, 0.0, "test") == PCNN_OK && s.interval == 0,
           "NaN thetas do not fix K");
    EXPECT(sched_end_epoch(&c, &s, 1.0, 1.0, "test") == PCNN_OK && s.theta[2] == 0.0,
           "theta 0");
    EXPECT(sched_end_epoch(&c, &s, 1.0, 2.0, "test") == PCNN_OK && s.interval == 0,
           "a previous theta of 0 does not fix K");
    EXPECT(sched_end_epoch(&c, &s, 2.0, 1.0, "test") == PCNN_OK && s.theta[4] == -1.0,
           "a loss above F(w_0) gives a negative theta");
    EXPECT(sched_end_epoch(&c, &s, 2.05, 1.0, "test") == PCNN_OK && s.interval == 6 &&
               s.batch == 8,
           "negative thetas that settle fix K (K %ld, B %d)", s.interval, s.batch);
    sched_state_free(&s);
    printf("%s degenerate_thetas\n", failures == before ? "PASS" : "FAIL");
}

/* Section 5.2.1: who computes, and what the network must be planned for. */
static void degree_of_parallelism(void)
{
    int before = failures;
    const int cases[][4] = {/* count, P, m, active */
                            {1, 4, 2, 1}, {3, 4, 2, 1}, {4, 4, 2, 2}, {7, 4, 2, 3},
                            {8, 4, 2, 4}, {100, 4, 2, 4}, {5, 4, 0, 4}, {9, 3, 3, 3},
                            {8, 3, 3, 2}, {1, 1, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        EXPECT(decomp_active_ranks(cases[i][0], cases[i][1], cases[i][2]) == cases[i][3],
               "active ranks of %d samples, P %d, m %d: %d, expected %d", cases[i][0],
               cases[i][1], cases[i][2], decomp_active_ranks(cases[i][0], cases[i][1], cases[i][2]),
               cases[i][3]);
    /* Shares tile the batch in rank order; idle ranks get nothing. */
    for (int count = 1; count <= 40; count++)
        for (int P = 1; P <= 5; P++) {
            long next = 0;
            int idle = 0;
            for (int r = 0; r < P; r++) {
                long first;
                int n = decomp_active_share(count, P, r, 2, &first);
                if (n == 0) {
                    idle++;
                    continue;
                }
                EXPECT(first == next, "share of rank %d of %d (count %d) starts at %ld, not %ld",
                       r, P, count, first, next);
                EXPECT(count < 2 || n >= 2, "rank %d of %d computes %d < 2 of %d samples", r, P,
                       n, count);
                next = first + n;
            }
            EXPECT(next == count, "shares of %d samples over %d ranks sum to %ld", count, P, next);
            EXPECT(idle == P - decomp_active_ranks(count, P, 2), "idle ranks for %d over %d",
                   count, P);
        }
    EXPECT(decomp_largest_share(16, 4, 2) == 4, "largest local (16, 4, 2) = %d",
           decomp_largest_share(16, 4, 2));
    EXPECT(decomp_largest_share(4, 4, 2) == 3, "largest local (4, 4, 2) = %d",
           decomp_largest_share(4, 4, 2));
    EXPECT(decomp_largest_share(1024, 2, 2) == 512, "largest local (1024, 2, 2)");
    EXPECT(decomp_largest_share(5, 4, 0) == 2, "largest local with m = 0");
    printf("%s degree_of_parallelism\n", failures == before ? "PASS" : "FAIL");
}

int main(void)
{
    script_theta_then_plateaus();
    script_threshold_is_strict();
    script_fixed_k_root_rule();
    script_decay_before_max();
    script_warmup();
    script_degenerate();
    degree_of_parallelism();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
