/* Saving and resuming a network's training state (docs/checkpoint-format.md).
 *
 * With a communicator both calls are collective and rank 0 does the file
 * I/O: saving gathers the optimizer state of every owned slice and every
 * rank's batch-norm statistics to rank 0, which writes the file
 * atomically; loading has rank 0 read and verify the whole file, then
 * broadcasts the verified bytes, and every rank takes its own slices for
 * the current number of ranks.  Rank 0's outcome (status and message) is
 * broadcast, so a bad file or a failed write fails on every rank alike.
 * A load changes the network only after everything has been verified. */
#include "checkpoint.h"

#include <errno.h>
#include <string.h>

#include "../core/atomic_file.h"
#include "../core/error.h"
#include "../core/hash.h"
#include "../core/le.h"
#include "../core/memory.h"
#include "../graph/graph.h"
#include "checkpoint_format.h"
#include "checkpoint_state.h"

/* ------------------------------------------------------------------ */
/* The network's side of the file                                       */
/* ------------------------------------------------------------------ */

/* A layer's record: kind, output shape, parameter count, and a hash of its
 * structure alone (kind, configuration, shape, inputs, parameter count,
 * whether it is the output).  Unlike net_layer_hashes it leaves out what a
 * resume may change: the exchange strategy, batch size and bucket size. */
static void layer_record(const pcnn_net *net, const pcnn_layer *l, uint64_t basis,
                         ckpt_layer *r)
{
    char config[128] = "";
    if (l->ops->describe) l->ops->describe(l, config, sizeof config);
    uint64_t h = hash_fnv1a(basis, l->ops->kind, strlen(l->ops->kind) + 1);
    h = hash_fnv1a(h, config, strlen(config) + 1);
    h = hash_fnv1a_u64(h, (uint64_t)l->out.c);
    h = hash_fnv1a_u64(h, (uint64_t)l->out.d);
    h = hash_fnv1a_u64(h, (uint64_t)l->out.h);
    h = hash_fnv1a_u64(h, (uint64_t)l->out.w);
    h = hash_fnv1a_u64(h, (uint64_t)l->num_inputs);
    for (int j = 0; j < l->num_inputs; j++) h = hash_fnv1a_u64(h, (uint64_t)l->inputs[j]->index);
    h = hash_fnv1a_u64(h, l->num_params);
    h = hash_fnv1a_u64(h, l == net_output(net));
    *r = (ckpt_layer){.hash = h, .num_params = l->num_params, .c = (uint32_t)l->out.c,
                      .h = (uint32_t)l->out.h, .w = (uint32_t)l->out.w};
    strncpy(r->kind, l->ops->kind, CKPT_KIND_BYTES);
}

/* The network's expectations in the hashes of format `version`, into
 * `layers` (num_layers records). */
static void describe(pcnn_net *net, uint32_t version, ckpt_layer *layers, ckpt_expect *e)
{
    const uint64_t basis = ckpt_hash_basis(version);
    uint64_t h = basis;
    for (int i = 0; i < net_layer_list(net)->count; i++) {
        layer_record(net, net_layer_list(net)->items[i], basis, &layers[i]);
        h = hash_fnv1a_u64(h, layers[i].hash);
    }
    h = hash_fnv1a_u64(h, (uint64_t)net_layer_list(net)->count);
    h = hash_fnv1a_u64(h, (uint64_t)net_loss_kind(net));
    h = hash_fnv1a_u64(h, (uint64_t)net_optimizer(net));
    *e = (ckpt_expect){.definition_hash = h, .num_params = net_num_params(net),
                       .seed = net_get_training_state(net).seed, .bn_floats = state_bn_floats(net),
                       .num_layers = (uint32_t)net_layer_list(net)->count,
                       .optimizer = (uint32_t)net_optimizer(net), .loss = (uint32_t)net_loss_kind(net),
                       .layers = layers};
}

/* The network's expectations for the version written; e->layers is
 * allocated (mem_free it). */
static pcnn_status expect_of(pcnn_net *net, ckpt_expect *e, const char *func)
{
    *e = (ckpt_expect){0};
    ckpt_layer *layers = mem_calloc((size_t)net_layer_list(net)->count, sizeof *layers);
    if (!layers)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "layer table of %d layers",
                         net_layer_list(net)->count);
    describe(net, CKPT_VERSION, layers, e);
    return PCNN_OK;
}

/* Does a parsed file fit the network?  An older file's hashes are compared
 * with the network's in that version's hashes, recomputed into e's own
 * table (nothing allocated: no failure after the ranks agreed). */
static pcnn_status verify_file(pcnn_net *net, const ckpt_view *v, ckpt_expect *e,
                               const char *func)
{
    if (v->version != CKPT_VERSION) describe(net, v->version, (ckpt_layer *)e->layers, e);
    return ckpt_verify(v, e, func);
}

static int ranks_of(const pcnn_net *net) { return net_comm(net) ? net_comm(net)->size : 1; }
static int rank_of(const pcnn_net *net) { return net_comm(net) ? net_comm(net)->rank : 0; }
static bool collective(const pcnn_net *net) { return net_comm(net) && net_comm(net)->size > 1; }

/* ------------------------------------------------------------------ */
/* Agreement                                                            */
/* ------------------------------------------------------------------ */

/* Every rank learns rank 0's outcome: its status, one number (a file
 * size), and its message, which the other ranks adopt as their own (so a
 * bad file reads CORRUPT everywhere, not REMOTE).  Collective, timed; the
 * message buffer stays MPI's if the broadcast is given up. */
enum { OUTCOME_BYTES = 12 + 512 };

static pcnn_status share_root(pcnn_net *net, pcnn_status st, uint64_t *value, const char *func)
{
    const pcnn_comm *c = net_comm(net);
    unsigned char *msg = mem_calloc(1, OUTCOME_BYTES);
    const pcnn_status ready = msg ? PCNN_OK : error_set(PCNN_ERR_OUT_OF_MEMORY, func,
                                                         "outcome message");
    const pcnn_status agreed = net_agree_sum(net, AGREE_LATER, ready, NULL, 0, func);
    if (agreed != PCNN_OK) {
        mem_free(msg);
        return agreed;
    }
    if (c->rank == 0) {
        le_put_u32(msg, (uint32_t)st);
        le_put_u64(msg + 4, *value);
        if (st != PCNN_OK) {
            const char *text = pcnn_last_error();
            size_t skip = strlen(func);
            if (strncmp(text, func, skip) == 0 && strncmp(text + skip, ": ", 2) == 0)
                text += skip + 2; /* our own prefix comes back with error_set */
            strncpy((char *)msg + 12, text, OUTCOME_BYTES - 13);
        }
    }
    MPI_Request req;
    const int code = MPI_Ibcast(msg, OUTCOME_BYTES, MPI_BYTE, 0, c->comm, &req);
    pcnn_status sent = net_complete(net, code, &req, func, "MPI_Bcast (outcome of rank 0)");
    if (sent != PCNN_OK) return sent; /* msg stays MPI's */
    if (c->rank == 0 || st != PCNN_OK) { /* a local failure keeps its message */
        mem_free(msg);
        return st;
    }
    st = (pcnn_status)le_get_u32(msg);
    *value = le_get_u64(msg + 4);
    if (st != PCNN_OK) {
        msg[OUTCOME_BYTES - 1] = '\0';
        st = error_set(st, func, "%s (reported by rank 0)", (const char *)msg + 12);
    }
    mem_free(msg);
    return st;
}

static pcnn_status agree_if(pcnn_net *net, pcnn_status st, agree_stage stage, const char *func)
{
    return collective(net) ? net_agree_sum(net, stage, st, NULL, 0, func) : st;
}

/* ------------------------------------------------------------------ */
/* Saving                                                               */
/* ------------------------------------------------------------------ */

/* Re-home a message recorded by a helper under the public function. */
static pcnn_status restate(pcnn_status st, const char *func)
{
    char text[512];
    const char *colon = strstr(pcnn_last_error(), ": ");
    strncpy(text, colon ? colon + 2 : pcnn_last_error(), sizeof text - 1);
    text[sizeof text - 1] = '\0';
    return error_set(st, func, "%s", text);
}

typedef struct save_data {
    ckpt_meta meta;
    const ckpt_layer *layers;
    const float *params, *m, *v, *bn;
    const void *extra;
    size_t extra_bytes;
} save_data;

static pcnn_status write_file(const char *path, const save_data *d, const char *func)
{
    atomic_file f;
    pcnn_status st = atomic_file_open(&f, path);
    if (st != PCNN_OK) return restate(st, func);
    const int sections = 3 + (d->m != NULL) + (d->v != NULL) + (d->bn != NULL) +
                         (d->extra_bytes > 0);
    ckpt_writer w;
    ckpt_begin(&w, f.stream, sections);
    ckpt_section(&w, CKPT_SEC_META, CKPT_FLAG_REQUIRED);
    ckpt_put_meta(&w, &d->meta);
    ckpt_section(&w, CKPT_SEC_LAYERS, CKPT_FLAG_REQUIRED);
    for (uint32_t i = 0; i < d->meta.num_layers; i++) ckpt_put_layer(&w, &d->layers[i]);
    ckpt_section(&w, CKPT_SEC_PARAMS, CKPT_FLAG_REQUIRED);
    ckpt_put_floats(&w, d->params, d->meta.num_params);
    if (d->m) {
        ckpt_section(&w, CKPT_SEC_OPTIM_M, CKPT_FLAG_REQUIRED);
        ckpt_put_floats(&w, d->m, d->meta.num_params);
    }
    if (d->v) {
        ckpt_section(&w, CKPT_SEC_OPTIM_V, CKPT_FLAG_REQUIRED);
        ckpt_put_floats(&w, d->v, d->meta.num_params);
    }
    if (d->bn) {
        ckpt_section(&w, CKPT_SEC_BN_STATS, CKPT_FLAG_REQUIRED);
        ckpt_put_floats(&w, d->bn, d->meta.bn_floats * d->meta.ranks);
    }
    if (d->extra_bytes > 0) {
        ckpt_section(&w, CKPT_SEC_EXTRA, 0);
        ckpt_put_bytes(&w, d->extra, d->extra_bytes);
    }
    if (!ckpt_finish(&w)) {
        int err = errno;
        atomic_file_abort(&f);
        return error_set(PCNN_ERR_IO, func, "cannot write '%s': %s", path,
                         err ? strerror(err) : "write failed");
    }
    st = atomic_file_commit(&f);
    return st == PCNN_OK ? PCNN_OK : restate(st, func);
}

static pcnn_status check_args(pcnn_net *net, const char *path, const char *func)
{
    TRY(net_check_ready(net, func));
    if (!path || !path[0])
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "path is %s", path ? "empty" : "NULL");
    return PCNN_OK;
}

pcnn_status checkpoint_save(pcnn_net *net, const char *path, const void *extra,
                            size_t extra_bytes, const char *func)
{
    pcnn_status st = check_args(net, path, func);
    if (st == PCNN_OK && !extra && extra_bytes)
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, func, "extra is NULL");
    if (!net || !net_is_finalized(net)) return st; /* no communicator to agree on yet */
    if (st == PCNN_OK) st = net_settle(net);
    TRY(agree_if(net, st, AGREE_ENTRY, func));

    const bool root = rank_of(net) == 0;
    ckpt_expect e = {0};
    state_gather g;
    st = state_gather_alloc(net, &g, func);
    if (st == PCNN_OK && root) st = expect_of(net, &e, func);
    st = agree_if(net, st, AGREE_LATER, func);
    const bool agreed = st == PCNN_OK;
    if (st == PCNN_OK) st = state_gather_run(net, &g, func);
    if (st == PCNN_OK && root) {
        const net_training_state o = net_get_training_state(net);
        save_data d = {
            .meta = {.definition_hash = e.definition_hash, .num_layers = e.num_layers,
                     .optimizer = e.optimizer, .loss = e.loss, .ranks = (uint32_t)ranks_of(net),
                     .num_params = net_num_params(net), .seed = o.seed, .step = o.step,
                     .bn_floats = g.bn_floats, .learning_rate = o.learning_rate,
                     .momentum = o.momentum, .weight_decay = o.weight_decay,
                     .beta1 = o.beta1, .beta2 = o.beta2,
                     .epsilon = o.epsilon, .warmup_steps = o.warmup_steps,
                     .decay_every_steps = o.decay_every_steps,
                     .decay_factor = o.decay_factor},
            .layers = e.layers, .params = state_saved_params(net, &g), .m = g.m, .v = g.v, .bn = g.bn,
            .extra = extra, .extra_bytes = extra_bytes};
        st = write_file(path, &d, func);
    }
    if (collective(net) && agreed && !comm_gave_up(net_comm(net))) {
        uint64_t unused = 0; /* rank 0's write decides for all */
        st = share_root(net, st, &unused, func);
    }
    mem_free((void *)e.layers);
    if (collective(net) && comm_gave_up(net_comm(net))) return st; /* g stays MPI's */
    state_gather_free(&g);
    return st;
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */
/* ------------------------------------------------------------------ */

/* Take everything from a verified file.  Cannot fail. */
static void apply(pcnn_net *net, const ckpt_view *v)
{
    ckpt_decode_floats(v->params, net_params(net), net_num_params(net));
    state_scatter(net, v);
    const ckpt_meta *m = &v->meta;
    const net_training_state s = {
        .learning_rate = m->learning_rate, .momentum = m->momentum,
        .weight_decay = m->weight_decay, .beta1 = m->beta1, .beta2 = m->beta2,
        .epsilon = m->epsilon, .decay_factor = m->decay_factor,
        .warmup_steps = m->warmup_steps, .decay_every_steps = m->decay_every_steps,
        .step = m->step};
    net_set_training_state(net, &s);
}

/* Broadcast rank 0's verified bytes in pieces MPI counts can express,
 * each within the timeout. */
static pcnn_status broadcast_bytes(pcnn_net *net, unsigned char *buf, size_t len,
                                   const char *func)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < len; at += piece) {
        int n = (int)(len - at < piece ? len - at : piece);
        MPI_Request req;
        const int code = MPI_Ibcast(buf + at, n, MPI_BYTE, 0, net_comm(net)->comm, &req);
        TRY(net_complete(net, code, &req, func, "MPI_Bcast (checkpoint)"));
    }
    return PCNN_OK;
}

pcnn_status checkpoint_load(pcnn_net *net, const char *path, void *extra, size_t extra_size,
                            size_t *extra_bytes, const char *func)
{
    pcnn_status st = check_args(net, path, func);
    if (st == PCNN_OK && !extra && extra_size)
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, func, "extra is NULL with size %zu",
                       extra_size);
    if (!net || !net_is_finalized(net)) return st;
    if (st == PCNN_OK) st = net_settle(net);
    ckpt_expect e = {0};
    if (st == PCNN_OK) st = expect_of(net, &e, func);
    st = agree_if(net, st, AGREE_ENTRY, func);
    if (st != PCNN_OK) { /* every rank failed together: nothing was posted */
        mem_free((void *)e.layers);
        return st;
    }

    const bool root = rank_of(net) == 0;
    unsigned char *buf = NULL;
    size_t len = 0;
    ckpt_view view = {0};
    if (root) {
        /* The magic first: a large file of another kind is never read. */
        st = file_read_magic(path, (size_t)SIZE_MAX / 2, CKPT_MAGIC, 8, &buf, &len, func);
        if (st == PCNN_ERR_CORRUPT && !buf)
            st = error_set(PCNN_ERR_CORRUPT, func, "not a libpcnn checkpoint (bad magic)");
        if (st == PCNN_OK) st = ckpt_parse(buf, len, func, &view);
        if (st == PCNN_OK) st = verify_file(net, &view, &e, func);
    }
    if (collective(net)) { /* rank 0 decides; then everyone gets its bytes */
        uint64_t shared = len;
        st = share_root(net, st, &shared, func);
        if (st == PCNN_OK && !root) {
            len = (size_t)shared;
            buf = mem_calloc(len ? len : 1, 1);
            if (!buf) st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "%zu bytes", len);
        }
        if (!comm_gave_up(net_comm(net))) st = agree_if(net, st, AGREE_LATER, func);
        if (st == PCNN_OK) st = broadcast_bytes(net, buf, len, func);
        if (comm_gave_up(net_comm(net))) { /* buf stays MPI's */
            mem_free((void *)e.layers);
            return st;
        }
        if (st == PCNN_OK && !root) { /* the same bytes verify the same way */
            st = ckpt_parse(buf, len, func, &view);
            if (st == PCNN_OK) st = verify_file(net, &view, &e, func);
            if (st != PCNN_OK) st = restate(PCNN_ERR_INTERNAL, func);
        }
    }
    /* Every rank holds the same verified bytes, so this check agrees.
     * Callers that asked for nothing (pcnn_net_load) skip the extra. */
    const bool wanted = extra || extra_bytes;
    if (st == PCNN_OK && wanted && view.extra_bytes > extra_size)
        st = error_set(PCNN_ERR_SHAPE, func, "the file holds %zu bytes of extra state; the "
                       "buffer holds %zu", view.extra_bytes, extra_size);
    if (st == PCNN_OK || st == PCNN_ERR_SHAPE) {
        if (extra_bytes) *extra_bytes = view.extra_bytes;
    }
    if (collective(net)) st = agree_if(net, st, AGREE_LATER, func);
    if (st == PCNN_OK) {
        apply(net, &view);
        if (wanted && view.extra_bytes) memcpy(extra, view.extra, view.extra_bytes);
    }
    mem_free(buf);
    mem_free((void *)e.layers);
    return st;
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

PCNN_API pcnn_status pcnn_net_save(pcnn_net *net, const char *path)
{
    API_ENTRY();
    return checkpoint_save(net, path, NULL, 0, __func__);
}

PCNN_API pcnn_status pcnn_net_load(pcnn_net *net, const char *path)
{
    API_ENTRY();
    return checkpoint_load(net, path, NULL, 0, NULL, __func__);
}

PCNN_API pcnn_status pcnn_net_save_extra(pcnn_net *net, const char *path, const void *extra,
                                         size_t extra_bytes)
{
    API_ENTRY();
    return checkpoint_save(net, path, extra, extra_bytes, __func__);
}

PCNN_API pcnn_status pcnn_net_load_extra(pcnn_net *net, const char *path, void *extra,
                                         size_t size, size_t *extra_bytes)
{
    API_ENTRY();
    return checkpoint_load(net, path, extra, size, extra_bytes, __func__);
}

/* Experimental (section 9): stale temporaries of interrupted saves. */
PCNN_API pcnn_status pcnn_checkpoint_cleanup(const char *path, int *removed)
{
    API_ENTRY();
    if (removed) *removed = 0;
    REQUIRE(path && path[0], PCNN_ERR_INVALID_ARGUMENT, "path is %s", path ? "empty" : "NULL");
    return atomic_file_cleanup(path, removed);
}
