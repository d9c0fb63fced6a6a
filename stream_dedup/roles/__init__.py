"""The roles of a sharded stage: signers, shards and a judge, each a read-process-write Kafka loop.

See ``docs/scale-out.md`` for the design. :mod:`~stream_dedup.roles.session`
runs any role (sessions, group membership, one transaction per step);
:mod:`~stream_dedup.roles.signer`, :mod:`~stream_dedup.roles.shard` and
:mod:`~stream_dedup.roles.judge` say what each one does with what it reads.
"""
