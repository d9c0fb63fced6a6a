"""A generation: the documents indexed during one stretch of the stream.

The index is a list of generations, oldest first; only the newest takes new
documents. Retention evicts whole generations, so forgetting old documents
costs nothing per document and never touches the open-addressing tables
(which cannot delete cheaply). A generation stores, per document, its 8-bit
compact signature and its id (bytes in one arena plus end offsets), and its
band tables; its documents are numbered ``0..count-1`` locally and
``base_seq + local`` globally.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.band_keys import band_keys
from stream_dedup.lsh.band_table import BandTables
from stream_dedup.lsh.params import BandParameters
from stream_dedup.text.hashing import Uint64Array


class Generation:
    """Compact signatures, ids and band tables of a run of consecutive documents."""

    def __init__(self, num_perm: int, banding: BandParameters, base_seq: int) -> None:
        self.banding = banding
        self.base_seq = base_seq
        self.signatures = Arena((num_perm,), np.uint8)
        self.id_bytes = Arena((), np.uint8)
        self.id_ends = Arena((), np.uint64)
        self.tables = BandTables(banding.bands)
        self.first_event_time = float("inf")
        self.last_event_time = float("-inf")

    def __len__(self) -> int:
        return len(self.signatures)

    @property
    def nbytes(self) -> int:
        return self.signatures.nbytes + self.id_bytes.nbytes + self.id_ends.nbytes + self.tables.nbytes

    def add(
        self,
        compact: npt.NDArray[np.uint8],
        keys: Uint64Array,
        ids: list[str],
        event_times: npt.NDArray[np.float64],
        admit: npt.NDArray[np.bool_],
    ) -> None:
        """Store documents and enter them in the bands where ``admit[row, band]`` is true."""
        first_local = len(self)
        self.signatures.extend(compact)
        encoded = [doc_id.encode("utf-8") for doc_id in ids]
        self.id_bytes.extend(np.frombuffer(b"".join(encoded), dtype=np.uint8))
        ends = np.cumsum([len(e) for e in encoded], dtype=np.uint64)
        previous_end = self.id_ends.values[-1] if len(self.id_ends) else np.uint64(0)
        self.id_ends.extend(ends + previous_end)
        rows, bands = np.nonzero(admit)
        self.tables.insert(bands, keys[rows, bands], rows + first_local, self.keys_of)
        if event_times.size:
            self.first_event_time = min(self.first_event_time, float(event_times.min()))
            self.last_event_time = max(self.last_event_time, float(event_times.max()))

    def keys_of(self) -> Uint64Array:
        """Band keys of every stored document, recomputed from the compact signatures."""
        return band_keys(self.signatures.values, self.banding)

    def id_of(self, local: int) -> str:
        ends = self.id_ends.values
        start = int(ends[local - 1]) if local else 0
        return bytes(self.id_bytes.values[start : int(ends[local])]).decode("utf-8")
