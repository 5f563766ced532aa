/* Reading the next batches of a file-backed dataset ahead, on one helper
 * thread.  The caller posts jobs (a copy of the batch's file indices, the
 * box and a buffer) into slots; the thread reads queued slots in posting
 * order.  A slot belongs to the caller while FREE or TAKEN, to the thread
 * while READING; state changes happen under the mutex, so the buffers pass
 * between threads with a happens-before edge.  The thread never sees the
 * dataset's order (which a shuffle rewrites): only the copied indices. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "volume.h"

enum slot_state { SLOT_FREE, SLOT_QUEUED, SLOT_READING, SLOT_DONE, SLOT_TAKEN };

typedef struct slot {
    enum slot_state state;
    int discard;           /* READING but no longer wanted: free it when done */
    uint64_t seq;          /* posting order */
    int count, files_cap;
    int *files;            /* count file indices */
    volume_box box;
    float *x;              /* count * box floats */
    size_t x_cap;
    pcnn_status status;
    char msg[512];
} slot;

struct volume_prefetch {
    volume_source *v;
    volume_scratch *scratch; /* the thread's */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int stop;
    int nslots;
    slot *slots;
    uint64_t next_seq;
    /* The thread's first failure not yet reported (the next call reports it). */
    pcnn_status pending;
    char pending_msg[512];
    /* Prediction: the distance between the last two starts. */
    int last_start, stride;
};

static int same_box(const volume_box *a, const volume_box *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static int slot_holds(const slot *s, const int *files, int count, const volume_box *box)
{
    return s->count == count && same_box(&s->box, box) &&
           memcmp(s->files, files, (size_t)count * sizeof *files) == 0;
}

static void *prefetch_main(void *arg)
{
    volume_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        slot *next = NULL;
        for (int i = 0; i < p->nslots; i++)
            if (p->slots[i].state == SLOT_QUEUED && (!next || p->slots[i].seq < next->seq))
                next = &p->slots[i];
        if (!next) {
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        next->state = SLOT_READING;
        pthread_mutex_unlock(&p->mu);

        const size_t per = volume_box_floats(p->v->c, &next->box);
        pcnn_status st = PCNN_OK;
        char msg[512] = "";
        for (int k = 0; k < next->count && st == PCNN_OK; k++)
            st = volume_read_box(p->v, p->scratch, next->files[k], &next->box,
                                 next->x + (size_t)k * per, msg, sizeof msg);

        pthread_mutex_lock(&p->mu);
        if (st != PCNN_OK && p->pending == PCNN_OK) {
            p->pending = st;
            snprintf(p->pending_msg, sizeof p->pending_msg, "%s (read ahead)", msg);
        }
        next->status = st;
        snprintf(next->msg, sizeof next->msg, "%s", msg);
        next->state = next->discard ? SLOT_FREE : SLOT_DONE;
        next->discard = 0;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void volume_prefetch_wait_idle(volume_source *v)
{
    volume_prefetch *p = v ? v->prefetch : NULL;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < p->nslots; i++)
            busy |= p->slots[i].state == SLOT_QUEUED || p->slots[i].state == SLOT_READING;
        if (!busy) break;
        pthread_cond_wait(&p->done, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

void volume_prefetch_free(volume_prefetch *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    for (int i = 0; i < p->nslots; i++) {
        mem_free(p->slots[i].files);
        mem_free(p->slots[i].x);
    }
    mem_free(p->slots);
    volume_scratch_free(p->scratch);
    mem_free(p);
}

int volume_prefetch_slots(const volume_source *v)
{
    return v->prefetch ? v->prefetch->nslots : 0;
}

pcnn_status volume_prefetch_set(volume_source *v, int batches)
{
    volume_prefetch_free(v->prefetch);
    v->prefetch = NULL;
    if (batches == 0) return PCNN_OK;
    volume_prefetch *p = mem_calloc(1, sizeof *p);
    if (p) {
        p->slots = mem_calloc((size_t)batches, sizeof *p->slots);
        p->scratch = volume_scratch_new();
    }
    if (!p || !p->slots || !p->scratch) {
        if (p) {
            mem_free(p->slots);
            volume_scratch_free(p->scratch);
        }
        mem_free(p);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot allocate %d prefetch slots", batches);
    }
    p->v = v;
    p->nslots = batches;
    p->last_start = -1;
    int err = pthread_mutex_init(&p->mu, NULL);
    if (!err) {
        err = pthread_cond_init(&p->work, NULL);
        if (!err) {
            err = pthread_cond_init(&p->done, NULL);
            if (!err) {
                /* Reads keep their buffers in the scratch, but do not
                 * rely on the platform's default thread stack either. */
                pthread_attr_t attr;
                err = pthread_attr_init(&attr);
                if (!err) {
                    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
                    err = pthread_create(&p->thread, &attr, prefetch_main, p);
                    pthread_attr_destroy(&attr);
                }
                if (err) pthread_cond_destroy(&p->done);
            }
            if (err) pthread_cond_destroy(&p->work);
        }
        if (err) pthread_mutex_destroy(&p->mu);
    }
    if (err) {
        mem_free(p->slots);
        volume_scratch_free(p->scratch);
        mem_free(p);
        return FAIL(PCNN_ERR_INTERNAL, "cannot start the prefetch thread: %s", strerror(err));
    }
    v->prefetch = p;
    return PCNN_OK;
}

static pcnn_status read_direct(const volume_source *v, const int *order, int start, int count,
                               const volume_box *box, float *x)
{
    const size_t per = volume_box_floats(v->c, box);
    for (int k = 0; k < count; k++)
        TRY(volume_read_box(v, v->scratch, order[start + k], box, x + (size_t)k * per, NULL, 0));
    return PCNN_OK;
}

/* Is the slot one of the `ahead` predicted batches? */
static int slot_predicted(const volume_prefetch *p, const slot *s, const int *order, int n,
                          int start, int count, const volume_box *box)
{
    for (int a = 1; a <= p->nslots; a++) {
        long next = start + (long)a * p->stride;
        if (next + count > n) break;
        if (slot_holds(s, order + next, count, box)) return 1;
    }
    return 0;
}

/* Queue the predicted batches not yet held by a slot (mutex held).
 * Allocation failures only skip a prediction. */
static void post_predictions(volume_prefetch *p, const int *order, int n, int start, int count,
                             const volume_box *box)
{
    const size_t per = volume_box_floats(p->v->c, box);
    for (int a = 1; a <= p->nslots; a++) {
        long next = start + (long)a * p->stride;
        if (next + count > n) break;
        const int *files = order + next;
        slot *free_slot = NULL;
        int held = 0;
        for (int i = 0; i < p->nslots && !held; i++) {
            slot *s = &p->slots[i];
            if (s->state == SLOT_FREE) {
                if (!free_slot) free_slot = s;
            } else if (!s->discard && slot_holds(s, files, count, box)) {
                held = 1;
            }
        }
        if (held) continue;
        if (!free_slot) break;
        if (free_slot->files_cap < count) {
            int *f = mem_realloc(free_slot->files, (size_t)count * sizeof *f);
            if (!f) break;
            free_slot->files = f;
            free_slot->files_cap = count;
        }
        if (free_slot->x_cap < per * (size_t)count) {
            float *x = mem_realloc(free_slot->x, per * (size_t)count * sizeof *x);
            if (!x) break;
            free_slot->x = x;
            free_slot->x_cap = per * (size_t)count;
        }
        memcpy(free_slot->files, files, (size_t)count * sizeof *files);
        free_slot->count = count;
        free_slot->box = *box;
        free_slot->status = PCNN_OK;
        free_slot->seq = p->next_seq++;
        free_slot->state = SLOT_QUEUED;
        pthread_cond_signal(&p->work);
    }
}

pcnn_status volume_read_batch(volume_source *v, const int *order, int n, int start, int count,
                              const volume_box *box, float *x)
{
    volume_prefetch *p = v->prefetch;
    if (!p) return read_direct(v, order, start, count, box, x);

    pthread_mutex_lock(&p->mu);
    if (p->pending != PCNN_OK) {
        pcnn_status st = p->pending;
        char msg[sizeof p->pending_msg];
        memcpy(msg, p->pending_msg, sizeof msg);
        p->pending = PCNN_OK;
        pthread_mutex_unlock(&p->mu);
        return FAIL(st, "%s", msg);
    }
    p->stride = p->last_start >= 0 && start > p->last_start ? start - p->last_start : count;
    p->last_start = start;

    /* Keep the requested batch and the predicted ones; drop the rest. */
    slot *hit = NULL;
    for (int i = 0; i < p->nslots; i++) {
        slot *s = &p->slots[i];
        if (s->state == SLOT_FREE || s->discard) continue;
        if (!hit && slot_holds(s, order + start, count, box)) {
            hit = s;
            continue;
        }
        if (slot_predicted(p, s, order, n, start, count, box)) continue;
        if (s->state == SLOT_READING) s->discard = 1;
        else s->state = SLOT_FREE;
    }
    if (hit && hit->state == SLOT_QUEUED) {
        /* Not started: read it here rather than wait behind older jobs. */
        hit->state = SLOT_FREE;
        hit = NULL;
    }
    post_predictions(p, order, n, start, count, box);
    if (!hit) {
        pthread_mutex_unlock(&p->mu);
        return read_direct(v, order, start, count, box, x);
    }
    while (hit->state == SLOT_READING) pthread_cond_wait(&p->done, &p->mu);
    if (hit->status != PCNN_OK) {
        /* Reported now: the pending copy is the same failure. */
        pcnn_status st = hit->status;
        char msg[sizeof hit->msg];
        memcpy(msg, hit->msg, sizeof msg);
        hit->state = SLOT_FREE;
        p->pending = PCNN_OK;
        pthread_mutex_unlock(&p->mu);
        return FAIL(st, "%s", msg);
    }
    hit->state = SLOT_TAKEN;
    pthread_mutex_unlock(&p->mu);
    memcpy(x, hit->x, volume_box_floats(v->c, box) * (size_t)count * sizeof *x);
    pthread_mutex_lock(&p->mu);
    hit->state = SLOT_FREE;
    /* The slot just freed goes to the next prediction at once (with one
     * slot, nothing could be queued while it held this batch). */
    post_predictions(p, order, n, start, count, box);
    pthread_mutex_unlock(&p->mu);
    return PCNN_OK;
}
