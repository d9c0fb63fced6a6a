"""A template's many variants fill its band values: the template and its repost are still found.

Listings made from one form share most of their text, so after enough of
them every band value of a new listing is already held by ``max_bucket_size``
earlier ones. Those earlier ones are not near-copies of it (Jaccard about 0.7,
below the threshold), yet they must not crowd it out of the index: its repost
must find it. The truth is brute force on the texts' shingle sets.
"""

import random
from typing import Any

import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, make_detector
from tests.real_text import stdlib_paragraphs

#: Small, so that a few hundred variants fill every band value of a new one.
CAP = 4
THRESHOLD = 0.8


def shingles(text: str) -> set[str]:
    """Character 5-shingles of an ASCII text as the detector normalises it (lower case, single spaces)."""
    folded = " ".join(text.lower().split())
    return {folded[i : i + 5] for i in range(len(folded) - 4)}


def jaccard(left: set[str], right: set[str]) -> float:
    return len(left & right) / len(left | right)


def edited(text: str, rng: random.Random, share: float) -> str:
    """``text`` with about ``share`` of its words replaced by other words of it."""
    words = text.split()
    for _ in range(max(1, round(share * len(words)))):
        words[rng.randrange(len(words))] = rng.choice(words) + rng.choice("xyz")
    return " ".join(words)


def template_stream(seed: int) -> tuple[list[str], list[int], list[bool]]:
    """For each of three paragraphs, 200 variants (Jaccard 0.6-0.72 to it, lower to each other: clear of the
    threshold for the estimate), then the paragraph itself; at the end, a light edit of each paragraph (its
    repost), hundreds of documents later, so in another batch.

    Returns the texts, the reposts' positions, and whether each text has an earlier one at Jaccard >= the
    threshold (brute force within each paragraph's texts; different paragraphs share next to nothing).
    """
    rng = random.Random(seed)
    templates = [p for p in stdlib_paragraphs() if len(p) >= 900 and p.isascii()][:3]
    texts: list[str] = []
    truth: list[bool] = []
    for template in templates:
        variants: list[str] = []
        while len(variants) < 200:
            variant = edited(template, rng, 0.13)
            if 0.6 <= jaccard(shingles(variant), shingles(template)) < 0.72:
                variants.append(variant)
        sets = [shingles(text) for text in [*variants, template]]
        truth += [any(jaccard(sets[i], sets[j]) >= THRESHOLD for j in range(i)) for i in range(len(sets))]
        texts += [*variants, template]
    reposts = []
    for template in templates:
        reposts.append(len(texts))
        texts.append(edited(template, rng, 0.005))
        truth.append(jaccard(shingles(texts[-1]), shingles(template)) >= THRESHOLD)
    return texts, reposts, truth


@pytest.mark.parametrize("batch", [1000, 64, 7])
def test_a_template_and_its_repost_are_found_when_its_variants_fill_every_band_value(batch: int) -> None:
    texts, reposts, truth = template_stream(seed=3)
    detector = Detector(DetectionConfig(threshold=THRESHOLD, max_bucket_size=CAP))
    flagged: list[bool] = []
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        flagged += [
            v.verdict == "duplicate" for v in detector.process([str(start + i) for i in range(len(part))], part)
        ]

    assert [i for i, real in enumerate(truth) if real] == reposts  # the stream is as planned
    assert detector.hot_bucket_skips > 0  # the cap binds
    assert [flagged[i] for i in reposts] == [True] * len(reposts)
    assert not any(flag and not real for flag, real in zip(flagged, truth, strict=True))


@pytest.mark.parametrize("batch", [80, 7, 1])
@pytest.mark.parametrize("containment", [None, 0.8], ids=["jaccard", "containment-on"])
def test_near_copies_crowding_their_band_values_within_one_batch_are_each_found(
    batch: int, containment: float | None
) -> None:
    """Listings from one form, differing in a number: each is a near-copy of the ones before it, however many
    of them a batch holds (the later rows of a batch must not hide its earlier ones from the rows between)."""
    form = next(p for p in stdlib_paragraphs() if len(p) >= 600 and p.isascii())
    texts = [f"{form} Reference number {1000 + 37 * i}." for i in range(80)]
    sets = [shingles(text) for text in texts]
    truth = [any(jaccard(sets[i], sets[j]) >= THRESHOLD for j in range(i)) for i in range(len(sets))]
    assert truth == [False] + [True] * (len(texts) - 1)
    detector = Detector(DetectionConfig(threshold=THRESHOLD, max_bucket_size=CAP, containment_threshold=containment))
    verdicts = []
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        verdicts += [v.verdict for v in detector.process([str(start + i) for i in range(len(part))], part)]
    assert verdicts == ["unique"] + ["duplicate"] * (len(texts) - 1)


LISTING = (
    "Spacious {}-room apartment in {} for rent. Bright living room with {}, modern kitchen, new windows and "
    "wooden floors. Close to the underground and shops. Rent {} EUR per month, utilities included, deposit "
    "three months. Available from next month, no agents please."
)


def listings(seed: int, count: int) -> list[str]:
    """Listings from one form: every band value crowded, near-copies at Jaccard 0.75-1 of each other."""
    rng = random.Random(seed)
    return [
        LISTING.format(
            rng.randint(1, 6),
            rng.choice(["Kreuzberg", "Neukolln", "Mitte"]),
            rng.choice(["balcony", "garden", "elevator"]),
            rng.choice([900, 950, 1000]),
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "method",
    [
        {"containment_threshold": None},
        {"containment_threshold": 0.8},
        {"containment_threshold": None, "index_slots": 3},
        {"containment_threshold": 0.8, "index_slots": 2},
        {"method": "simhash", "max_hamming": 6, "containment_threshold": None},
    ],
    ids=["jaccard", "containment-on", "jaccard-3-slots", "containment-2-slots", "simhash"],
)
def test_with_the_cap_binding_verdicts_and_matches_do_not_depend_on_where_batches_are_cut(
    seed: int, method: dict[str, Any]
) -> None:
    """A row sees what it would in a batch of one: the stored documents its batch's earlier rows displaced
    are gone for it, and the earlier rows those rows displaced too (simhash: earlier rows the cap kept out
    of the tables are no match for it)."""
    texts = listings(seed, 60)
    ids = [f"d{i}" for i in range(len(texts))]
    config = DetectionConfig(threshold=THRESHOLD, max_bucket_size=2 + seed % 3, **method)
    runs = {}
    for batch in (1, 4, 7, len(texts)):
        detector = make_detector(config)
        verdicts = []
        for start in range(0, len(texts), batch):
            verdicts += detector.process(ids[start : start + batch], texts[start : start + batch])
        runs[batch] = [(v.verdict, v.duplicate_of, v.similarity) for v in verdicts]
    assert sum(kind != "unique" for kind, _, _ in runs[1]) > len(texts) / 2  # the stream is as planned
    assert runs[4] == runs[1] and runs[7] == runs[1] and runs[len(texts)] == runs[1]
