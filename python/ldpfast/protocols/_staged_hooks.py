"""TEMPORARY (registry branch, until the protocol-module split lands): the registration hooks
of the built-in protocols, attached to their registrations after import. Each section moves
verbatim into its protocol module's ``register_protocol`` call; then this module goes."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict

import numpy as np

from .. import _core
from .._base import _REGISTRY, AuditHooks, ComparisonRow
from .._validate import rr_effective_epsilon, rr_threshold
from ..audit import Plan, hash_support, log_ratio, set_inputs, support_events, value_inputs
from ..estimates import _MAX_WHOLE_DOMAIN, PLUG_IN
from ..kernels.field import core_field
from ..wire import WireField, bits_for
from ._examples import random_sets, zipf_values

_SIGN = (-1, 1)


def _theory():
    from .. import theory

    return theory


# == ocms ====================================================================================
def _ocms_example():
    from .ocms import Params
    return Params.optimal(epsilon=2.0, d=300, field="compact"), zipf_values(300)


def _ocms_wire(p):  # [PAN] 2.4: 2 ceil(log2 pH) + ceil(log2 m).
    return [WireField("z", bits_for(p.m)), WireField("a0", bits_for(p.field_size)),
            WireField("a1", bits_for(p.field_size))]


def _ocms_variance(server, candidates):
    p, n = server.params, server.n
    if p.a_range != "full":
        return None, "OCMS with a_range='nonzero' has no closed-form variance"
    return (lambda f: _theory().ocms_variance(p, n=n, f=f)), f"{PLUG_IN} (theory.ocms_variance)"


def _ocms_candidates(server):
    return None if server.keeps_reports else server.candidates


def _ocms_audit_params(e, **kw):
    from .ocms import Params
    return Params.optimal(e, 16, **kw)


def _ocms_plan(params):
    return Plan(value_inputs(0, 1), support_events(hash_support(params.field, params.m), [0], [1]),
                ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)"))


# == grr =====================================================================================
def _grr_example():
    from .grr import Params
    return Params(epsilon=1.5, d=64), zipf_values(64)


def _grr_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: _theory().grr_variance(p.epsilon, p.d, n, f)), f"{PLUG_IN} (theory.grr_variance)"


def _grr_plan(params):
    return Plan(value_inputs(0, 1), lambda r: (r.y == 0, r.y == 1), ("y = x0", "y = x1"))


# == hadamard: hrr, he, cmshe, rhr ============================================================
def _binary_eps(params):
    from .hadamard import binary_flip_threshold
    return rr_effective_epsilon(binary_flip_threshold(params.epsilon), 2)


def _row_bit_wire(p):  # [WW] Fact 2.1: one bit, plus the Hadamard row when the client draws it.
    return [WireField("rows", bits_for(p.hadamard_size), dtype="uint32"), WireField("bits", 1, _SIGN, "int8")]


def _hrr_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: _theory().hrr_variance(p.epsilon, n, f)), f"{PLUG_IN} (theory.hrr_variance)"


def _cmshe_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().cmshe_variance(p.epsilon, n, f, m=p.m)),
            f"{PLUG_IN} (theory.cmshe_variance, given the run's hash functions: the family's "
            "collision bias is not included)")


def _layout_support(params):
    """Report ``(group, row, bit)`` supports value w if bit is w's Hadamard sign there."""
    from .hadaoracle import _parity_sign
    layout = params.layout()

    def support(reports, w):
        n = len(reports.bits)
        groups = np.zeros(n, dtype=np.int64) if reports.groups is None else reports.groups.astype(np.int64)
        y = layout.group_hashes(groups, np.full(n, w[0], dtype=np.uint64))
        col = y + layout.table[groups, 3]
        return _parity_sign(reports.rows.astype(np.uint64) & col) == reports.bits
    return support


def _layout_plan(params):
    return Plan(value_inputs(0, 1), support_events(_layout_support(params), [0], [1]),
                ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))


def _hadamard_example(name, **kw):
    def example():
        from . import hadamard
        return getattr(hadamard, name)(**kw), zipf_values(300)
    return example


def _rhr_variance(server, candidates):
    theory, p, n = _theory(), server.params, server.n
    if p.d > _MAX_WHOLE_DOMAIN:
        return ((lambda f: theory.rhr_variance(p.epsilon, n, f, residue_fraction=1.0)),
                f"{PLUG_IN} (theory.rhr_variance with every user in the candidate's residue class: "
                "an upper bound)")
    # the raw estimates of a residue class sum to an unbiased estimate of its share
    per_class = np.bincount(np.arange(p.d) % p.base, weights=server.estimate(), minlength=p.base)
    share = np.clip(per_class[candidates.astype(np.int64) % p.base], 0.0, 1.0)
    return ((lambda f: theory.rhr_variance(p.epsilon, n, f, residue_fraction=np.maximum(share, f))),
            f"{PLUG_IN} (theory.rhr_variance; the residue-class share is plugged in from the estimates)")


def _rhr_plan(params):
    from .hadaoracle import _parity_sign
    low = params.b - 1

    def support(reports, w):
        x = np.uint64(w[0])
        h01 = (_parity_sign(reports.rows.astype(np.uint64) & ((x >> np.uint64(low)) + np.uint64(1))) > 0)
        y = 2 * (int(x) & ((1 << low) - 1)) + h01.astype(np.int64)
        return reports.z.astype(np.int64) == y
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))


# == olh =====================================================================================
def _olh_example():
    from .hadamard import OLHParams
    return OLHParams(epsilon=1.0, d=300), zipf_values(300, n=1500)


def _olh_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: _theory().olh_variance(p.epsilon, n, f, g=p.g)), f"{PLUG_IN} (theory.olh_variance)"


def _olh_plan(params):
    from .hadamard import prime_field
    return Plan(value_inputs(0, 1), support_events(hash_support(prime_field(), params.g), [0], [1]),
                ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)"))


# == hadaoracle, hadaheavy ===================================================================
def _hadaoracle_example():
    from .hadaoracle import Params
    return Params.create(epsilon=2.0, d=1000, n=4000, hash_seed=3), zipf_values(1000)


def _hadaheavy_example():
    from .hadaheavy import Params
    return Params.create(epsilon=2.0, d=1024, n=4000, hash_seed=3), zipf_values(1024)


# == privsketch family =======================================================================
def _sketch_example(name):
    def example():
        from . import privsketch
        return getattr(privsketch, name).create(epsilon=2.0, d=60, K=2, M=8, seed=1), random_sets(60)
    return example


def _sketch_eps(params):
    bits = {"1": 1, "M": params.M, "K*M": params.K * params.M}[params.bit_divisor]
    return bits * rr_effective_epsilon(params.flip_threshold, 2)


def _sketch_of(params, items) -> np.ndarray:
    """The user's K x M 0/1 sketch of ``items`` (flat, length K M)."""
    sketch = np.zeros(params.K * params.M, dtype=np.int8)
    if len(items):
        sketch[params.cells(np.asarray(items, dtype=np.uint64)).astype(np.int64).ravel()] = 1
    return sketch


def _covering_items(params) -> list:
    """The shortest prefix of ``[0, d)`` whose sketch has the most 1-cells."""
    cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
    seen, target = set(), np.unique(cells).size
    for x in range(params.d):
        seen.update(cells[x].tolist())
        if len(seen) == target:
            return list(range(x + 1))
    return list(range(params.d))


def _order_plan(params):
    cells = _sketch_of(params, [0]).nonzero()[0]
    top = params.K * params.M - cells.size

    def order_events(reports):
        ranks = reports.order.reshape(len(reports.order), -1)[:, cells]
        return np.zeros(len(ranks), dtype=bool), np.all(ranks >= top, axis=1)
    return Plan(set_inputs([], [0]), order_events, ("never", "order ranks {0}'s cells on top"))


def _sketch_bits_plan(params):
    pid = params.protocol
    full = [0] if pid == "privsketch-ldp" else _covering_items(params)
    sketches = (2 * _sketch_of(params, []) - 1, 2 * _sketch_of(params, full) - 1)
    K, M = params.K, params.M

    def sketch_support(reports, w):
        sk = sketches[w]
        if pid == "privsketch-ldp":
            return reports.bit == sk[reports.k.astype(np.int64) * M + reports.m.astype(np.int64)]
        if pid == "multi-pcms-mean":
            return np.all(reports.bits == sk.reshape(K, M)[reports.row.astype(np.int64)], axis=1)
        return np.all(reports.bits.reshape(len(reports.bits), -1) == sk, axis=1)
    return Plan(set_inputs([], full), support_events(sketch_support, 0, 1),
                ("bits = sketch(empty) != sketch(x1)", f"bits = sketch({len(full)} items) != sketch(empty)"))


def _tracked_candidates(server):
    return server.candidates


def _privsketch_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().privsketch_variance(p.epsilon, n, f, K=p.K, M=p.M)),
            f"{PLUG_IN} (theory.privsketch_variance, R2 estimator; f is the count-min frequency)")


def _nosmp_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: np.full(np.shape(f), _theory().privsketch_nosmp_variance(p.epsilon, n, K=p.K, M=p.M))),
            "closed form (theory.privsketch_nosmp_variance)")


def _safe_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().privsketch_ldp_variance(p.epsilon, n, f, fbar_sq=np.square(f), M=p.M, K=p.K)),
            f"{PLUG_IN} (theory.privsketch_ldp_variance, mean estimator, with mean(fbar_i^2) >= fbar^2: "
            "an upper bound)")


def _mean_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().multi_pcms_mean_variance(p.epsilon, n, f, fbar_sq=np.square(f), M=p.M, K=p.K)),
            f"{PLUG_IN} (theory.multi_pcms_mean_variance, uncorrected estimator, an upper bound)")


def _audit_sketch(name, **kw):
    def make(e, **changes):
        from . import privsketch
        return getattr(privsketch, name).create(epsilon=e, d=64, seed=1, **kw, **changes)
    return make


# PrivSketch ([PS] Alg. 2): the sampled cell (k, m), its bit, and the ordering matrix as
# one rank in [0, K M) per cell, ceil(log2(K M)) bits each (a permutation of the cells).
def _privsketch_wire(p):
    return [WireField("k", bits_for(p.K), dtype="uint16"), WireField("m", bits_for(p.M), dtype="uint16"),
            WireField("bit", 1, _SIGN, "int8"),
            WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))]


# == ps-olh, svim ============================================================================
def _olh_over_field_wire(p):  # OLH over F_pH after padding and sampling
    return [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
            WireField("a1", bits_for(p.field_size))]


def _svim_padded_wire(p):
    # phase 3 is OLH, or GRR on |C| + 1 values (then only z travels: 0-bit hash fields)
    if p.uses_grr:
        return [WireField("z", bits_for(p.domain)), WireField("a0", 0), WireField("a1", 0)]
    return _olh_over_field_wire(p)


def _psolh_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().ps_olh_variance(p.olh_epsilon, n, f, pad_len=p.pad_len, g=p.g)),
            f"{PLUG_IN} (theory.ps_olh_variance: exact when no set exceeds pad_len items)")


def _svim_olh_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: _theory().olh_variance(p.epsilon, n, f, g=p.g)), f"{PLUG_IN} (theory.olh_variance)"


def _svim_padded_variance(server, candidates):
    theory, p, n = _theory(), server.params, server.n
    scale = p.L / p.coverage
    if p.uses_grr:
        def var(f: Any) -> Any:
            return scale**2 * theory.grr_variance(p.grr_epsilon, p.domain, n, np.clip(f / scale, 0.0, 1.0))
    else:
        def var(f: Any) -> Any:
            return scale**2 * theory.olh_variance(p.epsilon, n, np.clip(f / scale, 0.0, 1.0), g=p.g)
    return var, f"{PLUG_IN} (the GRR/OLH variance of the padded sample, scaled by (L/coverage)^2)"


def _olh_eps(params):
    return rr_effective_epsilon(params.flip_threshold, params.g)


def _svim_padded_eps(params):
    if not params.uses_grr:
        return rr_effective_epsilon(params.flip_threshold, params.g)
    grr_eps = rr_effective_epsilon(params.flip_threshold, params.domain)
    if params.reference:           # the single dummy: no amplification (class docstring)
        return grr_eps
    return math.log1p(math.expm1(grr_eps) / params.L)


def _psolh_plan(params):
    items = list(range(1, params.pad_len + 1))
    support = hash_support(_core.Field.prime(params.field_size), params.g)
    return Plan(set_inputs([], items), support_events(support, [params.d], items),
                ("H(dummy) = z, no item's", f"an item's H = z (|S| = {len(items)}), not the dummy's"))


def _svim_items_plan(params):
    support = hash_support(_core.Field.prime(params.field_size), params.g)
    return Plan(set_inputs([], [0]), support_events(support, [params.d], [0]),
                ("H(dummy) = z != H(0)", "H(0) = z != H(dummy)"))


def _svim_lengths_plan(params):
    support = hash_support(_core.Field.prime(params.field_size), params.g)
    return Plan(set_inputs([], [params.candidates[0]]), support_events(support, [0], [1]),
                ("H(length 0) = z != H(1)", "H(length 1) = z != H(0)"))


def _svim_padded_plan(params):
    size = len(params.candidates)
    dummies, items = list(range(size, params.domain)), list(range(min(params.L, size)))
    if params.uses_grr:
        def support(reports, w):
            return np.isin(reports.z, np.asarray(w, dtype=np.uint64))
    else:
        support = hash_support(_core.Field.prime(params.field_size), params.g)
    return Plan(set_inputs([], [params.candidates[i] for i in items]), support_events(support, dummies, items),
                ("z is a dummy's (empty set)", f"z is a candidate's ({len(items)} candidates)"))


def _ps(name, **kw):
    def make(e, **changes):
        from . import privsketch
        return getattr(privsketch, name)(epsilon=e, **kw, **changes)
    return make


def _ps_example(name, **kw):
    def example():
        from . import privsketch
        return getattr(privsketch, name)(epsilon=2.0, d=60, **kw), random_sets(60)
    return example


# == cms-rappor, ss ==========================================================================
def _own_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), f"{PLUG_IN} (the protocol's closed form, Params.variance)"


def _rappor_eps(params):
    # one-hot vectors of two inputs differ in two bits: sRP flips both at eps/2; aRP
    # keeps a 1 with probability exactly 1/2 and flips a 0 at eps
    once = rr_effective_epsilon(params.zero_threshold, 2)
    return 2 * once if params.variant == "symmetric" else once


def _rappor_plan(params):
    field = core_field(params.field_size)

    def events(reports):
        n = len(reports.a0)
        h0, h1 = (_core.ocms_hash(field, reports.a0, reports.a1, np.full(n, v, dtype=np.uint64),
                                  params.m).astype(np.int64) for v in (0, 1))
        rows = np.arange(n)
        b0, b1 = reports.bits[rows, h0] == 1, reports.bits[rows, h1] == 1
        apart = h0 != h1
        return apart & b0 & ~b1, apart & b1 & ~b0
    return Plan(value_inputs(0, 1), events, ("bit h(x0) set, bit h(x1) clear", "bit h(x1) set, bit h(x0) clear"))


def _ss_eps(params):
    # P(include) (d-k) / (P(exclude) k), from the integer threshold
    t = params.exclude_threshold
    return log_ratio((2**64 - t) * (params.d - params.k), t * params.k)


def _ss_plan(params):
    def events(reports):
        has0, has1 = (np.any(reports.items == v, axis=1) for v in (0, 1))
        return has0 & ~has1, has1 & ~has0
    return Plan(value_inputs(0, 1), events, ("x0 in S, x1 not", "x1 in S, x0 not"))


# == hadamard_variants: cmshe-apple, rhr-original ============================================
def _apple_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: _theory().cmshe_variance(p.epsilon, n, f, m=p.m)),
            f"{PLUG_IN} (theory.cmshe_variance, given the run's hash functions: the family's "
            "collision bias is not included)")


def _rhr_original_variance(server, candidates):
    p, n = server.params, server.n
    return ((lambda f: p.variance(n, f, location_fraction=1.0)),
            f"{PLUG_IN} (theory.rhr_original_variance with every user in the candidate's location block: "
            "an upper bound)")


def _rhr_original_plan(params):
    from .hadaoracle import _parity_sign
    block = np.uint64(params.B)

    def support(reports, w):
        x = np.uint64(w[0])
        sign = (1 - _parity_sign(reports.rows & (x % block))) // 2
        return reports.z.astype(np.int64) == 2 * int(x // block) + sign.astype(np.int64)
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))


# == hashtogram, treehist-cs =================================================================
def _count_sketch_plan(params):
    from .hadaoracle import _parity_sign
    pid = params.protocol

    def support(reports, w):
        n = len(reports.bits)
        x = np.full(n, w[0], dtype=np.uint64)
        if pid == "treehist-cs":
            x = x >> (params.L - (reports.groups.astype(np.int64) // params.R + 1)).astype(np.uint64)
        bucket, sign = params.hashes(reports.groups, x)
        return sign * _parity_sign(reports.rows.astype(np.uint64) & bucket) == reports.bits
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]),
                ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))


# == npcms ===================================================================================
def _npcms_eps(params):
    # L slots, each a one-hot vector whose two differing entries flip independently
    return 2 * params.L * rr_effective_epsilon(rr_threshold(params.epsilon / (2 * params.L), 2), 2)


def _npcms_plan(params):
    from ..errors import ParameterError
    if params.L != 1:
        raise ParameterError(f"the nPCMS audit plan needs L = 1 (one slot carries the whole budget), got {params.L}")
    cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
    other = int(np.flatnonzero(np.any(cells != cells[0], axis=1))[0])
    items = (0, other)

    def onehot(reports, w):
        rows = reports.rows.astype(np.int64)                      # (n, L)
        want = -np.ones(reports.bits.shape, dtype=np.int8)
        cell = cells[items[w]][rows[:, 0]] - rows[:, 0] * params.M
        want[np.arange(len(rows)), 0, cell] = 1
        return np.all(reports.bits.reshape(len(rows), -1) == want.reshape(len(rows), -1), axis=1)
    return Plan(set_inputs([0], [other]), support_events(onehot, 0, 1),
                ("bits = one-hot(x0) != one-hot(x1)", "bits = one-hot(x1) != one-hot(x0)"))


def _mod(name):
    import importlib
    return importlib.import_module(f"ldpfast.protocols.{name}")


def _hooks() -> Dict[str, Dict[str, Any]]:
    h = lambda _: _mod("hadamard")  # noqa: E731
    hv = lambda: _mod("hadamard_variants")  # noqa: E731
    return {
        "ocms": dict(example=_ocms_example, wire_fields=_ocms_wire, variance=_ocms_variance,
                     default_candidates=_ocms_candidates,
                     audit=AuditHooks(_ocms_audit_params, _ocms_plan,
                                      lambda p: rr_effective_epsilon(p.flip_threshold, p.m))),
        "grr": dict(example=_grr_example, wire_fields=lambda p: [WireField("y", bits_for(p.d))], variance=_grr_variance,
                    audit=AuditHooks(lambda e, **kw: _mod("grr").Params(e, 4, **kw), _grr_plan,
                                     lambda p: rr_effective_epsilon(p.flip_threshold, p.d))),
        "hrr": dict(example=_hadamard_example("HRRParams", epsilon=1.0, d=300), wire_fields=_row_bit_wire,
                    variance=_hrr_variance,
                    audit=AuditHooks(lambda e, **kw: h("").HRRParams(e, 4, **kw), _layout_plan, _binary_eps)),
        "he": dict(example=_hadamard_example("HEParams", epsilon=1.0, d=300), wire_fields=_row_bit_wire,
                   variance=_hrr_variance,
                   audit=AuditHooks(lambda e, **kw: h("").HEParams(e, 4, **kw), _layout_plan, _binary_eps)),
        # Apple CMS+HE: the hash index, the row and one bit.
        "cmshe": dict(example=_hadamard_example("CMSHEParams", epsilon=2.0, d=300, k=8, m=32, hash_seed=7),
                      wire_fields=lambda p: [WireField("groups", bits_for(p.k), dtype="uint32")] + _row_bit_wire(p),
                      variance=_cmshe_variance,
                      audit=AuditHooks(lambda e, **kw: h("").CMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw),
                                       _layout_plan, _binary_eps)),
        # RHR: b-bit symbol and the row.
        "rhr": dict(example=_hadamard_example("RHRParams", epsilon=2.0, d=300),
                    wire_fields=lambda p: [WireField("z", p.b, dtype="uint32"),
                                           WireField("rows", bits_for(p.hadamard_size), dtype="uint32")],
                    variance=_rhr_variance,
                    audit=AuditHooks(lambda e, **kw: h("").RHRParams(e, 16, **kw), _rhr_plan,
                                     lambda p: rr_effective_epsilon(p.flip_threshold, p.symbols))),
        # OLH with the [PAN] hash over F_PRIME: ceil(log2 g) + 2 * 64.
        "olh": dict(example=_olh_example,
                    wire_fields=lambda p: [WireField("z", bits_for(p.g)), WireField("a0", 64), WireField("a1", 64)],
                    variance=_olh_variance,
                    audit=AuditHooks(lambda e, **kw: h("").OLHParams(e, 16, **kw), _olh_plan, _olh_eps)),
        # HadaOracle / HadaHeavy ([WW] Alg. 1, section 4): the subset j, the Hadamard row r and one bit.
        "hadaoracle": dict(example=_hadaoracle_example,
                           wire_fields=lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"),
                                                  WireField("rows", bits_for(p.m), dtype="uint32"),
                                                  WireField("bits", 1, _SIGN, "int8")],
                           audit=AuditHooks(lambda e, **kw: _mod("hadaoracle").Params.create(e, 64, 1000, hash_seed=1,
                                                                                             **kw),
                                            _layout_plan, _binary_eps)),
        "hadaheavy": dict(example=_hadaheavy_example,
                          wire_fields=lambda p: [WireField("groups", bits_for(p.t * p.k), dtype="uint32"),
                                                 WireField("rows", bits_for(p.m), dtype="uint32"),
                                                 WireField("bits", 1, _SIGN, "int8")],
                          audit=AuditHooks(lambda e, **kw: _mod("hadaheavy").Params.create(e, 64, 1000, hash_seed=1,
                                                                                           **kw),
                                           _layout_plan, _binary_eps)),
        "privsketch": dict(example=_sketch_example("Params"), inputs="sets", wire_fields=_privsketch_wire,
                           variance=_privsketch_variance, default_candidates=_tracked_candidates,
                           audit=AuditHooks(_audit_sketch("Params", K=4, M=16), _order_plan, _sketch_eps)),
        # PrivSketch-noSmp: every cell's bit and the ordering matrix.
        "privsketch-nosmp": dict(
            example=_sketch_example("NoSmpParams"), inputs="sets",
            wire_fields=lambda p: [WireField("bits", 1, _SIGN, "int8", (p.K, p.M)),
                                   WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))],
            variance=_nosmp_variance, default_candidates=_tracked_candidates,
            audit=AuditHooks(_audit_sketch("NoSmpParams", K=4, M=16), _order_plan, _sketch_eps)),
        # LDP-safe PrivSketch variant: the sampled cell (k, m) and one bit.
        "privsketch-ldp": dict(
            example=_sketch_example("SafeParams"), inputs="sets",
            wire_fields=lambda p: [WireField("k", bits_for(p.K), dtype="uint16"),
                                   WireField("m", bits_for(p.M), dtype="uint16"), WireField("bit", 1, _SIGN, "int8")],
            variance=_safe_variance,
            audit=AuditHooks(_audit_sketch("SafeParams", K=2, M=4), _sketch_bits_plan, _sketch_eps)),
        # Multi-PCMS-Mean: the row and its M bits; Multi-PCMS-Min: the whole K x M sketch.
        "multi-pcms-mean": dict(
            example=_sketch_example("MultiPCMSMeanParams"), inputs="sets",
            wire_fields=lambda p: [WireField("row", bits_for(p.K), dtype="uint16"),
                                   WireField("bits", 1, _SIGN, "int8", (p.M,))],
            variance=_mean_variance,
            audit=AuditHooks(_audit_sketch("MultiPCMSMeanParams", K=2, M=4), _sketch_bits_plan, _sketch_eps)),
        "multi-pcms-min": dict(
            example=_sketch_example("MultiPCMSMinParams"), inputs="sets",
            wire_fields=lambda p: [WireField("bits", 1, _SIGN, "int8", (p.K, p.M))],
            audit=AuditHooks(_audit_sketch("MultiPCMSMinParams", K=2, M=2), _sketch_bits_plan, _sketch_eps)),
        "ps-olh": dict(example=_ps_example("PSOLHParams", pad_len=3), inputs="sets", wire_fields=_olh_over_field_wire,
                       variance=_psolh_variance, default_candidates=_tracked_candidates,
                       audit=AuditHooks(_ps("PSOLHParams", d=64, pad_len=4), _psolh_plan, _olh_eps)),
        "svim-items": dict(example=_ps_example("SVIMItemParams", k=10), inputs="sets", wire_fields=_olh_over_field_wire,
                           variance=_svim_olh_variance,
                           audit=AuditHooks(_ps("SVIMItemParams", d=64), _svim_items_plan, _olh_eps)),
        "svim-lengths": dict(
            example=_ps_example("SVIMLengthParams", candidates=tuple(range(0, 60, 5))), inputs="sets",
            wire_fields=_olh_over_field_wire, variance=_svim_olh_variance,
            default_candidates=lambda server: np.arange(server.params.max_length + 1, dtype=np.int64),
            audit=AuditHooks(_ps("SVIMLengthParams", d=64, candidates=tuple(range(8))), _svim_lengths_plan, _olh_eps)),
        "svim-padded": dict(
            example=_ps_example("SVIMPaddedParams", candidates=tuple(range(0, 60, 5)), L=3), inputs="sets",
            wire_fields=_svim_padded_wire, variance=_svim_padded_variance,
            default_candidates=lambda server: np.asarray(server.params.candidates, dtype=np.int64),
            audit=AuditHooks(_ps("SVIMPaddedParams", d=1000, candidates=tuple(range(100, 200)), L=5),
                             _svim_padded_plan, _svim_padded_eps)),
        "cms-rappor": dict(variance=_own_variance, default_candidates=_tracked_candidates,
                           audit=AuditHooks(lambda e, **kw: _mod("rappor_cms").Params(epsilon=e, d=16, m=4, **kw),
                                            _rappor_plan, _rappor_eps)),
        "ss": dict(variance=_own_variance,
                   audit=AuditHooks(lambda e, **kw: _mod("subset_selection").Params(epsilon=e, d=4, **kw),
                                    _ss_plan, _ss_eps)),
        "cmshe-apple": dict(variance=_apple_variance,
                            audit=AuditHooks(lambda e, **kw: hv().AppleCMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw),
                                             _layout_plan, _binary_eps)),
        "rhr-original": dict(variance=_rhr_original_variance,
                             audit=AuditHooks(lambda e, **kw: hv().RHROriginalParams(epsilon=e, d=16, **kw),
                                              _rhr_original_plan,
                                              lambda p: rr_effective_epsilon(p.flip_threshold, p.symbols))),
        "hashtogram": dict(audit=AuditHooks(lambda e, **kw: _mod("hashtogram").Params(epsilon=e, d=64, R=3, T=8,
                                                                                      hash_seed=1, **kw),
                                            _count_sketch_plan, _binary_eps)),
        "treehist-cs": dict(audit=AuditHooks(lambda e, **kw: _mod("treehist_cs").Params(
            epsilon=e, d=64, R=3, T=8, delta=1.0, tau=2.0, hash_seed=1, **kw), _count_sketch_plan, _binary_eps)),
        "npcms": dict(inputs="sets",
                      audit=AuditHooks(lambda e, **kw: _mod("npcms").Params.create(epsilon=e, d=64, K=1, M=2, seed=1,
                                                                                   L=1, **kw),
                                       _npcms_plan, _npcms_eps)),
    }


# == ldpfast params: deployment comparisons (Protocol.compare) ==================================
def _ceil_log2(x: int) -> int:
    return max(0, (int(x) - 1).bit_length())


def _ocms_field_name(params) -> str:
    from .ocms import PRIME

    if params.field_kind == "binary":
        return f"GF(2^{params.field_size.bit_length() - 1})"
    if params.field_size == PRIME:
        return "F_p, p = 2^64 - 59"
    return f"F_p, p = {params.field_size}"


def _ocms_compare(epsilon, d, n, f_star, modes=("mse", "l"), field="paper", **_):
    from ..theory import ocms as to
    from .ocms import Params

    rows = []
    for mode in modes:
        p = Params.optimal(epsilon=epsilon, d=d, mode=mode, f_star=f_star, field=field)
        real = to.ocms_optimal_m(epsilon, mode, d, f_star)
        rows.append(ComparisonRow("MSE-OCMS+RR" if mode == "mse" else "l-OCMS+RR", p.m, p.communication_bits,
                                  lambda f, p=p: to.ocms_variance(p, n=n, f=f), to.ocms_l2(epsilon, d, n, p.m),
                                  f"real optimum m = {real:.3f}; field {_ocms_field_name(p)}"))
    return rows


def _he_compare(epsilon, d, n, f_star, **_):
    from ..theory import hadamard as th
    from ..theory import ocms as to

    hsize = 1 << d.bit_length()  # 2^ceil(log2(d+1))
    return [ComparisonRow("HE", 2, _ceil_log2(hsize) + 1, lambda f: th.he_variance(epsilon, n, f),
                          to.ocms_l2(epsilon, d, n, 2), f"Hadamard row ({_ceil_log2(hsize)} bits) + 1 bit")]


def _cmshe_compare(epsilon, d, n, f_star, **_):
    from ..theory import hadamard as th

    cms_m, cms_k = 1024, 2048

    def var(f):
        return th.cmshe_variance(epsilon, n, f, m=cms_m)
    return [ComparisonRow("CMS+HE", cms_m, _ceil_log2(cms_k) + _ceil_log2(1 << cms_m.bit_length()) + 1, var,
                          (d - 1) * var(0.0) + var(1.0),
                          "k = 2048 functions, m = 1024 (+ the fixed family's bias, PAN Thm 3.10)")]


def _olh_compare(epsilon, d, n, f_star, **_):
    from ..theory import hadamard as th
    from ..theory import ocms as to

    g = th.olh_g(epsilon)
    return [ComparisonRow("OLH", g, 128 + _ceil_log2(g), lambda f: to.ocms_variance(epsilon, g, n, f),
                          to.ocms_l2(epsilon, d, n, g),
                          "pairwise hash (a0, a1) in F_(2^64-59); a fully random hash would cost d log2(g) bits")]


def _rhr_compare(epsilon, d, n, f_star, **_):
    from ..theory import hadamard as th

    if epsilon > 21 or d > 2**28:
        return []
    e = math.exp(epsilon)
    b, base, sym, rsize = th.rhr_parameters(epsilon, d)
    c2 = ((e - 1 + sym) / (e - 1)) ** 2
    # sum over the dictionary of the share of users in x's residue class is at most
    # ceil(d / base) (all users in the largest class): the worst-case l2.
    share_sum = -(-d // base)
    l2 = (c2 * (share_sum * (e + 1) + 2 * (d - share_sum)) / (e - 1 + sym) - 1) / n
    return [ComparisonRow("RHR", sym, _ceil_log2(rsize) + b,
                          lambda f: th.rhr_variance(epsilon, n, f, residue_fraction=1.0), l2,
                          f"b = {b}, {base} residue blocks; MSE for values sharing their residue with all users "
                          "(PAN 6.1's adversarial data)")]


def _hrr_compare(epsilon, d, n, f_star, **_):
    from ..theory import hadamard as th

    if d > 2**30:
        return []
    hd = 1 << _ceil_log2(d)
    return [ComparisonRow("HRR", hd, _ceil_log2(hd) + 1, lambda f: th.hrr_variance(epsilon, n, f),
                          (d * th.c_eps(epsilon) ** 2 - 1) / n, "Hadamard row + 1 bit (WW Fact 2.1)")]


def _grr_compare(epsilon, d, n, f_star, **_):
    from ..theory import ocms as to

    def var(f):
        return to.grr_variance(epsilon, d, n, f)
    return [ComparisonRow("GRR", d, _ceil_log2(d), var, (d - 1) * var(0.0) + var(1.0), "k-ary RR on [d]")]


def _rappor_compare(epsilon, d, n, f_star, **_):
    from ..commands.params import affine_l2
    from .rappor_cms import Params

    rows = []
    for variant, name in (("symmetric", "CMS+sRP"), ("asymmetric", "CMS+aRP")):
        rp = Params.optimal(epsilon=epsilon, d=d, variant=variant)
        rows.append(ComparisonRow(name, rp.m, rp.communication_bits, lambda f, rp=rp: rp.variance(n, f),
                                  affine_l2(lambda f, rp=rp: rp.variance(n, f), d),
                                  "m-bit RAPPOR report, m within 1% of its m -> inf error (PAN App. G)"))
    return rows


def _ss_compare(epsilon, d, n, f_star, **_):
    from ..commands.params import affine_l2
    from .subset_selection import MAX_D, Params

    if d > MAX_D:
        return []
    sp = Params(epsilon=epsilon, d=d)
    return [ComparisonRow("SS", sp.k, sp.communication_bits, lambda f: sp.variance(n, f),
                          affine_l2(lambda f: sp.variance(n, f), d), f"k = {sp.k} of d values per report (Ye-Barg / Wang et al.)")]


_COMPARE = {"ocms": _ocms_compare, "he": _he_compare, "cmshe": _cmshe_compare, "olh": _olh_compare,
            "rhr": _rhr_compare, "hrr": _hrr_compare, "grr": _grr_compare, "cms-rappor": _rappor_compare,
            "ss": _ss_compare}


# == simulation entries (Protocol.simulations) ===============================================
def _draw(gen) -> int:
    return int(gen.integers(0, 2**63))


def _sim_ocms_variance(params, data, f):
    from ..theory import ocms as to
    return to.ocms_variance(params, n=data.n, f=f)  # Eq. 8/20 for its field and m


def _sim_ocms_l2(params, n, size):
    from ..theory import ocms as to
    return to.ocms_l2(params.epsilon, size, n, params.m)  # Eq. 22 with |X| for d


def _sim_ocms():
    from ..experiments import Algorithm
    from .ocms import Params
    return (Algorithm("ocms-mse", "MSE-OCMS+RR", "protocols.ocms",
                      lambda eps, data, gen: Params.optimal(epsilon=eps, d=data.d, mode="mse", f_star=data.f_star),
                      _sim_ocms_variance, _sim_ocms_l2,
                      "OCMS+RR, m minimizing the worst-case MSE for the data's f* (PAN Thm 3.6)"),
            Algorithm("ocms-l", "l-OCMS+RR", "protocols.ocms",
                      lambda eps, data, gen: Params.optimal(epsilon=eps, d=data.d, mode="l"),
                      _sim_ocms_variance, _sim_ocms_l2, "OCMS+RR, m minimizing l1/l2 (PAN Thm 3.8)"))


def _sim_he():
    from ..experiments import Algorithm
    from ..theory import ocms as to
    from .hadamard import HEParams
    return (Algorithm("he", "HE", "protocols.hadamard", lambda eps, data, gen: HEParams(epsilon=eps, d=data.d),
                      lambda params, data, f: to.he_variance(params.epsilon, data.n, f),  # CMS+RR with m = 2
                      lambda params, n, size: to.ocms_l2(params.epsilon, size, n, 2),
                      "Hadamard Encoding = CMS+RR with m = 2 (PAN section 6, R1)"),)


def _sim_cmshe_variance(params, data, f):
    from ..theory import hadamard as th
    # The family is redrawn every run, so its bias adds PAN Thm 3.10's term to the MSE.
    others = float(np.sum(data.frequencies(np.unique(data.values)) ** 2)) - f * f
    return th.cmshe_variance(params.epsilon, data.n, f, m=params.m, k=params.k, sum_sq_other=others)


def _sim_cmshe():
    from ..experiments import Algorithm
    from .hadamard import CMSHEParams
    return (Algorithm("cms-he", "CMS+HE", "protocols.hadamard",
                      lambda eps, data, gen: CMSHEParams(epsilon=eps, d=data.d, hash_seed=_draw(gen)),
                      _sim_cmshe_variance, None,
                      "Apple's CMS with HE, k = 2048, m = 1024, family redrawn per run (PAN section 6)"),)


def _sim_rhr_variance(params, data, f):
    from ..theory import hadamard as th
    base = params.base
    residues = np.bincount(data.values % base, minlength=base) / data.n
    share = residues[data.candidates % base]  # users sharing x mod base (x included)
    return th.rhr_variance(params.epsilon, data.n, f, residue_fraction=share)


def _sim_rhr():
    from ..experiments import Algorithm
    from .hadamard import RHRParams
    return (Algorithm("rhr", "RHR", "protocols.hadamard", lambda eps, data, gen: RHRParams(epsilon=eps, d=data.d),
                      _sim_rhr_variance, None, "Recursive Hadamard Response, R1's layout (PAN section 6)"),)


def _sim_olh():
    from ..experiments import Algorithm
    from ..theory import ocms as to
    from .hadamard import OLHParams
    return (Algorithm("olh", "OLH", "protocols.hadamard", lambda eps, data, gen: OLHParams(epsilon=eps, d=data.d),
                      lambda params, data, f: to.ocms_variance(params.epsilon, params.g, data.n, f),  # m = g
                      lambda params, n, size: to.ocms_l2(params.epsilon, size, n, params.g),
                      "Optimal Local Hashing, g = round(e^eps)+1, pairwise hash"),)


def _sim_hrr():
    from ..experiments import Algorithm
    from ..theory import hadamard as th
    from .hadamard import HRRParams
    return (Algorithm("hrr", "HRR", "protocols.hadamard", lambda eps, data, gen: HRRParams(epsilon=eps, d=data.d),
                      lambda params, data, f: th.hrr_variance(params.epsilon, data.n, f), None,
                      "Hadamard randomized response (WW Fact 2.1)"),)


def _sim_apple():
    from ..experiments import Algorithm
    from .hadamard_variants import AppleCMSHEParams
    return (Algorithm("cms-he-apple", "CMS+HE (Apple layout)", "protocols.hadamard_variants",
                      lambda eps, data, gen: AppleCMSHEParams(epsilon=eps, d=data.d, hash_seed=_draw(gen)),
                      _sim_cmshe_variance, None,
                      "Apple's HCMS: Hadamard size m = 1024, column h_j(x) (pure-LDP layout)"),)


def _sim_rhr_original_variance(params, data, f):
    high = params.B
    locations = np.bincount(data.values // high, minlength=params.D // high) / data.n
    return params.variance(data.n, f, location_fraction=locations[data.candidates // high])


def _sim_rhr_original():
    from ..experiments import Algorithm
    from .hadamard_variants import RHROriginalParams
    return (Algorithm("rhr-original", "RHR (original)", "protocols.hadamard_variants",
                      lambda eps, data, gen: RHROriginalParams(epsilon=eps, d=data.d),
                      _sim_rhr_original_variance, None,
                      "Recursive Hadamard Response, Chen et al.'s layout (location x // B), random rows"),)


def _sim_hadaoracle():
    from ..experiments import Algorithm
    from .hadaoracle import Params
    return (Algorithm("hadaoracle", "HadaOracle", "protocols.hadaoracle",
                      lambda eps, data, gen: Params.create(epsilon=eps, d=data.d, n=data.n, beta=0.05,
                                                           hash_seed=_draw(gen)),
                      None, None, "WW sketch: k subsets x HRR on [m], median query (beta = 0.05 defaults)"),)


def _sim_own_variance(params, data, f):
    return params.variance(data.n, f)  # the protocol's closed form (ldpfast.theory)


def _sim_own_l2(params, n, size):
    # Var is affine in f and sum_x f(x) <= 1 over the values of interest.
    at_zero, at_one = params.variance(n, 0.0), params.variance(n, 1.0)
    return float(size * at_zero + max(0.0, at_one - at_zero))


def _sim_rappor():
    from ..experiments import Algorithm
    from .rappor_cms import Params

    def make(variant):
        return lambda eps, data, gen: Params.optimal(epsilon=eps, d=data.d, variant=variant, tau=0.1)
    return (Algorithm("cms-srp", "CMS+sRP", "protocols.rappor_cms", make("symmetric"), _sim_own_variance,
                      _sim_own_l2, "CMS with symmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
                      server_candidates=True),
            Algorithm("cms-arp", "CMS+aRP", "protocols.rappor_cms", make("asymmetric"), _sim_own_variance,
                      _sim_own_l2, "CMS with asymmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
                      server_candidates=True))


def _sim_ss():
    from ..experiments import Algorithm
    from .subset_selection import Params
    return (Algorithm("ss", "SS", "protocols.subset_selection", lambda eps, data, gen: Params(epsilon=eps, d=data.d),
                      _sim_own_variance, _sim_own_l2, "Subset Selection, k ~ d/(e^eps+1) (O(d) work per user)"),)


def _sim_hashtogram():
    from ..experiments import Algorithm
    from .hashtogram import Params
    return (Algorithm("hashtogram", "Hashtogram", "protocols.hashtogram",
                      lambda eps, data, gen: Params.create(epsilon=eps, d=data.d, n=data.n, beta=0.05,
                                                           hash_seed=_draw(gen)),
                      None, None, "Bassily et al.'s Count-Sketch oracle: R groups, T ~ sqrt(n), median (WW Table 1)"),)


def _sim_grr():
    from ..experiments import Algorithm
    from ..theory import ocms as to
    from .grr import Params

    def l2(params, n, size):
        worst = to.grr_variance(params.epsilon, params.d, n, np.array([0.0, 1.0]))
        return float((size - 1) * worst[0] + worst[1])
    return (Algorithm("grr", "GRR", "protocols.grr", lambda eps, data, gen: Params(epsilon=eps, d=data.d),
                      lambda params, data, f: to.grr_variance(params.epsilon, params.d, data.n, f), l2,
                      "k-ary randomized response on the whole dictionary (d counters)"),)


def _sketch_run(pid, **estimate):
    """Run a K x M sketch protocol ([PS] defaults K = 4, M = 128) on set data and estimate
    the whole domain."""
    def run(eps, sets, gen, k):
        import warnings

        from .._base import protocol
        from .privsketch import PrivacyWarning

        proto = protocol(pid)
        params = proto.params.create(epsilon=eps, d=sets.d, seed=_draw(gen))
        with warnings.catch_warnings():  # PrivSketch's ordering matrix: simulated on purpose
            warnings.simplefilter("ignore", PrivacyWarning)
            reports = proto.client(params, rng=_draw(gen)).perturb(sets)
        return np.asarray(proto.aggregator(params).update(reports).estimate(**estimate), dtype=np.float64)
    return run


def _sim_sketch(name, label, summary, **estimate):
    def entries():
        from ..experiments import SetAlgorithm
        return (SetAlgorithm(name, label, f"protocols.{'npcms' if name == 'npcms' else 'privsketch'}",
                             _sketch_run(name, **estimate), summary),)
    return entries


def _ps_olh_run(eps, sets, gen, k):
    from . import privsketch as ps
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    server = ps.PSOLHServer(params).update(ps.PSOLHClient(params, rng=_draw(gen)).perturb(sets))
    return np.asarray(server.estimate(), dtype=np.float64)


def _ps_olh_theory(eps, sets):
    """Mean of PS-OLH's variance over the domain; it is the MSE only when no set is longer
    than the padding (P90 of the set sizes), when the estimate is unbiased."""
    from ..theory import privsketch as _theory_ps
    from . import privsketch as ps
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    if sets.n == 0 or int(sets.sizes().max()) > params.pad_len:
        return None
    var = _theory_ps.ps_olh_variance(eps, sets.n, sets.frequencies(), pad_len=params.pad_len, g=params.g)
    return float(np.mean(var))


def _sim_ps_olh():
    from ..experiments import SetAlgorithm
    return (SetAlgorithm("ps-olh", "PS-OLH", "protocols.privsketch", _ps_olh_run,
                         "padding-and-sampling OLH, padding = P90 of the set sizes (Wang et al. 2018)",
                         theory_mse=_ps_olh_theory),)


def _svim_run(eps, sets, gen, k):
    from . import privsketch as ps
    result = ps.svim(sets, eps, k=k, rng=_draw(gen))
    est = np.zeros(sets.d)
    est[np.asarray(result.top, dtype=np.intp)] = result.estimates
    return est


def _sim_svim():
    # SVIM's whole pipeline (its three user groups), listed under its first phase
    from ..experiments import SetAlgorithm
    return (SetAlgorithm("svim", "SVIM", "protocols.privsketch", _svim_run,
                         "SVIM frequent items: three user groups, top-k only (Wang, Li, Jha 2018)",
                         whole_domain=False),)


def _heavy_params(module, factory):
    return lambda eps, data, beta, gen: getattr(_mod(module).Params, factory)(
        eps, data.d, data.n, beta, hash_seed=_draw(gen))


def _sim_hadaheavy():
    from ..experiments import HeavyAlgorithm
    return (HeavyAlgorithm("hadaheavy", "HadaHeavy", "protocols.hadaheavy", _heavy_params("hadaheavy", "create"),
                           "WW HadaHeavy: prefix search over B-ary symbols, HadaOracle per level"),
            HeavyAlgorithm("treehist", "TreeHist", "protocols.hadaheavy", _heavy_params("hadaheavy", "treehist"),
                           "TreeHist as HadaHeavy with B = 2 (binary prefixes, HadaOracle levels)"))


def _sim_treehist_cs():
    from ..experiments import HeavyAlgorithm
    return (HeavyAlgorithm("treehist-cs", "TreeHist-CS", "protocols.treehist_cs",
                           _heavy_params("treehist_cs", "create"),
                           "Bassily et al.'s TreeHist with Count-Sketch (Hashtogram) level oracles"),)


_SIMULATIONS = {
    "ocms": _sim_ocms, "he": _sim_he, "cmshe": _sim_cmshe, "rhr": _sim_rhr, "olh": _sim_olh, "hrr": _sim_hrr,
    "cmshe-apple": _sim_apple, "rhr-original": _sim_rhr_original, "hadaoracle": _sim_hadaoracle,
    "cms-rappor": _sim_rappor, "ss": _sim_ss, "hashtogram": _sim_hashtogram, "grr": _sim_grr,
    "privsketch": _sim_sketch("privsketch", "PrivSketch", "PrivSketch, K=4, M=128, R2 estimator (NOT eps-LDP: its "
                              "ordering matrix leaks, PS reproduction only)"),
    "privsketch-nosmp": _sim_sketch("privsketch-nosmp", "PrivSketch-noSmp",
                                    "PrivSketch without sampling: every cell with eps/(KM) (NOT eps-LDP, as PrivSketch)"),
    "privsketch-ldp": _sim_sketch("privsketch-ldp", "PrivSketch-LDP", "LDP-safe PrivSketch: no ordering matrix, "
                                  "one sampled cell, fill-corrected count-mean", estimator="mean-corrected"),
    "multi-pcms-mean": _sim_sketch("multi-pcms-mean", "Multi-PCMS-Mean",
                                   "one sketch row per user, eps/M per cell, count-mean decoding (PS baseline)"),
    "multi-pcms-min": _sim_sketch("multi-pcms-min", "Multi-PCMS-Min",
                                  "whole sketch per user, eps/(KM) per cell, count-min decoding (PS baseline)"),
    "ps-olh": _sim_ps_olh,
    "npcms": _sim_sketch("npcms", "nPCMS", "L = 78 Apple CMS reports per user with eps/L each (R2's n x CMS baseline)"),
    "svim-items": _sim_svim,
    "hadaheavy": _sim_hadaheavy, "treehist-cs": _sim_treehist_cs,
}


_attached = False


def attach() -> None:
    global _attached
    if _attached:
        return
    _attached = True
    for pid, hooks in _hooks().items():
        if pid in _COMPARE:
            hooks = dict(hooks, compare=_COMPARE[pid])
        if pid in _SIMULATIONS:
            hooks = dict(hooks, simulations=_SIMULATIONS[pid])
        if pid in _REGISTRY:
            _REGISTRY[pid] = dataclasses.replace(_REGISTRY[pid], **hooks)
