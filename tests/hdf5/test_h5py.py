"""HDF5 files written by h5py, read by libpcnn through the Python binding:
the values agree bit for bit with numpy's astype(float32) for every element
type and layout; the CosmoFlow layout (one channels-last int16 universe
per file, 'full' and 'unitPar') with the log1p transform; and, under
mpiexec -n 2 and 3, Net.fit / Net.evaluate on datasets that differ between
ranks raise MismatchError on every rank."""
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bindings", "python"))
import pcnn  # noqa: E402

TYPES = ["int8", "int16", "int32", "uint8", "uint16", "float16", "float32", "float64"]


def values(dtype, shape, rng):
    if np.dtype(dtype).kind == "f":
        v = rng.standard_normal(shape) * 100
        if dtype == "float16":
            v.flat[:3] = [65504.0, 6.1035e-05, 6e-08]  # largest, normal and subnormal
        return v.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def same_bits(a, b):
    return a.dtype == np.float32 and a.shape == b.shape and \
        np.array_equal(a.view(np.uint32), b.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("layout", ["contiguous", "chunked-gzip"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_bit_for_bit(tmp_path, dtype, layout, channels_last):
    rng = np.random.default_rng(TYPES.index(dtype))
    x = values(dtype, (4, 3, 5, 6, 7), rng)           # N, C, D, H, W
    t = rng.standard_normal((4, 2)).astype(np.float32)
    disk = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if channels_last else x
    kw = {"chunks": (1,) + disk.shape[1:3] + (3, disk.shape[4]), "compression": "gzip"} \
        if layout != "contiguous" else {}
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("full", data=disk, **kw)
        f["unitPar"] = t
    ds = pcnn.open_hdf5(str(tmp_path / "f.h5"), channels_last=channels_last)
    assert len(ds) == 4 and ds.sample_shape == (3, 5, 6, 7) and ds.target_count == 2
    got, tg = ds.batch(0, 4)
    assert same_bits(got, x) and np.array_equal(tg, t)
    box, _ = ds.batch_box(1, 2, box_start=(1, 2, 3), box_count=(3, 3, 4))
    assert same_bits(box, x[1:3, :, 1:4, 2:5, 3:7])
    data_bytes, meta_bytes = ds.io_bytes()
    if layout == "contiguous":  # exactly the elements asked for
        assert data_bytes == (x.size + box.size) * x.dtype.itemsize
    assert meta_bytes > 0
    ds.close()


def test_cosmoflow_layout(tmp_path):
    """Universes as published: (D, H, W, 4) int16 counts per file, 'unitPar'
    (4,) float32; log(1 + counts) as read, no copy."""
    rng = np.random.default_rng(7)
    xs = []
    for k in range(3):
        u = rng.poisson(3.0, size=(16, 16, 16, 4)).astype(np.int16)
        xs.append(u)
        with h5py.File(tmp_path / ("univ_%d.h5" % k), "w") as f:
            f["full"] = u
            f["unitPar"] = rng.standard_normal(4).astype(np.float32)
    ds = pcnn.open_hdf5(str(tmp_path / "univ_*.h5"), channels_last=True)
    assert len(ds) == 3 and ds.sample_shape == (4, 16, 16, 16) and ds.target_count == 4
    ds.set_transform(log1p=True)
    ds.set_prefetch(1)
    got, _ = ds.batch(0, 3)
    want = np.log1p(np.stack([np.moveaxis(u, -1, 0) for u in xs]).astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
    ds.close()


def test_errors_and_arguments(tmp_path):
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["full"] = np.zeros((2, 1, 4, 4), np.uint8)
        f["lab"] = np.array([1, 0], np.int64)
        f["s"] = np.array([b"text", b"more"])
    ds = pcnn.open_hdf5(str(tmp_path / "f.h5"), targets="lab", volumes=False)
    assert ds.has_labels and ds.sample_shape == (1, 4, 4)
    ds.close()
    with pytest.raises(pcnn.CorruptError, match="no dataset 'unitPar'"):
        pcnn.open_hdf5(str(tmp_path / "f.h5"), volumes=False)
    with pytest.raises(pcnn.CorruptError, match="string"):
        pcnn.open_hdf5(str(tmp_path / "f.h5"), inputs="s", targets="lab", volumes=False)
    with pytest.raises(pcnn.FileError, match="not a regular file"):
        pcnn.open_hdf5(str(tmp_path), volumes=False)
    # Targets declaring 10^8 floats per sample in chunks never written: refused
    # before their 800 MB are allocated.
    with h5py.File(tmp_path / "big.h5", "w") as f:
        f["full"] = np.zeros((2, 1, 4, 4), np.uint8)
        f.create_dataset("unitPar", shape=(2, 10 ** 8), dtype="f4", chunks=(1, 1 << 20))
    with pytest.raises(pcnn.CorruptError, match="declares 800000000 bytes but stores only 0"):
        pcnn.open_hdf5(str(tmp_path / "big.h5"), volumes=False)
    with pytest.raises(pcnn.InvalidArgumentError):
        pcnn.open_hdf5([], volumes=False)
    with pytest.raises(pcnn.InvalidArgumentError):
        pcnn.open_hdf5(str(tmp_path / "f.h5"), inputs="", volumes=False)


@pytest.mark.parametrize("np_", [2, 3])
def test_mismatch_under_mpi(tmp_path, np_):
    launcher = os.environ.get("PCNN_MPIEXEC")
    if not launcher:
        pytest.skip("no MPI launcher")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([launcher, "-n", str(np_), sys.executable,
                        os.path.join(HERE, "h5py_mismatch_worker.py"), str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    for k in range(np_):
        assert open(tmp_path / ("rank%d.txt" % k)).read() == "ok", r.stdout + r.stderr


@pytest.mark.parametrize("np_", [2, 3])
def test_sharded_under_mpi(tmp_path, np_):
    """Sharded fit and evaluate on uneven shards equal the unsharded run."""
    launcher = os.environ.get("PCNN_MPIEXEC")
    if not launcher:
        pytest.skip("no MPI launcher")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([launcher, "-n", str(np_), sys.executable,
                        os.path.join(HERE, "sharded_worker.py"), str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    for k in range(np_):
        assert open(tmp_path / ("rank%d.txt" % k)).read() == "ok", r.stdout + r.stderr
