/* The input gradient of a stride-1 3D convolution by the direct forward
 * kernel (vol_direct.c).
 *
 * dx[ci][z] = sum over co and taps kd of dY[co][z - kd + p] W[co][ci][kd]
 * (and likewise in H and W).  With kd' = k - 1 - kd this is
 * sum dY[co][z + kd' - (k - 1 - p)] W[co][ci][k - 1 - kd']: a forward
 * convolution of dY, padded by k - 1 - p, with cout input channels, cin
 * outputs and the kernel flipped.  Its output has Do + 2 (k - 1 - p) - k + 1
 * = D planes: exactly dx, no cropping. */
#include <string.h>

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

/* The box's dx reads dY's padded copy over the box's windows only: output
 * z of the box is output lo + z of the whole, whose taps start at padded
 * dY's lo + z, i.e. dY's lo + z - (k - 1 - p).  The box is computed dense
 * after that window in the scratch, then copied (or added) into dx. */
static size_t window_floats(const vol_shape *g, int cout, const int ext[3])
{
    return (size_t)cout * g->n * (size_t)(ext[0] + g->k - 1) * (size_t)(ext[1] + g->k - 1) *
           (size_t)(ext[2] + g->k - 1);
}

size_t vol_direct_box_scratch_floats(const vol_shape *g, int cout, const int ext[3])
{
    return window_floats(g, cout, ext) +
           (size_t)g->c * g->n * (size_t)ext[0] * (size_t)ext[1] * (size_t)ext[2];
}

typedef struct scatter_call {
    const vol_shape *g;
    const float *box;
    float *dx;
    const int *lo, *ext;
    bool accumulate;
} scatter_call;

/* Units: rows (channel, sample, z, y) of the box. */
static void scatter_range(void *arg, size_t r0, size_t r1)
{
    const scatter_call *a = arg;
    const vol_shape *g = a->g;
    const int *lo = a->lo, *ext = a->ext;
    for (size_t r = r0; r < r1; r++) {
        const size_t y = r % (size_t)ext[1], z = r / (size_t)ext[1] % (size_t)ext[0];
        const size_t vol = r / ((size_t)ext[1] * (size_t)ext[0]); /* channel x sample */
        const float *src = a->box + r * (size_t)ext[2];
        float *dst = a->dx + ((vol * (size_t)g->d + lo[0] + z) * (size_t)g->h + lo[1] + y) *
                                 (size_t)g->w + (size_t)lo[2];
        if (a->accumulate)
            for (int x = 0; x < ext[2]; x++) dst[x] += src[x];
        else
            memcpy(dst, src, (size_t)ext[2] * sizeof *dst);
    }
}

void vol_direct_backward_data_box(const float *dy, const vol_shape *g,
                                  const float *packed_flipped, int cout, const int lo[3],
                                  const int ext[3], float *scratch, float *dx, bool accumulate,
                                  int threads)
{
    const vol_shape t = vol_direct_adjoint(g, cout);
    const int shift = g->k - 1 - g->pad;
    const int off[3] = {lo[0] - shift, lo[1] - shift, lo[2] - shift};
    const int win[3] = {ext[0] + g->k - 1, ext[1] + g->k - 1, ext[2] + g->k - 1};
    float *box = scratch + window_floats(g, cout, ext);
    vol_direct_pad_window(dy, &t, off, win, scratch, threads);
    const vol_shape b = {cout, g->n, win[0], win[1], win[2], g->k, 1, 0, ext[0], ext[1], ext[2]};
    vol_direct_convolve(scratch, &b, packed_flipped, g->c, NULL, false, box, threads);
    scatter_call sc = {g, box, dx, lo, ext, accumulate};
    const size_t rows = (size_t)g->c * g->n * (size_t)ext[0] * (size_t)ext[1];
    parallel_for(rows, 1, rows * (size_t)ext[2], threads, scatter_range, &sc);
}
