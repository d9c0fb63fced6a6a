"""Deterministic synthetic corpora with planted near-duplicates, for tests."""

import random


def make_corpus(documents: int, seed: int = 7, copies: float = 0.3) -> list[str]:
    """``documents`` texts of ~60 words; a share ``copies`` are edited re-emissions of earlier ones.

    Edits (word replacements, insertions, deletions) are spread from none to
    heavy, so that similarities fall on both sides of usual thresholds.
    """
    return [text for text, _ in make_clustered_corpus(documents, seed, copies)]


def make_clustered_corpus(documents: int, seed: int = 7, copies: float = 0.3) -> list[tuple[str, int]]:
    """Like :func:`make_corpus`, with each text's cluster: the position of the original it descends from."""
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)
    ]
    corpus: list[tuple[str, int]] = []
    for position in range(documents):
        if corpus and rng.random() < copies:
            source, cluster = rng.choice(corpus)
            words = source.split()
            for _ in range(rng.randint(0, 12)):
                at = rng.randrange(len(words))
                action = rng.random()
                if action < 0.5:
                    words[at] = rng.choice(vocabulary)
                elif action < 0.75:
                    words.insert(at, rng.choice(vocabulary))
                elif len(words) > 5:
                    del words[at]
            corpus.append((" ".join(words), cluster))
        else:
            corpus.append((" ".join(rng.choice(vocabulary) for _ in range(rng.randint(20, 100))), position))
    return corpus
