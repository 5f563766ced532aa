/* The exchange's rules (strategy/exchange_choice.h) against the code they
 * come from in parallel/exchange.c, copied below as it was: eq. 4.8 of
 * seed 001 (fc_saves_bytes), the engine's local choice (exchange_start
 * with spare_core_per_rank) and the grouping loop of exchange_plan_build.
 * Grids of inputs must give the same answers, and a few known cases the
 * expected ones. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/expect.h"
#include "pcnn.h"
#include "strategy/exchange_choice.h"

/* ---- The old code, on plain values instead of the network. ---- */

static bool old_fc_saves_bytes(bool dense, pcnn_exchange net_default, int features, int out,
                               int global_max_batch, int size)
{
    if (!dense || net_default != PCNN_EXCHANGE_ALLTOALL_ALLGATHER) return false;
    const double B = global_max_batch, P = size;
    return (double)features * B / P + (double)out * B < (double)out * features;
}

static bool old_thread_ok(int engine, bool multiple, int local, int threads, int cores)
{
    return engine != 2 && multiple && (engine == 1 || (long)local * (threads + 1) <= cores);
}

typedef struct old_bucket {
    int first_layer, last_layer;
    size_t count;
    pcnn_exchange kind;
} old_bucket;

static int old_buckets(const size_t *num_params, const pcnn_exchange *exchange, int num_layers,
                       size_t bucket_bytes, bool parallel, old_bucket *buckets)
{
    int n = 0;
    const size_t bucket_floats = bucket_bytes / sizeof(float);
    old_bucket *open = NULL;
    for (int i = 0; i < num_layers; i++) {
        if (num_params[i] == 0) continue;
        pcnn_exchange kind = parallel ? exchange[i] : PCNN_EXCHANGE_ALLREDUCE;
        bool fits = open && open->kind == kind && kind != PCNN_EXCHANGE_FC_GRADIENT &&
                    (open->count + num_params[i] <= bucket_floats || !parallel);
        if (!fits) {
            open = &buckets[n++];
            *open = (old_bucket){0};
            open->kind = kind;
            open->first_layer = i;
        }
        open->count += num_params[i];
        open->last_layer = i;
    }
    return n;
}

/* ---- Eq. 4.8. ---- */

static void fc_rule(void)
{
    static const int sizes[] = {1, 2, 10, 64, 100, 512, 1000, 4096, 25088};
    static const int batches[] = {1, 16, 64, 256, 1024, 4096};
    static const pcnn_exchange kinds[] = {PCNN_EXCHANGE_ALLREDUCE,
                                          PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                                          PCNN_EXCHANGE_FC_GRADIENT};
    const int ns = sizeof sizes / sizeof *sizes, nb = sizeof batches / sizeof *batches;
    long yes = 0, no = 0;
    for (int f = 0; f < ns; f++)
        for (int k = 0; k < ns; k++)
            for (int b = 0; b < nb; b++)
                for (int p = 2; p <= 64; p *= 2)
                    for (int e = 0; e < 3; e++) {
                        const bool old =
                            old_fc_saves_bytes(true, kinds[e], sizes[f], sizes[k], batches[b], p);
                        const bool now = exchange_fc_preferred(sizes[f], sizes[k], batches[b], p,
                                                               kinds[e], NULL, 0);
                        EXPECT(old == now, "F %d K %d B %d P %d default %d: %d, was %d", sizes[f],
                               sizes[k], batches[b], p, kinds[e], now, old);
                        old ? yes++ : no++;
                    }
    EXPECT(yes > 0 && no > 0, "the grid gives %ld FC and %ld other choices", yes, no);

    char why[128];
    /* VGG's first FC layer, 4 ranks, batch 256: 25088*64 + 4096*256 floats
     * moved against 4096*25088. */
    EXPECT(exchange_fc_preferred(25088, 4096, 256, 4, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, why,
                                 sizeof why),
           "VGG's fc6 should take the FC exchange");
    EXPECT(strcmp(why, "eq. 4.8: F*B/P + K*B = 2654208 < K*F = 102760448 floats") == 0, "%s",
           why);
    EXPECT(!exchange_fc_preferred(10, 10, 256, 2, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, why,
                                  sizeof why),
           "a 10 x 10 layer should reduce its gradient");
    EXPECT(strcmp(why, "eq. 4.8: F*B/P + K*B = 3840 >= K*F = 100 floats") == 0, "%s", why);
    EXPECT(!exchange_fc_preferred(25088, 4096, 256, 4, PCNN_EXCHANGE_ALLREDUCE, why, sizeof why),
           "the FC exchange only under the all-to-all default");
}

/* ---- The progress engine. ---- */

static void engine_rule(void)
{
    long threads_chosen = 0, nonblocking = 0;
    for (int requested = 0; requested <= 2; requested++)
        for (int multiple = 0; multiple <= 1; multiple++)
            for (int local = 1; local <= 8; local++)
                for (int threads = 1; threads <= 16; threads++)
                    for (int cores = 1; cores <= 64; cores++) {
                        const engine_inputs in = {requested, multiple, local, threads, cores,
                                                  false};
                        char why[96] = "";
                        const exchange_engine e = exchange_engine_choose(&in, why, sizeof why);
                        const bool old = old_thread_ok(requested, multiple, local, threads, cores);
                        EXPECT((e == EXCHANGE_ENGINE_THREAD) == old,
                               "engine %d multiple %d %d ranks x %d threads on %d cores: %d, "
                               "was %d", requested, multiple, local, threads, cores, e, old);
                        EXPECT(strncmp(why, old ? "thread" : "nonblocking", old ? 6 : 11) == 0,
                               "reason \"%s\"", why);
                        old ? threads_chosen++ : nonblocking++;
                    }
    EXPECT(threads_chosen > 0 && nonblocking > 0, "%ld thread and %ld nonblocking choices",
           threads_chosen, nonblocking);

    char why[96];
    engine_inputs in = {0, true, 2, 1, 4, false};
    EXPECT(exchange_engine_choose(&in, why, sizeof why) == EXCHANGE_ENGINE_THREAD &&
               strcmp(why, "thread (2 ranks x (1 + 1) threads <= 4 cores)") == 0,
           "2 ranks x 1 thread on 4 cores: \"%s\"", why);
    in.compute_threads = 2;
    EXPECT(exchange_engine_choose(&in, why, sizeof why) == EXCHANGE_ENGINE_NONBLOCKING &&
               strcmp(why, "nonblocking (2 ranks x (2 + 1) threads > 4 cores)") == 0,
           "2 ranks x 2 threads on 4 cores: \"%s\"", why);
    in.requested = 1;
    EXPECT(exchange_engine_choose(&in, why, sizeof why) == EXCHANGE_ENGINE_THREAD &&
               strcmp(why, "thread (requested)") == 0, "requested thread: \"%s\"", why);
    in.thread_multiple = false;
    EXPECT(exchange_engine_choose(&in, why, sizeof why) == EXCHANGE_ENGINE_NONBLOCKING &&
               strcmp(why, "nonblocking (no MPI_THREAD_MULTIPLE)") == 0,
           "requested thread without MPI_THREAD_MULTIPLE: \"%s\"", why);
    in = (engine_inputs){2, true, 1, 1, 64, false};
    EXPECT(exchange_engine_choose(&in, NULL, 0) == EXCHANGE_ENGINE_NONBLOCKING,
           "requested nonblocking");

    /* Partners on other nodes: a thread on shared cores (pausing between
     * tests) rather than a link idle inside every layer. */
    char why_long[160];
    in = (engine_inputs){0, true, 1, 1, 1, true};
    EXPECT(exchange_engine_choose(&in, why_long, sizeof why_long) == EXCHANGE_ENGINE_THREAD &&
               exchange_engine_shares_core(&in) &&
               strncmp(why_long, "thread sharing the cores, polling every", 39) == 0 &&
               strstr(why_long, "1 ranks x (1 + 1) threads > 1 cores") != NULL,
           "1 rank x 1 thread on 1 core, partners off node: \"%s\"", why_long);
    in.usable_cores = 2;
    EXPECT(exchange_engine_choose(&in, why_long, sizeof why_long) == EXCHANGE_ENGINE_THREAD &&
               !exchange_engine_shares_core(&in) &&
               strcmp(why_long, "thread (1 ranks x (1 + 1) threads <= 2 cores)") == 0,
           "a core for the thread: it busy-polls: \"%s\"", why_long);
    in = (engine_inputs){0, false, 1, 1, 1, true};
    EXPECT(exchange_engine_choose(&in, NULL, 0) == EXCHANGE_ENGINE_NONBLOCKING,
           "partners off node without MPI_THREAD_MULTIPLE");
    in = (engine_inputs){2, true, 1, 1, 1, true};
    EXPECT(exchange_engine_choose(&in, NULL, 0) == EXCHANGE_ENGINE_NONBLOCKING,
           "partners off node, nonblocking requested");
    in = (engine_inputs){0, true, 2, 1, 2, false};
    EXPECT(exchange_engine_choose(&in, NULL, 0) == EXCHANGE_ENGINE_NONBLOCKING &&
               exchange_engine_shares_core(&in),
           "one node, no spare core: nonblocking as before");
}

/* ---- Buckets. ---- */

static unsigned long long rng = 7;
static unsigned next(unsigned n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng >> 33) % n;
}

static bool same_spans(const bucket_span *a, int na, const old_bucket *b, int nb)
{
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i].first_layer != b[i].first_layer || a[i].last_layer != b[i].last_layer ||
            a[i].count != b[i].count || a[i].kind != b[i].kind)
            return false;
    return true;
}


static void expect_spans(const bucket_span *spans, int got, const bucket_span *want, int n,
                         const char *what)
{
    EXPECT(got == n, "%s: %d buckets, expected %d", what, got, n);
    for (int i = 0; i < got && i < n; i++)
        EXPECT(spans[i].first_layer == want[i].first_layer &&
                   spans[i].last_layer == want[i].last_layer &&
                   spans[i].count == want[i].count && spans[i].kind == want[i].kind,
               "%s, bucket %d: layers %d..%d, %zu floats, kind %d", what, i,
               spans[i].first_layer, spans[i].last_layer, spans[i].count, spans[i].kind);
}
static void bucket_rule(void)
{
    enum { MAX_LAYERS = 40 };
    size_t params[MAX_LAYERS];
    pcnn_exchange kinds[MAX_LAYERS];
    bucket_span spans[MAX_LAYERS];
    old_bucket old[MAX_LAYERS];
    static const size_t sizes[] = {0, 0, 1, 10, 100, 1000, 4096, 100000, 1000000};
    static const size_t bucket_bytes[] = {0, 4, 1000, 65536, 1048576, 1u << 30};
    long total = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int n = 1 + (int)next(MAX_LAYERS);
        for (int i = 0; i < n; i++) {
            params[i] = sizes[next(sizeof sizes / sizeof *sizes)];
            const unsigned r = next(10);
            kinds[i] = r < 6   ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER
                       : r < 9 ? PCNN_EXCHANGE_ALLREDUCE
                               : PCNN_EXCHANGE_FC_GRADIENT;
        }
        const size_t bytes = bucket_bytes[next(sizeof bucket_bytes / sizeof *bucket_bytes)];
        const bool parallel = next(4) != 0;
        const int now = exchange_group_buckets(params, kinds, NULL, n, bytes, parallel, spans);
        const int was = old_buckets(params, kinds, n, bytes, parallel, old);
        EXPECT(same_spans(spans, now, old, was),
               "trial %d (%d layers, %zu bytes, parallel %d): %d buckets, was %d", trial, n,
               bytes, parallel, now, was);
        total += now;
    }
    EXPECT(total > 3000, "only %ld buckets in 3000 trials", total);

    /* Known: 300 floats per bucket; zero-parameter layers join the open
     * bucket's span; an FC layer is a bucket of its own. */
    const size_t p6[] = {0, 100, 200, 0, 300, 50, 60, 70};
    const pcnn_exchange k6[] = {0, 1, 1, 1, 1, 2, 1, 1};
    const bucket_span want[] = {{1, 2, 300, 1}, {4, 4, 300, 1}, {5, 5, 50, 2}, {6, 7, 130, 1}};
    expect_spans(spans, exchange_group_buckets(p6, k6, NULL, 8, 1200, true, spans), want, 4,
                 "by kind");
    /* A layer exchanged by columns is alone in its bucket, like an FC one. */
    const bool alone[] = {false, false, false, false, false, false, true, false};
    const bucket_span apart[] = {{1, 2, 300, 1}, {4, 4, 300, 1}, {5, 5, 50, 2}, {6, 6, 60, 1},
                                 {7, 7, 70, 1}};
    expect_spans(spans, exchange_group_buckets(p6, k6, alone, 8, 1200, true, spans), apart, 5,
                 "a layer alone");
    /* One rank: one all-reduce bucket whatever the size, kinds and columns. */
    EXPECT(exchange_group_buckets(p6, k6, alone, 8, 4, false, spans) == 1 &&
               spans[0].count == 780 &&
               spans[0].kind == PCNN_EXCHANGE_ALLREDUCE && spans[0].first_layer == 1 &&
               spans[0].last_layer == 7,
           "one rank: %d..%d, %zu floats", spans[0].first_layer, spans[0].last_layer,
           spans[0].count);
}

int main(void)
{
    fc_rule();
    engine_rule();
    bucket_rule();
    if (failures) printf("%d failure(s)\n", failures);
    else printf("exchange choice: all checks passed\n");
    return failures ? 1 : 0;
}
