/* The scheduler handle on one process: argument and order checks, theta
 * against a direct computation when the host drives the epochs, one-call
 * epochs whose batch grows without any allocation, and a checkpointed run
 * that resumes with exactly the same schedule and parameters. */
#include <string.h>

#include "sched_util.h"

/* The allocation counter of the internal build (lib/core/memory.h). */
void pcnn_debug_fail_allocation(long n);
long pcnn_debug_allocations(void);

static void abort_job(void) { exit(1); }

static void test_invalid_calls(void)
{
    int before = failures;
    pcnn_net *raw;
    pcnn_layer *l;
    pcnn_scheduler *s = NULL;
    CK(pcnn_net_create(&raw));
    CK(pcnn_net_input(raw, 1, 4, 4, &l));
    EXPECT_STATUS(pcnn_scheduler_create(raw, 2, 4, 0.1, &s), PCNN_ERR_INVALID_STATE);
    pcnn_net_destroy(&raw);

    pcnn_net *net = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_SGD, 8);
    EXPECT_STATUS(pcnn_scheduler_create(net, 2, 4, 0.1, NULL), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(NULL, 2, 4, 0.1, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(net, 0, 4, 0.1, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(net, 5, 4, 0.1, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(net, 2, 9, 0.1, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(net, 2, 4, 0.0, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_create(net, 2, 4, NAN, &s), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT(s == NULL, "failed creates leave *out alone");
    CK(pcnn_scheduler_create(net, 2, 8, 0.1, &s));

    const struct { pcnn_sched_option o; double v; } bad[] = {
        {PCNN_SCHED_GROWTH_FACTOR, 1.0},      {PCNN_SCHED_GROWTH_FACTOR, NAN},
        {PCNN_SCHED_LR_RULE, 2},              {PCNN_SCHED_INTERVAL_EPOCHS, -1},
        {PCNN_SCHED_INTERVAL_EPOCHS, 1.5},    {PCNN_SCHED_THETA_THRESHOLD, 0},
        {PCNN_SCHED_DECAY_FACTOR, 0},         {PCNN_SCHED_DECAY_FACTOR, 1.5},
        {PCNN_SCHED_PLATEAU_EPOCHS, -2},      {PCNN_SCHED_PLATEAU_THRESHOLD, 1},
        {PCNN_SCHED_WARMUP_EPOCHS, INFINITY}, {PCNN_SCHED_MIN_LOCAL_SAMPLES, -1},
        {PCNN_SCHED_INITIAL_LOSS, NAN},       {(pcnn_sched_option)99, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_STATUS(pcnn_scheduler_set_option(s, bad[i].o, bad[i].v),
                      PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_set_option(s, PCNN_SCHED_EPOCH, 3), PCNN_ERR_INVALID_STATE);
    EXPECT_STATUS(pcnn_scheduler_set_option(NULL, PCNN_SCHED_GROWTH_FACTOR, 2),
                  PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_get_option(s, PCNN_SCHED_BATCH, NULL), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_get_option(s, (pcnn_sched_option)99, &(double){0}),
                  PCNN_ERR_INVALID_ARGUMENT);
    EXPECT(isnan(sched_get(s, PCNN_SCHED_THETA)) && isnan(sched_get(s, PCNN_SCHED_INITIAL_LOSS)),
           "theta and F(w_0) are NaN before the first epoch");
    EXPECT(sched_get(s, PCNN_SCHED_GROWTH_FACTOR) == 2 &&
               sched_get(s, PCNN_SCHED_DECAY_FACTOR) == 0.1 &&
               sched_get(s, PCNN_SCHED_THETA_THRESHOLD) == 0.1 &&
               sched_get(s, PCNN_SCHED_MIN_LOCAL_SAMPLES) == 2 &&
               sched_get(s, PCNN_SCHED_INTERVAL_EPOCHS) == 0,
           "documented defaults");

    EXPECT_STATUS(pcnn_scheduler_end_epoch(s, 1.0), PCNN_ERR_INVALID_STATE);
    int batch;
    double lr;
    CK(pcnn_scheduler_begin_epoch(s, &batch, &lr));
    EXPECT(batch == 2 && lr == 0.1, "first epoch: B %d lr %g", batch, lr);
    EXPECT_STATUS(pcnn_scheduler_begin_epoch(s, NULL, NULL), PCNN_ERR_INVALID_STATE);
    EXPECT_STATUS(pcnn_scheduler_set_option(s, PCNN_SCHED_GROWTH_FACTOR, 3),
                  PCNN_ERR_INVALID_STATE);
    unsigned char small[16];
    EXPECT_STATUS(pcnn_scheduler_save_state(s, small, sizeof small), PCNN_ERR_SHAPE);
    size_t bytes;
    CK(pcnn_scheduler_state_bytes(s, &bytes));
    EXPECT(bytes == 120 + 4 * 356 + 8, "state bytes %zu before any epoch", bytes);
    unsigned char *blob = malloc(bytes + 64);
    EXPECT_STATUS(pcnn_scheduler_save_state(s, blob, bytes), PCNN_ERR_INVALID_STATE);
    EXPECT_STATUS(pcnn_scheduler_end_epoch(s, 1.0), PCNN_ERR_INVALID_STATE); /* no F(w_0) */
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INITIAL_LOSS, 2.0));
    EXPECT_STATUS(pcnn_scheduler_end_epoch(s, NAN), PCNN_ERR_NUMERIC);
    CK(pcnn_scheduler_end_epoch(s, 1.0)); /* the epoch stayed open */
    EXPECT_STATUS(pcnn_scheduler_set_option(s, PCNN_SCHED_INITIAL_LOSS, 3.0),
                  PCNN_ERR_INVALID_STATE);
    double theta;
    EXPECT_STATUS(pcnn_scheduler_theta(s, 0, &theta), PCNN_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(pcnn_scheduler_theta(s, 2, &theta), PCNN_ERR_INVALID_ARGUMENT);
    CK(pcnn_scheduler_theta(s, 1, &theta));
    EXPECT(isnan(theta), "theta is NaN while w has not moved: %g", theta);
    int first, n;
    EXPECT_STATUS(pcnn_scheduler_share(s, -1, &first, &n), PCNN_ERR_INVALID_ARGUMENT);
    CK(pcnn_scheduler_share(s, 5, &first, &n));
    EXPECT(first == 0 && n == 5, "one rank computes the whole batch");

    /* State images: damage, truncation, newer format, another schedule. */
    CK(pcnn_scheduler_state_bytes(s, &bytes));
    EXPECT(bytes == 120 + 8 + 4 * 356 + 8, "state bytes %zu after one epoch", bytes);
    EXPECT_STATUS(pcnn_scheduler_save_state(s, NULL, bytes), PCNN_ERR_INVALID_ARGUMENT);
    CK(pcnn_scheduler_save_state(s, blob, bytes));
    EXPECT(memcmp(blob, "PCNNSCHD", 8) == 0 && blob[8] == 1 && blob[12] == 120,
           "magic, version and header size as documented");
    EXPECT_STATUS(pcnn_scheduler_load_state(s, blob, bytes - 1), PCNN_ERR_CORRUPT);
    EXPECT_STATUS(pcnn_scheduler_load_state(s, NULL, bytes), PCNN_ERR_INVALID_ARGUMENT);
    blob[200] ^= 0x10;
    EXPECT_STATUS(pcnn_scheduler_load_state(s, blob, bytes), PCNN_ERR_CORRUPT);
    blob[200] ^= 0x10;
    blob[8] = 2;
    EXPECT_STATUS(pcnn_scheduler_load_state(s, blob, bytes), PCNN_ERR_UNSUPPORTED);
    blob[8] = 1;
    pcnn_scheduler *other;
    CK(pcnn_scheduler_create(net, 4, 8, 0.1, &other));
    EXPECT_STATUS(pcnn_scheduler_load_state(other, blob, bytes), PCNN_ERR_MISMATCH);
    pcnn_scheduler_destroy(&other);
    CK(pcnn_scheduler_load_state(s, blob, bytes));
    EXPECT(sched_get(s, PCNN_SCHED_EPOCH) == 1, "state reloaded");

    CK(pcnn_scheduler_destroy(&s));
    EXPECT(s == NULL, "destroy clears the pointer");
    CK(pcnn_scheduler_destroy(&s));
    CK(pcnn_scheduler_destroy(NULL));
    free(blob);
    pcnn_net_destroy(&net);
    printf("%s invalid_calls\n", failures == before ? "PASS" : "FAIL");
}

/* The host moves the parameters by known amounts: theta must equal
 * (F(w_0) - F(w_i)) / ||w_0 - w_i|| computed directly. */
static void test_theta_host_driven(void)
{
    int before = failures;
    pcnn_net *net = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_SGD, 8);
    size_t count;
    CK(pcnn_net_num_params(net, &count));
    float *w0 = malloc(count * sizeof(float)), *w = malloc(count * sizeof(float));
    CK(pcnn_net_get_params(net, w0, count));
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 2, 8, 0.1, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INITIAL_LOSS, 2.5));
    uint64_t seed = 99;
    const double losses[] = {1.9, 1.4, 1.2, 1.1};
    for (int e = 0; e < 4; e++) {
        CK(pcnn_scheduler_begin_epoch(s, NULL, NULL));
        for (size_t i = 0; i < count; i++) w[i] = w0[i] + (float)((e + 1) * 0.05 * uniform(&seed));
        CK(pcnn_net_set_params(net, w, count));
        CK(pcnn_scheduler_end_epoch(s, losses[e]));
        CK(pcnn_net_get_params(net, w, count));
        const double direct = (2.5 - losses[e]) / distance(w0, w, count);
        double theta;
        CK(pcnn_scheduler_theta(s, e + 1, &theta));
        EXPECT(fabs(theta - direct) <= 1e-12 * fabs(direct), "epoch %d: theta %.17g, direct %.17g",
               e + 1, theta, direct);
        EXPECT(theta == sched_get(s, PCNN_SCHED_THETA), "PCNN_SCHED_THETA is the last theta");
    }
    pcnn_scheduler_destroy(&s);
    pcnn_net_destroy(&net);
    free(w0);
    free(w);
    printf("%s theta_host_driven\n", failures == before ? "PASS" : "FAIL");
}

/* One-call epochs with K = 1: B doubles every epoch up to B_m with the
 * learning rate, F(w_0) is the first step's loss, and epochs after the
 * first allocate nothing even as B grows. */
static void test_train_epochs_grow(void)
{
    int before = failures;
    pcnn_dataset *data = make_data(48, 5);
    pcnn_net *net = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_MOMENTUM, 16);
    float x[4 * 162], first_loss;
    int32_t y[4];
    CK(pcnn_dataset_batch(data, 0, 4, x, y, NULL));
    CK(pcnn_net_compute_loss(net, 4, x, y, NULL, &first_loss));
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 4, 16, 0.05, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INTERVAL_EPOCHS, 1));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_EPOCHS, 0));
    const int want_batch[] = {4, 8, 16, 16, 16};
    const double want_lr[] = {0.05, 0.1, 0.2, 0.2, 0.2};
    long allocations = 0;
    for (int e = 0; e < 5; e++) {
        EXPECT(sched_get(s, PCNN_SCHED_BATCH) == want_batch[e], "epoch %d: B %g", e + 1,
               sched_get(s, PCNN_SCHED_BATCH));
        EXPECT(sched_get(s, PCNN_SCHED_LEARNING_RATE) == want_lr[e], "epoch %d: lr %g", e + 1,
               sched_get(s, PCNN_SCHED_LEARNING_RATE));
        if (e == 1) pcnn_debug_fail_allocation(0); /* restart the count */
        double loss;
        CK(pcnn_scheduler_train_epoch(s, data, &loss));
        EXPECT(isfinite(loss) && loss > 0, "epoch %d: loss %g", e + 1, loss);
        double net_lr;
        CK(pcnn_net_get_option(net, PCNN_OPT_LEARNING_RATE, &net_lr));
        EXPECT(net_lr == want_lr[e], "epoch %d: the network trained with lr %g", e + 1, net_lr);
        EXPECT(sched_get(s, PCNN_SCHED_EVENTS) == (e < 2 ? PCNN_SCHED_EVENT_BATCH_GREW : 0),
               "epoch %d: events %g", e + 1, sched_get(s, PCNN_SCHED_EVENTS));
    }
    allocations = pcnn_debug_allocations();
    EXPECT(allocations == 0, "%ld allocations in epochs 2-5 (B grew twice)", allocations);
    EXPECT(sched_get(s, PCNN_SCHED_INITIAL_LOSS) == (double)first_loss,
           "F(w_0) %.9g is the first step's loss %.9g", sched_get(s, PCNN_SCHED_INITIAL_LOSS),
           (double)first_loss);
    EXPECT(sched_get(s, PCNN_SCHED_EPOCH) == 5 && sched_get(s, PCNN_SCHED_INTERVAL) == 1 &&
               sched_get(s, PCNN_SCHED_ACTIVE_RANKS) == 1,
           "epoch, K and active ranks");
    double step;
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &step));
    EXPECT(step == 12 + 6 + 3 + 3 + 3, "steps taken: %g", step);
    pcnn_scheduler_destroy(&s);
    pcnn_net_destroy(&net);
    pcnn_dataset_destroy(&data);
    printf("%s train_epochs_grow_without_allocation\n", failures == before ? "PASS" : "FAIL");
}

typedef struct record {
    double batch, lr, k, theta, decays, events;
} record;

static void run_epochs(pcnn_scheduler *s, pcnn_dataset *data, int from, int to, record *out)
{
    for (int e = from; e < to; e++) {
        CK(pcnn_dataset_shuffle(data, 7, (uint64_t)e));
        CK(pcnn_scheduler_train_epoch(s, data, NULL));
        out[e] = (record){sched_get(s, PCNN_SCHED_BATCH), sched_get(s, PCNN_SCHED_LEARNING_RATE),
                          sched_get(s, PCNN_SCHED_INTERVAL), sched_get(s, PCNN_SCHED_THETA),
                          sched_get(s, PCNN_SCHED_DECAYS), sched_get(s, PCNN_SCHED_EVENTS)};
    }
}

static pcnn_scheduler *make_sched(pcnn_net *net)
{
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 4, 32, 0.05, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_THETA_THRESHOLD, 0.5));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_EPOCHS, 1));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_PLATEAU_THRESHOLD, 0.2));
    return s;
}

/* Six epochs straight against three, a checkpoint (parameters + scheduler
 * state) into a fresh network and scheduler, and three more: the same
 * decisions, thetas and parameters, bit for bit. */
static void test_resume(void)
{
    int before = failures;
    enum { EPOCHS = 6, HALF = 3 };
    pcnn_dataset *data = make_data(64, 8);
    record straight[EPOCHS], resumed[EPOCHS];
    pcnn_net *a = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_SGD, 32);
    pcnn_scheduler *sa = make_sched(a);
    run_epochs(sa, data, 0, EPOCHS, straight);

    pcnn_net *b = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_SGD, 32);
    pcnn_scheduler *sb = make_sched(b);
    run_epochs(sb, data, 0, HALF, resumed);
    size_t count, bytes;
    CK(pcnn_net_num_params(b, &count));
    float *params = malloc(count * sizeof(float)), *wa = malloc(count * sizeof(float));
    CK(pcnn_net_get_params(b, params, count));
    CK(pcnn_scheduler_state_bytes(sb, &bytes));
    unsigned char *blob = malloc(bytes);
    CK(pcnn_scheduler_save_state(sb, blob, bytes));
    pcnn_scheduler_destroy(&sb);
    pcnn_net_destroy(&b);

    pcnn_net *c = build_net(NULL, 0, -1, 0, PCNN_OPTIMIZER_SGD, 32);
    CK(pcnn_net_set_params(c, params, count));
    pcnn_scheduler *sc = make_sched(c); /* its own w_0 is replaced by the state's */
    CK(pcnn_scheduler_load_state(sc, blob, bytes));
    run_epochs(sc, data, HALF, EPOCHS, resumed);
    EXPECT(memcmp(straight, resumed, sizeof straight) == 0, "resumed decisions differ");
    for (int e = 0; e < EPOCHS; e++)
        printf("  epoch %d: B %g lr %g K %g theta %.6f decays %g events %g%s\n", e + 1,
               straight[e].batch, straight[e].lr, straight[e].k, straight[e].theta,
               straight[e].decays, straight[e].events,
               memcmp(&straight[e], &resumed[e], sizeof(record)) ? "  (resumed differs)" : "");
    EXPECT(straight[EPOCHS - 1].batch > 4 && straight[EPOCHS - 1].decays > 0,
           "the schedule grew B and decayed the learning rate during the run");
    for (long e = 1; e <= EPOCHS; e++) {
        double t1, t2;
        CK(pcnn_scheduler_theta(sa, e, &t1));
        CK(pcnn_scheduler_theta(sc, e, &t2));
        EXPECT(memcmp(&t1, &t2, sizeof t1) == 0, "theta history of epoch %ld differs", e);
    }
    CK(pcnn_net_get_params(a, wa, count));
    CK(pcnn_net_get_params(c, params, count));
    EXPECT(memcmp(wa, params, count * sizeof(float)) == 0, "resumed parameters differ");
    pcnn_scheduler_destroy(&sa);
    pcnn_scheduler_destroy(&sc);
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&c);
    pcnn_dataset_destroy(&data);
    free(params);
    free(wa);
    free(blob);
    printf("%s resume_from_state\n", failures == before ? "PASS" : "FAIL");
}

int main(void)
{
    test_invalid_calls();
    test_theta_host_driven();
    test_train_epochs_grow();
    test_resume();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
