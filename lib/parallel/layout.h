/* Distributed layouts of seed 002 section III: a grid of ranks parts[4]
 * over (N, D, H, W), ranks numbered W fastest, boxes by the block rule
 * (decomp.h), and the intersection of boxes that every halo exchange and
 * shuffle moves. */
#ifndef PCNN_PARALLEL_LAYOUT_H
#define PCNN_PARALLEL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

enum { LAYOUT_N = 0, LAYOUT_D = 1, LAYOUT_H = 2, LAYOUT_W = 3, LAYOUT_DIMS = 4 };

/* A half-open box [lo, hi) over (sample, d, h, w); the sample index is
 * global (the batch's). */
typedef struct box {
    int lo[LAYOUT_DIMS], hi[LAYOUT_DIMS];
} box;

/* The product of the parts. */
int layout_ranks(const int parts[LAYOUT_DIMS]);

/* Rank <-> grid coordinates, W fastest. */
void layout_coords(const int parts[LAYOUT_DIMS], int rank, int coords[LAYOUT_DIMS]);
int layout_rank(const int parts[LAYOUT_DIMS], const int coords[LAYOUT_DIMS]);

/* Block [*lo, *hi) of `total` indices held by part `index` of `parts`. */
void layout_block(int total, int parts, int index, int *lo, int *hi);

/* Samples of one step: `groups` groups of the input's distribution, group
 * g holding samples [start[g], start[g] + count[g]). */
typedef struct sample_split {
    int groups;
    const int *start, *count;
} sample_split;

/* The box of `rank` in the layout `parts` of a layer whose samples have
 * extent (d, h, w): its group's samples (parts[N] must be a multiple of
 * split->groups: a group's samples are subdivided by the block rule among
 * its parts[N] / groups sub-groups), and its block of each spatial
 * dimension. */
box layout_box(const int parts[LAYOUT_DIMS], int rank, const sample_split *split, int d, int h,
               int w);

/* Intersection of a and b in *out; false (out unspecified) when empty. */
bool box_intersect(const box *a, const box *b, box *out);

/* Number of points (0 for an empty box) and the extent along dim k. */
size_t box_volume(const box *b);
static inline int box_extent(const box *b, int k) { return b->hi[k] - b->lo[k]; }

bool box_equal(const box *a, const box *b);

/* The points of `outer` outside `inner`, as at most 2 * LAYOUT_DIMS
 * disjoint boxes (the slabs below and above inner, dimension after
 * dimension) in out; returns their count. */
int box_subtract(const box *outer, const box *inner, box out[2 * LAYOUT_DIMS]);

#endif
