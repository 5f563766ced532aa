/* The checkpoint file format (docs/checkpoint-format.md), free of any
 * network: little-endian encoding, the section table, checksums, and a
 * parser that validates an in-memory image before anything trusts it.
 *
 * Layout: a header (magic, version, header size, section count, file size,
 * section table, header CRC32), then the sections back to back in table
 * order.  The first 16 bytes (magic, version, header size) and the CRC32
 * in the header's last 4 bytes keep their meaning in every version, so a
 * reader can tell a damaged file (CORRUPT) from a newer one (UNSUPPORTED). */
#ifndef PCNN_IO_CHECKPOINT_FORMAT_H
#define PCNN_IO_CHECKPOINT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pcnn.h"

#define CKPT_MAGIC "PCNNCKPT"
#define CKPT_VERSION 2u        /* written; every version from 1 is read */
#define CKPT_PREFIX_BYTES 16   /* magic, version, header size */
#define CKPT_HEADER_FIXED 32   /* prefix, section count, flags, file size */
#define CKPT_ENTRY_BYTES 32    /* id, flags, offset, length, crc, reserved */
#define CKPT_MAX_SECTIONS 64
#define CKPT_META_BYTES 128
#define CKPT_LAYER_BYTES 48
#define CKPT_KIND_BYTES 16

/* Section ids (pinned; new ones are appended). */
enum {
    CKPT_SEC_META = 1,     /* ckpt_meta */
    CKPT_SEC_LAYERS = 2,   /* num_layers ckpt_layer records */
    CKPT_SEC_PARAMS = 3,   /* num_params float32 */
    CKPT_SEC_OPTIM_M = 4,  /* num_params float32: momentum / Adam's m */
    CKPT_SEC_OPTIM_V = 5,  /* num_params float32: Adam's v */
    CKPT_SEC_BN_STATS = 6, /* ranks x bn_floats float32 */
    CKPT_SEC_EXTRA = 7     /* opaque bytes (the batch scheduler's state) */
};
/* Section flag: a reader that does not know the id must refuse the file. */
#define CKPT_FLAG_REQUIRED 1u

typedef struct ckpt_meta {
    uint64_t definition_hash;
    uint32_t num_layers, optimizer, loss, ranks;
    uint64_t num_params, seed, step, bn_floats;
    double learning_rate, momentum, weight_decay, beta1, beta2, epsilon;
    uint64_t warmup_steps, decay_every_steps;
    double decay_factor;
} ckpt_meta;

typedef struct ckpt_layer {
    uint64_t hash, num_params;
    uint32_t c, h, w;
    char kind[CKPT_KIND_BYTES + 1]; /* NUL-terminated */
} ckpt_layer;

/* A parsed image: every pointer aims into the caller's buffer, whose
 * sections have passed their checksums and size checks.  NULL (and
 * extra_bytes 0) for absent optional sections. */
typedef struct ckpt_view {
    uint32_t version;
    ckpt_meta meta;
    const unsigned char *layers, *params, *m, *v, *bn, *extra;
    size_t extra_bytes;
} ckpt_view;

/* The FNV-1a offset basis of the layer and definition hashes in a file of
 * `version` (1 ... CKPT_VERSION).  Version 1 was written with a basis that
 * lost a digit (1469598103934665603 instead of 14695981039346656037);
 * version 2, of identical layout, uses the standard one.  Readers hash the
 * network with the file's basis to compare. */
uint64_t ckpt_hash_basis(uint32_t version);

/* Validate an image of len bytes: magic, version, header and section
 * checksums, table consistency, section sizes against the META counts,
 * option ranges (the option table's), and the values: finite parameters
 * and optimizer state, non-negative second moments and running
 * variances (docs/checkpoint-format.md, "Values").  Nothing is allocated and nothing outside buf[0, len) is
 * read, whatever the length fields say.  Errors (message under `func`):
 * CORRUPT (truncated, damaged, inconsistent, a value out of range: the
 * message names the field and the first bad index), UNSUPPORTED (intact file of
 * an unknown version, or with a required section this reader lacks). */
pcnn_status ckpt_parse(const unsigned char *buf, size_t len, const char *func, ckpt_view *out);

/* What a network expects of a file, to resume from it. */
typedef struct ckpt_expect {
    uint64_t definition_hash, num_params, seed, bn_floats;
    uint32_t num_layers, optimizer, loss;
    const ckpt_layer *layers; /* num_layers records */
} ckpt_expect;

/* Does a parsed file fit the network?  MISMATCH naming the first thing that
 * differs: a layer (kind, shape, parameters or configuration), the layer
 * count, the loss, the optimizer, the seed.  The number of ranks, batch
 * size, exchange strategy and bucket size may all differ. */
pcnn_status ckpt_verify(const ckpt_view *v, const ckpt_expect *e, const char *func);

/* Record i (< meta.num_layers) of the LAYERS section. */
void ckpt_layer_at(const ckpt_view *v, uint32_t i, ckpt_layer *out);

/* count little-endian float32 values from src (lib/core/le.h encoding). */
void ckpt_decode_floats(const unsigned char *src, float *dst, size_t count);

/* CRC-32 (zlib's, ISO-HDLC polynomial) of any length. */
uint32_t ckpt_crc32(uint32_t crc, const unsigned char *p, size_t len);

/* Streaming writer: header space first, sections appended with their
 * checksums computed on the way, the header filled in by ckpt_finish. */
typedef struct ckpt_writer {
    FILE *f;
    int count, promised;
    bool open, failed;
    struct {
        uint32_t id, flags, crc;
        uint64_t offset, length;
    } sec[CKPT_MAX_SECTIONS];
    uint64_t pos;
} ckpt_writer;

/* Reserve the header of `sections` entries at the start of f. */
void ckpt_begin(ckpt_writer *w, FILE *f, int sections);
void ckpt_section(ckpt_writer *w, uint32_t id, uint32_t flags);
void ckpt_put_bytes(ckpt_writer *w, const void *p, size_t len);
void ckpt_put_floats(ckpt_writer *w, const float *x, size_t count);
void ckpt_put_meta(ckpt_writer *w, const ckpt_meta *m);
void ckpt_put_layer(ckpt_writer *w, const ckpt_layer *l);
/* Write the header.  False if any write failed or the section count
 * differs from ckpt_begin's. */
bool ckpt_finish(ckpt_writer *w);

#endif
