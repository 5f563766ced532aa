"""File-backed volumes through the binding (pcnn/volumes.py): .npy and raw
files behind a manifest give the same batches, boxes and training losses as
the same arrays in memory; malformed manifests raise CorruptError."""
import numpy as np
import pytest

import pcnn
from pcnn.volumes import batch_box, open_volumes, write_volume_manifest

SHAPE = (2, 6, 5, 4)


@pytest.fixture
def volumes(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6,) + SHAPE).astype(np.float32)
    t = rng.uniform(-1, 1, (6, 2)).astype(np.float32)
    entries = []
    for k in range(6):
        p = tmp_path / ("v%d.%s" % (k, "npy" if k % 2 else "raw"))
        if k % 2:
            np.save(p, x[k].astype(np.float64))
        else:
            x[k].astype(np.float64).tofile(p)
        entries.append((p, t[k]))
    write_volume_manifest(tmp_path / "m.txt", entries)
    return tmp_path / "m.txt", x, t


def test_batches_and_boxes_match_memory(volumes):
    manifest, x, t = volumes
    files = open_volumes(manifest, SHAPE, targets=2, dtype="float64")
    mem = pcnn.Dataset(x, targets=t)
    assert len(files) == 6 and files.sample_shape == SHAPE
    a, ta = files.batch(1, 4)
    np.testing.assert_array_equal(a, x[1:5])
    np.testing.assert_array_equal(ta, t[1:5])
    b, _ = files.batch_box(2, 3, (1, 2, 0), (4, 3, 3))
    np.testing.assert_array_equal(b, x[2:5, :, 1:5, 2:5, 0:3])
    c, _ = batch_box(mem, 2, 3, (1, 2, 0), (4, 3, 3))
    np.testing.assert_array_equal(c, b)
    files.set_prefetch(2)
    for s in range(0, 6, 2):
        np.testing.assert_array_equal(files.batch(s, 2)[0], x[s:s + 2])
    with pytest.raises(pcnn.InvalidArgumentError):
        files.batch_box(0, 1, (0, 0, 0), (7, 5, 4))
    files.close()
    mem.close()


def test_malformed_manifest_names_the_line(volumes, tmp_path):
    manifest, _, _ = volumes
    bad = tmp_path / "bad.txt"
    bad.write_text(manifest.read_text() + "v0.raw 1\n")
    with pytest.raises(pcnn.CorruptError, match="line 7"):
        open_volumes(bad, SHAPE, targets=2, dtype="float64")
    with pytest.raises(pcnn.CorruptError, match="v0.raw has 1920 bytes"):
        open_volumes(manifest, (2, 6, 5, 5), targets=2, dtype="float64")


def test_training_from_files_equals_memory(volumes):
    manifest, x, t = volumes
    losses = []
    for data in (pcnn.Dataset(x, targets=t), open_volumes(manifest, SHAPE, 2, "float64")):
        with pcnn.Net(seed=1) as net:
            v = net.input3d(*SHAPE) if hasattr(net, "input3d") else None
            if v is None:
                pytest.skip("this binding has no input3d")
            v = net.conv3d(v, 3, 3, 1, 1)
            v = net.flatten(v)
            v = net.dense(v, 2)
            net.set_loss(v, pcnn.Loss.MSE)
            net.finalize(3)
            losses.append([net.train_epoch(data, 3) for _ in range(2)])
        data.close()
    assert losses[0] == losses[1]


def test_manifest_writer_refuses_before_writing_and_replaces_whole(volumes, tmp_path):
    """A refused entry left an existing 6-line manifest truncated; a name
    starting with '#' became a comment and its sample vanished."""
    manifest, x, t = volumes
    before = manifest.read_text()
    assert len(before.splitlines()) == 6
    spaced = tmp_path / "a b.npy"
    np.save(spaced, x[0].astype(np.float64))
    with pytest.raises(pcnn.InvalidArgumentError, match="contains a space"):
        write_volume_manifest(manifest, [(tmp_path / "v1.npy", t[1]), (spaced, t[0])])
    assert manifest.read_text() == before
    hashed = tmp_path / "#v.npy"
    np.save(hashed, x[0].astype(np.float64))
    with pytest.raises(pcnn.InvalidArgumentError, match="comment"):
        write_volume_manifest(manifest, [(tmp_path / "v1.npy", t[1]), (hashed, t[0])])
    assert manifest.read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".manifest.")]
    write_volume_manifest(manifest, [(tmp_path / "v1.npy", t[1])])
    assert len(manifest.read_text().splitlines()) == 1
    assert len(open_volumes(manifest, SHAPE, targets=2, dtype="float64")) == 1
