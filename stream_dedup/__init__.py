"""stream-dedup: streaming near-duplicate detection for text.

Data flows one way, and no layer imports a later one: ``text`` (normalise,
shingle, hash) -> ``sketch`` (MinHash signatures) -> ``lsh`` (band
parameters, the banded index) -> ``engine`` (probe, verify, insert, verdict;
snapshots) -> ``kafka`` (messages, the changelog format, clients) ->
``worker`` (the transactional loop, restore, snapshots, shutdown) -> ``ops``
(metrics, health, logging) -> ``cli``. The core (text to engine) never
imports Kafka. docs/how-it-works.md has the code map.
"""

__version__ = "0.1.0"
