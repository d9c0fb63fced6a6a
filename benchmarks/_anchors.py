"""The datasketch anchor: streaming dedup done the way datasketch users do it.

For each document in stream order: build a ``MinHash`` from its shingles
(``update_batch`` of UTF-8 encoded shingle strings, datasketch's default SHA-1
hash), query ``MinHashLSH`` for candidates, call the document a duplicate of the
candidate with the highest estimated Jaccard if that is >= threshold, then insert
it (every document is inserted, duplicate or not). ``MinHashLSH`` picks its own
bands and rows for the threshold, as its users let it.

Run as a script it is the offline job that ``offline.py`` times against our CLI::

    python benchmarks/_anchors.py IN.jsonl --output OUT.jsonl \
        --threshold 0.8 --num-perm 128 --shingle-size 5
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH


@dataclass(frozen=True)
class AnchorVerdict:
    id: str
    duplicate_of: str | None
    similarity: float | None


def minhash(shingles: Iterable[str], num_perm: int) -> MinHash:
    m = MinHash(num_perm=num_perm)
    m.update_batch([s.encode("utf-8") for s in shingles])
    return m


def stream_dedup(
    documents: Iterable[tuple[str, Iterable[str]]], threshold: float, num_perm: int
) -> Iterator[AnchorVerdict]:
    """Query-then-insert over ``(id, shingles)`` pairs in stream order."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    indexed: dict[str, MinHash] = {}
    for doc_id, shingles in documents:
        m = minhash(shingles, num_perm)
        best, best_sim = None, None
        for key in lsh.query(m):
            sim = m.jaccard(indexed[key])
            if sim >= threshold and (best_sim is None or sim > best_sim):
                best, best_sim = key, sim
        lsh.insert(doc_id, m)
        indexed[doc_id] = m
        yield AnchorVerdict(doc_id, best, best_sim)


def char_shingles(text: str, size: int) -> set[str]:
    """The usual Python way: lower-case, collapse whitespace, set of character k-grams."""
    text = " ".join(text.lower().split())
    return {text[i : i + size] for i in range(max(len(text) - size + 1, 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description="datasketch streaming dedup job (benchmark anchor)")
    parser.add_argument("input")
    parser.add_argument("--output", required=True)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--num-perm", type=int, default=128)
    parser.add_argument("--shingle-size", type=int, default=5)
    args = parser.parse_args()

    def documents() -> Iterator[tuple[str, set[str]]]:
        with open(args.input, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                yield record["id"], char_shingles(record["text"], args.shingle_size)

    with open(args.output, "w", encoding="utf-8") as out:
        for v in stream_dedup(documents(), args.threshold, args.num_perm):
            verdict = "unique" if v.duplicate_of is None else "duplicate"
            out.write(
                json.dumps(
                    {
                        "id": v.id,
                        "verdict": verdict,
                        "duplicate_of": v.duplicate_of,
                        "similarity": v.similarity,
                    }
                )
                + "\n"
            )


if __name__ == "__main__":
    main()
