"""Seeded client inputs for the protocols' registered examples (``Protocol.example``)."""

from __future__ import annotations

from typing import List

import numpy as np


def zipf_values(d: int, n: int = 4000, seed: int = 1) -> np.ndarray:
    """Zipf-like client values in ``[0, d)``: a few heavy values and a long tail."""
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.3, size=n) - 1, d - 1)


def random_sets(d: int, n: int = 800, seed: int = 2) -> List[List[int]]:
    """Set-valued client inputs: ``n`` users holding 0..4 distinct items of ``[0, d)``."""
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(d, size=int(rng.integers(0, 5)), replace=False).tolist()) for _ in range(n)]
