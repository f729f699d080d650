"""Where client-side randomness comes from.

Clients perturb with ChaCha20 (C++ core) keyed by 256 bits. The key policy:

* ``rng=None`` (default, for real clients): every batch gets a fresh key from the
  operating system's entropy source (:func:`secrets.token_bytes`). This is the only
  setting that should be used on users' devices.
* ``rng=int | numpy.random.SeedSequence | numpy.random.Generator``: keys are derived
  deterministically, so simulations are reproducible. **For simulation only**: anyone
  who knows the seed can undo the perturbation.

Each element of a batch draws from its own ChaCha20 blocks, so outputs do not depend
on the number of threads.
"""

from __future__ import annotations

import secrets
from typing import Union

import numpy as np

from .errors import ParameterError

RngLike = Union[None, int, np.random.SeedSequence, np.random.Generator]

__all__ = ["KeySource", "RngLike", "SECRET_BYTES", "new_secrets"]


class KeySource:
    """Produces one fresh 32-byte ChaCha20 key per batch (see module docstring)."""

    __slots__ = ("_generator",)

    def __init__(self, rng: RngLike = None):
        if rng is None:
            self._generator = None
        elif isinstance(rng, np.random.Generator):
            self._generator = rng
        elif isinstance(rng, np.random.SeedSequence):
            self._generator = np.random.Generator(np.random.PCG64(rng))
        elif isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
            if rng < 0:
                raise ParameterError(f"rng seed must be a non-negative integer, got {rng}")
            self._generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(rng))))
        else:
            raise ParameterError(
                "rng must be None (OS entropy), an int seed, a numpy SeedSequence or a numpy "
                f"Generator, got {type(rng).__name__}")

    @property
    def seeded(self) -> bool:
        """True when keys are reproducible (simulation), False for OS entropy."""
        return self._generator is not None

    def key(self) -> bytes:
        """A fresh 256-bit key for the next batch."""
        if self._generator is None:
            return secrets.token_bytes(32)
        return self._generator.integers(0, 2**32, size=8, dtype=np.uint32).astype("<u4").tobytes()

    def generator(self) -> np.random.Generator:
        """A numpy Generator for server-side or simulation choices (seeded when seeded,
        else seeded from OS entropy)."""
        if self._generator is None:
            return np.random.Generator(np.random.PCG64(np.random.SeedSequence()))
        return self._generator


#: Bytes of a user secret.
SECRET_BYTES = 32


def new_secrets(n: int, rng: RngLike = None) -> np.ndarray:
    """``n`` user secrets, ``uint8[n, 32]``. ``rng=None`` (the only setting for real users)
    draws them from the operating system; a seed makes them reproducible, **for simulation
    only**: anyone who knows the seed knows every user's permanent responses."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ParameterError(f"n must be a non-negative integer, got {n!r}")
    n = int(n)
    if rng is None:
        raw = secrets.token_bytes(SECRET_BYTES * n)
        return np.frombuffer(raw, dtype=np.uint8).reshape(n, SECRET_BYTES).copy()
    gen = KeySource(rng).generator()
    return np.asarray(gen.integers(0, 256, size=(n, SECRET_BYTES), dtype=np.uint8))
