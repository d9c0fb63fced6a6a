"""Kafka plumbing of the stage: messages in and out, the changelog format, the assignor.

Nothing here decides duplicates (that is :mod:`stream_dedup.engine`) or runs
the loop (that is :mod:`stream_dedup.worker`).
"""
