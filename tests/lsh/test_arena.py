import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.lsh.arena import IdArena


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.text(max_size=12), max_size=20), min_size=1, max_size=5))
def test_ids_come_back_as_given_in_any_script(batches: list[list[str]]) -> None:
    arena = IdArena()
    every = []
    for ids in batches:
        arena.extend(ids)
        every += ids
    order = np.random.default_rng(len(every)).permutation(len(every))
    assert arena.ids_of(order) == [every[i] for i in order]
