"""Changelog records: lossless round trips, splitting big batches, refusing foreign records."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stream_dedup.config import SIGNATURE_PARAMETER_NAMES, DetectionConfig, signature_parameters_in
from stream_dedup.engine import make_detector
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, encode_entry, merge_parts
from stream_dedup.lsh import IndexedBatch
from tests.corpus import make_corpus

DIGEST = DetectionConfig().signature_fingerprint()


def entry_of(texts: list[str], config: DetectionConfig | None = None) -> ChangelogEntry:
    documents = IndexedBatch(
        [f"id-{i}-é" for i in range(len(texts))],
        make_detector(config or DetectionConfig()).sign(texts),
        np.arange(len(texts), dtype=np.float64) + 0.5,
        np.arange(len(texts), dtype=np.uint64) * np.uint64(7919) + np.uint64(2**60),
    )
    settings = (config or DetectionConfig()).verdict_settings()
    topic_id = "Xq3vK0bTQ9-5m1ZyJp2d7w"
    return ChangelogEntry(documents, "documents", {0: 17, 2: 5}, settings=settings, input_topic_id=topic_id)


def assert_same(left: ChangelogEntry, right: ChangelogEntry) -> None:
    assert (left.settings, left.input_topic_id) == (right.settings, right.input_topic_id)
    ours, theirs = left.documents, right.documents
    assert ours.ids == theirs.ids
    assert np.array_equal(ours.signed.sketches, theirs.signed.sketches)
    assert np.array_equal(ours.signed.keys, theirs.signed.keys)
    filled = ours.signed.filled_bins, theirs.signed.filled_bins
    assert (filled[0] is None and filled[1] is None) or np.array_equal(*filled)
    assert np.array_equal(ours.event_times, theirs.event_times)
    assert np.array_equal(ours.sources, theirs.sources)
    assert (left.input_topic, left.positions, left.final) == (right.input_topic, right.positions, right.final)
    assert (ours.signed.shingles is None) == (theirs.signed.shingles is None)
    if ours.signed.shingles is not None and theirs.signed.shingles is not None:
        assert np.array_equal(ours.signed.shingles.values, theirs.signed.shingles.values)
        assert np.array_equal(ours.signed.shingles.ends, theirs.signed.shingles.ends)
    assert (ours.signed.fingerprints is None) == (theirs.signed.fingerprints is None)
    if ours.signed.fingerprints is not None and theirs.signed.fingerprints is not None:
        assert np.array_equal(ours.signed.fingerprints, theirs.signed.fingerprints)
    assert (ours.signed.set_sizes is None) == (theirs.signed.set_sizes is None)
    if ours.signed.set_sizes is not None and theirs.signed.set_sizes is not None:
        assert np.array_equal(ours.signed.set_sizes, theirs.signed.set_sizes)


@pytest.mark.parametrize(
    "config",
    [
        DetectionConfig(),
        DetectionConfig(verification="exact"),
        DetectionConfig(method="simhash"),
        DetectionConfig(method="combined", verification="exact"),
        DetectionConfig(containment_threshold=0.8),
    ],
    ids=["estimate", "exact", "simhash", "combined-exact", "containment"],
)
def test_an_entry_survives_encoding(config: DetectionConfig) -> None:
    entry = entry_of(make_corpus(50, seed=1), config)
    digest = config.signature_fingerprint()
    (value,) = encode_entry(entry, digest)
    assert_same(decode_entry(value, digest), entry)


@settings(max_examples=25, deadline=None)
@given(documents=st.integers(1, 120), max_bytes=st.integers(100, 20_000))
def test_a_big_batch_splits_into_parts_that_merge_back(documents: int, max_bytes: int) -> None:
    # Every part a record can carry.
    config = DetectionConfig(method="combined", verification="exact", containment_threshold=0.8)
    entry = entry_of(make_corpus(documents, seed=documents), config)
    digest = config.signature_fingerprint()
    parts = [decode_entry(value, digest) for value in encode_entry(entry, digest, max_bytes=max_bytes)]
    assert [p.final for p in parts] == [False] * (len(parts) - 1) + [True]
    assert_same(merge_parts(parts), entry)


def test_a_batch_of_only_dead_letters_still_records_its_positions() -> None:
    nothing = IndexedBatch([], make_detector(DetectionConfig()).sign([]), np.empty(0), np.empty(0, np.uint64))
    (value,) = encode_entry(ChangelogEntry(nothing, "documents", {1: 99}), DIGEST)
    decoded = decode_entry(value, DIGEST)
    assert (decoded.documents.ids, decoded.positions) == ([], {1: 99})
    assert decoded.settings is None  # a writer that does not say (a signer, an older release)


def test_a_record_that_names_no_input_topic_id_reads_as_not_knowing_it() -> None:
    # Records of earlier releases, and of writers that never learned the id (brokers before Kafka 2.8).
    (value,) = encode_entry(replace(entry_of(["some text here"]), input_topic_id=None), DIGEST)
    assert decode_entry(value, DIGEST).input_topic_id is None


def test_a_record_of_an_older_format_is_refused_naming_the_formats() -> None:
    (value,) = encode_entry(entry_of(["some text here"]), DIGEST)
    older = value[:4] + bytes([1]) + value[5:]
    with pytest.raises(ChangelogError, match="changelog record format 1; this release reads format 2"):
        decode_entry(older, DIGEST)


def test_records_made_with_other_signature_parameters_are_refused_saying_how_to_start_over() -> None:
    (value,) = encode_entry(entry_of(["some text here"]), DIGEST)
    other = DetectionConfig(shingle_size=7).signature_fingerprint()
    with pytest.raises(ChangelogError, match="other signature parameters") as refused:
        decode_entry(value, other)
    # A new changelog_topic under the same group would be refused as lost history: only a new group starts over.
    assert "with a new group_id" in str(refused.value)
    assert "changelog_topic at a new topic" not in str(refused.value)


@pytest.mark.parametrize(
    ("written_with", "read_with", "named"),
    [
        ({}, {"shingle_size": 7}, "shingle_size=5 but this run uses shingle_size=7"),
        ({}, {"method": "simhash"}, "method='minhash' but this run uses method='simhash'"),
        ({}, {"ignore_invisible": False}, "ignore_invisible=True but this run uses ignore_invisible=False"),
        ({}, {"fold_lookalikes": True}, "fold_lookalikes=False but this run uses fold_lookalikes=True"),
        ({}, {"containment_threshold": 0.8}, "containment_partitions_per_doubling=None but this run uses"),
        ({"seed": 3}, {"seed": 4}, "seed=3 but this run uses seed=4"),
    ],
)
def test_a_refusal_of_other_signature_parameters_names_the_one_that_differs(
    written_with: dict[str, object], read_with: dict[str, object], named: str
) -> None:
    # A worker's records carry the settings they were judged under: the reader need not list every candidate.
    writer = DetectionConfig(**written_with)
    (value,) = encode_entry(entry_of(["some text here"], writer), writer.signature_fingerprint())
    reader = DetectionConfig(**{**written_with, **read_with})
    with pytest.raises(ChangelogError, match="not comparable") as refused:
        decode_entry(value, reader.signature_fingerprint(), verdict_settings=reader.verdict_settings())
    assert named in str(refused.value)
    assert "other signature parameters" not in str(refused.value)


def test_a_banding_changed_with_the_threshold_is_named_with_the_settings_that_keep_it() -> None:
    (value,) = encode_entry(entry_of(["some text here"]), DIGEST)
    banding = DetectionConfig().banding()
    reader = DetectionConfig(threshold=0.6)
    with pytest.raises(ChangelogError, match="bands=") as refused:
        decode_entry(value, reader.signature_fingerprint(), verdict_settings=reader.verdict_settings())
    assert f"bands={banding.bands} and rows_per_band={banding.rows_per_band} keep it" in str(refused.value)


def test_the_threshold_does_not_change_the_digest() -> None:
    # Replaying under another threshold (same banding) is sound: the index holds signatures, not verdicts.
    banding = DetectionConfig().banding()
    raised = DetectionConfig(threshold=0.9, bands=banding.bands, rows_per_band=banding.rows_per_band)
    assert raised.signature_fingerprint() == DIGEST


def test_the_signature_fingerprint_of_the_defaults_never_changes_by_accident() -> None:
    # Running changelogs carry it: a new value makes every one of them unreadable (bump SIGNATURE_FORMAT on purpose).
    assert DIGEST == "1495b2fd7f52bc52"
    # Changelogs written before invisible characters were ignored are read with the setting off.
    assert DetectionConfig(ignore_invisible=False).signature_fingerprint() == "3ee6a1955daf77ef"


def test_a_foreign_record_is_refused() -> None:
    with pytest.raises(ChangelogError, match="bad magic"):
        decode_entry(b'{"not": "ours"}', DIGEST)


def test_a_record_made_with_containment_is_refused_without_it() -> None:
    config = DetectionConfig(containment_threshold=0.8)
    (value,) = encode_entry(entry_of(make_corpus(5, seed=3), config), config.signature_fingerprint())
    with pytest.raises(ChangelogError, match="other signature parameters"):
        decode_entry(value, DIGEST)


@settings(max_examples=60, deadline=None)
@given(
    method=st.sampled_from(["minhash", "simhash", "combined"]),
    containment=st.sampled_from([None, 0.7]),
    verification=st.sampled_from(["estimate", "exact"]),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    shingle_unit=st.sampled_from(["char", "word"]),
)
def test_verdict_settings_hold_every_signature_parameter_under_its_name(
    method: str, containment: float | None, verification: str, flags: tuple[bool, bool, bool], shingle_unit: str
) -> None:
    # What names the differing parameter in a refusal: a parameter left out of the names would go unnamed.
    ignore_invisible, fold_lookalikes, strip_punctuation = flags
    assume(method != "simhash" or verification == "estimate")
    config = DetectionConfig(
        method=method,  # type: ignore[arg-type]
        containment_threshold=containment if method == "minhash" else None,
        verification=verification,  # type: ignore[arg-type]
        ignore_invisible=ignore_invisible,
        fold_lookalikes=fold_lookalikes,
        strip_punctuation=strip_punctuation,
        shingle_unit=shingle_unit,  # type: ignore[arg-type]
        shingle_size=5 if shingle_unit == "char" else 3,
    )
    assert set(config.signature_parameters()) <= set(SIGNATURE_PARAMETER_NAMES)
    named = signature_parameters_in(config.verdict_settings())
    assert config.signature_parameters().items() <= named.items()
