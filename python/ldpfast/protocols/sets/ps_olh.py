"""PS-OLH: padding and sampling (PSFO, Wang, Li, Jha S&P 2018) + OLH, the set baseline
[PS] (section 4) compares PrivSketch with (R2 ``ps_olh_*``); eps-LDP with the default
``amplify=False`` (``amplify=True`` is **not** eps-LDP, see :class:`PSOLHParams`). OLH is
the CMS+RR estimator with ``m = g`` and per-user pairwise-independent hashes over the prime
field ([PAN] section 4.4), on the OCMS kernels.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ... import _core
from ..._base import ClientBase, Params as _ParamsBase, Protocol
from ..._base import register_protocol
from ..._random import RngLike
from ...datasets import SetData
from ...errors import ParameterError
from ..._budget import amplified
from ..._validate import check_bool, check_epsilon, check_int, rr_threshold
from ...kernels.field import PRIME
from ...theory.hadamard import olh_g
from .._local_hashing import (OLHReportColumns, check_field_size, check_olh_reports, debias_matches, default_g,
                             olh_perturb)
from ._sets import MAX_SET_DOMAIN, TrackedServer, as_sets, warn_not_ldp
from ..._base import AuditHooks
from ...audit import set_inputs
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from .._registration import (edges, draw, olh_plan, olh_wire, prime_field_of, random_sets, rr_epsilon, theory,
                            tracked_candidates)

if TYPE_CHECKING:
    from ..._delta import Delta
    from ...audit import Plan
    from ...experiments import SetAlgorithm
    from ._svim_run import _CSR, _Sets

__all__ = ["PSOLHParams", "PSOLHReports", "PSOLHClient", "PSOLHServer", "padding_length", "olh_g"]


def padding_length(sets: Union[SetData, _CSR], quantile: float = 90.0) -> int:
    """Padding length for PS-OLH: the ``quantile``-th percentile (nearest rank) of the set
    sizes, at least 1 ([PS] uses the 90th, assumed known)."""
    sizes = sets.sizes() if isinstance(sets, SetData) else np.diff(np.asarray(sets[0]))
    if sizes.size == 0:
        raise ParameterError("sets must hold at least one user")
    ordered = np.sort(sizes)
    rank = max(1, int(math.ceil(quantile / 100.0 * ordered.size)))
    return max(1, int(ordered[rank - 1]))


@dataclasses.dataclass(frozen=True)
class PSOLHParams(_ParamsBase):
    """PS-OLH (Wang, Li, Jha 2018; R2): padding length ``pad_len``; OLH over
    ``D ∪ {dummy = d}`` with ``g`` (default OLH's ``round(e^eps) + 1``, exact ``.5`` ties
    upward: :func:`ldpfast.theory.olh_g`; with ``amplify=True`` of eps').

    Privacy: with ``amplify=False`` (default, as R2) OLH runs with eps on the sampled value,
    so the report is eps-LDP for every set. ``amplify=True`` runs OLH with the PSFO budget
    ``eps' = log(pad_len (e^eps - 1) + 1)`` and is only **eps'-LDP** (:attr:`true_epsilon`),
    not eps-LDP: the amplification argument needs every output to have probability between
    q and q + (p - q)/pad_len for every set, which GRR over distinct values gives but OLH does
    not, because all ``pad_len`` items of a set (or the dummy of an empty one) can hash to
    the reported ``z`` (then ``P(z | S) = p`` while a set none of whose items hashes to
    ``z`` gives ``q``: ratio ``e^eps'``, tight). Its client emits a
    :class:`~ldpfast.errors.PrivacyWarning`.
    """

    protocol: ClassVar[str] = "ps-olh"
    epsilon: float
    d: int
    pad_len: int
    g: int = 0
    amplify: bool = False
    field_size: int = PRIME

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", check_field_size(self.field_size))
        check_int("d", self.d, 1, min(self.field_size - 2, MAX_SET_DOMAIN))
        check_int("pad_len", self.pad_len, 1)
        object.__setattr__(self, "amplify", check_bool("amplify", self.amplify))
        g = self.g or default_g(self.epsilon, self.olh_epsilon,
                                "g = round(e^eps') + 1" if self.amplify else "g = round(e^eps) + 1")
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent
        warn_not_ldp(self, stacklevel=4)

    def privacy_warning(self) -> str:
        """Why these reports are not eps-LDP ("" with ``amplify=False``)."""
        if not self.amplify:
            return ""
        return (f"PS-OLH with amplify=True is NOT {self.epsilon:g}-LDP: OLH does not amplify under padding and "
                f"sampling, the reports are only {self.true_epsilon:.6g}-LDP (log(pad_len (e^eps - 1) + 1)). "
                "Use amplify=False for eps-LDP.")

    @property
    def true_epsilon(self) -> float:
        """The epsilon the reports really satisfy: eps, or eps' with ``amplify=True``."""
        return self.olh_epsilon

    @property
    def olh_epsilon(self) -> float:
        """OLH's budget: eps, or with ``amplify=True`` the PSFO budget ``eps'`` rounded
        down (:func:`ldpfast._budget.amplified`)."""
        if self.amplify:
            return amplified(self.epsilon, self.pad_len)
        return self.epsilon

    @property
    def flip_probability(self) -> float:
        """GRR flip probability ``(g-1)/(e^eps' + g - 1)``."""
        return (self.g - 1) / (math.exp(self.olh_epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (rounded so OLH is at most ``olh_epsilon``-LDP)."""
        return rr_threshold(self.olh_epsilon, self.g, "epsilon' (amplified)" if self.amplify else "epsilon")


@dataclasses.dataclass
class PSOLHReports(OLHReportColumns):
    """OLH reports: perturbed hash ``z`` in [0, g) and the user's hash ``a0, a1`` (uint64)."""

    protocol: ClassVar[str] = "ps-olh"


class PSOLHClient(ClientBase):
    """PS-OLH user side: padding and sampling to one item (or the dummy ``d``), then OLH
    with a fresh pairwise-independent hash per user. ``rng``: None = OS entropy; seeds are
    for simulation only. Emits :class:`~ldpfast.errors.PrivacyWarning` with
    ``amplify=True`` (only eps'-LDP, see :class:`PSOLHParams`)."""

    params: PSOLHParams

    def __init__(self, params: PSOLHParams, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warn_not_ldp(params)

    def perturb(self, sets: _Sets) -> PSOLHReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        p = self.params
        offsets, items = as_sets(sets, p.d)
        values = _core.privsketch_padding_sample(self._keys.key(), offsets, items, p.pad_len, p.d, self.threads)
        z, a0, a1 = olh_perturb(p, self._keys, values, self.threads)
        return PSOLHReports(z=z, a0=a0, a1=a1)


class PSOLHServer(TrackedServer):
    """PS-OLH collector: per candidate the number of users whose hash of it matches their
    report (``pos``; ``neg`` unused); ``chat = (g C - n)/(p g - 1)``, ``fhat = pad_len
    chat / n``. Decoding costs ``O(n |D|)`` hash evaluations (C++, threads)."""

    protocol: ClassVar[str] = "ps-olh"
    params_type: ClassVar[type] = PSOLHParams

    reports_type: ClassVar[type] = PSOLHReports
    params: PSOLHParams

    def _validate(self, reports: PSOLHReports) -> None:
        check_olh_reports(reports, self.params)

    def _ingest(self, reports: PSOLHReports) -> Delta:
        p = self.params
        self._check_call(16 * self._cand.size, f"matching a batch against {self._cand.size} PS-OLH candidates")
        field = _core.Field.prime(p.field_size)
        matches = np.zeros(self._cand.size, dtype=np.uint64)
        if self._cand.size == p.d:
            _core.ocms_count_range(field, reports.z, reports.a0, reports.a1, p.g, 0, matches, self.threads)
        else:
            _core.ocms_count_list(field, reports.z, reports.a0, reports.a1, p.g, self._cand.astype(np.uint64),
                                  matches, self.threads)
        return self._added(len(reports), matches.astype(np.int64), np.zeros(self._cand.size, dtype=np.int64))

    def estimate(self, candidates: Optional[ArrayLike] = None, counts: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``) of ``candidates`` (default every
        tracked item)."""
        cand = self._query(candidates)
        p = self.params
        est = p.pad_len * self.n * debias_matches(self._pos[cand], self.n, p.olh_epsilon, p.g)
        return est if counts else est / self.n


def _variance(server: PSOLHServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: theory().ps_olh_variance(p.olh_epsilon, n, f, pad_len=p.pad_len, g=p.g), len(candidates),
                  f"{PLUG_IN} (theory.ps_olh_variance: exact when no set exceeds pad_len items)",
                  "pad_len times the share of users whose padded sample is x: f when no set holding x has more "
                  "than pad_len items")


def _audit_plan(params: PSOLHParams) -> Plan:
    items = list(range(1, params.pad_len + 1))
    return olh_plan(prime_field_of(params), params.g, [params.d], items, set_inputs([], items),
                    ("H(dummy) = z, no item's", f"an item's H = z (|S| = {len(items)}), not the dummy's"))


def _simulate(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    params = PSOLHParams(epsilon=eps, d=sets.d, pad_len=padding_length(sets))
    server = PSOLHServer(params).update(PSOLHClient(params, rng=draw(gen)).perturb(sets))
    return np.asarray(server.estimate(), dtype=np.float64)


def _theory_mse(eps: float, sets: SetData) -> Optional[float]:
    """Mean of PS-OLH's variance over the domain; it is the MSE only when no set is longer
    than the padding (P90 of the set sizes), when the estimate is unbiased."""
    params = PSOLHParams(epsilon=eps, d=sets.d, pad_len=padding_length(sets))
    if sets.n == 0 or int(sets.sizes().max()) > params.pad_len:
        return None
    var = theory().ps_olh_variance(eps, sets.n, sets.frequencies(), pad_len=params.pad_len, g=params.g)
    return float(np.mean(var))


def _simulations() -> Tuple[SetAlgorithm]:
    from ...experiments import SetAlgorithm

    return (SetAlgorithm("ps-olh", "PS-OLH", "protocols.sets.ps_olh", _simulate,
                         "padding-and-sampling OLH, padding = P90 of the set sizes (Wang et al. 2018)",
                         theory_mse=_theory_mse),)


register_protocol(Protocol(
    "ps-olh", PSOLHParams, PSOLHReports, PSOLHServer, PSOLHClient,
    example=lambda: (PSOLHParams(epsilon=2.0, d=60, pad_len=3), random_sets(60)), inputs="sets",
    extremes=edges(d=(1, 2**20), pad_len=(1, 2**20), g=(2, 2**62)),
    wire_fields=olh_wire, variance=_variance, default_candidates=tracked_candidates, simulations=_simulations,
    audit=AuditHooks(lambda e, **kw: PSOLHParams(epsilon=e, d=64, pad_len=4, **kw), _audit_plan, rr_epsilon("g"))))
