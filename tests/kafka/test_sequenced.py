"""Reading the sequenced topic: batches whole or put back from parts, and where a reader resumes."""

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.sequenced import BatchAssembly
from stream_dedup.lsh import IndexedBatch
from tests.corpus import make_corpus

DIGEST = DetectionConfig().signature_fingerprint()


def entry_of(count: int) -> ChangelogEntry:
    texts = make_corpus(count, seed=3)
    documents = IndexedBatch(
        [f"d{i}" for i in range(count)],
        make_detector(DetectionConfig()).sign(texts),
        np.arange(count, dtype=np.float64),
        np.arange(count, dtype=np.uint64),
    )
    return ChangelogEntry(documents, "documents", {0: count})


def test_a_writers_contiguous_parts_make_one_batch_at_the_offset_of_the_last() -> None:
    values = encode_entry(entry_of(30), DIGEST, max_bytes=2000)
    assert len(values) > 2
    assembly = BatchAssembly(DIGEST, "sequenced")

    done = [assembly.add(100 + i, value) for i, value in enumerate(values)]

    assert done[:-1] == [None] * (len(values) - 1)
    batch = done[-1]
    assert batch is not None and batch.offset == 100 + len(values) - 1
    assert batch.entry.documents.ids == [f"d{i}" for i in range(30)]
    assert batch.keys[0] == batch.offset << 20 and batch.keys[-1] == (batch.offset << 20) + 29


def test_independent_parts_are_batches_of_their_own() -> None:
    values = encode_entry(entry_of(30), DIGEST, max_bytes=2000, independent=True)
    assembly = BatchAssembly(DIGEST, "sequenced")

    batches = [assembly.add(i, value) for i, value in enumerate(values)]

    assert all(batch is not None for batch in batches)
    assert [d for b in batches if b is not None for d in b.entry.documents.ids] == [f"d{i}" for i in range(30)]


def test_a_reader_resumes_before_an_incomplete_batch() -> None:
    first, second, *_ = encode_entry(entry_of(30), DIGEST, max_bytes=2000)
    assembly = BatchAssembly(DIGEST, "sequenced")
    assert assembly.resume_offset(7) == 7
    assembly.add(7, first)
    assembly.add(8, second)
    assert assembly.resume_offset(9) == 7


def test_a_record_of_other_signature_parameters_names_the_setting_a_shard_reads_it_by() -> None:
    (value,) = encode_entry(entry_of(3), "another-digest")
    with pytest.raises(ChangelogError, match="other signature parameters") as raised:
        BatchAssembly(DIGEST, "sequenced").add(0, value)
    # A new sequenced topic alone would be refused: the signers' offsets of the input go with the old one.
    assert "the sequenced topic was written with" in str(raised.value) and "new group_id" in str(raised.value)


def test_a_damaged_record_names_where_it_is_and_the_setting_to_change() -> None:
    (value,) = encode_entry(entry_of(3), DIGEST)
    with pytest.raises(
        ChangelogError, match="topic 'sequenced' partition 0 offset 41: the sequenced record is damaged"
    ):
        BatchAssembly(DIGEST, "sequenced").add(41, value[:-2])
