"""Compact signatures: the 8 low bits of each MinHash value (b-bit minwise hashing).

The index keeps one byte per signature slot instead of four: 128 bytes per
document at 128 permutations. Two documents agree on a slot when their
MinHash values agree (probability ``J``) or, otherwise, by chance
(probability ``c = 1/256``), so the agreement rate is ``p = J + (1 - J) c`` and
``J = (p - c) / (1 - c)`` (Li and König, 2010). The estimate's standard error
barely changes: ``sqrt(p (1 - p) / num_perm) / (1 - c)``.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.sketch.minhash import SignatureArray

_CHANCE_AGREEMENT = 1.0 / 256.0


def compact(signatures: SignatureArray) -> npt.NDArray[np.uint8]:
    """Keep the low byte of every slot."""
    return signatures.astype(np.uint8)


def estimate_similarity(agreements: npt.NDArray[np.int64], num_perm: int) -> npt.NDArray[np.float64]:
    """Jaccard estimate from the number of agreeing slots of compact signatures, in ``[0, 1]``."""
    rate = agreements / num_perm
    return np.clip((rate - _CHANCE_AGREEMENT) / (1.0 - _CHANCE_AGREEMENT), 0.0, 1.0)
