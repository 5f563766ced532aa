"""Failures raise: library statuses become pcnn exceptions carrying the
library's message; the binding's own checks refuse bad arrays, closed
handles and foreign layers before anything reaches C."""
import gzip
import threading

import numpy as np
import pytest

import pcnn
import models
from pcnn import _loader


@pytest.fixture
def net():
    with models.build("tiny", 4) as n:
        yield n


def small_unfinalized():
    n = pcnn.Net()
    y = n.dense(n.input(2, 3, 3), 4)
    return n, y


def test_shape_error_carries_the_library_message():
    n, _ = small_unfinalized()
    with n:
        with pytest.raises(pcnn.ShapeError) as e:
            n.conv2d(n.layers[0], 4, 5)
        assert len(n.layers) == 2  # the failed layer was not added
    err = e.value
    assert err.status == pcnn.Status.ERR_SHAPE == 3
    assert err.message.startswith("pcnn_conv2d: ") and "kernel 5" in err.message
    assert err.status_name == "shape mismatch" and "[shape mismatch]" in str(err)
    assert isinstance(err, ValueError) and isinstance(err, pcnn.PcnnError)


def test_wrong_order_of_calls():
    n, y = small_unfinalized()
    with n:
        with pytest.raises(pcnn.InvalidStateError, match=r"^pcnn_net_train_step: "):
            n.train_step(np.zeros((1, 2, 3, 3), np.float32), [0])
        with pytest.raises(pcnn.InvalidStateError, match="no loss"):
            n.finalize(2)
        n.set_loss(y)
        n.finalize(2)
        with pytest.raises(pcnn.InvalidStateError, match="finalized"):
            n.relu(y)
        with pytest.raises(pcnn.InvalidStateError, match="before finalize"):
            n.set_option("seed", 3)


def test_invalid_values_numeric_errors_and_batch_limits(net):
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(pcnn.InvalidArgumentError, match=r"label 7 of sample 1 is outside \[0, 4\)"):
        net.train_step(x, [0, 7, 0, 0])
    bad = x.copy()
    bad[2, 1] = np.inf
    with pytest.raises(pcnn.NumericError, match="NaN or Inf") as e:
        net.train_step(bad, [0, 1, 2, 3])
    assert isinstance(e.value, ArithmeticError)
    with pytest.raises(pcnn.InvalidArgumentError, match=r"batch of 5 samples: must be in \[1, 4\]"):
        net.train_step(np.zeros((5, 4), np.float32), [0] * 5)
    with pytest.raises(pcnn.InvalidArgumentError, match="momentum 2 must be in"):
        net.set_option("momentum", 2)
    assert net.step == 0  # nothing above trained


def test_file_errors(tmp_path):
    missing = str(tmp_path / "nope.gz")
    with pytest.raises(pcnn.FileError, match="nope.gz") as e:
        pcnn.Dataset.load_idx(missing, missing)
    assert isinstance(e.value, OSError) and e.value.status == 10
    bad = tmp_path / "bad-images.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x08\x03not an idx file")
    with pytest.raises(pcnn.CorruptError, match="pcnn_dataset_load_idx"):
        pcnn.Dataset.load_idx(str(bad), str(bad))


def test_bad_arrays_are_refused_with_clear_messages(net):
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(TypeError, match="expected real numbers.*complex128"):
        net.train_step(x.astype(complex), [0, 1, 2, 3])
    with pytest.raises(TypeError, match="labels: expected integer class indices.*float64"):
        net.train_step(x, np.zeros(4))
    with pytest.raises(pcnn.ShapeError, match=r"expected \(n, C, H, W\) = \(n, 4, 1, 1\), or \(n, 4\)"):
        net.train_step(np.zeros((4, 5), np.float32), [0, 1, 2, 3])
    with pytest.raises(pcnn.ShapeError, match="3 labels for 4 samples"):
        net.train_step(x, [0, 1, 2])
    with pytest.raises(pcnn.ShapeError, match="outside the int32 range"):
        net.train_step(x, np.array([0, 1, 2, 2 ** 40]))
    with pytest.raises(TypeError, match="writable C-contiguous float32.*float64"):
        net.get_params(np.zeros(net.num_params))
    with pytest.raises(TypeError, match="read-only"):
        ro = np.zeros(net.num_params, np.float32)
        ro.flags.writeable = False
        net.get_params(ro)
    with pytest.raises(pcnn.ShapeError, match="out holds 3 values, 20 needed"):
        net.get_params(np.zeros(3, np.float32))
    with pytest.raises(pcnn.ShapeError, match="pcnn_net_set_params"):
        net.set_params(np.zeros(3, np.float32))
    with pytest.raises(pcnn.ShapeError, match="out holds"):
        net.predict(x, out=np.zeros((4, 3), np.float32))
    # a read-only but otherwise fine input is used in place
    ro = x.copy()
    ro.flags.writeable = False
    assert net.predict(ro).shape == (4, 4)


def test_enum_arguments(net):
    with pytest.raises(pcnn.InvalidArgumentError,
                       match=r"unknown option 'lr' \(one of: learning_rate"):
        net.set_option("lr", 0.1)
    with pytest.raises(TypeError, match="expected a pcnn.Time"):
        net.time(2.5)
    with pytest.raises(pcnn.InvalidArgumentError, match="pcnn_net_set_option"):
        net.set_option(999, 1.0)  # unknown to the binding: the library judges
    net.set_option(pcnn.Option.LEARNING_RATE, 0.2)
    net.set_option("Learning-Rate", 0.3)
    assert net.get_option(0) == pytest.approx(0.3)


def test_closed_handles_and_foreign_layers():
    a, ya = small_unfinalized()
    b, yb = small_unfinalized()
    with pytest.raises(pcnn.InvalidArgumentError, match="belongs to another network"):
        a.relu(yb)
    with pytest.raises(TypeError, match="must be a pcnn.Layer"):
        a.relu("dense")
    a.close()
    a.close()  # idempotent
    assert a.closed and a.layers == []
    with pytest.raises(pcnn.InvalidStateError, match="this Net is closed"):
        a.relu(ya)
    with pytest.raises(pcnn.InvalidStateError, match=r"layer 1 \(dense\): its network is closed"):
        ya.output_shape
    with pytest.raises(pcnn.InvalidStateError, match="closed"):
        with a:
            pass
    # a layer does not keep its network alive
    orphan = pcnn.Net().input(1, 2, 2)
    with pytest.raises(pcnn.InvalidStateError, match="its network is closed"):
        orphan.num_params
    b.close()
    d = pcnn.Dataset(np.zeros((2, 3)), labels=[0, 1])
    d.close()
    with pytest.raises(pcnn.InvalidStateError, match="this Dataset is closed"):
        len(d)


def test_dataset_argument_errors():
    with pytest.raises(pcnn.InvalidArgumentError, match="exactly one of labels and targets"):
        pcnn.Dataset(np.zeros((2, 3)))
    with pytest.raises(pcnn.InvalidArgumentError, match="label -1 of sample 1 < 0"):
        pcnn.Dataset(np.zeros((2, 3)), labels=[0, -1])
    with pytest.raises(pcnn.ShapeError, match="3 labels for 2 samples"):
        pcnn.Dataset(np.zeros((2, 3)), labels=[0, 1, 1])
    with pcnn.Dataset(np.zeros((5, 4)), labels=[0, 1, 2, 3, 0]) as d, \
            models.build("mix", 4) as n:
        with pytest.raises(pcnn.ShapeError, match=r"pcnn_net_train_epoch: dataset samples are"):
            n.train_epoch(d, 4)
        with pytest.raises(pcnn.ShapeError, match=r"Net.train_epoch: dataset samples are"):
            n.train_epoch(d, 4, callback=print)
        with pytest.raises(pcnn.InvalidArgumentError, match="start 9 outside"):
            d.batch(9, 1)


def test_the_message_is_the_calling_threads():
    n, _ = small_unfinalized()
    errors = []

    def fail():
        try:
            pcnn.Dataset.load_idx("/nonexistent-thread-file", "/x")
        except pcnn.FileError as e:
            errors.append(e.message)

    with n:
        t = threading.Thread(target=fail)
        t.start()
        t.join()
        with pytest.raises(pcnn.InvalidStateError) as e:
            n.finalize(2)
    assert "nonexistent-thread-file" in errors[0]
    assert "nonexistent" not in e.value.message


def test_loader_lists_where_it_looked(tmp_path, monkeypatch):
    with pytest.raises(pcnn.LibraryNotFoundError) as e:
        _loader.load(str(tmp_path / "libpcnn.so"))
    assert "explicit path: %s (no such file)" % (tmp_path / "libpcnn.so") in str(e.value)
    not_a_lib = tmp_path / "libpcnn.so.0"
    not_a_lib.write_text("garbage")
    monkeypatch.setenv("PCNN_LIBRARY", str(not_a_lib))
    with pytest.raises(pcnn.LibraryNotFoundError,
                       match=r"PCNN_LIBRARY: .*libpcnn.so.0 \(.*file too short\)"):
        _loader.load()
    monkeypatch.delenv("PCNN_LIBRARY")
    where = [origin for origin, _ in _loader.candidates()]
    assert where[0] == "build tree" and "installed prefix" in where
    assert where[-1] == "dynamic loader search"


def test_library_cannot_be_switched_once_in_use(tmp_path):
    with pcnn.Net():
        pass
    assert pcnn.load_library(pcnn.library_path()) == pcnn.library_path()
    other = tmp_path / "libpcnn.so"
    other.write_bytes(b"")
    with pytest.raises(pcnn.LibraryError, match="already in use"):
        pcnn.load_library(str(other))


def test_memory_parts_add_up(net):
    parts = net.memory_parts
    assert list(parts) == [p.name.lower() for p in pcnn.MemoryPart]
    assert sum(parts.values()) == net.memory_bytes
    assert parts["parameters"] == 2 * 4 * net.num_params
    assert parts["activations"] > 0 and parts["communication"] == 0
