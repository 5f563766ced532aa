/* pcnn_dataset_open_hdf5: the list of files (one path, lines, or a glob
 * pattern), each file's input dataset checked against the first file's
 * (rank, sample shape, element type) and its targets read.  The samples
 * stay in the files (hdf5_reader.c reads them batch by batch). */
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "dataset.h"
#include "hdf5_source.h"

#define KNOWN_FLAGS (PCNN_HDF5_VOLUMES | PCNN_HDF5_CHANNELS_LAST | PCNN_HDF5_FLOAT_TARGETS)
#define SUPPORTED "int8, int16, int32, uint8, uint16, float16, float32 or float64"

typedef struct path_list {
    int count;
    char **paths;
} path_list;

static void path_list_free(path_list *l)
{
    if (l->paths)
        for (int i = 0; i < l->count; i++) mem_free(l->paths[i]);
    mem_free(l->paths);
    l->paths = NULL;
    l->count = 0;
}

static pcnn_status path_list_add(path_list *l, const char *p, size_t len)
{
    if (l->count == INT_MAX) return FAIL(PCNN_ERR_INVALID_ARGUMENT, "too many files");
    char **more = mem_realloc(l->paths, ((size_t)l->count + 1) * sizeof *more);
    if (!more) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the list of files");
    l->paths = more;
    char *copy = mem_alloc(len + 1);
    if (!copy) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the list of files");
    memcpy(copy, p, len);
    copy[len] = '\0';
    l->paths[l->count++] = copy;
    return PCNN_OK;
}

/* One path, lines of paths (blank lines skipped), or a glob pattern. */
static pcnn_status expand_paths(const char *paths, path_list *l)
{
    pcnn_status st = PCNN_OK;
    if (strchr(paths, '\n')) {
        for (const char *p = paths; *p && st == PCNN_OK;) {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (len > 0 && p[len - 1] == '\r') len--;
            if (len > 0) st = path_list_add(l, p, len);
            p += end ? (size_t)(end - p) + 1 : strlen(p);
        }
        if (st == PCNN_OK && l->count == 0)
            st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "the list of files names no file");
    } else if (strpbrk(paths, "*?[")) {
        glob_t g;
        const int r = glob(paths, 0, NULL, &g);
        if (r == GLOB_NOMATCH)
            st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "the pattern '%s' matches no file", paths);
        else if (r != 0)
            st = FAIL(r == GLOB_NOSPACE ? PCNN_ERR_OUT_OF_MEMORY : PCNN_ERR_IO,
                      "cannot expand the pattern '%s'", paths);
        for (size_t i = 0; r == 0 && i < g.gl_pathc && st == PCNN_OK; i++)
            st = path_list_add(l, g.gl_pathv[i], strlen(g.gl_pathv[i]));
        if (r == 0 || r == GLOB_NOMATCH) globfree(&g);
    } else {
        REQUIRE(paths[0] != '\0', PCNN_ERR_INVALID_ARGUMENT, "paths is empty");
        st = path_list_add(l, paths, strlen(paths));
    }
    if (st != PCNN_OK) path_list_free(l);
    return st;
}

static const char *dims_text(const hsize_t *dims, int rank, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int k = 0; k < rank && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%llu", k ? ", " : "",
                              (unsigned long long)dims[k]);
    if (n < size) snprintf(buf + n, size - n, "%s)", rank == 1 ? "," : "");
    return buf;
}

/* What the first file set and the others must match, and what the
 * targets gave so far. */
typedef struct opening {
    const char *inputs, *targets;
    int flags, spatial, channels_last;
    volume_io *io;
    /* from the first file */
    const char *first_path;
    int elem, rank, has_n;
    hsize_t sample_dims[5];
    int labels, target_count; /* the targets' kind and K */
    /* collected */
    int total;
    int *first;                /* files + 1 */
    int32_t *label_values;
    float *target_values;
    size_t cap;                /* samples the value arrays hold */
} opening;

static const char *layout_text(const opening *o)
{
    if (o->spatial == 3)
        return o->channels_last ? "(N, D, H, W, C) or (D, H, W, C)"
                                : "(N, C, D, H, W) or (C, D, H, W)";
    return o->channels_last ? "(N, H, W, C) or (H, W, C)" : "(N, C, H, W) or (C, H, W)";
}

static pcnn_status grow(opening *o, int n)
{
    const size_t need = (size_t)o->total + (size_t)n;
    if (need <= o->cap) return PCNN_OK;
    size_t cap = o->cap ? o->cap : 64;
    while (cap < need) cap *= 2;
    if (o->labels) {
        int32_t *l = mem_realloc(o->label_values, cap * sizeof *l);
        if (!l) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for %zu labels", cap);
        o->label_values = l;
    } else {
        float *t = mem_realloc(o->target_values, cap * (size_t)o->target_count * sizeof *t);
        if (!t) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for %zu targets", cap);
        o->target_values = t;
    }
    o->cap = cap;
    return PCNN_OK;
}

/* The input dataset of file `path`: its element type and shape against
 * the first file's; *n its sample count. */
static pcnn_status check_inputs(opening *o, int index, const char *path, hid_t did, int *n)
{
    char what[64], got[160], want[160], why[256];
    const hid_t type = H5Dget_type(did), space = H5Dget_space(did);
    const int elem = type < 0 ? -1 : h5_elem_of(type, what, sizeof what);
    hsize_t dims[8] = {0};
    const int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (rank > 8) {
        if (type >= 0) H5Tclose(type);
        H5Sclose(space);
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' has %d dimensions; expected %s", path,
                    o->inputs, rank, layout_text(o));
    }
    if (rank >= 0) H5Sget_simple_extent_dims(space, dims, NULL);
    if (type < 0 || space < 0 || rank < 0) h5_error_text(why, sizeof why);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (type < 0 || space < 0 || rank < 0)
        return FAIL(PCNN_ERR_CORRUPT, "%s: cannot read the type and shape of dataset '%s'%s",
                    path, o->inputs, why);
    if (elem < 0)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' holds %s; supported: " SUPPORTED,
                    path, o->inputs, what);
    if (rank != o->spatial + 1 && rank != o->spatial + 2)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' has shape %s; expected %s "
                    "(%s%s)", path, o->inputs, dims_text(dims, rank, got, sizeof got),
                    layout_text(o), o->spatial == 3 ? "volumes" : "images: "
                    "PCNN_HDF5_VOLUMES for 3D samples", o->channels_last ? ", channels last" : "");
    const int has_n = rank == o->spatial + 2;
    for (int k = has_n; k < rank; k++)
        if (dims[k] < 1 || dims[k] > INT_MAX)
            return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' has shape %s: a sample dimension "
                        "outside [1, INT_MAX]", path, o->inputs,
                        dims_text(dims, rank, got, sizeof got));
    if (index == 0) {
        o->elem = elem;
        o->rank = rank;
        o->has_n = has_n;
        memcpy(o->sample_dims, dims + has_n, (size_t)(rank - has_n) * sizeof *dims);
    } else {
        int same = elem == o->elem && rank == o->rank;
        for (int k = 0; same && k < rank - has_n; k++) same = dims[has_n + k] == o->sample_dims[k];
        if (!same) {
            hsize_t ref[6] = {0};
            memcpy(ref + o->has_n, o->sample_dims, (size_t)(o->rank - o->has_n) * sizeof *ref);
            if (o->has_n) ref[0] = (hsize_t)(o->first[1] - o->first[0]);
            return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' is %s %s but %s's is %s %s: the "
                        "files of a dataset must agree", path, o->inputs, data_elem_name(elem),
                        dims_text(dims, rank, got, sizeof got), o->first_path,
                        data_elem_name(o->elem), dims_text(ref, o->rank, want, sizeof want));
        }
    }
    const hsize_t count = has_n ? dims[0] : 1;
    if (count > (hsize_t)(INT_MAX - o->total))
        return FAIL(PCNN_ERR_CORRUPT, "%s: more than INT_MAX samples in all", path);
    /* A contiguous dataset never written has no storage: reading it would
     * give the fill value, silently. */
    const hid_t dcpl = H5Dget_create_plist(did);
    const int contiguous = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (contiguous && count > 0 && H5Dget_offset(did) == HADDR_UNDEF)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' holds no data (never written)", path,
                    o->inputs);
    H5Eclear2(H5E_DEFAULT);
    *n = (int)count;
    return PCNN_OK;
}

/* The targets of file `path`'s n samples, appended. */
static pcnn_status read_targets(opening *o, int index, const char *path, hid_t tid, int n)
{
    char got[160], why[256] = "", what[64] = "";
    const hid_t type = H5Dget_type(tid), space = H5Dget_space(tid);
    const H5T_class_t cls = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
    hsize_t dims[8] = {0};
    const int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (rank >= 0 && rank <= 8) H5Sget_simple_extent_dims(space, dims, NULL);
    const int elem = type < 0 ? -1 : h5_elem_of(type, what, sizeof what);
    if (rank < 0 || type < 0) h5_error_text(why, sizeof why);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (rank < 0 || rank > 8 || type < 0)
        return FAIL(PCNN_ERR_CORRUPT, "%s: cannot read the type and shape of dataset '%s'%s",
                    path, o->targets, rank > 8 ? ": more than 8 dimensions" : why);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' (the targets) holds %s; expected "
                    "integer labels or float targets", path, o->targets, what);
    (void)elem;
    const int labels = cls == H5T_INTEGER && !(o->flags & PCNN_HDF5_FLOAT_TARGETS);
    /* (N) or (N, K) with the samples' N; () or (K) for one sample. */
    const int lead = o->has_n;
    const int ok_rank = rank == lead || rank == lead + 1;
    hsize_t k = ok_rank && rank == lead + 1 ? dims[lead] : 1;
    if (!ok_rank || (lead && dims[0] != (hsize_t)n) || k < 1 || k > INT_MAX / 2 ||
        (labels && k != 1))
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' has shape %s; for %d sample%s of "
                    "'%s' expected %s%s", path, o->targets, dims_text(dims, rank, got, sizeof got),
                    n, n == 1 ? "" : "s", o->inputs,
                    lead ? (labels ? "(N,) labels" : "(N,) or (N, K)") : (labels ? "() (a "
                    "scalar label)" : "() or (K,)"),
                    labels ? " (integer labels: one per sample; PCNN_HDF5_FLOAT_TARGETS reads "
                    "them as float targets)" : "");
    if (index == 0) {
        o->labels = labels;
        o->target_count = labels ? 0 : (int)k;
    } else if (labels != o->labels || (!labels && (int)k != o->target_count)) {
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' holds %s but %s's holds %s: the files "
                    "of a dataset must agree", path, o->targets,
                    labels ? "integer labels" : "float targets", o->first_path,
                    o->labels ? "integer labels" : "float targets");
    }
    if (n == 0) return PCNN_OK;
    TRY(grow(o, n));
    herr_t err;
    if (labels) {
        long long *tmp = mem_alloc((size_t)n * sizeof *tmp);
        if (!tmp) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for %d labels", n);
        err = H5Dread(tid, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp);
        if (err < 0) h5_error_text(why, sizeof why);
        for (int i = 0; err >= 0 && i < n; i++) {
            if (tmp[i] < 0 || tmp[i] > INT32_MAX) {
                const long long bad = tmp[i];
                mem_free(tmp);
                return FAIL(PCNN_ERR_CORRUPT, "%s: label %lld of sample %d in dataset '%s' is "
                            "outside [0, %d]", path, bad, i, o->targets, INT32_MAX);
            }
            o->label_values[o->total + i] = (int32_t)tmp[i];
        }
        mem_free(tmp);
    } else {
        float *t = o->target_values + (size_t)o->total * (size_t)o->target_count;
        err = H5Dread(tid, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t);
        if (err < 0) h5_error_text(why, sizeof why);
        for (size_t i = 0; err >= 0 && i < (size_t)n * (size_t)o->target_count; i++)
            if (!isfinite(t[i]))
                return FAIL(PCNN_ERR_CORRUPT, "%s: target %zu of sample %zu in dataset '%s' "
                            "is %g", path, i % (size_t)o->target_count,
                            i / (size_t)o->target_count, o->targets, (double)t[i]);
    }
    if (err < 0)
        return FAIL(PCNN_ERR_CORRUPT, "%s: cannot read dataset '%s'%s", path, o->targets, why);
    return PCNN_OK;
}

/* A compact or contiguous dataset must store every byte its extent
 * declares: a damaged header declaring more makes HDF5 itself read past
 * its buffers (found by tests/hdf5/fuzz_hdf5.c under ASan).  Chunked data
 * may legitimately store less (compressed, or unwritten chunks read as the
 * fill value); but a dataset read whole into memory (`whole`: the targets)
 * is held to at most 1024 times what it stores, plus 1 MiB, before its
 * extent is allocated: a damaged header declaring 10^8 values per sample
 * would otherwise take gigabytes before HDF5 finds the file short. */
#define WHOLE_MAX_RATIO 1024.0

/* Without filters every written chunk stores exactly its bytes; a damaged
 * chunk record giving less makes HDF5 1.10 copy past the buffer it sized
 * from that record (H5VM_memcpyvv inside H5Dread, found by
 * tests/hdf5/fuzz_hdf5.c under ASan), so each chunk is looked up once at
 * open (a B-tree or index lookup each: about a microsecond).  Datasets of
 * more than CHUNKS_CHECKED chunks are checked on their first ones only. */
#define CHUNKS_CHECKED (1 << 20)
static bool chunks_whole(hid_t did, hid_t dcpl, hid_t space, size_t elem, char *why,
                         size_t size)
{
    hsize_t chunk[H5S_MAX_RANK], dims[H5S_MAX_RANK], at[H5S_MAX_RANK] = {0};
    const int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
    if (rank <= 0 || H5Sget_simple_extent_dims(space, dims, NULL) != rank) return true;
    hsize_t bytes = elem;
    for (int d = 0; d < rank; d++) {
        if (chunk[d] == 0) return true; /* HDF5 refuses such a layout itself */
        bytes *= chunk[d];
        if (dims[d] == 0) return true; /* no chunk at all */
    }
    for (long checked = 0; checked < CHUNKS_CHECKED; checked++) {
        /* By coordinate: H5Dget_chunk_storage_size answers the nominal size
         * of an unfiltered chunk, not what its record says. */
        hsize_t stored = 0;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(did, at, &mask, &addr, &stored) < 0) {
            H5Eclear2(H5E_DEFAULT);
            addr = HADDR_UNDEF;
        }
        /* Not written (no address): read as the fill value.  Written: whole,
         * an empty record included. */
        if (addr != HADDR_UNDEF && stored != bytes) {
            snprintf(why, size, "its chunk %ld stores %llu bytes, not the %llu of a chunk "
                     "without filters", checked, (unsigned long long)stored,
                     (unsigned long long)bytes);
            return false;
        }
        int d = rank - 1; /* the next chunk, last dimension fastest */
        while (d >= 0 && (at[d] += chunk[d]) >= dims[d]) at[d--] = 0;
        if (d < 0) break;
    }
    return true;
}

static pcnn_status check_storage(hid_t did, const char *path, const char *name, bool whole)
{
    const hid_t dcpl = H5Dget_create_plist(did), type = H5Dget_type(did);
    const hid_t space = H5Dget_space(did);
    const H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    const size_t elem = type < 0 ? 0 : H5Tget_size(type);
    const hssize_t count = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    const hsize_t stored = H5Dget_storage_size(did);
    char why[160] = "";
    const bool whole_chunks = layout != H5D_CHUNKED || space < 0 || elem == 0 ||
                              H5Pget_nfilters(dcpl) != 0 ||
                              chunks_whole(did, dcpl, space, elem, why, sizeof why);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    const double declared = count < 0 ? -1.0 : (double)count * (double)elem;
    if (!whole_chunks)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s': %s (a damaged chunk index)", path,
                    name, why);
    if (layout == H5D_CHUNKED || layout == H5D_VIRTUAL) {
        if (whole && declared > WHOLE_MAX_RATIO * (double)stored + 1048576.0)
            return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' declares %.0f bytes but stores "
                        "only %llu (more than %.0f times less: a damaged header, or chunks "
                        "never written)", path, name, declared, (unsigned long long)stored,
                        WHOLE_MAX_RATIO);
        return PCNN_OK;
    }
    if (layout == H5D_LAYOUT_ERROR || elem == 0 || count < 0 || (double)stored < declared)
        return FAIL(PCNN_ERR_CORRUPT, "%s: dataset '%s' declares %.0f bytes but stores %llu "
                    "(a damaged header or truncated data)", path, name, declared,
                    (unsigned long long)stored);
    return PCNN_OK;
}

static pcnn_status open_one(opening *o, int index, const char *path)
{
    char why[256];
    if (!h5_regular_file(path, why, sizeof why))
        return FAIL(PCNN_ERR_IO, "cannot open %s: %s", path, why);
    const hid_t fapl = h5_fapl(&o->io->meta_bytes, &o->io->meta_bytes);
    const hid_t fid = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    /* Every HDF5 call clears the error stack: read it first. */
    if (fid < 0) h5_error_text(why, sizeof why);
    if (fapl >= 0) H5Pclose(fapl);
    if (fid < 0)
        return FAIL(PCNN_ERR_CORRUPT, "cannot open %s as an HDF5 file (not one, truncated or "
                    "damaged)%s", path, why);
    pcnn_status st = PCNN_OK;
    const hid_t did = H5Dopen2(fid, o->inputs, H5P_DEFAULT);
    int n = 0;
    if (did < 0)
        st = FAIL(PCNN_ERR_CORRUPT, "%s: no dataset '%s' (the inputs)%s", path, o->inputs,
                  h5_error_text(why, sizeof why));
    if (st == PCNN_OK) st = check_storage(did, path, o->inputs, false);
    if (st == PCNN_OK) st = check_inputs(o, index, path, did, &n);
    const hid_t tid = st == PCNN_OK ? H5Dopen2(fid, o->targets, H5P_DEFAULT) : -1;
    if (st == PCNN_OK && tid < 0)
        st = FAIL(PCNN_ERR_CORRUPT, "%s: no dataset '%s' (the targets)%s", path, o->targets,
                  h5_error_text(why, sizeof why));
    if (st == PCNN_OK) st = check_storage(tid, path, o->targets, true);
    if (st == PCNN_OK) st = read_targets(o, index, path, tid, n);
    if (tid >= 0) H5Dclose(tid);
    if (did >= 0) H5Dclose(did);
    H5Fclose(fid);
    H5Eclear2(H5E_DEFAULT);
    if (st == PCNN_OK) {
        o->first[index + 1] = o->first[index] + n;
        o->total += n;
    }
    return st;
}

/* The dataset of the opened files (their paths moved into it). */
static pcnn_status build(opening *o, path_list *l, volume_io *io, pcnn_dataset **out)
{
    const int cl = o->channels_last, three = o->spatial == 3;
    const hsize_t *s = o->sample_dims;
    const int c = (int)(cl ? s[o->spatial] : s[0]);
    const int depth = three ? (int)s[cl ? 0 : 1] : 1;
    const int h = (int)s[cl ? o->spatial - 2 : o->spatial - 1];
    const int w = (int)s[cl ? o->spatial - 1 : o->spatial];
    if (!dataset_shape_fits(c, depth, h, w))
        return FAIL(PCNN_ERR_SHAPE, "%s: a sample of (%d, %d, %d, %d) exceeds INT_MAX floats",
                    o->first_path, c, depth, h, w);
    pcnn_dataset *d = mem_calloc(1, sizeof *d);
    volume_source *v = volume_source_new(o->total, c, depth, h, w);
    h5_source *hs = mem_calloc(1, sizeof *hs);
    char *name = mem_alloc(strlen(o->inputs) + 1);
    if (d) d->order = mem_calloc((size_t)o->total, sizeof *d->order);
    if (!d || !v || !hs || !name || !d->order) {
        mem_free(name);
        mem_free(hs);
        volume_source_free(v);
        dataset_free(d);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot allocate the index of %d samples", o->total);
    }
    /* The counters of the opening move into the dataset. */
    mem_free(v->io);
    v->io = io;
    strcpy(name, o->inputs);
    hs->files = l->count;
    hs->paths = l->paths;
    l->paths = NULL;
    l->count = 0;
    hs->first = o->first;
    o->first = NULL;
    hs->inputs = name;
    hs->spatial = o->spatial;
    hs->channels_last = cl;
    hs->has_n = o->has_n;
    hs->rank = o->rank;
    memcpy(hs->sample_dims, o->sample_dims, sizeof hs->sample_dims);
    hs->elem = o->elem;
    v->h5 = hs;
    v->dtype = PCNN_DTYPE_F32;
    v->elem = 4;
    d->n = o->total;
    d->c = c;
    d->d = depth;
    d->h = h;
    d->w = w;
    d->sample_floats = (size_t)c * (size_t)depth * (size_t)h * (size_t)w;
    d->elem = o->elem;
    d->vol = v;
    d->labels = o->label_values;
    d->targets = o->target_values;
    d->target_count = o->target_count;
    o->label_values = NULL;
    o->target_values = NULL;
    for (int i = 0; i < d->n; i++) d->order[i] = i;
    dataset_finish(d);
    *out = d;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_open_hdf5(const char *paths, const char *inputs,
                                            const char *targets, int flags, pcnn_dataset **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    REQUIRE_PTR(paths);
    REQUIRE((flags & ~KNOWN_FLAGS) == 0, PCNN_ERR_INVALID_ARGUMENT,
            "flags 0x%x: unknown bits 0x%x (PCNN_HDF5_*)", (unsigned)flags,
            (unsigned)(flags & ~KNOWN_FLAGS));
    opening o = {0};
    o.inputs = inputs ? inputs : "full";
    o.targets = targets ? targets : "unitPar";
    REQUIRE(o.inputs[0] && o.targets[0], PCNN_ERR_INVALID_ARGUMENT,
            "an empty dataset name (NULL takes the default)");
    o.flags = flags;
    o.spatial = flags & PCNN_HDF5_VOLUMES ? 3 : 2;
    o.channels_last = (flags & PCNN_HDF5_CHANNELS_LAST) != 0;
    path_list l = {0, NULL};
    TRY(expand_paths(paths, &l));
    o.io = mem_calloc(1, sizeof *o.io);
    o.first = mem_calloc((size_t)l.count + 1, sizeof *o.first);
    pcnn_status st = o.io && o.first ? PCNN_OK
                                     : FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for %d "
                                            "files", l.count);
    o.first_path = l.count ? l.paths[0] : "";
    h5_session session;
    h5_enter(&session);
    for (int i = 0; i < l.count && st == PCNN_OK; i++) st = open_one(&o, i, l.paths[i]);
    h5_leave(&session);
    if (st == PCNN_OK && o.total == 0)
        st = FAIL(PCNN_ERR_CORRUPT, "the files hold no sample (%s: dataset '%s' has N = 0)",
                  o.first_path, o.inputs);
    if (st == PCNN_OK) st = build(&o, &l, o.io, out);
    if (st != PCNN_OK) mem_free(o.io); /* else the dataset's now */
    mem_free(o.first);
    mem_free(o.label_values);
    mem_free(o.target_values);
    path_list_free(&l);
    return st;
}
