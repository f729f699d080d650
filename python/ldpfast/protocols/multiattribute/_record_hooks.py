"""The registration of a record protocol (:func:`register_records`): the hooks every
record protocol fills alike (example, wire fields, closed-form variance, extremes, audit plan
and its whole-record epsilon, simulation entries)."""

from __future__ import annotations

import dataclasses
import decimal
from typing import Any, Dict, List, Tuple

import numpy as np

from ... import _base
from ..._budget import PRECISION, effective
from ..._validate import MAX_EPSILON, MIN_EPSILON
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from ._records import RecordParams, record_audit_plan, record_inputs, word_bits

__all__ = ["register_records", "summed_epsilon", "largest_epsilon"]


def _variance(server: Any, candidates: Any) -> PlugIn:
    cells = np.asarray(candidates, dtype=np.int64)
    return PlugIn(lambda f: server.cell_variance(f, cells), len(cells),
                  f"{PLUG_IN} ({server.protocol}: each attribute's oracle closed form, RecordFrequencyServer."
                  f"cell_variance)")


def _wire(params: RecordParams) -> List[_base.WireField]:
    oracles = params.oracles()
    bits = word_bits(oracles)
    if params.protocol in ("smp", "calm"):
        return [_base.WireField("group", _base.bits_for(len(oracles))),
                _base.WireField("y", bits, None, "uint64", (max(o.width for o in oracles),))]
    return [_base.WireField("y", bits, None, "uint64", (sum(o.width for o in oracles),))]


def _extremes(params: RecordParams) -> List[RecordParams]:
    """Smallest and largest epsilon the attributes' oracles accept, and the smallest and a large domain."""
    changes: Dict[str, Any] = {"names": None, **({"marginals": None} if hasattr(params, "marginals") else {})}
    if params.protocol == "smp":
        # one attribute: every extreme user reports it (with several, one could go unsampled: NaN)
        params = dataclasses.replace(params, domains=params.domains[:1], **changes)
        ends = [dataclasses.replace(params, domains=(2,)), dataclasses.replace(params, domains=(1 << 12,))]
    else:
        ends = [dataclasses.replace(params, domains=(2, 2), **changes),
                dataclasses.replace(params, domains=(2, 1 << 12), **changes)]
    for end in (MIN_EPSILON * len(params.domains), MAX_EPSILON):
        found = None
        low, high = params.epsilon, end
        for _ in range(60):                      # bisection to the accepted end
            try:
                found = dataclasses.replace(params, epsilon=high)
                break
            except Exception:
                high = low + (high - low) / 2
        ends.append(found if found is not None else params)
    return ends


def _example(params_type: type, oracle: str = "grr") -> Any:
    def example() -> Tuple[RecordParams, np.ndarray]:
        domains = (4, 9, 2)
        params: RecordParams = params_type(epsilon=2.0, domains=domains, oracle=oracle,
                                           names=("colour", "size", "flag"))
        return params, record_inputs(domains)
    return example


def _audit_params(params_type: type, **fixed: Any) -> Any:
    return lambda e, **kw: params_type(**{"epsilon": e, "domains": (2, 3), "oracle": "grr", **fixed, **kw})


#: The ``ldpfast simulate`` label and summary of each record protocol.
SIMULATED = {"spl": ("SPL", "every attribute at epsilon/A (GRR)"),
             "smp": ("SMP", "one sampled attribute per user at epsilon (GRR)"),
             "rsfd": ("RS+FD", "one sampled attribute, fake values for the others, epsilon per record (GRR)"),
             "calm": ("CALM", "every 2-way marginal, one sampled per user (OLH); consistency, Norm-Sub"),
             "joint": ("full joint", "GRR on the product of the attributes' domains (at most 2^20 cells)")}


def _simulations(pid: str, params_type: type) -> Any:
    def entries() -> Tuple[Any, ...]:
        from ...experiments import RecordAlgorithm

        def make(eps: float, data: Any) -> RecordParams:
            made: RecordParams = params_type(epsilon=eps, domains=data.domains, names=data.names)
            return made
        label, summary = SIMULATED[pid]
        return (RecordAlgorithm(pid, label, params_type.__module__.replace("ldpfast.", ""), make, summary,
                                marginals=pid in ("calm", "joint")),)
    return entries


def register_records(pid: str, params: type, reports: type, server: type, client: type, one_attribute: bool,
                     record_epsilon: Any, oracle: str = "grr") -> None:
    """Register a record protocol (the hooks of this module; ``oracle``: the example's)."""
    _base.register_protocol(_base.Protocol(
        pid, params, reports, server, client, inputs="records", example=_example(params, oracle), wire_fields=_wire,
        variance=_variance, extremes=_extremes, simulations=_simulations(pid, params),
        audit=_base.AuditHooks(_audit_params(params), lambda p: record_audit_plan(p, one_attribute),
                               record_epsilon)))


def summed_epsilon(params: RecordParams) -> float:
    """Sequential composition: the attributes' effective epsilons added, rounded up."""
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        return effective(sum((o.exact_loss() for o in params.oracles()), decimal.Decimal(0)))


def largest_epsilon(params: RecordParams) -> float:
    """A mixture over the reported attribute: the largest of the attributes' epsilons."""
    return max(o.effective_epsilon for o in params.oracles())
