"""Kafka's key hash (murmur2, as the Java client's ``Utils.murmur2``) of many keys at once, with numpy.

A keyed record goes to partition ``(murmur2(key) & 0x7fffffff) % partitions``
in every Kafka client, so a document's verdict lands where any producer
would put its id. kafka-python computes that hash in pure Python for every
record it sends (about 4 µs for an id): a twentieth of the stage process's
time, on the thread every other step waits for. Keys of one length are
hashed here together, column by column of their 4-byte blocks, so a batch
of ids costs a few numpy operations per block.

Keys come in any mix of lengths (a hostile input can make every id of a batch
a different length): a length shared by fewer than :data:`_BULK_KEYS` keys
is hashed one key at a time by kafka-python's own function instead, so a
batch never costs much more than kafka-python alone would.
"""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from kafka.partitioner.default import murmur2 as murmur2_of_one

_SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)
#: Fewest keys of one length hashed together (fewer: one at a time, where numpy's overhead is the larger cost).
_BULK_KEYS = 8


def murmur2_many(keys: Sequence[bytes]) -> npt.NDArray[np.uint32]:
    """``murmur2(key)`` of each key, as kafka-python's ``murmur2`` gives it (an unsigned 32-bit value)."""
    hashes = np.empty(len(keys), dtype=np.uint32)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    values, counts = np.unique(lengths, return_counts=True)
    for length, count in zip(values.tolist(), counts.tolist(), strict=True):
        rows = np.flatnonzero(lengths == length)
        if count >= _BULK_KEYS:
            hashes[rows] = _murmur2_of_length([keys[i] for i in rows.tolist()], length)
        else:
            hashes[rows] = [murmur2_of_one(keys[i]) for i in rows.tolist()]
    return hashes


def partitions_of(keys: Sequence[bytes], partitions: int) -> npt.NDArray[np.int64]:
    """The partition Kafka's default partitioner gives each key, for a topic of ``partitions`` partitions."""
    return (murmur2_many(keys) & np.uint32(0x7FFFFFFF)).astype(np.int64) % partitions


def _murmur2_of_length(keys: list[bytes], length: int) -> npt.NDArray[np.uint32]:
    """murmur2 of keys that are all ``length`` bytes long; numpy's uint32 arithmetic wraps as Java's int does."""
    data = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), length)
    h = np.full(len(keys), (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    whole = length // 4
    blocks = np.ascontiguousarray(data[:, : 4 * whole]).view("<u4")
    for column in range(whole):
        k = blocks[:, column] * _M
        k ^= k >> np.uint32(24)
        k *= _M
        h *= _M
        h ^= k
    tail = data[:, 4 * whole :].astype(np.uint32)
    extra = length % 4
    if extra >= 3:
        h ^= tail[:, 2] << np.uint32(16)
    if extra >= 2:
        h ^= tail[:, 1] << np.uint32(8)
    if extra >= 1:
        h ^= tail[:, 0]
        h *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h
