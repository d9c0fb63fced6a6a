"""Signing the documents read from a batch of records, where one that cannot be signed is a dead letter.

Shared by the single-process stage (``worker.batch``) and the signers of a
sharded stage (``roles.signer``): nothing one record holds may fail a batch.
"""

import logging

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.documents import internal_error
from stream_dedup.kafka.messages import DeadLetter, InputDocument
from stream_dedup.lsh.generation import SignedBatch

log = logging.getLogger(__name__)


def sign_documents(
    detector: DuplicateDetector, documents: list[InputDocument], letters: list[DeadLetter]
) -> tuple[list[InputDocument], SignedBatch]:
    """Sign ``documents`` in one call; if that fails, find the documents that fail alone and dead-letter them.

    Returns the documents signed and their signatures; the others are
    appended to ``letters``. Signing is pure (no index is touched), so trying
    again is safe; the batch is signed whole first because one call per
    document is much slower.
    """
    try:
        return documents, detector.sign([d.text for d in documents], normalized=True)
    except Exception as error:
        log.error("signing a batch failed (%r); signing its documents one by one", error)
    kept = []
    for document in documents:
        try:
            detector.sign([document.text], normalized=True)
        except Exception as error:
            refusal = internal_error(error)
            letters.append(DeadLetter(refusal.reason, refusal.detail, document.source, document.record))
        else:
            kept.append(document)
    return kept, detector.sign([d.text for d in kept], normalized=True)
