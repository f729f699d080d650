"""What the record protocols share: the records themselves (``int64[n, A]``, attribute ``j`` in
``[0, domains[j])``), their names, and the per-attribute frequency oracle.

An oracle (:class:`Oracle`) is a registered single-value protocol (``grr``, ``oue`` or ``olh``)
reached through the registry: its Params, its client (so a record protocol perturbs exactly as
the oracle does) and its report read back as "support" counts: ``C(v)``, the reports whose
value, bit or hash supports ``v``. Every oracle here supports its user's value with
probability ``p`` and any other given value with probability ``q`` (the samplers' exact
values; OLH's ``q = 1/g`` over the draw of the user's hash), so ``(C(v)/n - q)/(p - q)``
estimates ``v``'s frequency with variance ``[f p(1-p) + (1-f) q(1-q)] / (n (p-q)^2)``
(:func:`support_variance`). A report is stored as ``width`` uint64 words per attribute: the
GRR symbol; OUE's bit row in little-endian words; OLH's ``(z, a0, a1)``.
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ... import _base, _core
from ..._budget import PRECISION, rr_loss
from ..._random import KeySource
from ..._validate import check_choice, check_epsilon, check_int
from ...audit import effective_epsilon
from ...errors import DTypeError, ParameterError, ReportError
from ...kernels.field import PRIME

__all__ = ["ORACLES", "Oracle", "RecordParams", "check_records", "projected_variance", "support_variance",
           "word_bits"]

#: The frequency oracles a record protocol runs per attribute.
ORACLES = ("grr", "oue", "olh")
#: Most attributes a record may have, and the largest attribute domain.
MAX_ATTRIBUTES = 64
MAX_DOMAIN = 2**20
_TWO64 = 2**64


class Oracle:
    """The frequency oracle ``name`` at budget ``epsilon`` over one attribute's ``[0, k)``."""

    def __init__(self, name: str, epsilon: float, k: int):
        self.name, self.k = name, k
        proto = _base.protocol(name)
        self.params: Any = proto.params(epsilon=epsilon, d=k)
        self._client_type = proto.client
        if name == "grr":
            flip = self.params.flip_threshold / _TWO64
            self.p, self.q, self.width = 1.0 - flip, flip / (k - 1), 1
        elif name == "oue":
            self.p, self.q, self.width = self.params.p, self.params.q, (k + 63) // 64
        else:
            self.p, self.q, self.width = 1.0 - self.params.flip_threshold / _TWO64, 1.0 / self.params.g, 3

    @property
    def effective_epsilon(self) -> float:
        """The epsilon of the oracle's samplers (:func:`ldpfast.audit.effective_epsilon`)."""
        return effective_epsilon(self.params)

    def exact_loss(self) -> decimal.Decimal:
        """The exact privacy loss of the oracle's samplers (90 digits): RR over ``k`` (GRR)
        or ``g`` (OLH) symbols; OUE's two bit probabilities ``ln(p(1-q)/(q(1-p)))``."""
        if self.name == "grr":
            return rr_loss(self.params.flip_threshold, self.k)
        if self.name == "olh":
            return rr_loss(self.params.flip_threshold, self.params.g)
        one, zero = self.params.thresholds()
        with decimal.localcontext() as ctx:
            ctx.prec = PRECISION
            return (decimal.Decimal(one * (_TWO64 - zero)) / decimal.Decimal(zero * (_TWO64 - one))).ln()

    def client(self, keys: KeySource) -> Any:
        """The oracle's client drawing from ``keys`` (OS entropy unless seeded)."""
        return self._client_type(self.params, rng=keys.generator() if keys.seeded else None)

    def perturb(self, client: Any, values: np.ndarray) -> np.ndarray:
        """The oracle's reports of ``values`` (uint64, in ``[0, k)``) as ``uint64[n, width]``."""
        reports = client.perturb(values)
        if self.name == "grr":
            return np.ascontiguousarray(reports.y.reshape(-1, 1))
        if self.name == "olh":
            return np.ascontiguousarray(np.stack([reports.z, reports.a0, reports.a1], axis=1))
        rows = np.zeros((len(values), 8 * self.width), dtype=np.uint8)
        rows[:, :reports.bits.shape[1]] = reports.bits
        return rows.view("<u8").astype(np.uint64)

    def check(self, block: np.ndarray, what: str, rows: Optional[np.ndarray] = None) -> None:
        """ReportError unless ``block`` (``uint64[n, width]``) holds reports of this oracle;
        ``rows``: the batch's index of each row of ``block`` (default: the row)."""
        if not block.size:
            return
        if self.name == "grr":
            bad = block[:, 0] >= np.uint64(self.k)
            rule = f"a symbol in [0, {self.k})"
        elif self.name == "olh":
            bad = (block[:, 0] >= np.uint64(self.params.g)) | (block[:, 1:] >= np.uint64(PRIME)).any(axis=1)
            rule = f"(z, a0, a1) with z < g={self.params.g} and a0, a1 < {PRIME}"
        else:
            spare = 64 * self.width - self.k
            high = np.uint64(((1 << spare) - 1) << (64 - spare)) if spare else np.uint64(0)
            bad = (block[:, -1] & high) != 0
            rule = f"a row of {self.k} bits (the bits past {self.k} zero)"
        if bool(bad.any()):
            row = int(np.argmax(bad))
            where = row if rows is None else int(rows[row])
            raise ReportError(f"{what} must be {rule}, got {block[row].tolist()} at report {where}")

    def support(self, block: np.ndarray) -> np.ndarray:
        """``C(v)`` for ``v`` in ``[0, k)``: the reports of ``block`` supporting ``v`` (uint64)."""
        n = block.shape[0]
        if self.name == "grr":
            return np.bincount(block[:, 0].astype(np.intp), minlength=self.k).astype(np.uint64)
        if self.name == "oue":
            counts = np.zeros(self.k, dtype=np.uint64)
            for lo in range(0, n, 1 << 14):
                chunk = np.ascontiguousarray(block[lo:lo + (1 << 14)]).astype("<u8").view(np.uint8)
                bits = np.unpackbits(chunk, axis=1, bitorder="little")[:, :self.k]
                counts += bits.sum(axis=0, dtype=np.uint64)
            return counts
        z, a0, a1 = (np.ascontiguousarray(block[:, i]) for i in range(3))
        out = np.zeros(self.k, dtype=np.uint64)
        step = max(1, (1 << 20) // self.k)             # users per chunk: about 2^20 (user, value) pairs
        values = np.arange(self.k, dtype=np.uint64)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            hits = hash_matches(self.params.g, np.repeat(a0[lo:hi], self.k), np.repeat(a1[lo:hi], self.k),
                                np.tile(values, hi - lo), np.repeat(z[lo:hi], self.k))
            out += hits.reshape(hi - lo, self.k).sum(axis=0, dtype=np.uint64)
        return out

    def debias(self, support: np.ndarray, n: Any) -> np.ndarray:
        """``(C/n - q)/(p - q)``."""
        return np.asarray((np.asarray(support, dtype=np.float64) / n - self.q) / (self.p - self.q))

    def variance(self, n: Any, f: Any) -> np.ndarray:
        return support_variance(self.p, self.q, n, f)

    def wire_bits(self) -> int:
        """Bits of one word of this oracle's report on the wire."""
        if self.name == "grr":
            return _base.bits_for(self.k)
        return 64 if self.name == "oue" else _base.bits_for(PRIME)


def support_variance(p: Any, q: Any, n: Any, f: Any) -> np.ndarray:
    """``Var[(C/n - q)/(p - q)] = [f p(1-p) + (1-f) q(1-q)] / (n (p-q)^2)`` for ``n`` users of
    whom a share ``f`` holds the value (fixed data: each user's support is one Bernoulli)."""
    f = np.asarray(f, dtype=np.float64)
    return np.asarray((f * p * (1 - p) + (1 - f) * q * (1 - q)) / (np.asarray(n, dtype=np.float64) * (p - q) ** 2))


def projected_variance(oracle: Oracle, cells: Any, n: Any, f: Any) -> np.ndarray:
    """``Var`` of the sum of ``cells`` oracle estimates (a marginal cell projected from a
    finer table) at its true share ``f``, over ``n`` users: a user's support count of those
    cells has variance ``V1`` when it holds one of them and ``V0`` otherwise, and the sum's
    estimator is ``(C/n - cells q)/(p - q)``. GRR (one symbol): ``V1 = P1(1-P1)``,
    ``P1 = p + (cells-1) q``; ``V0 = P0(1-P0)``, ``P0 = cells q``. OUE (independent bits):
    ``V1 = p(1-p) + (cells-1) q(1-q)``, ``V0 = cells q(1-q)``. OLH: as OUE, which treats the
    user's hash values of different cells as independent (a fully random hash; the
    pairwise-independent hash used makes them only pairwise independent, so this is an
    approximation)."""
    p, q = oracle.p, oracle.q
    s = np.asarray(cells, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    if oracle.name == "grr":
        one, zero = p + (s - 1) * q, s * q
        v1, v0 = one * (1 - one), zero * (1 - zero)
    else:
        v1, v0 = p * (1 - p) + (s - 1) * q * (1 - q), s * q * (1 - q)
    return np.asarray((f * v1 + (1 - f) * v0) / (np.asarray(n, dtype=np.float64) * (p - q) ** 2))


def word_bits(oracles: Sequence[Oracle]) -> int:
    """Bits per report word on the wire: enough for every attribute's words."""
    return max(o.wire_bits() for o in oracles)


@dataclasses.dataclass(frozen=True)
class RecordParams(_base.Params):
    """Parameters of a protocol over records of ``len(domains)`` categorical attributes.

    Attributes:
        epsilon: the budget of a user's whole record (how each protocol spends it: its docs).
        domains: attribute ``j`` takes values in ``[0, domains[j])``; 1 to 64 attributes,
            each domain in ``[2, 2^20]``.
        oracle: the per-attribute frequency oracle, one of :data:`ORACLES`.
        names: the attribute names (distinct, non-empty); default ``a0, a1, ...``.
    """

    protocol: ClassVar[str] = ""
    epsilon: float
    domains: Tuple[int, ...]
    oracle: str = "grr"
    names: Optional[Tuple[str, ...]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        domains = self.domains
        if not isinstance(domains, (tuple, list)) or not 1 <= len(domains) <= MAX_ATTRIBUTES:
            raise ParameterError(f"domains must be a tuple of 1 to {MAX_ATTRIBUTES} attribute sizes, got {domains!r}")
        object.__setattr__(self, "domains", tuple(check_int(f"domains[{j}]", k, 2, MAX_DOMAIN)
                                                  for j, k in enumerate(domains)))
        object.__setattr__(self, "oracle", check_choice("oracle", self.oracle, ORACLES))
        if self.names is not None:
            names = self.names
            if (not isinstance(names, (tuple, list)) or len(names) != len(self.domains)
                    or not all(isinstance(s, str) and s for s in names) or len(set(names)) != len(names)):
                raise ParameterError(f"names must be {len(self.domains)} distinct non-empty strings (one per "
                                     f"attribute), got {names!r}")
            object.__setattr__(self, "names", tuple(names))
        if type(self).__post_init__ is RecordParams.__post_init__:
            self._check_units()

    def _check_units(self) -> None:
        """Build every unit's oracle (ParameterError naming the unit when one is refused).
        Subclasses call it at the end of ``__post_init__``, once their own fields are set."""
        for name, budget, k in zip(self.unit_names, self.oracle_budgets(), self.unit_domains()):
            if k > MAX_DOMAIN:
                raise ParameterError(f"{name!r} has {k} cells, more than the {MAX_DOMAIN} an oracle takes")
            try:
                Oracle(self.oracle, budget, k)
            except ParameterError as exc:
                raise ParameterError(f"epsilon={self.epsilon!r} leaves {name!r} a budget its {self.oracle} oracle "
                                     f"refuses: {exc}") from None

    def oracle_budgets(self) -> List[float]:
        """The budget of each unit's oracle."""
        return [self.epsilon] * len(self.unit_domains())

    def unit_domains(self) -> List[int]:
        """The domain of each unit the oracles report (default: one unit per attribute)."""
        return list(self.domains)

    @property
    def unit_names(self) -> Tuple[str, ...]:
        """Each unit's name, in errors and tables."""
        return self.attribute_names

    def unit_values(self, records: np.ndarray) -> np.ndarray:
        """Each record's value of each unit, ``int64[n, units]`` (default: the attributes)."""
        return records

    @property
    def attribute_names(self) -> Tuple[str, ...]:
        return self.names if self.names is not None else tuple(f"a{j}" for j in range(len(self.domains)))

    @property
    def d(self) -> int:
        """The (unit, value) cells of the default estimate: the units' domains summed."""
        return int(sum(self.unit_domains()))

    @property
    def offsets(self) -> np.ndarray:
        """Where each unit's values start among the ``d`` cells."""
        return np.concatenate(([0], np.cumsum(self.unit_domains()))).astype(np.int64)

    def oracles(self) -> List[Oracle]:
        """Each unit's oracle (built once per parameters: their thresholds take exact arithmetic)."""
        return list(_oracles_of(self))

    def with_domain(self, domain: Any) -> "RecordParams":
        """Refused unless None: a record holds one integer code per attribute, and a label
        domain maps one value; label a marginal's cells with ``marginal(..., labels=...)``."""
        if domain is not None:
            raise ParameterError(f"{type(self).__name__} takes integer codes per attribute, not a label domain "
                                 f"(got {domain!r}); label marginal tables with marginal(..., labels={{name: labels}})")
        return super().with_domain(None)

    def attribute(self, name: Any) -> int:
        """The index of attribute ``name`` (a name, or an index)."""
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool) and 0 <= name < len(self.domains):
            return int(name)
        if isinstance(name, str) and name in self.attribute_names:
            return self.attribute_names.index(name)
        raise ParameterError(f"attribute must be one of {list(self.attribute_names)} (or an index below "
                             f"{len(self.domains)}), got {name!r}")


@functools.lru_cache(maxsize=256)
def _oracles_of(params: RecordParams) -> Tuple[Oracle, ...]:
    return tuple(Oracle(params.oracle, budget, k) for budget, k in zip(params.oracle_budgets(), params.unit_domains()))


def check_records(records: Any, params: RecordParams) -> np.ndarray:
    """Client records as ``int64[n, A]``: a 2-D integer array (one column per attribute, in
    order) or a mapping of attribute name to column (a dict, a pandas DataFrame). A missing or
    extra attribute, or a value outside its attribute's domain, raises ParameterError naming
    the attribute and the value."""
    names = params.attribute_names
    if isinstance(records, Mapping) or hasattr(records, "columns") and not isinstance(records, np.ndarray):
        given = [str(c) for c in (records.keys() if isinstance(records, Mapping) else records.columns)]
        missing = [a for a in names if a not in given]
        extra = [a for a in given if a not in names]
        if missing or extra:
            raise ParameterError(f"records must have the attributes {list(names)}: missing {missing}, "
                                 f"unknown {extra}")
        records = np.column_stack([np.asarray(records[a]) for a in names]) if len(records[names[0]]) else \
            np.zeros((0, len(names)), dtype=np.int64)
    arr = np.asarray(records)
    if arr.ndim != 2 or arr.shape[1] != len(names):
        width = arr.shape[1] if arr.ndim == 2 else None
        raise ParameterError(f"records must be a 2-D array with one column per attribute {list(names)} "
                             f"({len(names)} columns), got shape {arr.shape}"
                             + (f": {width - len(names)} extra" if width and width > len(names) else ""))
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"records must be integers, got dtype {arr.dtype}")
    for j, (name, k) in enumerate(zip(names, params.domains)):
        column = arr[:, j]
        bad = (column < 0) | (column >= k) if arr.dtype.kind == "i" else column >= np.uint64(k)
        if bool(bad.any()):
            row = int(np.argmax(bad))
            raise ParameterError(f"attribute {name!r} must be in [0, {k}), got {int(column[row])} at record {row}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def record_audit_plan(params: RecordParams, one_attribute: bool) -> Any:
    """Records ``(0, ..., 0)`` and ``(1, ..., 1)``: every attribute differs, so the audit
    measures the whole record's loss. Events: the report supports the first record's value
    and not the second's in every attribute it reports (``one_attribute``: in the attribute
    it reports), and the reverse."""
    from ...audit import Plan

    oracles = params.oracles()

    def make(i: int, n: int) -> np.ndarray:
        return np.full((n, len(params.domains)), i, dtype=np.int64)

    units = [params.unit_values(make(i, 1))[0] for i in (0, 1)]   # each unit's value of x0 and x1

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        y = reports.y
        favours = [np.ones(len(y), dtype=bool), np.ones(len(y), dtype=bool)]
        for j, oracle in enumerate(oracles):
            if one_attribute:
                rows = reports.group == j
                block = y[rows][:, :oracle.width]
            else:
                rows = slice(None)
                start = sum(o.width for o in oracles[:j])
                block = y[:, start:start + oracle.width]
            s0, s1 = supports(oracle, block, int(units[0][j])), supports(oracle, block, int(units[1][j]))
            favours[0][rows] &= s0 & ~s1
            favours[1][rows] &= s1 & ~s0
        return favours[0], favours[1]
    scope = "the reported unit" if one_attribute else "every unit"
    return Plan(make, events, (f"{scope} supports x0 and not x1", f"{scope} supports x1 and not x0"))


def supports(oracle: Oracle, block: np.ndarray, v: int) -> np.ndarray:
    """Which reports of ``block`` support the value ``v``."""
    if oracle.name == "grr":
        return np.asarray(block[:, 0] == np.uint64(v))
    if oracle.name == "oue":
        return np.asarray(((block[:, v // 64] >> np.uint64(v % 64)) & np.uint64(1)) == 1)
    n = len(block)
    return hash_matches(oracle.params.g, np.ascontiguousarray(block[:, 1]), np.ascontiguousarray(block[:, 2]),
                        np.full(n, v, dtype=np.uint64), block[:, 0])


def hash_matches(g: int, a0: np.ndarray, a1: np.ndarray, x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """OLH: whether each user's hash ``((a0 + a1 x) mod PRIME) mod g`` of ``x`` is its report ``z``."""
    return np.asarray(_core.ocms_hash(_core.Field.prime(PRIME), a0, a1, x, g) == z)


def record_inputs(domains: Sequence[int], n: int = 2000, seed: int = 5) -> np.ndarray:
    """Correlated example records: a latent class per user shifts every attribute's skewed
    distribution, so attributes are dependent (marginals differ from products of margins)."""
    rng = np.random.default_rng(seed)
    latent = rng.integers(0, 3, size=n)
    columns = [(np.minimum(rng.geometric(0.35, size=n) - 1, k - 1) + latent * (k // 3)) % k for k in domains]
    return np.stack(columns, axis=1).astype(np.int64)


def state_layout(params: RecordParams, extra: Dict[str, Tuple[Tuple[int, ...], str]]
                 ) -> Dict[str, Tuple[Tuple[int, ...], str]]:
    """The support counts of every (unit, value) cell and the report count, and ``extra``."""
    return {"counts": ((params.d,), "uint64"), "n": ((1,), "uint64"), **extra}
