"""Capacity of a sharded stage (docs/scale-out.md): each role's work alone, the sequenced partition, a model.

Roles, one core each, in this process (no broker; the transactions' cost is the relay's
of ``kafka_stage.py``). 1 KB documents of real prose with 30% planted near-copies
(``kafka_stage.documents``), ``index_slots`` = 12, batches of 1,000, after ``--indexed``
documents (200,000; 20,000 with ``--quick``) already went through:

* signer: read the records (JSON, normalisation), sign, encode the sequenced records.
  Anchor: the single-process stage's CPU path, the same reading and signing plus
  ``Detector.process_signed`` on an index of the same size.
* shard k of N, N = 1, 2, 4: ``ShardDetector.answer`` (every document probed, 1/N
  stored, pairs near the threshold settled by their texts) and its bytes per stored
  document. Anchor: ``Detector.process_signed``, settling by text too. Texts come from a
  ``RecordTexts`` handed every batch's records, with a budget that holds them all: the
  CPU of keeping, decompressing, reading and comparing them, not of fetching them
  (a shard's reading of the input is measured on the broker, below).
* a SimHash shard (``method = "simhash"``, shard 0 of 1): docs/s and bytes per stored
  document, the figures the model sizes that method's shards by. Anchor: shard 0 of 1.
* judge: ``merge_answers`` of two shards' answers and the verdict JSON of every
  document. Anchor: the verdict JSON alone, which the single process writes too.
* bytes per document of the sequenced and answer records. Anchor: the input record.

The sequenced partition, on a real broker (skipped with ``--no-broker``): the sequenced
records written in transactions of 10 by one producer; then 1, 2 and 4 readers (processes)
read the whole partition at once and decode every record as a shard does. Anchor: one
reader, the fan-out's unit. Then the input records read again as a shard reads them to
settle pairs by text: each batch's span of each of 3 partitions in one read
(``RecordLookup.records_between``). On this stream, dense near the threshold, every batch
has such a pair, so every shard reads the whole input again.

The model then projects, from these figures, the shards, signers and judge a target of
docs/s and indexed documents needs, and names the first bottleneck. More than one signer
core means ``parallel_signers = true`` (signers sharing the input's partitions, a backlog
sequenced in the order of their commits rather than in event-time order). A judge that forwards
unique documents (``unique_topic``) reads the input again as a shard does: its cores are
given with and without that.

    python benchmarks/capacity.py [--quick] [--indexed N] [--bootstrap HOST:PORT] [--no-broker]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
from collections.abc import Sequence
from typing import NamedTuple

from _table import Row, print_table, stopwatch
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_stage import (
    PARTITIONS,
    broker,
    create_topics,
    documents,
    encoded,
    produce,
    quiet_kafka_python,
    unique_name,
)

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, ShardAnswer, ShardDetector, make_detector, merge_answers, sequence_keys
from stream_dedup.kafka.answers import AnswerRecord, encode_answers
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import (
    InputReading,
    Source,
    match_coordinates,
    verdict_value,
)
from stream_dedup.kafka.record_lookup import RecordLookup
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.kafka.sequenced import BatchAssembly
from stream_dedup.lsh import IndexedBatch
from stream_dedup.worker.collector import tune_collector
from stream_dedup.worker.signing import read_and_sign

CONFIG = DetectionConfig(index_slots=12)
SIMHASH = DetectionConfig(method="simhash", index_slots=12)
BATCH = 1_000
SHARD_COUNTS = (1, 2, 4)
READER_COUNTS = (1, 2, 4)
GIB = 1 << 30
#: Holds every record's value: no text is ever fetched (nothing listens there).
TEXTS_BUDGET = 4 * GIB
NOWHERE = KafkaConnection("127.0.0.1:9")


class _Record(NamedTuple):
    """What kafka-python gives a consumer, as far as reading a document needs."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


class Signed(NamedTuple):
    batches: list[IndexedBatch]
    values: list[bytes]
    rates: list[float]


def median(rates: Sequence[float]) -> float:
    """The median of per-batch rates: the figure least disturbed by other work on a shared machine."""
    return sorted(rates)[len(rates) // 2]


def sign(records: Sequence[_Record], config: DetectionConfig = CONFIG) -> Signed:
    """What a signer does to ``records``, batch by batch: read, sign, encode; and each batch's docs/s."""
    detector = make_detector(config)
    digest = config.signature_fingerprint()
    batches, values, rates = [], [], []
    for start in range(0, len(records), BATCH):
        with stopwatch() as t:
            part = records[start : start + BATCH]
            _, batch, _ = read_and_sign(part, InputReading(), detector).split(detector.config.retention())
            values += encode_entry(ChangelogEntry(batch, "documents", {}), digest, independent=True)
        batches.append(batch)
        rates.append(len(part) / t[0])
    return Signed(batches, values, rates)


class Contenders:
    """The single index and every shard measured, warmed on the same batches, then timed in turn on each
    measured batch: under the same load, so that their ratios hold even on a busy machine."""

    def __init__(self, batches: list[IndexedBatch], records: list[Sequence[_Record]], warm: int) -> None:
        self.detector = Detector(CONFIG)
        self.shards = {n: ShardDetector(CONFIG, 0, n) for n in SHARD_COUNTS}
        #: The other shard of two, for the judge's two answers.
        self.second = ShardDetector(CONFIG, 1, 2)
        #: Each contender's own texts, as each process keeps its own.
        self.texts = {name: RecordTexts(NOWHERE, "documents", InputReading(), TEXTS_BUDGET) for name in self._names()}
        for offset, batch in enumerate(batches[:warm]):
            self._step(offset, batch, records[offset])
        self.rates: dict[str, list[float]] = {name: [] for name in self._names()}
        self.answers: list[list[ShardAnswer]] = []
        for offset, batch in enumerate(batches[warm:], start=warm):
            self.answers.append(self._step(offset, batch, records[offset], self.rates))

    @staticmethod
    def _names() -> list[str]:
        return ["index", *(f"shard {n}" for n in SHARD_COUNTS), "second"]

    def _step(
        self,
        offset: int,
        batch: IndexedBatch,
        records: Sequence[_Record],
        rates: dict[str, list[float]] | None = None,
    ) -> list[ShardAnswer]:
        """Every contender on one batch; returns the answers of the two shards of two."""
        keys = sequence_keys(offset, len(batch.ids))
        with stopwatch() as t:
            self.texts["index"].keep(records)
            self.detector.process_signed(batch, self.texts["index"])
        if rates is not None:
            rates["index"].append(len(batch.ids) / t[0])
        answers = {}
        for n, shard in self.shards.items():
            texts = self.texts[f"shard {n}"]
            with stopwatch() as t:
                texts.keep(records)  # what the span reads bring (their reading is measured on the broker)
                answers[n] = shard.answer(batch, keys, texts)
            if rates is not None:
                rates[f"shard {n}"].append(len(batch.ids) / t[0])
        self.texts["second"].keep(records)
        return [answers[2], self.second.answer(batch, keys, self.texts["second"])]


def simhash_shard(records: Sequence[_Record], warm: int) -> tuple[float, float]:
    """Shard 0 of 1 of method simhash over ``records``: docs/s over the batches after ``warm``, bytes per doc."""
    shard = ShardDetector(SIMHASH, 0, 1)
    rates = []
    for offset, batch in enumerate(sign(records, SIMHASH).batches):
        with stopwatch() as t:
            shard.answer(batch, sequence_keys(offset, len(batch.ids)))
        if offset >= warm:
            rates.append(len(batch.ids) / t[0])
    return median(rates), shard.memory_bytes() / len(shard)


def judge_rate(batches: list[IndexedBatch], warm: int, answers: list[list[ShardAnswer]]) -> tuple[float, float]:
    """The judge over the measured batches (``answers[i]``: two shards' answers for batch ``i``): docs/s, and
    the same verdicts' JSON alone, timed batch by batch in turn."""
    fingerprint = CONFIG.fingerprint()

    def sources(batch: IndexedBatch) -> list[Source]:
        return [
            Source("documents", *match_coordinates(p), round(t * 1000))
            for p, t in zip(batch.sources.tolist(), batch.event_times.tolist(), strict=True)
        ]

    judged, encoded_alone = [], []
    for offset, batch in enumerate(batches[warm:], start=warm):
        with stopwatch() as t:
            keys = sequence_keys(offset, len(batch.ids))
            verdicts = merge_answers(keys, batch.ids, answers[offset - warm])
            for verdict, source in zip(verdicts, sources(batch), strict=True):
                verdict_value(verdict, source, fingerprint)
        judged.append(len(batch.ids) / t[0])
        with stopwatch() as t:
            for verdict, source in zip(verdicts, sources(batch), strict=True):
                verdict_value(verdict, source, fingerprint)
        encoded_alone.append(len(batch.ids) / t[0])
    return median(judged), median(encoded_alone)


# --- the sequenced partition on a broker ------------------------------------------------------


def write_sequenced(bootstrap: str, topic: str, values: list[bytes]) -> float:
    """Seconds to append ``values`` to the partition in transactions of 10 records, as signers do."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=unique_name("signer"),
        linger_ms=5,
        batch_size=256 * 1024,
        max_request_size=16 << 20,
    )
    try:
        producer.init_transactions()
        with stopwatch() as t:
            for start in range(0, len(values), 10):
                producer.begin_transaction()
                for value in values[start : start + 10]:
                    producer.send(topic, value=value, partition=0)
                producer.commit_transaction()
        return t[0]
    finally:
        producer.close()


def read_sequenced(bootstrap: str, topic: str, records: int) -> tuple[float, int, int]:
    """A shard's reading of the whole partition: seconds, bytes and documents decoded."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        fetch_max_bytes=64 << 20,
        max_partition_fetch_bytes=16 << 20,
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    assembly = BatchAssembly(CONFIG.signature_fingerprint(), topic)
    read = size = docs = 0
    try:
        with stopwatch() as t:
            while read < records:
                for record in consumer.poll(timeout_ms=500).get(partition, []):
                    read += 1
                    size += len(record.value)
                    batch = assembly.add(record.offset, record.value)
                    docs += len(batch.entry.documents.ids) if batch is not None else 0
        return t[0], size, docs
    finally:
        consumer.close()


def fan_out(bootstrap: str, topic: str, records: int, readers: int) -> list[tuple[float, int, int]]:
    """``readers`` processes reading the partition at once."""
    with multiprocessing.get_context("spawn").Pool(readers) as pool:
        return pool.starmap(read_sequenced, [(bootstrap, topic, records)] * readers)


def span_read_rate(bootstrap: str, records: Sequence[_Record]) -> float:
    """Records/s a shard reads the input again at: each batch's span of each partition in one read."""
    topic = unique_name("input")
    create_topics(bootstrap, {topic: PARTITIONS}, {"segment.bytes": str(1 << 30)})
    produce(bootstrap, topic, [(record.key, record.value) for record in records])
    # produce() sends record j to partition j % PARTITIONS: it lands at offset j // PARTITIONS there.
    offsets = [(j % PARTITIONS, j // PARTITIONS) for j in range(len(records))]
    lookup = RecordLookup(KafkaConnection(bootstrap), cache_bytes=0, fetch_bytes=1 << 20)
    read = 0
    try:
        with stopwatch() as t:
            for start in range(0, len(offsets), BATCH):
                batch = offsets[start : start + BATCH]
                for partition in range(PARTITIONS):
                    held = [offset for p, offset in batch if p == partition]
                    read += len(lookup.records_between(topic, partition, min(held), max(held) + 1))
    finally:
        lookup.close()
    return read / t[0]


# --- the model ------------------------------------------------------------------------------------


def model_lines(figures: dict[str, float]) -> list[str]:
    """Projections: for each target, what the stage needs and what runs out first."""
    lines = [
        "target docs/s, indexed  | shards (64 GiB each; simhash) | signer cores | cores per shard "
        "(of it re-reading texts) | judge cores (forwarding unique) | sequenced in, out (MB/s) | "
        "input re-read per shard (MB/s) | first bottleneck",
    ]
    for rate in (10_000, 100_000):
        for indexed in (100_000_000, 1_000_000_000):
            shards = max(1, math.ceil(indexed * figures["shard_bytes"] / (64 * GIB)))
            simhash_shards = max(1, math.ceil(indexed * figures["simhash_bytes"] / (64 * GIB)))
            # A stream dense near the threshold: every batch has a pair to settle by text, so every
            # shard also reads each batch's input records again; so does a judge forwarding unique ones.
            rereading = rate / figures["span_rate"]
            per_shard = rate / figures["shard_rate"] + rereading
            judge = rate / figures["judge_rate"]
            sequenced = rate * figures["sequenced_bytes"] / 1e6
            fan = (shards + 1) * sequenced
            limits = {
                "one shard's probe rate (every shard probes every document)": per_shard,
                "the judge": judge,
                "the judge, if it forwards unique documents": judge + rereading,
                "the sequenced partition's fan-out (as measured here)": fan / figures["fanout_mb"],
            }
            worst = max(limits, key=lambda name: limits[name])
            bottleneck = worst if limits[worst] > 1 else "none (all below one core or one reader set)"
            lines.append(
                f"{rate:>7,} {indexed:>13,} | {shards:>4}; {simhash_shards:>3} | "
                f"{math.ceil(rate / figures['signer_rate']):>4} | {per_shard:5.2f} ({rereading:4.2f}) | "
                f"{judge:5.2f} ({judge + rereading:5.2f}) | {sequenced:6.1f}, {fan:7.1f} | "
                f"{rate * figures['input_bytes'] / 1e6:6.1f} | {bottleneck}"
            )
    lines.append(
        f"simhash: {figures['simhash_bytes']:.0f} bytes per stored doc; a shard of it probes "
        f"{figures['simhash_rate']:,.0f} docs/s, {10_000 / figures['simhash_rate']:.2f} cores at 10k docs/s"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--indexed", type=int)
    parser.add_argument("--measured", type=int, default=20_000)
    parser.add_argument("--bootstrap")
    parser.add_argument("--no-broker", action="store_true")
    args = parser.parse_args()
    tune_collector()  # as `stream-dedup run` does for every role's process
    indexed = args.indexed or (20_000 if args.quick else 200_000)
    measured = 5_000 if args.quick else args.measured
    quiet_kafka_python()

    docs = documents(indexed + measured)
    records = [
        _Record("documents", i % 3, i // 3, 1_700_000_000_000 + i, key, value, [])
        for i, (key, value) in enumerate(encoded(docs))
    ]
    signed = sign(records)
    warm = indexed // BATCH
    contenders = Contenders(signed.batches, [records[i : i + BATCH] for i in range(0, len(records), BATCH)], warm)
    single = median(contenders.rates["index"])
    signer = median(signed.rates[warm:])
    # One process signs and indexes each batch: its time per batch is the sum of the two.
    one_process = median(
        [1 / (1 / a + 1 / b) for a, b in zip(signed.rates[warm:], contenders.rates["index"], strict=True)]
    )
    input_bytes = sum(len(r.value) for r in records) / len(records)
    sequenced_bytes = sum(len(v) for v in signed.values) / len(records)
    single_bytes = contenders.detector.memory_bytes() / len(contenders.detector)

    rows = [
        Row(
            "signer: docs/s on one core (read, sign, encode)",
            signer,
            "one process: read, sign, probe, insert",
            one_process,
        ),
        Row("sequenced record: bytes/doc", sequenced_bytes, "input record", input_bytes, lower_is_better=True),
    ]
    figures = {"signer_rate": signer, "sequenced_bytes": sequenced_bytes, "input_bytes": input_bytes}
    for shards, shard in contenders.shards.items():
        rate = median(contenders.rates[f"shard {shards}"])
        per_doc = shard.memory_bytes() / max(1, len(shard))
        rows.append(
            Row(
                f"shard 0 of {shards}: docs/s (probes all, stores 1/{shards}, texts)",
                rate,
                "Detector.process_signed, texts",
                single,
            )
        )
        rows.append(
            Row(f"shard 0 of {shards}: bytes per stored doc", per_doc, "one index", single_bytes, lower_is_better=True)
        )
        figures["shard_rate"] = min(figures.get("shard_rate", rate), rate)
        figures["shard_bytes"] = max(figures.get("shard_bytes", per_doc), per_doc)
    figures["simhash_rate"], figures["simhash_bytes"] = simhash_shard(records, warm)
    one_shard = median(contenders.rates["shard 1"])
    rows.append(Row("simhash shard 0 of 1: docs/s", figures["simhash_rate"], "shard 0 of 1", one_shard))
    rows.append(
        Row(
            "simhash shard 0 of 1: bytes per stored doc",
            figures["simhash_bytes"],
            "shard 0 of 1",
            contenders.shards[1].memory_bytes() / len(contenders.shards[1]),
            lower_is_better=True,
        )
    )
    judged, encoding = judge_rate(signed.batches, warm, contenders.answers)
    figures["judge_rate"] = judged
    rows.append(Row("judge: docs/s (merge 2 shards, verdict JSON)", judged, "verdict JSON alone", encoding))
    answer_bytes = (
        sum(
            len(v)
            for o, answers in enumerate(contenders.answers)
            for v in encode_answers(AnswerRecord(0, 2, o, o + 1, answers[0]), CONFIG.signature_fingerprint())
        )
        / measured
    )
    rows.append(
        Row(
            "answer record (shard 0 of 2): bytes/doc",
            answer_bytes,
            "sequenced record",
            sequenced_bytes,
            lower_is_better=True,
        )
    )
    notes = [
        f"{indexed:,} documents indexed before the {measured:,} measured; 1 KB documents, 30% near-copies",
        "shard bytes include the 8-byte sequence key per stored document",
    ]

    figures["fanout_mb"] = figures["span_rate"] = float("nan")  # no broker: the model cannot say
    if not args.no_broker:
        with broker(args.bootstrap) as bootstrap:
            topic = unique_name("sequenced")
            create_topics(bootstrap, {topic: 1}, {"segment.bytes": str(1 << 30), "max.message.bytes": str(8 << 20)})
            written = write_sequenced(bootstrap, topic, signed.values)
            megabytes = sum(len(v) for v in signed.values) / 1e6
            rows.append(Row("sequenced partition: MB/s written (1 producer)", megabytes / written, fmt=",.1f"))
            rows.append(Row("sequenced partition: docs/s written", len(records) / written))
            one = None
            for readers in READER_COUNTS:
                results = fan_out(bootstrap, topic, len(signed.values), readers)
                each = [size / seconds / 1e6 for seconds, size, _ in results]
                one = one or each[0]
                rows.append(
                    Row(
                        f"{readers} readers at once: MB/s read per reader", min(each), "1 reader alone", one, fmt=",.1f"
                    )
                )
                # What the partition served to all readers at once, decoded as a shard decodes.
                served = readers * min(each)
                figures["fanout_mb"] = served if readers == 1 else max(figures["fanout_mb"], served)
            notes.append(
                f"{len(signed.values):,} sequenced records, {megabytes:,.1f} MB, one partition, a local broker"
            )
            figures["span_rate"] = span_read_rate(bootstrap, records[indexed:])
            rows.append(Row("input read again by spans (a shard, 1 reader): records/s", figures["span_rate"]))
    print_table("Capacity of a sharded stage: each role alone", rows, notes)
    print("\nModel (one core per role process; the lowest shard rate and the highest bytes per stored doc measured):")
    for line in model_lines(figures):
        print(f"  {line}")


if __name__ == "__main__":
    main()
