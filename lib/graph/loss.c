#include "loss.h"

#include <math.h>

#include "../kernels/kernels.h"

/* The element-wise losses: each term of the mean and its derivative. */
typedef enum elem_loss { ELEM_SQUARED, ELEM_ABS, ELEM_BCE_LOGITS } elem_loss;

typedef struct loss_call {
    const loss_args *a;
    float *dy;
    elem_loss elem;
} loss_call;

/* Softmax cross entropy of samples [lo, hi) of a classes x n matrix. */
static void cross_entropy_range(void *arg, size_t lo, size_t hi)
{
    const loss_call *call = arg;
    const loss_args *a = call->a;
    float *dy = call->dy;
    const int k = a->s.c, n = a->n;
    const float *y = a->y;
    const double scale = 1.0 / a->norm_samples;
    for (int j = (int)lo; j < (int)hi; j++) {
        float mx = y[j];
        for (int c = 1; c < k; c++) mx = fmaxf(mx, y[(size_t)c * n + j]);
        double sum = 0.0;
        for (int c = 0; c < k; c++) sum += exp((double)(y[(size_t)c * n + j] - mx));
        const int label = a->labels[j];
        a->scratch[j] = (log(sum) + mx - y[(size_t)label * n + j]) * scale;
        if (dy) {
            const double inv = 1.0 / sum;
            for (int c = 0; c < k; c++) {
                double p = exp((double)(y[(size_t)c * n + j] - mx)) * inv;
                dy[(size_t)c * n + j] = (float)((p - (c == label)) * scale);
            }
        }
    }
}

/* Softmax cross entropy on a classes x n matrix (CNHW with 1x1 spatial). */
static double cross_entropy(const loss_args *a, float *dy)
{
    loss_call call = {a, dy, ELEM_SQUARED};
    parallel_for((size_t)a->n, 1, (size_t)a->n * (size_t)a->s.c * 4, a->threads,
                 cross_entropy_range, &call);
    double total = 0.0;
    for (int j = 0; j < a->n; j++) total += a->scratch[j];
    return total;
}

/* Binary cross entropy of logit x against target t, in the form that
 * neither overflows nor loses the small terms: max(x, 0) - x t +
 * log1p(exp(-|x|)); its derivative is sigmoid(x) - t. */
static double bce_logits(float x, float t, float *grad)
{
    const double xd = x, e = exp(-fabs(xd));
    const double sig = xd >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *grad = (float)(sig - (double)t);
    return fmax(xd, 0.0) - xd * (double)t + log1p(e);
}

/* MSE, L1 and BCE on logits: mean over samples and over the elements of
 * each sample.  The output is [c][n][s], the targets [n][c][s]; channels
 * are independent, so each thread sums whole channels and the partial
 * sums add in fixed order. */
static void elementwise_range(void *arg, size_t lo, size_t hi)
{
    const loss_call *call = arg;
    const loss_args *a = call->a;
    float *dy = call->dy;
    const elem_loss elem = call->elem;
    const int C = a->s.c, n = a->n;
    const size_t S = shape_spatial(a->s);
    const double scale = 1.0 / (a->norm_samples * (double)C * (double)S);
    const float gscale = (float)scale;
    for (int c = (int)lo; c < (int)hi; c++) {
        double part = 0.0;
        for (int j = 0; j < n; j++) {
            const float *y = a->y + ((size_t)c * n + j) * S;
            const float *t = a->targets + ((size_t)j * C + c) * S;
            float *g = dy ? dy + ((size_t)c * n + j) * S : NULL;
            for (size_t i = 0; i < S; i++) {
                float d = y[i] - t[i];
                if (elem == ELEM_SQUARED) {
                    part += (double)d * d;
                    if (g) g[i] = 2.0f * d * gscale;
                } else if (elem == ELEM_ABS) {
                    part += fabs((double)d);
                    if (g) g[i] = d > 0 ? gscale : d < 0 ? -gscale : 0.0f;
                } else {
                    float grad;
                    part += bce_logits(y[i], t[i], &grad);
                    if (g) g[i] = grad * gscale;
                }
            }
        }
        a->scratch[c] = part;
    }
}

static double elementwise(const loss_args *a, float *dy, elem_loss elem)
{
    const int C = a->s.c;
    const size_t S = shape_spatial(a->s);
    const double scale = 1.0 / (a->norm_samples * (double)C * (double)S);
    loss_call call = {a, dy, elem};
    parallel_for((size_t)C, 1, (size_t)a->n * (size_t)C * S, a->threads, elementwise_range, &call);
    double total = 0.0;
    for (int c = 0; c < C; c++) total += a->scratch[c];
    return total * scale;
}

bool loss_known(pcnn_loss kind)
{
    return kind == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY || kind == PCNN_LOSS_MSE ||
           kind == PCNN_LOSS_L1 || kind == PCNN_LOSS_BCE_WITH_LOGITS;
}

double loss_compute(const loss_args *a, float *dy)
{
    switch (a->kind) {
    case PCNN_LOSS_SOFTMAX_CROSS_ENTROPY: return cross_entropy(a, dy);
    case PCNN_LOSS_MSE: return elementwise(a, dy, ELEM_SQUARED);
    case PCNN_LOSS_L1: return elementwise(a, dy, ELEM_ABS);
    case PCNN_LOSS_BCE_WITH_LOGITS: return elementwise(a, dy, ELEM_BCE_LOGITS);
    }
    return NAN;
}

long loss_count_correct(const float *y, int classes, int n, const int32_t *labels)
{
    long correct = 0;
    for (int j = 0; j < n; j++) {
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (y[(size_t)c * n + j] > y[(size_t)best * n + j]) best = c;
        correct += best == labels[j];
    }
    return correct;
}
