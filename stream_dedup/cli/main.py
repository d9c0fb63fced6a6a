"""Entry point of the ``stream-dedup`` command."""

import argparse
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
    except KafkaStartupError as error:  # 3: brokers unreachable, 4: brokers refused us
        print(f"stream-dedup: {error}", file=sys.stderr)
        return error.exit_code
    except (StreamDedupError, OSError) as error:
        print(f"stream-dedup: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
