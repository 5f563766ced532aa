/* The learning-rate schedule: linear warm-up, then step decay.  The graph
 * fixes each training step's rate from it before the step begins. */
#include <math.h>

#include "net.h"

double net_effective_lr(const pcnn_net *net)
{
    const net_options *o = &net->opt;
    double lr = o->learning_rate;
    uint64_t t = net->step; /* steps completed before this one */
    if (o->warmup_steps > 0 && t < (uint64_t)o->warmup_steps)
        lr *= (double)(t + 1) / (double)o->warmup_steps;
    if (o->decay_every_steps > 0)
        lr *= pow(o->decay_factor, (double)(t / (uint64_t)o->decay_every_steps));
    return lr;
}
