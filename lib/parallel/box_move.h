/* Moving boxes of a tensor between ranks: the one mechanism behind the
 * halo exchange of convolutions and pools and the shuffle between layers
 * distributed differently (seed 002 sections III-A and III-C).
 *
 * A tensor "laid over" a box b with c channels stores point (n, d, h, w)
 * of channel ch at ((((ch*Nb + n-lo_n)*Db + d-lo_d)*Hb + h-lo_h)*Wb +
 * w-lo_w), Xb the box's extents: the library's CNHW layout of a local
 * block.  Rank q's source covers src_boxes[q] and its destination
 * dst_boxes[q]; box_move gives every rank's destination the points of
 * every source that fall in it, with nonblocking point-to-point messages
 * (one per pair of ranks whose boxes meet: with halos no wider than a
 * neighbour's block, the 8 neighbours in 2D, corners included), packed and
 * unpacked with OpenMP.  With `add` the points are added into the
 * destination, in rank order (the reverse of a halo exchange: gradients
 * of the halo go back to their owners). */
#ifndef PCNN_PARALLEL_BOX_MOVE_H
#define PCNN_PARALLEL_BOX_MOVE_H

#include <stdbool.h>

#include "layout.h"
#include "parallel.h"

typedef struct box_mover box_mover;

/* A mover on a duplicate of c's communicator (collective, timed), and the
 * sub-communicator of the ranks sharing `color` (MPI_Comm_split). */
pcnn_status box_mover_create(pcnn_comm *c, const long *timeout_ms, box_mover **out);
pcnn_status box_mover_split(box_mover *m, int color, MPI_Comm *group);
void box_mover_destroy(box_mover *m);
/* The failure of an earlier move (sticky), or PCNN_OK; NULL: PCNN_OK. */
pcnn_status box_mover_error(const box_mover *m);
/* Room for moves of up to `floats` sent and received (a move larger than
 * the room allocates its own, which can fail on one rank alone). */
pcnn_status box_mover_reserve(box_mover *m, size_t floats);

/* One move (collective over the communicator: every rank calls it with the
 * same boxes and tag).  Fails (and every later move at once) when a
 * message does not complete within the timeout or MPI fails. */
pcnn_status box_move(box_mover *m, int tag, int c, const box *src_boxes, const box *dst_boxes,
                     const float *src, float *dst, bool add, int threads);

/* The same in two halves, so that the caller computes while the messages
 * travel: post packs and sends (and copies this rank's own points unless
 * adding), finish waits and unpacks (adding this rank's own points last,
 * in rank order).  One move in flight per mover; src must not change in
 * between unless adding (then finish reads this rank's own points), and
 * dst holds only this rank's own points (copying) until finish. */
pcnn_status box_move_post(box_mover *m, int tag, int c, const box *src_boxes,
                          const box *dst_boxes, const float *src, float *dst, bool add,
                          int threads);
pcnn_status box_move_finish(box_mover *m);

/* The general form: this rank's src and dst may be laid over boxes larger
 * than its logical ones (src_over, dst_over; NULL: the logical boxes), so
 * that a dimension-ordered halo exchange grows one buffer phase by phase
 * (src == dst, same layout: this rank's own points stay where they are);
 * peers (NULL: all) limits the exchange to the ranks marked true. */
typedef struct box_move_args {
    int tag, c, threads;
    const box *src_boxes, *dst_boxes;
    const float *src;
    float *dst;
    const box *src_over, *dst_over;
    const bool *peers;
    bool add;
    /* With add: dst's points are replaced rather than added to (this
     * rank's own points copied, zeros where it has none, then the others'
     * added in rank order): no clearing beforehand. */
    bool overwrite;
    /* Without add: this rank's own points are not copied by the post but
     * by box_move_copy_self (or finish, if still pending), so that the
     * copy runs while the messages travel. */
    bool defer_self;
    /* This rank's own points are not moved at all: the caller computes on
     * them where they are (a convolution run on its block in place). */
    bool skip_self;
    /* The messages carry bfloat16 (MPI_UINT16_T, half the bytes): the
     * points received from other ranks arrive rounded to bf16 (round to
     * nearest even), this rank's own points stay as they are.  For a
     * consumer that rounds its inputs to bf16 anyway (a bf16
     * convolution), the same values. */
    bool bf16;
} box_move_args;
pcnn_status box_move_post_args(box_mover *m, const box_move_args *a);
void box_move_copy_self(box_mover *m);

/* Copy (or add) the points of `part` from a tensor laid over `from` into
 * one laid over `to` (both contain part). */
void box_copy(int c, const box *part, const float *src, const box *from, float *dst,
              const box *to, bool add, int threads);

/* Set the points of `part` of a tensor laid over `over` (containing part)
 * to value. */
void box_fill(int c, const box *part, float *dst, const box *over, float value, int threads);

/* Sum count doubles over the mover's ranks, in place (collective, timed
 * like a move: a failure marks the mover failed). */
pcnn_status box_mover_sum(box_mover *m, double *values, int count);

#endif
