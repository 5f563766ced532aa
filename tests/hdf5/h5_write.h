/* Writing the test files with HDF5's C API (the library only reads):
 * a dataset of any rank and element type, contiguous or chunked. */
#ifndef PCNN_TESTS_H5_WRITE_H
#define PCNN_TESTS_H5_WRITE_H

#include <hdf5.h>

/* Write `values` (mem_type elements, C order, dims[0..rank)) as dataset
 * `name` of file_type into the open file; chunk NULL: contiguous.
 * Returns 0 on success. */
static inline int h5w_dataset(hid_t file, const char *name, hid_t file_type, hid_t mem_type,
                              int rank, const hsize_t *dims, const hsize_t *chunk,
                              const void *values)
{
    const hid_t space = H5Screate_simple(rank, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunk) H5Pset_chunk(dcpl, rank, chunk);
    const hid_t d = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    const herr_t w = d < 0 ? -1 : H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d < 0 || w < 0;
}

#endif
