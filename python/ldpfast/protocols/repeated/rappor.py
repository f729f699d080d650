"""RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014), compatible with its reference clients.

RAPPORClient (``k`` Bloom bits, ``h`` hashes, ``m`` cohorts, probabilities ``f``, ``p``, ``q``):

1. the value's **Bloom filter** in the user's cohort ``c``: bit ``MD5(BE32(c) || value)[i] mod k``
   set for ``i < h``;
2. the **permanent randomized response** (PRR), memoized: bit ``i`` keeps the Bloom bit
   unless byte ``i`` of ``HMAC-SHA256(secret, BE32(bloom))`` has its high 7 bits below
   ``128 f`` (probability ``f``), and then takes that byte's low bit (a fair coin), so the PRR
   is a deterministic function of ``(secret, value)`` and nothing per value is stored;
3. the **instantaneous randomized response** (IRR), drawn fresh for every report: bit ``i``
   is 1 with probability ``q`` where the PRR bit is 1 and ``p`` where it is 0.

Encodings (``RAPPORParams.encoding``, so that existing deployments' reports aggregate here;
details in ``cpp/include/ldpfast/kernels/rappor.hpp``): ``"python"`` (default,
google/rappor's ``client/python/rappor.py`` as above: ``k <= 32``, ``f``'s threshold the
float ``128 f``), ``"cpp"`` (its ``client/cpp/encoder.cc``: PRR message ``0x01 || encoder_id
|| BE32(bloom)``, threshold ``uint8(float32(f) * 128)``) and ``"cpp-drbg"`` (that client's
extension to larger filters, as Chrome's 128 bits: ``k`` a multiple of 8 up to 1024, masks
from its HMAC-DRBG). Cohorts are given per report (the Python client's input) or derived
from the secret as the C++ client does (``HMAC(secret, "")``'s first 4 bytes, little-endian,
``& (m - 1)``; ``mod m`` when ``m`` is not a power of two). Values are bytes (``str``:
UTF-8); integer values are their decimal ASCII digits.

Privacy (both computed from the effective ``f``, ``p``, ``q`` the samplers use):
``eps_inf = 2 h ln((1 - f/2)/(f/2))`` (the PRR: what unboundedly many reports of one
value reveal) and ``eps_1 = h ln(q* (1 - p*)/(p* (1 - q*)))`` (one report), with
``q* = P(IRR bit = 1 | Bloom bit 1) = (1 - f/2) q + (f/2) p`` and
``p* = P(IRR bit = 1 | Bloom bit 0) = (f/2) q + (1 - f/2) p``. See
:mod:`ldpfast.protocols._memo` for what memoization does not protect.

RAPPORServer: per-cohort bit counts (the bit-packed C++ column-count kernel, threads), mergeable
and serializable. :meth:`RAPPORServer.decode` decodes a candidate dictionary by least squares,
lasso then least squares (the paper's analysis), NNLS or EM, with sandwich standard errors
(:mod:`ldpfast.protocols.repeated._rappor_decode`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, ClassVar, List, Optional, Sequence, Tuple

import numpy as np

from ... import _base, _core
from ..._base import AuditHooks
from ..._memory import check_allocation
from ...audit import log_ratio
from ..._validate import check_int, check_real, check_values
from ...errors import FormatError, ParameterError, PrivacyWarning, ReportError
from .._bitvec import BitCountServer, bit_rows, row_bytes
from .._memo import MemoClient, MemoServer, new_secrets
from ._rappor_hooks import audit_plan, channel, prr_and_irr, wire_fields
from ._rappor_inputs import check_dictionary_values, irr_rows, secret_rows
from ._rappor_decode import (ENCODING_CODE, METHODS, Decoded, Decoder, as_labels, auto_method, bloom_rows,
                             encode_values)
from .._aliases import deprecated_names
from .._registration import edges, zipf_values

__all__ = ["RAPPORParams", "RAPPORReports", "RAPPORClient", "RAPPORServer", "Decoded", "ENCODINGS", "METHODS",
           "encode_values",
           "new_secrets"]

PROTOCOL_ID = "rappor"
#: The reference clients' encodings (see the module docstring).
ENCODINGS = ("python", "cpp", "cpp-drbg")
_TWO64 = 2**64
_MAX_D = 2**24


def _check_prob(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ParameterError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class RAPPORParams(_base.Params):
    """RAPPOR parameters (defaults: the reference Python client's).

    Attributes:
        k: Bloom filter bits (``num_bloombits``): at most 32 in the ``python`` and ``cpp``
            encodings, a multiple of 8 up to 1024 in ``cpp-drbg``.
        h: hash functions (``num_hashes``): at most 16 (MD5 bytes; fewer in ``cpp-drbg``
            when a position needs two bytes).
        m: cohorts (``num_cohorts``), 1 to 2^20.
        p: ``P(IRR bit = 1 | PRR bit = 0)`` (``prob_p``).
        q: ``P(IRR bit = 1 | PRR bit = 1)`` (``prob_q``).
        f: the PRR's noise probability (``prob_f``), in [0, 1): ``f = 0`` (no PRR, as some
            deployments) reads their reports with a PrivacyWarning (no longitudinal
            protection); ``f_effective = 1`` is refused (no finite estimate).
        encoding: ``"python"``, ``"cpp"`` or ``"cpp-drbg"`` (module docstring).
        encoder_id: the C++ client's encoder id (metric name), ASCII, in its PRR message.
        d: size of an integer dictionary ``[0, d)`` (values sent as decimal strings), what
            :meth:`RAPPORServer.estimate` decodes over by default; 0 for string values.
    """

    protocol: ClassVar[str] = PROTOCOL_ID

    k: int = 16
    h: int = 2
    m: int = 64
    p: float = 0.5
    q: float = 0.75
    f: float = 0.5
    encoding: str = "python"
    encoder_id: str = ""
    d: int = 0

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ParameterError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        if self.encoding == "cpp-drbg":
            k = check_int("k", self.k, 8, 1024)
            if k % 8:
                raise ParameterError(f"k must be a multiple of 8 in the cpp-drbg encoding, got {k}")
        else:
            k = check_int("k", self.k, 1, 32)
        per_hash = 1 if k <= 256 or self.encoding != "cpp-drbg" else 2
        h = check_int("h", self.h, 1, 16 // per_hash)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "h", h)
        object.__setattr__(self, "m", check_int("m", self.m, 1, 2**20))
        for name in ("p", "q", "f"):
            object.__setattr__(self, name, _check_prob(name, getattr(self, name)))
        if self.p == self.q:
            raise ParameterError(f"p and q must differ (p = q makes reports independent of the value), got {self.p}")
        if not isinstance(self.encoder_id, str) or not self.encoder_id.isascii() or len(self.encoder_id) > 256:
            raise ParameterError(f"encoder_id must be an ASCII string of at most 256 characters, got "
                                 f"{self.encoder_id!r:.80}")
        object.__setattr__(self, "d", check_int("d", self.d, 0, _MAX_D))
        if self.f128 == 0 and self.f != 0.0:
            raise ParameterError(f"f={self.f!r} rounds to 0/128 in the {self.encoding} encoding (no PRR noise); "
                                 "a deployment without a PRR is read with f=0")
        if self.f128 == 128:
            raise ParameterError(f"f must give f_effective < 1 (f <= 127/128), got f={self.f!r} (f_effective = 1 in "
                                 f"the {self.encoding} encoding): a PRR of fair coins makes the reports independent "
                                 "of the value, and no estimate is finite")
        if self.f128 == 0:
            warnings.warn("RAPPOR with f=0 has no PRR: the reports carry no longitudinal protection (eps_inf = inf: "
                          "repeated reports of one value reveal its Bloom filter)", PrivacyWarning, stacklevel=3)

    # -- the samplers' exact probabilities ------------------------------------------------
    @property
    def f128(self) -> int:
        """The PRR threshold: a mask byte's high 7 bits below it mean noise (``f_effective =
        f128 / 128``): ``#{r < 128: r < 128 f}`` (python), ``floor(float32(f) 128)`` (C++)."""
        if self.encoding == "python":
            return sum(1 for r in range(128) if r < self.f * 128)
        return int(np.float32(self.f) * np.float32(128))

    @property
    def f_effective(self) -> float:
        return self.f128 / 128

    def irr_thresholds(self) -> Optional[Tuple[int, int]]:
        """``(t_q, t_p)`` of the IRR sampler (``P = t / 2^64``), or None when the IRR is the
        PRR itself (``p = 0``, ``q = 1``)."""
        if self.p == 0.0 and self.q == 1.0:
            return None
        # round(prob 2^64), exact for the double prob, kept below 2^64
        return tuple(min(round(Fraction(v) * _TWO64), _TWO64 - 1) for v in (self.q, self.p))  # type: ignore[return-value]

    def _stars(self) -> Tuple[Fraction, Fraction]:
        """``(q*, p*)`` exactly: ``P(IRR bit = 1 | Bloom bit 1) = (1 - f/2) q + (f/2) p`` and
        ``P(IRR bit = 1 | Bloom bit 0) = (f/2) q + (1 - f/2) p``."""
        t = self.irr_thresholds()
        q, p = (Fraction(1), Fraction(0)) if t is None else (Fraction(t[0], _TWO64), Fraction(t[1], _TWO64))
        half = Fraction(self.f128, 256)
        return (1 - half) * q + half * p, half * q + (1 - half) * p

    @property
    def q_star(self) -> float:
        """``P(IRR bit = 1 | Bloom bit = 1) = (1 - f/2) q + (f/2) p``."""
        return float(self._stars()[0])

    @property
    def p_star(self) -> float:
        """``P(IRR bit = 1 | Bloom bit = 0) = (f/2) q + (1 - f/2) p``."""
        return float(self._stars()[1])

    @property
    def eps_inf(self) -> float:
        """``2 h ln((1 - f/2)/(f/2))``: the PRR's budget (unboundedly many reports of one
        value), exact and rounded up to a double; infinite for ``f = 0`` (no PRR)."""
        if self.f128 == 0:
            return math.inf
        half = Fraction(self.f128, 256)
        return _log_ratio(((1 - half) / half) ** (2 * self.h))

    @property
    def eps_1(self) -> float:
        """``h ln(q* (1 - p*)/(p* (1 - q*)))``: the budget of one report, exact and rounded
        up to a double."""
        qs, ps = self._stars()
        if qs in (0, 1) or ps in (0, 1):
            return math.inf
        return _log_ratio((qs * (1 - ps) / (ps * (1 - qs))) ** self.h)

    @property
    def epsilon(self) -> float:
        """The budget of one report, :attr:`eps_1`."""
        return self.eps_1

    @property
    def communication_bits(self) -> int:
        return self.k

    @classmethod
    def from_budgets(cls, eps_inf: float, eps_1: float, **fields: Any) -> "RAPPORParams":
        """RAPPOR spending at most ``eps_inf`` in its PRR and ``eps_1`` per report, as the
        longitudinal oracles are built: ``f``, the smallest multiple of 1/128 with
        ``2 h ln((1 - f/2)/(f/2)) <= eps_inf``, then ``q = 1 - p`` with the smallest dyadic ``p``
        (53 bits) whose :attr:`eps_1` is at most ``eps_1`` (both exact, so each budget is met and
        the next finer setting would exceed it; an ``eps_1`` above the rounded PRR's ``eps_inf``
        gets that, as no report reveals more than its PRR). ``fields``: the others (``k``, ``h``,
        ``m``, ``d``, ``encoding``, ...; the constructor's defaults).

        Raises:
            ParameterError: a budget is not a positive number, ``eps_1 > eps_inf``, ``eps_inf`` is
                below ``2 h ln(129/127)`` (the noisiest PRR with finite estimates), ``fields``
                names ``p``, ``q`` or ``f``, or a field is out of range.
        """
        params: RAPPORParams = prr_and_irr(cls, check_real("eps_inf", eps_inf), check_real("eps_1", eps_1), fields)
        return params


def _log_ratio(ratio: Fraction) -> float:
    """``|ln ratio|`` of an exact positive rational, rounded up to a double."""
    return log_ratio(max(ratio.numerator, ratio.denominator), min(ratio.numerator, ratio.denominator))


# -- reports -----------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class RAPPORReports(_base.Reports):
    """A batch of RAPPOR reports: ``cohort`` (uint32) and ``bits`` (``uint8[n, ceil(k/8)]``,
    bit ``j`` of the filter is bit ``j % 8`` of byte ``j // 8``: the little-endian bytes of
    the reference clients' integer reports)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar = {"cohort": ("uint32", 1), "bits": ("uint8", 2)}
    cohort: np.ndarray
    bits: np.ndarray

    def __post_init__(self) -> None:
        arr = np.asarray(self.bits)
        if arr.ndim != 2:
            raise ReportError(f"bits must be a 2-D uint8 array (one row per report), got shape {arr.shape}")
        self.bits = bit_rows(arr, 8 * arr.shape[1])
        cohort = np.asarray(self.cohort)
        if cohort.ndim != 1 or (cohort.size and cohort.dtype.kind not in "iu"):
            raise ReportError(f"cohort must be a 1-D integer array, got {cohort.dtype} of shape {cohort.shape}")
        if cohort.size and (int(cohort.min()) < 0 or int(cohort.max()) >= 2**32):
            raise ReportError("cohort values must be in [0, 2^32)")
        self.cohort = np.ascontiguousarray(cohort, dtype=np.uint32)
        self._check_lengths()

    @classmethod
    def from_integers(cls, cohorts: Any, reports: Any, k: int) -> "RAPPORReports":
        """RAPPORReports given as the reference clients' integers (bit ``j`` = ``1 << j``), e.g. the
        ``irr`` values of google/rappor's Python ``Encoder.encode``."""
        ints = [int(v) for v in reports]
        if any(v < 0 or v >> k for v in ints):
            raise ReportError(f"reports must be integers in [0, 2^{k})")
        data = b"".join(v.to_bytes(row_bytes(k), "little") for v in ints)
        rows = np.frombuffer(data, dtype=np.uint8).reshape(len(ints), row_bytes(k)).copy()
        return cls(cohort=np.asarray(cohorts), bits=rows)

    @classmethod
    def from_bit_strings(cls, cohorts: Any, reports: Sequence[str]) -> "RAPPORReports":
        """RAPPORReports given as strings of ``k`` characters '0'/'1', most significant bit first
        (the ``irr`` column google/rappor's simulator writes and ``sum_bits.py`` reads)."""
        if not reports:
            return cls(cohort=np.asarray(cohorts, dtype=np.uint32), bits=np.zeros((0, 1), np.uint8))
        k = len(reports[0])
        if k == 0 or any(len(s) != k or set(s) - {"0", "1"} for s in reports):
            raise ReportError("reports must be strings of equal length of '0' and '1'")
        return cls.from_integers(cohorts, [int(s, 2) for s in reports], k)

    def to_integers(self) -> List[int]:
        """The reports as the reference clients' integers."""
        return [int.from_bytes(row.tobytes(), "little") for row in self.bits]


# -- client ------------------------------------------------------------------------------------
class RAPPORClient(MemoClient):
    """RAPPOR client: ``perturb(values, secrets=None, cohorts=None)`` (the IRR, what is sent),
    ``permanent(...)`` (the PRR, never sent). ``secrets``: one per value, a ``uint8[n, L]``
    array or a sequence of bytes (HMAC keys, zero-padded; ``cpp-drbg`` needs equal lengths),
    the same for a user every round; empty, all-zero and repeated keys are refused
    (:mod:`ldpfast.protocols.repeated._rappor_inputs`); None draws fresh ones (see
    :class:`ldpfast.protocols._memo.MemoClient`).
    ``cohorts``: None derives them from the secrets (the C++ client's rule). ``rng=None``
    (default) draws the IRR's randomness from the OS; a seed is for simulation only."""

    takes_labels = True    # strings are hashed into the Bloom filter (no ldpfast.Domain needed)

    def _rappor_secrets(self, secrets: Any, n: int) -> np.ndarray:
        if secrets is None:
            return self._secrets(None, n)
        return secret_rows(secrets, n, self.params.encoding == "cpp-drbg")

    def _cohorts(self, cohorts: Any, keys: np.ndarray, n: int) -> np.ndarray:
        p = self.params
        if cohorts is None:
            if p.m == 1:
                return np.zeros(n, dtype=np.uint32)
            return _core.rappor_cohorts(ENCODING_CODE[p.encoding], keys, p.m, self.threads)
        arr = check_values(cohorts, p.m, "cohorts", "integers in")
        if arr.size != n:
            raise ParameterError(f"cohorts must have one entry per value ({n}), got {arr.size}")
        return arr.astype(np.uint32)

    def bloom(self, values: Any, cohorts: Any) -> RAPPORReports:
        """The Bloom filters of ``values`` in ``cohorts`` (no randomness: never send these)."""
        p = self.params
        data, offsets = encode_values(values)
        n = offsets.size - 1
        if cohorts is None:
            raise ParameterError("bloom() needs the cohorts")
        cohort = self._cohorts(cohorts, np.zeros((n, 1), np.uint8), n)
        return RAPPORReports(cohort=cohort, bits=bloom_rows(p, data, offsets, cohort, self.threads))

    def _prr(self, values: Any, secrets: Any, cohorts: Any, check: Optional[Callable[[int],
                                                                                     None]] = None) -> RAPPORReports:
        """The PRRs; ``check(n)`` runs on the number of values before any randomness is used."""
        p = self.params
        data, offsets = encode_values(values)
        n = offsets.size - 1
        if p.d and n:
            check_dictionary_values(values, p.d)
        if check is not None:
            check(n)
        check_allocation(n * row_bytes(p.k) * 3, f"{n} RAPPOR reports of {p.k} bits")
        keys = self._rappor_secrets(secrets, n)
        cohort = self._cohorts(cohorts, keys, n)
        bloom = bloom_rows(p, data, offsets, cohort, self.threads)
        prr = _core.rappor_permanent(ENCODING_CODE[p.encoding], p.k, p.f128, keys, p.encoder_id.encode(), bloom,
                                     self.threads)
        return RAPPORReports(cohort=cohort, bits=prr)

    def permanent(self, values: Any, secrets: Any = None, cohorts: Any = None) -> RAPPORReports:
        """The permanent randomized responses of ``values`` (what unboundedly many reports
        of each value reveal; never send these)."""
        return self._prr(values, secrets, cohorts)

    def perturb(self, values: Any, secrets: Any = None, cohorts: Any = None, irr_words: Any = None) -> RAPPORReports:
        """One report (the IRR of the memoized PRR) per value. ``irr_words``: injected IRR
        words ``(p_words, q_words)``, a ``k``-bit integer each per value (as
        :meth:`RAPPORReports.to_integers`; google/rappor's ``irr_rand.p_gen()``/``q_gen()``, C++
        ``GetMask(prob_p/prob_q, k)``): the report is ``(p & ~prr) | (q & prr)``, the published
        client's bit for bit. For checks against it: on a device words must come from a
        cryptographic generator; None (default) draws the IRR here."""
        injected: List[np.ndarray] = []
        check = None if irr_words is None else lambda n: injected.extend(irr_rows(irr_words, n, self.params.k))
        prr = self._prr(values, secrets, cohorts, check)
        if injected:
            p_rows, q_rows = injected
            return RAPPORReports(cohort=prr.cohort, bits=(p_rows & ~prr.bits) | (q_rows & prr.bits))
        thresholds = self.params.irr_thresholds()
        if thresholds is None or not len(prr):
            return prr
        t_q, t_p = thresholds
        irr = _core.bit_response(self._keys.key(), prr.bits, self.params.k, t_q, t_p, self.threads)
        return RAPPORReports(cohort=prr.cohort, bits=irr)


class RAPPORServer(MemoServer, BitCountServer):
    """RAPPOR aggregator: per-cohort bit counts (``counts[c, j]``, ``group_reports[c]``).
    ``threads``: server threads (results do not depend on it). Thread-safe (see
    :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = RAPPORParams
    reports_type: ClassVar[Optional[type]] = RAPPORReports
    group_column: ClassVar[Optional[str]] = "cohort"
    params: RAPPORParams

    @classmethod
    def _shape(cls, params: Any) -> Tuple[int, int]:
        return int(params.m), int(params.k)

    @classmethod
    def from_counts(cls, params: RAPPORParams, counts: Any, cohort_reports: Any) -> "RAPPORServer":
        """A server holding already aggregated counts, e.g. the per-cohort sums that
        google/rappor's ``sum_bits.py`` writes: ``counts[c, j]`` reports of cohort ``c``
        with bit ``j`` set (``uint[m, k]``) and ``cohort_reports[c]`` reports per cohort."""
        counts_arr = np.asarray(counts)
        reports_arr = np.asarray(cohort_reports)
        for name, arr in (("counts", counts_arr), ("cohort_reports", reports_arr)):
            if arr.size and (arr.dtype.kind not in "iu" or int(arr.min()) < 0):
                raise ParameterError(f"{name} must hold non-negative integers")
        server = cls(params)
        state = {"counts": counts_arr.astype(np.uint64), "reports": reports_arr.astype(np.uint64)}
        try:
            server._check_state(state)
        except FormatError as exc:
            raise ParameterError(f"counts do not fit the parameters: {exc}") from None
        server._set_state(state)
        return server

    def _dictionary(self, candidates: Any) -> Tuple[np.ndarray, np.ndarray]:
        """(dictionary decoded over, candidates' indices in it): ``[0, d)`` when ``d`` is set."""
        p = self.params
        if p.d:
            dictionary = np.arange(p.d, dtype=np.uint64)
            wanted = dictionary if candidates is None else check_values(candidates, p.d, "candidates", "values in")
            return dictionary, wanted.astype(np.intp)
        if candidates is None:
            raise ParameterError("RAPPOR with string values (d=0) needs candidates to decode")
        labels = as_labels(candidates)
        if labels.size == 0:
            raise ParameterError("candidates must not be empty")
        return labels, np.arange(labels.size)

    def decode(self, candidates: Any = None, method: str = "lasso", alpha: float = 0.05, tol: float = 1e-9,
               max_iter: int = 10000) -> Decoded:
        """Decode the dictionary ``candidates`` (default: ``[0, d)`` when ``d`` is set); see the
        module docstring for the methods. ``alpha``: the lasso's family-wise selection level;
        ``tol``, ``max_iter``: the coordinate descent's and EM's stopping rule (no
        coefficient moves by more than ``tol``, in units of its column's scale for the
        lasso, absolute for EM)."""
        if method not in METHODS:
            raise ParameterError(f"method must be one of {METHODS}, got {method!r}")
        if not 0.0 < alpha < 1.0:
            raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
        n = self.n
        if n == 0:
            raise ReportError("cannot decode from zero reports")
        labels = as_labels(candidates) if candidates is not None else self._dictionary(None)[0]
        if labels.size == 0:
            raise ParameterError("candidates must not be empty")
        return self._decoder().decode(labels, method, alpha, tol, max_iter)

    def _decoder(self) -> Decoder:
        return Decoder(self.params, self._st["counts"], self._st["reports"])

    def estimate(self, candidates: Any = None, counts: bool = False, *, method: str = "auto") -> np.ndarray:
        """Estimated frequencies (``counts=True``: numbers of reports) of ``candidates``
        (default: ``[0, d)``), decoded over the dictionary ``[0, d)`` when ``d`` is set (else
        over the candidates themselves). ``method="auto"``: unbiased least squares up to 500
        dictionary entries, the lasso beyond; or any of :data:`METHODS`."""
        dictionary, wanted = self._dictionary(candidates)
        chosen = auto_method(dictionary.size) if method == "auto" else method
        values = np.asarray(self.decode(dictionary, chosen).values[wanted], dtype=np.float64)
        return values * self.n if counts else values

    def _variance_of_default(self, candidates: Any) -> Tuple[Optional[Any], str]:
        dictionary, wanted = self._dictionary(candidates)
        return self._decoder().default_variance(dictionary, wanted)


# -- registration ------------------------------------------------------------------------------
def _example() -> Tuple[RAPPORParams, np.ndarray]:
    return RAPPORParams(k=30, h=2, m=8, p=0.25, q=0.75, f=0.25, d=16), zipf_values(16)  # k % 8: padding to reject


def _variance(server: RAPPORServer, candidates: Any) -> Tuple[Optional[Any], str]:
    return server._variance_of_default(candidates)


def audit_params(epsilon: float, **changes: Any) -> RAPPORParams:
    """A small configuration for the audit: :meth:`RAPPORParams.from_budgets` with ``eps_1 =
    epsilon`` and ``eps_inf = 2 epsilon`` (``k = 8``, ``h = 1``, one cohort, ``d = 16``), or the
    smallest ``eps_inf`` with finite estimates, ``2 h ln(129/127)``, where ``2 epsilon`` is below it."""
    fields = {"k": 8, "h": 1, "m": 1, "d": 16, **changes}
    noisiest = RAPPORParams(**fields, p=0.0, q=1.0, f=127 / 128).eps_inf   # exactly 2 h ln(129/127), as computed
    return RAPPORParams.from_budgets(max(2.0 * epsilon, noisiest), epsilon, **fields)


def _simulations() -> Tuple[Any, ...]:
    from ...experiments import Algorithm

    def make(eps: float, data: Any, gen: Any) -> RAPPORParams:
        return RAPPORParams.from_budgets(2.0 * eps, eps, k=32, h=2, m=16, d=data.d)

    return (Algorithm("rappor", "RAPPOR", "protocols.repeated.rappor", make,
                      summary="RAPPOR (32-bit Bloom filter, h=2, 16 cohorts, eps_inf = 2 eps), decoded over [0, d)"),)


_base.register_protocol(_base.Protocol(
    PROTOCOL_ID, RAPPORParams, RAPPORReports, RAPPORServer, RAPPORClient,
    example=_example, wire_fields=wire_fields, variance=_variance,
    extremes=edges(d=(1, 2**14)),  # the decode regresses on every value of [0, d): 2^24 is minutes
    simulations=_simulations, channel=channel,
    rounds=lambda eps_inf, eps_1, d: RAPPORParams.from_budgets(eps_inf, eps_1, k=32, h=2, m=16, d=d),
    audit=AuditHooks(audit_params, audit_plan, lambda params: float(params.eps_1),
                     permanent_epsilon=lambda params: float(params.eps_inf))))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "rappor", {"Params": RAPPORParams, "Client": RAPPORClient,
                                                      "Server": RAPPORServer, "Reports": RAPPORReports})
