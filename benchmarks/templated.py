"""A stream of templated listings: every document near the threshold of hundreds before it.

Listing and ad platforms post the same template with a few fields changed
(rooms, size, street, price, phone). Short texts of one template lie at
Jaccard 0.6-0.95 of each other, so every band key is crowded (the hot-bucket
cap, ``max_bucket_size``, bounds each to 64 documents), a document has
hundreds of candidates, and most lie within the sketch's four standard errors
of the threshold, where the default verification settles them by the texts.
This is the engine's costliest kind of stream; the table says how costly,
against the same engine on real prose (``corpus.planted_stream``, the same
number of documents, 30% of them planted copies), and what settling by text costs here (the same
listings judged by the sketch alone). Verdicts are scored against brute force
(exact Jaccard of the char 5-shingles) on the first 2,000 listings.

    python benchmarks/templated.py [--quick]     # 20,000 listings (5,000 with --quick)
"""

from __future__ import annotations

import argparse
import random

from _table import Row, print_table, stopwatch
from accuracy import detector_verdicts, exact_duplicates, score
from corpus import planted_stream

from stream_dedup.config import DetectionConfig
from stream_dedup.text import normalize, shingle_set

TEMPLATES = (
    "Apartment for rent, {rooms} rooms, {size} m2, {street}, near the station. Bright and quiet, "
    "renovated kitchen. {price} EUR a month. Call {phone}.",
    "{rooms}-room flat to let on {street}: {size} m2, balcony, lift, cellar. Rent {price} EUR, "
    "deposit three months. Viewing: {phone}",
    "Used car for sale: {brand} {model}, {year}, {km} km, one owner, full service history. "
    "{price} EUR or nearest offer. Phone {phone}",
    "Room in shared house on {street}, {size} m2, furnished, bills included, {price} EUR. "
    "Students welcome. Text {phone} after 6 pm.",
)
STREETS = ("Elm Street", "Harbour Road", "Mill Lane", "Station Square", "Oak Avenue", "King's Row", "Bridge St")
BRANDS = (("Volkswagen", "Golf"), ("Toyota", "Corolla"), ("Ford", "Focus"), ("Renault", "Clio"))
BRUTE_FORCE = 2_000


def listings(count: int, seed: int = 11) -> list[str]:
    """``count`` listings of :data:`TEMPLATES`, their fields drawn from the small pools of a real site.

    An agency posts from one phone number, sizes and prices cluster: two
    listings of one template often differ in a field or two, which puts
    them near the threshold of each other.
    """
    rng = random.Random(seed)
    phones = [f"0{rng.randint(600_000_000, 699_999_999)}" for _ in range(25)]
    out = []
    for _ in range(count):
        brand, model = rng.choice(BRANDS)
        out.append(
            rng.choice(TEMPLATES).format(
                rooms=rng.randint(1, 5),
                size=rng.randrange(20, 140, 5),
                street=rng.choice(STREETS),
                price=rng.randrange(400, 2_400, 50),
                phone=rng.choice(phones),
                brand=brand,
                model=model,
                year=rng.randint(2010, 2024),
                km=rng.randrange(10_000, 200_000, 10_000),
            )
        )
    return out


def rate(texts: list[str], settle: bool = True) -> tuple[float, list[str | None]]:
    """Docs/s of ``stream-dedup dedup``'s engine (batches of 4,096) over ``texts``, and its verdicts."""
    ids = [str(i) for i in range(len(texts))]
    with stopwatch() as seconds:
        pointers = detector_verdicts(DetectionConfig(), ids, texts, batch=4_096, settle=settle)
    return len(texts) / seconds[0], pointers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 listings")
    count = 5_000 if parser.parse_args().quick else 20_000
    texts = listings(count)
    prose = [d.text for d in planted_stream(count)]

    ours, pointers = rate(texts)
    sketch_alone, _ = rate(texts, settle=False)
    on_prose, _ = rate(prose)
    config = DetectionConfig()
    sets = [shingle_set(normalize(t), config.shingling()) for t in texts[:BRUTE_FORCE]]
    truth = exact_duplicates(sets, config.threshold)
    scores = score([p is not None for p in pointers[:BRUTE_FORCE]], [j is not None for j, _ in truth])
    duplicates = sum(j is not None for j, _ in truth)
    print_table(
        f"templated listings: {count:,} of {len(TEMPLATES)} templates, t={config.threshold}, "
        f"{config.num_perm} perms, char {config.shingle_size}-shingles, batches of 4,096",
        [
            Row("docs/s, pairs near t settled by text (default)", ours, "the same, by the sketch alone", sketch_alone),
            Row("docs/s, pairs near t settled by text (default)", ours, "real prose, same count", on_prose),
            Row(f"precision vs brute force, first {BRUTE_FORCE:,}", scores.precision, fmt=".4f"),
            Row(f"recall vs brute force, first {BRUTE_FORCE:,}", scores.recall, fmt=".4f"),
        ],
        [f"brute force: {duplicates:,} of the first {BRUTE_FORCE:,} listings have an earlier one at J >= t"],
    )


if __name__ == "__main__":
    main()
