"""Batch-norm running statistics through a checkpoint file.

The C API exposes running statistics only inside checkpoints
(pcnn_net_save / pcnn_net_load; docs/checkpoint-format.md, section
BN_STATS), so state_dict reads them from a file the network saves, and
load_state_dict writes them by patching that section (and its CRCs) of a
fresh save of the same network and loading it back: parameters, optimizer
state, options and step come back unchanged from the same network.
"""
import os
import struct
import tempfile
import zlib

import numpy as np

from .errors import CorruptError

_BN_STATS = 6
_META = 1


def _sections(raw):
    if raw[:8] != b"PCNNCKPT":
        raise CorruptError("checkpoint: bad magic")
    header_size, count = struct.unpack_from("<II", raw, 12)
    table = {}
    for i in range(count):
        sid, _flags, off, length, _crc, _res = struct.unpack_from("<IIQQII", raw, 32 + 32 * i)
        table[sid] = (i, off, length)
    return header_size, table


def read_bn_stats(raw):
    """(ranks, per-rank float32 array of bn_floats) from checkpoint bytes;
    (0, None) when the network has no batch norm."""
    _, table = _sections(raw)
    _, meta_off, _ = table[_META]
    ranks = struct.unpack_from("<I", raw, meta_off + 20)[0]
    bn_floats = struct.unpack_from("<Q", raw, meta_off + 48)[0]
    if _BN_STATS not in table:
        return ranks, None
    _, off, length = table[_BN_STATS]
    stats = np.frombuffer(raw, "<f4", ranks * bn_floats, off).astype(np.float32)
    return ranks, stats.reshape(ranks, bn_floats)


def write_bn_stats(raw, per_rank):
    """Checkpoint bytes with every saving rank's BN_STATS set to per_rank
    (float32, bn_floats values), section and header CRCs recomputed."""
    raw = bytearray(raw)
    header_size, table = _sections(raw)
    index, off, length = table[_BN_STATS]
    ranks = length // (4 * per_rank.size)
    body = np.tile(np.asarray(per_rank, "<f4"), ranks).tobytes()
    if len(body) != length:
        raise CorruptError("checkpoint: BN_STATS holds %d bytes, %d expected"
                           % (length, len(body)))
    raw[off:off + length] = body
    struct.pack_into("<I", raw, 32 + 32 * index + 24, zlib.crc32(body) & 0xFFFFFFFF)
    struct.pack_into("<I", raw, header_size - 4,
                     zlib.crc32(bytes(raw[:header_size - 4])) & 0xFFFFFFFF)
    return bytes(raw)


class TempCheckpoint:
    """A temporary directory holding one checkpoint path; removed on exit."""

    def __enter__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="pcnn-state-")
        self.path = os.path.join(self._dir.name, "state.ckpt")
        return self

    def __exit__(self, *exc):
        self._dir.cleanup()
        return False
