/* The precision of a layer's products (layer.h): the layer's own setting
 * (pcnn_layer_set_precision), else the network's PCNN_OPT_PRECISION, and
 * fp32 for kinds without bf16 products.  The summary states it wherever
 * bf16 is in play (a bf16 network, or a layer set either way). */
#include "../kernels/gemm_bf16.h"
#include "layer.h"

bool layer_decide_precision(pcnn_layer *l, const plan_ctx *p)
{
    const int asked = l->precision >= 0 ? l->precision : p->precision;
    const bool bf16 = l->ops->caps.bf16 && asked == PCNN_PRECISION_BF16;
    const bool stated = l->ops->caps.bf16 && (l->precision >= 0 || p->precision != 0);
    l->decision.precision = (signed char)(stated ? (bf16 ? 1 : 0) : -1);
    l->decision.bf16_path = (signed char)(bf16 ? gemm_bf16_path_get() : 0);
    return bf16;
}
