"""The protocols the simulation harness runs, one table per kind of input.

* :data:`ALGORITHMS`: frequency oracles on single-valued data (:class:`Algorithm`), each with
  the closed forms the runner sets next to its measurements ([PAN] Eq. 8/20/22, Thm 3.10);
* :data:`SET_ALGORITHMS`: set-valued protocols ([PS] section 4, :class:`SetAlgorithm`);
* :data:`HEAVY_ALGORITHMS`: heavy-hitter protocols ([WW] section 5, :class:`HeavyAlgorithm`);
* :data:`KINDS`: the three tables by kind, and :data:`PAN_ALGORITHMS` /
  :data:`PAN_METRIC_ALGORITHMS`: the algorithms of [PAN] section 6.

Each row names the ``ldpfast`` module that implements it and is built lazily from it, so a
build without that module only loses the row.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .._base import Params, protocols
from ..datasets import SetData, ValueData
from ..errors import ParameterError
from ..theory import hadamard as _theory_h
from ..theory import ocms as _theory

__all__ = ["Algorithm", "ALGORITHMS", "available_algorithms", "get_algorithm", "SetAlgorithm",
           "SET_ALGORITHMS", "HeavyAlgorithm", "HEAVY_ALGORITHMS", "KINDS", "algorithm_kind",
           "PAN_ALGORITHMS", "PAN_METRIC_ALGORITHMS"]


def _mod(name: str):
    return importlib.import_module(f"ldpfast.{name}")


def _module_available(module: str) -> bool:
    """True when ``ldpfast.<module>`` is part of this build."""
    try:
        _mod(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ldpfast"):
            return False
        raise
    return True


def _draw(gen: np.random.Generator) -> int:
    return int(gen.integers(0, 2**63))


# ----------------------------------------------------------------------------------
# Frequency oracles on single-valued data ([PAN] section 6)
# ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Algorithm:
    """How the harness builds one protocol for a data set.

    Attributes:
        name: command-line id (``ocms-mse``).
        label: name in tables and plots (``MSE-OCMS+RR``).
        module: the ``ldpfast`` submodule that implements it.
        make_params: ``(epsilon, data, generator) -> Params``; called once per run, so
            parameters that hold random choices (CMS+HE's hash family) are redrawn.
        variance: closed-form ``(params, data, f) -> Var(fhat)`` at the candidates'
            true frequencies ``f`` (array), or None.
        l2: closed-form worst-case l2 ``(params, n, size) -> float``, or None.
        summary: one line for ``ldpfast simulate --list``.
        client, server: explicit classes for protocols outside the registry (default:
            the classes registered for the parameter type).
        server_candidates: construct the server with ``candidates=data.candidates``
            (servers that count a candidate set instead of the whole dictionary).
    """

    name: str
    label: str
    module: str
    make_params: Callable[[float, ValueData, np.random.Generator], Params]
    variance: Optional[Callable[[Params, ValueData, np.ndarray], np.ndarray]] = None
    l2: Optional[Callable[[Params, int, int], float]] = None
    summary: str = ""
    client: Optional[type] = None
    server: Optional[type] = None
    server_candidates: bool = False

    def available(self) -> bool:
        """True when the implementing module is part of this build."""
        return _module_available(self.module)

    def classes(self, params: Params):
        """(Client, Server) classes registered for ``type(params)``."""
        if self.client is not None and self.server is not None:
            return self.client, self.server
        for proto in protocols().values():
            if proto.params is type(params):
                return proto.client, proto.aggregator
        raise ParameterError(f"no protocol is registered for {type(params).__name__}")


def _ocms_variance(params, data, f):
    return _theory.ocms_variance(params, n=data.n, f=f)  # Eq. 8/20 for its field and m


def _ocms_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, params.m)  # Eq. 22 with |X| for d


def _he_variance(params, data, f):
    return _theory.he_variance(params.epsilon, data.n, f)  # CMS+RR with m = 2


def _he_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, 2)


def _cmshe_variance(params, data, f):
    # The family is redrawn every run, so its bias adds PAN Thm 3.10's term to the MSE.
    others = float(np.sum(data.frequencies(np.unique(data.values)) ** 2)) - f * f
    return _theory_h.cmshe_variance(params.epsilon, data.n, f, m=params.m, k=params.k, sum_sq_other=others)


def _rhr_variance(params, data, f):
    base = params.base
    residues = np.bincount(data.values % base, minlength=base) / data.n
    share = residues[data.candidates % base]  # users sharing x mod base (x included)
    return _theory_h.rhr_variance(params.epsilon, data.n, f, residue_fraction=share)


def _olh_variance(params, data, f):
    return _theory.ocms_variance(params.epsilon, params.g, data.n, f)  # CMS+RR with m = g


def _olh_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, params.g)


def _hrr_variance(params, data, f):
    return _theory_h.hrr_variance(params.epsilon, data.n, f)


def _grr_variance(params, data, f):
    return _theory.grr_variance(params.epsilon, params.d, data.n, f)


def _grr_l2(params, n, size):
    worst = _theory.grr_variance(params.epsilon, params.d, n, np.array([0.0, 1.0]))
    return float((size - 1) * worst[0] + worst[1])


def _hadamard(name: str):
    return getattr(_mod("hadamard"), name)


def _rhr_original_variance(params, data, f):
    high = params.B
    locations = np.bincount(data.values // high, minlength=params.D // high) / data.n
    return params.variance(data.n, f, location_fraction=locations[data.candidates // high])


def _own_variance(params, data, f):
    return params.variance(data.n, f)  # the protocol's closed form (ldpfast.theory)


def _own_l2(params, n, size):
    # Var is affine in f and sum_x f(x) <= 1 over the values of interest.
    at_zero, at_one = params.variance(n, 0.0), params.variance(n, 1.0)
    return float(size * at_zero + max(0.0, at_one - at_zero))


def _rappor_cms(variant: str):
    return lambda eps, data, gen: _mod("rappor_cms").Params.optimal(
        epsilon=eps, d=data.d, variant=variant, tau=0.1)


ALGORITHMS: Dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ocms-mse", "MSE-OCMS+RR", "ocms",
              lambda eps, data, gen: _mod("ocms").Params.optimal(
                  epsilon=eps, d=data.d, mode="mse", f_star=data.f_star),
              _ocms_variance, _ocms_l2,
              "OCMS+RR, m minimizing the worst-case MSE for the data's f* (PAN Thm 3.6)"),
    Algorithm("ocms-l", "l-OCMS+RR", "ocms",
              lambda eps, data, gen: _mod("ocms").Params.optimal(epsilon=eps, d=data.d, mode="l"),
              _ocms_variance, _ocms_l2, "OCMS+RR, m minimizing l1/l2 (PAN Thm 3.8)"),
    Algorithm("he", "HE", "hadamard",
              lambda eps, data, gen: _hadamard("HEParams")(epsilon=eps, d=data.d),
              _he_variance, _he_l2, "Hadamard Encoding = CMS+RR with m = 2 (PAN section 6, R1)"),
    Algorithm("cms-he", "CMS+HE", "hadamard",
              lambda eps, data, gen: _hadamard("CMSHEParams")(
                  epsilon=eps, d=data.d, hash_seed=_draw(gen)),
              _cmshe_variance, None,
              "Apple's CMS with HE, k = 2048, m = 1024, family redrawn per run (PAN section 6)"),
    Algorithm("rhr", "RHR", "hadamard",
              lambda eps, data, gen: _hadamard("RHRParams")(epsilon=eps, d=data.d),
              _rhr_variance, None, "Recursive Hadamard Response, R1's layout (PAN section 6)"),
    Algorithm("cms-he-apple", "CMS+HE (Apple layout)", "hadamard_variants",
              lambda eps, data, gen: _mod("hadamard_variants").AppleCMSHEParams(
                  epsilon=eps, d=data.d, hash_seed=_draw(gen)),
              _cmshe_variance, None, "Apple's HCMS: Hadamard size m = 1024, column h_j(x) (pure-LDP layout)"),
    Algorithm("rhr-original", "RHR (original)", "hadamard_variants",
              lambda eps, data, gen: _mod("hadamard_variants").RHROriginalParams(epsilon=eps, d=data.d),
              _rhr_original_variance, None,
              "Recursive Hadamard Response, Chen et al.'s layout (location x // B), random rows"),
    Algorithm("olh", "OLH", "hadamard",
              lambda eps, data, gen: _hadamard("OLHParams")(epsilon=eps, d=data.d),
              _olh_variance, _olh_l2, "Optimal Local Hashing, g = round(e^eps)+1, pairwise hash"),
    Algorithm("hrr", "HRR", "hadamard",
              lambda eps, data, gen: _hadamard("HRRParams")(epsilon=eps, d=data.d),
              _hrr_variance, None, "Hadamard randomized response (WW Fact 2.1)"),
    Algorithm("hadaoracle", "HadaOracle", "hadaoracle",
              lambda eps, data, gen: _mod("hadaoracle").Params.create(
                  epsilon=eps, d=data.d, n=data.n, beta=0.05, hash_seed=_draw(gen)),
              None, None, "WW sketch: k subsets x HRR on [m], median query (beta = 0.05 defaults)"),
    Algorithm("cms-srp", "CMS+sRP", "rappor_cms", _rappor_cms("symmetric"), _own_variance, _own_l2,
              "CMS with symmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
              server_candidates=True),
    Algorithm("cms-arp", "CMS+aRP", "rappor_cms", _rappor_cms("asymmetric"), _own_variance, _own_l2,
              "CMS with asymmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
              server_candidates=True),
    Algorithm("ss", "SS", "subset_selection",
              lambda eps, data, gen: _mod("subset_selection").Params(epsilon=eps, d=data.d),
              _own_variance, _own_l2, "Subset Selection, k ~ d/(e^eps+1) (O(d) work per user)"),
    Algorithm("hashtogram", "Hashtogram", "hashtogram",
              lambda eps, data, gen: _mod("hashtogram").Params.create(
                  epsilon=eps, d=data.d, n=data.n, beta=0.05, hash_seed=_draw(gen)),
              None, None, "Bassily et al.'s Count-Sketch oracle: R groups, T ~ sqrt(n), median (WW Table 1)"),
    Algorithm("grr", "GRR", "grr",
              lambda eps, data, gen: _mod("grr").Params(epsilon=eps, d=data.d),
              _grr_variance, _grr_l2, "k-ary randomized response on the whole dictionary (d counters)"),
)}


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` called ``name``; raises ParameterError listing the names."""
    if name not in ALGORITHMS:
        raise ParameterError(f"protocol must be one of {sorted(ALGORITHMS)}, got {name!r}")
    return _usable(ALGORITHMS[name])


def _usable(alg: Any) -> Any:
    """``alg`` itself, or ParameterError when its module is not part of this build."""
    if not alg.available():
        raise ParameterError(f"protocol {alg.name!r} needs ldpfast.{alg.module}, which this build lacks")
    return alg


def available_algorithms() -> List[Algorithm]:
    """The algorithms whose implementation is part of this build."""
    return [a for a in ALGORITHMS.values() if a.available()]


# ----------------------------------------------------------------------------------
# Set-valued protocols ([PS] section 4) and heavy hitters ([WW] section 5)
# ----------------------------------------------------------------------------------

def _sketch_run(params_name: str, client_name: str, server_name: str, module: str = "privsketch",
                **estimate: Any):
    """Run a K x M sketch protocol ([PS] defaults K = 4, M = 128) on set data and
    estimate the whole domain."""
    def run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
        import warnings

        mod = _mod(module)
        params = getattr(mod, params_name).create(epsilon=eps, d=sets.d, seed=_draw(gen))
        with warnings.catch_warnings():  # PrivSketch's ordering matrix: simulated on purpose
            warnings.simplefilter("ignore", _mod("privsketch").PrivacyWarning)
            reports = getattr(mod, client_name)(params, rng=_draw(gen)).perturb(sets)
        return np.asarray(getattr(mod, server_name)(params).update(reports).estimate(**estimate), dtype=np.float64)
    return run


def _ps_olh_run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    ps = _mod("privsketch")
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    server = ps.PSOLHServer(params).update(ps.PSOLHClient(params, rng=_draw(gen)).perturb(sets))
    return np.asarray(server.estimate(), dtype=np.float64)


def _ps_olh_theory(eps: float, sets: SetData) -> Optional[float]:
    """Mean of PS-OLH's variance over the domain; it is the MSE only when no set is longer
    than the padding (P90 of the set sizes), when the estimate is unbiased."""
    ps = _mod("privsketch")
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    if sets.n == 0 or int(sets.sizes().max()) > params.pad_len:
        return None
    from ..theory import privsketch as _theory_ps

    var = _theory_ps.ps_olh_variance(eps, sets.n, sets.frequencies(), pad_len=params.pad_len, g=params.g)
    return float(np.mean(var))


def _svim_run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    result = _mod("privsketch").svim(sets, eps, k=k, rng=_draw(gen))
    est = np.zeros(sets.d)
    est[np.asarray(result.top, dtype=np.intp)] = result.estimates
    return est


@dataclasses.dataclass(frozen=True)
class SetAlgorithm:
    """How the harness runs one set-valued protocol on a :class:`~ldpfast.datasets.SetData`.

    ``run(epsilon, sets, generator, k)`` returns frequency estimates for the whole domain
    (``whole_domain=False``: only the ``k`` items the protocol reports, zeros elsewhere, so
    only the top-k metrics apply). ``theory_mse(epsilon, sets)``: the closed-form MSE over the
    domain where the estimator is unbiased on these sets, else None."""

    name: str
    label: str
    module: str
    run: Callable[[float, SetData, np.random.Generator, int], np.ndarray]
    summary: str = ""
    theory_mse: Optional[Callable[[float, SetData], Optional[float]]] = None
    whole_domain: bool = True

    def available(self) -> bool:
        return _module_available(self.module)


SET_ALGORITHMS: Dict[str, SetAlgorithm] = {a.name: a for a in (
    SetAlgorithm("privsketch", "PrivSketch", "privsketch", _sketch_run("Params", "Client", "Server"),
                 "PrivSketch, K=4, M=128, R2 estimator (NOT eps-LDP: its ordering matrix leaks, PS reproduction only)"),
    SetAlgorithm("privsketch-nosmp", "PrivSketch-noSmp", "privsketch",
                 _sketch_run("NoSmpParams", "NoSmpClient", "NoSmpServer"),
                 "PrivSketch without sampling: every cell with eps/(KM) (NOT eps-LDP, as PrivSketch)"),
    SetAlgorithm("privsketch-ldp", "PrivSketch-LDP", "privsketch",
                 _sketch_run("SafeParams", "SafeClient", "SafeServer", estimator="mean-corrected"),
                 "LDP-safe PrivSketch: no ordering matrix, one sampled cell, fill-corrected count-mean"),
    SetAlgorithm("multi-pcms-mean", "Multi-PCMS-Mean", "privsketch",
                 _sketch_run("MultiPCMSMeanParams", "MultiPCMSMeanClient", "MultiPCMSMeanServer"),
                 "one sketch row per user, eps/M per cell, count-mean decoding (PS baseline)"),
    SetAlgorithm("multi-pcms-min", "Multi-PCMS-Min", "privsketch",
                 _sketch_run("MultiPCMSMinParams", "MultiPCMSMinClient", "MultiPCMSMinServer"),
                 "whole sketch per user, eps/(KM) per cell, count-min decoding (PS baseline)"),
    SetAlgorithm("ps-olh", "PS-OLH", "privsketch", _ps_olh_run,
                 "padding-and-sampling OLH, padding = P90 of the set sizes (Wang et al. 2018)",
                 theory_mse=_ps_olh_theory),
    SetAlgorithm("npcms", "nPCMS", "npcms", _sketch_run("Params", "Client", "Server", module="npcms"),
                 "L = 78 Apple CMS reports per user with eps/L each (R2's n x CMS baseline)"),
    SetAlgorithm("svim", "SVIM", "privsketch", _svim_run,
                 "SVIM frequent items: three user groups, top-k only (Wang, Li, Jha 2018)", whole_domain=False),
)}


def _heavy_params(module: str, factory: str):
    return lambda eps, data, beta, gen: getattr(_mod(module).Params, factory)(
        eps, data.d, data.n, beta, hash_seed=_draw(gen))


@dataclasses.dataclass(frozen=True)
class HeavyAlgorithm:
    """How the harness runs one heavy-hitter protocol on a :class:`ValueData`:
    ``make_params(epsilon, data, beta, generator)`` gives parameters with ``delta`` and
    ``tau`` (counts); the module's Client/Server run it and ``Server.heavy_hitters()``
    searches the prefix tree."""

    name: str
    label: str
    module: str
    make_params: Callable[[float, ValueData, float, np.random.Generator], Params]
    summary: str = ""

    def available(self) -> bool:
        return _module_available(self.module)


HEAVY_ALGORITHMS: Dict[str, HeavyAlgorithm] = {a.name: a for a in (
    HeavyAlgorithm("hadaheavy", "HadaHeavy", "hadaheavy", _heavy_params("hadaheavy", "create"),
                   "WW HadaHeavy: prefix search over B-ary symbols, HadaOracle per level"),
    HeavyAlgorithm("treehist", "TreeHist", "hadaheavy", _heavy_params("hadaheavy", "treehist"),
                   "TreeHist as HadaHeavy with B = 2 (binary prefixes, HadaOracle levels)"),
    HeavyAlgorithm("treehist-cs", "TreeHist-CS", "treehist_cs", _heavy_params("treehist_cs", "create"),
                   "Bassily et al.'s TreeHist with Count-Sketch (Hashtogram) level oracles"),
)}

#: The kinds of protocol ``ldpfast simulate`` runs, and their tables.
KINDS = {"values": ALGORITHMS, "sets": SET_ALGORITHMS, "heavy": HEAVY_ALGORITHMS}


def algorithm_kind(name: str) -> str:
    """``"values"``, ``"sets"`` or ``"heavy"``: which table ``name`` is in (ParameterError
    listing every name when none)."""
    for kind, table in KINDS.items():
        if name in table:
            return kind
    names = sorted(n for table in KINDS.values() for n in table)
    raise ParameterError(f"protocol must be one of {names}, got {name!r}")


def _get(table: Dict[str, Any], name: str):
    kind = algorithm_kind(name)
    if KINDS[kind] is not table:
        raise ParameterError(f"protocol {name!r} is a {kind} protocol, not one of {sorted(table)}")
    return _usable(table[name])


#: Algorithms of [PAN] section 6.
PAN_ALGORITHMS = ("ocms-mse", "ocms-l", "he", "cms-he", "rhr")
#: Which algorithms [PAN] shows for each metric (MSE-OCMS for MSE, l-OCMS for l1/l2).
PAN_METRIC_ALGORITHMS = {"mse": ("ocms-mse", "he", "cms-he", "rhr"),
                         "l1": ("ocms-l", "he", "cms-he", "rhr"),
                         "l2": ("ocms-l", "he", "cms-he", "rhr")}
