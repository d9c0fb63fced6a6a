"""The ``stream-dedup`` command.

``run`` is the Kafka stage; ``dedup`` and ``params`` work offline; ``produce-sample``
and ``watch`` feed and read topics for the demo.
"""
