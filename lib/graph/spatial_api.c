/* Spatial and hybrid parallelism: the public calls (pcnn.h section 9). */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "spatial.h"

pcnn_status spatial_config(pcnn_net *net, spatial **out, const char *func)
{
    if (!net->spatial) {
        spatial *sp = mem_calloc(1, sizeof *sp);
        if (!sp) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "distribution settings");
        sp->net_parts[LAYOUT_N] = net->comm ? net->comm->size : 1;
        for (int k = 1; k < LAYOUT_DIMS; k++) sp->net_parts[k] = 1;
        net->spatial = sp;
    }
    *out = net->spatial;
    return PCNN_OK;
}

void spatial_destroy(pcnn_net *net)
{
    if (!net->spatial) return;
    spatial_release(net);
    mem_free(net->spatial->layer_parts);
    mem_free(net->spatial);
    net->spatial = NULL;
}

static pcnn_status check_parts(const pcnn_net *net, const int *parts, const char *func)
{
    if (!parts) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "parts is NULL");
    const int ranks = net->comm ? net->comm->size : 1;
    long product = 1;
    for (int k = 0; k < LAYOUT_DIMS; k++) {
        if (parts[k] < 1)
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "parts[%d] = %d must be >= 1", k,
                             parts[k]);
        product *= parts[k];
        if (product > ranks) break;
    }
    if (product != ranks)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "parts {%d, %d, %d, %d}: their product "
                         "must be the communicator's %d ranks", parts[0], parts[1], parts[2],
                         parts[3], ranks);
    return PCNN_OK;
}

static pcnn_status check_editable(const pcnn_net *net, const char *func)
{
    TRY(net_check_alive(net, func));
    if (net->finalized || net->plan_failed)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "distributions are set before pcnn_net_finalize");
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_distribution(pcnn_net *net, const int *parts)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(check_editable(net, __func__));
    TRY(check_parts(net, parts, __func__));
    spatial *sp = NULL;
    TRY(spatial_config(net, &sp, __func__));
    memcpy(sp->net_parts, parts, sizeof sp->net_parts);
    sp->net_set = true;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_set_distribution(pcnn_layer *layer, const int *parts)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    pcnn_net *net = net_of_layer(layer);
    TRY(check_editable(net, __func__));
    TRY(check_parts(net, parts, __func__));
    spatial *sp = NULL;
    TRY(spatial_config(net, &sp, __func__));
    if (layer->index >= sp->layer_cap) {
        const int cap = layer->index + 16;
        int(*grown)[LAYOUT_DIMS] = mem_calloc((size_t)cap, sizeof *grown);
        REQUIRE(grown, PCNN_ERR_OUT_OF_MEMORY, "distributions of %d layers", cap);
        if (sp->layer_parts)
            memcpy(grown, sp->layer_parts, (size_t)sp->layer_cap * sizeof *grown);
        mem_free(sp->layer_parts);
        sp->layer_parts = grown;
        sp->layer_cap = cap;
    }
    memcpy(sp->layer_parts[layer->index], parts, sizeof sp->layer_parts[0]);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_get_distribution(const pcnn_layer *layer, int *parts)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    REQUIRE_PTR(parts);
    const pcnn_net *net = net_of_layer(layer);
    TRY(net_check_alive(net, __func__));
    const spatial *sp = net->spatial;
    if (sp && sp->active) {
        memcpy(parts, sp->layers[layer->index].parts, sizeof sp->layers[0].parts);
    } else if (sp && layer->index < sp->layer_cap && sp->layer_parts[layer->index][0] > 0) {
        memcpy(parts, sp->layer_parts[layer->index], sizeof sp->layer_parts[0]);
    } else if (sp) {
        memcpy(parts, sp->net_parts, sizeof sp->net_parts);
    } else {
        parts[0] = net->comm ? net->comm->size : 1;
        parts[1] = parts[2] = parts[3] = 1;
    }
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_local_box(const pcnn_layer *layer, int *start, int *count)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    REQUIRE_PTR(start);
    REQUIRE_PTR(count);
    const pcnn_net *net = net_of_layer(layer);
    TRY(net_check_ready(net, __func__));
    const int ext[3] = {layer->out.d, layer->out.h, layer->out.w};
    for (int k = 0; k < 3; k++) {
        start[k] = 0;
        count[k] = ext[k];
    }
    if (!net_is_spatial(net)) return PCNN_OK;
    const spatial *sp = net->spatial;
    const int *parts = sp->layers[layer->index].parts;
    int c[LAYOUT_DIMS];
    layout_coords(parts, sp->rank, c);
    for (int k = 0; k < 3; k++) {
        int lo, hi;
        layout_block(ext[k], parts[k + 1], c[k + 1], &lo, &hi);
        start[k] = lo;
        count[k] = hi - lo;
    }
    return PCNN_OK;
}

/* How many sample groups split the batch: the input layer's P_N, as
 * finalize resolves it (its own distribution if set, else the network's);
 * after finalize the groups the steps run with. */
static int sample_groups(const pcnn_net *net, int ranks)
{
    const spatial *sp = net->spatial;
    if (!sp) return ranks;
    if (net->finalized) return sp->active ? sp->groups : ranks;
    int pn = sp->layer_cap > 0 && sp->layer_parts[0][LAYOUT_N] > 0
                 ? sp->layer_parts[0][LAYOUT_N]
                 : sp->net_parts[LAYOUT_N];
    /* A distribution set before pcnn_net_set_comm may not fit its ranks:
     * never divide by a part that does not divide them. */
    if (pn < 1 || ranks % pn != 0) pn = ranks;
    return pn;
}

PCNN_API pcnn_status pcnn_net_group_info(const pcnn_net *net, int *group, int *groups,
                                         int *rank_in_group, int *group_size)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    const int ranks = net->comm ? net->comm->size : 1, rank = net->comm ? net->comm->rank : 0;
    const int pn = sample_groups(net, ranks);
    const int size = ranks / pn;
    if (group) *group = rank / size;
    if (groups) *groups = pn;
    if (rank_in_group) *rank_in_group = rank % size;
    if (group_size) *group_size = size;
    return PCNN_OK;
}

pcnn_status spatial_refuse(const pcnn_net *net, const char *func)
{
    if (!net || !net_is_spatial(net)) return PCNN_OK;
    return error_set(PCNN_ERR_UNSUPPORTED, func, "the network is spatially distributed "
                     "(pcnn_net_set_distribution): a rank holds only its box of each "
                     "sample, so inference is collective: pcnn_net_predict_parallel");
}

bool net_layer_split_of(const pcnn_net *net, int i, net_layer_split *out)
{
    memset(out, 0, sizeof *out);
    if (!net_is_spatial(net) || i < 0 || i >= net->spatial->count) return false;
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    memcpy(out->parts, sl->parts, sizeof out->parts);
    for (int j = 0; j < l->num_inputs && j < 2; j++)
        memcpy(out->input_parts[j], sp->layers[l->inputs[j]->index].parts,
               sizeof out->input_parts[j]);
    out->groups = sp->groups;
    out->windowed = sl->windowed;
    out->in_place = sl->in_place;
    /* In place, the halo travels while the whole block computes wherever
     * the option asks (spatial_in_place.c); else as the trials decided. */
    out->overlap = sl->in_place ? net->opt.halo_overlap
                   : sp->overlap_decided ? sl->overlap_on : sl->overlap;
    out->staged = sl->windowed && sl->moves[0] && !sl->in_place;
    out->keeps_input = sl->keeps_input;
    out->box_dense = sl->box_dense;
    out->folded = sl->folded;
    out->group_bn = sl->group_bn;
    return true;
}
