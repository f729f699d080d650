"""Random, pairwise-independent assignment of users to the hash functions of a sketch
([PAN] section 5.2).

A Count-Mean Sketch with ``k`` hash functions is unbiased only if the function each user
uses is random and independent of the data: with any fixed assignment, a data set whose
users all hold a value colliding with a target ``x`` under their own function makes
``E[fhat(x)] = 1`` although ``f(x) = 0`` ([PAN] Thm 5.1; tests/test_hash_assignment.py
demonstrates it). Unbiasedness needs each assignment to be uniform; the variance formula
also needs the assignments of every two users to be independent. [PAN] Thm 5.2: one
function ``s(i) = ((b0 + b1 i) in GF(2^l)) mod k`` drawn from a pairwise-independent family,
``2^l > max(users, k)``, gives both with ``2 ceil(log2(max(users, k) + 1))`` random bits.

:class:`PairwiseAssignment` is that function. When ``k`` is a power of two the pairs
``(s(i1), s(i2))`` are exactly uniform on ``[k]^2`` for ``i1 != i2`` (the low bits of a
uniform pair of field elements); otherwise each probability is off by less than
``2^-l`` (choose ``l`` larger with ``extra_bits``). Use it with the ``groups`` argument
of clients such as :class:`ldpfast.protocols.frequency.hadamard.CMSHEClient`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ._random import KeySource, RngLike
from ._validate import check_int
from .errors import ParameterError
from .kernels import field as _field

__all__ = ["PairwiseAssignment"]


@dataclasses.dataclass(frozen=True)
class PairwiseAssignment:
    """``s(i) = ((b0 + b1 i) in GF(2^l)) mod k`` for user ids ``i in [0, users)``.

    Attributes:
        users: number of user ids (ids are ``0 .. users-1``).
        k: number of hash functions.
        b0, b1: the drawn field elements (public once drawn; they must be drawn after the
            data is fixed, or at least independently of it).
        l: field degree, ``2^l > max(users, k)`` (1..64).
    """

    users: int
    k: int
    b0: int
    b1: int
    l: int

    def __post_init__(self) -> None:
        check_int("users", self.users, 1)
        check_int("k", self.k, 1)
        check_int("l", self.l, 1, 64)
        if 1 << self.l <= max(self.users, self.k):
            raise ParameterError(f"l must satisfy 2^l > max(users, k) = {max(self.users, self.k)}, got l = {self.l}")
        for name in ("b0", "b1"):
            check_int(name, getattr(self, name), 0, (1 << self.l) - 1)

    @classmethod
    def draw(cls, users: int, k: int, rng: RngLike = None, extra_bits: int = 0) -> "PairwiseAssignment":
        """A uniformly drawn member of the family. ``rng=None`` (default) uses OS entropy;
        a seed is for simulation only. ``extra_bits`` enlarges the field beyond the
        minimal ``l = ceil(log2(max(users, k) + 1))`` (only useful when ``k`` is not a
        power of two)."""
        users = check_int("users", users, 1)
        k = check_int("k", k, 1)
        l = _field.ceil_log2(max(users, k) + 1) + check_int("extra_bits", extra_bits, 0)
        if l > 64:
            raise ParameterError(f"the field needs 2^l > max(users, k) with l <= 64, got l = {l}")
        gen = KeySource(rng).generator()
        b0, b1 = (int(v) for v in gen.integers(0, 1 << l, size=2, dtype=np.uint64, endpoint=False))
        return cls(users=users, k=k, b0=b0, b1=b1, l=l)

    @property
    def random_bits(self) -> int:
        """Random bits that describe the assignment: ``2 l`` ([PAN] Thm 5.2)."""
        return 2 * self.l

    @property
    def exact(self) -> bool:
        """True when ``k`` is a power of two: assignments exactly uniform and pairwise
        independent."""
        return self.k & (self.k - 1) == 0

    def __call__(self, user_ids: Optional[np.ndarray] = None) -> np.ndarray:
        """The hash-function index (uint32) of each user id (default: all ``users``)."""
        ids = np.arange(self.users, dtype=np.uint64) if user_ids is None else np.asarray(user_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= self.users)):
            raise ParameterError(f"user_ids must be integers in [0, {self.users})")
        ids = ids.astype(np.uint64)
        out = _field.field_hash(np.uint64(self.b0), np.uint64(self.b1), ids, self.k, 1 << self.l)
        return out.astype(np.uint32)
