"""The byte-bounded LRU map that the caches of records read again keep their entries in."""

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.kafka.sized_lru import SizedLru


def test_the_least_recently_used_goes_first_once_the_budget_is_spent() -> None:
    cache: SizedLru[str, bytes] = SizedLru(10, len)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"  # now "b" is the least recently used
    assert cache.peek("b") == b"bbbb"  # and still is
    assert cache.put("c", b"cccc") == [("b", b"bbbb")]
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"aaaa", None, b"cccc")
    assert cache.bytes == 8


def test_the_entry_put_last_is_kept_whatever_its_size() -> None:
    cache: SizedLru[str, bytes] = SizedLru(4, len)
    cache.put("small", b"xy")
    cache.put("large", b"x" * 100)
    assert cache.get("large") == b"x" * 100 and cache.get("small") is None and len(cache) == 1


def test_a_key_held_already_keeps_its_value_and_its_size() -> None:
    cache: SizedLru[str, bytes] = SizedLru(100, len)
    cache.put("a", b"first")
    cache.put("a", b"second, longer")
    assert cache.get("a") == b"first" and cache.bytes == 5


@settings(max_examples=200)
@given(
    budget=st.integers(0, 50),
    operations=st.lists(st.tuples(st.booleans(), st.integers(0, 9), st.integers(1, 20)), max_size=60),
)
def test_it_holds_what_a_list_in_use_order_holds(budget: int, operations: list[tuple[bool, int, int]]) -> None:
    """Against a plain model: keys in use order, the oldest dropped while over the budget and more than one is held."""
    cache: SizedLru[int, bytes] = SizedLru(budget, len)
    model: list[tuple[int, int]] = []  # (key, size), least recently used first
    for is_put, key, size in operations:
        held = [k for k, _ in model]
        if is_put and key not in held:
            cache.put(key, bytes(size))
            model.append((key, size))
            while sum(s for _, s in model) > budget and len(model) > 1:
                model.pop(0)
        elif not is_put:
            value = cache.get(key)
            assert (value is not None) == (key in held)
            if key in held:
                entry = model.pop(held.index(key))
                model.append(entry)
                assert value is not None and len(value) == entry[1]
    assert cache.bytes == sum(s for _, s in model) and len(cache) == len(model)
