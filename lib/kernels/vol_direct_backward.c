/* The input gradient of a stride-1 3D convolution by the direct forward
 * kernel (vol_direct.c).
 *
 * dx[ci][z] = sum over co and taps kd of dY[co][z - kd + p] W[co][ci][kd]
 * (and likewise in H and W).  With kd' = k - 1 - kd this is
 * sum dY[co][z + kd' - (k - 1 - p)] W[co][ci][k - 1 - kd']: a forward
 * convolution of dY, padded by k - 1 - p, with cout input channels, cin
 * outputs and the kernel flipped.  Its output has Do + 2 (k - 1 - p) - k + 1
 * = D planes: exactly dx, no cropping. */
#include "vol_direct.h"

bool vol_direct_data_supports(const vol_shape *g)
{
    return g->stride == 1 && g->pad <= g->k - 1;
}

vol_shape vol_direct_adjoint(const vol_shape *g, int cout)
{
    vol_shape t = {cout, g->n, g->od, g->oh, g->ow, g->k, 1, g->k - 1 - g->pad,
                   g->d, g->h, g->w};
    return t;
}

void vol_direct_pack_flipped(const float *w, int cout, int cin, int k, float *packed)
{
    const int k3 = k * k * k, bs = vol_direct_block(cin);
    const int blocks = (cin + bs - 1) / bs;
    for (int b = 0; b < blocks; b++)
        for (int co = 0; co < cout; co++)
            for (int t = 0; t < k3; t++)
                for (int o = 0; o < bs; o++) {
                    const int ci = b * bs + o;
                    packed[(((size_t)b * cout + co) * k3 + t) * bs + o] =
                        ci < cin ? w[((size_t)co * cin + ci) * k3 + (k3 - 1 - t)] : 0.0f;
                }
}

void vol_direct_backward_data(const float *dy, const vol_shape *g, const float *packed_flipped,
                              int cout, float *dyp, float *dx, bool accumulate, int threads)
{
    const vol_shape t = vol_direct_adjoint(g, cout);
    vol_direct_pad(dy, &t, dyp, threads);
    vol_direct_convolve(dyp, &t, packed_flipped, g->c, NULL, accumulate, dx, threads);
}
