/* What file-backed datasets share whatever their format: the per-channel
 * transform applied as samples are read, the byte counters, and the names
 * of the element types. */
#include <math.h>
#include <stddef.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "dataset.h"
#include "volume.h"

const char *data_elem_name(int elem)
{
    static const char *const names[] = {"float32", "float64", "float16", "int8",
                                        "int16",   "int32",   "uint8",   "uint16"};
    return elem >= 0 && elem < (int)(sizeof names / sizeof *names) ? names[elem] : "unknown";
}

void volume_apply_transform(const volume_source *v, const volume_box *box, int n, float *x)
{
    if (!v->transform) return;
    const size_t plane = (size_t)box->count[0] * (size_t)box->count[1] * (size_t)box->count[2];
    for (int k = 0; k < n; k++)
        for (int c = 0; c < v->c; c++) {
            const volume_transform t = v->transform[c];
            float *p = x + ((size_t)k * (size_t)v->c + (size_t)c) * plane;
            if (t.log1p)
                for (size_t i = 0; i < plane; i++) p[i] = t.scale * log1pf(p[i]) + t.shift;
            else if (t.scale != 1.0f || t.shift != 0.0f)
                for (size_t i = 0; i < plane; i++) p[i] = t.scale * p[i] + t.shift;
        }
}

PCNN_API pcnn_status pcnn_dataset_set_transform(pcnn_dataset *data, int channel, int log1p,
                                                float scale, float shift)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    REQUIRE(data->vol, PCNN_ERR_INVALID_ARGUMENT, "the dataset is in memory: transform x "
            "before creating it (only file-backed datasets transform as they read)");
    REQUIRE(channel >= -1 && channel < data->c, PCNN_ERR_INVALID_ARGUMENT,
            "channel %d outside [-1, %d)", channel, data->c);
    REQUIRE(isfinite(scale) && isfinite(shift), PCNN_ERR_INVALID_ARGUMENT,
            "scale %g and shift %g must be finite", (double)scale, (double)shift);
    volume_source *v = data->vol;
    /* The prefetch thread reads v->transform: stop it meanwhile (what it
     * read ahead with the old transform goes too), start it again after. */
    const int ahead = volume_prefetch_slots(v);
    if (ahead) TRY(volume_prefetch_set(v, 0));
    if (!v->transform) {
        v->transform = mem_alloc((size_t)v->c * sizeof *v->transform);
        if (!v->transform) {
            if (ahead) (void)volume_prefetch_set(v, ahead);
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot allocate %d channel transforms", v->c);
        }
        for (int c = 0; c < v->c; c++) v->transform[c] = (volume_transform){0, 1.0f, 0.0f};
    }
    const volume_transform t = {log1p != 0, scale, shift};
    for (int c = 0; c < v->c; c++)
        if (channel < 0 || c == channel) v->transform[c] = t;
    return ahead ? volume_prefetch_set(v, ahead) : PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_io_bytes(const pcnn_dataset *data, uint64_t *data_bytes,
                                           uint64_t *meta_bytes)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    const volume_io *io = data->vol ? data->vol->io : NULL;
    if (data_bytes) *data_bytes = io ? io->data_bytes : 0;
    if (meta_bytes) *meta_bytes = io ? io->meta_bytes : 0;
    return PCNN_OK;
}
