"""Record values kept compressed in blocks: every value comes back as added, and the budget is the memory."""

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.kafka.value_blocks import ValueBlocks
from tests.real_text import stdlib_paragraphs


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**48 - 1) | st.integers(0, 40), st.binary(max_size=40)))
    ),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50))),
)
def test_every_value_comes_back_as_first_added(
    batches: list[list[tuple[int, int, bytes]]], probes: list[tuple[int, int]]
) -> None:
    blocks = ValueBlocks(1 << 30)
    model: dict[tuple[int, int], bytes] = {}
    for batch in batches:
        blocks.add(batch)
        for partition, offset, value in batch:
            model.setdefault((partition, offset), value)
    for key in [*model, *probes]:
        assert blocks.get(*key) == model.get(key)


def test_the_memory_taken_is_the_budget_counted() -> None:
    """The budget counts the memory really held (python-zstandard's results are over-allocated if not copied)."""
    paragraphs = stdlib_paragraphs()
    n = len(paragraphs)
    values = [" ".join(paragraphs[(i * k + k) % n] for k in (1, 7, 13)).encode() for i in range(n)]  # ~1 KB
    budget = sum(map(len, values)) // 4
    blocks = ValueBlocks(budget)
    blocks.add([(1, 0, values[0])])  # the compression contexts, made once, outside what is measured
    assert blocks.get(1, 0) == values[0]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, n, 100):
            blocks.add((0, offset, values[offset]) for offset in range(start, min(start + 100, n)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= budget * 1.1
    kept = [offset for offset in range(n) if blocks.get(0, offset) is not None]
    assert kept == list(range(kept[0], n)) and len(kept) > n // 3  # the newest, compressed to under half
