"""A duplicate's text and its match's, fetched from the input topic and read as the stage reads them.

The records are fetched by the coordinates the verdict carries
(:class:`~stream_dedup.kafka.record_lookup.RecordLookup`) and read by
:func:`~stream_dedup.kafka.messages.read_record` with the stage's reading
settings (``input_format``, ``text_field``, ``id_field``...): the text shown
is the normalised text the stage compared (case-folded, whitespace
collapsed), so the shared passages are the ones it saw.
"""

from stream_dedup.cli.verdict_lines import ShownText
from stream_dedup.cli.watched_records import Coordinates, VerdictRecord
from stream_dedup.kafka.messages import DeadLetter, InputReading, read_record
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup


class VerdictTexts:
    """The texts of a verdict's document and match; a text that cannot be had comes with the reason."""

    def __init__(self, lookup: RecordLookup, reading: InputReading) -> None:
        self._lookup = lookup
        self._reading = reading

    def of(self, verdict: VerdictRecord) -> tuple[ShownText, ShownText]:
        """``(document, match)``; a unique verdict's match is ``(no match)``."""
        document = self._text(verdict.id, verdict.source, "the verdict has no source")
        if verdict.duplicate_of is None:
            return document, ShownText("", None, "no match")
        # A match past partition 65,535 or offset 2**48 has no coordinates (docs/verdicts.md).
        return document, self._text(verdict.duplicate_of, verdict.match_source, "the verdict has no match_source")

    def _text(self, doc_id: str, where: Coordinates | None, without: str) -> ShownText:
        if where is None:
            return ShownText(doc_id, None, without)
        found = self._lookup.fetch(where.topic, where.partition, where.offset)
        if isinstance(found, RecordGone):
            return ShownText(doc_id, None, f"record {where.partition}:{where.offset} is gone: {found.why}")
        read = read_record(found, self._reading)
        if isinstance(read, DeadLetter):
            return ShownText(
                doc_id,
                None,
                f"record {where.partition}:{where.offset} cannot be read as a document ({read.reason}: "
                f"{read.detail}); are input_format, text_field and id_field the stage's?",
            )
        if read.id != doc_id:  # the topic was recreated, or the reading settings are not the stage's
            return ShownText(doc_id, None, f"record {where.partition}:{where.offset} now holds document {read.id!r}")
        return ShownText(doc_id, read.text)
