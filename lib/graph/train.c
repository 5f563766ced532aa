/* Training and evaluation over a whole dataset, batch by batch, through
 * staging buffers planned at finalize (no allocation per batch). */
#include <math.h>

#include "../core/error.h"
#include "../data/dataset.h"
#include "../kernels/kernels.h"
#include "../parallel/parallel.h"
#include "../parallel/decomp.h"
#include "data_agree.h"
#include "loss.h"
#include "net.h"
#include "spatial.h"
#include "train_sharded.h"

static pcnn_status check_dataset(const pcnn_net *net, const pcnn_dataset *d, const char *func)
{
    if (!d) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "data is NULL");
    const shape in = net->layers.items[0]->out;
    if (d->c != in.c || d->d != in.d || d->h != in.h || d->w != in.w) {
        if (d->d == 1 && in.d == 1)
            return error_set(PCNN_ERR_SHAPE, func,
                             "dataset samples are (%d, %d, %d) but the network input is "
                             "(%d, %d, %d)", d->c, d->h, d->w, in.c, in.h, in.w);
        return error_set(PCNN_ERR_SHAPE, func,
                         "dataset samples are (%d, %d, %d, %d) but the network input is "
                         "(%d, %d, %d, %d) (channels, depth, height, width)",
                         d->c, d->d, d->h, d->w, in.c, in.d, in.h, in.w);
    }
    if (net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY) {
        if (!d->labels)
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                             "cross entropy needs a dataset with labels");
        if (d->num_classes > net->output->out.c)
            return error_set(PCNN_ERR_SHAPE, func,
                             "dataset has labels up to %d but the network outputs %d classes",
                             d->num_classes - 1, net->output->out.c);
    } else {
        if (!d->targets || (size_t)d->target_count != shape_size(net->output->out))
            return error_set(PCNN_ERR_SHAPE, func,
                             "the loss needs %zu targets per sample; the dataset has %d",
                             shape_size(net->output->out), d->target_count);
    }
    return PCNN_OK;
}

/* Copy (or, for file-backed volumes, read) a batch into the staging
 * buffers.  Reading files can fail on one rank only: the caller makes the
 * ranks agree on the outcome. */
static pcnn_status stage(pcnn_net *net, const pcnn_dataset *d, int start, int count)
{
    if (count < 1) return PCNN_OK;
    return dataset_read_batch(d, start, count, NULL, net->stage_x, net->stage_labels,
                              net->stage_targets);
}

/* This rank's share of the whole dataset: [*first, *first + return). */
static int my_share(const pcnn_net *net, int n, long *first)
{
    return decomp_share(n, net->comm ? net->comm->size : 1, net->comm ? net->comm->rank : 0,
                        first);
}

/* The means of the summed loss and correct answers.  The sums are the
 * same on every rank, and so is sums[2], the ranks checking numerics (one
 * rank's check covers all), so all fail together. */
static pcnn_status finish_evaluation(const pcnn_net *net, const pcnn_dataset *data,
                                     const double *sums, double *loss, double *accuracy)
{
    if ((net->comm ? sums[2] > 0 : net->opt.check_numerics) && !isfinite(sums[0]))
        return error_set(PCNN_ERR_NUMERIC, "pcnn_net_evaluate", "the loss over the dataset is "
                         "%g: NaN or Inf in the samples or the network", sums[0]);
    if (loss) *loss = sums[0] / data->n;
    if (accuracy) *accuracy = net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY ? sums[1] / data->n : NAN;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_evaluate(pcnn_net *net, const pcnn_dataset *data, double *loss,
                                       double *accuracy)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    pcnn_status st = check_dataset(net, data, __func__);
    if (st == PCNN_OK) st = exchange_flush(net->exchange);
    if (net->comm) TRY(net_agree(net, st, __func__));
    TRY(st);
    TRY(net_agree_dataset(net, data, net->global_max_batch, 0, __func__));
    if (data->sharded) return sharded_evaluate(net, data, loss, accuracy, __func__);
    const bool classify = net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    double sums[3] = {0.0, 0.0, net->opt.check_numerics ? 1.0 : 0.0}; /* loss, correct, checks */
    if (net_is_spatial(net)) { /* collective over the boxes; fails on every rank alike */
        st = spatial_evaluate(net, data, sums, __func__);
        if (net_async_status(net) == PCNN_OK)
            st = net_agree_sum(net, AGREE_LATER, st, sums, 3, __func__);
        TRY(st);
        return finish_evaluation(net, data, sums, loss, accuracy);
    }
    long first;
    const int mine = my_share(net, data->n, &first);
    int saved = blas_threads_enter();
    for (int done = 0; done < mine && st == PCNN_OK; done += net->max_batch) {
        int count = mine - done < net->max_batch ? mine - done : net->max_batch;
        st = stage(net, data, (int)first + done, count);
        if (st != PCNN_OK) break; /* agreed on below */
        net_load_input(net, count, net->stage_x);
        net_forward(net, count, false, false); /* flushed: cannot fail */
        sums[0] += net_loss(net, count, net->stage_labels, net->stage_targets, 1.0, false);
        if (classify)
            sums[1] += (double)loss_count_correct(net->output->y, net->output->out.c, count,
                                                  net->stage_labels);
    }
    blas_threads_leave(saved);
    if (net->comm) st = net_agree_sum(net, AGREE_LATER, st, sums, 3, __func__);
    TRY(st);
    return finish_evaluation(net, data, sums, loss, accuracy);
}

/* The epoch loop of pcnn_net_train_epoch and of the batch scheduler: each
 * batch is split over the ranks that sched_share lets compute (all of
 * them when min_local is 0); the others pass no samples but still take part
 * in the exchange, so they end every step with the same parameters. */
pcnn_status net_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch, int min_local,
                            double *mean_loss, double *first_loss, const char *func)
{
    TRY(net_check_ready(net, func));
    pcnn_status st = check_dataset(net, data, func);
    if (st == PCNN_OK && (batch < 1 || batch > net->global_max_batch))
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, func, "batch %d must be in [1, %d] (the "
                       "max_batch of finalize)", batch, net->global_max_batch);
    if (net->comm) TRY(net_agree(net, st, func));
    TRY(st);
    TRY(net_agree_dataset(net, data, batch, min_local, func));
    if (data->sharded)
        return sharded_train_epoch(net, data, batch, min_local, mean_loss, first_loss, func);
    int ranks = net->comm ? net->comm->size : 1, rank = net->comm ? net->comm->rank : 0;
    if (net_is_spatial(net)) { /* the batch is shared by sample groups, not ranks */
        ranks = net->spatial->groups;
        rank = net->spatial->rank / net->spatial->group_size;
    }
    const int batches = data->n / batch + (data->n % batch != 0); /* no overflow near INT_MAX */
    double loss_sum = 0.0, stop = 0.0;
    long trained = 0;
    net->stopped_early = false;
    for (int b = 0; b < batches; b++) {
        const int start = b * batch;
        const int total = data->n - start < batch ? data->n - start : batch;
        long first;
        const int count = decomp_active_share(total, ranks, rank, min_local, &first);
        /* A spatial network reads only this rank's box of the samples. */
        const bool box = net_is_spatial(net);
        st = box ? spatial_stage(net, data, start + (int)first, count)
                 : stage(net, data, start + (int)first, count);
        if (data->vol && net->comm) st = net_agree(net, st, func);
        TRY(st);
        float loss;
        /* The callbacks' votes to stop ride on the step's first agreement. */
        TRY(net_train_step(net, count, net->stage_x, net->stage_labels, net->stage_targets,
                           &loss, &stop, box, "pcnn_net_train_step"));
        if (stop > 0) {
            net->stopped_early = true;
            break;
        }
        if (start == 0 && first_loss) *first_loss = loss;
        loss_sum += (double)loss * total;
        trained += total;
        if (net->step_callback)
            stop = net->step_callback(net->step_user, (int64_t)net->step - 1, b, batches,
                                      (double)loss) != 0;
    }
    if (mean_loss) *mean_loss = loss_sum / (double)trained;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch,
                                          double *mean_loss)
{
    API_ENTRY();
    return net_train_epoch(net, data, batch, 0, mean_loss, NULL, __func__);
}
