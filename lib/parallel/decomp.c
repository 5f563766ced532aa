#include "decomp.h"

int decomp_share(long total, int parts, int index, long *first)
{
    const long base = total / parts, extra = total % parts;
    if (first) *first = index * base + (index < extra ? index : extra);
    return (int)(base + (index < extra ? 1 : 0));
}

int decomp_active_ranks(int count, int ranks, int min_local)
{
    if (min_local <= 0) return ranks;
    const int active = count / min_local;
    return active < 1 ? 1 : active > ranks ? ranks : active;
}

int decomp_active_share(int count, int ranks, int rank, int min_local, long *first)
{
    const int active = decomp_active_ranks(count, ranks, min_local);
    if (rank >= active) {
        *first = count;
        return 0;
    }
    return decomp_share(count, active, rank, first);
}

int decomp_largest_share(int max_batch, int ranks, int min_local)
{
    /* From min_local * ranks samples on every rank computes and the share
     * grows with the batch, so only small batches need a look. */
    int largest = (max_batch + ranks - 1) / ranks;
    if (min_local <= 0) return largest;
    const long last = (long)min_local * ranks < max_batch ? (long)min_local * ranks : max_batch;
    for (int count = 1; count <= last; count++) {
        const int active = decomp_active_ranks(count, ranks, min_local);
        const int local = (count + active - 1) / active;
        if (local > largest) largest = local;
    }
    return largest;
}
