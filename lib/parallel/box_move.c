/* Moving boxes of a tensor between ranks (box_move.h). */
#include "box_move.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"

/* The move in flight between box_move_post and box_move_finish. */
typedef struct box_flight {
    int c, threads, nreq;
    const box *src_boxes, *dst_boxes;
    box src_over, dst_over; /* the layouts of this rank's src and dst */
    const float *src;
    float *dst;
    bool add, overwrite, self, active, bf16;
    bool self_pending; /* this rank's own points still to copy (defer_self) */
    box self_part;
} box_flight;

struct box_mover {
    MPI_Comm comm;
    int rank, size;
    const long *timeout_ms;
    pcnn_status failed;
    float *buf;          /* packed sends, then receives */
    size_t buf_floats;
    MPI_Request *reqs;   /* 2 * size */
    size_t *recv_at;     /* size: where each rank's message lands in buf */
    box_flight flight;
};

/* Where a rank that could not allocate its mover still joins the
 * duplication the others wait in (static: MPI may write it late). */
static MPI_Comm orphan_comm;

pcnn_status box_mover_create(pcnn_comm *c, const long *timeout_ms, box_mover **out)
{
    /* Allocated first, and duplicated into m->comm: a duplication given up
     * on may still write there, so m is then never freed. */
    box_mover *m = mem_calloc(1, sizeof *m);
    MPI_Request *reqs = mem_calloc(2 * (size_t)c->size, sizeof *reqs);
    size_t *recv_at = mem_calloc((size_t)c->size, sizeof *recv_at);
    MPI_Comm *comm = m ? &m->comm : &orphan_comm;
    MPI_Request req;
    const int code = MPI_Comm_idup(c->comm, comm, &req);
    const pcnn_status st = comm_complete(c, code, &req, *timeout_ms, __func__,
                                         "MPI_Comm_idup (halo exchange)");
    if (st != PCNN_OK || !m || !reqs || !recv_at) {
        if (st == PCNN_OK) MPI_Comm_free(comm);
        if (st == PCNN_OK || code != MPI_SUCCESS) mem_free(m);
        mem_free(reqs);
        mem_free(recv_at);
        return st != PCNN_OK ? st
                             : FAIL(PCNN_ERR_OUT_OF_MEMORY, "halo exchange of %d ranks", c->size);
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    *m = (box_mover){.comm = m->comm, .rank = c->rank, .size = c->size,
                     .timeout_ms = timeout_ms, .reqs = reqs, .recv_at = recv_at};
    *out = m;
    return PCNN_OK;
}

pcnn_status box_mover_split(box_mover *m, int color, MPI_Comm *group)
{
    MPI_TRY(MPI_Comm_split(m->comm, color, m->rank, group), "MPI_Comm_split (sample group)");
    return PCNN_OK;
}

void box_mover_destroy(box_mover *m)
{
    if (!m) return;
    /* A failed move may have left messages in MPI's hands: keep its buffer. */
    if (m->failed == PCNN_OK) {
        mem_free(m->buf);
        if (!mpi_is_finalized()) MPI_Comm_free(&m->comm);
    }
    mem_free(m->reqs);
    mem_free(m->recv_at);
    mem_free(m);
}

/* Rows (channel, n, d, h) of `part` in a tensor laid over `over`. */
static size_t offset_of(const box *over, int ch, int n, int d, int h, int w)
{
    const size_t nb = (size_t)box_extent(over, LAYOUT_N), db = (size_t)box_extent(over, LAYOUT_D),
                 hb = (size_t)box_extent(over, LAYOUT_H), wb = (size_t)box_extent(over, LAYOUT_W);
    return ((((size_t)ch * nb + (size_t)(n - over->lo[LAYOUT_N])) * db +
             (size_t)(d - over->lo[LAYOUT_D])) * hb + (size_t)(h - over->lo[LAYOUT_H])) * wb +
           (size_t)(w - over->lo[LAYOUT_W]);
}

void box_copy(int c, const box *part, const float *src, const box *from, float *dst,
              const box *to, bool add, int threads)
{
    const int nn = box_extent(part, LAYOUT_N), nd = box_extent(part, LAYOUT_D),
              nh = box_extent(part, LAYOUT_H), nw = box_extent(part, LAYOUT_W);
    const long rows = (long)c * nn * nd * nh;
#pragma omp parallel for num_threads(threads) if (rows * nw > 32768) schedule(static)
    for (long r = 0; r < rows; r++) {
        long t = r;
        const int h = (int)(t % nh) + part->lo[LAYOUT_H];
        t /= nh;
        const int d = (int)(t % nd) + part->lo[LAYOUT_D];
        t /= nd;
        const int n = (int)(t % nn) + part->lo[LAYOUT_N];
        const int ch = (int)(t / nn);
        const float *s = src + offset_of(from, ch, n, d, h, part->lo[LAYOUT_W]);
        float *o = dst + offset_of(to, ch, n, d, h, part->lo[LAYOUT_W]);
        if (add)
            for (int w = 0; w < nw; w++) o[w] += s[w];
        else
            memmove(o, s, (size_t)nw * sizeof(float));
    }
}

void box_fill(int c, const box *part, float *dst, const box *over, float value, int threads)
{
    const int nn = box_extent(part, LAYOUT_N), nd = box_extent(part, LAYOUT_D),
              nh = box_extent(part, LAYOUT_H), nw = box_extent(part, LAYOUT_W);
    if (nn <= 0 || nd <= 0 || nh <= 0 || nw <= 0) return;
    const long rows = (long)c * nn * nd * nh;
#pragma omp parallel for num_threads(threads) if (rows * nw > 32768) schedule(static)
    for (long r = 0; r < rows; r++) {
        long t = r;
        const int h = (int)(t % nh) + part->lo[LAYOUT_H];
        t /= nh;
        const int d = (int)(t % nd) + part->lo[LAYOUT_D];
        t /= nd;
        const int n = (int)(t % nn) + part->lo[LAYOUT_N];
        const int ch = (int)(t / nn);
        float *o = dst + offset_of(over, ch, n, d, h, part->lo[LAYOUT_W]);
        for (int w = 0; w < nw; w++) o[w] = value;
    }
}

pcnn_status box_mover_sum(box_mover *m, double *values, int count)
{
    if (m->failed != PCNN_OK)
        return FAIL(PCNN_ERR_INVALID_STATE, "a halo exchange of this step already failed");
    MPI_Request req;
    const int code = MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, m->comm,
                                    &req);
    if (code != MPI_SUCCESS) {
        m->failed = PCNN_ERR_MPI;
        return mpi_status(code, __func__, "MPI_Iallreduce (halo overlap timings)");
    }
    pcnn_status broke = PCNN_OK;
    const pcnn_status st = request_complete(&req, *m->timeout_ms, &broke, __func__,
                                            "the halo overlap timings");
    if (st != PCNN_OK) m->failed = broke != PCNN_OK ? broke : st;
    return st;
}

static pcnn_status grow(box_mover *m, size_t floats)
{
    if (floats <= m->buf_floats) return PCNN_OK;
    float *b = mem_alloc_floats(floats);
    if (!b) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "halo buffers of %zu floats", floats);
    mem_free(m->buf);
    m->buf = b;
    m->buf_floats = floats;
    return PCNN_OK;
}

pcnn_status box_mover_error(const box_mover *m) { return m ? m->failed : PCNN_OK; }

pcnn_status box_mover_reserve(box_mover *m, size_t floats) { return grow(m, floats); }

/* bf16 messages live in the float slots of their fp32 layout, in the first
 * half: packed in place, ascending (value i's two bytes land at or below
 * the four of value i, read before), and widened in place, descending
 * (value i's four bytes cover values 2i and 2i+1, already widened but for
 * i = 0, whose value is read first). */
static void narrow_in_place(float *v, size_t n)
{
    unsigned char *b = (unsigned char *)v; /* bytes: no type-based aliasing */
    for (size_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, b + 4 * i, 4);
        const bf16 h = bf16_from_f32(x);
        memcpy(b + 2 * i, &h, 2);
    }
}

static void widen_in_place(float *v, size_t n)
{
    unsigned char *b = (unsigned char *)v;
    for (size_t i = n; i-- > 0;) {
        bf16 h;
        memcpy(&h, b + 2 * i, 2);
        const float x = bf16_to_f32(h);
        memcpy(b + 4 * i, &x, 4);
    }
}

/* The floats of a message of `part` (MPI counts them in an int: *most
 * keeps the largest). */
static size_t message_floats(const box *part, int c, size_t *most)
{
    const size_t count = box_volume(part) * (size_t)c;
    if (count > *most) *most = count;
    return count;
}

pcnn_status box_move_post(box_mover *m, int tag, int c, const box *src_boxes,
                          const box *dst_boxes, const float *src, float *dst, bool add,
                          int threads)
{
    const box_move_args a = {.tag = tag, .c = c, .src_boxes = src_boxes, .dst_boxes = dst_boxes,
                             .src = src, .dst = dst, .add = add, .threads = threads};
    return box_move_post_args(m, &a);
}

pcnn_status box_move_post_args(box_mover *m, const box_move_args *a)
{
    if (m->failed != PCNN_OK)
        return FAIL(PCNN_ERR_INVALID_STATE, "a halo exchange of this step already failed");
    const int me = m->rank, P = m->size, c = a->c, tag = a->tag, threads = a->threads;
    const box *src_boxes = a->src_boxes, *dst_boxes = a->dst_boxes;
    const float *src = a->src;
    float *dst = a->dst;
    const bool add = a->add;
    const bool *peers = a->peers;
    const box *my_src = &src_boxes[me], *my_dst = &dst_boxes[me];
    const box *src_over = a->src_over ? a->src_over : my_src;
    const box *dst_over = a->dst_over ? a->dst_over : my_dst;
    /* Sizes first: sends to every q, then receives from every q. */
    size_t total = 0, most = 0;
    box part;
    for (int q = 0; q < P; q++) {
        if (q == me || (peers && !peers[q])) continue;
        if (box_intersect(my_src, &dst_boxes[q], &part)) total += message_floats(&part, c, &most);
        if (box_intersect(&src_boxes[q], my_dst, &part)) total += message_floats(&part, c, &most);
    }
    if (most > INT_MAX) {
        m->failed = PCNN_ERR_UNSUPPORTED; /* the pair's other rank fails alike */
        return FAIL(PCNN_ERR_UNSUPPORTED, "a halo message of %zu floats exceeds MPI's count",
                    most);
    }
    TRY(grow(m, total));
    m->flight = (box_flight){.c = c, .src_boxes = src_boxes, .dst_boxes = dst_boxes,
                             .src_over = *src_over, .dst_over = *dst_over, .src = src,
                             .dst = dst, .add = add, .overwrite = add && a->overwrite && src != dst,
                             .threads = threads, .active = true, .bf16 = a->bf16};
    const MPI_Datatype type = a->bf16 ? MPI_UINT16_T : MPI_FLOAT;
    box_flight *f = &m->flight;
    size_t at = 0;
    pcnn_status st = PCNN_OK;
    /* Receives posted first, then sends packed and posted. */
    size_t *recv_at = m->recv_at;
    for (int q = 0; q < P && st == PCNN_OK; q++) {
        recv_at[q] = SIZE_MAX;
        if (q == me || (peers && !peers[q]) || !box_intersect(&src_boxes[q], my_dst, &part))
            continue;
        const size_t count = box_volume(&part) * (size_t)c;
        recv_at[q] = at;
        int code = MPI_Irecv(m->buf + at, (int)count, type, q, tag, m->comm,
                             &m->reqs[f->nreq++]);
        if (code != MPI_SUCCESS) st = mpi_status(code, __func__, "MPI_Irecv (halo)");
        at += count;
    }
    for (int q = 0; q < P && st == PCNN_OK; q++) {
        if (q == me || (peers && !peers[q]) || !box_intersect(my_src, &dst_boxes[q], &part))
            continue;
        const size_t count = box_volume(&part) * (size_t)c;
        /* Packed: the part laid over itself. */
        box_copy(c, &part, src, src_over, m->buf + at, &part, false, threads);
        if (a->bf16) narrow_in_place(m->buf + at, count);
        int code = MPI_Isend(m->buf + at, (int)count, type, q, tag, m->comm,
                             &m->reqs[f->nreq++]);
        if (code != MPI_SUCCESS) st = mpi_status(code, __func__, "MPI_Isend (halo)");
        at += count;
    }
    if (st != PCNN_OK) {
        m->failed = PCNN_ERR_MPI;
        f->active = false;
        return st;
    }
    /* This rank's own points meanwhile (when adding: in rank order, at the
     * finish, after whatever the caller still adds to src). */
    f->self = box_intersect(my_src, my_dst, &f->self_part);
    /* In place (one buffer, one layout): the points are already there. */
    if ((src == dst && box_equal(src_over, dst_over)) || a->skip_self) f->self = false;
    f->self_pending = f->self && !add;
    if (!a->defer_self) box_move_copy_self(m);
    return PCNN_OK;
}

void box_move_copy_self(box_mover *m)
{
    box_flight *f = &m->flight;
    if (!f->active || !f->self_pending) return;
    f->self_pending = false;
    box_copy(f->c, &f->self_part, f->src, &f->src_over, f->dst, &f->dst_over, false, f->threads);
}

pcnn_status box_move_finish(box_mover *m)
{
    box_flight *f = &m->flight;
    if (!f->active) return PCNN_OK;
    box_move_copy_self(m);
    f->active = false;
    const int me = m->rank, P = m->size;
    pcnn_status st = PCNN_OK, broke = PCNN_OK;
    for (int i = 0; i < f->nreq && st == PCNN_OK; i++)
        st = request_complete(&m->reqs[i], *m->timeout_ms, &broke, __func__, "a halo message");
    if (st != PCNN_OK) {
        m->failed = broke != PCNN_OK ? broke : st;
        return st;
    }
    const box *my_dst = &f->dst_boxes[me];
    if (f->overwrite) { /* this rank's own points first, zeros elsewhere */
        box rest[2 * LAYOUT_DIMS];
        int count = 1;
        rest[0] = *my_dst;
        if (f->self) count = box_subtract(my_dst, &f->self_part, rest);
        for (int k = 0; k < count; k++)
            box_fill(f->c, &rest[k], f->dst, &f->dst_over, 0.0f, f->threads);
        if (f->self)
            box_copy(f->c, &f->self_part, f->src, &f->src_over, f->dst, &f->dst_over, false,
                     f->threads);
    }
    for (int q = 0; q < P; q++) {
        if (q == me) {
            if (f->self && f->add && !f->overwrite)
                box_copy(f->c, &f->self_part, f->src, &f->src_over, f->dst, &f->dst_over, true,
                         f->threads);
            continue;
        }
        box in;
        if (m->recv_at[q] == SIZE_MAX || !box_intersect(&f->src_boxes[q], my_dst, &in)) continue;
        if (f->bf16) widen_in_place(m->buf + m->recv_at[q], box_volume(&in) * (size_t)f->c);
        box_copy(f->c, &in, m->buf + m->recv_at[q], &in, f->dst, &f->dst_over, f->add,
                 f->threads);
    }
    return PCNN_OK;
}

pcnn_status box_move(box_mover *m, int tag, int c, const box *src_boxes, const box *dst_boxes,
                     const float *src, float *dst, bool add, int threads)
{
    TRY(box_move_post(m, tag, c, src_boxes, dst_boxes, src, dst, add, threads));
    return box_move_finish(m);
}
