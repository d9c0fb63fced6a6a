"""Reading and signing a batch: the texts a worker keeps, as they are and in blocks, come with the signatures."""

import logging
from typing import Any

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.engine.documents import Refusal
from stream_dedup.kafka.changelog import MAX_MESSAGE_BYTES, MAX_SHINGLE_SET_BYTES, ChangelogEntry, encode_entry
from stream_dedup.kafka.messages import InputReading, document_text, pointer_of
from stream_dedup.kafka.record_texts import text_blocks
from stream_dedup.kafka.value_blocks import BLOCK_RECORDS, block_compressor
from stream_dedup.lsh.retention import Retention
from stream_dedup.worker.signing import FUTURE_ALLOWANCE_SECONDS, read_and_sign
from tests.corpus import make_corpus
from tests.worker.fakes import block_values, document, record

READING = InputReading()
SIGNER = Detector(DetectionConfig())


def batch() -> list[Any]:
    texts = make_corpus(60, seed=9)
    texts[3], texts[4] = "a", "two words"  # shorter than a shingle
    made = [document("documents", i % 3, 1000 + i, f"d{i}", texts[i]) for i in range(50)]
    made.insert(7, record("documents", 1, 5, None, b"not json"))  # a dead letter: no text
    # Past what a pointer holds (65,535 partitions): a document, never asked for again, never kept.
    made.append(document("documents", 70_000, 3, "far", texts[55]))
    return made


def test_the_texts_kept_are_each_documents_own_and_the_blocks_hold_each_by_its_pointer() -> None:
    records = batch()
    signed = read_and_sign(records, READING, SIGNER, texts_kept=True)
    documents = [r for r, outcome in zip(records, signed.outcomes, strict=True) if isinstance(outcome, str)]
    assert len(documents) == 51
    assert signed.texts == [(document_text(r.value, READING) or "").encode() for r in documents]
    sources = np.array([pointer_of(r.partition, r.offset) for r in documents], dtype=np.uint64)
    held = block_values(signed.blocks)
    assert held == block_values(text_blocks(sources, signed.texts, block_compressor()))
    assert len(held) == 50 and pointer_of(70_000, 3) not in held
    assert all(len(block.keys) <= BLOCK_RECORDS for block in signed.blocks)


def test_without_texts_kept_nothing_but_the_signatures_comes_back() -> None:
    signed = read_and_sign(batch(), READING, SIGNER)
    assert signed.texts == [] and signed.blocks == []
    assert len(signed.signed.sketches) == 51


def test_a_record_stamped_far_ahead_counts_as_the_allowance_ahead(caplog: pytest.LogCaptureFixture) -> None:
    """A producer's clock a year fast must not move retention's clock a year (and evict the whole index)."""
    now = 1_700_000_000.0
    records = batch()[:5]
    records[2] = records[2]._replace(timestamp=int((now + 365 * 86400) * 1000))
    records[3] = records[3]._replace(timestamp=int((now + 60) * 1000))  # a minute fast: as stamped
    with caplog.at_level(logging.WARNING):
        _, indexed, _ = read_and_sign(records, READING, SIGNER).split(Retention(), now)
    expected = [r.timestamp / 1000 for r in records]
    expected[2] = now + FUTURE_ALLOWANCE_SECONDS
    assert indexed.event_times.tolist() == expected
    assert f"partition {records[2].partition} offset {records[2].offset}" in caplog.text


@pytest.mark.parametrize(("max_age", "allowance"), [(60.0, 15.0), (4 * 3600.0, 3600.0), (86400.0, 3600.0)])
def test_under_a_short_max_age_a_record_ahead_counts_as_a_quarter_of_it_ahead(max_age: float, allowance: float) -> None:
    """Alone in its batch (a quiet live stream), a record stamped hours ahead under max_age_seconds = 60 counted
    as stamped an hour ahead: it evicted the whole index, and copies of any age matched for the hour."""
    now = 1_700_000_000.0
    records = [batch()[0]._replace(timestamp=int((now + 7200) * 1000))]
    _, indexed, _ = read_and_sign(records, READING, SIGNER).split(Retention(max_age_seconds=max_age), now)
    assert indexed.event_times.tolist() == [now + allowance]


def random_letters(count: int, seed: int) -> str:
    """``count`` random letters of 5,000 ideographs: a distinct 5-shingle per letter (but one in about 10**5)."""
    return "".join(map(chr, np.random.default_rng(seed).integers(0x4E00, 0x4E00 + 5000, count).tolist()))


def test_a_document_whose_shingle_set_no_changelog_record_holds_is_a_dead_letter_not_a_stall() -> None:
    """With exact verification, the shingle set of a document of 2.2M characters (8.7 MB) exceeds the changelog's
    8 MiB records: the broker refused its batch's record after every restart, and the stage stalled for ever."""
    exact = Detector(DetectionConfig(verification="exact"))
    largest = MAX_SHINGLE_SET_BYTES // 4 - 10
    records = [
        document("documents", 0, 1, "small", "a small document of a few words"),
        document("documents", 0, 2, "huge", random_letters(largest + 100_000, seed=1)),
        document("documents", 0, 3, "largest", random_letters(largest, seed=2)),
    ]
    signed = read_and_sign(records, InputReading(max_document_bytes=16 << 20), exact, texts_kept=True)
    assert signed.outcomes[0] == "small" and signed.outcomes[2] == "largest"
    refusal = signed.outcomes[1]
    assert isinstance(refusal, Refusal) and refusal.reason == "too_large"
    assert "max_document_bytes" in refusal.detail and "exact" in refusal.detail
    documents, indexed, letters = signed.split(Retention())
    assert [d.id for d in documents] == indexed.ids == ["small", "largest"] and len(signed.texts) == 2
    assert [letter.reason for letter in letters] == ["too_large"]
    # What is kept fits: the largest set's record is within the topic's limit.
    largest_alone = indexed.take(np.array([1]))
    (value,) = encode_entry(ChangelogEntry(largest_alone, "documents", {0: 4}), "digest")
    assert len(value) <= MAX_MESSAGE_BYTES
