"""Entry point of the ``stream-dedup`` command."""

import argparse
import os
import select
import sys
from collections.abc import Sequence

from stream_dedup import __version__
from stream_dedup.cli import (
    dedup_command,
    params_command,
    produce_sample_command,
    run_command,
    watch_command,
)
from stream_dedup.cli.interruption import Interrupted
from stream_dedup.errors import ConfigError, KafkaStartupError, StreamDedupError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stream-dedup", description="Streaming near-duplicate detection for text.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    dedup_command.add_parser(subparsers)
    params_command.add_parser(subparsers)
    run_command.add_parser(subparsers)
    produce_sample_command.add_parser(subparsers)
    watch_command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ConfigError as error:
        print(f"stream-dedup: {error}", file=sys.stderr)
        return 2
    except Interrupted as error:  # Ctrl-C or SIGTERM in an offline command
        print(f"stream-dedup: {error}", file=sys.stderr)
        return error.exit_code
    except KafkaStartupError as error:  # 3: brokers unreachable, 4: brokers refused us
        print(f"stream-dedup: {error}", file=sys.stderr)
        return error.exit_code
    except BrokenPipeError as error:
        if _standard_output_unread():
            return _end_quietly()
        print(f"stream-dedup: {error}", file=sys.stderr)
        return 1
    except (StreamDedupError, OSError) as error:
        print(f"stream-dedup: {error}", file=sys.stderr)
        return 1


def _standard_output_unread() -> bool:
    """Whether standard output is a pipe its reader has closed (``| head`` read what it wanted).

    Polling a pipe's writing end reports an error once no reader is left; a
    broken pipe of anything else (a socket) is an error to report.
    """
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _end_quietly() -> int:
    """End as Unix tools do when their reader leaves: no message, the status a shell gives SIGPIPE (141).

    What is still buffered for standard output can never be written, and
    flushing it at exit would raise again, so standard output becomes /dev/null.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
