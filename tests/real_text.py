"""Real human-written prose for tests: paragraphs of the Python standard library's docstrings.

Every Python installation carries them, so tests need nothing installed
(the benchmarks' larger corpus needs Debian packages). The top-level modules'
sources are read with :mod:`ast`, never imported, in a fixed order (about 900
paragraphs, two seconds); the paragraphs differ a little between Python
versions, which is why tests compute their truth by brute force on whatever
text they get.
"""

import ast
import functools
import re
import sysconfig
from pathlib import Path


@functools.cache
def stdlib_paragraphs(min_chars: int = 200, max_chars: int = 2000) -> tuple[str, ...]:
    """Distinct docstring paragraphs of ``min_chars``-``max_chars`` characters that read as prose."""
    root = Path(sysconfig.get_paths()["stdlib"])
    seen: dict[str, None] = {}
    for path in sorted(root.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                for block in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                    text = " ".join(block.split())
                    if min_chars <= len(text) <= max_chars and _is_prose(text):
                        seen.setdefault(text)
    return tuple(seen)


def _is_prose(text: str) -> bool:
    letters = sum(c.isalpha() or c == " " for c in text)
    return ">>>" not in text and letters >= 0.85 * len(text)


def texts_sharing_a_signature(count: int) -> list[str]:
    """``count`` short posts that share one signature line, each with its own body from :func:`stdlib_paragraphs`.

    Every other post is the signature, the first 50 characters of its body and the signature again: each
    of those is held a little under 80% by many posts before it, which is where the estimate's noise,
    maximised over many candidates, crosses a containment threshold of 0.8.
    """
    paragraphs = stdlib_paragraphs()
    signature = paragraphs[0][:90]
    bodies = [paragraph[:150] for paragraph in paragraphs[1 : count + 1]]
    quoted = [f"{signature}\n\n{body[:50]}\n\n{signature}" for body in bodies]
    return [f"{signature} {body}" if i % 2 else quoted[i] for i, body in enumerate(bodies)]
