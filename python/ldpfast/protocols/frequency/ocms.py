"""OCMS+RR: the optimized private Count-Mean Sketch with k-ary randomized response.

Implements [PAN] M. Pan, "Improving Count-Mean Sketch as the Leading Locally Differentially
Private Frequency Estimator for Large Dictionaries" (CSF 2025), Algorithms 1 and 2.

Protocol (one report per user, eps-LDP):

1. Parameters ([PAN] Alg. 1 ``HashRange`` / ``FiniteFieldSize``): the hash range ``m`` is
   chosen to minimise the worst-case MSE (``mode="mse"``, Thm 3.6, with a prior ``f_star``
   on the largest frequency of interest) or the l1/l2 loss (``mode="l"``, Thm 3.8). The
   hash family is ``h(x) = ((a0 + a1 x) in F) mod m`` over a finite field ``F`` of size
   ``pH >= max(d+1, 5m)``: by default the prime field of ``PRIME = 2^64 - 59``.
2. OCMSClient ([PAN] Alg. 1 ``Client``): draw ``a0, a1`` uniformly from the whole field (a
   fresh hash function per user), compute ``y = h(x)``, perturb ``y`` with k-ary RR on
   ``[m]`` (keep with probability ``e/(e+m-1)``) and send ``(z, a0, a1)``.
3. OCMSServer ([PAN] Alg. 2): for a queried ``x``, count the matches ``C(x) = #{i: z_i = h_i(x)}``;
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
(:class:`OCMSServer`) therefore works in one of two modes, chosen at construction:

* ``OCMSServer(params)`` keeps the reports (24 bytes each) and can estimate any candidate
  set later. ``merge`` concatenates; state and bytes are canonical (rows sorted), so
  equality and serialization do not depend on the order reports arrived in.
* ``OCMSServer(params, candidates=...)`` streams every batch into per-candidate match counts
  (memory ``O(|candidates|)``, integral, exactly mergeable by addition). This is the mode
  for very large ``n`` when the values of interest are known in advance.

Choices the paper leaves open are parameters: the field (``PRIME`` by default,
or a compact prime or ``GF(2^l)``), the range of ``a0, a1`` (whole field by default,
``[1, pH-1]`` to reproduce the reference code R1), the estimator (with ``m'`` by default,
plain ``m`` as in R1) and clipping (off by default: raw estimates are unbiased).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, ClassVar, List, Optional, Sequence, Tuple

import numpy as np

from ... import _base, _core
from ..._validate import (check_below, check_bool, check_epsilon, check_int, check_values,
                         rr_threshold, uint64_column)
from ...errors import ParameterError, ReportError
from ...kernels import field as _field
from ...kernels.field import PRIME
from ...theory import ocms as _theory
from .._local_hashing import (check_hash_field, choose_field, debias_matches, finite_field_size, hash_range,
                             match_channel)
from ..._base import AuditHooks, ComparisonRow
from ...audit import value_inputs
from ...estimates import PLUG_IN
from ..._base import WireField, bits_for
from ._hashed_reports import HashedReportsServer
from .._aliases import deprecated_names
from .._registration import edges, olh_plan, per_user_hash_cost, rr_epsilon, theory, zipf_values

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm

__all__ = ["PRIME", "OCMSParams", "OCMSReports", "OCMSClient", "OCMSServer", "hash_range", "finite_field_size",
           "decode_matches", "uint64_column"]


# --- parameters -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class OCMSParams(_base.Params):
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

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 1)
        m = check_int("m", self.m, 2)
        size = check_int("field_size", self.field_size, 2)
        size, poly = check_hash_field(size, self.field_kind, self.poly)
        if not m < size:
            raise ParameterError(f"m must be < field_size = {size}, got {m}")
        if not d + 1 <= size:
            raise ParameterError(f"field_size must be >= d + 1 = {d + 1} ([PAN] Alg. 1), got {size}")
        if self.a_range not in ("full", "nonzero"):
            raise ParameterError(f"a_range must be 'full' or 'nonzero', got {self.a_range!r}")
        for name, value in (("epsilon", eps), ("d", d), ("m", m), ("field_size", size), ("poly", poly),
                            ("use_m_prime", check_bool("use_m_prime", self.use_m_prime))):
            object.__setattr__(self, name, value)
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @classmethod
    def optimal(cls, epsilon: float, d: int, mode: str = "mse", f_star: float = 1.0,
                field: str = "paper", a_range: str = "full", use_m_prime: bool = True,
                fast_query: bool = False) -> "OCMSParams":
        """Parameters chosen as in [PAN] Algorithm 1.

        Args:
            epsilon, d: privacy parameter and dictionary size.
            mode: ``"mse"`` (MSE-OCMS+RR, with prior ``f_star``) or ``"l"`` (l-OCMS+RR).
            f_star: prior upper bound on the largest frequency of interest (``mode="mse"``).
            field: ``"paper"``: :func:`finite_field_size` (``PRIME``, or ``GF(2^64)`` when
                ``d >= PRIME``); ``"compact"``: the smallest prime ``>= max(d+1, 5m)``;
                ``"binary"``: ``GF(2^l)`` with ``l = ceil(log2 max(d+1, 5m))``.
            a_range, use_m_prime: see the class attributes.
            fast_query: for whole-dictionary queries: ``m`` is the power of two next to
                the optimum with the smaller closed-form loss (the worst-case MSE for
                ``mode="mse"``, l2 for ``"l"``) and the field ``GF(2^l)``, so the server
                answers a range of ``Q`` candidates with the affine decode in about
                ``1024 + 1.25 Q/m`` steps per report instead of ``Q`` (the ``field``
                argument is then ignored). bench/full_domain_query.py measures both.
        """
        d = check_int("d", d, 1)
        m = hash_range(epsilon, d, mode, f_star)
        if check_bool("fast_query", fast_query):
            m, field = _power_of_two_m(epsilon, d, mode, f_star), "binary"
        size, kind = choose_field(d, m, field)
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
        match, other = _theory.rr_decode_constants(self.epsilon, self.m)
        return float(match), other  # a float for an integer m

    @property
    def field(self) -> "_core.Field":
        """The C++ field object used by the kernels."""
        return _field.core_field(self.field_size, self.poly or None)


def _power_of_two_m(epsilon: float, d: int, mode: str, f_star: float) -> int:
    """The power of two below or above the real optimum hash range with the smaller
    closed-form loss ([PAN] Eq. 20 worst case over ``[0, f*]`` for ``"mse"``, Eq. 22 for ``"l"``)."""
    real = _theory.ocms_optimal_m(epsilon, mode, d, f_star)
    low = 1 << max(1, int(math.floor(math.log2(real))))
    candidates = (low, 2 * low)

    def loss(m: int) -> float:
        if mode == "l":
            return float(_theory.ocms_l2(epsilon, d, 1, m))
        return float(max(_theory.ocms_variance(epsilon, m, 1, 0.0), _theory.ocms_variance(epsilon, m, 1, f_star)))
    return min(candidates, key=loss)


# --- reports ----------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class OCMSReports(_base.Reports):
    """A batch of OCMS+RR reports ``(z, a0, a1)``: the perturbed hash value in ``[0, m)``
    and the user's hash function (field elements). Columns are converted to uint64 without
    silent changes (see :func:`uint64_column`); they are checked against the parameters by
    :meth:`OCMSServer.update`.

    Raises:
        ReportError: a column is not integral, negative, ``>= 2^64``, or lengths differ.
    """

    protocol: ClassVar[str] = "ocms"

    column_types: ClassVar = {"z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}

    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        for name in ("z", "a0", "a1"):
            setattr(self, name, uint64_column(getattr(self, name), name, ReportError))
        self._check_lengths()

    def validate(self, params: OCMSParams) -> None:
        """Raise ReportError unless every report fits ``params`` (``z < m``, ``a0, a1 <
        field_size``)."""
        check_below(self.z, params.m, "z", "hash values in", ReportError)
        check_below(self.a0, params.field_size, "a0", "field elements in", ReportError)
        check_below(self.a1, params.field_size, "a1", "field elements in", ReportError)


# --- client -----------------------------------------------------------------------------

class OCMSClient(_base.ClientBase):
    """The user side of OCMS+RR ([PAN] Algorithm 1, ``Client``).

    Args:
        params: the protocol parameters.
        rng: ``None`` (default): fresh keys from the operating system for every batch, the
            only setting for real clients. An int, ``SeedSequence`` or ``Generator`` makes
            the output reproducible: **for simulation only** (anyone with the seed can undo
            the perturbation).
        threads: threads for large batches (0 = default); the output does not depend on it.
    """

    params: OCMSParams

    def perturb(self, values: Any) -> OCMSReports:
        """OCMSReports for ``values`` (an int or an integer array in ``[0, d)``), one per value.

        Each report draws its own ``a0, a1`` (uniform on the field, or on ``[1, pH-1]`` with
        ``a_range="nonzero"``), hashes ``y = ((a0 + a1 x) in F) mod m`` and applies k-ary RR
        on ``[m]``: keep ``y`` with probability ``e/(e+m-1)``, else a uniform other symbol.

        Raises:
            ParameterError: a value is not an integer in ``[0, d)``.
        """
        params = self.params
        x = check_values(values, params.d)
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
        return OCMSReports(z=z, a0=a0, a1=a1)


# --- server -----------------------------------------------------------------------------

def decode_matches(params: OCMSParams, matches: Any, n: int, clip: bool = False) -> np.ndarray:
    """Frequency estimates from match counts ([PAN] Algorithm 2, corrected decoding):
    ``fhat = m'/(m'-1) * ((e+m-1) C/n - 1)/(e-1) - 1/(m'-1)`` where ``C`` is the number of
    reports with ``z_i = h_i(x)`` among ``n``, and ``m'`` is ``params.estimator_m``.

    ``matches`` may be any array shape (e.g. repetitions x candidates in simulations).
    ``clip=True`` clips to ``[0, 1]`` (post-processing; biases the estimates).
    """
    n = int(n)
    if n <= 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    fhat = debias_matches(matches, n, params.epsilon, params.m, params.estimator_m)
    return np.clip(fhat, 0.0, 1.0) if clip else fhat


class OCMSServer(HashedReportsServer):
    """The OCMS+RR aggregator ([PAN] Algorithm 2). See the module docstring for the two
    modes.

    Args:
        params: the protocol parameters (must equal the clients').
        candidates: ``None`` (default) to keep the reports and answer any query later; or
            distinct values in ``[0, d)`` whose match counts are kept instead (then
            :meth:`estimate` answers for these values only). The candidates are part of
            the state: only servers with equal candidates merge.
        threads: threads for counting (0 = default); results do not depend on it.

    Keeping or streaming the reports, merging and :meth:`match_counts` are those of
    :class:`ldpfast.protocols.frequency._hashed_reports.HashedReportsServer` (shared with OLH).
    """

    protocol: ClassVar[str] = "ocms"
    params_type: ClassVar[type] = OCMSParams

    reports_type: ClassVar[type] = OCMSReports
    params: OCMSParams

    def estimate(self, candidates: Any = None, counts: bool = False, *, clip: bool = False) -> np.ndarray:
        """Frequency estimates (float64 fractions) for ``candidates`` ([PAN] Alg. 2 with the
        ``m'`` correction, or plain ``m`` if ``params.use_m_prime`` is False).

        Args:
            candidates: values in ``[0, d)``; ``None`` = the whole dictionary (report-keeping
                mode) or the streamed candidates. A query costs one hash evaluation per
                kept report and candidate (``n d`` for the whole dictionary: 1e11 at
                ``n = 1e6``, ``d = 1e5``); long ones draw a progress line on a terminal's
                stderr (:func:`ldpfast.set_progress`). To pay less: pass the candidates
                you need, stream them (``OCMSServer(params, candidates=...)``) or use
                ``OCMSParams.optimal(..., fast_query=True)`` (the affine decode); see the
                user guide's "What a query costs".
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

    def estimate_counts(self, candidates: Any = None, clip: bool = False) -> np.ndarray:
        """Alias of ``estimate(candidates, counts=True, clip=clip)`` (kept for
        compatibility): estimated numbers of users per candidate."""
        return self.estimate(candidates, counts=True, clip=clip)


def _example() -> Tuple[OCMSParams, np.ndarray]:
    return OCMSParams.optimal(epsilon=2.0, d=300, field="compact"), zipf_values(300)


def _variance(server: OCMSServer, candidates: Any) -> Tuple[Optional[Callable[[Any], Any]], str]:
    p, n = server.params, server.n
    if p.a_range != "full":
        return None, "OCMS with a_range='nonzero' has no closed-form variance"
    return (lambda f: theory().ocms_variance(p, n=n, f=f)), f"{PLUG_IN} (theory.ocms_variance)"


def _channel(server: OCMSServer, candidates: Any, likelihood: str = "composite") -> Any:
    p = server.params
    return match_channel(server, candidates, p.epsilon, p.m, p.estimator_m, likelihood)


def _field_name(params: OCMSParams) -> str:
    if params.field_kind == "binary":
        return f"GF(2^{params.field_size.bit_length() - 1})"
    if params.field_size == PRIME:
        return "F_p, p = 2^64 - 59"
    return f"F_p, p = {params.field_size}"


def _variance_at(p: OCMSParams, n: int) -> Callable[[Any], Any]:
    """``f -> Var(fhat)`` of ``n`` reports under ``p`` ([PAN] Eq. 8/20)."""
    from ...theory import ocms as to

    return lambda f: to.ocms_variance(p, n=n, f=f)


def _compare(epsilon: float, d: int, n: int, f_star: float, modes: Sequence[str] = ("mse", "l"),
             field: str = "paper", **_: Any) -> List[ComparisonRow]:
    from ...theory import ocms as to

    rows = []
    for mode in modes:
        p = OCMSParams.optimal(epsilon=epsilon, d=d, mode=mode, f_star=f_star, field=field)
        real = to.ocms_optimal_m(epsilon, mode, d, f_star)
        rows.append(ComparisonRow("MSE-OCMS+RR" if mode == "mse" else "l-OCMS+RR", p.m, p.communication_bits,
                                  _variance_at(p, n), float(to.ocms_l2(epsilon, d, n, p.m)),
                                  f"real optimum m = {real:.3f}; field {_field_name(p)}", **per_user_hash_cost(),
                                  build=functools.partial(OCMSParams.optimal, epsilon=epsilon, d=d, mode=mode,
                                                          f_star=f_star, field=field)))
    return rows


def _simulations() -> Tuple[Algorithm, Algorithm]:
    from ...experiments import Algorithm
    from ...theory import ocms as to

    def variance(params: Any, data: ValueData, f: np.ndarray) -> np.ndarray:
        return np.asarray(to.ocms_variance(params, n=data.n, f=f))  # Eq. 8/20 for its field and m

    def l2(params: Any, n: int, size: int) -> float:
        return float(to.ocms_l2(params.epsilon, size, n, params.m))  # Eq. 22 with |X| for d
    return (Algorithm("ocms-mse", "MSE-OCMS+RR", "protocols.frequency.ocms",
                      lambda eps, data, gen: OCMSParams.optimal(epsilon=eps, d=data.d, mode="mse", f_star=data.f_star),
                      variance, l2, "OCMS+RR, m minimizing the worst-case MSE for the data's f* (PAN Thm 3.6)"),
            Algorithm("ocms-l", "l-OCMS+RR", "protocols.frequency.ocms",
                      lambda eps, data, gen: OCMSParams.optimal(epsilon=eps, d=data.d, mode="l"),
                      variance, l2, "OCMS+RR, m minimizing l1/l2 (PAN Thm 3.8)"))


_base.register_protocol(_base.Protocol(
    "ocms", OCMSParams, OCMSReports, OCMSServer, OCMSClient, extremes=edges(d=(1, 2**64), m=(2,
                                                                                             2**64)), example=_example,
    # [PAN] 2.4: 2 ceil(log2 pH) + ceil(log2 m).
    wire_fields=lambda p: [WireField("z", bits_for(p.m)), WireField("a0", bits_for(p.field_size)),
                           WireField("a1", bits_for(p.field_size))],
    variance=_variance, default_candidates=lambda server: None if server.keeps_reports else server.candidates,
    compare=_compare, simulations=_simulations, channel=_channel,
    audit=AuditHooks(lambda e, **kw: OCMSParams.optimal(e, 16, **kw),
                     lambda p: olh_plan(p.field, p.m, [0], [1], value_inputs(0, 1),
                                        ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)")),
                     rr_epsilon("m"))))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "ocms", {"Params": OCMSParams, "Client": OCMSClient,
                                                      "Server": OCMSServer, "Reports": OCMSReports})
