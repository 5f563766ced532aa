/* Distributed layouts: the grid, the block rule and boxes. */
#include "layout.h"

#include "decomp.h"

int layout_ranks(const int parts[LAYOUT_DIMS])
{
    int p = 1;
    for (int k = 0; k < LAYOUT_DIMS; k++) p *= parts[k];
    return p;
}

void layout_coords(const int parts[LAYOUT_DIMS], int rank, int coords[LAYOUT_DIMS])
{
    for (int k = LAYOUT_DIMS - 1; k >= 0; k--) {
        coords[k] = rank % parts[k];
        rank /= parts[k];
    }
}

int layout_rank(const int parts[LAYOUT_DIMS], const int coords[LAYOUT_DIMS])
{
    int r = 0;
    for (int k = 0; k < LAYOUT_DIMS; k++) r = r * parts[k] + coords[k];
    return r;
}

void layout_block(int total, int parts, int index, int *lo, int *hi)
{
    long first = 0;
    const int share = decomp_share(total, parts, index, &first);
    *lo = (int)first;
    *hi = (int)first + share;
}

box layout_box(const int parts[LAYOUT_DIMS], int rank, const sample_split *split, int d, int h,
               int w)
{
    int c[LAYOUT_DIMS];
    layout_coords(parts, rank, c);
    box b;
    const int sub = parts[LAYOUT_N] / split->groups;
    const int g = c[LAYOUT_N] / sub;
    layout_block(split->count[g], sub, c[LAYOUT_N] % sub, &b.lo[LAYOUT_N], &b.hi[LAYOUT_N]);
    b.lo[LAYOUT_N] += split->start[g];
    b.hi[LAYOUT_N] += split->start[g];
    const int extent[LAYOUT_DIMS] = {0, d, h, w};
    for (int k = 1; k < LAYOUT_DIMS; k++)
        layout_block(extent[k], parts[k], c[k], &b.lo[k], &b.hi[k]);
    return b;
}

bool box_intersect(const box *a, const box *b, box *out)
{
    for (int k = 0; k < LAYOUT_DIMS; k++) {
        out->lo[k] = a->lo[k] > b->lo[k] ? a->lo[k] : b->lo[k];
        out->hi[k] = a->hi[k] < b->hi[k] ? a->hi[k] : b->hi[k];
        if (out->lo[k] >= out->hi[k]) return false;
    }
    return true;
}

size_t box_volume(const box *b)
{
    size_t v = 1;
    for (int k = 0; k < LAYOUT_DIMS; k++) {
        if (b->hi[k] <= b->lo[k]) return 0;
        v *= (size_t)(b->hi[k] - b->lo[k]);
    }
    return v;
}

bool box_equal(const box *a, const box *b)
{
    for (int k = 0; k < LAYOUT_DIMS; k++)
        if (a->lo[k] != b->lo[k] || a->hi[k] != b->hi[k]) return false;
    return true;
}

int box_subtract(const box *outer, const box *inner, box out[2 * LAYOUT_DIMS])
{
    box cur = *outer;
    int count = 0;
    if (box_volume(outer) == 0) return 0;
    for (int k = 0; k < LAYOUT_DIMS; k++) {
        const int lo = inner->lo[k] > cur.lo[k] ? inner->lo[k] : cur.lo[k];
        const int hi = inner->hi[k] < cur.hi[k] ? inner->hi[k] : cur.hi[k];
        if (hi <= lo) { /* no overlap: the rest of outer is outside */
            out[count++] = cur;
            return count;
        }
        if (lo > cur.lo[k]) {
            out[count] = cur;
            out[count++].hi[k] = lo;
        }
        if (hi < cur.hi[k]) {
            out[count] = cur;
            out[count++].lo[k] = hi;
        }
        cur.lo[k] = lo;
        cur.hi[k] = hi;
    }
    return count;
}
