"""Shards and the judge's merge give exactly the verdicts of one detector on the same batches."""

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import containment_stream
from stream_dedup.config import MAX_INDEX_SLOTS, DetectionConfig, Method
from stream_dedup.engine import Verdict, make_detector
from stream_dedup.engine.sharding import ANSWER_KINDS, ShardAnswer, ShardDetector, merge_answers, sequence_keys
from stream_dedup.engine.snapshot import load_shard_snapshot, save_snapshot
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.errors import ConfigError
from stream_dedup.lsh import NO_SOURCE, IndexedBatch
from stream_dedup.text import normalize_all
from stream_dedup.text.spool import TextSpool
from tests.corpus import make_corpus
from tests.engine.test_short_texts import brute_force_duplicates
from tests.engine.test_text_verification import tiny_near_copies
from tests.real_text import stdlib_paragraphs, texts_sharing_a_signature

VOCABULARY = ["harbour", "lantern", "meadow", "copper", "thistle", "orbit", "velvet", "quarry", "saffron", "willow"]

#: A stream: batches of (id, text, source), each at a strictly later offset of the sequenced log.
Stream = list[tuple[int, list[tuple[str, str, int]]]]


def signed_batch(config: DetectionConfig, documents: list[tuple[str, str, int]]) -> IndexedBatch:
    """The batch signed; a document's event time is its source's number (seconds)."""
    ids = [doc_id for doc_id, _, _ in documents]
    signed = make_detector(config).sign([text for _, text, _ in documents])
    sources = np.array([source for _, _, source in documents], dtype=np.uint64)
    return IndexedBatch(ids, signed, np.array([source % 10_000 for _, _, source in documents], float), sources)


def single_and_sharded(
    config: DetectionConfig, stream: Stream, shards: int, texts: DocumentTexts | None = None
) -> tuple[list[Verdict], list[Verdict]]:
    """The verdicts of one detector, and of ``shards`` shards merged, over the same batches (pairs settled by
    ``texts``, by the documents' sources, when given)."""
    single = make_detector(config)
    shard_set = [ShardDetector(config, k, shards) for k in range(shards)]
    expected: list[Verdict] = []
    merged: list[Verdict] = []
    for offset, documents in stream:
        batch = signed_batch(config, documents)
        keys = sequence_keys(offset, len(documents))
        expected += single.process_signed(batch, texts)
        owners = shard_set[0].owners(batch)
        answers = [shard.answer(batch, keys, texts) for shard in shard_set]
        for shard, answer in enumerate(answers):
            in_batch = np.isin(answer.match_keys, keys)
            assert (owners[answer.match_keys[in_batch] - keys[0]] == shard).all(), "answered by its owner only"
        merged += merge_answers(keys, batch.ids, answers)
    assert sum(len(shard) for shard in shard_set) == len(single), "every document is stored on exactly one shard"
    assert sum(shard.detector.hot_bucket_skips for shard in shard_set) == single.hot_bucket_skips
    return expected, merged


sentences = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=12).map(" ".join)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """Batches at increasing offsets whose documents often copy or extend earlier ones; ids may repeat."""
    texts: list[str] = []
    stream: Stream = []
    offset = 0
    for _ in range(draw(st.integers(1, 6))):
        offset += draw(st.integers(1, 3))  # transaction markers leave gaps between a log's offsets
        documents = []
        for _ in range(draw(st.integers(1, 12))):
            choice = draw(st.sampled_from(["fresh", "copy", "extend", "join"]))
            if choice == "fresh" or not texts:
                text = draw(sentences)
            elif choice == "join":  # holds two earlier texts: a "contains" for each, if sizes allow
                text = f"{draw(st.sampled_from(texts))} {draw(st.sampled_from(texts))}"
            else:
                base = draw(st.sampled_from(texts))
                text = base if choice == "copy" else f"{base} {draw(st.sampled_from(VOCABULARY))}"
            texts.append(text)
            number = len(texts)
            source = int(NO_SOURCE) if draw(st.integers(0, 9)) == 0 else 10_000 + number
            documents.append((f"d{draw(st.integers(0, number))}", text, source))
        stream.append((offset, documents))
    return stream


#: Six slots: any of 1, 2 or 3 shards divides them. Small caps bind often (a slot admits one
#: or two documents per key); retention by count and age evicts within a stream.
configs = st.sampled_from(
    [
        DetectionConfig(index_slots=6),
        DetectionConfig(threshold=0.5, shingle_unit="word", shingle_size=2, index_slots=6),
        DetectionConfig(threshold=0.6, method="combined", max_hamming=12, index_slots=6),
        DetectionConfig(threshold=0.6, verification="exact", index_slots=6),
        DetectionConfig(max_bucket_size=2, index_slots=6),
        DetectionConfig(threshold=0.5, max_bucket_size=12, index_slots=6, shingle_unit="word", shingle_size=1),
        DetectionConfig(max_documents=6, index_slots=6),
        DetectionConfig(threshold=0.6, verification="exact", max_documents=10, max_bucket_size=6, index_slots=6),
        DetectionConfig(threshold=0.5, max_age_seconds=12.0, max_bucket_size=1, index_slots=6),
        DetectionConfig(method="combined", max_hamming=10, max_documents=9, max_age_seconds=30.0, index_slots=6),
        DetectionConfig(method="simhash", index_slots=6),
        DetectionConfig(method="simhash", max_hamming=12, max_bucket_size=2, index_slots=6),
        DetectionConfig(method="simhash", max_hamming=8, shingle_unit="word", shingle_size=1, index_slots=6),
        DetectionConfig(
            method="simhash", max_hamming=10, max_documents=7, max_age_seconds=20.0, max_bucket_size=6, index_slots=6
        ),
        DetectionConfig(threshold=0.95, containment_threshold=0.7, index_slots=6),
        DetectionConfig(threshold=0.9, containment_threshold=0.6, verification="exact", index_slots=6),
        DetectionConfig(threshold=0.9, containment_threshold=0.7, max_bucket_size=2, max_documents=8, index_slots=6),
        DetectionConfig(
            threshold=0.8,
            method="combined",
            max_hamming=12,
            containment_threshold=0.6,
            shingle_unit="word",
            shingle_size=1,
            index_slots=6,
        ),
    ]
)


@settings(max_examples=150, deadline=None)
@given(config=configs, stream=streams(), shards=st.integers(1, 3))
def test_merged_answers_of_shards_are_the_verdicts_of_one_detector(
    config: DetectionConfig, stream: Stream, shards: int
) -> None:
    expected, merged = single_and_sharded(config, stream, shards)
    assert merged == expected


def answer_rows(answer: ShardAnswer) -> list[tuple[object, ...]]:
    distances = answer.distances.tolist() if answer.distances is not None else [None] * len(answer)
    columns = (answer.keys, answer.match_keys, answer.similarity, answer.match_sources)
    return list(zip(*(c.tolist() for c in columns), distances, answer.match_ids, strict=True))


@settings(max_examples=80, deadline=None)
@given(config=configs, stream=streams(), shards=st.integers(1, 3), data=st.data())
def test_a_shard_restored_from_its_snapshot_answers_as_if_never_stopped(
    tmp_path_factory: pytest.TempPathFactory, config: DetectionConfig, stream: Stream, shards: int, data: st.DataObject
) -> None:
    """Snapshot after any batch, load, go on: every later answer is the uninterrupted shard's, row for row."""
    shard = data.draw(st.integers(0, shards - 1))
    cut = data.draw(st.integers(0, len(stream)))
    path = tmp_path_factory.mktemp("shard") / "shard.sds"
    running = ShardDetector(config, shard, shards)
    batches = [(signed_batch(config, documents), sequence_keys(offset, len(documents))) for offset, documents in stream]
    for batch, keys in batches[:cut]:
        running.answer(batch, keys)
    save_snapshot(running, path, {"sequenced_offset": cut})
    restored, metadata = load_shard_snapshot(path, config, shard, shards)
    assert metadata == {"sequenced_offset": cut}
    assert (len(restored), len(restored.stream)) == (len(running), len(running.stream))
    for batch, keys in batches[cut:]:
        assert answer_rows(restored.answer(batch, keys)) == answer_rows(running.answer(batch, keys))
    assert len(restored) == len(running)
    assert restored.detector.evicted_documents == running.detector.evicted_documents
    assert restored.detector.hot_bucket_skips == running.detector.hot_bucket_skips
    assert restored.generation_keys.keys() == running.generation_keys.keys()


def test_shards_seal_and_evict_generations_at_the_batches_one_index_does() -> None:
    texts = make_corpus(600, seed=8)
    stream: Stream = [
        (b, [(f"doc-{i}", texts[i], i) for i in range(start, start + 40)]) for b, start in enumerate(range(0, 600, 40))
    ]
    config = DetectionConfig(threshold=0.7, max_documents=100, index_slots=3)
    expected, merged = single_and_sharded(config, stream, 3)
    assert merged == expected
    # Without following the stream's measure, each shard would keep ~100 documents of its own.
    single = make_detector(config)
    shard_set = [ShardDetector(config, k, 3) for k in range(3)]
    for offset, documents in stream:
        batch = signed_batch(config, documents)
        single.process_signed(batch)
        for shard in shard_set:
            shard.answer(batch, sequence_keys(offset, len(documents)))
    assert single.evicted_documents > 400
    assert sum(len(shard) for shard in shard_set) == len(single) < 160
    assert sum(shard.detector.evicted_documents for shard in shard_set) == single.evicted_documents


@pytest.mark.parametrize("method", ["minhash", "simhash"])
def test_shards_forget_across_a_quiet_spell_before_the_batch_as_one_index_does(method: Method) -> None:
    """Texts at 0 s and their copies after quiet spells (max_age_seconds 60): nothing older than the spell matches."""
    texts = make_corpus(30, seed=9, copies=0.0)
    # Event time is a source's number: 10 texts at 0-9 s, then copies at 3600-3609 s, 7200-7209 s, 7230-7239 s.
    times = [*range(10), *range(3600, 3610), *range(7200, 7210), *range(7230, 7240)]
    stream: Stream = [
        (b, [(f"doc-{i}", texts[i % 10], 10_000 + times[i]) for i in range(start, start + 5)])
        for b, start in enumerate(range(0, 40, 5))
    ]
    config = DetectionConfig(method=method, max_age_seconds=60.0, index_slots=3)

    expected, merged = single_and_sharded(config, stream, 3)

    assert merged == expected
    # Each spell forgets what came before it; copies 30 s apart still match.
    assert [v.duplicate_of for v in expected] == [None] * 30 + [f"doc-{i}" for i in range(20, 30)]


def test_three_shards_agree_with_one_detector_on_a_corpus_of_near_copies() -> None:
    texts = make_corpus(900, seed=5)
    stream: Stream = [
        (10 * b, [(f"doc-{i}", texts[i], i) for i in range(start, start + 60)])
        for b, start in enumerate(range(0, 900, 60))
    ]
    config = DetectionConfig(threshold=0.7, index_slots=3)

    expected, merged = single_and_sharded(config, stream, 3)

    assert merged == expected
    duplicates = [v for v in expected if v.verdict == "duplicate"]
    assert len(duplicates) > 150
    # Matches sit on every shard: the merge really combines them.
    owners = make_detector(config).slots_of(make_detector(config).sign(texts), 3)
    matched_on = {int(owners[int(v.duplicate_of.removeprefix("doc-"))]) for v in duplicates if v.duplicate_of}
    assert matched_on == {0, 1, 2}


def batches_of(texts: list[str], size: int, prefix: str) -> Stream:
    """``texts`` in batches of ``size``, 10 s apart; a text's id is ``prefix`` and its position, its source that + 1."""
    return [
        (10 * b, [(f"{prefix}{i}", texts[i], i + 1) for i in range(start, min(start + size, len(texts)))])
        for b, start in enumerate(range(0, len(texts), size))
    ]


def test_three_shards_settle_near_copies_hiding_in_the_sketch_as_one_detector_does() -> None:
    # Texts of three shingles and the same with a letter added (Jaccard 0.75): a few hide in the sketch.
    texts = normalize_all(tiny_near_copies(1500, seed=3))
    stream = batches_of(texts, 500, "doc-")
    config = DetectionConfig(threshold=0.8, index_slots=3)
    with TextSpool() as spool:
        spool.add(list(range(1, len(texts) + 1)), texts)
        expected, merged = single_and_sharded(config, stream, 3, spool)
    assert merged == expected
    truth = brute_force_duplicates(texts, config.shingling(), 0.8)
    assert [v.verdict == "duplicate" for v in expected] == truth


@pytest.mark.parametrize("verification", ["estimate", "exact"])
def test_three_shards_find_one_detector_s_containments_on_real_excerpts_and_expansions(verification: str) -> None:
    documents = containment_stream(480, paragraphs=stdlib_paragraphs(), seed=7)
    stream: Stream = [
        (3 * b, [(f"c{i}", documents[i].text, i) for i in range(start, min(480, start + 50))])
        for b, start in enumerate(range(0, 480, 50))
    ]
    config = DetectionConfig(containment_threshold=0.7, verification=verification, index_slots=3)

    expected, merged = single_and_sharded(config, stream, 3)

    assert merged == expected
    kinds = Counter(v.verdict for v in expected)
    assert kinds["contained"] > 30 and kinds["contains"] > 30
    # The containment matches sit on every shard: the merge really combines them.
    owners = make_detector(config).slots_of(make_detector(config).sign([d.text for d in documents]), 3)
    found = [v for v in expected if v.verdict in ("contained", "contains")]
    assert {int(owners[int(v.duplicate_of.removeprefix("c"))]) for v in found if v.duplicate_of} == {0, 1, 2}


def test_three_shards_settle_containment_near_the_threshold_by_text_as_one_detector_does() -> None:
    texts = normalize_all(texts_sharing_a_signature(300))
    stream = batches_of(texts, 60, "t")
    config = DetectionConfig(containment_threshold=0.8, index_slots=3)
    with TextSpool() as spool:
        spool.add(list(range(1, len(texts) + 1)), texts)
        expected, merged = single_and_sharded(config, stream, 3, spool)
        without_texts = single_and_sharded(config, stream, 1)[0]
    assert merged == expected
    assert sum(v.verdict in ("contained", "contains") for v in expected) > 20
    assert expected != without_texts  # the texts settled some pairs


@pytest.mark.parametrize("method", ["minhash", "simhash"])
def test_ownership_follows_the_content_so_exact_copies_share_a_shard(method: str) -> None:
    detector = make_detector(DetectionConfig(method=method))
    texts = make_corpus(200, seed=3)
    owners = detector.slots_of(detector.sign(texts + texts), 3)
    assert np.array_equal(owners[:200], owners[200:])
    assert np.bincount(owners, minlength=3).min() > 100  # and spread over all shards


def answer(keys: list[int], match_keys: list[int], similarity: list[float], ids: list[str]) -> ShardAnswer:
    return ShardAnswer(
        np.array(keys, dtype=np.int64),
        np.array(match_keys, dtype=np.int64),
        np.array(similarity),
        None,
        np.array([7] * len(keys), dtype=np.uint64),
        ids,
    )


def test_merge_takes_the_highest_similarity_then_the_earliest_match() -> None:
    keys = sequence_keys(9, 3)
    first = answer([keys[0], keys[1], keys[2]], [50, 40, 30], [0.9, 0.85, 0.8], ["a", "b", "c"])
    second = answer([keys[0], keys[1], keys[2]], [60, 20, 31], [0.95, 0.85, 0.8], ["x", "y", "z"])

    verdicts = merge_answers(keys, ["q0", "q1", "q2"], [first, second])

    assert [v.duplicate_of for v in verdicts] == ["x", "y", "c"]


def test_merge_compares_similarities_before_rounding() -> None:
    keys = sequence_keys(0, 1)
    earlier = answer([int(keys[0])], [1], [0.91368], ["earlier"])
    closer = answer([int(keys[0])], [2], [0.91372], ["closer"])

    (verdict,) = merge_answers(keys, ["q"], [earlier, closer])

    assert (verdict.duplicate_of, verdict.similarity, verdict.match_source) == ("closer", 0.9137, 7)


def test_merge_prefers_a_near_duplicate_then_contained_then_contains_and_ranks_by_containment() -> None:
    keys = sequence_keys(2, 3)
    kinds = {kind: ANSWER_KINDS.index(kind) for kind in ANSWER_KINDS}

    def containment_answer(rows: list[tuple[int, str, float, float, str]]) -> ShardAnswer:
        """Rows of (document, kind, similarity, containment, match id), matches at keys 10, 11, ..."""
        plain = answer([int(keys[r[0]]) for r in rows], [10 + i for i in range(len(rows))], [r[2] for r in rows], [])
        return replace(
            plain,
            match_ids=[r[4] for r in rows],
            kinds=np.array([kinds[r[1]] for r in rows], dtype=np.uint8),
            containment=np.array([r[3] for r in rows]),
        )

    first = containment_answer(
        [(0, "contained", 0.6, 0.99, "a"), (1, "contains", 0.7, 0.9, "b"), (2, "contained", 0.5, 0.8, "c")]
    )
    second = containment_answer(
        [(0, "duplicate", 0.85, 0.0, "x"), (1, "contained", 0.4, 0.75, "y"), (2, "contained", 0.7, 0.78, "z")]
    )

    verdicts = merge_answers(keys, ["q0", "q1", "q2"], [first, second])

    assert [(v.verdict, v.duplicate_of, v.containment) for v in verdicts] == [
        ("duplicate", "x", None),
        ("contained", "y", 0.75),
        ("contained", "c", 0.8),
    ]


def test_merge_without_answers_is_all_unique_and_ignores_other_documents() -> None:
    keys = sequence_keys(4, 2)
    elsewhere = answer([int(sequence_keys(5, 1)[0])], [1], [0.99], ["other"])

    assert merge_answers(keys, ["a", "b"], [elsewhere]) == [Verdict("a", "unique"), Verdict("b", "unique")]
    assert merge_answers(keys, ["a", "b"], []) == [Verdict("a", "unique"), Verdict("b", "unique")]
    # Batches of no document (a worker's changelog holds some): no verdict, whatever answers are kept.
    assert merge_answers(sequence_keys(4, 0), [], [elsewhere]) == []


def test_a_shard_refuses_settings_it_cannot_honour() -> None:
    with pytest.raises(ConfigError, match="shard_index"):
        ShardDetector(DetectionConfig(index_slots=3), 3, 3)
    with pytest.raises(ConfigError, match="'shards'"):
        ShardDetector(DetectionConfig(), 0, 0)
    with pytest.raises(ConfigError, match="must divide index_slots=4"):
        ShardDetector(DetectionConfig(index_slots=4), 0, 3)


@pytest.mark.parametrize(
    ("capped", "skips"),
    [
        (DetectionConfig(threshold=0.5, max_bucket_size=2, index_slots=6), 500),
        (DetectionConfig(method="simhash", max_hamming=6, max_bucket_size=2, index_slots=6), 40),
    ],
    ids=["minhash", "simhash"],
)
def test_caps_counted_per_slot_bind_alike_and_copies_are_still_found(capped: DetectionConfig, skips: int) -> None:
    base = "copper lantern over the quarry at dawn with saffron sails and a willow by the harbour wall"
    texts = [f"{base} {i}" for i in range(40)] + [f"{base} {i}" for i in range(40)]
    # One document per batch: the caps of the index's tables decide, not the pairing within a batch.
    stream: Stream = [(offset, [(f"doc-{offset}", text, offset)]) for offset, text in enumerate(texts)]

    expected, merged = single_and_sharded(capped, stream, 3)

    assert merged == expected
    assert all(v.verdict == "duplicate" for v in expected[40:])
    if capped.method == "minhash":  # the content table files every document; SimHash's cap leaves some out
        assert all(v.similarity == 1.0 for v in expected[40:])
    single = make_detector(capped)
    for _, documents in stream:
        single.process_signed(signed_batch(capped, documents))
    assert single.hot_bucket_skips > skips


@pytest.mark.parametrize("method", ["minhash", "simhash", "combined"])
def test_the_largest_slot_count_judges_and_shards_as_documented(method: Method) -> None:
    # 65,536 slots, the setting's maximum: a cap of one document per slot, key and generation, so the
    # batches' crowding is settled slot by slot (the paths that read stored slots from 16-bit highs).
    config = DetectionConfig(method=method, threshold=0.6, max_hamming=6, index_slots=MAX_INDEX_SLOTS)
    texts = make_corpus(200, seed=5, copies=0.6)
    stream: Stream = [
        (offset, [(f"d{i}", texts[i], i) for i in range(start, start + 20)])
        for offset, start in enumerate(range(0, 200, 20))
    ]

    expected, merged = single_and_sharded(config, stream, 4)

    assert merged == expected
    assert sum(v.verdict == "duplicate" for v in expected) > 30


@pytest.mark.parametrize("slots", [1, 6])
def test_what_the_cap_admits_does_not_depend_on_batch_boundaries(slots: int) -> None:
    texts = make_corpus(300, seed=11, copies=0.6)
    config = DetectionConfig(threshold=0.6, max_bucket_size=3, index_slots=slots)
    skips = []
    for size in (1, 7, 300):
        detector = make_detector(config)
        for start in range(0, 300, size):
            documents = [(f"d{i}", texts[i], i) for i in range(start, min(300, start + size))]
            detector.process_signed(signed_batch(config, documents))
        skips.append(detector.hot_bucket_skips)
    assert skips[0] > 100
    assert skips == [skips[0]] * 3


def test_sequence_keys_order_batches_then_rows() -> None:
    earlier, later = sequence_keys(3, 100_000), sequence_keys(4, 1)
    assert np.all(np.diff(earlier) == 1) and earlier[-1] < later[0]
    with pytest.raises(ValueError, match="bits of row"):
        sequence_keys(0, (1 << 20) + 1)
