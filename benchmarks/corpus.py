"""Deterministic evaluation corpora: real human-written paragraphs, with planted near-duplicates.

Real text. The machine reaches no web, only package registries, so the text
comes from three Debian packages of human-written prose, installed with::

    apt-get install -y --no-install-recommends python3.11-doc perl-doc fortunes

* ``python3.11-doc``: the reStructuredText sources of the Python documentation,
* ``perl-doc``: the POD sources of the Perl documentation,
* ``fortunes``: the classic fortune-cookie quotes (short, ad-like texts).

A paragraph is kept when it is 200-2000 characters long and reads as prose
(mostly letters and spaces, no interpreter prompts, no markup directives):
about 27,000 distinct paragraphs. Those docs contain some natural near-duplicates
(the Perl ``*delta.pod`` files repeat text release after release); they stay,
because the ground truth is computed by brute force and counts them too.

Planted near-duplicates. A fraction of the stream re-emits an earlier document,
later in the stream, with an edit a person or a scraper makes: character typos,
word insertions, deletions and swaps, truncation, appended boilerplate, changed
prices and numbers, a mix of these, or no edit at all (exact copy). The edit
strength is drawn uniformly, so the planted pairs spread over Jaccard about
0.4-1.0 on character shingles, densest around 0.6-0.95 where a 0.8 threshold
decides precision and recall.

Everything is seeded: the same arguments give the same JSONL, byte for byte.

Command line::

    python benchmarks/corpus.py stream OUT.jsonl --docs 20000 --dup-fraction 0.3 --seed 7
    python benchmarks/corpus.py kilobyte OUT.jsonl --docs 50000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEBIAN_PACKAGES = ("python3.11-doc", "perl-doc", "fortunes")
_PYTHON_DOCS = Path("/usr/share/doc/python3.11/html/_sources")
_PERL_DOCS = Path("/usr/share/perl/5.36/pod")
_FORTUNES = Path("/usr/share/games/fortunes")
_FORTUNE_SKIP = {"art", "ascii-art"}

_BOILERPLATE = (
    "Contact us today for more information.",
    "Call now, this offer will not last!",
    "All rights reserved. Reproduction without permission is prohibited.",
    "Posted via the community board. Reply to this listing for details.",
    "Free delivery within 10 miles. Cash only, no trades.",
    "Sent from my phone, please excuse any typos.",
    "Unsubscribe at any time by replying STOP.",
)
_FILLER_WORDS = (
    "very",
    "really",
    "new",
    "great",
    "used",
    "original",
    "simply",
    "also",
    "just",
    "quite",
    "brand",
    "nice",
    "local",
    "please",
    "now",
    "only",
    "best",
    "clean",
)
_EDIT_KINDS = (
    "exact",
    "typos",
    "insert",
    "delete",
    "swap",
    "truncate",
    "boilerplate",
    "numbers",
    "mixed",
)


class CorpusUnavailableError(RuntimeError):
    """The Debian packages holding the real text are not installed."""


@dataclass(frozen=True)
class Document:
    """One record of a stream; ``origin`` is the id of the document a planted copy was made from."""

    id: str
    text: str
    origin: str | None = None
    edit: str | None = None

    def record(self) -> dict[str, str]:
        return {"id": self.id, "text": self.text}


def _is_prose(paragraph: str) -> bool:
    if paragraph.startswith(("..", ":", "=", "+", "|")) or ">>>" in paragraph:
        return False
    letters = sum(c.isalpha() or c == " " for c in paragraph)
    return letters >= 0.8 * len(paragraph)


def _paragraphs(text: str, separator: str) -> Iterable[str]:
    for block in re.split(separator, text):
        yield " ".join(block.split())


def real_paragraphs(min_chars: int = 200, max_chars: int = 2000) -> list[str]:
    """Distinct prose paragraphs of ``min_chars``-``max_chars`` characters, in a fixed order.

    Raises :class:`CorpusUnavailableError` naming the ``apt-get`` command when a source is missing.
    """
    missing = [d for d in (_PYTHON_DOCS, _PERL_DOCS, _FORTUNES) if not d.is_dir()]
    if missing:
        raise CorpusUnavailableError(
            f"{', '.join(map(str, missing))} not found; install the text with "
            f"`apt-get install -y --no-install-recommends {' '.join(DEBIAN_PACKAGES)}`"
        )
    files = [(p, r"\n[ \t]*\n") for p in sorted(_PYTHON_DOCS.rglob("*.txt"))]
    files += [(p, r"\n[ \t]*\n") for p in sorted(_PERL_DOCS.glob("*.pod"))]
    files += [
        (p, r"\n%\n")
        for p in sorted(_FORTUNES.iterdir())
        if p.is_file() and not p.is_symlink() and not p.suffix and p.name not in _FORTUNE_SKIP
    ]
    seen: dict[str, None] = {}
    for path, separator in files:
        for paragraph in _paragraphs(path.read_text(encoding="utf-8", errors="replace"), separator):
            if min_chars <= len(paragraph) <= max_chars and _is_prose(paragraph):
                seen.setdefault(paragraph)
    return list(seen)


# --- edits -------------------------------------------------------------------------------


def _typos(words: list[str], count: int, rng: random.Random) -> list[str]:
    for _ in range(count):
        i = rng.randrange(len(words))
        w = words[i]
        j = rng.randrange(len(w))
        op = rng.randrange(3)
        if op == 0:  # substitute a letter
            w = w[:j] + rng.choice("abcdefghijklmnopqrstuvwxyz") + w[j + 1 :]
        elif op == 1 and len(w) > 1:  # drop a letter
            w = w[:j] + w[j + 1 :]
        else:  # double a letter
            w = w[: j + 1] + w[j:]
        words[i] = w
    return words


def _insert(words: list[str], count: int, rng: random.Random) -> list[str]:
    for _ in range(count):
        words.insert(rng.randrange(len(words) + 1), rng.choice(_FILLER_WORDS))
    return words


def _delete(words: list[str], count: int, rng: random.Random) -> list[str]:
    for _ in range(min(count, len(words) - 1)):
        del words[rng.randrange(len(words))]
    return words


def _swap(words: list[str], count: int, rng: random.Random) -> list[str]:
    for _ in range(count):
        i = rng.randrange(max(len(words) - 1, 1))
        words[i : i + 2] = words[i : i + 2][::-1]
    return words


def _numbers(text: str, count: int, rng: random.Random) -> str:
    """Change up to ``count`` numbers; a text without enough numbers gets a price line first."""
    if len(re.findall(r"\d+", text)) < count:
        text += f" Price: ${rng.randrange(5, 5000)}. Ref {rng.randrange(10000, 99999)}."
    spans = [m.span() for m in re.finditer(r"\d+", text)]
    for start, end in sorted(rng.sample(spans, min(count, len(spans))), reverse=True):
        text = text[:start] + str(rng.randrange(1, 10 ** (end - start + 1))) + text[end:]
    return text


def near_duplicate(text: str, rng: random.Random, kind: str | None = None) -> tuple[str, str]:
    """Return ``(edited_text, kind)``: a realistic edit of ``text`` with a random strength.

    ``strength`` is uniform in [0, 1]; it scales the number of edit operations with the
    length of the text so that short and long documents land at similar Jaccard values.
    """
    kind = kind or rng.choices(_EDIT_KINDS, weights=(1, 2, 2, 2, 1, 1, 1, 1, 3))[0]
    strength = rng.random()
    words = text.split(" ")
    per_word = max(1, round(strength * len(words) * 0.12))
    if kind == "exact":
        return text, kind
    if kind == "typos":
        return " ".join(_typos(words, per_word, rng)), kind
    if kind == "insert":
        return " ".join(_insert(words, per_word, rng)), kind
    if kind == "delete":
        return " ".join(_delete(words, per_word, rng)), kind
    if kind == "swap":
        return " ".join(_swap(words, per_word, rng)), kind
    if kind == "truncate":  # keep 55-100% of the words, from the front
        keep = max(1, round(len(words) * (1 - 0.45 * strength)))
        return " ".join(words[:keep]), kind
    if kind == "boilerplate":
        extra = rng.sample(_BOILERPLATE, 1 + round(strength * 2))
        return text + " " + " ".join(extra), kind
    if kind == "numbers":
        return _numbers(text, 1 + round(strength * 3), rng), kind
    # "mixed": a lighter dose of two to three different edits
    edited = text
    for sub in rng.sample(_EDIT_KINDS[1:-1], rng.randint(2, 3)):
        edited, _ = near_duplicate(edited, random.Random(rng.random()), sub)
    return edited, kind


# --- streams -------------------------------------------------------------------------------


def planted_stream(
    docs: int, dup_fraction: float = 0.3, seed: int = 7, paragraphs: Sequence[str] | None = None
) -> list[Document]:
    """A stream of ``docs`` documents of which about ``dup_fraction`` are planted copies.

    Each planted copy comes after the original it was made from, at a uniformly random
    later position. Ids are ``d0000000`` in stream order.
    """
    rng = random.Random(seed)
    pool = list(paragraphs if paragraphs is not None else real_paragraphs())
    rng.shuffle(pool)
    planted = round(docs * dup_fraction)
    originals = pool[: docs - planted]
    if len(originals) < docs - planted:
        raise ValueError(f"--docs {docs} needs {docs - planted} originals, the corpus has {len(pool)}")
    # (position, tie-break, text, index of the original or -1, edit kind)
    events: list[_Event] = [(float(i), 0, text, -1, None) for i, text in enumerate(originals)]
    for n in range(planted):
        k = rng.randrange(len(originals))
        edited, kind = near_duplicate(originals[k], rng)
        events.append((k + rng.random() * (len(originals) - k), 1 + n, edited, k, kind))
    return _in_stream_order(events, "d")


#: A document of a stream being built: (position, tie-break, text, index of its original or -1, edit kind).
_Event = tuple[float, int, str, int, str | None]


def _in_stream_order(events: list[_Event], prefix: str) -> list[Document]:
    """The documents in position order, numbered ``{prefix}0000000`` on; a copy names its original's id."""
    events.sort(key=lambda e: (e[0], e[1]))
    original_ids: list[str] = []  # an original always comes before its copies
    stream = []
    for i, (_, _, text, origin, edit) in enumerate(events):
        doc_id = f"{prefix}{i:07d}"
        if origin < 0:
            original_ids.append(doc_id)
            stream.append(Document(doc_id, text))
        else:
            stream.append(Document(doc_id, text, original_ids[origin], edit))
    return stream


def editions_stream(texts: int, editions: int = 7, seed: int = 13) -> list[Document]:
    """``texts`` real paragraphs, each published in ``editions`` successive editions.

    Edition ``e + 1`` of a text is a realistic edit (``near_duplicate``) of edition
    ``e``; the stream holds every text's first edition, then every second edition, and
    so on, as a corpus that is republished with corrections does. Each document's
    nearest earlier relative is usually its previous edition, at a Jaccard spread over
    the whole range, so the stream is dense near any threshold.
    """
    rng = random.Random(seed)
    pool = real_paragraphs()
    rng.shuffle(pool)
    current = pool[:texts]
    stream = [Document(f"e0-{i:06d}", text) for i, text in enumerate(current)]
    for edition in range(1, editions):
        current = [near_duplicate(text, rng)[0] for text in current]
        stream += [Document(f"e{edition}-{i:06d}", text, f"e{edition - 1}-{i:06d}") for i, text in enumerate(current)]
    return stream


def containment_stream(
    docs: int, planted: float = 0.3, seed: int = 23, paragraphs: Sequence[str] | None = None
) -> list[Document]:
    """Real articles, and planted excerpts and expansions of earlier ones: a stream for containment.

    Originals are articles of one to three real paragraphs. Each planted
    document comes later than the article it is made from, and is either

    * an excerpt (``edit="excerpt"``): a run of consecutive words of the
      article, 35-95% of them: a paragraph quoted from an earlier article,
      contained in it;
    * an expansion (``edit="expansion"``): the article with 10-150% more
      text before or after it, boilerplate sentences or a paragraph of other
      real text: a listing re-posted with boilerplate added, a page that
      embeds an earlier one; it contains the article.

    Half of the quoted or embedded articles get typos in up to 8% of their
    words. Shares, typos and added lengths are drawn uniformly, so planted
    pairs fall on both sides of usual containment thresholds and of a size
    ratio of 2.
    ``paragraphs`` default to :func:`real_paragraphs`; ids are ``c0000000``
    in stream order.
    """
    rng = random.Random(seed)
    pool = list(paragraphs if paragraphs is not None else real_paragraphs())
    rng.shuffle(pool)
    planted_count = round(docs * planted)
    articles: list[str] = []
    while len(articles) < docs - planted_count:
        if not pool:
            raise ValueError(f"--docs {docs} needs more paragraphs than the {len(paragraphs or [])} given")
        take = min(len(pool), rng.choice((1, 1, 2, 3)))
        articles.append(" ".join(pool[:take]))
        del pool[:take]
    fillers = pool or articles
    events: list[_Event] = [(float(i), 0, text, -1, None) for i, text in enumerate(articles)]
    for n in range(planted_count):
        k = rng.randrange(len(articles))
        if rng.random() < 0.5:
            text, kind = _excerpt(articles[k], rng), "excerpt"
        else:
            text, kind = _expansion(articles[k], fillers, rng), "expansion"
        events.append((k + rng.random() * (len(articles) - k), 1 + n, text, k, kind))
    return _in_stream_order(events, "c")


def _excerpt(article: str, rng: random.Random) -> str:
    """A run of 35-95% of the article's words, half the time with typos."""
    words = article.split(" ")
    keep = max(1, round(len(words) * rng.uniform(0.35, 0.95)))
    start = rng.randrange(len(words) - keep + 1)
    return _retyped(words[start : start + keep], rng)


def _retyped(words: list[str], rng: random.Random) -> str:
    """The words, half the time with typos in up to 8% of them: containment then spreads over 0.6-1."""
    if rng.random() < 0.5:
        words = _typos(words, round(len(words) * rng.uniform(0.0, 0.08)), rng)
    return " ".join(words)


def _expansion(article: str, fillers: Sequence[str], rng: random.Random) -> str:
    """The article with 10-150% more text, boilerplate or other real text, after it or before it."""
    wanted = round(len(article) * rng.uniform(0.1, 1.5))
    if rng.random() < 0.5:
        added = " ".join(rng.choice(_BOILERPLATE) for _ in range(1 + wanted // 40))
    else:
        added = " ".join(rng.choice(fillers) for _ in range(1 + wanted // 300))
    added = added[:wanted].rsplit(" ", 1)[0] if len(added) > wanted else added
    article = _retyped(article.split(" "), rng)
    return f"{article} {added}" if rng.random() < 0.7 else f"{added} {article}"


def real_titles() -> list[str]:
    """Distinct short lines (3-80 characters) of the same real text: headings, items, one-liners."""
    real_paragraphs()  # the same sources, and the same error when they are missing
    files = sorted(_PYTHON_DOCS.rglob("*.txt")) + sorted(_PERL_DOCS.glob("*.pod"))
    files += [p for p in sorted(_FORTUNES.iterdir()) if p.is_file() and not p.is_symlink() and not p.suffix]
    seen: dict[str, None] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            title = " ".join(line.replace("=head1", "").replace("=head2", "").replace("=item", "").split())
            if 3 <= len(title) <= 80 and sum(c.isalpha() or c == " " for c in title) >= 0.8 * len(title):
                seen.setdefault(title)
    return list(seen)


def title_stream(docs: int, seed: int = 17) -> list[Document]:
    """Titles, names and one-liners, half of them at most 10 characters; 30% re-posted with an edit.

    The edits are what re-posting does to a title: another case, other spacing, a typo,
    an appended word, a cut-off end, or none.
    """
    rng = random.Random(seed)
    titles = real_titles()
    words = sorted({w for t in titles for w in t.split() if 2 <= len(w) <= 10 and w.isalpha()})
    stream: list[Document] = []
    for i in range(docs):
        doc_id = f"t{i:07d}"
        if stream and rng.random() < 0.3:
            origin = rng.choice(stream)
            stream.append(Document(doc_id, _retitled(origin.text, rng, words), origin.id))
        elif rng.random() < 0.5:
            stream.append(Document(doc_id, rng.choice(words) if rng.random() < 0.6 else rng.choice(titles)[:10]))
        else:
            stream.append(Document(doc_id, rng.choice(titles)))
    return stream


def _retitled(text: str, rng: random.Random, words: Sequence[str]) -> str:
    edit = rng.randrange(6)
    if edit == 0:
        return text.upper() if rng.random() < 0.5 else text.title()
    if edit == 1:
        return "  " + text.replace(" ", "  ") + " "
    if edit == 2:
        at = rng.randrange(len(text))
        return text[:at] + rng.choice("aeiouxz") + text[at + 1 :]
    if edit == 3:
        return f"{text} {rng.choice(words)}"
    if edit == 4:
        kept = text.strip()
        return kept[: max(1, len(kept) - rng.randint(1, 6))]
    return text


def kilobyte_documents(docs: int, seed: int = 11, size: int = 1024) -> list[str]:
    """``docs`` distinct documents of exactly ``size`` characters of real prose.

    Each is random paragraphs run together and cut at ``size`` characters, so that
    throughput numbers are per kilobyte of ordinary text. A cut that falls on a space
    ends the document with a full stop instead: a document ending on a space has an
    empty last word, which :func:`near_duplicate`'s edits cannot work on.
    """
    rng = random.Random(seed)
    pool = real_paragraphs()
    out = []
    for _ in range(docs):
        parts, length = [], 0
        while length < size:
            parts.append(pool[rng.randrange(len(pool))])
            length += len(parts[-1]) + 1
        text = " ".join(parts)[:size]
        out.append(text[:-1] + "." if text.endswith(" ") else text)
    return out


def write_jsonl(path: str | Path, records: Iterable[dict[str, str]]) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    stream = sub.add_parser("stream", help="real paragraphs with planted near-duplicates")
    stream.add_argument("output")
    stream.add_argument("--docs", type=int, default=20_000)
    stream.add_argument("--dup-fraction", type=float, default=0.3)
    stream.add_argument("--seed", type=int, default=7)
    kilo = sub.add_parser("kilobyte", help="1 KB documents of real prose, for throughput")
    kilo.add_argument("output")
    kilo.add_argument("--docs", type=int, default=50_000)
    kilo.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    try:
        if args.kind == "stream":
            records = (d.record() for d in planted_stream(args.docs, args.dup_fraction, args.seed))
        else:
            records = ({"id": f"k{i:07d}", "text": t} for i, t in enumerate(kilobyte_documents(args.docs, args.seed)))
        count = write_jsonl(args.output, records)
    except CorpusUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {count} records to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
