/* Network options: one setter and one getter over an enum, so new knobs
 * never change the ABI (and ctypes needs no structs). */
#include <math.h>

#include "../core/error.h"
#include "net.h"

static bool is_count(double v)
{
    return isfinite(v) && v >= 0 && v <= 9007199254740992.0 && v == floor(v);
}

PCNN_API pcnn_status pcnn_net_set_option(pcnn_net *net, pcnn_option option, double value)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!isnan(value), PCNN_ERR_INVALID_ARGUMENT, "option %d: value is NaN", (int)option);
    const bool fixed = net->finalized;
    net_options *o = &net->opt;
    switch (option) {
    case PCNN_OPT_LEARNING_RATE:
        REQUIRE(isfinite(value) && value > 0, PCNN_ERR_INVALID_ARGUMENT,
                "learning rate %g must be finite and > 0", value);
        o->learning_rate = value;
        return PCNN_OK;
    case PCNN_OPT_MOMENTUM:
        REQUIRE(value >= 0 && value < 1, PCNN_ERR_INVALID_ARGUMENT,
                "momentum %g must be in [0, 1)", value);
        o->hyper.momentum = value;
        return PCNN_OK;
    case PCNN_OPT_WEIGHT_DECAY:
        REQUIRE(isfinite(value) && value >= 0, PCNN_ERR_INVALID_ARGUMENT,
                "weight decay %g must be finite and >= 0", value);
        o->weight_decay = value;
        return PCNN_OK;
    case PCNN_OPT_ADAM_BETA1:
    case PCNN_OPT_ADAM_BETA2:
        REQUIRE(value >= 0 && value < 1, PCNN_ERR_INVALID_ARGUMENT,
                "Adam beta %g must be in [0, 1)", value);
        if (option == PCNN_OPT_ADAM_BETA1) o->hyper.beta1 = value;
        else o->hyper.beta2 = value;
        return PCNN_OK;
    case PCNN_OPT_ADAM_EPSILON:
        REQUIRE(isfinite(value) && value > 0, PCNN_ERR_INVALID_ARGUMENT,
                "Adam epsilon %g must be finite and > 0", value);
        o->hyper.epsilon = value;
        return PCNN_OK;
    case PCNN_OPT_SEED:
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "the seed must be set before finalize");
        REQUIRE(is_count(value), PCNN_ERR_INVALID_ARGUMENT,
                "seed %g must be an integer in [0, 2^53]", value);
        o->seed = (uint64_t)value;
        return PCNN_OK;
    case PCNN_OPT_WARMUP_STEPS:
    case PCNN_OPT_DECAY_EVERY_STEPS:
        REQUIRE(is_count(value) && value <= 4e18, PCNN_ERR_INVALID_ARGUMENT,
                "step count %g must be a non-negative integer", value);
        if (option == PCNN_OPT_WARMUP_STEPS) o->warmup_steps = (long)value;
        else o->decay_every_steps = (long)value;
        return PCNN_OK;
    case PCNN_OPT_DECAY_FACTOR:
        REQUIRE(value > 0 && value <= 1, PCNN_ERR_INVALID_ARGUMENT,
                "decay factor %g must be in (0, 1]", value);
        o->decay_factor = value;
        return PCNN_OK;
    case PCNN_OPT_THREADS:
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "threads must be set before finalize");
        REQUIRE(is_count(value) && value <= 4096, PCNN_ERR_INVALID_ARGUMENT,
                "threads %g must be an integer in [0, 4096]", value);
        o->threads = (int)value;
        return PCNN_OK;
    case PCNN_OPT_CONV_ALGORITHM:
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "conv_algorithm must be set before finalize");
        REQUIRE(value == 0 || value == 1 || value == 2 || value == 3, PCNN_ERR_INVALID_ARGUMENT,
                "conv_algorithm %g must be 0 (automatic), 1 (im2col + GEMM), 2 (direct) "
                "or 3 (taps)",
                value);
        o->conv_algorithm = (int)value;
        return PCNN_OK;
    case PCNN_OPT_KEEP_IM2COL:
    case PCNN_OPT_CHECK_NUMERICS:
        REQUIRE(value == 0 || value == 1, PCNN_ERR_INVALID_ARGUMENT,
                "option %d is a flag: 0 or 1, not %g", (int)option, value);
        if (option == PCNN_OPT_KEEP_IM2COL) {
            REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "keep_im2col must be set before finalize");
            o->keep_im2col = value != 0;
        } else {
            o->check_numerics = value != 0;
        }
        return PCNN_OK;
    case PCNN_OPT_STEP:
        REQUIRE(is_count(value), PCNN_ERR_INVALID_ARGUMENT,
                "step %g must be a non-negative integer", value);
        net->step = (uint64_t)value;
        return PCNN_OK;
    case PCNN_OPT_EFFECTIVE_LEARNING_RATE:
        return FAIL(PCNN_ERR_INVALID_STATE, "the effective learning rate is read-only");
    case PCNN_OPT_OVERLAP:
        REQUIRE(value == 0 || value == 1, PCNN_ERR_INVALID_ARGUMENT,
                "overlap is a flag: 0 or 1, not %g", value);
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "overlap must be set before finalize");
        o->overlap = value != 0;
        return PCNN_OK;
    case PCNN_OPT_ENGINE:
        REQUIRE(value == 0 || value == 1 || value == 2, PCNN_ERR_INVALID_ARGUMENT,
                "engine %g: 0 (auto), 1 (thread) or 2 (nonblocking)", value);
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "the engine must be chosen before finalize");
        o->engine = (int)value;
        return PCNN_OK;
    case PCNN_OPT_ACTIVE_ENGINE:
        return FAIL(PCNN_ERR_INVALID_STATE, "the active engine is read-only");
    case PCNN_OPT_COMM_CORE:
        REQUIRE(value >= -1 && value < 65536 && value == floor(value), PCNN_ERR_INVALID_ARGUMENT,
                "comm_core %g must be -1 or a core number", value);
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "comm_core must be set before finalize");
        o->comm_core = (int)value;
        return PCNN_OK;
    case PCNN_OPT_TIMEOUT_MS:
        REQUIRE(is_count(value), PCNN_ERR_INVALID_ARGUMENT,
                "timeout_ms %g must be a non-negative integer", value);
        o->timeout_ms = (long)value;
        return PCNN_OK;
    case PCNN_OPT_TRACE_EVENTS:
        REQUIRE(is_count(value) && value <= 1e8, PCNN_ERR_INVALID_ARGUMENT,
                "trace_events %g must be an integer in [0, 1e8]", value);
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "trace_events must be set before finalize");
        o->trace_events = (size_t)value;
        return PCNN_OK;
    case PCNN_OPT_BUCKET_BYTES:
        REQUIRE(!fixed, PCNN_ERR_INVALID_STATE, "bucket_bytes must be set before finalize");
        REQUIRE(is_count(value) && value <= 8589934592.0, PCNN_ERR_INVALID_ARGUMENT,
                "bucket_bytes %g must be an integer in [0, 2^33]", value);
        o->bucket_bytes = (size_t)value;
        return PCNN_OK;
    }
    return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown option %d", (int)option);
}

PCNN_API pcnn_status pcnn_net_get_option(const pcnn_net *net, pcnn_option option, double *value)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE_PTR(value);
    const net_options *o = &net->opt;
    double v;
    switch (option) {
    case PCNN_OPT_LEARNING_RATE: v = o->learning_rate; break;
    case PCNN_OPT_MOMENTUM: v = o->hyper.momentum; break;
    case PCNN_OPT_WEIGHT_DECAY: v = o->weight_decay; break;
    case PCNN_OPT_ADAM_BETA1: v = o->hyper.beta1; break;
    case PCNN_OPT_ADAM_BETA2: v = o->hyper.beta2; break;
    case PCNN_OPT_ADAM_EPSILON: v = o->hyper.epsilon; break;
    case PCNN_OPT_SEED: v = (double)o->seed; break;
    case PCNN_OPT_WARMUP_STEPS: v = (double)o->warmup_steps; break;
    case PCNN_OPT_DECAY_EVERY_STEPS: v = (double)o->decay_every_steps; break;
    case PCNN_OPT_DECAY_FACTOR: v = o->decay_factor; break;
    case PCNN_OPT_THREADS: v = net->finalized ? net->threads : o->threads; break;
    case PCNN_OPT_KEEP_IM2COL: v = o->keep_im2col; break;
    case PCNN_OPT_CONV_ALGORITHM: v = o->conv_algorithm; break;
    case PCNN_OPT_CHECK_NUMERICS: v = o->check_numerics; break;
    case PCNN_OPT_STEP: v = (double)net->step; break;
    case PCNN_OPT_EFFECTIVE_LEARNING_RATE: v = net_effective_lr(net); break;
    case PCNN_OPT_BUCKET_BYTES: v = (double)o->bucket_bytes; break;
    case PCNN_OPT_OVERLAP: v = o->overlap; break;
    case PCNN_OPT_ENGINE: v = o->engine; break;
    case PCNN_OPT_ACTIVE_ENGINE:
        v = net->xplan.engine ? (double)engine_get_kind(net->xplan.engine) : 0.0;
        break;
    case PCNN_OPT_COMM_CORE: v = o->comm_core; break;
    case PCNN_OPT_TIMEOUT_MS: v = (double)o->timeout_ms; break;
    case PCNN_OPT_TRACE_EVENTS: v = (double)o->trace_events; break;
    default: return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown option %d", (int)option);
    }
    *value = v;
    return PCNN_OK;
}

double net_effective_lr(const pcnn_net *net)
{
    const net_options *o = &net->opt;
    double lr = o->learning_rate;
    uint64_t t = net->step; /* steps completed before this one */
    if (o->warmup_steps > 0 && t < (uint64_t)o->warmup_steps)
        lr *= (double)(t + 1) / (double)o->warmup_steps;
    if (o->decay_every_steps > 0) lr *= pow(o->decay_factor, (double)(t / (uint64_t)o->decay_every_steps));
    return lr;
}
