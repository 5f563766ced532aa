/* Halo geometry (halo.h). */
#include "halo.h"

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int ceil_div(int a, int b) { return -floor_div(-a, b); }

void halo_window(int b0, int b1, int k, int s, int p, int *lo, int *hi)
{
    *lo = b0 * s - p;
    *hi = (b1 - 1) * s - p + k;
}

void halo_forward_widths(int x, int a0, int a1, int b0, int b1, int k, int s, int p, int *low,
                         int *high)
{
    *low = *high = 0;
    if (b1 <= b0) return;
    int lo, hi;
    halo_window(b0, b1, k, s, p, &lo, &hi);
    lo = max_int(0, lo);
    hi = min_int(x, hi);
    *low = max_int(0, a0 - lo);
    *high = max_int(0, hi - a1);
}

void halo_backward_widths(int y, int a0, int a1, int b0, int b1, int k, int s, int p, int *low,
                          int *high)
{
    *low = *high = 0;
    if (a1 <= a0) return;
    const int first = max_int(0, ceil_div(a0 + p - k + 1, s));
    const int last = min_int(y - 1, floor_div(a1 - 1 + p, s)); /* inclusive */
    if (last < first) return;
    *low = max_int(0, min_int(b0, last + 1) - first);
    *high = max_int(0, last + 1 - max_int(b1, first));
}

void halo_interior(int x, int a0, int a1, int b0, int b1, int k, int s, int p, int *i0, int *i1)
{
    /* o is interior iff max(0, o*s-p) >= a0 (or o*s-p < 0 reads padding
     * only below 0, fine when a0 == 0) and min(x, o*s-p+k) <= a1. */
    int lo = b0, hi = b1;
    if (a0 > 0) lo = max_int(lo, ceil_div(a0 + p, s));
    if (a1 < x) hi = min_int(hi, floor_div(a1 + p - k, s) + 1);
    *i0 = lo;
    *i1 = hi < lo ? lo : hi;
}

bool halo_in_place_pays(double border_share, int out_channels, int window)
{
    return border_share * out_channels * window <= 4.0;
}
