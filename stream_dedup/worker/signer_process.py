"""A signer process: reads and signs batches for the worker that started it, until its input pipe closes.

Started by :class:`~stream_dedup.worker.signer_pool.SignerPool` as
``python -m stream_dedup.worker.signer_process``, a fresh interpreter (no
fork of a process that holds Kafka clients and threads). It reads the config
message on standard input, answers ready, then answers each request with its
response (:mod:`stream_dedup.worker.signer_wire`), one at a time, in order.

It ends when standard input reaches its end: the worker closed it, or died
(even by kill -9, the pipe closes with it), so a signer never outlives its
worker. SIGINT is ignored: Ctrl-C in a terminal reaches the whole process
group, and the worker decides when its signers stop.
"""

import contextlib
import logging
import os
import signal
import sys
from dataclasses import replace

from stream_dedup.engine.detector import make_detector
from stream_dedup.worker.collector import tune_collector
from stream_dedup.worker.signer_wire import (
    PipeClosedError,
    read_config,
    read_frame,
    read_request,
    ready_message,
    response_message,
    write_frame,
)
from stream_dedup.worker.signing import read_and_sign

_IN = 0


class _LogLines(logging.Handler):
    """Keeps what is logged while a batch is signed, to be sent to the worker with the response."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))


def serve(frames_in: int, frames_out: int) -> None:
    """Answer the config, then every request, until ``frames_in`` ends."""
    config = read_frame(frames_in)
    if config is None:
        return
    detection, reading = read_config(config)
    # The signer only signs: retention is left out, so that no index storage
    # is sized up front for documents it will never hold (signing never reads it).
    signer = make_detector(replace(detection, max_documents=None, max_age_seconds=None))
    write_frame(frames_out, ready_message(detection.fingerprint(), os.getpid()))
    lines = _LogLines()
    logging.getLogger("stream_dedup").addHandler(lines)
    while True:
        try:
            request = read_frame(frames_in)
        except PipeClosedError:
            return  # the worker closed the pipe, or died
        if request is None:
            return
        job, records = read_request(request)
        signed = read_and_sign(records, reading, signer, signer.config.settles_with_texts)
        write_frame(frames_out, response_message(job, signed, lines.lines))
        lines.lines.clear()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tune_collector()
    # Frames go out on a private copy of standard output; anything printed by
    # mistake goes to standard error instead of corrupting a frame.
    frames_out = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # The worker gone while we answered: nobody is left to tell.
    with contextlib.suppress(PipeClosedError):
        serve(_IN, frames_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
