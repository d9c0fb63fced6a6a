"""Snapshots: a restored detector carries on exactly where the saved one was.

Damaged or foreign files are refused as corrupt, snapshots made with other
signature parameters as incompatible, and a write never leaves a torn or
stray file behind.
"""

import json
import os
import random
import re
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dedup.config import IMPLIED_SIGNATURE_PARAMETERS, WORD_BREAKS, DetectionConfig, Method
from stream_dedup.engine import Detector, Verdict, load_snapshot, make_detector, save_snapshot
from stream_dedup.engine.snapshot import _PREFIX, END_MAGIC, MAGIC, capture_snapshot
from stream_dedup.errors import CorruptSnapshotError, IncompatibleSnapshotError
from tests.corpus import make_corpus
from tests.traced_memory import traced

VOCABULARY = ["harbour", "lantern", "meadow", "copper", "thistle", "orbit", "velvet", "quarry", "saffron", "willow"]


def words_text(seed: int, count: int = 40) -> str:
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(6, 9))) for _ in range(count)
    )


def fed(config: DetectionConfig, texts: list[str], prefix: str = "d") -> Detector:
    detector = Detector(config)
    if not texts:
        return detector
    detector.process(
        [f"{prefix}{i}" for i in range(len(texts))], texts, event_times=[float(i) for i in range(len(texts))]
    )
    return detector


def process(detector: Detector, ids: list[str], texts: list[str], time: float = 1000.0) -> list[Verdict]:
    return detector.process(ids, texts, event_times=[time] * len(ids))


def raises_naming(error: type[Exception], path: Path) -> Any:
    return pytest.raises(error, match=re.escape(str(path)))


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A snapshot of a detector that has seen 20 documents."""
    path = tmp_path / "index.snap"
    save_snapshot(fed(DetectionConfig(), [words_text(i) for i in range(20)]), path)
    return path


# --- round trips ------------------------------------------------------------------------

sentences = st.lists(st.sampled_from(VOCABULARY), min_size=4, max_size=14).map(" ".join)
configs = st.sampled_from(
    [
        DetectionConfig(),
        DetectionConfig(threshold=0.5, scheme="classic", num_perm=64),
        DetectionConfig(threshold=0.6, shingle_unit="word", shingle_size=2),
        DetectionConfig(threshold=0.7, bands=32, rows_per_band=4, max_bucket_size=2),
        DetectionConfig(max_documents=6),
        DetectionConfig(threshold=0.6, verification="exact", max_documents=6),
        DetectionConfig(containment_threshold=0.7, max_documents=6),
        DetectionConfig(containment_threshold=0.8, verification="exact", max_bucket_size=2),
    ]
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Documents before the snapshot and after it; later ones often copy or extend earlier ones."""
    before = draw(st.lists(sentences, max_size=20))
    after: list[str] = []
    for _ in range(draw(st.integers(1, 15))):
        choice = draw(st.sampled_from(["fresh", "copy", "extend"]))
        if choice == "fresh":
            after.append(draw(sentences))
        else:
            if not before + after:
                continue
            base = draw(st.sampled_from(before + after))
            after.append(base if choice == "copy" else f"{base} {draw(st.sampled_from(VOCABULARY))}")
    return before, after


@settings(max_examples=60, deadline=None)
@given(config=configs, stream=streams(), split=st.integers(0, 15))
def test_restored_detector_gives_the_same_verdicts_as_the_original(
    config: DetectionConfig, stream: tuple[list[str], list[str]], split: int
) -> None:
    before, after = stream
    original = fed(config, before)
    with tempfile.TemporaryDirectory() as directory:
        save_snapshot(original, Path(directory) / "index.snap")
        restored, _ = load_snapshot(Path(directory) / "index.snap", config)

    # Two batches; empty ones are skipped because Detector.process([], []) raises ValueError.
    for batch in filter(None, (after[:split], after[split:])):
        ids = [f"a{len(original)}-{i}" for i in range(len(batch))]
        assert process(restored, ids, batch) == process(original, ids, batch)
    assert restored.stats == original.stats
    assert len(restored) == len(original)


def test_restored_detector_finds_copies_of_documents_saved_before(saved: Path) -> None:
    restored, _ = load_snapshot(saved, DetectionConfig())

    verdicts = process(restored, ["again-3", "new"], [words_text(3), words_text(999)])

    assert verdicts == [Verdict("again-3", "duplicate", "d3", 1.0), Verdict("new", "unique")]


def test_statistics_and_length_survive_a_round_trip(tmp_path: Path) -> None:
    text = words_text(1)
    detector = fed(DetectionConfig(), [text, text, words_text(2), text + " tail"])
    save_snapshot(detector, tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", DetectionConfig())

    assert len(restored) == 4
    assert restored.stats == detector.stats
    assert (restored.stats.documents, restored.stats.duplicates) == (4, 2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_metadata_round_trips(tmp_path: Path, metadata: dict[str, Any]) -> None:
    save_snapshot(fed(DetectionConfig(), [words_text(1)]), tmp_path / "index.snap", metadata)

    _, loaded = load_snapshot(tmp_path / "index.snap", DetectionConfig())

    assert loaded == metadata


def test_metadata_defaults_to_an_empty_dict(saved: Path) -> None:
    assert load_snapshot(saved, DetectionConfig())[1] == {}


def test_a_restore_peaks_near_the_size_of_the_index_it_restores(tmp_path: Path) -> None:
    """The deploy leaves a quarter of headroom beside the index. Holding the file's bytes and the arrays copied
    out of them, and copies of those in the index, a restore peaked at twice the index: one at its limit was
    killed at every restart, past any help of an older snapshot."""
    config = DetectionConfig(verification="exact")
    texts = make_corpus(2000, seed=1)
    detector = make_detector(config)
    for round_ in range(10):
        detector.process([f"r{round_}-{i}" for i in range(2000)], texts, event_times=[1.0] * 2000)
    path = tmp_path / "index.snap"
    size = save_snapshot(detector, path)
    del detector

    (restored, _), _, peak = traced(lambda: load_snapshot(path, config))

    assert len(restored) == 20_000
    assert peak < 1.25 * size, f"a restore of a {size / 1e6:.0f} MB snapshot peaked at {peak / 1e6:.0f} MB"


def test_save_returns_the_size_of_the_file_written(tmp_path: Path) -> None:
    size = save_snapshot(fed(DetectionConfig(), [words_text(1)]), tmp_path / "index.snap")

    assert size == (tmp_path / "index.snap").stat().st_size


# --- retention --------------------------------------------------------------------------


def _generations(detector: Detector) -> list[tuple[int, int]]:
    return [(g.base_seq, len(g)) for g in detector.index.generations]


def _fed_in_batches(config: DetectionConfig, batches: int) -> Detector:
    detector = Detector(config)
    for b in range(batches):
        process(detector, [f"d{b}-{i}" for i in range(3)], [words_text(10 * b + i) for i in range(3)], time=float(b))
    return detector


def test_retention_state_survives_a_round_trip(tmp_path: Path) -> None:
    config = DetectionConfig(max_documents=20)
    # 33 documents in batches of 3: generations of 6 roll over, the two oldest are evicted.
    original = _fed_in_batches(config, 11)
    assert _generations(original) == [(12, 6), (18, 6), (24, 6), (30, 3)]
    save_snapshot(original, tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", config)

    assert _generations(restored) == _generations(original)
    assert restored.index.evicted_documents == original.index.evicted_documents == 12
    assert restored.index.history.newest_event_time == original.index.history.newest_event_time == 10.0
    assert len(restored) == 21
    # An evicted document is forgotten, a retained one is found, by both.
    for detector in (original, restored):
        assert process(detector, ["e", "r"], [words_text(0), words_text(50)]) == [
            Verdict("e", "unique"),
            Verdict("r", "duplicate", "d5-0", 1.0),
        ]
    # Both roll over and evict alike from here on.
    for b in range(11, 16):
        ids, texts = [f"d{b}-{i}" for i in range(3)], [words_text(10 * b + i) for i in range(3)]
        assert process(restored, ids, texts, time=float(b)) == process(original, ids, texts, time=float(b))
    assert _generations(restored) == _generations(original)
    assert restored.index.evicted_documents == original.index.evicted_documents


def test_age_retention_state_survives_a_round_trip(tmp_path: Path) -> None:
    config = DetectionConfig(max_age_seconds=8.0)
    original = _fed_in_batches(config, 7)  # event times 0..6, a generation per 2 seconds
    save_snapshot(original, tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", config)

    assert _generations(restored) == _generations(original)
    assert restored.index.history.newest_event_time == 6.0
    # Before a document at time 20 is judged, every generation older than 12 s expires, in both:
    # its copy at time 0 is forgotten; its own copy at time 20 is not.
    for detector in (original, restored):
        assert process(detector, ["late"], [words_text(0)], time=20.0) == [Verdict("late", "unique")]
        assert process(detector, ["later"], [words_text(0)], time=20.0) == [Verdict("later", "duplicate", "late", 1.0)]
    assert _generations(restored) == _generations(original) == [(21, 2)]
    assert restored.index.evicted_documents == original.index.evicted_documents == 21


def test_snapshot_of_an_empty_detector_round_trips(tmp_path: Path) -> None:
    save_snapshot(Detector(DetectionConfig()), tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", DetectionConfig())

    assert len(restored) == 0
    assert process(restored, ["a"], [words_text(1)]) == [Verdict("a", "unique")]


def test_snapshot_taken_right_after_a_generation_rollover_round_trips(tmp_path: Path) -> None:
    config = DetectionConfig(max_documents=20)
    original = _fed_in_batches(config, 2)
    assert _generations(original) == [(0, 6), (6, 0)]

    save_snapshot(original, tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", config)
    assert _generations(restored) == [(0, 6), (6, 0)]
    for detector in (original, restored):
        assert process(detector, ["again", "new"], [words_text(11), words_text(999)]) == [
            Verdict("again", "duplicate", "d1-1", 1.0),
            Verdict("new", "unique"),
        ]
    assert _generations(restored) == _generations(original) == [(0, 6), (6, 2)]


# --- corrupt and foreign files ----------------------------------------------------------


@pytest.mark.parametrize(
    "keep", ["nothing", "7 bytes", "100 bytes", "half", "all but the end marker", "all but 1 byte"]
)
def test_truncated_snapshot_is_refused_as_corrupt_naming_the_file(saved: Path, keep: str) -> None:
    blob = saved.read_bytes()
    lengths = {
        "nothing": 0,
        "7 bytes": 7,
        "100 bytes": 100,
        "half": len(blob) // 2,
        "all but the end marker": len(blob) - len(END_MAGIC),
        "all but 1 byte": len(blob) - 1,
    }
    saved.write_bytes(blob[: lengths[keep]])

    with raises_naming(CorruptSnapshotError, saved):
        load_snapshot(saved, DetectionConfig())


def _flip(path: Path, position: int, bit: int) -> None:
    blob = bytearray(path.read_bytes())
    blob[position] ^= 1 << bit
    path.write_bytes(bytes(blob))


def _regions(path: Path) -> dict[str, int]:
    blob = path.read_bytes()
    _, _, header_length = _PREFIX.unpack_from(blob)
    header_end = _PREFIX.size + header_length
    arrays_end = len(blob) - len(END_MAGIC) - 16
    return {
        "magic": 0,
        "format version": 8,
        "header length": 12,
        "header JSON": _PREFIX.size + header_length // 2,
        "first array byte": header_end,
        "array data": (header_end + arrays_end) // 2,
        "last array byte": arrays_end - 1,
        "checksum": arrays_end + 5,
        "end marker": len(blob) - 1,
    }


@pytest.mark.parametrize(
    "region",
    [
        "magic",
        "format version",
        "header length",
        "header JSON",
        "first array byte",
        "array data",
        "last array byte",
        "checksum",
        "end marker",
    ],
)
def test_flipped_bit_is_refused_as_corrupt_naming_the_file(saved: Path, region: str) -> None:
    _flip(saved, _regions(saved)[region], bit=3)

    with raises_naming(CorruptSnapshotError, saved):
        load_snapshot(saved, DetectionConfig())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0.0, 1.0, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_bit_anywhere_is_refused_as_corrupt(tmp_path: Path, where: float, bit: int) -> None:
    path = tmp_path / "index.snap"
    save_snapshot(fed(DetectionConfig(), [words_text(i) for i in range(5)]), path)
    _flip(path, int(where * path.stat().st_size), bit)

    with raises_naming(CorruptSnapshotError, path):
        load_snapshot(path, DetectionConfig())


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello, I am a text file\n",
        b'{"id": "a", "text": "a JSON-lines file"}\n' * 50,
        random.Random(0).randbytes(4096),
        MAGIC + bytes(200),
        MAGIC + bytes(200) + END_MAGIC,
    ],
    ids=["empty", "text", "json lines", "random bytes", "magic then zeros", "both markers around zeros"],
)
def test_a_file_that_is_not_a_snapshot_is_refused_as_corrupt_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "index.snap"
    path.write_bytes(content)

    with raises_naming(CorruptSnapshotError, path):
        load_snapshot(path, DetectionConfig())


def test_a_fifo_under_a_snapshot_name_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """Read as a file, it blocked until a writer came: the stage hung at its restore, saying nothing."""
    path = tmp_path / "snapshot-000000000010.sds"
    os.mkfifo(path)
    refused: list[str] = []

    def load() -> None:
        with raises_naming(CorruptSnapshotError, path) as refusal:
            load_snapshot(path, DetectionConfig())
        refused.append(str(refusal.value))

    reader = threading.Thread(target=load, daemon=True)  # daemon: a reader that hangs fails the test, not the run
    reader.start()
    reader.join(60)
    assert refused and "not a regular file" in refused[0]


# --- compatibility ----------------------------------------------------------------------

BANDED: dict[str, Any] = {"bands": 12, "rows_per_band": 8}


@pytest.mark.parametrize(
    "saved_with, loaded_with, parameter",
    [
        ({}, {"num_perm": 64}, "num_perm"),
        ({}, {"seed": 2}, "seed"),
        ({}, {"shingle_size": 4}, "shingle_size"),
        ({}, {"shingle_unit": "word"}, "shingle_unit"),
        ({}, {"scheme": "classic"}, "scheme"),
        ({}, {"strip_punctuation": True}, "strip_punctuation"),
        ({}, {"fold_lookalikes": True}, "fold_lookalikes"),
        ({"fold_lookalikes": True}, {"fold_lookalikes": False}, "fold_lookalikes"),
        (BANDED, {"bands": 32, "rows_per_band": 4}, "bands"),
        (BANDED, {"bands": 12, "rows_per_band": 7}, "rows_per_band"),
        ({}, {"sketch_bits": 2048}, "sketch_bits"),
        ({}, BANDED, "bands"),
        ({}, {"verification": "exact"}, "verification"),
    ],
)
def test_snapshot_made_with_other_signature_parameters_is_refused_naming_the_parameter(
    tmp_path: Path, saved_with: dict[str, Any], loaded_with: dict[str, Any], parameter: str
) -> None:
    path = tmp_path / "index.snap"
    saved_config = DetectionConfig(**saved_with)
    save_snapshot(fed(saved_config, [words_text(1)]), path)
    running = DetectionConfig(**{**saved_with, **loaded_with})

    with raises_naming(IncompatibleSnapshotError, path) as error:
        load_snapshot(path, running)

    # A parameter named only when on (fold_lookalikes) is off where it is not named.
    stored_value = saved_config.signature_parameters().get(parameter, IMPLIED_SIGNATURE_PARAMETERS.get(parameter))
    running_value = running.signature_parameters().get(parameter, IMPLIED_SIGNATURE_PARAMETERS.get(parameter))
    assert f"made with {parameter}={stored_value!r} but this run uses {parameter}={running_value!r}" in str(error.value)


def test_a_word_snapshot_from_before_words_broke_around_scripts_without_spaces_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its signatures of Chinese, Japanese or Thai text are of other words than this run's."""
    config = DetectionConfig(shingle_unit="word")
    path = tmp_path / "index.snap"
    named_now = DetectionConfig.signature_parameters
    with monkeypatch.context() as before:
        before.setattr(
            DetectionConfig,
            "signature_parameters",
            lambda self: {k: v for k, v in named_now(self).items() if k != "word_breaks"},
        )
        save_snapshot(fed(config, [words_text(1)]), path)

    with raises_naming(IncompatibleSnapshotError, path) as error:
        load_snapshot(path, config)

    assert f"made with word_breaks='spaces' but this run uses word_breaks={WORD_BREAKS!r}" in str(error.value)
    assert "word_breaks" not in DetectionConfig().signature_parameters()  # character indexes keep theirs


def test_a_different_threshold_is_accepted_and_the_running_one_applies(tmp_path: Path) -> None:
    banding: dict[str, Any] = {"bands": 32, "rows_per_band": 4}
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(6, 9))) for _ in range(60)]
    # A letter changed in every third word: estimated similarity about 0.69.
    altered = " ".join(w[:-1] + "q" if i % 3 == 0 else w for i, w in enumerate(words))
    save_snapshot(fed(DetectionConfig(threshold=0.8, **banding), [" ".join(words)]), tmp_path / "index.snap")

    strict, _ = load_snapshot(tmp_path / "index.snap", DetectionConfig(threshold=0.8, **banding))
    lenient, _ = load_snapshot(tmp_path / "index.snap", DetectionConfig(threshold=0.6, **banding))

    assert lenient.config.threshold == 0.6
    assert process(strict, ["altered"], [altered]) == [Verdict("altered", "unique")]
    (verdict,) = process(lenient, ["altered"], [altered])
    assert (verdict.verdict, verdict.duplicate_of) == ("duplicate", "d0")
    assert verdict.similarity is not None
    assert 0.6 <= verdict.similarity < 0.8


@pytest.mark.parametrize("method", ["minhash", "simhash"])
def test_a_restored_index_follows_the_running_retention(tmp_path: Path, method: Method) -> None:
    """Retention is not a signature parameter: a restart may change it (a SimHash index kept the snapshot's)."""
    texts = make_corpus(600, seed=9)
    first = make_detector(DetectionConfig(method=method))
    first.process([f"d{i}" for i in range(400)], texts[:400])
    save_snapshot(first, tmp_path / "index.snap")

    restored, _ = load_snapshot(tmp_path / "index.snap", DetectionConfig(method=method, max_documents=100))
    assert len(restored) == 400
    for start in range(400, 600, 25):
        restored.process([f"d{i}" for i in range(start, start + 25)], texts[start : start + 25])

    assert restored.evicted_documents >= 475
    assert 100 <= len(restored) <= 125


def test_a_simhash_index_restored_under_another_max_hamming_judges_as_its_changelog_replayed_would(
    tmp_path: Path,
) -> None:
    """``max_hamming`` is no signature parameter: the stage's changelog replays under a new one, so its snapshot
    must load under it too (the tables are rebuilt), not stop the restart that a missing snapshot would not."""
    texts = make_corpus(600, seed=4)
    batches = [(f"d{i}", texts[i]) for i in range(600)]
    first = make_detector(DetectionConfig(method="simhash"))
    first.process([i for i, _ in batches[:300]], [t for _, t in batches[:300]])
    save_snapshot(first, tmp_path / "index.snap")
    wider = DetectionConfig(method="simhash", max_hamming=6)
    replayed = make_detector(wider)
    replayed.process([i for i, _ in batches[:300]], [t for _, t in batches[:300]])

    restored, _ = load_snapshot(tmp_path / "index.snap", wider)

    later = [i for i, _ in batches[300:]], [t for _, t in batches[300:]]
    verdicts = restored.process(*later)
    assert verdicts == replayed.process(*later)
    assert any((v.hamming_distance or 0) > 3 for v in verdicts)  # found only under the new distance


def test_a_threshold_with_the_same_chosen_banding_is_accepted(saved: Path) -> None:
    assert DetectionConfig(threshold=0.7999).banding() == DetectionConfig(threshold=0.8).banding()

    restored, _ = load_snapshot(saved, DetectionConfig(threshold=0.7999))

    assert len(restored) == 20


def test_a_threshold_that_changes_the_chosen_banding_is_refused_naming_bands(saved: Path) -> None:
    # 0.85 chooses 15 bands of 8 rows where 0.8 chose 16 of 6: the band tables do not fit.
    with raises_naming(IncompatibleSnapshotError, saved) as error:
        load_snapshot(saved, DetectionConfig(threshold=0.85))

    assert "made with bands=16 but this run uses bands=15" in str(error.value)
    # The operator moved the threshold: the message says how to keep the index under the new one.
    assert "bands=16 and rows_per_band=6 keep it" in str(error.value)
    assert "run with a new group_id" in str(error.value)  # moving it away alone meets the changelog's refusal


def test_a_containment_threshold_that_changes_the_banding_says_which_settings_keep_it(tmp_path: Path) -> None:
    save_snapshot(fed(DetectionConfig(containment_threshold=0.8), [words_text(1)]), tmp_path / "index.snap")
    with raises_naming(IncompatibleSnapshotError, tmp_path / "index.snap") as error:
        load_snapshot(tmp_path / "index.snap", DetectionConfig(containment_threshold=0.9))

    assert "containment_bands=17 and containment_rows_per_band=2 keep it" in str(error.value)


# --- atomic writes ----------------------------------------------------------------------


def test_a_write_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    save_snapshot(fed(DetectionConfig(), [words_text(1)]), tmp_path / "index.snap")
    save_snapshot(fed(DetectionConfig(), [words_text(2)]), tmp_path / "index.snap")

    assert os.listdir(tmp_path) == ["index.snap"]


def test_a_write_replaces_an_existing_snapshot_as_a_whole(tmp_path: Path) -> None:
    path = tmp_path / "index.snap"
    save_snapshot(fed(DetectionConfig(), [words_text(i) for i in range(3)]), path, {"version": "old"})
    old_bytes = path.read_bytes()

    with open(path, "rb") as reader_of_the_old_file:
        save_snapshot(fed(DetectionConfig(), [words_text(i) for i in range(7)]), path, {"version": "new"})
        # A reader that had the old snapshot open keeps reading it whole: the new one was
        # renamed over it, not written into it.
        assert reader_of_the_old_file.read() == old_bytes

    restored, metadata = load_snapshot(path, DetectionConfig())
    assert (len(restored), metadata) == (7, {"version": "new"})
    assert os.listdir(tmp_path) == ["index.snap"]


def test_the_saved_configuration_is_recorded_in_the_header(saved: Path) -> None:
    # The header is JSON right after the fixed prefix; it records the full configuration.
    blob = saved.read_bytes()
    _, _, header_length = _PREFIX.unpack_from(blob)
    header = json.loads(blob[_PREFIX.size : _PREFIX.size + header_length])

    assert header["config"] == asdict(DetectionConfig())
    assert header["parameters"] == DetectionConfig().signature_parameters()


def test_captured_image_is_unchanged_by_later_batches(tmp_path: Path) -> None:
    config = DetectionConfig()
    texts = make_corpus(300, seed=5)
    ids = [f"d{i}" for i in range(300)]
    first, later = slice(0, 200), slice(200, 300)
    detector = Detector(config)
    detector.process(ids[first], texts[first], event_times=[0.0] * 200)
    image = capture_snapshot(detector)
    expected_later = detector.process(ids[later], texts[later], event_times=[0.0] * 100)
    image.write(tmp_path / "captured")
    restored, _ = load_snapshot(tmp_path / "captured", config)
    # The image holds the state at capture: the later batch gets the same verdicts again.
    assert len(restored) == 200
    assert restored.process(ids[later], texts[later], event_times=[0.0] * 100) == expected_later


# --- containment ------------------------------------------------------------------------


def test_containment_state_survives_a_round_trip(tmp_path: Path) -> None:
    config = DetectionConfig(containment_threshold=0.8)
    article = " ".join(words_text(seed, 30) for seed in (1, 2, 3))
    detector = fed(config, [article, words_text(4)])
    save_snapshot(detector, tmp_path / "index.snap")
    restored, _ = load_snapshot(tmp_path / "index.snap", config)
    excerpt = " ".join(article.split(" ")[:55])
    expanded = f"{words_text(4)} {words_text(5, 15)}"
    ids = ["excerpt", "expanded"]
    verdicts = process(restored, ids, [excerpt, expanded])
    assert verdicts == process(detector, ids, [excerpt, expanded])
    assert [(v.verdict, v.duplicate_of) for v in verdicts] == [("contained", "d0"), ("contains", "d1")]
    assert restored.memory_bytes() == detector.memory_bytes()


@pytest.mark.parametrize(
    ("made_with", "loaded_with", "named"),
    [
        (DetectionConfig(containment_threshold=0.8), DetectionConfig(), "containment_partitions_per_doubling"),
        (DetectionConfig(), DetectionConfig(containment_threshold=0.8), "containment_partitions_per_doubling"),
        # Another containment threshold that gives another banding (17 x 2 against 29 x 3).
        (DetectionConfig(containment_threshold=0.8), DetectionConfig(containment_threshold=0.9), "bands"),
    ],
)
def test_a_snapshot_with_other_containment_state_is_refused_naming_it(
    tmp_path: Path, made_with: DetectionConfig, loaded_with: DetectionConfig, named: str
) -> None:
    save_snapshot(fed(made_with, [words_text(1)]), tmp_path / "index.snap")
    with pytest.raises(IncompatibleSnapshotError, match=f"made with {named}="):
        load_snapshot(tmp_path / "index.snap", loaded_with)


def test_a_snapshot_made_before_invisible_characters_were_ignored_says_to_run_with_the_setting_off(
    tmp_path: Path,
) -> None:
    """An index of then is one with the setting off: its fingerprint names no such parameter."""
    made_then = DetectionConfig(ignore_invisible=False)
    assert "ignore_invisible" not in made_then.signature_parameters()
    save_snapshot(fed(made_then, [words_text(1)]), tmp_path / "index.snap")
    with pytest.raises(IncompatibleSnapshotError, match="made with ignore_invisible=False but this run uses "):
        load_snapshot(tmp_path / "index.snap", DetectionConfig())
    restored, _ = load_snapshot(tmp_path / "index.snap", made_then)
    assert len(restored) == 1
