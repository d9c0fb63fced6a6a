"""On the broker, a consumer reading fetches quickly reads exactly the records kafka-python's own consumer reads."""

from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer

from .stage import in_transaction, read_committed


def test_committed_aborted_and_plain_records_read_as_kafka_python_reads_them(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(2)
    plain = KafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type="zstd", linger_ms=5)
    headers = [("kind", b"plain"), ("empty", b""), ("名前", b"\x00\xff")]

    def interleaved(label: bytes, count: int) -> Callable[[KafkaProducer], None]:
        """Transactional records with plain ones written between them, on both partitions."""

        def send(producer: KafkaProducer) -> None:
            for i in range(count):
                producer.send(topic, key=b"t%d" % i, value=label + b"-%d" % i, partition=i % 2)
                key = b"p" if i % 3 == 0 else None
                plain.send(topic, key=key, value=None if key and i % 2 else b"x" * i, headers=headers)
                if i % 40 == 0:
                    producer.flush()
                    plain.flush()
            producer.send(topic, value=b"L" * 300_000, partition=0)

        return send

    try:
        in_transaction(kafka_bootstrap, interleaved(b"committed", 120))
        in_transaction(kafka_bootstrap, interleaved(b"aborted", 90), commit=False)
        in_transaction(kafka_bootstrap, interleaved(b"also-committed", 70))
        plain.flush()
    finally:
        plain.close()
    written = 120 + 1 + 70 + 1 + 120 + 90 + 70

    def read(quickly: bool) -> list[Any]:
        return sorted(read_committed(kafka_bootstrap, topic, written, quickly=quickly), key=lambda r: r.offset)

    quick = read(quickly=True)
    assert quick == read(quickly=False)
    assert len(quick) == written
    assert not any(r.value and r.value.startswith(b"aborted") for r in quick)
