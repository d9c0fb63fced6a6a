"""stream-dedup: streaming near-duplicate detection for text.

Data flows one way: ``text`` (normalise, shingle, hash) -> ``sketch`` (MinHash
signatures) -> ``lsh`` (band parameters, the banded index) -> ``engine``
(probe, verify, insert, verdict; snapshots) -> ``cli``. The core never imports
Kafka.
"""

__version__ = "0.1.0"
