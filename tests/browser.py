"""A real headless browser for the tests of the pages and pictures: Debian's Chromium, driven by its command line.

``--dump-dom`` gives the document as the browser built it (what a person sees, after
the HTML parser's repairs, not the bytes served) and ``--screenshot`` a PNG of it. No
WebDriver: the pages have no script, so loading one and reading it back is all there is.

``scripts/test.sh`` installs Chromium where it is missing. Without it a test skips on a
developer's machine and fails under CI (``CI`` set): a page nobody rendered must not pass.

Example::

    browser = headless_chromium(tmp_path)
    page = PageElements(browser.dom("http://127.0.0.1:9400/"))
    assert page.value("documents") == 1000
    browser.screenshot("http://127.0.0.1:9400/", tmp_path / "status.png")
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

_BINARIES = ("chromium", "chromium-browser")
_TIMEOUT_SECONDS = 90


class HeadlessChromium:
    """One Chromium binary with a profile directory of its own (parallel tests do not share one)."""

    def __init__(self, binary: str, profile: Path) -> None:
        self.binary = binary
        self.profile = profile

    def dom(self, url: str) -> str:
        """The serialised DOM of ``url`` once loaded."""
        return self._run("--dump-dom", url).stdout

    def screenshot(self, url: str, path: Path, width: int = 1280, height: int = 1000) -> Path:
        """A PNG of ``url`` at ``width`` x ``height``; checked to be a PNG of that size."""
        self._run(f"--screenshot={path}", f"--window-size={width},{height}", url)
        assert png_size(path) == (width, height), f"{path} is not a {width}x{height} PNG"
        return path

    def _run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        command = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={self.profile}",
            *arguments,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS, check=False)
        assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}: {result.stderr[-2000:]}"
        return result


def headless_chromium(scratch: Path) -> HeadlessChromium:
    """The installed Chromium (profile under ``scratch``); skips, or under CI fails, if there is none."""
    binary = next((found for name in _BINARIES if (found := shutil.which(name))), None)
    if binary is None:
        message = "chromium is not installed: scripts/test.sh installs it (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    profile = scratch / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return HeadlessChromium(binary, profile)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (raises if ``path`` is not a PNG)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return int(width), int(height)


class PageElements(HTMLParser):
    """What a test reads from a rendered page: tags, elements by id, table rows, the visible text."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: dict[str, dict[str, str | None]] = {}
        self.text_by_id: dict[str, str] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.text: list[str] = []
        self._open_ids: list[tuple[str, str]] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        attributes = dict(attrs)
        identity = attributes.get("id")
        if identity:
            self.attributes[identity] = attributes
            self.text_by_id[identity] = ""
            self._open_ids.append((tag, identity))
        if tag == "table":
            self._table = identity or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if self._open_ids and self._open_ids[-1][0] == tag:
            self._open_ids.pop()
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._table is not None and self._row:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, identity in self._open_ids:
            self.text_by_id[identity] += data
        if self._cell is not None:
            self._cell.append(data)

    def value(self, identity: str) -> float | None:
        """The ``data-value`` of the element with that id, as a number (None if it has none)."""
        raw = self.attributes[identity].get("data-value")
        return None if raw is None else float(raw)
