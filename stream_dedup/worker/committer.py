"""A batch's transaction, sent and committed in a thread of its own while the loop judges the next batch.

Committing waits on the broker: AddOffsetsToTxn, TxnOffsetCommit and EndTxn
are round trips, about 50 ms a batch on a local broker, in which the loop
thread would sit idle. So the loop judges batch N+1 (the index, the verdicts,
every record built: :func:`~stream_dedup.worker.batch.judge_batch`) while
batch N's transaction is sent and committed here.

Still one transaction at a time, in order: batch N+1's begins only once the
loop has collected N's outcome (:meth:`BackgroundCommit.finish`). What the
loop must do around it, since the index holds a batch before its commit
returns: collect the outcome before anything that reads the committed state
(a takeover, a standby's replay, a snapshot), and end the session if the
commit failed, as for any failed batch (the index then holds a batch whose
outputs were never committed, so only a restore gives back one that matches).
"""

import queue
import threading
from typing import Any

from kafka import KafkaProducer

from stream_dedup.worker.batch import CommittedBatch, Destinations, JudgedBatch, commit_batch

#: Longest wait for a commit still in flight when the session closes (seconds).
_CLOSE_WAIT_SECONDS = 10.0


class BackgroundCommit:
    """At most one batch's transaction in flight, committed by a thread of its own (one per session).

    The thread is started once and kept: starting one per batch cost the
    loop about 5 ms each time, waiting for the new thread to get the GIL.
    """

    def __init__(self, producer: KafkaProducer, destinations: Destinations) -> None:
        self.producer = producer
        self.destinations = destinations
        self._jobs: queue.SimpleQueue[tuple[JudgedBatch, Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._judged: JudgedBatch | None = None
        self._committed: CommittedBatch | None = None
        self._error: BaseException | None = None

    @property
    def in_flight(self) -> JudgedBatch | None:
        """The batch whose outcome has not been collected yet, if any."""
        return self._judged

    @property
    def finished(self) -> bool:
        """Whether a batch is in flight and its commit has returned (:meth:`finish` would not wait)."""
        return self._judged is not None and self._done.is_set()

    def start(self, judged: JudgedBatch, consumer_group: Any) -> None:
        """Send and commit ``judged`` in the background; the outcome before must have been collected."""
        if self._judged is not None:
            raise RuntimeError("a batch's commit is still in flight: collect it with finish() first")
        self._judged, self._committed, self._error = judged, None, None
        self._done.clear()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="stream-dedup-commit", daemon=True)
            self._thread.start()
        self._jobs.put((judged, consumer_group))

    def finish(self) -> tuple[JudgedBatch, CommittedBatch] | None:
        """Wait for the batch in flight: the batch and its commit, or None if none was.

        Raises what committing it raised; the batch is collected either way.
        """
        judged = self._judged
        if judged is None:
            return None
        self._done.wait()
        self._judged = None
        if self._error is not None:
            raise self._error
        assert self._committed is not None
        return judged, self._committed

    def close(self) -> None:
        """At the end of a session: wait a while for a batch still in flight, whatever its outcome; end the thread.

        So that the producer is not closed under a commit. If it is still not
        done, closing the producer fails it, and its transaction is aborted by
        the next session's ``init_transactions()`` or times out on the broker.
        """
        if self._judged is not None:
            self._done.wait(_CLOSE_WAIT_SECONDS)
            self._judged = None
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            judged, consumer_group = job
            try:
                self._committed = commit_batch(judged, self.producer, consumer_group, self.destinations)
            except BaseException as error:  # handed to the loop's thread by finish()
                self._error = error
            finally:
                self._done.set()
