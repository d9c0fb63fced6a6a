"""Signer processes: batches read and signed on other cores while the worker does Kafka I/O and the index.

Each of ``signing_processes`` signers is a fresh interpreter
(:mod:`stream_dedup.worker.signer_process`) with two pipes; a batch is cut
into contiguous slices, one per signer, and the answers are put back together
in order, so the result is the one signing in place gives. Texts go in and
signatures come out as raw arrays (:mod:`stream_dedup.worker.signer_wire`).

At most one request is outstanding per signer, and a request is written only
once the answer to the one before has been read. So neither side can block
the other on a full pipe: a signer is always either reading its next request
or writing an answer that the worker is reading.

Failures:

- A signer that dies (kill -9, a crash) or answers nothing within
  ``ANSWER_SECONDS`` is noticed at the next exchange: its pipe ends, or the
  wait runs out. It is logged (ERROR "signer process N ... restarting it"),
  counted (``signer_restarts_total``), replaced, and its slice is signed
  again by the new signer. Signing is pure and nothing of the batch was
  produced yet, so the batch goes on as if nothing happened.
- If the replacement dies on the same slice too, the batch fails
  (:class:`~stream_dedup.worker.pipeline.SigningFailedError`): a record that
  kills signers is then isolated like any record that fails its batch.
- A signer that cannot start or answers its configuration wrongly (a
  replacement: twice in a row) raises
  :class:`~stream_dedup.errors.SignerStartError`: the worker exits 1 with the
  message (``signing_processes = 0`` signs in the worker's process). That is
  never blamed on a batch: records must not be dead-lettered for a broken
  installation.
- The worker exiting, even by kill -9, closes the signers' input pipes:
  they end on their own.
"""

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stream_dedup
from stream_dedup.config import DetectionConfig
from stream_dedup.errors import SignerStartError
from stream_dedup.kafka.messages import InputReading
from stream_dedup.lsh.generation import SignedBatch
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.pipeline import SigningStoppedError
from stream_dedup.worker.signer_wire import (
    PipeClosedError,
    config_message,
    read_frame,
    read_ready,
    read_response,
    request_message,
    write_frame,
)
from stream_dedup.worker.signing import SignedRecords

log = logging.getLogger(__name__)

#: A signer that answers nothing for this long is taken for dead (a batch takes well under a second to sign).
ANSWER_SECONDS = 120.0
#: Time a new signer has to import, build its hashers and answer ready.
START_SECONDS = 60.0
#: Time a signer has to exit once its input is closed, before it is killed.
_EXIT_SECONDS = 5.0
#: Pipe capacity asked for (Linux's default is 64 KiB, its usual ceiling for a process 1 MiB).
_PIPE_BYTES = 1 << 20


class _Signer:
    """One signer process and the request it holds."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.process: subprocess.Popen[bytes] | None = None
        #: The request written and not yet answered (kept to give a replacement).
        self.request: bytes | None = None
        self.records: list[Any] = []
        #: Why the last exchange failed, until the signer is replaced.
        self.failure: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else -1

    def describe_exit(self) -> str:
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return "is still running"
        return f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"

    @property
    def killed(self) -> bool:
        """Whether a signal ended the process: something outside it did (an out-of-memory kill, a kill -9)."""
        code = self.process.poll() if self.process is not None else None
        return code is not None and code < 0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class SignerPool:
    """``processes`` signer processes behind the :class:`~stream_dedup.worker.pipeline.Signers` interface.

    Outlives the worker's sessions (starting a signer takes about a second);
    :meth:`close` ends them.
    """

    def __init__(
        self,
        processes: int,
        detection: DetectionConfig,
        reading: InputReading,
        events: WorkerEvents,
        stopping: Callable[[], bool],
    ) -> None:
        if processes < 1:
            raise ValueError(f"a signer pool needs at least one process, got {processes}")
        self.detection = detection
        self.config = config_message(detection, reading)
        self.events = events
        self.stopping = stopping
        self.signers = [_Signer(number) for number in range(processes)]
        self._job = 0
        self._busy: list[_Signer] = []

    def start(self) -> None:
        """Start every signer and wait for each to answer ready; raises :class:`SignerStartError`."""
        for signer in self.signers:
            self._spawn(signer)
        for signer in self.signers:
            self._handshake(signer)
        log.info("%d signer processes started", len(self.signers))

    def submit(self, records: list[Any]) -> None:
        """Cut ``records`` into one slice per signer and send each its slice (a failed send is retried at collect)."""
        self.drop()
        self._job += 1
        share, extra = divmod(len(records), len(self.signers))
        sizes = [share + (number < extra) for number in range(len(self.signers))]
        start = 0
        # Every signer with records gets a slice; with no records at all, the first one an empty slice.
        for signer, size in zip(self.signers, sizes, strict=True):
            if size == 0 and self._busy:
                break
            signer.records, start = records[start : start + size], start + size
            signer.request = request_message(self._job, signer.records)
            self._busy.append(signer)
            self._send(signer)

    def collect(self) -> SignedRecords:
        """The batch submitted last, read and signed, its slices in order.

        Raises :class:`SigningStoppedError` if the worker is stopping while it waits,
        :class:`PipeClosedError` if a replacement signer fails the same slice.
        """
        waited = time.perf_counter()
        parts = [self._answer(signer) for signer in self._busy]
        self._busy = []
        self.events.signing_waited(time.perf_counter() - waited)
        if len(parts) == 1:
            return parts[0]
        return SignedRecords(
            [r for part in parts for r in part.records],
            [o for part in parts for o in part.outcomes],
            SignedBatch.concat([part.signed for part in parts]),
            [text for part in parts for text in part.texts],
            [block for part in parts for block in part.blocks],
        )

    def drop(self) -> None:
        """Wait for and discard the answers to the batch in flight (a signer that fails meanwhile is replaced later)."""
        for signer in self._busy:
            if signer.failure is None:
                try:
                    self._receive(signer)
                except (PipeClosedError, SigningStoppedError) as error:
                    signer.failure = str(error) or "stopped while answering"
            signer.request = None
        self._busy = []

    def close(self) -> None:
        """Close every signer's pipes (they exit), then wait for them; kill those that do not exit.

        Both pipes: a signer blocked writing an answer nobody will read then
        fails its write and exits at once, instead of waiting to be killed.
        """
        for signer in self.signers:
            if signer.process is not None:
                for pipe in (signer.process.stdin, signer.process.stdout):
                    if pipe is not None:
                        pipe.close()
        deadline = time.monotonic() + _EXIT_SECONDS
        for signer in self.signers:
            self._end(signer, max(0.1, deadline - time.monotonic()))

    def _still_waiting(self) -> bool:
        """Asked every half second while a signer has not answered: whether to give up (the worker stops).

        The loop is alive meanwhile, waiting on a signer that has
        ``ANSWER_SECONDS`` to answer, so the wait heartbeats: ``/healthz``
        (60 s) must not have the pod restarted before a hung signer (120 s)
        is found and replaced.
        """
        self.events.heartbeat()
        return self.stopping()

    def _answer(self, signer: _Signer) -> SignedRecords:
        if signer.failure is None:
            try:
                return self._receive(signer)
            except PipeClosedError as error:
                signer.failure = str(error)
        # Signing is pure and nothing of this batch was produced: a replacement signs the slice again.
        self._replace(signer)
        self._send(signer)
        if signer.failure is not None:
            raise PipeClosedError(f"signer process {signer.number} failed this batch twice: {signer.failure}")
        try:
            return self._receive(signer)
        except PipeClosedError as error:
            raise PipeClosedError(f"signer process {signer.number} failed this batch twice: {error}") from error

    def _receive(self, signer: _Signer) -> SignedRecords:
        assert signer.process is not None and signer.process.stdout is not None
        deadline = time.monotonic() + ANSWER_SECONDS
        message = read_frame(signer.process.stdout.fileno(), deadline, self._still_waiting)
        if message is None:
            raise SigningStoppedError()
        job, signed, log_lines = read_response(message, signer.records)
        if job != self._job:
            raise PipeClosedError(f"signer process {signer.number} answered job {job}, not {self._job}")
        signer.request = None
        for level, line in log_lines:
            log.log(level, "signer process %d: %s", signer.number, line)
        return signed

    def _send(self, signer: _Signer) -> None:
        assert signer.request is not None
        if signer.process is None or signer.process.poll() is not None:
            signer.failure = f"it {signer.describe_exit()}"
            return
        assert signer.process.stdin is not None
        try:
            write_frame(signer.process.stdin.fileno(), signer.request, time.monotonic() + ANSWER_SECONDS)
        except PipeClosedError as error:
            signer.failure = str(error)

    def _replace(self, signer: _Signer) -> None:
        """End a signer that failed (if it still runs) and start another in its place."""
        log.error(
            "signer process %d (pid %d) %s (%s); restarting it",
            signer.number,
            signer.pid,
            signer.describe_exit(),
            signer.failure,
            extra={"signer": signer.number},
        )
        self._end(signer, 0.0)
        self.events.signer_restarted()
        signer.failure = None
        self._spawn(signer)
        try:
            self._handshake(signer)
        except SignerStartError as error:
            # Once more: the replacement may itself have been killed while it started.
            log.error("%s; trying once more", error)
            self._spawn(signer)
            self._handshake(signer)

    def _spawn(self, signer: _Signer) -> None:
        # The package the worker runs, first on the path: the signer must run the same code.
        package_root = str(Path(stream_dedup.__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        signer.process = subprocess.Popen(
            [sys.executable, "-m", "stream_dedup.worker.signer_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert signer.process.stdin is not None and signer.process.stdout is not None
        for pipe in (signer.process.stdin, signer.process.stdout):
            os.set_blocking(pipe.fileno(), False)
            _widen(pipe.fileno())

    def _handshake(self, signer: _Signer) -> None:
        assert signer.process is not None and signer.process.stdin is not None and signer.process.stdout is not None
        deadline = time.monotonic() + START_SECONDS
        try:
            write_frame(signer.process.stdin.fileno(), self.config, deadline)
            ready = read_frame(signer.process.stdout.fileno(), deadline)
        except PipeClosedError as error:
            # Its output closed as it ended: a moment for its exit status, which says who ended it.
            with contextlib.suppress(subprocess.TimeoutExpired):
                signer.process.wait(1.0)
            exit_described, killed = signer.describe_exit(), signer.killed
            self._end(signer, 0.0)
            hint = (
                "something outside the worker ended it (the kernel's out-of-memory killer, or a kill -9): check "
                "the memory limit and the kernel log"
                if killed
                else "see its error above. Set signing_processes=0 to sign in the worker's process instead"
            )
            raise SignerStartError(
                f"signer process {signer.number} did not start ({error}; it {exit_described}); {hint}."
            ) from error
        assert ready is not None
        fingerprint, _ = read_ready(ready)
        if fingerprint != self.detection.fingerprint():
            self._end(signer, 0.0)
            raise SignerStartError(
                f"signer process {signer.number} runs other detection settings (fingerprint {fingerprint}, "
                f"not {self.detection.fingerprint()}): it imported another stream_dedup than the worker's. "
                "Check the installation, or set signing_processes=0."
            )

    def _end(self, signer: _Signer, grace: float) -> None:
        process = signer.process
        if process is None:
            return
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def _widen(fd: int) -> None:
    """Let a pipe hold a whole batch, where the system allows it.

    A request of 1,000 documents of 1 KB is about 1 MB: through a 64 KiB pipe
    it crosses in sixteen turns of the two processes, each waiting to be
    scheduled (milliseconds each on a busy machine); through 1 MiB in one.
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, _PIPE_BYTES)
