"""Corpora whose verdicts are unambiguous, with the truth from exact Jaccard over character 5-shingles.

Originals are random words (pairwise far below any threshold); copies are an
original with one word changed (far above 0.8). So the expected verdict of a
document does not depend on the sketch, only on which earlier documents the
stage has seen: brute force over the texts is the reference, never the code
under test.
"""

from __future__ import annotations

import random
import unicodedata


def clear_corpus(originals: int, copies: int, seed: int = 5) -> list[tuple[str, int]]:
    """``originals`` random texts, then ``copies`` one-word edits of them; ``(text, original's position)``."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    corpus = [(" ".join(rng.choice(words) for _ in range(60)), i) for i in range(originals)]
    for _ in range(copies):
        text, origin = corpus[rng.randrange(originals)]
        edited = text.split()
        edited[rng.randrange(len(edited))] = rng.choice(words)
        corpus.append((" ".join(edited), origin))
    return corpus


def shingles(text: str, size: int = 5) -> set[str]:
    normal = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return {normal[i : i + size] for i in range(max(1, len(normal) - size + 1))}


def jaccard(a: str, b: str) -> float:
    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y)


def brute_force_verdicts(texts_in_order: list[tuple[str, str]], threshold: float = 0.8) -> dict[str, str]:
    """``id -> "unique" | "duplicate"`` for documents judged in this order, by exact Jaccard with every earlier one."""
    seen: list[set[str]] = []
    verdicts = {}
    for doc_id, text in texts_in_order:
        own = shingles(text)
        best = max((len(own & s) / len(own | s) for s in seen), default=0.0)
        verdicts[doc_id] = "duplicate" if best >= threshold else "unique"
        seen.append(own)
    return verdicts
