/* Epochs and evaluation over sharded data (pcnn_dataset_set_sharded): each
 * rank passes its own shard, of any length.  The ranks first learn every
 * shard's length, so that all of them plan the same steps and weigh each
 * step by the samples it really holds. */
#include <math.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../data/dataset.h"
#include "../kernels/kernels.h"
#include "../parallel/decomp.h"
#include "../parallel/parallel.h"
#include "loss.h"
#include "net.h"
#include "spatial.h"
#include "train_sharded.h"

/* lengths[r] = rank r's shard length, by sums of one-hot vectors (the
 * timed agreement carries AGREE_MAX_VALUES values at a time). */
static pcnn_status gather_lengths(pcnn_net *net, int n, double *lengths, const char *func)
{
    const int ranks = net->comm->size, rank = net->comm->rank;
    for (int base = 0; base < ranks; base += AGREE_MAX_VALUES) {
        const int k = ranks - base < AGREE_MAX_VALUES ? ranks - base : AGREE_MAX_VALUES;
        for (int i = 0; i < k; i++) lengths[base + i] = base + i == rank ? (double)n : 0.0;
        TRY(net_agree_sum(net, AGREE_LATER, PCNN_OK, lengths + base, k, func));
    }
    return PCNN_OK;
}

/* What a sharded pass refuses, the same on every rank (the mode, batch and
 * min_local were agreed, and spatial is the network's). */
static pcnn_status check_mode(const pcnn_net *net, int batch, int min_local, const char *func)
{
    if (net_is_spatial(net))
        return error_set(PCNN_ERR_UNSUPPORTED, func, "sharded data needs a data-parallel "
                         "network: the ranks of a spatial distribution share every sample");
    if (min_local > 0)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "sharded data with the scheduler's "
                         "min_local %d: every rank trains its own shard", min_local);
    const int ranks = net->comm ? net->comm->size : 1;
    if (batch < ranks)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "sharded: the global batch %d must "
                         "hold at least one sample per rank (%d ranks)", batch, ranks);
    return PCNN_OK;
}

static int clamp_count(long n, long start, int share)
{
    const long left = n - start;
    return left <= 0 ? 0 : left < share ? (int)left : share;
}

pcnn_status sharded_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch,
                                int min_local, double *mean_loss, double *first_loss,
                                const char *func)
{
    TRY(check_mode(net, batch, min_local, func));
    const int ranks = net->comm ? net->comm->size : 1, rank = net->comm ? net->comm->rank : 0;
    double *lengths = mem_alloc((size_t)ranks * sizeof *lengths);
    pcnn_status st = lengths ? PCNN_OK
                             : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "%d shard lengths", ranks);
    if (net->comm) TRY(net_agree(net, st, func));
    TRY(st);
    if (net->comm) st = gather_lengths(net, data->n, lengths, func);
    else lengths[0] = data->n;
    long steps = 0;
    for (int r = 0; r < ranks && st == PCNN_OK; r++) {
        const long share = decomp_share(batch, ranks, r, NULL), n = (long)lengths[r];
        const long s = n / share + (n % share != 0);
        if (s > steps) steps = s;
    }
    const int share = decomp_share(batch, ranks, rank, NULL);
    double loss_sum = 0.0, stop = 0.0;
    long trained = 0;
    net->stopped_early = false;
    for (long b = 0; b < steps && st == PCNN_OK; b++) {
        long total = 0;
        for (int r = 0; r < ranks; r++) {
            const int sr = decomp_share(batch, ranks, r, NULL);
            total += clamp_count((long)lengths[r], b * sr, sr);
        }
        const long start = b * share;
        const int count = clamp_count(data->n, start, share);
        if (count > 0)
            st = dataset_read_batch(data, (int)start, count, NULL, net->stage_x,
                                    net->stage_labels, net->stage_targets);
        if (data->vol && net->comm) st = net_agree(net, st, func);
        if (st != PCNN_OK) break;
        float loss;
        st = net_train_step(net, count, net->stage_x, net->stage_labels, net->stage_targets,
                            &loss, &stop, false, "pcnn_net_train_step");
        if (st != PCNN_OK) break;
        if (stop > 0) {
            net->stopped_early = true;
            break;
        }
        if (b == 0 && first_loss) *first_loss = loss;
        loss_sum += (double)loss * (double)total;
        trained += total;
        if (net->step_callback)
            stop = net->step_callback(net->step_user, (int64_t)net->step - 1, (int)b,
                                      (int)steps, (double)loss) != 0;
    }
    mem_free(lengths);
    TRY(st);
    if (mean_loss) *mean_loss = loss_sum / (double)trained;
    return PCNN_OK;
}

pcnn_status sharded_evaluate(pcnn_net *net, const pcnn_dataset *data, double *loss,
                             double *accuracy, const char *func)
{
    TRY(check_mode(net, net->global_max_batch, 0, func));
    const bool classify = net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    double sums[3] = {0.0, 0.0, (double)data->n}; /* loss, correct, samples */
    pcnn_status st = PCNN_OK;
    const int saved = blas_threads_enter();
    for (int done = 0; done < data->n && st == PCNN_OK; done += net->max_batch) {
        const int count = data->n - done < net->max_batch ? data->n - done : net->max_batch;
        st = dataset_read_batch(data, done, count, NULL, net->stage_x, net->stage_labels,
                                net->stage_targets);
        if (st != PCNN_OK) break; /* agreed on below */
        net_load_input(net, count, net->stage_x);
        net_forward(net, count, false, false); /* flushed: cannot fail */
        sums[0] += net_loss(net, count, net->stage_labels, net->stage_targets, 1.0, false);
        if (classify)
            sums[1] += (double)loss_count_correct(net->output->y, net->output->out.c, count,
                                                  net->stage_labels);
    }
    blas_threads_leave(saved);
    if (net->comm) st = net_agree_sum(net, AGREE_LATER, st, sums, 3, func);
    TRY(st);
    if (net->opt.check_numerics && !isfinite(sums[0]))
        return error_set(PCNN_ERR_NUMERIC, func, "the loss over the shards is %g: NaN or Inf "
                         "in the samples or the network", sums[0]);
    if (loss) *loss = sums[0] / sums[2];
    if (accuracy) *accuracy = classify ? sums[1] / sums[2] : NAN;
    return PCNN_OK;
}
