/* Collectives an aborted engine left in flight, settled inside
 * MPI_Finalize (see late_peers.h). */
#include "late_peers.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "../core/memory.h"
#include "parallel.h"

#define LATE_TAG 0x7eaf /* point-to-point: never matches a collective */

/* One collective in flight: its handle and the arguments a late peer needs
 * to post the matching one. */
typedef struct kept_request {
    MPI_Request handle;
    long seq;
    request_kind kind;
    int count;
    bool bf16;              /* 2-byte values (MPI_UINT16_T) */
    int *scounts, *rcounts; /* size entries each, or NULL */
} kept_request;

typedef struct kept {
    MPI_Comm comm;
    int rank, size;
    long started;
    kept_request *reqs;
    int n;
    struct kept *next;

    /* Settling. */
    int64_t *mine;       /* the message this rank sends */
    int mine_len;
    int64_t **theirs;    /* each peer's message, NULL until received */
    int *theirs_len;
    bool given_up;       /* a peer never answered */
} kept;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept *kept_list;

static int *copy_counts(const int *counts, int size)
{
    if (!counts) return NULL;
    int *c = mem_calloc((size_t)size, sizeof *c);
    if (c) memcpy(c, counts, (size_t)size * sizeof *c);
    return c;
}

bool late_peers_keep(MPI_Comm comm, long started, request *const *in_flight, int n)
{
    if (mpi_is_finalized()) return false;
    kept *k = mem_calloc(1, sizeof *k);
    if (!k) return false;
    k->comm = comm;
    MPI_Comm_rank(comm, &k->rank);
    MPI_Comm_size(comm, &k->size);
    k->started = started;
    k->reqs = mem_calloc(n > 0 ? (size_t)n : 1, sizeof *k->reqs);
    bool ok = k->reqs != NULL;
    for (int i = 0; ok && i < n; i++) {
        const request *r = in_flight[i];
        kept_request *q = &k->reqs[i];
        q->handle = r->handle;
        q->seq = r->seq;
        q->kind = r->kind;
        q->count = r->count;
        q->bf16 = r->bf16;
        if (r->kind == REQ_ALLTOALLV) q->scounts = copy_counts(r->scounts, k->size);
        if (r->kind != REQ_ALLREDUCE) q->rcounts = copy_counts(r->rcounts, k->size);
        ok = (r->kind != REQ_ALLTOALLV || q->scounts) && (r->kind == REQ_ALLREDUCE || q->rcounts);
        k->n = i + 1;
    }
    if (!ok) {
        for (int i = 0; i < k->n; i++) {
            mem_free(k->reqs[i].scounts);
            mem_free(k->reqs[i].rcounts);
        }
        mem_free(k->reqs);
        mem_free(k);
        return false;
    }
    pthread_mutex_lock(&kept_lock);
    k->next = kept_list;
    kept_list = k;
    pthread_mutex_unlock(&kept_lock);
    return true;
}

/* The message: started, n, then per request seq, kind, count, bf16, the
 * send counts and the receive counts (size each, zeros when unused). */
enum { REC_SEQ, REC_KIND, REC_COUNT, REC_BF16, REC_SCOUNTS };
static int record_len(int size) { return REC_SCOUNTS + 2 * size; }
static int rec_rcounts(int size) { return REC_SCOUNTS + size; }

static bool build_message(kept *k)
{
    const int rec = record_len(k->size);
    k->mine_len = 2 + k->n * rec;
    k->mine = mem_calloc((size_t)k->mine_len, sizeof *k->mine);
    if (!k->mine) return false;
    k->mine[0] = k->started;
    k->mine[1] = k->n;
    for (int i = 0; i < k->n; i++) {
        const kept_request *q = &k->reqs[i];
        int64_t *m = k->mine + 2 + (size_t)i * rec;
        m[REC_SEQ] = q->seq;
        m[REC_KIND] = q->kind;
        m[REC_COUNT] = q->count;
        m[REC_BF16] = q->bf16;
        for (int p = 0; p < k->size; p++) {
            m[REC_SCOUNTS + p] = q->scounts ? q->scounts[p] : 0;
            m[rec_rcounts(k->size) + p] = q->rcounts ? q->rcounts[p] : 0;
        }
    }
    return true;
}

/* Peer p's record of its collective number seq, or NULL (p did not start
 * it, or completed it). */
static const int64_t *record_of(const kept *k, int p, long seq)
{
    const int64_t *m = k->theirs[p];
    if (!m || k->theirs_len[p] < 2) return NULL;
    const int rec = record_len(k->size);
    const int64_t n = m[1];
    if (n < 0 || 2 + n * rec > k->theirs_len[p]) return NULL;
    for (int64_t i = 0; i < n; i++)
        if (m[2 + i * rec + REC_SEQ] == seq) return m + 2 + i * rec;
    return NULL;
}

/* What a rank behind posts: one collective, with buffers of its own. */
typedef struct stand_in {
    MPI_Request handle;
    float *send, *recv;
    int *scounts, *sdispls, *rcounts, *rdispls;
    bool posted;
} stand_in;

static int prefix(const int *counts, int *displs, int size)
{
    int total = 0;
    for (int p = 0; p < size; p++) {
        displs[p] = total;
        total += counts[p];
    }
    return total;
}

static bool post_stand_in(const kept *k, long seq, stand_in *s)
{
    const int64_t *any = NULL;
    for (int p = 0; p < k->size && !any; p++)
        if (p != k->rank) any = record_of(k, p, seq);
    if (!any) return false; /* nobody ahead holds it: nothing to match */
    const int size = k->size;
    s->scounts = mem_calloc((size_t)size, sizeof(int));
    s->sdispls = mem_calloc((size_t)size, sizeof(int));
    s->rcounts = mem_calloc((size_t)size, sizeof(int));
    s->rdispls = mem_calloc((size_t)size, sizeof(int));
    if (!s->scounts || !s->sdispls || !s->rcounts || !s->rdispls) return false;
    int code = MPI_ERR_OTHER;
    const MPI_Datatype type = any[REC_BF16] ? MPI_UINT16_T : MPI_FLOAT;
    const int rc = rec_rcounts(size);
    switch ((request_kind)any[REC_KIND]) {
    case REQ_ALLREDUCE:
        s->recv = mem_calloc(any[REC_COUNT] > 0 ? (size_t)any[REC_COUNT] : 1, sizeof(float));
        if (s->recv)
            code = MPI_Iallreduce(MPI_IN_PLACE, s->recv, (int)any[REC_COUNT], MPI_FLOAT, MPI_SUM,
                                  k->comm, &s->handle);
        break;
    case REQ_ALLGATHERV: {
        for (int p = 0; p < size; p++) s->rcounts[p] = (int)any[rc + p];
        const int total = prefix(s->rcounts, s->rdispls, size);
        s->recv = mem_calloc(total > 0 ? (size_t)total : 1, sizeof(float));
        if (s->recv)
            code = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s->recv, s->rcounts,
                                   s->rdispls, type, k->comm, &s->handle);
        break;
    }
    case REQ_ALLTOALLV: {
        /* With a peer ahead, what it receives from us and sends us; with
         * one as late as we are (or done with it), nothing. */
        for (int p = 0; p < size; p++) {
            const int64_t *r = p == k->rank ? NULL : record_of(k, p, seq);
            s->scounts[p] = r ? (int)r[rc + k->rank] : 0;
            s->rcounts[p] = r ? (int)r[REC_SCOUNTS + k->rank] : 0;
        }
        const int sent = prefix(s->scounts, s->sdispls, size);
        const int received = prefix(s->rcounts, s->rdispls, size);
        s->send = mem_calloc(sent > 0 ? (size_t)sent : 1, sizeof(float));
        s->recv = mem_calloc(received > 0 ? (size_t)received : 1, sizeof(float));
        if (s->send && s->recv)
            code = MPI_Ialltoallv(s->send, s->scounts, s->sdispls, type, s->recv, s->rcounts,
                                  s->rdispls, type, k->comm, &s->handle);
        break;
    }
    }
    s->posted = code == MPI_SUCCESS;
    return s->posted;
}

static void free_stand_in(stand_in *s)
{
    mem_free(s->send);
    mem_free(s->recv);
    mem_free(s->scounts);
    mem_free(s->sdispls);
    mem_free(s->rcounts);
    mem_free(s->rdispls);
}

/* Receive every peer's message, polling all of them until the deadline. */
static void receive_messages(kept *list, double deadline)
{
    for (;;) {
        bool missing = false;
        for (kept *k = list; k; k = k->next) {
            if (k->given_up) continue;
            for (int p = 0; p < k->size; p++) {
                if (p == k->rank || k->theirs[p]) continue;
                int flag = 0, len = 0;
                MPI_Status st;
                if (MPI_Iprobe(p, LATE_TAG, k->comm, &flag, &st) != MPI_SUCCESS) {
                    k->given_up = true;
                    break;
                }
                if (!flag) {
                    missing = true;
                    continue;
                }
                MPI_Get_count(&st, MPI_INT64_T, &len);
                if (len < 2) { /* not one of ours */
                    k->given_up = true;
                    break;
                }
                k->theirs[p] = mem_calloc(len > 0 ? (size_t)len : 1, sizeof(int64_t));
                if (!k->theirs[p] ||
                    MPI_Recv(k->theirs[p], len, MPI_INT64_T, p, LATE_TAG, k->comm,
                             MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                    k->given_up = true;
                    break;
                }
                k->theirs_len[p] = len;
            }
        }
        if (!missing) return;
        if (engine_now() > deadline) {
            for (kept *k = list; k; k = k->next)
                for (int p = 0; p < k->size && !k->given_up; p++)
                    if (p != k->rank && !k->theirs[p]) k->given_up = true;
            return;
        }
    }
}

/* Test every request until all completed or the deadline passes.
 * Returns true when all completed. */
static bool complete_all(MPI_Request *reqs, int n, double deadline)
{
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            if (MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
            all = all && flag;
        }
        if (all) return true;
        if (engine_now() > deadline) return false;
    }
}

void late_peers_settle(void)
{
    pthread_mutex_lock(&kept_lock);
    kept *list = kept_list;
    kept_list = NULL;
    pthread_mutex_unlock(&kept_lock);
    if (!list) return;

    /* 1. Tell every peer what this rank started and holds in flight. */
    int sends = 0;
    for (kept *k = list; k; k = k->next) sends += k->size - 1;
    MPI_Request *send_reqs = mem_calloc(sends > 0 ? (size_t)sends : 1, sizeof *send_reqs);
    int s = 0;
    for (kept *k = list; k; k = k->next) {
        k->theirs = mem_calloc((size_t)k->size, sizeof *k->theirs);
        k->theirs_len = mem_calloc((size_t)k->size, sizeof *k->theirs_len);
        if (!send_reqs || !k->theirs || !k->theirs_len || !build_message(k)) {
            k->given_up = true;
            continue;
        }
        for (int p = 0; p < k->size; p++)
            if (p != k->rank &&
                MPI_Isend(k->mine, k->mine_len, MPI_INT64_T, p, LATE_TAG, k->comm,
                          &send_reqs[s]) == MPI_SUCCESS)
                s++;
    }

    /* 2. Hear from every peer. */
    receive_messages(list, engine_now() + LATE_PEERS_WAIT_S);

    /* 3. Post what this rank missed, in order. */
    int total = s, stand_ins = 0;
    for (kept *k = list; k; k = k->next) {
        if (k->given_up) continue;
        long most = k->started;
        for (int p = 0; p < k->size; p++)
            if (p != k->rank && k->theirs[p][0] > most) most = (long)k->theirs[p][0];
        stand_ins += (int)(most - k->started);
        total += k->n;
    }
    stand_in *posted = mem_calloc(stand_ins > 0 ? (size_t)stand_ins : 1, sizeof *posted);
    MPI_Request *all = mem_calloc((size_t)total + (size_t)stand_ins + 1, sizeof *all);
    int n = 0, si = 0;
    if (all && send_reqs) {
        memcpy(all, send_reqs, (size_t)s * sizeof *all);
        n = s;
    }
    for (kept *k = list; k && all && posted; k = k->next) {
        if (k->given_up) continue;
        for (int i = 0; i < k->n; i++) all[n++] = k->reqs[i].handle;
        long most = k->started;
        for (int p = 0; p < k->size; p++)
            if (p != k->rank && k->theirs[p][0] > most) most = (long)k->theirs[p][0];
        for (long seq = k->started; seq < most; seq++) {
            stand_in *st = &posted[si++];
            if (!post_stand_in(k, seq, st)) break; /* later ones could not match */
            all[n++] = st->handle;
        }
    }

    /* 4. Complete everything.  What does not complete stays MPI's: its
     * buffers are kept. */
    const bool done = all && complete_all(all, n, engine_now() + LATE_PEERS_WAIT_S);
    if (done) {
        for (int i = 0; i < si; i++) free_stand_in(&posted[i]);
        for (kept *k = list; k; k = k->next) mem_free(k->mine);
    }
    mem_free(posted);
    mem_free(all);
    mem_free(send_reqs);
    while (list) {
        kept *k = list;
        list = k->next;
        for (int p = 0; k->theirs && p < k->size; p++) mem_free(k->theirs[p]);
        mem_free(k->theirs);
        mem_free(k->theirs_len);
        for (int i = 0; i < k->n; i++) {
            mem_free(k->reqs[i].scounts);
            mem_free(k->reqs[i].rcounts);
        }
        mem_free(k->reqs);
        mem_free(k);
    }
}
