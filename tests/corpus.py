"""Deterministic synthetic corpora with planted near-duplicates, for tests."""

import random


def make_corpus(documents: int, seed: int = 7, copies: float = 0.3) -> list[str]:
    """``documents`` texts of ~60 words; a share ``copies`` are edited re-emissions of earlier ones.

    Edits (word replacements, insertions, deletions) are spread from none to
    heavy, so that similarities fall on both sides of usual thresholds.
    """
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)
    ]
    texts: list[str] = []
    for _ in range(documents):
        if texts and rng.random() < copies:
            words = rng.choice(texts).split()
            for _ in range(rng.randint(0, 12)):
                position = rng.randrange(len(words))
                action = rng.random()
                if action < 0.5:
                    words[position] = rng.choice(vocabulary)
                elif action < 0.75:
                    words.insert(position, rng.choice(vocabulary))
                elif len(words) > 5:
                    del words[position]
            texts.append(" ".join(words))
        else:
            texts.append(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(20, 100))))
    return texts
