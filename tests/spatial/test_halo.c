/* Halo geometry (parallel/halo.h) for any kernel, stride and padding:
 * a table of hand-checked cases (seed 002's "same" convolutions, the
 * centre-owner remark for stride 2, a 1x1 kernel without halo), then every
 * combination of extent, parts, kernel, stride and padding against brute
 * force: the inputs each rank's outputs read (forward), the outputs whose
 * windows read each rank's inputs (backward), and the interior outputs that
 * read no halo. */
#include <stdio.h>

#include "parallel/halo.h"
#include "parallel/layout.h"

static int failures, checks;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        checks++;                                                          \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            printf("FAIL line %d: ", __LINE__);                            \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

typedef struct row {
    int x, parts, part, k, s, p;
    int low, high;    /* forward halo */
    int blow, bhigh;  /* backward (dL/dy) halo */
} row;

/* Blocks by the rule of pcnn.h: 13 over 2 -> [0,7) [7,13); 12 over 3 ->
 * 4 each; outputs of 13 with k3 s2 p1 -> 7 over 2 -> [0,4) [4,7). */
static const row table[] = {
    /* 3x3 "same", stride 1: one row each side inside, none at the border. */
    {13, 2, 0, 3, 1, 1, 0, 1, 0, 1},
    {13, 2, 1, 3, 1, 1, 1, 0, 1, 0},
    {12, 3, 1, 3, 1, 1, 1, 1, 1, 1},
    /* 5x5 same: two rows. */
    {12, 3, 1, 5, 1, 2, 2, 2, 2, 2},
    /* 1x1: no halo (seed 002 L118). */
    {12, 3, 1, 1, 1, 0, 0, 0, 0, 0},
    /* Valid 3x3: outputs 10 over 3 -> [0,4) [4,7) [7,10); part 1 owns
     * inputs [4,8), its outputs [4,7) read [4,9): 1 row above; the outputs
     * reading its inputs are [2,8): 2 below its block, 1 above. */
    {12, 3, 1, 3, 1, 0, 0, 1, 2, 1},
    /* 3x3 stride 2 pad 1 on 13: outputs 7 over 2 -> [0,4) [4,7).  Part 0
     * owns inputs [0,7); output 3 reads [5,8): 1 row above.  Part 1 owns
     * [7,13); outputs [4,7) read [7,13): no forward halo (seed 002 L126:
     * "some processors not requiring a halo"), but output 3 reads its
     * input 7: 1 dy row below. */
    {13, 2, 0, 3, 2, 1, 0, 1, 0, 0},
    {13, 2, 1, 3, 2, 1, 0, 0, 1, 0},
    /* 2x2 stride 2 on an odd extent: 15 -> 7 outputs over 2 -> [0,4)
     * [4,7); inputs [0,8) [8,15); rank 0's outputs read [0,8): none; rank 1
     * reads [8,14): none. */
    {15, 2, 0, 2, 2, 0, 0, 0, 0, 0},
    {15, 2, 1, 2, 2, 0, 0, 0, 0, 0},
};

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }

static void brute(int x, int parts, int part, int k, int s, int p, int *low, int *high,
                  int *blow, int *bhigh, int *i0, int *i1)
{
    const int y = (x + 2 * p - k) / s + 1;
    int a0, a1, b0, b1;
    layout_block(x, parts, part, &a0, &a1);
    layout_block(y, parts, part, &b0, &b1);
    int lo = x, hi = -1;
    *i0 = *i1 = -1;
    for (int o = b0; o < b1; o++) {
        bool interior = true;
        for (int t = 0; t < k; t++) {
            const int in = o * s - p + t;
            if (in < 0 || in >= x) continue;
            lo = min_i(lo, in);
            hi = max_i(hi, in);
            if (in < a0 || in >= a1) interior = false;
        }
        if (interior && *i0 < 0) *i0 = o;
        if (interior) *i1 = o + 1;
    }
    *low = b1 > b0 ? max_i(0, a0 - lo) : 0;
    *high = b1 > b0 ? max_i(0, hi + 1 - a1) : 0;
    int olo = y, ohi = -1;
    for (int o = 0; o < y; o++)
        for (int t = 0; t < k; t++) {
            const int in = o * s - p + t;
            if (in >= a0 && in < a1) {
                olo = min_i(olo, o);
                ohi = max_i(ohi, o);
            }
        }
    *blow = ohi >= olo ? max_i(0, min_i(b0, ohi + 1) - olo) : 0;
    *bhigh = ohi >= olo ? max_i(0, ohi + 1 - max_i(b1, olo)) : 0;
}

int main(void)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const row *r = &table[i];
        const int y = (r->x + 2 * r->p - r->k) / r->s + 1;
        int a0, a1, b0, b1, low, high, blow, bhigh;
        layout_block(r->x, r->parts, r->part, &a0, &a1);
        layout_block(y, r->parts, r->part, &b0, &b1);
        halo_forward_widths(r->x, a0, a1, b0, b1, r->k, r->s, r->p, &low, &high);
        halo_backward_widths(y, a0, a1, b0, b1, r->k, r->s, r->p, &blow, &bhigh);
        CHECK(low == r->low && high == r->high && blow == r->blow && bhigh == r->bhigh,
              "table row %zu (x=%d part %d/%d k=%d s=%d p=%d): forward %d %d (want %d %d), "
              "backward %d %d (want %d %d)", i, r->x, r->part, r->parts, r->k, r->s, r->p, low,
              high, r->low, r->high, blow, bhigh, r->blow, r->bhigh);
    }
    int cases = 0;
    for (int x = 1; x <= 33; x++)
        for (int parts = 1; parts <= 5; parts++)
            for (int k = 1; k <= 7; k++)
                for (int s = 1; s <= 3; s++)
                    for (int p = 0; p <= k / 2; p++) {
                        if (k > x + 2 * p) continue;
                        const int y = (x + 2 * p - k) / s + 1;
                        if (y < parts || x < parts) continue;
                        for (int part = 0; part < parts; part++) {
                            int a0, a1, b0, b1, w[4], v[4], i0, i1, j0, j1;
                            layout_block(x, parts, part, &a0, &a1);
                            layout_block(y, parts, part, &b0, &b1);
                            halo_forward_widths(x, a0, a1, b0, b1, k, s, p, &w[0], &w[1]);
                            halo_backward_widths(y, a0, a1, b0, b1, k, s, p, &w[2], &w[3]);
                            halo_interior(x, a0, a1, b0, b1, k, s, p, &i0, &i1);
                            brute(x, parts, part, k, s, p, &v[0], &v[1], &v[2], &v[3], &j0,
                                  &j1);
                            /* An empty interior may sit anywhere. */
                            const bool interior_ok =
                                j0 < 0 ? i1 == i0 : (i0 == j0 && i1 == j1);
                            cases++;
                            CHECK(w[0] == v[0] && w[1] == v[1] && w[2] == v[2] && w[3] == v[3] &&
                                      interior_ok,
                                  "x=%d part %d/%d k=%d s=%d p=%d: widths %d %d %d %d, brute "
                                  "force %d %d %d %d; interior [%d,%d) vs [%d,%d)", x, part,
                                  parts, k, s, p, w[0], w[1], w[2], w[3], v[0], v[1], v[2], v[3],
                                  i0, i1, j0, j1);
                            if (failures > 20) return 1;
                        }
                    }
    printf("%d table rows and %d brute-force cases, %d of %d checks passed\n",
           (int)(sizeof table / sizeof table[0]), cases, checks - failures, checks);
    return failures ? 1 : 0;
}
