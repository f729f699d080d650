"""OCMS+RR: the optimized private Count-Mean Sketch with k-ary randomized response.

Implements [PAN] M. Pan, "Improving Count-Mean Sketch as the Leading Locally Differentially
Private Frequency Estimator for Large Dictionaries" (CSF 2025), Algorithms 1 and 2.

Protocol (one report per user, eps-LDP):

1. Parameters ([PAN] Alg. 1 ``HashRange`` / ``FiniteFieldSize``): the hash range ``m`` is
   chosen to minimise the worst-case MSE (``mode="mse"``, Thm 3.6, with a prior ``f_star``
   on the largest frequency of interest) or the l1/l2 loss (``mode="l"``, Thm 3.8). The
   hash family is ``h(x) = ((a0 + a1 x) in F) mod m`` over a finite field ``F`` of size
   ``pH >= max(d+1, 5m)``: by default the prime field of ``PRIME = 2^64 - 59``.
2. Client ([PAN] Alg. 1 ``Client``): draw ``a0, a1`` uniformly from the whole field (a
   fresh hash function per user), compute ``y = h(x)``, perturb ``y`` with k-ary RR on
   ``[m]`` (keep with probability ``e/(e+m-1)``) and send ``(z, a0, a1)``.
3. Server ([PAN] Alg. 2): for a queried ``x``, count the matches ``C(x) = #{i: z_i = h_i(x)}``;
   then ``ytot = ((e+m-1)/(e-1)) C - n/(e-1)`` (the decoded RR vectors summed, with the
   corrected decode constant ``(e+m-2)/(e-1)``; Alg. 1's ``Decode`` misprints
   it as the biased ``(e+m-1)/(e-1)``) and
   ``fhat(x) = m'/(n(m'-1)) ytot - 1/(m'-1)`` where ``m' = 1/cbar`` corrects for the
   field size not being a multiple of ``m`` ([PAN] Lemma 3.2, Eq. 8).

There is no shared sketch: every report carries its own hash function, so answering ``Q``
queries costs ``O(nQ)`` hash evaluations (done by the C++ core, threaded). Over ``GF(2^l)``
with ``m`` a power of two, a contiguous range of ``Q`` candidates costs ``O(n (Q/m + l^2))``
instead: ``x -> (a1 x) mod m`` is linear over GF(2), so each report's matches form an
affine subspace that the core solves for and enumerates (identical counts; chosen
automatically when cheaper). The server
(:class:`Server`) therefore works in one of two modes, chosen at construction:

* ``Server(params)`` keeps the reports (24 bytes each) and can estimate any candidate
  set later. ``merge`` concatenates; state and bytes are canonical (rows sorted), so
  equality and serialization do not depend on the order reports arrived in.
* ``Server(params, candidates=...)`` streams every batch into per-candidate match counts
  (memory ``O(|candidates|)``, integral, exactly mergeable by addition). This is the mode
  for very large ``n`` when the values of interest are known in advance.

Choices the paper leaves open are parameters: the field (``PRIME`` by default,
or a compact prime or ``GF(2^l)``), the range of ``a0, a1`` (whole field by default,
``[1, pH-1]`` to reproduce the reference code R1), the estimator (with ``m'`` by default,
plain ``m`` as in R1) and clipping (off by default: raw estimates are unbiased).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import ClassVar, Dict, Optional, Tuple

import numpy as np

from .. import _base, _core
from .._memory import check_allocation
from .._random import KeySource, RngLike
from .._validate import check_threads, rr_threshold
from ..errors import FormatError, IncompatibleError, ParameterError, ReportError
from ..kernels import field as _field
from ..kernels.field import PRIME
from ..theory import ocms as _theory

__all__ = ["PRIME", "Params", "Reports", "Client", "Server", "hash_range", "finite_field_size",
           "decode_matches", "uint64_column"]

_U64 = 2**64


# --- input conversion ------------------------------------------------------------------

def uint64_column(value, name: str, error: type = ReportError) -> np.ndarray:
    """``value`` (an int, a sequence of ints or an integer numpy array) as a contiguous
    1-D uint64 array, without silent conversions: negatives, values ``>= 2^64``,
    non-integers (floats, bools, strings) and multi-dimensional input raise ``error``
    naming ``name`` and the offending value. A contiguous uint64 array is used as is
    (not copied)."""
    if isinstance(value, np.ndarray):
        arr = _python_ints(value, name, error) if value.dtype == object and value.ndim == 1 else value
    elif isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be integers, got {value!r}")
    elif isinstance(value, (int, np.integer)):
        if not 0 <= int(value) < _U64:
            raise error(f"{name} must be integers in [0, 2^64), got {int(value)}")
        return np.array([int(value)], dtype=np.uint64)
    else:
        try:
            arr = np.asarray(value)
        except (OverflowError, ValueError, TypeError) as exc:
            raise error(f"{name} must be a sequence of integers: {exc}") from None
        if arr.dtype.kind in "fO" and arr.ndim == 1:
            arr = _python_ints(value, name, error)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise error(f"{name} must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "i":
        if arr.size and arr.min() < 0:
            bad = int(np.argmax(arr < 0))
            raise error(f"{name} must be non-negative integers, got {int(arr[bad])} at index {bad}")
    elif kind != "u":
        raise error(f"{name} must hold integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _python_ints(values, name: str, error: type) -> np.ndarray:
    out = np.empty(len(values), dtype=np.uint64)
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise error(f"{name} must hold integers, got {v!r} at index {i}")
        if not 0 <= int(v) < _U64:
            raise error(f"{name} must be integers in [0, 2^64), got {int(v)} at index {i}")
        out[i] = int(v)
    return out


def _check_below(arr: np.ndarray, bound: int, name: str, what: str, error: type) -> None:
    if arr.size and bound < _U64 and int(arr.max()) >= bound:
        bad = int(np.argmax(arr >= np.uint64(bound)))
        raise error(f"{name} must be {what} [0, {bound}), got {int(arr[bad])} at index {bad}")


# --- parameter selection ([PAN] Algorithm 1 lines 7-26) ---------------------------------

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
    return _theory.ocms_optimal_m(epsilon, mode, d, f_star, rounded=True)


def finite_field_size(d: int, m: int, compact: bool = False) -> int:
    """[PAN] ``FiniteFieldSize``: ``v = max(d+1, 5m)`` (``5m`` keeps the imperfect-hash
    variance within 1%, Cor 3.5); ``PRIME`` if ``v <= PRIME``, else ``2^ceil(log2 v)``.

    ``compact=True`` (an option of ours, not in [PAN]) returns the smallest prime ``>= v``
    instead of ``PRIME``, which shrinks the report to ``2 ceil(log2 v) + ceil(log2 m)``
    bits, the communication cost the paper claims. Sizes above ``2^64`` are returned but
    cannot be used by :class:`Params` (the core supports fields up to 64 bits).
    """
    d = _theory._positive_int(d, "d", 1)
    m = _theory._positive_int(m, "m", 2)
    v = max(d + 1, 5 * m)
    if v > PRIME:
        return 1 << _field.ceil_log2(v)
    return _field.next_prime(v) if compact else PRIME


# --- parameters -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Params(_base.Params):
    """Parameters client and server must agree on (frozen, hashable, serializable).

    Attributes:
        epsilon: privacy parameter, in [2^-20, log(m-1) + 22.18] (the 64-bit sampler; ``_validate.rr_threshold``).
        d: dictionary size; values are integers in ``[0, d)``.
        m: hash range, ``2 <= m < field_size``.
        field_size: ``pH``: an odd prime ``< 2^64`` (``field_kind="prime"``, default
            :data:`PRIME`) or ``2^l``, ``1 <= l <= 64`` (``field_kind="binary"``). Must be
            ``>= d + 1`` ([PAN] Alg. 1 line 8) so every value is a distinct field element.
        field_kind: ``"prime"`` or ``"binary"``.
        poly: ``GF(2^l)`` only: the irreducible polynomial as exponents, e.g.
            ``(8, 4, 3, 1, 0)``; empty means the default rule
            (:func:`ldpfast.kernels.irreducible_polynomial`), filled in at construction.
        a_range: ``"full"`` (default; [PAN]: ``a0, a1`` uniform on the whole field, which
            makes the family pairwise independent up to Lemma 3.2) or ``"nonzero"``
            (``[1, pH-1]``, as in R1). With ``"nonzero"`` two values collide with a
            probability that is not exactly ``1/m'`` (it tends to it as ``pH -> inf``), so
            the ``m'`` estimator is unbiased only up to that difference (negligible for
            ``PRIME``; large for tiny fields: 40/144 vs 57/169 for ``pH=13, m=3``).
        use_m_prime: estimate with ``m'`` ([PAN] Alg. 2; default) or with plain ``m`` (R1).
    Raises:
        ParameterError: any attribute out of range, with its name and value.
    """

    protocol: ClassVar[str] = "ocms"

    epsilon: float
    d: int
    m: int
    field_size: int = PRIME
    field_kind: str = "prime"
    poly: Tuple[int, ...] = ()
    a_range: str = "full"
    use_m_prime: bool = True

    def __post_init__(self):
        eps, _, _ = _theory._eps(self.epsilon)
        d = _theory._positive_int(self.d, "d", 1)
        m = _theory._positive_int(self.m, "m", 2)
        size = _theory._positive_int(self.field_size, "field_size", 2)
        kind = self.field_kind
        if kind not in ("prime", "binary"):
            raise ParameterError(f"field_kind must be 'prime' or 'binary', got {kind!r}")
        poly = self.poly
        if isinstance(poly, (str, bytes)) or not hasattr(poly, "__iter__"):
            raise ParameterError(f"poly must be a tuple of exponents, got {poly!r}")
        poly = tuple(_theory._positive_int(e, "poly exponent", 0) for e in poly)
        if kind == "prime":
            if size >= _U64 or size % 2 == 0 or not _field.is_prime(size):
                hint = " (for GF(2^l) pass field_kind='binary')" if size & (size - 1) == 0 else ""
                raise ParameterError(f"field_size must be an odd prime < 2^64 for field_kind='prime', "
                                     f"got {size}{hint}")
            if poly:
                raise ParameterError(f"poly is only used with field_kind='binary', got {poly!r}")
        else:
            l = size.bit_length() - 1
            if size != 1 << l or not 1 <= l <= 64:
                raise ParameterError(f"field_size must be 2^l with 1 <= l <= 64 for field_kind='binary', "
                                     f"got {size}")
            if len(set(poly)) != len(poly):
                raise ParameterError(f"poly exponents must be distinct, got {self.poly!r}")
            poly = tuple(sorted(poly, reverse=True)) if poly else _field.irreducible_polynomial(l)
            if poly[0] != l or poly[-1] != 0 or not _field.is_irreducible(poly):
                raise ParameterError(f"poly must be an irreducible polynomial of degree {l} over GF(2), "
                                     f"got exponents {poly}")
        if not m < size:
            raise ParameterError(f"m must be < field_size = {size}, got {m}")
        if not d + 1 <= size:
            raise ParameterError(f"field_size must be >= d + 1 = {d + 1} ([PAN] Alg. 1), got {size}")
        if self.a_range not in ("full", "nonzero"):
            raise ParameterError(f"a_range must be 'full' or 'nonzero', got {self.a_range!r}")
        if not isinstance(self.use_m_prime, (bool, np.bool_)):
            raise ParameterError(f"use_m_prime must be a bool, got {self.use_m_prime!r}")
        for name, value in (("epsilon", eps), ("d", d), ("m", m), ("field_size", size), ("poly", poly),
                            ("use_m_prime", bool(self.use_m_prime))):
            object.__setattr__(self, name, value)
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent

    @classmethod
    def optimal(cls, epsilon: float, d: int, mode: str = "mse", f_star: float = 1.0,
                field: str = "paper", a_range: str = "full", use_m_prime: bool = True) -> "Params":
        """Parameters chosen as in [PAN] Algorithm 1.

        Args:
            epsilon, d: privacy parameter and dictionary size.
            mode: ``"mse"`` (MSE-OCMS+RR, with prior ``f_star``) or ``"l"`` (l-OCMS+RR).
            f_star: prior upper bound on the largest frequency of interest (``mode="mse"``).
            field: ``"paper"``: :func:`finite_field_size` (``PRIME``, or ``GF(2^64)`` when
                ``d >= PRIME``); ``"compact"``: the smallest prime ``>= max(d+1, 5m)``;
                ``"binary"``: ``GF(2^l)`` with ``l = ceil(log2 max(d+1, 5m))``.
            a_range, use_m_prime: see the class attributes.
        """
        d = _theory._positive_int(d, "d", 1)
        m = hash_range(epsilon, d, mode, f_star)
        if field not in ("paper", "compact", "binary"):
            raise ParameterError(f"field must be 'paper', 'compact' or 'binary', got {field!r}")
        if field == "binary":
            size = 1 << _field.ceil_log2(max(int(d) + 1, 5 * m))
        else:
            size = finite_field_size(d, m, compact=field == "compact")
        if size > _U64:
            raise ParameterError(f"d = {d} and m = {m} need a field of size {size} > 2^64, "
                                 "which this build does not support")
        kind = "binary" if size & (size - 1) == 0 else "prime"
        return cls(epsilon=epsilon, d=d, m=m, field_size=size, field_kind=kind, a_range=a_range,
                   use_m_prime=use_m_prime)

    # -- derived quantities ------------------------------------------------------------
    @property
    def collision_probability(self) -> Fraction:
        """Exact ``cbar`` of the hash family for ``a_range="full"`` ([PAN] Lemma 3.2)."""
        return _field.collision_probability(self.field_size, self.m)

    @property
    def m_prime(self) -> float:
        """``m' = m / (1 + r(m-r)/pH^2)`` ([PAN] Alg. 2), correctly rounded."""
        return _field.m_prime(self.field_size, self.m)

    @property
    def estimator_m(self) -> float:
        """The hash range the estimator scales with: ``m'`` or, if not ``use_m_prime``, ``m``."""
        return self.m_prime if self.use_m_prime else float(self.m)

    @property
    def communication_bits(self) -> int:
        """Bits per report: ``2 ceil(log2 pH) + ceil(log2 m)`` (exact; [PAN] Table II
        approximates it)."""
        return 2 * _field.ceil_log2(self.field_size) + _field.ceil_log2(self.m)

    @property
    def rr_keep(self) -> float:
        """Probability that RR keeps the hashed value: ``e/(e+m-1)``."""
        return math.exp(self.epsilon) / (math.expm1(self.epsilon) + self.m)

    @property
    def rr_flip(self) -> float:
        """Probability that RR reports another symbol: ``(m-1)/(e+m-1)`` (computed directly)."""
        return (self.m - 1) / (math.expm1(self.epsilon) + self.m)

    @property
    def flip_threshold(self) -> int:
        """``rr_flip`` as the 64-bit threshold the C++ sampler compares against, rounded up
        from the exact probability (effective epsilon <= epsilon;
        :func:`ldpfast._validate.rr_threshold`)."""
        return rr_threshold(self.epsilon, self.m)

    @property
    def decode_constants(self) -> Tuple[float, float]:
        """RR decoding ``((e+m-2)/(e-1), -1/(e-1))`` for a match / a non-match (the
        inverse of the RR matrix, [PAN] section 2.1; Alg. 1's ``(e+m-1)/(e-1)`` is an
        erratum)."""
        return _theory.rr_decode_constants(self.epsilon, self.m)

    @property
    def field(self) -> "_core.Field":
        """The C++ field object used by the kernels."""
        return _field.core_field(self.field_size, self.poly or None)


# --- reports ----------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class Reports(_base.Reports):
    """A batch of OCMS+RR reports ``(z, a0, a1)``: the perturbed hash value in ``[0, m)``
    and the user's hash function (field elements). Columns are converted to uint64 without
    silent changes (see :func:`uint64_column`); they are checked against the parameters by
    :meth:`Server.update`.

    Raises:
        ReportError: a column is not integral, negative, ``>= 2^64``, or lengths differ.
    """

    protocol: ClassVar[str] = "ocms"

    column_types: ClassVar = {"z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}

    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self):
        for name in ("z", "a0", "a1"):
            setattr(self, name, uint64_column(getattr(self, name), name, ReportError))
        self._check_lengths()

    def validate(self, params: Params) -> None:
        """Raise ReportError unless every report fits ``params`` (``z < m``, ``a0, a1 <
        field_size``)."""
        _check_below(self.z, params.m, "z", "hash values in", ReportError)
        _check_below(self.a0, params.field_size, "a0", "field elements in", ReportError)
        _check_below(self.a1, params.field_size, "a1", "field elements in", ReportError)


# --- client -----------------------------------------------------------------------------

class Client(_base.ClientBase):
    """The user side of OCMS+RR ([PAN] Algorithm 1, ``Client``).

    Args:
        params: the protocol parameters.
        rng: ``None`` (default): fresh keys from the operating system for every batch, the
            only setting for real clients. An int, ``SeedSequence`` or ``Generator`` makes
            the output reproducible: **for simulation only** (anyone with the seed can undo
            the perturbation).
        threads: threads for large batches (0 = default); the output does not depend on it.
    """

    def __init__(self, params: Params, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, Params):
            raise ParameterError(f"params must be ldpfast.ocms.Params, got {type(params).__name__}")
        self.params = params
        self.threads = check_threads(threads)
        self._keys = KeySource(rng)

    def perturb(self, values) -> Reports:
        """Reports for ``values`` (an int or an integer array in ``[0, d)``), one per value.

        Each report draws its own ``a0, a1`` (uniform on the field, or on ``[1, pH-1]`` with
        ``a_range="nonzero"``), hashes ``y = ((a0 + a1 x) in F) mod m`` and applies k-ary RR
        on ``[m]``: keep ``y`` with probability ``e/(e+m-1)``, else a uniform other symbol.

        Raises:
            ParameterError: a value is not an integer in ``[0, d)``.
        """
        params = self.params
        x = uint64_column(values, "values", ParameterError)
        _check_below(x, params.d, "values", "integers in", ParameterError)
        key = self._keys.key()
        if params.a_range == "full":
            z, a0, a1 = _core.ocms_perturb(params.field, key, x, params.m, params.flip_threshold,
                                           self.threads)
        else:
            # [1, pH-1] (R1): hash seeds are public, so a numpy generator is enough for them;
            # the RR noise still comes from ChaCha20 keyed like the full-range path.
            gen = self._keys.generator()
            a0 = gen.integers(1, params.field_size - 1, size=x.size, dtype=np.uint64, endpoint=True)
            a1 = gen.integers(1, params.field_size - 1, size=x.size, dtype=np.uint64, endpoint=True)
            y = _core.ocms_hash(params.field, a0, a1, x, params.m, self.threads)
            z = _core.randomized_response(key, y, params.m, params.flip_threshold, self.threads)
        return Reports(z=z, a0=a0, a1=a1)


# --- server -----------------------------------------------------------------------------

def decode_matches(params: Params, matches, n: int, clip: bool = False) -> np.ndarray:
    """Frequency estimates from match counts ([PAN] Algorithm 2, corrected decoding):
    ``fhat = m'/(m'-1) * ((e+m-1) C/n - 1)/(e-1) - 1/(m'-1)`` where ``C`` is the number of
    reports with ``z_i = h_i(x)`` among ``n``, and ``m'`` is ``params.estimator_m``.

    ``matches`` may be any array shape (e.g. repetitions x candidates in simulations).
    ``clip=True`` clips to ``[0, 1]`` (post-processing; biases the estimates).
    """
    n = int(n)
    if n <= 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    em1 = math.expm1(params.epsilon)
    mu = params.estimator_m
    share = np.asarray(matches, dtype=np.float64) / n
    fhat = mu / (mu - 1) * (((em1 + params.m) * share - 1.0) / em1) - 1.0 / (mu - 1)
    return np.clip(fhat, 0.0, 1.0) if clip else fhat


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array``, made read-only (kept reports are shared between merged servers)."""
    array.flags.writeable = False
    return array


def _contiguous_start(candidates: np.ndarray) -> Optional[int]:
    """First value if ``candidates`` is ``[c, c+1, ..., c+k-1]``, else None."""
    if candidates.size == 0:
        return None
    start = int(candidates[0])
    if candidates.size > 1 and not np.array_equal(
            np.diff(candidates), np.ones(candidates.size - 1, dtype=np.uint64)):
        return None
    return start


class Server(_base.Aggregator):
    """The OCMS+RR aggregator ([PAN] Algorithm 2). See the module docstring for the two
    modes.

    Args:
        params: the protocol parameters (must equal the clients').
        candidates: ``None`` (default) to keep the reports and answer any query later; or
            distinct values in ``[0, d)`` whose match counts are kept instead (then
            :meth:`estimate` answers for these values only). The candidates are part of
            the state: only servers with equal candidates merge.
        threads: threads for counting (0 = default); results do not depend on it.
    """

    protocol: ClassVar[str] = "ocms"
    params_type: ClassVar[type] = Params

    reports_type: ClassVar[type] = Reports

    def __init__(self, params: Params, candidates=None, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._candidates: Optional[np.ndarray] = None
        if candidates is None:
            self._st = _base._State(chunks=(), canonical=True)
        else:
            self._candidates = self._checked_candidates(candidates, distinct=True).copy()
            self._candidates.flags.writeable = False
            self._st = _base._State(counts=np.zeros(self._candidates.size, dtype=np.uint64),
                                    n=np.zeros(1, dtype=np.uint64))

    # -- properties --------------------------------------------------------------------
    @property
    def _counts(self) -> Optional[np.ndarray]:
        return self._st.get("counts")

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        st = self._st
        if "n" in st:
            return int(st["n"][0])
        return sum(int(chunk[0].size) for chunk in st["chunks"])

    _n = n

    @property
    def keeps_reports(self) -> bool:
        """True in the report-keeping mode, False when streaming into match counts."""
        return self._candidates is None

    @property
    def candidates(self) -> Optional[np.ndarray]:
        """The streamed candidates (a copy), or None when reports are kept."""
        return None if self._candidates is None else self._candidates.copy()

    def reports(self) -> Reports:
        """The kept reports (canonical row order). Report-keeping mode only."""
        if not self.keeps_reports:
            raise ParameterError("this server streams match counts and keeps no reports")
        z, a0, a1 = self._columns()
        return Reports(z=z.copy(), a0=a0.copy(), a1=a1.copy())

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: Reports) -> None:
        """``z < m`` and ``a0, a1`` field elements."""
        reports.validate(self.params)

    def _ingest(self, reports: Reports):
        st = self._st
        if self.keeps_reports:
            chunk = tuple(_frozen(column.copy()) for column in (reports.z, reports.a0, reports.a1))
            return {"chunks": st["chunks"] + (chunk,), "canonical": False}
        counts = st["counts"].copy()
        self._count_into(reports.z, reports.a0, reports.a1, self._candidates, counts)
        return {"counts": counts, "n": st["n"] + np.uint64(len(reports))}

    def _merged(self, theirs):
        mine = self._st
        if "chunks" in mine:
            return {"chunks": mine["chunks"] + theirs["chunks"],
                    "canonical": not theirs["chunks"] and mine["canonical"]}
        return {"counts": _base._checked_sum("counts", mine["counts"], theirs["counts"]),
                "n": _base._checked_sum("n", mine["n"], theirs["n"])}

    def merge(self, other: "Server") -> "Server":
        """Add ``other``'s reports into this server (exact; ``other`` is unchanged). Both
        must have equal parameters and the same mode (and equal candidates)."""
        if type(other) is type(self) and other.params == self.params and other is not self:
            if self.keeps_reports != other.keeps_reports:
                raise IncompatibleError("cannot merge a report-keeping server with a candidate-count server")
            if not self.keeps_reports and not np.array_equal(self._candidates, other._candidates):
                raise IncompatibleError("cannot merge servers that count different candidates")
        return super().merge(other)

    def match_counts(self, candidates=None) -> np.ndarray:
        """``C(x) = #{i : z_i = h_i(x)}`` for each candidate (uint64); ``None`` means the
        whole dictionary (report-keeping mode) or the streamed candidates."""
        if self.keeps_reports:
            if candidates is None:
                # the query holds the values, their counts and their float estimates
                check_allocation(24 * self.params.d, f"a whole-dictionary OCMS query (d={self.params.d})")
                xs = np.arange(self.params.d, dtype=np.uint64)
            else:
                xs = self._checked_candidates(candidates, distinct=False)
            counts = np.zeros(xs.size, dtype=np.uint64)
            if self._n:
                self._count_into(*self._columns(canonical=False), xs, counts)
            return counts
        if candidates is None:
            return self._counts.copy()
        xs = self._checked_candidates(candidates, distinct=False)
        order = np.argsort(self._candidates)
        ordered = self._candidates[order]
        pos = np.searchsorted(ordered, xs)
        found = pos < ordered.size
        found[found] = ordered[pos[found]] == xs[found]
        if not found.all():
            raise ParameterError(f"candidates must be among the server's streamed candidates; "
                                 f"{int(xs[~found][0])} is not")
        return self._counts[order[pos]]

    def estimate(self, candidates=None, counts: bool = False, *, clip: bool = False) -> np.ndarray:
        """Frequency estimates (float64 fractions) for ``candidates`` ([PAN] Alg. 2 with the
        ``m'`` correction, or plain ``m`` if ``params.use_m_prime`` is False).

        Args:
            candidates: values in ``[0, d)``; ``None`` = the whole dictionary (report-keeping
                mode; costs ``n*d`` hash evaluations) or the streamed candidates.
            counts: estimated numbers of users (``n`` times the fractions) instead.
            clip: clip the fractions to ``[0, 1]`` (post-processing; raw estimates are
                unbiased). See :meth:`frequencies` for standard errors and other
                post-processing.
        Raises:
            ReportError: no reports were aggregated.
            ParameterError: invalid candidates.
        """
        if self._n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        est = decode_matches(self.params, self.match_counts(candidates), self._n, clip)
        return est * self._n if counts else est

    def estimate_counts(self, candidates=None, clip: bool = False) -> np.ndarray:
        """Alias of ``estimate(candidates, counts=True, clip=clip)`` (kept for
        compatibility): estimated numbers of users per candidate."""
        return self.estimate(candidates, counts=True, clip=clip)

    # -- internals ---------------------------------------------------------------------
    def _checked_candidates(self, candidates, distinct: bool) -> np.ndarray:
        xs = uint64_column(candidates, "candidates", ParameterError)
        _check_below(xs, self.params.d, "candidates", "values in", ParameterError)
        if distinct and np.unique(xs).size != xs.size:
            raise ParameterError("candidates must be distinct")
        return xs

    def _count_into(self, z, a0, a1, xs, counts) -> None:
        p = self.params
        start = _contiguous_start(xs)
        if start is not None:
            _core.ocms_count_range(p.field, z, a0, a1, p.m, start, counts, self.threads)
        elif xs.size:
            _core.ocms_count_list(p.field, z, a0, a1, p.m, xs, counts, self.threads)

    def _columns(self, canonical: bool = True) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kept reports as one set of columns; ``canonical`` sorts the rows by
        (z, a0, a1) so that state and bytes do not depend on arrival order (counting does
        not need it). The compacted state (the same reports) is committed."""
        with self._lock:
            st = self._st
            chunks, ordered = st["chunks"], st["canonical"]
            if not chunks:
                empty = np.zeros(0, dtype=np.uint64)
                return empty, empty, empty
            if len(chunks) > 1:
                chunks = (tuple(_frozen(np.concatenate([c[i] for c in chunks])) for i in range(3)),)
            if canonical and not ordered:
                z, a0, a1 = chunks[0]
                order = np.lexsort((a1, a0, z))
                chunks, ordered = (tuple(_frozen(column[order]) for column in (z, a0, a1)),), True
            if chunks is not st["chunks"]:
                self._st = _base._State(chunks=chunks, canonical=ordered)
            return chunks[0]

    def _state(self) -> Dict[str, np.ndarray]:
        if self.keeps_reports:
            z, a0, a1 = self._columns()
            return {"z": z, "a0": a0, "a1": a1}
        return {"candidates": self._candidates, "counts": self._counts, "n": self._st["n"]}

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        def column(name):
            arr = state[name]
            if arr.dtype != np.uint64 or arr.ndim != 1:
                raise FormatError(f"stored {name} must be a 1-D uint64 array")
            return arr

        keys = set(state)
        if keys == {"z", "a0", "a1"}:
            z, a0, a1 = column("z"), column("a0"), column("a1")
            if not z.size == a0.size == a1.size:
                raise FormatError("stored report columns have different lengths")
            try:
                Reports(z=z, a0=a0, a1=a1).validate(self.params)
            except ReportError as exc:
                raise FormatError(f"stored reports do not fit the parameters: {exc}") from None
        elif keys == {"candidates", "counts", "n"}:
            cands, counts, n = column("candidates"), column("counts"), column("n")
            if n.size != 1 or counts.size != cands.size:
                raise FormatError("stored candidate counts have inconsistent shapes")
            try:
                self._checked_candidates(cands, distinct=True)
            except ParameterError as exc:
                raise FormatError(f"stored candidates are invalid: {exc}") from None
            if int(n[0]) >= 2**63:
                raise FormatError(f"stored report count {int(n[0])} is out of range")
            if counts.size and int(counts.max()) > int(n[0]):
                raise FormatError("stored match counts exceed the number of reports")
        else:
            raise FormatError(f"stored state has unexpected arrays {sorted(keys)}")

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        if "z" in state:
            self._candidates = None
            z, a0, a1 = (_frozen(np.array(state[k], dtype=np.uint64)) for k in ("z", "a0", "a1"))
            self._st = _base._State(chunks=((z, a0, a1),) if z.size else (), canonical=False)
        else:
            self._candidates = np.array(state["candidates"], dtype=np.uint64)
            self._candidates.flags.writeable = False
            self._st = _base._State(counts=np.array(state["counts"], dtype=np.uint64),
                                    n=np.array(state["n"], dtype=np.uint64).reshape(1))

    def _repr_extra(self) -> str:
        return "mode='reports'" if self.keeps_reports else f"mode='{self._candidates.size} candidates'"


_base.register_protocol(_base.Protocol("ocms", Params, Reports, Server, Client))
