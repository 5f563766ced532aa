/* Decomposition: which rank gets which samples (or which elements of any
 * count).  Every place that splits a batch, a dataset, a bucket or a
 * layer's features over ranks asks here, so they always agree. */
#ifndef PCNN_PARALLEL_DECOMP_H
#define PCNN_PARALLEL_DECOMP_H

/* Share of `total` owned by part `index` of `parts`: parts below
 * total % parts get one more.  *first (may be NULL) receives the first
 * element. */
int decomp_share(long total, int parts, int index, long *first);

/* Ranks that compute on a batch of `count` samples when each must get at
 * least min_local (0: all ranks); the lowest ranks compute. */
int decomp_active_ranks(int count, int ranks, int min_local);

/* This rank's share of a batch split over the active ranks; ranks beyond
 * them get 0 samples starting at count. */
int decomp_active_share(int count, int ranks, int rank, int min_local, long *first);

/* The largest share any rank gets for any batch of up to max_batch. */
int decomp_largest_share(int max_batch, int ranks, int min_local);

#endif
