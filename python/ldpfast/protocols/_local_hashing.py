"""Pieces shared by the local-hashing protocols (each user hashes its value with its own
pairwise-independent hash ``h(x) = ((a0 + a1 x) in F) mod m`` and randomizes the hash):
OCMS+RR (:mod:`ldpfast.protocols.frequency.ocms`), OLH (:mod:`ldpfast.protocols.frequency.olh`), the CMS
baselines and, on sets, PS-OLH and SVIM (:mod:`ldpfast.protocols.sets.ps_olh`, :mod:`ldpfast.protocols.sets.svim`).

* choosing the hash range and the field: :func:`hash_range` (OCMS's ``m``, [PAN] Alg. 1),
  :func:`default_g` (OLH's ``g``, the one rule :func:`ldpfast.theory.olh_g`),
  :func:`finite_field_size`, :func:`choose_field`, :func:`check_hash_field`;
* OLH over a prime field of any size, with reports ``(z, a0, a1)``: :class:`OLHReportColumns`,
  :func:`olh_perturb`, :func:`check_olh_reports`, and the estimator of both,
  :func:`debias_matches`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Optional, Tuple

import numpy as np

from .. import _core
from .._base import Reports
from .._random import KeySource
from .._validate import MAX_EPSILON, check_array, check_below, check_derived_range, check_int, check_values
from ..errors import ParameterError
from ..kernels import field as _field
from ..kernels.field import PRIME, is_prime
from ..theory import ocms as _theory
from ..theory.hadamard import olh_g


# --- hash range and field ([PAN] Algorithm 1 lines 7-26; OLH) ---------------------------

def hash_range(epsilon: float, d: Optional[int] = None, mode: str = "mse", f_star: float = 1.0) -> int:
    """[PAN] ``HashRange``: the optimal hash range, rounded to the closest integer.

    Args:
        epsilon: privacy parameter.
        d: dictionary size (needed for ``mode="l"``).
        mode: ``"mse"`` (MSE-OCMS+RR, Thm 3.6) or ``"l"`` (l-OCMS+RR, Thm 3.8).
        f_star: ``mode="mse"`` only: prior upper bound on the largest frequency of interest.
    Returns:
        ``m >= 2``. Exact ``.5`` ties round upward (our choice; R1's Python ``round`` rounds
        half to even). See :func:`ldpfast.theory.ocms_optimal_m` for the formulas.
    """
    return int(_theory.ocms_optimal_m(epsilon, mode, d, f_star, rounded=True))


def default_g(epsilon: float, budget: Optional[float] = None, rule: str = "g = round(e^eps) + 1") -> int:
    """OLH's default hash range :func:`ldpfast.theory.olh_g` (``round(e^b) + 1``, exact
    ``.5`` ties upward) of the budget ``b`` the hash is randomized with (default
    ``epsilon``), refused with a ParameterError naming ``epsilon`` and ``rule`` above 2^62."""
    budget = epsilon if budget is None else budget
    # olh_g refuses budgets above MAX_EPSILON; any of them gives a g far above 2^62 anyway
    return check_derived_range(epsilon, olh_g(min(budget, MAX_EPSILON)), rule)


def finite_field_size(d: int, m: int, compact: bool = False) -> int:
    """[PAN] ``FiniteFieldSize``: ``v = max(d+1, 5m)`` (``5m`` keeps the imperfect-hash
    variance within 1%, Cor 3.5); ``PRIME`` if ``v <= PRIME``, else ``2^ceil(log2 v)``.

    ``compact=True`` (an option of ours, not in [PAN]) returns the smallest prime ``>= v``
    instead of ``PRIME``, which shrinks the report to ``2 ceil(log2 v) + ceil(log2 m)``
    bits, the communication cost the paper claims. Sizes above ``2^64`` are returned but
    cannot be used by :class:`ldpfast.protocols.frequency.ocms.OCMSParams` (the core supports fields up to 64 bits).
    """
    d = check_int("d", d, 1)
    m = check_int("m", m, 2)
    v = max(d + 1, 5 * m)
    if v > PRIME:
        return 1 << _field.ceil_log2(v)
    return _field.next_prime(v) if compact else PRIME


def choose_field(d: int, m: int, field: str = "paper") -> Tuple[int, str]:
    """``(field_size, field_kind)`` for ``d`` values hashed into ``[m]``: ``"paper"``:
    :func:`finite_field_size` (``PRIME``, or ``GF(2^64)`` when ``d >= PRIME``);
    ``"compact"``: the smallest prime ``>= max(d+1, 5m)``; ``"binary"``: ``GF(2^l)`` with
    ``l = ceil(log2 max(d+1, 5m))``. ParameterError when no supported field (<= 2^64) fits."""
    if field not in ("paper", "compact", "binary"):
        raise ParameterError(f"field must be 'paper', 'compact' or 'binary', got {field!r}")
    if field == "binary":
        size = 1 << _field.ceil_log2(max(int(d) + 1, 5 * m))
    else:
        size = finite_field_size(d, m, compact=field == "compact")
    if size > 2**64:
        raise ParameterError(f"d = {d} and m = {m} need a field of size {size} > 2^64, "
                             "which this build does not support")
    return size, "binary" if size & (size - 1) == 0 else "prime"


def check_hash_field(size: int, kind: str = "prime", poly: Any = ()) -> Tuple[int, Tuple[int, ...]]:
    """The hash field ``F``: ``(field_size, poly)`` checked for ``kind="prime"`` (an odd prime
    ``< 2^64``, no ``poly``) or ``kind="binary"`` (``GF(2^l)``, ``1 <= l <= 64``, ``poly`` the
    irreducible polynomial as exponents; empty: the default of
    :func:`ldpfast.kernels.irreducible_polynomial`). ParameterError naming the value otherwise."""
    if kind not in ("prime", "binary"):
        raise ParameterError(f"field_kind must be 'prime' or 'binary', got {kind!r}")
    given = poly
    if isinstance(poly, (str, bytes)) or not hasattr(poly, "__iter__"):
        raise ParameterError(f"poly must be a tuple of exponents, got {poly!r}")
    poly = tuple(check_int("poly exponent", e, 0) for e in poly)
    if kind == "prime":
        if size >= 2**64 or size % 2 == 0 or not is_prime(size):
            hint = " (for GF(2^l) pass field_kind='binary')" if size & (size - 1) == 0 else ""
            raise ParameterError(f"field_size must be an odd prime < 2^64 for field_kind='prime', got {size}{hint}")
        if poly:
            raise ParameterError(f"poly is only used with field_kind='binary', got {poly!r}")
        return size, poly
    l = size.bit_length() - 1
    if size != 1 << l or not 1 <= l <= 64:
        raise ParameterError(f"field_size must be 2^l with 1 <= l <= 64 for field_kind='binary', got {size}")
    if len(set(poly)) != len(poly):
        raise ParameterError(f"poly exponents must be distinct, got {given!r}")
    poly = tuple(sorted(poly, reverse=True)) if poly else _field.irreducible_polynomial(l)
    if poly[0] != l or poly[-1] != 0 or not _field.is_irreducible(poly):
        raise ParameterError(f"poly must be an irreducible polynomial of degree {l} over GF(2), got exponents {poly}")
    return size, poly


# --- OLH over a prime field (the set protocols' frequency oracle) -------------------------

def check_field_size(value: Any) -> int:
    """The OLH hash field: a prime below 2^64 (the C++ field arithmetic is 64-bit)."""
    size = check_int("field_size", value, 3, 2**64 - 1)
    if not is_prime(size):
        raise ParameterError(f"field_size must be a prime below 2^64, got {size}")
    return size


@dataclasses.dataclass
class OLHReportColumns(Reports):
    """OLH reports: perturbed hash ``z`` in [0, g) and the user's hash ``a0, a1`` (uint64)."""

    column_types: ClassVar = {"z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.z = check_array("z", self.z, np.uint64, cast=True)
        self.a0 = check_array("a0", self.a0, np.uint64, cast=True)
        self.a1 = check_array("a1", self.a1, np.uint64, cast=True)
        self._check_lengths()


def olh_perturb(params: Any, keys: KeySource, values: np.ndarray,
                threads: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OLH (Wang et al. 2017): a fresh pairwise-independent hash ``(a0, a1)`` per user over the
    prime field ``params.field_size``, its value in [0, g) kept or moved by GRR with
    ``params.flip_probability``. Returns ``(z, a0, a1)``."""
    return _core.ocms_perturb(_core.Field.prime(params.field_size), keys.key(), values.astype(np.uint64),
                              params.g, params.flip_threshold, threads)


def check_olh_reports(reports: Any, params: Any) -> None:
    check_below(reports.z, params.g, "z", label="g")
    check_below(reports.a0, params.field_size, "a0", label="field_size")
    check_below(reports.a1, params.field_size, "a1", label="field_size")


def debias_matches(matches: Any, n: int, epsilon: float, m: int,
                   estimator_m: Optional[float] = None) -> np.ndarray:
    """CMS+RR frequency estimates from match counts ([PAN] Algorithm 2, corrected decoding):
    ``fhat = mu/(mu-1) * ((e+m-1) C/n - 1)/(e-1) - 1/(mu-1)`` where ``C`` counts the reports
    with ``z_i = h_i(x)`` among ``n`` and ``mu`` is ``estimator_m`` (default ``m``; OCMS uses
    ``m'``). With ``mu = m = g`` this is OLH's ``(C/n - 1/g)/(p - 1/g)``,
    ``p = e/(e+g-1)``, i.e. ``chat = (g C - n)/(p g - 1)`` in counts."""
    em1 = math.expm1(epsilon)
    mu = float(m) if estimator_m is None else estimator_m
    share = np.asarray(matches, dtype=np.float64) / n
    return mu / (mu - 1) * (((em1 + m) * share - 1.0) / em1) - 1.0 / (mu - 1)


#: Largest reports x candidates for which match_channel builds the full likelihood
#: (the per-candidate match lists cost one hash per pair, once).
FULL_LIKELIHOOD_PAIRS = 500_000_000


def match_channel(server: Any, candidates: Any, epsilon: float, m: int, estimator_m: float,
                  likelihood: str = "composite") -> Any:
    """The IBU/MLE channel of per-user-hash reports (OLH, OCMS; ``server`` is the
    report-keeping or match-counting OCMS-type server).

    * ``likelihood="full"``, reports kept and ``n K <= FULL_LIKELIHOOD_PAIRS``: the **full likelihood**
      (:func:`ldpfast.estimation.channel.report_channel`): report ``i`` has probability
      ``e/(e+m-1)`` under a candidate its hash maps to ``z_i`` and ``1/(e+m-1)`` under any
      other, and ``1/m`` under a value outside the candidates (a random hash). The match
      lists cost ``n K`` hash evaluations once, and each EM step ``O(n K / m)``.
    * ``likelihood="composite"`` (default), or match counts streamed: the **composite** likelihood of
      the match counts ``C(x) = #{i : z_i = h_i(x)}``, each binomial with
      ``s1 = e/(e+m-1)`` for the user's own value and ``s0 = (1 + (e-1)/mu)/(e+m-1)`` for
      others (``mu``: the estimator's ``m'``, whose inverse is the hash family's
      collision probability).
    """
    from .._memory import check_allocation
    from ..estimation import report_channel, support_channel

    params = server.params
    if likelihood not in ("full", "composite"):
        raise ParameterError(f"likelihood must be 'full' or 'composite', got {likelihood!r}")
    xs = None if candidates is None else check_values(candidates, params.d, "candidates", "values in", distinct=True)
    em1 = math.expm1(epsilon)
    if likelihood == "full":
        if not server.keeps_reports:
            raise ParameterError("likelihood='full' needs the kept reports; this server streams match counts")
        size = params.d if xs is None else xs.size
        n = server.n
        if n * size > FULL_LIKELIHOOD_PAIRS:
            raise ParameterError(f"likelihood='full' would hash {n} reports x {size} candidates, more than "
                                 f"{FULL_LIKELIHOOD_PAIRS}: pass fewer candidates")
        if n:
            values = np.arange(params.d, dtype=np.uint64) if xs is None else xs
            check_allocation(16 * n * size // max(m, 1) + 16 * n, f"the match lists of {n} reports x {size} candidates")
            z, a0, a1 = server._columns(canonical=False)
            lists, starts = [], [0]
            for x in values:
                hashed = _core.ocms_hash(params.field, a0, a1, np.full(n, x, dtype=np.uint64), m, server.threads)
                lists.append(np.flatnonzero(hashed == z))
                starts.append(starts[-1] + lists[-1].size)
            reports = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
            return report_channel(np.array(starts), reports, n, (em1 + 1.0) / (em1 + m), 1.0 / (em1 + m),
                                  1.0 / m if size < params.d else None)
    matches = server.match_counts(xs)
    if xs is None:
        xs_size = params.d if server.keeps_reports else matches.size
    else:
        xs_size = xs.size
    s1 = (em1 + 1.0) / (em1 + m)
    s0 = (1.0 + em1 / estimator_m) / (em1 + m)
    return support_channel(matches, server.n, s1, s0, rest=xs_size < params.d, what="hash-match")
