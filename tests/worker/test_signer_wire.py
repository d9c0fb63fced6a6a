"""The pipe between the worker and its signers: whatever a batch holds crosses it unchanged, framed whole."""

import json
import os
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import ConsumerRecord

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.messages import InputReading
from stream_dedup.worker.signer_wire import (
    WireRecord,
    read_frame,
    read_request,
    read_response,
    request_message,
    response_message,
    write_frame,
)
from stream_dedup.worker.signing import read_and_sign
from tests.worker.fakes import block_values

SIGNER = Detector(DetectionConfig())
READING = InputReading()

#: Values: documents of any text (short, long, any script, lone surrogates), broken JSON, raw bytes, tombstones.
documents = st.builds(
    lambda doc_id, text: json.dumps({"id": doc_id, "text": text}).encode(),
    st.text(min_size=1, max_size=12),
    st.text(max_size=400),
)
values = st.one_of(documents, st.binary(max_size=200), st.none())
records = st.lists(
    st.builds(
        lambda partition, offset, timestamp, key, value: ConsumerRecord(
            "documents", partition, -1, offset, timestamp, 0, key, value, [], None, -1, -1, -1
        ),
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.none() | st.binary(max_size=40),
        values,
    ),
    max_size=30,
    unique_by=lambda record: (record.partition, record.offset),  # as in any batch Kafka gives
)


@settings(max_examples=200, deadline=None)
@given(records)
def test_a_request_gives_the_signer_every_field_reading_looks_at(batch: list[ConsumerRecord]) -> None:
    job, got = read_request(request_message(7, batch))
    assert job == 7
    assert got == [WireRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value) for r in batch]


@settings(max_examples=100, deadline=None)
@given(records, st.booleans())
def test_a_response_gives_the_worker_what_signing_in_place_gives(batch: list[ConsumerRecord], texts_kept: bool) -> None:
    signed = read_and_sign(batch, READING, SIGNER, texts_kept)
    job, got, lines = read_response(response_message(3, signed, [(30, "a line")]), batch)
    assert (job, lines) == (3, [(30, "a line")])
    assert got.records == batch and got.outcomes == signed.outcomes and got.texts == signed.texts
    assert block_values(got.blocks) == block_values(signed.blocks)
    assert np.array_equal(got.signed.sketches, signed.signed.sketches)
    assert np.array_equal(got.signed.keys, signed.signed.keys)
    # What settles pairs of a few shingles that hide in the sketch: lost on the wire, pipelined signing would not.
    assert got.signed.filled_bins is not None and signed.signed.filled_bins is not None
    assert np.array_equal(got.signed.filled_bins, signed.signed.filled_bins)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 300_000), min_size=1, max_size=4))
def test_frames_of_any_size_arrive_whole_and_in_order_through_a_pipe(sizes: list[int]) -> None:
    """Larger than the pipe's buffer too: the writer waits for the reader, a frame is never cut or merged."""
    reading_end, writing_end = os.pipe()
    os.set_blocking(reading_end, False)
    os.set_blocking(writing_end, False)
    messages = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    got: list[bytes | None] = []
    reader = threading.Thread(target=lambda: got.extend(read_frame(reading_end, float("inf")) for _ in messages))
    reader.start()
    try:
        for message in messages:
            write_frame(writing_end, message)
    finally:
        reader.join(30)
        os.close(writing_end)
        os.close(reading_end)
    assert got == messages
