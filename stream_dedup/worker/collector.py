"""Python's garbage collector tuned for a stage's process: a young collection per batch, not per 700 objects.

A batch allocates tens of thousands of short-lived containers (the fetched
records, the tuples and records made from them, the verdicts' records). With
the default thresholds (700, 10, 10) the young generation is collected every
700 of them; the batch's records still alive each time are moved up a
generation, where they are walked again, and every full collection walks
every tracked object the process holds (the text cache's groups, the text
spool's map). Almost none of it is garbage the collector is needed for:
reference counting frees the batch's objects when it is done. Measured on the
full ``benchmarks/kafka_stage.py`` run, the stage's process took 46 to 49 µs
of CPU a document with the default thresholds, 43 with these, and 43 with no
collector at all. Objects in reference cycles (rare here) still go, after
at most 50,000 allocations instead of 700.
"""

import gc

#: Young-generation allocations between collections, and collections between older ones.
COLLECTOR_THRESHOLDS = (50_000, 20, 20)


def tune_collector() -> None:
    """Set the thresholds for this whole process: called where a process becomes a stage (or a signer)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
