"""Ending an offline command on Ctrl-C or SIGTERM: a line saying so and the shell's status for the signal.

Without it, Ctrl-C ended ``dedup`` with a Python traceback, and SIGTERM (a
scheduler's timeout, ``kill``) without a word; neither said what the files
written so far hold.
"""

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: The signals that end an offline command as if it were asked to stop.
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A stopping signal arrived. A ``BaseException``, as ``KeyboardInterrupt`` is, so that no
    ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int, consequence: str = "") -> None:
        self.signum = signum
        self.exit_code = 128 + signum  # what a shell reports for a process the signal ended
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}: {consequence}" if consequence else f"interrupted by {name}")

    def saying(self, consequence: str) -> "Interrupted":
        """The same interruption, its message saying what it leaves behind (what the files written hold)."""
        return Interrupted(self.signum, consequence)


@contextmanager
def interruptible() -> Iterator[None]:
    """Within, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread; their handlers are restored after.

    A signal the process was started ignoring (``nohup``, a background job
    of a script) stays ignored, as the shell meant.
    """

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {number: signal.getsignal(number) for number in STOPPING_SIGNALS}
    # None: a handler not installed from Python, which could not be put back.
    taken = {number: handler for number, handler in previous.items() if handler not in (signal.SIG_IGN, None)}
    for number in taken:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in taken.items():
            signal.signal(number, handler)
