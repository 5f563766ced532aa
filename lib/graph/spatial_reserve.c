/* Spatial and hybrid parallelism: the largest box move of any step, known
 * at finalize (spatial.h).  The mover's buffer is reserved for it once, so
 * that no move of a step allocates: a rank failing there alone would leave
 * its peers waiting for its messages.  And no message may exceed the int
 * count of an MPI call. */
#include <limits.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "spatial.h"

#define FINALIZE "pcnn_net_finalize"

typedef struct move_bound {
    int me, ranks, most_samples; /* most_samples: of a sample group */
    size_t floats;               /* this rank's sends and receives, the largest move */
    size_t message;              /* the largest message, any move */
} move_bound;

/* The floats two boxes can share at any step: their overlap along D, H, W
 * times the fewer samples either holds at most; none across sample groups
 * (group g holds samples [g M, (g + 1) M) in these boxes, M most_samples). */
static size_t shared_floats(const move_bound *b, const box *x, const box *y, int c)
{
    const int nx = box_extent(x, LAYOUT_N), ny = box_extent(y, LAYOUT_N);
    if (nx == 0 || ny == 0 || x->lo[LAYOUT_N] / b->most_samples != y->lo[LAYOUT_N] / b->most_samples)
        return 0;
    box u = *x, v = *y, part;
    u.lo[LAYOUT_N] = v.lo[LAYOUT_N] = 0;
    u.hi[LAYOUT_N] = v.hi[LAYOUT_N] = 1;
    if (!box_intersect(&u, &v, &part)) return 0;
    return box_volume(&part) * (size_t)(nx < ny ? nx : ny) * (size_t)c;
}

/* A move from src[q] to dst[q] (peers: NULL, all). */
static void bound_move(move_bound *b, const box *src, const box *dst, const bool *peers, int c)
{
    size_t total = 0;
    for (int q = 0; q < b->ranks; q++) {
        if (q == b->me || (peers && !peers[q])) continue;
        const size_t out = shared_floats(b, &src[b->me], &dst[q], c),
                     in = shared_floats(b, &src[q], &dst[b->me], c);
        total += out + in;
        if (out > b->message) b->message = out;
        if (in > b->message) b->message = in;
    }
    if (total > b->floats) b->floats = total;
}

/* Every rank's box of layer l under `parts` with every group at its most
 * samples. */
static void boxes_of(const pcnn_net *net, const int *parts, const pcnn_layer *l,
                     const sample_split *split, box *out)
{
    for (int q = 0; q < net->spatial->ranks; q++)
        out[q] = layout_box(parts, q, split, l->out.d, l->out.h, l->out.w);
}

/* The moves of layer i's inputs (their gradients go back the same way). */
static void bound_layer(const pcnn_net *net, int i, const sample_split *split, box *scratch,
                        move_bound *b)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    const int P = sp->ranks;
    box *have_in = scratch, *have = scratch + P, *need = scratch + 2 * P;
    box *phase[3] = {scratch + 3 * P, scratch + 4 * P, scratch + 5 * P};
    for (int j = 0; j < l->num_inputs; j++) {
        if (!sl->moves[j]) continue;
        const pcnn_layer *in = l->inputs[j];
        boxes_of(net, sp->layers[in->index].parts, in, split, have_in);
        boxes_of(net, sl->parts, l, split, have);
        spatial_need_boxes(net, i, j, have, need);
        if (j > 0 || sl->num_phases == 0) {
            bound_move(b, have_in, need, NULL, in->out.c);
            continue;
        }
        for (int f = 0; f < sl->num_phases; f++) {
            for (int q = 0; q < P; q++) phase[f][q] = spatial_phase_box(sl, f, &have_in[q], &need[q]);
            bound_move(b, f == 0 ? have_in : phase[f - 1], phase[f], sl->peers[f], in->out.c);
        }
    }
}

pcnn_status spatial_move_floats(const pcnn_net *net, size_t *floats)
{
    const spatial *sp = net->spatial;
    const int P = sp->ranks, G = sp->groups, M = net->max_batch;
    box *scratch = mem_calloc(6 * (size_t)P, sizeof(box));
    int *start = mem_calloc(2 * (size_t)G, sizeof(int));
    if (!scratch || !start) {
        mem_free(scratch);
        mem_free(start);
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "boxes of %d ranks", P);
    }
    int *count = start + G;
    for (int g = 0; g < G; g++) {
        start[g] = g * M;
        count[g] = M;
    }
    const sample_split split = {G, start, count};
    move_bound b = {.me = sp->rank, .ranks = P, .most_samples = M > 0 ? M : 1};
    for (int i = 1; i < sp->count; i++) bound_layer(net, i, &split, scratch, &b);
    /* spatial_gather_output: every rank of a group receives its outputs. */
    const pcnn_layer *o = net->output;
    boxes_of(net, sp->layers[o->index].parts, o, &split, scratch);
    for (int q = 0; q < P; q++)
        scratch[P + q] = (box){{start[q / sp->group_size], 0, 0, 0},
                               {start[q / sp->group_size] + M, o->out.d, o->out.h, o->out.w}};
    bound_move(&b, scratch, scratch + P, NULL, o->out.c);
    mem_free(scratch);
    mem_free(start);
    if (b.message > INT_MAX)
        return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "a halo or shuffle message of %zu "
                         "floats exceeds MPI's count (%d): split the samples or the layers "
                         "further, or use a smaller max_batch", b.message, INT_MAX);
    *floats = b.floats;
    return PCNN_OK;
}
