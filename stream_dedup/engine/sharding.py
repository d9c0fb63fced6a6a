"""One index split over N shards: each answers for every document and stores its own; the judge merges.

PLSH's shape (Sundaram et al., VLDB 2013): documents are sharded, probes are
broadcast. Every shard sees every batch of the stream in the same order (in
the Kafka stage: the sequenced topic) and, for each document, reports its
best match among the documents it holds; it then inserts the documents it
owns. :func:`merge_answers`, the judge's rule, picks each document's best
match over all shards: the highest similarity, then the earliest.

Merged, the answers are the verdicts one :class:`~stream_dedup.engine.Detector`
gives on the same batches (the property ``tests/engine/test_sharding.py``
checks), because:

- a candidate is a pair sharing a band key, a property of the pair, and each
  stored document is on exactly one shard;
- a pair's similarity depends only on its two signatures;
- a document's earlier rows in its own batch are paired exactly as one index
  pairs them (over the whole batch), each shard keeping those it owns;
- documents are named by their *sequence key* (``offset << ROW_BITS | row``:
  the batch's place in the stream and the row in it), which orders them as
  one index's sequence numbers do, so ties go to the same earliest match;
- similarities travel unrounded, so no rounding makes a tie that one index
  would not see.

With containment on, a shard also answers, for each document without a
near-duplicate there, its best containment match there (``contained`` if it
has one, else ``contains``), and the judge takes a near-duplicate from any
shard first, then the best ``contained``, then the best ``contains``: one
detector's order, since a document is judged for containment only when no
near-duplicate exists, and each shard judges every candidate pair whose
earlier document it holds.

Ownership follows the content: the content key (``lsh.band_keys.content_slots``)
of methods minhash and combined, the SimHash fingerprint of method simhash
(``lsh.hamming.fingerprint_slots``). All exact copies of a text live on one
shard, where the content table (or an exact fingerprint) finds them as in one
index. The two things a shard would otherwise count on its own documents only
are counted as one index counts them:

- the hot-bucket cap (for simhash: the hot-cluster cap) is counted per slot
  (``index_slots``, which the number of shards must divide), so each slot,
  living whole on one shard, is capped exactly as in one index;
- retention is decided on the whole stream: a shard measures every batch
  (:class:`~stream_dedup.lsh.retention.Stretch`), owned or not, and seals
  and evicts its own generations at the same batches as one index.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.containment import BestContainments
from stream_dedup.engine.detection import matches_of
from stream_dedup.engine.detector import Detector, Probe, band_index
from stream_dedup.engine.simhash_detector import HammingProbe, SimHashDetector, hamming_index
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict, VerdictKind
from stream_dedup.errors import ConfigError
from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.generation import NO_SOURCE, IndexedBatch
from stream_dedup.lsh.retention import GenerationList, Retention, Stretch

#: Bits of the row in a sequence key (a batch holds at most 100,000 documents).
ROW_BITS = 20

#: What an answer row says of its match (:attr:`ShardAnswer.kinds` indexes it), in the judge's order of preference.
ANSWER_KINDS: tuple[VerdictKind, ...] = ("duplicate", "contained", "contains")

SequenceKeys = npt.NDArray[np.int64]
_Scalar = TypeVar("_Scalar", bound=np.generic)


def sequence_keys(offset: int, rows: int) -> SequenceKeys:
    """The sequence keys of the ``rows`` documents of the batch at ``offset`` of the stream."""
    if not 0 <= rows <= 1 << ROW_BITS:
        raise ValueError(f"a batch of {rows} documents does not fit {ROW_BITS} bits of row")
    return (np.int64(offset) << np.int64(ROW_BITS)) + np.arange(rows, dtype=np.int64)


@dataclass(frozen=True)
class ShardAnswer:
    """One shard's best match for each document of a stretch of the stream that has one there.

    Attributes:
        keys: the sequence key of each document answered for.
        match_keys: the sequence key of its best match on this shard.
        similarity: the match's similarity, unrounded (float64).
        distances: the Hamming distance of the pair (method ``combined``), else ``None``.
        match_sources: the match's source (``NO_SOURCE`` if it had none).
        match_ids: the match's id.
        kinds: with containment on, what the match is (an index into
            :data:`ANSWER_KINDS`), else ``None`` (every match a near-duplicate).
        containment: with containment on, the containment of a
            ``contained`` or ``contains`` match, unrounded (0 for a
            near-duplicate), else ``None``.
    """

    keys: SequenceKeys
    match_keys: SequenceKeys
    similarity: npt.NDArray[np.float64]
    distances: npt.NDArray[np.int64] | None
    match_sources: npt.NDArray[np.uint64]
    match_ids: list[str]
    kinds: npt.NDArray[np.uint8] | None = None
    containment: npt.NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return int(self.keys.size)

    def rows(self, start: int, stop: int) -> "ShardAnswer":
        """Rows ``start:stop`` (an answer too large for one record is sent in parts)."""
        return ShardAnswer(
            self.keys[start:stop],
            self.match_keys[start:stop],
            self.similarity[start:stop],
            self.distances[start:stop] if self.distances is not None else None,
            self.match_sources[start:stop],
            self.match_ids[start:stop],
            self.kinds[start:stop] if self.kinds is not None else None,
            self.containment[start:stop] if self.containment is not None else None,
        )

    @classmethod
    def concat(cls, parts: Sequence["ShardAnswer"]) -> "ShardAnswer":
        """The answers one after the other (of one shard, for consecutive stretches of the stream)."""
        return cls(
            np.concatenate([np.empty(0, np.int64), *(p.keys for p in parts)]),
            np.concatenate([np.empty(0, np.int64), *(p.match_keys for p in parts)]),
            np.concatenate([np.empty(0, np.float64), *(p.similarity for p in parts)]),
            _joined([p.distances for p in parts]),
            np.concatenate([np.empty(0, np.uint64), *(p.match_sources for p in parts)]),
            [doc_id for p in parts for doc_id in p.match_ids],
            _joined([p.kinds for p in parts]),
            _joined([p.containment for p in parts]),
        )


def _joined(arrays: Sequence[npt.NDArray[_Scalar] | None]) -> npt.NDArray[_Scalar] | None:
    """The arrays given one after the other, or ``None`` if none is given."""
    given = [a for a in arrays if a is not None]
    return np.concatenate(given) if given else None


class ShardDetector:
    """Shard ``shard`` of ``shards``: answers for every document, indexes the documents it owns.

    Example::

        shards = [ShardDetector(config, k, 3) for k in range(3)]
        keys = sequence_keys(offset, len(batch.ids))
        verdicts = merge_answers(keys, batch.ids, [s.answer(batch, keys) for s in shards])
    """

    def __init__(self, config: DetectionConfig, shard: int, shards: int) -> None:
        if shards < 1:
            raise ConfigError("shards", f"must be at least 1, got {shards}")
        if not 0 <= shard < shards:
            raise ConfigError("shard_index", f"must be from 0 to shards - 1 = {shards - 1}, got {shard}")
        if config.index_slots % shards:
            raise ConfigError(
                "shards",
                f"{shards} shards must divide index_slots={config.index_slots}, or the shards would count the "
                "hot-bucket cap otherwise than one index: set index_slots to a multiple of every shard count "
                "you may run (12 or 60, say) before the index is built",
            )
        self.shard = shard
        self.shards = shards
        # The index keeps no retention of its own: it follows the stream's, measured whole.
        self.detector: Detector | SimHashDetector = (
            SimHashDetector(config, hamming_index(config, Retention()))
            if config.method == "simhash"
            else Detector(config, band_index(config, Retention()))
        )
        self.stream = GenerationList(config.retention(), Stretch)
        #: Sequence keys of the stored documents, one arena per generation (by its base sequence number).
        self.generation_keys: dict[int, Arena] = {}

    def __len__(self) -> int:
        """Documents this shard holds."""
        return len(self.detector)

    def memory_bytes(self) -> int:
        """Bytes held by the index's arrays and the sequence keys."""
        return self.detector.memory_bytes() + sum(arena.nbytes for arena in self.generation_keys.values())

    def owners(self, batch: IndexedBatch) -> npt.NDArray[np.intp]:
        """The shard owning each row: its slot among ``shards``.

        With ``shards`` dividing ``index_slots``, a document's slot among
        ``index_slots`` determines its shard, so every slot lives whole on one shard.
        """
        return self.detector.slots_of(batch.signed, self.shards)

    def answer(
        self, batch: IndexedBatch, keys: SequenceKeys, document_texts: DocumentTexts | None = None
    ) -> ShardAnswer:
        """This shard's best match for each document of ``batch``; then index the documents it owns.

        ``keys`` are the batch's sequence keys (:func:`sequence_keys`);
        ``document_texts`` settles pairs too near the threshold, as one
        process's detector does, so that the verdicts are the same. Batches
        must come in stream order, every shard seeing every batch.
        """
        owned = self.owners(batch) == self.shard
        self._follow(self.stream.make_way(batch.event_times))
        probe = self.detector.probe(batch, earlier=owned, document_texts=document_texts)
        # Before the insert: retention may then evict a match and its id.
        answer = self._answer_of(batch, keys, probe, self._containments(batch, probe, document_texts))
        rows = np.flatnonzero(owned)
        newest = self.detector.index.history.newest.base_seq
        self.generation_keys.setdefault(newest, Arena((), np.int64)).extend(keys[rows])
        self.detector.insert(batch.take(rows), probe.counts[rows])
        self.stream.newest.add(batch.ids, self.stream.stream_times(batch.event_times))
        self._follow(self.stream.apply_retention())
        return answer

    def _follow(self, sealed: Stretch | None) -> None:
        """Seal (if the stream's measure ``sealed`` one) and evict generations as one index of the whole stream."""
        history = self.detector.index.history
        if sealed is not None:
            self.detector.index.seal()
        while len(history.items) > len(self.stream.items):
            history.evict_oldest()
        kept = {generation.base_seq for generation in history.items}
        for base in [base for base in self.generation_keys if base not in kept]:
            del self.generation_keys[base]

    def _containments(
        self, batch: IndexedBatch, probe: Probe | HammingProbe, document_texts: DocumentTexts | None
    ) -> BestContainments | None:
        """With containment on, the best containment match here of each row without a near-duplicate here."""
        if not isinstance(self.detector, Detector) or self.detector.containment is None:
            return None
        assert isinstance(probe, Probe)
        queries = probe.best.seqs < 0
        found = self.detector.containment.verify(batch, probe.pairs, queries, probe.first_seq, document_texts)
        self.detector.stats.settled_by_text += found.settled_by_text
        self.detector.stats.unsettled += found.unsettled
        return found

    def _answer_of(
        self, batch: IndexedBatch, keys: SequenceKeys, probe: Probe | HammingProbe, found: BestContainments | None
    ) -> ShardAnswer:
        """The rows with a match here: the near-duplicate, else (``found``) the containment match."""
        best, first_seq = probe.best, probe.first_seq
        seqs, similarity, distances = best.seqs.copy(), best.similarity.copy(), best.distances
        kinds = containment = None
        if found is not None:
            contains = found.seqs >= 0
            seqs[contains], similarity[contains] = found.seqs[contains], found.similarity[contains]
            if distances is not None:
                distances = np.where(contains, -1, distances)
            kind = np.where(found.contained, ANSWER_KINDS.index("contained"), ANSWER_KINDS.index("contains"))
            kinds = np.where(contains, kind, ANSWER_KINDS.index("duplicate")).astype(np.uint8)
            containment = np.where(contains, found.values, 0.0)
        rows = np.flatnonzero(seqs >= 0)
        seqs = seqs[rows]
        match_ids, sources = matches_of(batch, seqs, self.detector.index, first_seq)
        in_batch = seqs >= first_seq
        match_keys = np.empty(seqs.size, dtype=np.int64)
        match_keys[in_batch] = keys[seqs[in_batch] - first_seq]
        match_keys[~in_batch] = self._stored_keys(seqs[~in_batch])
        return ShardAnswer(
            keys[rows],
            match_keys,
            similarity[rows],
            distances[rows] if distances is not None else None,
            sources,
            match_ids,
            kinds[rows] if kinds is not None else None,
            containment[rows] if containment is not None else None,
        )

    def _stored_keys(self, seqs: npt.NDArray[np.int64]) -> SequenceKeys:
        out = np.empty(seqs.size, dtype=np.int64)
        for generation, positions, local in self.detector.index.history.locate(seqs):
            out[positions] = self.generation_keys[generation.base_seq].values[local]
        return out


def merge_answers(keys: SequenceKeys, ids: Sequence[str], answers: Sequence[ShardAnswer]) -> list[Verdict]:
    """The judge's rule: the verdicts of the documents ``keys`` (ascending) from every shard's answers.

    Each document's best match over all answers: a near-duplicate first, then
    a ``contained`` match, then a ``contains`` one (:data:`ANSWER_KINDS`);
    among those, the highest similarity (for the containment kinds, the
    highest containment), then the lowest sequence key (the earliest). Rows
    of ``answers`` for other documents are ignored.
    """
    verdicts = [Verdict(doc_id, "unique") for doc_id in ids]
    if not answers or not keys.size:
        return verdicts
    answered = np.concatenate([a.keys for a in answers])
    rows = np.searchsorted(keys, answered)
    ours = (rows < keys.size) & (keys[np.minimum(rows, keys.size - 1)] == answered)
    match_keys = np.concatenate([a.match_keys for a in answers])
    similarity = np.concatenate([a.similarity for a in answers])
    kinds = np.concatenate([a.kinds if a.kinds is not None else np.zeros(len(a), np.uint8) for a in answers])
    containment = np.concatenate([a.containment if a.containment is not None else np.zeros(len(a)) for a in answers])
    score = np.where(kinds == 0, similarity, containment)
    order = np.lexsort((match_keys, -score, kinds, rows))
    order = order[ours[order]]
    firsts = order[np.unique(rows[order], return_index=True)[1]]
    sources = np.concatenate([a.match_sources for a in answers])
    match_ids = [doc_id for a in answers for doc_id in a.match_ids]
    distances = [a.distances if a.distances is not None else np.full(len(a), -1) for a in answers]
    distance = np.concatenate(distances)
    for pick in firsts.tolist():
        row = int(rows[pick])
        source = int(sources[pick])
        kind = int(kinds[pick])
        verdicts[row] = Verdict(
            ids[row],
            ANSWER_KINDS[kind],
            match_ids[pick],
            round(float(similarity[pick]), 4),
            None if source == NO_SOURCE else source,
            None if distance[pick] < 0 else int(distance[pick]),
            round(float(containment[pick]), 4) if kind else None,
        )
    return verdicts
