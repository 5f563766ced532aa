/* The graph's door (graph.h): plain reads and writes of a network for the
 * scheduler and checkpoints. */
#include "net.h"

const pcnn_comm *net_comm(const pcnn_net *net) { return net->comm; }
const layer_list *net_layer_list(const pcnn_net *net) { return &net->layers; }
const pcnn_layer *net_output(const pcnn_net *net) { return net->output; }
bool net_is_finalized(const pcnn_net *net) { return net->finalized; }
size_t net_num_params(const pcnn_net *net) { return net->num_params; }
float *net_params(const pcnn_net *net) { return net->params; }
optim_state *net_optim(const pcnn_net *net) { return (optim_state *)&net->optim; }
const exchange *net_exchange(const pcnn_net *net) { return net->exchange; }
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
