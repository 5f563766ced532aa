/* The step simulator (sim.h): the calling thread's timeline and a link
 * that serves posted collectives one after another. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>

#include "../core/memory.h"

enum { IT_FWD, IT_BWD, IT_REDUCE, IT_GATHER, IT_KINDS };

typedef struct item {
    double work, left; /* seconds of link time */
    bool finished;
} item;

typedef struct sim {
    const sim_input *in;
    double t;          /* the calling thread's clock */
    item **queue;      /* posted, not finished, in post order */
    int head, tail;
} sim;

/* Move the clock by dt; the link serves the queue at `rate`; the link
 * seconds served. */
static double advance(sim *s, double dt, double rate)
{
    double budget = dt * rate;
    const double offered = budget;
    while (rate > 0 && s->head < s->tail && budget > 0) {
        item *it = s->queue[s->head];
        const double use = it->left < budget ? it->left : budget;
        it->left -= use;
        budget -= use;
        if (it->left <= 1e-12 * it->work) {
            it->left = 0;
            it->finished = true;
            s->head++;
        }
    }
    s->t += dt;
    return rate > 0 ? offered - budget : 0;
}

/* A poll between layers: the link does up to `poll_work` seconds of its
 * queue; the clock moves by the share of it the thread does itself
 * (poll_cpu: shared memory's copies), else stands still. */
static void poll_link(sim *s)
{
    const double clock = s->t;
    const double served = s->in->poll_work > 0 ? advance(s, s->in->poll_work, 1.0) : 0;
    s->t = clock + s->in->poll_cpu * served;
}

static void compute(sim *s, double dt)
{
    if (dt > 0) advance(s, dt, s->in->progress);
}

static void post(sim *s, item *it, double work)
{
    /* NaN work (from inf - inf) must not pass for none: it makes the step inf. */
    it->work = it->left = isnan(work) ? INFINITY : work > 0 ? work : 0;
    it->finished = it->work == 0;
    if (!it->finished) s->queue[s->tail++] = it;
}

/* Block until `it` is done (the link at full speed); the seconds waited. */
static double wait(sim *s, item *it)
{
    double waited = 0;
    while (!it->finished) {
        double ahead = 0;
        for (int q = s->head; q < s->tail; q++) {
            ahead += s->queue[q]->left;
            if (s->queue[q] == it) break;
        }
        if (ahead <= 0) ahead = it->left; /* rounding */
        if (!isfinite(ahead)) { /* never done: the caller refuses the inf step */
            it->finished = true;
            return INFINITY;
        }
        advance(s, ahead, 1.0);
        waited += ahead;
    }
    return waited;
}

static bool arrived(const item *its)
{
    return its[IT_FWD].finished && its[IT_BWD].finished && its[IT_REDUCE].finished;
}

/* Spread a bucket's seconds over its layers by weight. */
static void spread(const sim_input *in, const sim_bucket *b, int kind, double seconds,
                   double (*acc)[SIM_KINDS])
{
    if (!acc || seconds == 0) return;
    double total = 0;
    for (int l = b->first_layer; l <= b->last_layer; l++) total += in->layers[l].weight;
    for (int l = b->first_layer; l <= b->last_layer; l++)
        acc[l][kind] += total > 0 ? seconds * in->layers[l].weight / total
                                  : (l == b->first_layer ? seconds : 0);
}

typedef struct step_state {
    item (*items)[IT_KINDS]; /* this step's, per bucket */
    item (*prev)[IT_KINDS];  /* last step's (its all-gathers may be in flight) */
    bool *posted, *updated;
    const int *bucket_of;    /* per layer: the bucket it starts, or -1 */
} step_state;

static void finish_bucket(sim *s, step_state *st, int k, double (*acc)[SIM_KINDS])
{
    const sim_input *in = s->in;
    const sim_bucket *b = &in->buckets[k];
    item *its = st->items[k];
    double exposed = 0;
    if (!st->posted[k]) {
        post(s, &its[IT_FWD], b->fwd_comm);
        post(s, &its[IT_BWD], b->bwd_comm);
        post(s, &its[IT_REDUCE], b->reduce_comm);
        st->posted[k] = true;
    }
    if (!st->updated[k]) {
        for (int q = IT_FWD; q <= IT_REDUCE; q++) exposed += wait(s, &its[q]);
        compute(s, b->update);
        spread(in, b, SIM_UPDATE, b->update, acc);
        st->updated[k] = true;
    }
    post(s, &its[IT_GATHER], b->gather_comm);
    if (!in->overlap) exposed += wait(s, &its[IT_GATHER]);
    spread(in, b, SIM_EXPOSED, exposed, acc);
}

static void one_step(sim *s, step_state *st, double (*acc)[SIM_KINDS])
{
    const sim_input *in = s->in;
    const bool ov = in->overlap && in->parallel;
    for (int k = 0; k < in->num_buckets; k++) {
        st->posted[k] = st->updated[k] = false;
        for (int q = 0; q < IT_KINDS; q++) st->items[k][q] = (item){0, 0, true};
    }
    compute(s, in->pre);
    for (int l = 1; l < in->num_layers; l++) {
        const int k = st->bucket_of[l];
        if (k >= 0 && in->parallel)
            spread(in, &in->buckets[k], SIM_EXPOSED, wait(s, &st->prev[k][IT_GATHER]), acc);
        const sim_layer *y = &in->layers[l];
        compute(s, y->fwd + y->halo_fwd + y->shuffle_fwd);
        if (acc) {
            acc[l][SIM_FWD] += y->fwd;
            acc[l][SIM_HALO_EXPOSED] += y->halo_fwd;
            acc[l][SIM_SHUFFLE] += y->shuffle_fwd;
            acc[l][SIM_HALO] += y->halo;
        }
        if (k >= 0 && ov) post(s, &st->items[k][IT_FWD], in->buckets[k].fwd_comm);
        if (ov) poll_link(s);
    }
    compute(s, in->mid);
    for (int l = in->num_layers - 1; l >= 1; l--) {
        const int k = st->bucket_of[l];
        if (k >= 0 && ov) post(s, &st->items[k][IT_BWD], in->buckets[k].bwd_comm);
        const sim_layer *y = &in->layers[l];
        compute(s, y->bwd + y->halo_bwd + y->shuffle_bwd);
        if (acc) {
            acc[l][SIM_BWD] += y->bwd;
            acc[l][SIM_HALO_EXPOSED] += y->halo_bwd;
            acc[l][SIM_SHUFFLE] += y->shuffle_bwd;
        }
        if (k >= 0 && ov) {
            post(s, &st->items[k][IT_REDUCE], in->buckets[k].reduce_comm);
            st->posted[k] = true;
        }
        if (ov) poll_link(s);
        for (int kk = in->num_buckets - 1; ov && kk >= 0; kk--) {
            if (!st->posted[kk] || st->updated[kk] || !arrived(st->items[kk])) continue;
            compute(s, in->buckets[kk].update);
            spread(in, &in->buckets[kk], SIM_UPDATE, in->buckets[kk].update, acc);
            st->updated[kk] = true;
        }
    }
    for (int k = 0; k < in->num_buckets; k++) {
        if (in->parallel) {
            finish_bucket(s, st, k, acc);
        } else {
            compute(s, in->buckets[k].update);
            spread(in, &in->buckets[k], SIM_UPDATE, in->buckets[k].update, acc);
        }
    }
    compute(s, in->post);
    if (acc)
        for (int k = 0; k < in->num_buckets; k++) {
            const sim_bucket *b = &in->buckets[k];
            const double c = !in->parallel ? 0
                                           : b->fwd_comm + b->bwd_comm + b->reduce_comm +
                                                 b->gather_comm;
            spread(in, b, SIM_COMM, c, acc);
        }
}

double sim_step(const sim_input *in, double (*per_layer)[SIM_KINDS])
{
    const int B = in->num_buckets, L = in->num_layers;
    item(*a)[IT_KINDS] = mem_calloc((size_t)(B ? B : 1), sizeof *a);
    item(*b)[IT_KINDS] = mem_calloc((size_t)(B ? B : 1), sizeof *b);
    bool *flags = mem_calloc((size_t)(2 * B + 2), sizeof *flags);
    int *bucket_of = mem_calloc((size_t)(L ? L : 1), sizeof *bucket_of);
    item **queue = mem_calloc((size_t)(IT_KINDS * 2 * B + 4), sizeof *queue);
    double step = NAN;
    if (a && b && flags && bucket_of && queue) {
        for (int l = 0; l < L; l++) bucket_of[l] = -1;
        for (int k = 0; k < B; k++) bucket_of[in->buckets[k].first_layer] = k;
        for (int k = 0; k < B; k++)
            for (int q = 0; q < IT_KINDS; q++) a[k][q] = b[k][q] = (item){0, 0, true};
        sim s = {.in = in, .queue = queue};
        step_state st = {.items = a, .prev = b, .posted = flags, .updated = flags + B + 1,
                         .bucket_of = bucket_of};
        /* Steady state: the all-gathers a step leaves in flight repeat. */
        double last = -1;
        for (int rep = 0; rep < 8; rep++) {
            /* Compact the queue: only last step's all-gathers remain. */
            int n = 0;
            for (int q = s.head; q < s.tail; q++) queue[n++] = queue[q];
            s.head = 0;
            s.tail = n;
            const double t0 = s.t;
            one_step(&s, &st, NULL);
            const double dt = s.t - t0;
            item(*swap)[IT_KINDS] = st.items;
            st.items = st.prev;
            st.prev = swap;
            if (rep >= 2 && fabs(dt - last) <= 1e-12 * (dt > 0 ? dt : 1)) break;
            last = dt;
        }
        int n = 0;
        for (int q = s.head; q < s.tail; q++) queue[n++] = queue[q];
        s.head = 0;
        s.tail = n;
        if (per_layer)
            for (int l = 0; l < L; l++)
                for (int c = 0; c < SIM_KINDS; c++) per_layer[l][c] = 0;
        const double t0 = s.t;
        one_step(&s, &st, per_layer);
        step = s.t - t0;
    }
    mem_free(a);
    mem_free(b);
    mem_free(flags);
    mem_free(bucket_of);
    mem_free(queue);
    return step;
}
