/* libFuzzer harness for the IDX reader.  Each input is tried three ways:
 *   1. as a decompressed IDX file, parsed as images (3 dims) and labels (1);
 *   2. as a gzip file, inflated with a 1 MiB cap, then parsed;
 *   3. as a pair: a 2-byte little-endian length L, then L bytes of images
 *      file and the rest as labels file, built into a dataset.
 * Any crash, sanitizer report or broken invariant (trap) is a bug.
 *
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -I/usr/include/x86_64-linux-gnu/mpich \
 *   -Iinclude -Ilib tests/io/fuzz_idx.c lib/data/idx.c lib/data/dataset.c lib/core/[a-z]*.c -lz -lm \
 *   -o fuzz_idx && ./fuzz_idx -max_total_time=20 tests/io/corpus */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/memory.h"
#include "data/dataset.h"
#include "pcnn.h"

#define EXPECT(cond)                          \
    do {                                      \
        if (!(cond)) __builtin_trap();        \
    } while (0)

static void parse_both(const unsigned char *buf, size_t len)
{
    static const int ndims[2] = {3, 1};
    for (int k = 0; k < 2; k++) {
        idx_array a;
        if (idx_parse(buf, len, ndims[k], "fuzz", &a) != PCNN_OK) continue;
        size_t count = 1;
        for (int d = 0; d < a.ndims; d++) {
            EXPECT(a.dims[d] >= 1);
            count *= (size_t)a.dims[d];
        }
        EXPECT(a.count == count && count <= IDX_MAX_DATA_BYTES);
        EXPECT(a.data == buf + 4 + 4 * (size_t)ndims[k] && a.data + a.count == buf + len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_both(data, size);

    unsigned char *plain = NULL;
    size_t plain_len = 0;
    if (idx_gunzip(data, size, (size_t)1 << 20, "fuzz", &plain, &plain_len) == PCNN_OK) {
        EXPECT(plain_len <= (size_t)1 << 20);
        parse_both(plain, plain_len);
        mem_free(plain);
    }

    if (size >= 2) {
        size_t split = (size_t)data[0] | (size_t)data[1] << 8;
        if (split > size - 2) split = size - 2;
        const unsigned char *images = data + 2, *labels = data + 2 + split;
        size_t labels_len = size - 2 - split;
        pcnn_dataset *d = NULL;
        if (idx_dataset_from_buffers(images, split, "images", labels, labels_len, "labels",
                                     0.5f, 0.25f, &d) == PCNN_OK) {
            int n, c, h, w;
            EXPECT(pcnn_dataset_info(d, &n, &c, &h, &w) == PCNN_OK);
            EXPECT(n >= 1 && c == 1 && h >= 1 && w >= 1);
            EXPECT(dataset_num_classes(d) >= 1 && dataset_num_classes(d) <= 256);
            /* Shuffle, then copy the last sample through the public API. */
            EXPECT(pcnn_dataset_shuffle(d, size, 1) == PCNN_OK);
            float x[64];
            int32_t label;
            if ((size_t)h * (size_t)w <= 64) {
                EXPECT(pcnn_dataset_batch(d, n - 1, 1, x, &label, NULL) == PCNN_OK);
                EXPECT(label >= 0 && label < 256);
            }
            EXPECT(pcnn_dataset_batch(d, n - 1, 2, x, &label, NULL) ==
                   PCNN_ERR_INVALID_ARGUMENT);
            pcnn_dataset_destroy(&d);
            EXPECT(d == NULL);
        }
    }
    return 0;
}
