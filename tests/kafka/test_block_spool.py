"""Blocks spooled to local disk: each comes back as put or not at all, within the budget, and leaves no file."""

import errno
import logging
import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.kafka import block_spool
from stream_dedup.kafka.block_spool import BlockSpool

SEGMENT = 4096


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of 4 KB, so that a few puts fill the ring and drop the oldest."""
    monkeypatch.setattr(block_spool, "_MIN_SEGMENT_BYTES", SEGMENT)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6),
    st.lists(st.tuples(st.sets(st.integers(0, 5), min_size=1, max_size=3), st.binary(max_size=1500)), max_size=60),
)
def test_a_block_comes_back_as_put_while_the_budget_holds_it(
    tmp_path_factory: pytest.TempPathFactory, segments: int, puts: list[tuple[set[int], bytes]]
) -> None:
    """Truth from a plain list of what was put: the newest blocks that fit all but one segment are always held."""
    spool = BlockSpool(str(tmp_path_factory.mktemp("spool")), segments * SEGMENT)
    for groups, block in puts:
        spool.put(groups, block)
        assert spool.disk_bytes <= segments * SEGMENT
    surely_held, since = set(), 0
    for i in reversed(range(len(puts))):
        since += 2 * (len(puts[i][1]) + 8)  # with its checksum; a block may leave less than its size unused before it
        if since > (segments - 1) * SEGMENT:
            break
        surely_held.add(i)
    for group in range(6):
        expected = [block for groups, block in puts if group in groups]
        found = list(spool.blocks_of(group))
        assert all(block in expected for block in found)
        assert found == [b for b in expected if b in found]  # oldest first
        held = [puts[i][1] for i in sorted(surely_held) if group in puts[i][0]]
        assert all(block in found for block in held)
    spool.close()


def test_the_groups_of_a_dropped_segment_are_forgotten(tmp_path: Path) -> None:
    """Memory stays that of the blocks held (4 segments of 4 blocks), however many were spooled before."""
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    for group in range(300):
        spool.put([group], b"x" * 1000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for group in range(300, 3300):
            spool.put([group], b"x" * 1000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000  # 3,000 groups remembered take about 750 KB
    held = [group for group in range(3300) if list(spool.blocks_of(group))]
    assert held == list(range(3300 - len(held), 3300)) and 12 <= len(held) <= 16


def test_the_spool_files_are_never_seen_and_gone_when_closed(tmp_path: Path) -> None:
    spool = BlockSpool(str(tmp_path / "spool"), 4 * SEGMENT)
    spool.put([1], b"x" * 1000)
    assert list(spool.blocks_of(1)) == [b"x" * 1000]
    assert os.listdir(tmp_path / "spool") == []  # unlinked at once: a kill -9 leaves nothing behind
    spool.close()
    assert list(spool.blocks_of(1)) == [] and spool.disk_bytes == 0


def test_a_block_that_reads_back_changed_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    spool.put([1], b"some texts")
    spool.put([1], b"other texts")
    real_pread = os.pread

    def flipped(fd: int, length: int, offset: int) -> bytes:
        data = bytearray(real_pread(fd, length, offset))
        if offset == 0:
            data[-1] ^= 1
        return bytes(data)

    monkeypatch.setattr(block_spool.os, "pread", flipped)
    with caplog.at_level(logging.WARNING):
        assert list(spool.blocks_of(1)) == [b"other texts"]
    assert "changed" in caplog.text


def test_a_spool_that_cannot_write_turns_itself_off_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    spool = BlockSpool(str(not_a_directory), 4 * SEGMENT)
    with caplog.at_level(logging.WARNING):
        spool.put([1], b"texts")
        spool.put([1], b"texts")
    assert list(spool.blocks_of(1)) == [] and spool.disk_bytes == 0
    assert caplog.text.count("cannot spool texts") == 1


def filling_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.pwrite`` as on a disk that fills: what fits (half) is written, the next write fails with ENOSPC."""
    real, calls = os.pwrite, []

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        calls.append(offset)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data[: len(data) // 2], offset)

    monkeypatch.setattr(block_spool.os, "pwrite", pwrite)


def test_a_short_write_a_full_disk_turns_the_spool_off_and_frees_it_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The short write's reason is said: the warning said "wrote 10 of 20 bytes", never that the disk was full."""
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    spool.put([1], b"written whole")
    filling_disk(monkeypatch)
    with caplog.at_level(logging.WARNING):
        spool.put([2], b"half written")
    monkeypatch.undo()
    spool.put([3], b"after")
    assert [list(spool.blocks_of(group)) for group in (1, 2, 3)] == [[], [], []]
    assert spool.disk_bytes == 0 and "No space left on device" in caplog.text


def test_a_write_the_system_cut_short_is_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A short write need not be an error (a signal, a large write): what is left is written next."""
    real = os.pwrite
    monkeypatch.setattr(block_spool.os, "pwrite", lambda fd, data, offset: real(fd, data[:3], offset))
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    spool.put([1], b"three bytes at a time")
    assert list(spool.blocks_of(1)) == [b"three bytes at a time"]


def test_a_block_larger_than_a_segment_is_not_kept(tmp_path: Path) -> None:
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    spool.put([1], b"x" * SEGMENT)
    spool.put([1], b"small")
    assert list(spool.blocks_of(1)) == [b"small"]


def test_a_spool_turned_off_by_a_full_disk_tries_again_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # It stayed off for the process's life: a disk full for a minute cost every later read a fetch from Kafka.
    now = [0.0]
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT, clock=lambda: now[0])
    filling_disk(monkeypatch)
    with caplog.at_level(logging.WARNING):
        spool.put([1], b"disk full")
    monkeypatch.undo()
    now[0] = block_spool.RETRY_SECONDS - 1
    spool.put([2], b"still off")
    now[0] = block_spool.RETRY_SECONDS
    spool.put([3], b"room again")
    assert [list(spool.blocks_of(group)) for group in (1, 2, 3)] == [[], [], [b"room again"]]
    assert "tries again in 300 s" in caplog.text


def test_a_write_that_writes_nothing_ends_rather_than_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(block_spool.os, "pwrite", lambda fd, data, offset: 0)
    spool = BlockSpool(str(tmp_path), 4 * SEGMENT)
    with caplog.at_level(logging.WARNING):
        spool.put([1], b"never written")
    assert list(spool.blocks_of(1)) == [] and "wrote 0 of 21 bytes" in caplog.text  # 13 bytes and the checksum
