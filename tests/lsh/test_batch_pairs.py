"""In-batch pairs with the table they share a key in, against brute force."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stream_dedup.lsh.batch_pairs import earlier_rows_sharing_keys


@settings(max_examples=100, deadline=None)
@given(
    keys=hnp.arrays(np.uint32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=12), elements=st.integers(0, 3)),
    data=st.data(),
)
def test_in_batch_pairs_are_every_earlier_stored_row_under_the_same_band_key(
    keys: np.ndarray, data: st.DataObject
) -> None:
    n, bands = keys.shape
    stored = data.draw(hnp.arrays(np.bool_, (n, bands)))
    queries = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.intp)
    rows, earlier, shared = earlier_rows_sharing_keys(keys, stored, queries)
    found = sorted(zip(rows.tolist(), earlier.tolist(), shared.tolist(), strict=True))
    expected = sorted(
        (i, j, b)
        for i in queries.tolist()
        for j in range(i)
        for b in range(bands)
        if stored[j, b] and keys[i, b] == keys[j, b]
    )
    assert found == expected
