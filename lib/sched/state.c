/* The scheduler's state as bytes for checkpoints (layout specified in
 * docs/scheduler-state-format.md): explicit little-endian encoding, the whole w_0 gathered
 * from the ranks' slices so the state restores on any number of ranks, and
 * a checksum so that damage is reported, not trusted. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/le.h"
#include "../core/memory.h"
#include "../graph/graph.h"
#include "../parallel/decomp.h"
#include "../parallel/parallel.h"
#include "sched.h"

#define STATE_MAGIC "PCNNSCHD"
#define STATE_VERSION 1u
#define STATE_HEADER 120u

static size_t bytes_for(long epochs, size_t num_params)
{
    return STATE_HEADER + 8 * (size_t)epochs + 4 * num_params + 8;
}

size_t sched_state_bytes(const pcnn_scheduler *s) { return bytes_for(s->st.epoch, s->num_params); }

PCNN_API pcnn_status pcnn_scheduler_state_bytes(const pcnn_scheduler *sched, size_t *bytes)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    REQUIRE_PTR(bytes);
    *bytes = sched_state_bytes(sched);
    return PCNN_OK;
}

/* Every rank's w_0 slice into `all` (num_params floats) on every rank,
 * within the timeout (then the buffers stay MPI's: comm_gave_up). */
static pcnn_status gather_w0(const pcnn_scheduler *s, float *all, int *counts, int *displs,
                             const char *func)
{
    const pcnn_comm *c = net_comm(s->net);
    if (!c) {
        memcpy(all, s->w0, s->w0_count * sizeof *all);
        return PCNN_OK;
    }
    for (int p = 0; p < c->size; p++) {
        long off;
        counts[p] = decomp_share((long)s->num_params, c->size, p, &off);
        displs[p] = (int)off;
    }
    MPI_Request req;
    const int code = MPI_Iallgatherv(s->w0, (int)s->w0_count, MPI_FLOAT, all, counts, displs,
                                     MPI_FLOAT, c->comm, &req);
    return net_complete(s->net, code, &req, func, "MPI_Allgatherv (w_0)");
}

static void encode(const pcnn_scheduler *s, const float *w0, unsigned char *out)
{
    const sched_config *c = &s->cfg;
    const sched_state *t = &s->st;
    memcpy(out, STATE_MAGIC, 8);
    le_put_u32(out + 8, STATE_VERSION);
    le_put_u32(out + 12, STATE_HEADER);
    le_put_i64(out + 16, c->start_batch);
    le_put_i64(out + 24, c->max_batch);
    le_put_f64(out + 32, c->initial_lr);
    le_put_i64(out + 40, t->epoch);
    le_put_i64(out + 48, t->batch);
    le_put_f64(out + 56, t->lr);
    le_put_i64(out + 64, t->interval);
    le_put_f64(out + 72, t->initial_loss);
    le_put_f64(out + 80, t->best_loss);
    le_put_i64(out + 88, t->stale_epochs);
    le_put_i64(out + 96, t->decays);
    le_put_u64(out + 104, t->events);
    le_put_u64(out + 112, (uint64_t)s->num_params);
    unsigned char *p = out + STATE_HEADER;
    for (long e = 0; e < t->epoch; e++, p += 8) le_put_f64(p, t->theta[e]);
    for (size_t i = 0; i < s->num_params; i++, p += 4) le_put_f32(p, w0[i]);
    le_put_u64(p, hash_fnv1a(HASH_FNV1A_BASIS, out, (size_t)(p - out)));
}

PCNN_API pcnn_status pcnn_scheduler_save_state(const pcnn_scheduler *sched, void *buf,
                                               size_t size)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    const size_t need = sched_state_bytes(sched);
    const int P = net_comm(sched->net) ? net_comm(sched->net)->size : 1;
    pcnn_status st = PCNN_OK;
    if (!buf) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "buf is NULL");
    else if (size < need)
        st = FAIL(PCNN_ERR_SHAPE, "buf holds %zu bytes; the state needs %zu", size, need);
    else if (sched->in_epoch)
        st = FAIL(PCNN_ERR_INVALID_STATE, "save the state between epochs, not inside one");
    else if (sched->num_params > INT32_MAX)
        st = FAIL(PCNN_ERR_UNSUPPORTED, "%zu parameters: more than 2^31", sched->num_params);
    float *all = NULL;
    int *counts = NULL, *displs = NULL;
    if (st == PCNN_OK) {
        all = mem_alloc_floats(sched->num_params);
        counts = mem_calloc((size_t)P, sizeof *counts);
        displs = mem_calloc((size_t)P, sizeof *displs);
        if (!all || !counts || !displs)
            st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "w_0 of %zu parameters", sched->num_params);
    }
    if (net_comm(sched->net)) st = net_agree(sched->net, st, __func__);
    if (st == PCNN_OK) st = gather_w0(sched, all, counts, displs, __func__);
    if (st == PCNN_OK) encode(sched, all, buf);
    if (net_comm(sched->net) && comm_gave_up(net_comm(sched->net))) return st; /* MPI's */
    mem_free(all);
    mem_free(counts);
    mem_free(displs);
    return st;
}

/* Validate an image completely before anything is changed. */
static pcnn_status check_image(const pcnn_scheduler *s, const unsigned char *b, size_t size,
                               const char *func)
{
    if (size < STATE_HEADER + 8 || memcmp(b, STATE_MAGIC, 8) != 0)
        return error_set(PCNN_ERR_CORRUPT, func, "not a scheduler state (%zu bytes, bad magic "
                         "or too short)", size);
    const uint32_t version = le_get_u32(b + 8);
    if (version > STATE_VERSION)
        return error_set(PCNN_ERR_UNSUPPORTED, func,
                         "scheduler state format %u is newer than this library's (%u)", version,
                         STATE_VERSION);
    const uint64_t epochs = le_get_u64(b + 40), params = le_get_u64(b + 112);
    if (version == 0 || le_get_u32(b + 12) != STATE_HEADER || epochs > (1u << 30) ||
        params > ((uint64_t)1 << 40) || bytes_for((long)epochs, (size_t)params) != size)
        return error_set(PCNN_ERR_CORRUPT, func, "scheduler state: header and size (%zu bytes) "
                         "disagree", size);
    if (hash_fnv1a(HASH_FNV1A_BASIS, b, size - 8) != le_get_u64(b + size - 8))
        return error_set(PCNN_ERR_CORRUPT, func, "scheduler state: checksum mismatch");
    const sched_config *c = &s->cfg;
    if (le_get_i64(b + 16) != c->start_batch || le_get_i64(b + 24) != c->max_batch ||
        le_get_f64(b + 32) != c->initial_lr)
        return error_set(PCNN_ERR_MISMATCH, func,
                         "the state is for B_s %lld, B_m %lld, mu_0 %g; this scheduler has %d, "
                         "%d, %g", (long long)le_get_i64(b + 16), (long long)le_get_i64(b + 24),
                         le_get_f64(b + 32), c->start_batch, c->max_batch, c->initial_lr);
    if (params != s->num_params)
        return error_set(PCNN_ERR_MISMATCH, func,
                         "the state holds w_0 of %llu parameters; the network has %zu",
                         (unsigned long long)params, s->num_params);
    const int64_t batch = le_get_i64(b + 48), interval = le_get_i64(b + 64);
    const int64_t stale = le_get_i64(b + 88), decays = le_get_i64(b + 96);
    const double lr = le_get_f64(b + 56);
    if (batch < c->start_batch || batch > c->max_batch || !(lr >= 0) || !isfinite(lr) ||
        interval < 0 || stale < 0 || decays < 0 || le_get_u64(b + 104) > 7)
        return error_set(PCNN_ERR_CORRUPT, func, "scheduler state: values out of range "
                         "(batch %lld, lr %g, K %lld)", (long long)batch, lr, (long long)interval);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_load_state(pcnn_scheduler *sched, const void *buf,
                                               size_t size)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    const unsigned char *b = buf;
    pcnn_status st = PCNN_OK;
    if (!buf) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "buf is NULL");
    else if (sched->in_epoch)
        st = FAIL(PCNN_ERR_INVALID_STATE, "load the state between epochs, not inside one");
    else st = check_image(sched, b, size, __func__);
    if (st == PCNN_OK) st = sched_state_reserve(&sched->st, (long)le_get_u64(b + 40), __func__);
    if (net_comm(sched->net)) st = net_agree(sched->net, st, __func__);
    TRY(st);
    sched_state *t = &sched->st;
    t->epoch = (long)le_get_u64(b + 40);
    t->batch = (int)le_get_i64(b + 48);
    t->lr = le_get_f64(b + 56);
    t->interval = (long)le_get_i64(b + 64);
    t->initial_loss = le_get_f64(b + 72);
    t->best_loss = le_get_f64(b + 80);
    t->stale_epochs = (long)le_get_i64(b + 88);
    t->decays = (long)le_get_i64(b + 96);
    t->events = (unsigned)le_get_u64(b + 104);
    const unsigned char *p = b + STATE_HEADER;
    for (long e = 0; e < t->epoch; e++, p += 8) t->theta[e] = le_get_f64(p);
    p += 4 * sched->w0_lo;
    for (size_t i = 0; i < sched->w0_count; i++, p += 4) sched->w0[i] = le_get_f32(p);
    return PCNN_OK;
}
