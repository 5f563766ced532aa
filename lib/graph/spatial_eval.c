/* Spatial and hybrid parallelism: the calls besides a training step on a
 * distributed network (spatial.h) -- the loss and gradients of one batch,
 * evaluation over a dataset, and each rank's box of a dataset's batch.
 * All of them are collective: every rank of a sample group passes the
 * group's samples, as to pcnn_net_train_step. */
#include <math.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../data/dataset.h"
#include "../data/volume.h"
#include "../kernels/kernels.h"
#include "../parallel/decomp.h"
#include "loss.h"
#include "spatial.h"

pcnn_status spatial_async_status(const pcnn_net *net)
{
    if (!net->spatial || !net->spatial->active) return PCNN_OK;
    pcnn_status st = box_mover_error(net->spatial->mover);
    if (st == PCNN_OK && net->spatial->group_reducer)
        st = reducer_error(net->spatial->group_reducer);
    return st;
}

pcnn_status spatial_checked(pcnn_net *net, pcnn_status st)
{
    const pcnn_status failed = spatial_async_status(net);
    if (failed == PCNN_OK) return st;
    /* A halo, shuffle or group reduction gave up: the ranks no longer agree
     * on what comes next, so the exchange must not wait for partners
     * either (as net_sync_checked does for the batch-norm reducer). */
    exchange_abort(net->exchange);
    return st == PCNN_OK ? failed : st;
}

/* The batch-norm hooks of a step (NULL: no synchronised batch norm). */
static const run_reduce *sync_hooks(pcnn_net *net, run_reduce *hooks)
{
    if (!net->reducer) return NULL;
    *hooks = net_sync_hooks(net);
    return hooks;
}

/* The sum of every rank's gradient share: the gradient of the group
 * samples' mean loss (the loss is normalised by the global batch). */
static pcnn_status sum_gradients(pcnn_net *net, const char *func)
{
    if (net->num_params == 0) return PCNN_OK;
    TRY(comm_check_usable(net->comm, func));
    MPI_Request req;
    const int code = MPI_Iallreduce(MPI_IN_PLACE, net->grads, (int)net->num_params, MPI_FLOAT,
                                    MPI_SUM, net->comm->comm, &req);
    return net_complete(net, code, &req, func, "MPI_Allreduce (weight gradients)");
}

pcnn_status spatial_compute(pcnn_net *net, const char *func, bool gradients, int n,
                            const float *x, const int32_t *labels, const float *targets,
                            float *loss_out)
{
    /* A sample group without samples (fewer samples than groups) passes
     * n = 0 and takes part in every collective, as in a training step. */
    pcnn_status st = n == 0 ? net_check_alive(net, func)
                            : net_check_batch(net, func, n, x, labels, targets, true);
    if (st == PCNN_OK && (n < 0 || n > net->max_batch))
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                       "batch of %d samples: must be in [0, %d] on each rank", n,
                       net->max_batch);
    if (st == PCNN_OK) st = exchange_flush(net->exchange);
    if (st == PCNN_OK && gradients && net->num_params > (size_t)INT32_MAX)
        st = error_set(PCNN_ERR_UNSUPPORTED, func, "%zu parameters: more than one MPI "
                       "reduction holds", net->num_params);
    double sizes[3] = {st == PCNN_OK ? n : 0, 0, 0};
    TRY(net_agree_batch(net, st, sizes, net_effective_lr(net), func));
    TRY(spatial_begin_step(net, func)); /* every rank's verdict is the same */
    spatial *sp = net->spatial;
    if (sp->batch < 1)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "no rank passed any sample");
    run_reduce hooks;
    const run_reduce *reduce = sync_hooks(net, &hooks);
    const int saved = blas_threads_enter();
    if (n > 0) spatial_load_input(net, n, x, false, false);
    sp->keep_stats = true; /* a training-mode pass that leaves running statistics alone */
    st = spatial_forward(net, reduce, true);
    sp->keep_stats = false;
    double loss = st == PCNN_OK ? spatial_loss(net, labels, targets) : 0.0;
    st = spatial_checked(net, net_sync_checked(net, st));
    double checks = net->opt.check_numerics ? 1.0 : 0.0; /* one rank's check covers all */
    if (net_async_status(net) == PCNN_OK) {
        double agreed[2] = {loss, checks};
        st = net_agree_sum(net, AGREE_STEP_LOSS, st, agreed, 2, func);
        loss = agreed[0];
        checks = agreed[1];
    }
    if (st == PCNN_OK && gradients) {
        st = spatial_checked(net, net_sync_checked(net, spatial_backward(net, reduce)));
        if (st == PCNN_OK) st = sum_gradients(net, func);
        spatial_box_dense_grads_written(net); /* every rank's columns, summed */
        if (net_async_status(net) == PCNN_OK)
            st = net_agree_sum(net, AGREE_STEP_END, st, NULL, 0, func);
    }
    blas_threads_leave(saved);
    /* Only the boxes' input gradients exist: pcnn_net_get_input_grad refuses. */
    net->last_backward_n = 0;
    TRY(st);
    if (checks > 0 && !isfinite(loss)) /* the same sum on every rank */
        return error_set(PCNN_ERR_NUMERIC, func, "the loss is %g at step %llu", loss,
                         (unsigned long long)net->step);
    if (loss_out) *loss_out = (float)loss;
    return PCNN_OK;
}

pcnn_status spatial_stage(pcnn_net *net, const pcnn_dataset *d, int start, int count)
{
    if (count < 1) return PCNN_OK;
    int lo[3], ext[3];
    TRY(pcnn_layer_local_box(net->layers.items[0], lo, ext));
    const volume_box box = {{lo[0], lo[1], lo[2]}, {ext[0], ext[1], ext[2]}};
    return dataset_read_batch(d, start, count, &box, net->stage_x, net->stage_labels,
                              net->stage_targets);
}

/* The loss summed over this rank's samples of the output, and how many of
 * them it classifies right (labels: the group's). */
static void head_sums(pcnn_net *net, const int32_t *labels, const float *targets, double *sums)
{
    const spatial *sp = net->spatial;
    const box *mine = &sp->layers[net->output->index].mine;
    const int n = box_extent(mine, LAYOUT_N);
    if (n == 0) return;
    const int offset = mine->lo[LAYOUT_N] - sp->group_start[sp->rank / sp->group_size];
    loss_args a = {
        .kind = net->loss,
        .y = net->output->y,
        .s = net->output->out,
        .n = n,
        .labels = labels ? labels + offset : NULL,
        .targets = targets ? targets + (size_t)offset * shape_size(net->output->out) : NULL,
        .norm_samples = 1.0,
        .scratch = net->loss_scratch,
        .threads = net->threads,
    };
    sums[0] += loss_compute(&a, NULL);
    if (labels)
        sums[1] += (double)loss_count_correct(net->output->y, net->output->out.c, n,
                                              labels + offset);
}

pcnn_status spatial_evaluate(pcnn_net *net, const pcnn_dataset *d, double *sums,
                             const char *func)
{
    const spatial *sp = net->spatial;
    const int group = sp->rank / sp->group_size;
    const bool classify = net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    const int chunk = net->global_max_batch;
    pcnn_status st = PCNN_OK;
    const int saved = blas_threads_enter();
    /* Every rank runs every chunk (the passes are collective); a rank
     * whose read failed passes no samples and fails the next agreement. */
    for (int start = 0; start < d->n && st == PCNN_OK; start += chunk) {
        const int total = d->n - start < chunk ? d->n - start : chunk;
        long first;
        const int count = decomp_share(total, sp->groups, group, &first);
        pcnn_status read = spatial_stage(net, d, start + (int)first, count);
        double sizes[3] = {read == PCNN_OK ? count : 0, 0, 0};
        st = net_agree_batch(net, read, sizes, net_effective_lr(net), func);
        if (st == PCNN_OK) st = spatial_begin_step(net, func);
        if (st != PCNN_OK) break;
        if (count > 0) spatial_load_input(net, count, net->stage_x, true, false);
        st = spatial_checked(net, spatial_forward(net, NULL, false));
        if (st == PCNN_OK)
            head_sums(net, classify ? net->stage_labels : NULL,
                      classify ? NULL : net->stage_targets, sums);
    }
    blas_threads_leave(saved);
    return st;
}
