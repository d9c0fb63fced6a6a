"""Command-line interface: ``stream-dedup dedup`` and ``stream-dedup params``."""
