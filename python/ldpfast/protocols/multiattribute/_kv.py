"""Pieces shared by the key-value protocols (PCKV-UE and PCKV-GRR, Gu, Li, Cheng, Xiong, Cao,
USENIX Security 2020 [PCKV]): users' key-value sets in CSR form (:func:`as_pairs`), PCKV's
padding-and-sampling with the value discretization (:func:`sample_pairs`, on the set
protocols' padding-and-sampling kernel), the parameters both share (:class:`KVParams`: the
budget split and its composed bound), the aggregator of +1/-1 counts per key with the
estimators and their closed-form variances (:class:`KVServer`, :class:`Rates`), and a
synthetic ratings-like data set (:func:`ratings`).

A user holds a set of (key, value) pairs: distinct keys of ``[0, d)``, values in ``[-1, 1]``.
Out-of-range or NaN values are refused (never clipped): a clipped value would bias the
means silently.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ... import _budget, _core
from ..._base import Aggregator, Params as _ParamsBase
from ..._delta import Delta, _State
from ..._labels import is_labels
from ..._memory import check_allocation
from ..._random import KeySource
from ..._validate import candidate_array, check_epsilon, check_int, check_real, check_threads, rr_threshold
from ...datasets import SetData
from ...errors import DTypeError, FormatError, ParameterError, ReportError
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn

#: Users' key-value sets in CSR form: ``(offsets int64[n+1], keys uint64, values float64)``.
Pairs = Tuple[np.ndarray, np.ndarray, np.ndarray]
#: What :func:`as_pairs` reads: a CSR triple, or one mapping ``{key: value}`` (or sequence of
#: ``(key, value)``) per user.
PairsLike = Union[Pairs, Sequence[Any]]

_TWO64 = 2**64
#: The largest key domain (keys are int64 in the CSR form; the dummy key ``d`` must fit too).
MAX_KEYS = 2**62


def _from_users(users: Sequence[Any]) -> Pairs:
    sizes, keys, values = [], [], []
    for user in users:
        try:
            items = list(user.items()) if isinstance(user, Mapping) else [tuple(pair) for pair in user]
        except TypeError:
            raise ParameterError(f"each user's pairs must be a mapping {{key: value}} or (key, value) pairs, "
                                 f"got {user!r}") from None
        sizes.append(len(items))
        for pair in items:
            if len(pair) != 2:
                raise ParameterError(f"each pair must be (key, value), got {pair!r}")
            keys.append(pair[0])
            values.append(pair[1])
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)
    return offsets, np.asarray(keys), np.asarray(values, dtype=np.float64)


def as_pairs(pairs: PairsLike, d: int, domain: Any = None) -> Pairs:
    """Users' key-value sets as CSR ``(offsets, keys uint64, values float64)``, checked: keys
    integers in ``[0, d)``, distinct within each user; values finite, in ``[-1, 1]``. Keys
    that are labels go through ``domain`` (the parameters' ``label_domain``).

    Raises:
        ParameterError: naming the first offending key or value and its index.
        DTypeError: keys that are not integers.
    """
    if isinstance(pairs, tuple) and len(pairs) == 3 and isinstance(pairs[0], np.ndarray):
        raw_offsets, raw_keys, raw_values = pairs
    else:
        raw_offsets, raw_keys, raw_values = _from_users(list(pairs))
    offsets = np.ascontiguousarray(raw_offsets, dtype=np.int64)
    keys, values = np.asarray(raw_keys), np.asarray(raw_values)
    if is_labels(keys):
        if domain is None:
            raise DTypeError("keys are labels and these parameters have no domain: attach one, e.g. "
                             "params.with_domain(ldpfast.Domain(labels))")
        keys = np.asarray(domain.encode(keys))
    if keys.size and not np.issubdtype(keys.dtype, np.integer):
        raise DTypeError(f"keys must be integers, got dtype {keys.dtype}")
    if values.size and not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)):
        raise DTypeError(f"values must be real numbers, got dtype {values.dtype}")
    if keys.ndim != 1 or values.shape != keys.shape:
        raise ParameterError(f"keys and values must be 1-D of one length, got shapes {keys.shape} and {values.shape}")
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != keys.size \
            or np.any(np.diff(offsets) < 0):
        raise ParameterError("offsets must be non-decreasing, start at 0 and end at len(keys)")
    values = np.ascontiguousarray(values, dtype=np.float64)
    bad_value = ~(np.abs(values) <= 1.0)  # NaN compares False
    if bad_value.any():
        at = int(np.argmax(bad_value))
        raise ParameterError(f"values must be in [-1, 1], got {float(values[at])!r} at index {at}")
    if keys.size:
        bad_key = (keys < 0) | (keys >= d)
        if bad_key.any():
            at = int(np.argmax(bad_key))
            raise ParameterError(f"keys must be in [0, d={d}), got {int(keys[at])} at index {at}")
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    users = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    order = np.lexsort((keys, users))
    repeated = (users[order][1:] == users[order][:-1]) & (keys[order][1:] == keys[order][:-1])
    if repeated.any():
        at = int(order[1:][np.argmax(repeated)])
        raise ParameterError(f"keys must be distinct within a user, got key {int(keys[at])} twice for user "
                             f"{int(users[at])} (index {at})")
    return offsets, keys, values


def sample_pairs(source: KeySource, pairs: Pairs, pad_len: int, d: int, threads: int) -> Tuple[np.ndarray, np.ndarray]:
    """PCKV's padding-and-sampling and discretization, per user: one pair drawn uniformly from
    the set padded with dummies to ``pad_len`` (the set itself when larger), the dummy being
    key ``d`` with value 0; its value ``v`` becomes +1 with probability ``(1 + v)/2``, else
    -1. Returns ``(keys uint64 in [0, d], signs uint64: 1 for +1, 0 for -1)``.

    The draw of the slot runs on the set protocols' padding kernel (ChaCha20, keyed by
    ``source``). The discretization coin uses ``source``'s generator: it is a
    preprocessing of the input, and the perturbation that follows is eps-LDP for every
    (key, sign) outcome, so its predictability costs no privacy."""
    offsets, keys, values = pairs
    positions = np.arange(keys.size, dtype=np.uint64)
    picks = _core.privsketch_padding_sample(source.key(), offsets, positions, pad_len, keys.size, threads)
    real = picks < keys.size
    sampled = np.full(picks.size, d, dtype=np.uint64)
    sampled[real] = keys[picks[real]]
    value = np.zeros(picks.size, dtype=np.float64)
    value[real] = values[picks[real]]
    coin = source.generator().random(picks.size)
    return sampled, (coin < (1.0 + value) / 2.0).astype(np.uint64)


def key_budget(epsilon: float, value_epsilon: float) -> float:
    """``eps1 = eps - log(2 e^eps2/(e^eps2 + 1))`` rounded down: the key budget whose
    composition with the value budget ``eps2`` is exactly ``eps`` ([PCKV] Theorem 2 / 3:
    the pair is ``max(eps2, eps1 + log(2 e^eps2/(e^eps2 + 1)))``-LDP, below ``eps1 + eps2``)."""
    with decimal.localcontext() as ctx:
        ctx.prec = _budget.PRECISION
        e2 = decimal.Decimal(value_epsilon).exp()
        exact = decimal.Decimal(epsilon) - (2 * e2 / (e2 + 1)).ln()
    out = float(exact)
    while decimal.Decimal(out) > exact:
        out = math.nextafter(out, 0.0)
    return out


def composed_epsilon(value_threshold: int, keep_over_other: Tuple[int, int]) -> float:
    """The exact epsilon of a PCKV client from its integer thresholds: ``max(log(p/(1-p)),
    log(2 p a(1-b)/(b(1-a))))`` (UE) or ``log(2 p a/b)`` (GRR), with the value flip
    probability ``1 - p = t/2^64`` and the key part's ratio ``keep_over_other`` given as
    ``(numerator, denominator)`` integers; rounded up to a double."""
    with decimal.localcontext() as ctx:
        ctx.prec = _budget.PRECISION
        keep = decimal.Decimal(_TWO64 - value_threshold)
        value_loss = (keep / decimal.Decimal(value_threshold)).ln()
        num, den = keep_over_other
        pair_loss = (2 * keep * decimal.Decimal(num) / (decimal.Decimal(_TWO64) * decimal.Decimal(den))).ln()
    return _budget.effective(max(value_loss, pair_loss))


@dataclasses.dataclass(frozen=True)
class Rates:
    """A PCKV client's exact probabilities: ``a`` (the sampled key is reported), ``b`` (any
    one other key is), ``p`` (the sampled key's sign is kept), ``pad_len`` (``l``; PrivKV,
    which samples its key from the whole domain: ``d``) and ``gain`` (``E[sign]/v`` of a
    report on the sampled key, default ``a (2p - 1)``).

    For a key held by a share ``f`` of ``n`` users, none holding more than ``pad_len`` pairs,
    each report supports the key (``up`` or ``down``) with probability ``pi1 = a/l + (1 - 1/l) b``
    from a holder and ``b`` from the others, independently, so
    ``fhat = l ((U + D)/n - b)/(a - b)`` is unbiased with variance
    ``l^2 [f pi1 (1 - pi1) + (1 - f) b (1 - b)] / (n (a - b)^2)``, and
    ``shat = l (U - D)/(n g)`` (``g``: the gain) is unbiased for ``s = f m`` (``m``: the
    holders' mean value), with variance ``l^2 [f pi1 + (1 - f) b - (g/l)^2 q2] / (n g^2)``
    (``q2``: the holders' mean squared value times ``f``)."""

    a: float
    b: float
    p: float
    pad_len: int
    gain: Optional[float] = None

    @property
    def value_gain(self) -> float:
        return self.a * (2 * self.p - 1) if self.gain is None else self.gain

    @property
    def pi1(self) -> float:
        return self.a / self.pad_len + (1.0 - 1.0 / self.pad_len) * self.b

    def frequency_variance(self, n: int, f: Any) -> Any:
        b, pi1 = self.b, self.pi1
        return self.pad_len**2 * (f * pi1 * (1 - pi1) + (1 - f) * b * (1 - b)) / (n * (self.a - self.b) ** 2)

    def total_variance(self, n: int, f: Any, q2: Any) -> Any:
        gain = self.value_gain
        return self.pad_len**2 * (f * self.pi1 + (1 - f) * self.b - (gain / self.pad_len) ** 2 * q2) / (n * gain**2)

    def mean_variance(self, n: int, f: Any, m: Any, q2: Any) -> Any:
        """The delta-method variance of ``mhat = shat/fhat`` (first order in ``1/n``):
        ``[Var shat - 2 m Cov(shat, fhat) + m^2 Var fhat] / f^2`` with
        ``Cov = l (1 - pi1) f m / (n (a - b))``."""
        cov = self.pad_len * (1 - self.pi1) * f * m / (n * (self.a - self.b))
        return (self.total_variance(n, f, q2) - 2 * m * cov + m**2 * self.frequency_variance(n, f)) / f**2


@dataclasses.dataclass(frozen=True)
class KVParams(_ParamsBase):
    """The parameters of a PCKV protocol.

    Attributes:
        epsilon: the whole pair's budget: the client is eps-LDP for every user's set.
        d: the keys ``[0, d)``.
        pad_len: the padding length ``l`` (the frequencies of keys held by users with more
            than ``l`` pairs are underestimated, by the share of them beyond ``l``).
        value_epsilon: ``eps2``, the budget of the value's randomized response, in
            ``(0, epsilon]`` (None: ``epsilon``, the paper's allocation for PCKV-UE). The key
            gets ``eps1 = eps - log(2 e^eps2/(e^eps2 + 1))`` (:func:`key_budget`), so the pair
            composes to ``eps`` exactly, less than ``eps1 + eps2``.
    """

    epsilon: float
    d: int
    pad_len: int
    value_epsilon: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 1, MAX_KEYS))
        object.__setattr__(self, "pad_len", check_int("pad_len", self.pad_len, 1, 2**32))
        if self.value_epsilon is not None:
            object.__setattr__(self, "value_epsilon", check_real("value_epsilon", self.value_epsilon, 0.0,
                                                                 self.epsilon, high_closed=True))
        _ = self.key_threshold, self.value_threshold  # refuses budgets the 64-bit samplers cannot represent

    @property
    def value_budget(self) -> float:
        """``eps2``."""
        return self.epsilon if self.value_epsilon is None else float(self.value_epsilon)

    @property
    def key_budget(self) -> float:
        """``eps1`` (:func:`key_budget`)."""
        return key_budget(self.epsilon, self.value_budget)

    @property
    def value_threshold(self) -> int:
        """The 64-bit flip threshold of the sampled key's sign (binary RR of ``eps2``)."""
        return rr_threshold(self.value_budget, 2, "value_epsilon")

    @property
    def key_threshold(self) -> int:
        raise NotImplementedError

    @property
    def rates(self) -> Rates:
        raise NotImplementedError

    @property
    def effective_epsilon(self) -> float:
        raise NotImplementedError


class KVServer(Aggregator):
    """A PCKV collector: per key, the reports supporting it with sign +1 (``up``) and -1
    (``down``), and the number of reports. Frequencies (:meth:`estimate`), value totals
    (:meth:`totals`) and means (:meth:`means`) by [PCKV]'s estimators (:class:`Rates`)."""

    params: Any  # a KVParams, or PrivKV's (d and rates are read)

    def __init__(self, params: Any, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        d = params.d
        self._st = _State(reports=np.zeros(1, dtype=np.uint64), up=np.zeros(d, dtype=np.uint64),
                          down=np.zeros(d, dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        d = params.d
        return {"reports": ((1,), "uint64"), "up": ((d,), "uint64"), "down": ((d,), "uint64")}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({name: np.array(state[name], dtype=np.uint64) for name in ("reports", "up", "down")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n = float(state["reports"][0])
        if n >= 2.0**63:
            raise FormatError("the stored report count is 2^63 or more")
        if np.any(state["up"].astype(np.float64) + state["down"] > n):
            raise FormatError(f"stored per-key counts exceed the number of reports n = {int(n)}")

    def _added(self, n_reports: int, up: np.ndarray, down: np.ndarray) -> Delta:
        return (self._delta().add_dense("reports", np.array([n_reports], dtype=np.uint64), "adding the batch")
                .add_dense("up", up.astype(np.uint64), "adding the batch")
                .add_dense("down", down.astype(np.uint64), "adding the batch"))

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return int(self._st["reports"][0])

    def _counts(self, candidates: Optional[ArrayLike]) -> Tuple[np.ndarray, np.ndarray]:
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        self._check_query(candidates, 48, self.params.d, f"a {self.protocol!r} query")
        index = slice(None) if candidates is None else candidate_array(candidates, self.params.d)
        return (self._st["up"][index].astype(np.float64), self._st["down"][index].astype(np.float64))

    def estimate(self, candidates: Optional[ArrayLike] = None, counts: bool = False) -> np.ndarray:
        """Key frequencies ``fhat = l ((U + D)/n - b)/(a - b)`` (counts with ``counts=True``)
        of ``candidates`` (default every key): unbiased when no user holds more than
        ``pad_len`` pairs."""
        up, down = self._counts(candidates)
        r, n = self.params.rates, self.n
        est = r.pad_len * ((up + down) / n - r.b) / (r.a - r.b)
        return np.asarray(est * n if counts else est)

    def totals(self, candidates: Optional[ArrayLike] = None) -> np.ndarray:
        """Value totals per user ``shat = l (U - D)/(n g)`` (``g = a (2p - 1)``): unbiased for
        ``f m`` (the share of users holding the key times their mean value; same condition)."""
        up, down = self._counts(candidates)
        r = self.params.rates
        return np.asarray(r.pad_len * (up - down) / (self.n * r.value_gain))

    def means(self, candidates: Optional[ArrayLike] = None) -> np.ndarray:
        """Mean values ``mhat = shat/fhat`` clipped to ``[-1, 1]`` ([PCKV]'s mean estimator:
        the estimated +1 and -1 counts of the holders, differenced over their sum); NaN where
        ``fhat <= 0`` (no evidence that anyone holds the key). A ratio: consistent, biased by
        ``O(1/(n f))``."""
        f, s = self.estimate(candidates), self.totals(candidates)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.clip(s / f, -1.0, 1.0)
        return np.asarray(np.where(f > 0, mean, np.nan))


def frequency_model(server: KVServer, candidates: np.ndarray) -> PlugIn:
    """``Protocol.variance`` of the key-value protocols: :meth:`Rates.frequency_variance`."""
    rates, n = server.params.rates, server.n
    return PlugIn(lambda f: rates.frequency_variance(n, f), len(candidates),
                  f"{PLUG_IN} (Rates.frequency_variance: exact when no user holds more than pad_len pairs)")


def ratings(d: int, n: int, max_pairs: int = 4, zipf: float = 1.1, seed: int = 0) -> Pairs:
    """A synthetic ratings-like key-value set (seeded): ``n`` users rating ``0..max_pairs``
    distinct items of ``[0, d)`` drawn by Zipf(``zipf``) popularity; item ``k``'s ratings are
    ``clip(mu_k + N(0, 0.3^2), -1, 1)`` with ``mu_k = 0.8 cos(k)`` (every mean differs).
    Returns the CSR triple of :func:`as_pairs`."""
    d = check_int("d", d, 1, MAX_KEYS)
    n = check_int("n", n, 0)
    max_pairs = check_int("max_pairs", max_pairs, 0, d)
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, d + 1) ** zipf
    weights /= weights.sum()
    sizes = gen.integers(0, max_pairs + 1, size=n)
    check_allocation(24 * int(sizes.sum()), f"{int(sizes.sum())} key-value pairs")
    per_user = [gen.choice(d, size=int(s), replace=False, p=weights) for s in sizes]
    keys = np.concatenate(per_user).astype(np.uint64) if per_user else np.zeros(0, dtype=np.uint64)
    values = np.clip(0.8 * np.cos(keys.astype(np.float64)) + gen.normal(0.0, 0.3, keys.size), -1.0, 1.0)
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), keys, values


def rated(sets: SetData, gen: np.random.Generator) -> Pairs:
    """Key-value pairs from a set-valued data set (``ldpfast simulate``'s set data): each
    user's items become keys with the seeded ratings of :func:`ratings`
    (``clip(0.8 cos(k) + N(0, 0.3^2), -1, 1)``)."""
    keys = np.asarray(sets.items, dtype=np.uint64)
    values = np.clip(0.8 * np.cos(keys.astype(np.float64)) + gen.normal(0.0, 0.3, keys.size), -1.0, 1.0)
    return np.asarray(sets.offsets, dtype=np.int64), keys, values


def padding_length(sets: SetData) -> int:
    """The 90th percentile (nearest rank) of the set sizes, at least 1: the padding PS-OLH's
    simulations use too."""
    ordered = np.sort(sets.sizes())
    return max(1, int(ordered[max(1, int(math.ceil(0.9 * ordered.size))) - 1])) if ordered.size else 1


def set_simulation(pid: str, label: str, summary: str, make: Any) -> Any:
    """``Protocol.simulations``: the :class:`~ldpfast.experiments.SetAlgorithm` running
    ``pid`` on set data rated by :func:`rated`, with parameters ``make(epsilon, sets)``; its
    closed-form MSE is the mean frequency variance when no set exceeds the padding."""
    from ...experiments import SetAlgorithm
    from ..._base import protocol

    def run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
        proto, params = protocol(pid), make(eps, sets)
        client = proto.client(params, rng=int(gen.integers(0, 2**63)))
        return np.asarray(proto.aggregator(params).update(client.perturb(rated(sets, gen))).estimate())

    def theory_mse(eps: float, sets: SetData) -> Optional[float]:
        params = make(eps, sets)
        if sets.n == 0 or int(sets.sizes().max(initial=0)) > params.rates.pad_len:
            return None
        return float(np.mean(params.rates.frequency_variance(sets.n, sets.frequencies())))

    return lambda: (SetAlgorithm(pid, label, "protocols.multiattribute." + pid.split("-")[0], run, summary,
                                 theory_mse=theory_mse),)


def truth(pairs: Pairs, d: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key: the share ``f`` of users holding it, the value total per user ``s = f m`` and
    the mean squared value per user ``q2`` (the closed forms' inputs)."""
    offsets, keys, values = pairs
    n = max(offsets.size - 1, 1)
    index = keys.astype(np.int64)
    return (np.bincount(index, minlength=d) / n, np.bincount(index, values, minlength=d) / n,
            np.bincount(index, values**2, minlength=d) / n)

