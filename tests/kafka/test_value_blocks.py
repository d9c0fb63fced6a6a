"""Record values kept compressed in blocks: every value comes back as added, and the budget is the memory."""

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.kafka.block_spool import BlockSpool
from stream_dedup.kafka.messages import pointer_of
from stream_dedup.kafka.value_blocks import ValueBlocks, block_compressor, pack_blocks
from tests.real_text import stdlib_paragraphs


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**48 - 1) | st.integers(0, 40), st.binary(max_size=40)))
    ),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50))),
)
def test_every_value_comes_back_as_first_added(
    batches: list[list[tuple[int, int, bytes]]], probes: list[tuple[int, int]]
) -> None:
    blocks = ValueBlocks(1 << 30)
    model: dict[tuple[int, int], bytes] = {}
    for batch in batches:
        blocks.add(batch)
        for partition, offset, value in batch:
            model.setdefault((partition, offset), value)
    for key in [*model, *probes]:
        assert blocks.get(*key) == model.get(key)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.tuples(st.integers(0, 3), st.integers(0, 80)), st.binary(max_size=60), min_size=1),
    st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 1000), max_size=40)), max_size=8),
)
def test_blocks_made_elsewhere_and_values_added_here_both_come_back(
    topic: dict[tuple[int, int], bytes], batches: list[tuple[bool, list[int]]]
) -> None:
    """As a worker keeps what its signers packed, and a shard what it read: the same record read again included."""
    records = sorted(topic)
    blocks = ValueBlocks(1 << 30)
    added: set[tuple[int, int]] = set()
    for packed_elsewhere, picks in batches:
        batch = {records[i % len(records)] for i in picks}
        if packed_elsewhere:
            items = [(pointer_of(*key), topic[key]) for key in batch]
            blocks.add_blocks(pack_blocks(items, block_compressor()))
        else:
            blocks.add((partition, offset, topic[(partition, offset)]) for partition, offset in batch)
        added |= batch
    for key in records:
        assert blocks.get(*key) == (topic[key] if key in added else None)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 3000),
    st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.binary(max_size=200)), max_size=40)),
)
def test_past_the_budget_a_value_is_gone_or_right_never_wrong(
    budget: int, batches: list[list[tuple[int, int, bytes]]]
) -> None:
    """Blocks dropped for room, reads between adds: a value is the one first added since it was last held, or none."""
    blocks = ValueBlocks(budget)
    first: dict[tuple[int, int], bytes] = {}
    for batch in batches:
        first = {key: value for key, value in first.items() if blocks.get(*key) is not None}
        blocks.add(batch)
        for partition, offset, value in batch:
            first.setdefault((partition, offset), value)
        for partition, offset, _ in batch[::3]:
            assert blocks.get(partition, offset) in (None, first[(partition, offset)])
    for key, value in first.items():
        assert blocks.get(*key) in (None, value)


def read(blocks: ValueBlocks, partition: int, offset: int) -> bytes | None:
    """From memory, else from the spool: as the texts read again look for a value."""
    found = blocks.get(partition, offset)
    return found if found is not None else blocks.get_spooled(partition, offset)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 3000),
    st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=40)),
)
def test_with_a_spool_every_value_dropped_from_memory_comes_back_from_disk(
    tmp_path_factory: pytest.TempPathFactory, budget: int, batches: list[list[tuple[int, int]]]
) -> None:
    """A record's value never changes; whatever memory lets go, the spool gives back, read between adds."""

    def value(partition: int, offset: int) -> bytes:
        return b"%d:%d:" % (partition, offset) + bytes([offset]) * (offset * 37 % 200 + partition)

    spool = BlockSpool(str(tmp_path_factory.mktemp("spool")), 1 << 30)
    blocks = ValueBlocks(budget, spool)
    added: dict[tuple[int, int], bytes] = {}
    for batch in batches:
        blocks.add((p, o, value(p, o)) for p, o in batch)
        added.update(((p, o), value(p, o)) for p, o in batch)
        for p, o in batch[::3]:
            assert read(blocks, p, o) == added[(p, o)]
    assert {key: read(blocks, *key) for key in added} == added
    assert read(blocks, 4, 0) is None
    spool.close()


def test_without_room_in_memory_prose_is_read_from_the_spool(tmp_path: Path) -> None:
    """Budget for a few blocks, 900 paragraphs: all come back, most from disk, and the disk holds them compressed."""
    paragraphs = [p.encode() for p in stdlib_paragraphs()[:900]]
    spool = BlockSpool(str(tmp_path), 1 << 30)
    blocks = ValueBlocks(16 << 10, spool)
    for start in range(0, len(paragraphs), 100):
        blocks.add((0, offset, paragraphs[offset]) for offset in range(start, start + 100))
    assert [read(blocks, 0, offset) for offset in range(len(paragraphs))] == paragraphs
    assert sum(blocks.get(0, offset) is None for offset in range(len(paragraphs))) > len(paragraphs) // 2
    assert 0 < spool.disk_bytes < sum(map(len, paragraphs)) * 0.7


_ZSTD_COMPRESSOR = zstandard.ZstdCompressor


class CountingCompressor:
    """zstandard's compressor, counting what it is given."""

    calls = 0

    def __init__(self, **options: Any) -> None:
        self._compressor = _ZSTD_COMPRESSOR(**options)

    def compress(self, data: bytes) -> bytes:
        CountingCompressor.calls += 1
        return self._compressor.compress(data)


def test_a_record_is_compressed_once_however_many_partitions_share_the_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 partitions, one record of each per batch: every block is made once, never compressed again."""
    monkeypatch.setattr(zstandard, "ZstdCompressor", CountingCompressor)
    CountingCompressor.calls = 0
    blocks = ValueBlocks(1 << 30)
    for batch in range(16):
        blocks.add((partition, batch, b"value %d %d" % (partition, batch)) for partition in range(1000))
    assert CountingCompressor.calls == 16 * 63  # ceil(1000 / 16) blocks a batch (by offset range: 16 x 1000)
    assert blocks.get(999, 15) == b"value 999 15" and blocks.get(3, 0) == b"value 3 0"


def test_the_memory_taken_is_the_budget_counted() -> None:
    """The budget counts the memory really held (python-zstandard's results are over-allocated if not copied)."""
    paragraphs = stdlib_paragraphs()
    n = len(paragraphs)
    values = [" ".join(paragraphs[(i * k + k) % n] for k in (1, 7, 13)).encode() for i in range(n)]  # ~1 KB
    budget = sum(map(len, values)) // 4
    blocks = ValueBlocks(budget)
    blocks.add([(1, 0, values[0])])  # the compression contexts, made once, outside what is measured
    assert blocks.get(1, 0) == values[0]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, n, 100):
            blocks.add((0, offset, values[offset]) for offset in range(start, min(start + 100, n)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= budget * 1.1
    kept = [offset for offset in range(n) if blocks.get(0, offset) is not None]
    assert kept == list(range(kept[0], n)) and len(kept) > n // 3  # the newest, compressed to under half


def test_large_values_close_a_block_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading one large document decompresses a block of few: blocks close past 64 KiB of values."""
    monkeypatch.setattr(zstandard, "ZstdCompressor", CountingCompressor)
    CountingCompressor.calls = 0
    blocks = ValueBlocks(1 << 30)
    values = [bytes([i]) * 40_000 for i in range(10)]
    blocks.add((0, offset, value) for offset, value in enumerate(values))
    assert CountingCompressor.calls == 5  # two values of 40 KB each
    assert [blocks.get(0, offset) for offset in range(10)] == values
