"""Retention by age against wrong event times: a record stamped late, or far ahead of the records beside it."""

import numpy as np

from stream_dedup.lsh import Retention
from stream_dedup.lsh.retention import GenerationList, Stretch

MAX_AGE = 1000.0
#: Documents per batch, one batch per second of event time.
BATCH = 20


def stream(retention: Retention, times: list[np.ndarray]) -> list[tuple[int, int]]:
    """Feed batches of ``times`` as an index does; after each, (documents held, generations)."""
    history = GenerationList(retention, Stretch)
    held = []
    for batch in times:
        history.make_way(batch)
        history.newest.add([f"d{i}" for i in range(batch.size)], history.stream_times(batch))
        history.apply_retention()
        held.append((len(history), len(history.items)))
    return held


def steady(seconds: int) -> list[np.ndarray]:
    return [np.full(BATCH, float(second)) for second in range(seconds)]


def test_a_record_stamped_late_in_every_batch_does_not_seal_a_generation_per_batch() -> None:
    times = steady(600)
    for batch in times:
        batch[0] -= 400.0  # over a quarter of max_age late

    held = stream(Retention(max_documents=1_000_000, max_age_seconds=MAX_AGE), times)

    assert max(generations for _, generations in held) <= 5  # a quarter of max_age each, as for a clean stream
    assert held == stream(Retention(max_documents=1_000_000, max_age_seconds=MAX_AGE), steady(600))


def test_a_record_stamped_a_year_ahead_neither_empties_the_index_nor_stops_its_eviction() -> None:
    clean = stream(Retention(max_age_seconds=MAX_AGE), steady(6000))
    times = steady(6000)
    times[3000][7] += 365 * 86400.0
    times[4000][0] += 365 * 86400.0  # first in its batch: the clock the batch makes way by

    held = stream(Retention(max_age_seconds=MAX_AGE), times)

    # Right after it, the index lost at most the oldest quarter of its window, and not for long.
    assert held[3000][0] >= 0.7 * clean[3000][0]
    assert held[3500][0] >= clean[3500][0]
    assert held[4000][0] >= 0.7 * clean[4000][0]
    # Its generation was evicted in turn: the index holds about max_age of the stream again, as without it.
    assert held[-1][0] <= 1.3 * clean[-1][0]
    assert max(documents for documents, _ in held) <= 1.3 * max(documents for documents, _ in clean)


def test_a_stream_that_resumes_after_a_long_pause_moves_the_clock_with_it() -> None:
    times = [*steady(2000), *(batch + 86400.0 for batch in steady(10))]

    held = stream(Retention(max_age_seconds=MAX_AGE), times)

    # A day later, everything before the pause is older than max_age: forgotten before the first batch after it.
    assert held[1999][0] >= MAX_AGE * BATCH
    assert held[-1][0] == 10 * BATCH


def test_a_batch_after_a_pause_is_judged_without_what_the_pause_outlived_nor_keeps_it_alive() -> None:
    history = GenerationList(Retention(max_age_seconds=60.0), Stretch)
    for second in (0.0, 3600.0, 7200.0):
        batch = np.array([second])
        history.make_way(batch)
        # What the batch would be judged against: nothing older than 60 s before it.
        assert len(history) == 0
        clock = history.newest_event_time
        history.newest.add(["d"], history.stream_times(batch))
        history.apply_retention()
        assert clock < second  # making way moves no clock: stream_times bounds the batch as before
