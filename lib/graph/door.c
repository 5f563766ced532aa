/* The graph's door (graph.h): plain reads and writes of a network for the
 * scheduler and checkpoints. */
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "net.h"

const pcnn_comm *net_comm(const pcnn_net *net) { return net->comm; }
const layer_list *net_layer_list(const pcnn_net *net) { return &net->layers; }
const pcnn_layer *net_output(const pcnn_net *net) { return net->output; }
bool net_is_finalized(const pcnn_net *net) { return net->finalized; }
size_t net_num_params(const pcnn_net *net) { return net->num_params; }
float *net_params(const pcnn_net *net) { return net->params; }
optim_state *net_optim(const pcnn_net *net) { return (optim_state *)&net->optim; }
const exchange *net_exchange(const pcnn_net *net) { return net->exchange; }
void net_masters_from_params(pcnn_net *net) { exchange_masters_from_params(net->exchange); }
pcnn_optimizer net_optimizer(const pcnn_net *net) { return net->optimizer; }
pcnn_loss net_loss_kind(const pcnn_net *net) { return net->loss; }
int net_local_max_batch(const pcnn_net *net) { return net->max_batch; }
int net_global_max_batch(const pcnn_net *net) { return net->global_max_batch; }

pcnn_status net_settle(pcnn_net *net) { return exchange_flush(net->exchange); }

net_training_state net_get_training_state(const pcnn_net *net)
{
    const net_options *o = &net->opt;
    return (net_training_state){
        .learning_rate = o->learning_rate, .momentum = o->hyper.momentum,
        .weight_decay = o->weight_decay, .beta1 = o->hyper.beta1, .beta2 = o->hyper.beta2,
        .epsilon = o->hyper.epsilon, .decay_factor = o->decay_factor,
        .warmup_steps = (uint64_t)o->warmup_steps,
        .decay_every_steps = (uint64_t)o->decay_every_steps, .step = net->step,
        .seed = o->seed};
}

void net_set_training_state(pcnn_net *net, const net_training_state *s)
{
    net_options *o = &net->opt;
    o->learning_rate = s->learning_rate;
    o->hyper.momentum = s->momentum;
    o->weight_decay = s->weight_decay;
    o->hyper.beta1 = s->beta1;
    o->hyper.beta2 = s->beta2;
    o->hyper.epsilon = s->epsilon;
    o->warmup_steps = (long)s->warmup_steps;
    o->decay_every_steps = (long)s->decay_every_steps;
    o->decay_factor = s->decay_factor;
    net->step = s->step;
}

void net_set_learning_rate(pcnn_net *net, double rate) { net->opt.learning_rate = rate; }

/* PCNN_EXCHANGE_AUTO's layers start from the default's heuristics; those a
 * planner decided are marked as chosen (graph/planner_hook.c). */
pcnn_exchange net_default_exchange(const pcnn_net *net)
{
    return net->opt.exchange == PCNN_EXCHANGE_AUTO ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER
                                                   : net->opt.exchange;
}
size_t net_bucket_bytes(const pcnn_net *net) { return net->opt.bucket_bytes; }
bool net_overlap(const pcnn_net *net) { return net->opt.overlap; }
int net_threads(const pcnn_net *net) { return net->threads; }

/* Layers whose backward may run without any input gradient (as when the
 * network's input feeds them): convolutions and dense layers. */
static bool weights_alone(const pcnn_layer *l)
{
    return l->num_params > 0 && l->ops->caps.weights_alone;
}

/* One pass of the timing below: forward layer by layer, the loss, then
 * backward per layer as a training step runs it (which also feeds the
 * layers below their dy), then, for convolutions and dense layers, again
 * without input gradients: the weight part alone. */
static void time_pass(pcnn_net *net, int n, const int32_t *labels, const float *targets,
                      const float *x, float *saved, double *t, double *overhead)
{
    run_ctx ctx = {.n = n, .train = true, .threads = net->threads, .seed = net->opt.seed,
                   .step = net->step, .workspace = net->workspace};
    const int L = net->layers.count;
    /* The copy of a batch into the input is timed; the layers then run on
     * the samples the network last trained on, when it has (some kernels'
     * speed depends on the values: the branches of max pooling, dead ReLUs),
     * else on the made-up batch. */
    pcnn_layer *input = net->layers.items[0];
    const size_t in_count = (size_t)n * shape_size(input->out);
    if (saved) memcpy(saved, input->y, in_count * sizeof *saved);
    double t0 = clock_now();
    net_load_input(net, n, x);
    double spent = clock_now() - t0;
    if (saved) memcpy(input->y, saved, in_count * sizeof *saved);
    for (int i = 1; i < L; i++) {
        pcnn_layer *l = net->layers.items[i];
        t0 = clock_now();
        l->ops->forward(l, &ctx);
        t[i * 3 + 0] = clock_now() - t0;
    }
    t0 = clock_now();
    net_loss(net, n, labels, targets, n, true);
    *overhead = spent + clock_now() - t0;
    for (int i = L - 1; i > 0; i--) {
        pcnn_layer *l = net->layers.items[i];
        float *none[LAYER_MAX_INPUTS] = {NULL}, *dx[LAYER_MAX_INPUTS] = {NULL};
        for (int j = 0; j < l->num_inputs; j++)
            if (!layer_is_input(l->inputs[j])) dx[j] = l->inputs[j]->dy;
        t0 = clock_now();
        l->ops->backward(l, &ctx, dx);
        t[i * 3 + 2] = clock_now() - t0;
        t[i * 3 + 1] = 0;
        if (weights_alone(l)) {
            t0 = clock_now();
            l->ops->backward(l, &ctx, none);
            t[i * 3 + 1] = clock_now() - t0;
        }
    }
}

pcnn_status net_time_layers(pcnn_net *net, int n, int reps, double *samples, double *overhead,
                            void (*after_pass)(void *arg, int rep), void *arg)
{
    TRY(exchange_flush(net->exchange));
    const shape in = net->layers.items[0]->out, out = net->output->out;
    float *x = mem_calloc((size_t)n * shape_size(in), sizeof *x);
    float *targets = mem_calloc((size_t)n * shape_size(out), sizeof *targets);
    int32_t *labels = mem_calloc((size_t)n, sizeof *labels);
    /* A network that trained holds its last batch (up to its largest). */
    float *saved = net->step > 0 ? mem_calloc((size_t)n * shape_size(in), sizeof *saved) : NULL;
    pcnn_status st = PCNN_OK;
    if (!x || !targets || !labels || (net->step > 0 && !saved))
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing inputs");
    /* Values of a training batch's magnitude (zeros would let kernels
     * skip work or avoid the slow path of tiny numbers that training meets). */
    uint32_t r = 12345u;
    for (size_t i = 0; st == PCNN_OK && i < (size_t)n * shape_size(in); i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    for (int i = 0; st == PCNN_OK && i < n; i++)
        labels[i] = out.c > 0 ? (int32_t)((unsigned)i * 7u % (unsigned)out.c) : 0;
    if (st == PCNN_OK) {
        const int blas = blas_threads_enter();
        const size_t L = (size_t)net->layers.count;
        for (int r = 0; r < reps; r++) {
            double *t = samples + (size_t)r * L * 3;
            for (size_t k = 0; k < 3; k++) t[k] = 0; /* the input layer */
            time_pass(net, n, labels, targets, x, saved, t, &overhead[r]);
            if (after_pass) after_pass(arg, r);
        }
        blas_threads_leave(blas);
    }
    mem_free(x);
    mem_free(targets);
    mem_free(labels);
    mem_free(saved);
    return st;
}

net_plan_options net_get_plan_options(const pcnn_net *net)
{
    return (net_plan_options){.max_spatial = net->opt.plan_max_spatial,
                              .spatial_dims = net->opt.plan_spatial_dims,
                              .mixed = net->opt.plan_mixed,
                              .memory_limit_mib = net->opt.memory_limit_mib,
                              .halo_overlap = net->opt.halo_overlap,
                              .exchange_auto = net->opt.exchange == PCNN_EXCHANGE_AUTO,
                              .precision = net->opt.precision,
                              .editable = !net->finalized && !net->plan_failed && !net->aborted};
}

void *net_plan_record(const pcnn_net *net) { return net->plan_record; }

void net_set_plan_record(pcnn_net *net, void *record, void (*release)(void *))
{
    if (net->plan_record_release && net->plan_record != record)
        net->plan_record_release(net->plan_record);
    net->plan_record = record;
    net->plan_record_release = release;
}
