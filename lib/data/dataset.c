/* In-memory datasets of images (C, H, W) or volumes (C, D, H, W) with class
 * labels or float targets: storage, shuffling and batch copies. */
#include "dataset.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../core/rng.h"
#include "volume.h"

/* Domain word of the shuffle's RNG key, so that (seed, epoch) streams never
 * coincide with other users of the same seed (weight init, dropout). */
#define SHUFFLE_STREAM 0x53485546464c45ull /* "SHUFFLE" */

pcnn_dataset *dataset_alloc(int n, int c, int h, int w, int with_labels, int target_count)
{
    return dataset_alloc3d(n, c, 1, h, w, with_labels, target_count);
}

pcnn_dataset *dataset_alloc3d(int n, int c, int d_, int h, int w, int with_labels,
                              int target_count)
{
    if (n < 1 || c < 1 || d_ < 1 || h < 1 || w < 1 || target_count < 0) return NULL;
    if (!dataset_shape_fits(c, d_, h, w)) return NULL;
    size_t sample = (size_t)c * (size_t)d_ * (size_t)h * (size_t)w;
    if (sample > SIZE_MAX / sizeof(float) / (size_t)n) return NULL;
    if (target_count > 0 && (size_t)target_count > SIZE_MAX / sizeof(float) / (size_t)n)
        return NULL;

    pcnn_dataset *d = mem_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->n = n;
    d->c = c;
    d->d = d_;
    d->h = h;
    d->w = w;
    d->sample_floats = sample;
    d->target_count = target_count;
    d->x = mem_alloc_floats((size_t)n * sample);
    d->order = mem_calloc((size_t)n, sizeof *d->order);
    if (with_labels) d->labels = mem_calloc((size_t)n, sizeof *d->labels);
    if (target_count > 0) d->targets = mem_alloc_floats((size_t)n * (size_t)target_count);
    if (!d->x || !d->order || (with_labels && !d->labels) || (target_count > 0 && !d->targets)) {
        dataset_free(d);
        return NULL;
    }
    for (int i = 0; i < n; i++) d->order[i] = i;
    return d;
}

void dataset_free(pcnn_dataset *d)
{
    if (!d) return;
    volume_source_free(d->vol);
    mem_free(d->x);
    mem_free(d->labels);
    mem_free(d->targets);
    mem_free(d->order);
    mem_free(d);
}

void dataset_finish(pcnn_dataset *d)
{
    int32_t max = -1;
    if (d->labels)
        for (int i = 0; i < d->n; i++)
            if (d->labels[i] > max) max = d->labels[i];
    /* Labels are validated >= 0 and int32, so max + 1 may only overflow at
     * INT32_MAX: saturate (the network rejects such a class count anyway). */
    d->num_classes = max == INT32_MAX ? INT32_MAX : (int)max + 1;
}

int dataset_num_classes(const pcnn_dataset *d) { return d->num_classes; }

void dataset_copy_batch(const pcnn_dataset *d, int start, int count, float *x,
                        int32_t *labels, float *targets)
{
    const size_t sf = d->sample_floats;
    const size_t tc = (size_t)d->target_count;
    for (int k = 0; k < count; k++) {
        size_t i = (size_t)d->order[start + k];
        if (x) memcpy(x + (size_t)k * sf, d->x + i * sf, sf * sizeof *x);
        if (labels && d->labels) labels[k] = d->labels[i];
        if (targets && d->targets)
            memcpy(targets + (size_t)k * tc, d->targets + i * tc, tc * sizeof *targets);
    }
}

/* Copy a box of each in-memory sample: rows of box->count[2] floats. */
static void slice_batch(const pcnn_dataset *d, int start, int count, const volume_box *box,
                        float *x)
{
    const int bd = box->count[0], bh = box->count[1], bw = box->count[2];
    for (int k = 0; k < count; k++) {
        const float *s = dataset_sample_x(d, start + k);
        for (int c = 0; c < d->c; c++)
            for (int z = 0; z < bd; z++)
                for (int y = 0; y < bh; y++) {
                    size_t from = (((size_t)c * (size_t)d->d + (size_t)(box->start[0] + z)) *
                                       (size_t)d->h + (size_t)(box->start[1] + y)) *
                                      (size_t)d->w + (size_t)box->start[2];
                    memcpy(x, s + from, (size_t)bw * sizeof *x);
                    x += bw;
                }
    }
}

pcnn_status dataset_read_batch(const pcnn_dataset *d, int start, int count,
                               const volume_box *box, float *x, int32_t *labels,
                               float *targets)
{
    const int whole = !box || (box->start[0] == 0 && box->start[1] == 0 &&
                               box->start[2] == 0 && box->count[0] == d->d &&
                               box->count[1] == d->h && box->count[2] == d->w);
    if (!d->vol) {
        if (whole) {
            dataset_copy_batch(d, start, count, x, labels, targets);
            return PCNN_OK;
        }
        if (x) slice_batch(d, start, count, box, x);
        dataset_copy_batch(d, start, count, NULL, labels, targets);
        return PCNN_OK;
    }
    const volume_box full = {{0, 0, 0}, {d->d, d->h, d->w}};
    if (x) TRY(volume_read_batch(d->vol, d->order, d->n, start, count, box ? box : &full, x));
    dataset_copy_batch(d, start, count, NULL, labels, targets);
    return PCNN_OK;
}

/* The sample shape for messages: "(C, H, W)" for images, "(C, D, H, W)" for
 * volumes. */
static const char *shape_text(int c, int d, int h, int w, char *buf, size_t size)
{
    if (d == 1) snprintf(buf, size, "(%d, %d, %d)", c, h, w);
    else snprintf(buf, size, "(%d, %d, %d, %d)", c, d, h, w);
    return buf;
}

/* pcnn_dataset_create and pcnn_dataset_create3d (messages name the caller's
 * public function: the API scope is already open). */
static pcnn_status create(int n, int c, int depth, int h, int w, const float *x,
                          const int32_t *labels, const float *targets, int target_count,
                          pcnn_dataset **out)
{
    char txt[64];
    REQUIRE_PTR(out);
    REQUIRE_PTR(x);
    REQUIRE(n >= 1, PCNN_ERR_INVALID_ARGUMENT, "n %d < 1", n);
    REQUIRE(c >= 1 && depth >= 1 && h >= 1 && w >= 1, PCNN_ERR_INVALID_ARGUMENT,
            "sample shape %s has a dimension < 1", shape_text(c, depth, h, w, txt, sizeof txt));
    REQUIRE((labels == NULL) != (targets == NULL), PCNN_ERR_INVALID_ARGUMENT,
            "pass exactly one of labels and targets (got %s)",
            labels ? "both" : "neither");
    if (labels) {
        REQUIRE(target_count == 0, PCNN_ERR_INVALID_ARGUMENT,
                "target_count %d must be 0 with labels", target_count);
        for (int i = 0; i < n; i++)
            REQUIRE(labels[i] >= 0, PCNN_ERR_INVALID_ARGUMENT, "label %d of sample %d < 0",
                    (int)labels[i], i);
    } else {
        REQUIRE(target_count >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "target_count %d < 1 with targets", target_count);
    }
    REQUIRE(dataset_shape_fits(c, depth, h, w),
            PCNN_ERR_INVALID_ARGUMENT, "sample shape %s exceeds INT_MAX floats",
            shape_text(c, depth, h, w, txt, sizeof txt));

    pcnn_dataset *d = dataset_alloc3d(n, c, depth, h, w, labels != NULL, target_count);
    if (!d)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY,
                    "cannot allocate %d samples of %s floats, %d targets each", n,
                    shape_text(c, depth, h, w, txt, sizeof txt), target_count);
    memcpy(d->x, x, (size_t)n * d->sample_floats * sizeof *d->x);
    if (labels) memcpy(d->labels, labels, (size_t)n * sizeof *d->labels);
    if (targets) memcpy(d->targets, targets, (size_t)n * (size_t)target_count * sizeof *d->targets);
    dataset_finish(d);
    *out = d;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_create(int n, int channels, int height, int width,
                                         const float *x, const int32_t *labels,
                                         const float *targets, int target_count,
                                         pcnn_dataset **out)
{
    API_ENTRY();
    return create(n, channels, 1, height, width, x, labels, targets, target_count, out);
}

PCNN_API pcnn_status pcnn_dataset_create3d(int n, int channels, int depth, int height, int width,
                                           const float *x, const int32_t *labels,
                                           const float *targets, int target_count,
                                           pcnn_dataset **out)
{
    API_ENTRY();
    return create(n, channels, depth, height, width, x, labels, targets, target_count, out);
}

PCNN_API pcnn_status pcnn_dataset_destroy(pcnn_dataset **data)
{
    API_ENTRY();
    if (!data || !*data) return PCNN_OK;
    dataset_free(*data);
    *data = NULL;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_info(const pcnn_dataset *data, int *n, int *channels,
                                       int *height, int *width)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    /* A (C, H, W) answer for volumes would silently lose their depth. */
    REQUIRE(data->d == 1, PCNN_ERR_SHAPE,
            "the samples are 3D (depth %d): use pcnn_dataset_info3d", data->d);
    if (n) *n = data->n;
    if (channels) *channels = data->c;
    if (height) *height = data->h;
    if (width) *width = data->w;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_info3d(const pcnn_dataset *data, int *n, int *channels,
                                         int *depth, int *height, int *width)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    if (n) *n = data->n;
    if (channels) *channels = data->c;
    if (depth) *depth = data->d;
    if (height) *height = data->h;
    if (width) *width = data->w;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_shuffle(pcnn_dataset *data, uint64_t seed, uint64_t epoch)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    /* Always restart from the identity so the order is a function of
     * (seed, epoch) alone: every rank and every resumed run agrees. */
    int *order = data->order;
    for (int i = 0; i < data->n; i++) order[i] = i;
    rng r = rng_make(seed, epoch, SHUFFLE_STREAM, 0);
    for (int i = data->n - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint64_t)i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_batch(const pcnn_dataset *data, int start, int count,
                                        float *x, int32_t *labels, float *targets)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    REQUIRE_PTR(x);
    REQUIRE(start >= 0 && start < data->n, PCNN_ERR_INVALID_ARGUMENT,
            "start %d outside [0, %d)", start, data->n);
    REQUIRE(count >= 1 && count <= data->n - start, PCNN_ERR_INVALID_ARGUMENT,
            "count %d outside [1, %d] (start %d of %d samples)", count, data->n - start, start,
            data->n);
    REQUIRE(!labels || data->labels, PCNN_ERR_INVALID_ARGUMENT,
            "labels requested but the dataset holds regression targets");
    REQUIRE(!targets || data->targets, PCNN_ERR_INVALID_ARGUMENT,
            "targets requested but the dataset holds class labels");
    return dataset_read_batch(data, start, count, NULL, x, labels, targets);
}

PCNN_API pcnn_status pcnn_dataset_target_info(const pcnn_dataset *data, int *target_count,
                                              int *num_classes)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    if (target_count) *target_count = data->labels ? 0 : data->target_count;
    if (num_classes) *num_classes = data->labels ? data->num_classes : 0;
    return PCNN_OK;
}
