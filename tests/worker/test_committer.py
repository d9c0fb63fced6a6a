"""A batch's transaction committed in the background: one at a time, in order, its outcome collected by the loop."""

import threading
import time

import pytest
from kafka.errors import KafkaTimeoutError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.messages import InputReading
from stream_dedup.worker.batch import Destinations, JudgedBatch, judge_batch
from stream_dedup.worker.committer import BackgroundCommit
from stream_dedup.worker.signing import read_and_sign
from tests.corpus import make_corpus
from tests.worker.fakes import FakeProducer, document

CONFIG = DetectionConfig()
DESTINATIONS = Destinations("verdicts", "dead-letters", "stage.changelog", None)


class HeldCommits(FakeProducer):
    """A producer whose commit_transaction waits until the test lets it go, as a broker round trip does."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.committing = threading.Event()

    def commit_transaction(self) -> None:
        self.committing.set()
        assert self.release.wait(10), "the test never let the commit go"
        super().commit_transaction()


def committing_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "stream-dedup-commit"]


def judged(detector: Detector, first_offset: int, count: int, positions: dict[int, int]) -> JudgedBatch:
    """``count`` distinct documents at offsets ``first_offset``... of partition 0, judged."""
    texts = make_corpus(count, seed=first_offset)
    records = [document("documents", 0, first_offset + i, f"d{first_offset + i}", t) for i, t in enumerate(texts)]
    signed = read_and_sign(records, InputReading(), detector)
    return judge_batch(signed, detector, positions, DESTINATIONS, CONFIG.signature_fingerprint(), time.perf_counter())


def test_the_next_batch_is_judged_while_the_one_before_commits_and_transactions_never_overlap() -> None:
    producer, detector = HeldCommits(), Detector(CONFIG)
    commits = BackgroundCommit(producer, DESTINATIONS)
    first = judged(detector, 0, 3, {})
    commits.start(first, "group-metadata")
    assert producer.committing.wait(10)
    # The first commit is waiting on the "broker": the loop judges the next batch meanwhile.
    second = judged(detector, 3, 2, first.after)
    assert commits.in_flight is first and producer.committed == []
    with pytest.raises(RuntimeError, match="still in flight"):
        commits.start(second, "group-metadata")
    assert not commits.finished
    producer.release.set()
    while not commits.finished:
        time.sleep(0.01)
    done = commits.finish()
    assert done is not None and done[0] is first and done[1].report.verdicts.total() == 3
    commits.start(second, "group-metadata")
    assert commits.finish() is not None and commits.finish() is None
    assert len(committing_threads()) == 1  # one thread for the session, not one per batch
    commits.close()
    assert producer.calls.count("begin_transaction") == 2
    # Each transaction begins after the one before committed.
    begins = [i for i, call in enumerate(producer.calls) if call == "begin_transaction"]
    assert producer.calls.index("commit_transaction") < begins[1]
    assert [[s.key for s in batch if s.topic == "verdicts"] for batch in producer.committed] == [
        [b"d0", b"d1", b"d2"],
        [b"d3", b"d4"],
    ]
    assert second.after == {0: 5}


def test_a_failed_commit_is_raised_to_the_loop_once_and_the_batch_is_collected() -> None:
    producer = FakeProducer(fail_on="commit_transaction", error=KafkaTimeoutError("broker away"))
    detector = Detector(CONFIG)
    commits = BackgroundCommit(producer, DESTINATIONS)
    commits.start(judged(detector, 0, 2, {}), "group-metadata")
    with pytest.raises(KafkaTimeoutError, match="broker away"):
        commits.finish()
    assert commits.in_flight is None and commits.finish() is None
    commits.close()


def test_closing_waits_for_the_batch_in_flight_before_the_producer_is_closed() -> None:
    producer, detector = HeldCommits(), Detector(CONFIG)
    commits = BackgroundCommit(producer, DESTINATIONS)
    commits.start(judged(detector, 0, 1, {}), "group-metadata")
    assert producer.committing.wait(10)
    threading.Timer(0.2, producer.release.set).start()
    commits.close()
    assert producer.calls[-1] == "commit_transaction" and len(producer.committed) == 1
    assert commits.in_flight is None
    deadline = time.monotonic() + 10
    while committing_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert committing_threads() == []  # the thread ends with the session
