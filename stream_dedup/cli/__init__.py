"""The ``stream-dedup`` command.

``run`` is the Kafka stage; ``dedup`` and ``params`` work offline; ``produce-sample``
feeds a topic with the sample corpus and ``watch`` shows what the stage decides.
"""
