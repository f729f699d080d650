"""Budgets never round up: for every audited protocol and random epsilons, the privacy loss
of the integer thresholds its client really uses is at most the claimed epsilon, checked
in exact rational arithmetic; every derived per-part budget (splits ``eps/D`` and the
amplified ``eps' = log(L(e^eps - 1) + 1)``) is rounded down; and
``ldpfast.audit.effective_epsilon`` never returns a double above epsilon.

The check: a client is eps-LDP when the product ``R`` of its parts' likelihood ratios
``(2^64 - t)(m - 1)/t`` (a rational number: ``t`` is the integer flip threshold over ``m``
symbols) is at most ``e^eps``. ``e^eps`` is transcendental, so it is bracketed: Python's
decimal ``exp`` is correctly rounded, so ``e^eps >= E (1 - 10^(1-P))`` for ``E`` its
``P``-digit result; ``R`` is compared with that rational lower bound as a Fraction. The
independent derivation of each protocol's composition is in ``_LOSS`` below (not the
protocols' own ``effective_epsilon`` hooks, which the test checks against it).
"""

import decimal
import math
import random
import warnings
import zlib
from fractions import Fraction

import pytest

from ldpfast import _budget, audit
from ldpfast._base import protocol
from _budgets_numeric import NUMERIC_LOSS
from _budgets_records import RECORD_LOSS
from ldpfast.protocols.repeated import rappor
from ldpfast.protocols._hadamard_layout import binary_flip_threshold
from ldpfast.protocols.repeated.dbitflip import DBitFlipParams, OneBitMeanParams
from ldpfast.protocols.repeated.longitudinal import LGRRParams, LOLHParams
from ldpfast.protocols.repeated.longitudinal_unary import LOSUEParams, LOUEParams, LSUEParams
from ldpfast.protocols.sets.multi_pcms import MultiPCMSMeanParams, MultiPCMSMinParams
from ldpfast.protocols.sets.npcms import NPCMSParams
from ldpfast.protocols.sets.privsketch import NoSmpParams
from ldpfast.protocols.sets.ps_olh import PSOLHParams
from ldpfast.protocols.sets.svim import SVIMPaddedParams

TWO64 = 2**64
DIGITS = 120
EPSILONS_PER_PROTOCOL = 40


def _exp(x: float) -> Fraction:
    """``e^x`` to ``DIGITS`` digits (Decimal of a float is exact; its exp is correctly rounded)."""
    with decimal.localcontext() as ctx:
        ctx.prec = DIGITS
        return Fraction(decimal.Decimal(x).exp())


def exp_lower(x: float) -> Fraction:
    """A rational lower bound of ``e^x``."""
    return _exp(x) * (1 - Fraction(1, 10 ** (DIGITS - 2)))


def exp_upper(x: float) -> Fraction:
    """A rational upper bound of ``e^x``."""
    return _exp(x) * (1 + Fraction(1, 10 ** (DIGITS - 2)))


def rr_ratio(t: int, symbols: int) -> Fraction:
    return Fraction((TWO64 - t) * (symbols - 1), t)


def _binary(params):
    return rr_ratio(binary_flip_threshold(params.epsilon), 2)


def _own(symbols):
    return lambda params: rr_ratio(params.flip_threshold, getattr(params, symbols))


def _sketch(params):
    bits = {"1": 1, "M": params.M, "K*M": params.K * params.M}[params.bit_divisor]
    return rr_ratio(params.flip_threshold, 2) ** bits


def _rappor(params):
    once = rr_ratio(params.zero_threshold, 2)
    return once ** 2 if params.variant == "symmetric" else once


def _ss(params):
    t = params.exclude_threshold
    return Fraction((TWO64 - t) * (params.d - params.k), t * params.k)


def _npcms(params):
    return rr_ratio(params.flip_threshold, 2) ** (2 * params.L)


def _svim_padded(params):
    if not params.uses_grr:
        return rr_ratio(params.flip_threshold, params.g)
    grr = rr_ratio(params.flip_threshold, params.domain)
    # sampling one of L padded values: the ratio of report probabilities is 1 + (R - 1)/L
    return grr if params.reference else 1 + (grr - 1) / params.L


def _pgr(params):
    # a point on the user's hyperplane (s of K points) with total probability t / 2^64
    t, s, k = params.in_threshold, params.hyperplane, params.points
    return Fraction(t * (k - s), (TWO64 - t) * s)


def _p(t):
    """A sampler's probability ``t / 2^64`` (its Bernoulli draw is 1 iff a uniform word is ``< t``)."""
    return Fraction(t, TWO64)


def unary_ratio(one, zero):
    """Independent bits, 1 with probability ``one`` at the value's position and ``zero``
    elsewhere: two values move one 1-bit, so the worst report ratio is the bit pair
    (1 at x, 0 at x') against the reverse."""
    if one < zero:
        one, zero = zero, one
    return one * (1 - zero) / (zero * (1 - one))


def binary_ratio(one, zero):
    """One bit, 1 with probability ``one`` from one input and ``zero`` from the other."""
    return max(one / zero, (1 - zero) / (1 - one), zero / one, (1 - one) / (1 - zero))


def _unary(params):
    t_one, t_zero = params.thresholds()
    return unary_ratio(_p(t_one), _p(t_zero))


def _two_stage_bits(params):
    """A permanent bit (``p1`` hot, ``q1`` cold) reported through a fresh one (1 with
    ``p2`` from a permanent 1, ``q2`` from a 0): ``P1 = p1 p2 + (1 - p1) q2`` hot, ``P0``
    cold."""
    p1, q1, p2, q2 = (_p(t) for t in params.thresholds)
    return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2


def _lue(params):
    return unary_ratio(*_two_stage_bits(params))


def _lue_permanent(params):
    return unary_ratio(*(_p(t) for t in params.thresholds[:2]))


def _two_stage_rr(params, symbols):
    """k-ary RR twice (flip to a uniform other symbol with ``t1``, then ``t2``): the report
    is the value with ``P = k1 k2 + (m - 1) o1 o2`` and one given other symbol with
    ``Q = k1 o2 + o1 k2 + (m - 2) o1 o2`` (``k = 1 - flip``, ``o = flip/(m - 1)``)."""
    m = symbols
    (k1, o1), (k2, o2) = ((1 - _p(t), _p(t) / (m - 1)) for t in params.thresholds)
    big_p, big_q = k1 * k2 + (m - 1) * o1 * o2, k1 * o2 + o1 * k2 + (m - 2) * o1 * o2
    return max(big_p / big_q, big_q / big_p)


def _memo_rr(symbols):
    return lambda params: _two_stage_rr(params, getattr(params, symbols))


def _memo_rr_permanent(symbols):
    return lambda params: rr_ratio(params.thresholds[0], getattr(params, symbols))


def _dbitflip(params):
    # buckets are drawn independently of the value; two values change at most two of the
    # sampled bits (one hot, one cold): the unary pair. No instantaneous noise (eps_1 = eps_inf).
    t_hot, t_cold = params.thresholds
    return unary_ratio(_p(t_hot), _p(t_cold))


def _one_bit_mean(params):
    # the report bit at x is a mixture over the rounding point: (x/m) P(1 | point m) +
    # (1 - x/m) P(1 | point 0), so the extremes x = m, x = 0 bound every pair
    top, bottom, flip = (_p(t) for t in params.thresholds)
    return binary_ratio(top * (1 - flip) + (1 - top) * flip, bottom * (1 - flip) + (1 - bottom) * flip)


def _one_bit_mean_permanent(params):
    top, bottom, _ = (_p(t) for t in params.thresholds)
    return binary_ratio(top, bottom)


def _rappor_bits(params):
    """``(q*, p*)``: a report bit is 1 with ``q*`` where the Bloom bit is 1, ``p*`` where
    it is 0. The PRR replaces a bit by a fair coin with probability ``f128/128`` (a mask
    byte's high 7 bits below ``f128``, its low bit the coin), the IRR reports 1 with
    ``t_q/2^64`` from a PRR 1 and ``t_p/2^64`` from a 0 (none: the PRR is sent)."""
    half = Fraction(params.f128, 256)
    thresholds = params.irr_thresholds()
    q, p = (Fraction(1), Fraction(0)) if thresholds is None else (_p(thresholds[0]), _p(thresholds[1]))
    return (1 - half) * q + half * p, half * q + (1 - half) * p


def _rappor_report(params):
    # two values' Bloom filters differ in at most h bits each way: h unary pairs
    return unary_ratio(*_rappor_bits(params)) ** params.h


def _rappor_permanent(params):
    half = Fraction(params.f128, 256)
    return unary_ratio(1 - half, half) ** params.h


def _pckv(params):
    """[PCKV] Theorems 2 and 3, recomputed: the largest ratio of one output's probabilities
    under two inputs (key, sign) (the padding sample and the discretization are mixtures over
    them). The value's sign is kept with ``p``; UE's sampled entry is nonzero with ``a = 1/2``
    (then ``v*`` w.p. ``p``), every other entry with ``b`` (a fair sign); GRR keeps the key
    with ``a``, else reports one of the ``d`` other keys with a fair sign."""
    p, b = 1 - _p(params.value_threshold), _p(params.key_threshold)
    if params.protocol == "pckv-ue":
        a = Fraction(1, 2)
        hot = (a * p, a * (1 - p), 1 - a)               # the entry's probabilities where it is sampled
        cold = (b / 2, b / 2, 1 - b)                    # and where it is not
        # two keys: one entry leaves hot for cold, the other the reverse
        keys = max(h / c for h, c in zip(hot, cold)) * max(c / h for h, c in zip(hot, cold))
        return max(p / (1 - p), keys)
    flip = b                                            # GRR's key threshold is its flip probability
    outputs = ((1 - flip) * p, (1 - flip) * (1 - p), flip / params.d / 2)
    return max(outputs) / min(outputs)


def _privkv(params):
    """Ye et al.'s PrivKV: the sampled key is data-independent; per input (holds it with sign
    +1, with sign -1, does not hold it) the probabilities of the reported sign +1, -1, 0."""
    p1, p2 = 1 - _p(params.key_threshold), 1 - _p(params.value_threshold)
    inputs = ((p1 * p2, p1 * (1 - p2), 1 - p1), (p1 * (1 - p2), p1 * p2, 1 - p1), ((1 - p1) / 2, (1 - p1) / 2, p1))
    return max(max(column) / min(column) for column in zip(*inputs))


#: protocol id -> params -> the exact likelihood ratio bound R (the client is log(R)-LDP).
_LOSS = {
    "grr": _own("d"), "ocms": _own("m"), "olh": _own("g"), "ps-olh": _own("g"), "svim-items": _own("g"),
    "svim-lengths": _own("g"), "blh": _own("g"), "pem": _own("g"), "rhr": _own("symbols"),
    "rhr-original": _own("symbols"),
    "hrr": _binary, "he": _binary, "cmshe": _binary, "cmshe-apple": _binary, "hadaoracle": _binary,
    "hadaheavy": _binary, "hashtogram": _binary, "treehist-cs": _binary,
    "privsketch": _sketch, "privsketch-nosmp": _sketch, "privsketch-ldp": _sketch, "multi-pcms-mean": _sketch,
    "multi-pcms-min": _sketch, "npcms": _npcms, "cms-rappor": _rappor, "ss": _ss, "svim-padded": _svim_padded,
    "pgr": _pgr, "oue": _unary, "sue": _unary, "l-oue": _lue, "l-osue": _lue, "l-sue": _lue,
    "l-grr": _memo_rr("d"), "l-olh": _memo_rr("g"), "dbitflip": _dbitflip, "1bitmean": _one_bit_mean,
    "rappor": _rappor_report, "pckv-ue": _pckv, "pckv-grr": _pckv,
    "privkv": _privkv,
}

# The numeric and record families' derivations.
_LOSS.update(NUMERIC_LOSS)
_LOSS.update(RECORD_LOSS)

#: Audited protocols with no exact loss, and why: their continuous draws (the Piecewise
#: Mechanism's, and the Laplace baseline's log1p) are computed in doubles from 53-bit uniforms
#: before the randomized rounding to the output grid, so each output's probability is the
#: mechanism's only to within double rounding (about 2^-50 relative), not a rational number the
#: thresholds fix. HM, sampled-mean and moments use the same samplers at these epsilons. The
#: empirical audit (tests/test_conformance.py) covers them; docs/guide/numeric.md says so.
FLOATING_POINT_SAMPLERS = {"pm", "hm", "laplace", "sampled-mean", "moments"}

#: Memoized protocols: params -> the exact ratio bound of the permanent response (what
#: unboundedly many reports of one value reveal), checked against ``params.eps_inf``.
_PERMANENT_LOSS = {
    "l-oue": _lue_permanent, "l-osue": _lue_permanent, "l-sue": _lue_permanent,
    "l-grr": _memo_rr_permanent("d"), "l-olh": _memo_rr_permanent("g"), "dbitflip": _dbitflip,
    "1bitmean": _one_bit_mean_permanent, "rappor": _rappor_permanent,
}

#: Configurations with non-power-of-two divisors (the audit's defaults have small ones).
_EXTRA = {
    "multi-pcms-min": lambda e: MultiPCMSMinParams.create(epsilon=e, d=64, K=3, M=5, seed=1),
    "multi-pcms-mean": lambda e: MultiPCMSMeanParams.create(epsilon=e, d=64, K=2, M=7, seed=1),
    "privsketch-nosmp": lambda e: NoSmpParams.create(epsilon=e, d=64, K=3, M=11, seed=1),
    "npcms": lambda e: NPCMSParams.create(epsilon=e, d=64, K=2, M=4, seed=1, L=78),
    "svim-padded": lambda e: SVIMPaddedParams(epsilon=e, d=1000, candidates=tuple(range(100, 200)), L=7),
    "ps-olh": lambda e: PSOLHParams(epsilon=e, d=64, pad_len=3, amplify=True),
    # memoized: other budget ratios, domains, encodings (the audit's have eps_inf = 2 eps_1)
    "l-grr": lambda e: LGRRParams(eps_inf=1.3 * e, eps_1=e, d=1000),
    "l-olh": lambda e: LOLHParams(eps_inf=5.0 * e, eps_1=e, d=1000, g=7),
    "l-oue": lambda e: LOUEParams(eps_inf=3.0 * e, eps_1=e, d=100),
    "l-osue": lambda e: LOSUEParams(eps_inf=1.1 * e, eps_1=e, d=100),
    "l-sue": lambda e: LSUEParams(eps_inf=e, eps_1=e, d=100),
    "dbitflip": lambda e: DBitFlipParams(epsilon=e, d=100, sampled=7),
    "1bitmean": lambda e: OneBitMeanParams(eps_inf=1.5 * e, eps_1=e, m=1000),
    "rappor": lambda e: rappor.RAPPORParams.from_budgets(3.0 * e, e, k=32, h=3, m=4, encoding="cpp"),
}


def test_every_audited_protocol_has_an_exact_loss():
    assert set(_LOSS) | FLOATING_POINT_SAMPLERS == set(audit.audited())
    assert not set(_LOSS) & FLOATING_POINT_SAMPLERS
    assert set(_PERMANENT_LOSS) == set(audit.audited("permanent"))


def _epsilons(seed, low=0.05, high=66.0):
    rng = random.Random(seed)
    return [math.exp(rng.uniform(math.log(low), math.log(high))) for _ in range(EPSILONS_PER_PROTOCOL)]


def _check(params, claimed):
    ratio = _LOSS[params.protocol](params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reported = audit.effective_epsilon(params)
    if params.protocol == "ps-olh" and params.amplify:
        claimed = params.olh_epsilon          # amplified OLH is eps'-LDP, not eps-LDP (documented)
    _check_ratio(params, ratio, reported, claimed)
    if params.protocol in _PERMANENT_LOSS:    # the permanent response against the eps_inf claimed
        permanent = protocol(params.protocol).audit.permanent_epsilon(params)
        _check_ratio(params, _PERMANENT_LOSS[params.protocol](params), permanent, float(params.eps_inf))


def _check_ratio(params, ratio, reported, claimed):
    assert ratio <= exp_lower(claimed), (params, claimed)
    assert reported <= claimed, (params, reported, claimed)
    # the reported double is the exact loss rounded up, never below it (up to the 90-digit
    # logarithm it is computed from)
    assert exp_lower(reported) >= ratio * (1 - Fraction(1, 10**80)), (params, reported)


@pytest.mark.parametrize("pid", sorted(_LOSS))
def test_thresholds_never_exceed_epsilon_exactly(pid):
    """Random epsilons over the whole range each protocol accepts (those it refuses are
    skipped: the refusal is tested elsewhere). ``checked`` makes sure the test does not
    pass on refusals alone."""
    checked = 0
    for eps in _epsilons(zlib.crc32(pid.encode())):
        makers = [lambda e: audit.default_params(pid, e)] + ([_EXTRA[pid]] if pid in _EXTRA else [])
        for make in makers:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    params = make(eps)
            except Exception as exc:          # outside the sampler's range for this configuration
                assert "epsilon" in str(exc), exc
                continue
            _check(params, eps)
            checked += 1
    assert checked >= EPSILONS_PER_PROTOCOL // 2, checked


def test_the_issue_reproducer():
    """Multi-PCMS-Min with K = 3, M = 5 at eps = 62.67 spent 5.3e-15 above eps before the
    per-bit budget was rounded down."""
    params = MultiPCMSMinParams.create(epsilon=62.67, d=64, K=3, M=5, seed=1)
    _check(params, 62.67)
    assert params.bit_epsilon * 15 <= 62.67 and Fraction(params.bit_epsilon) * 15 <= Fraction(62.67)


@pytest.mark.parametrize("parts", [2, 3, 5, 7, 15, 156, 65536, 12345])
def test_split_rounds_down_exactly(parts):
    for eps in _epsilons(parts, 2.0**-20, 66.5):
        b = _budget.split(eps, parts)
        assert Fraction(b) * parts <= Fraction(eps)
        # and it is the largest such double
        assert Fraction(math.nextafter(b, math.inf)) * parts > Fraction(eps)


@pytest.mark.parametrize("copies", [1, 2, 5, 78])
def test_amplified_budget_rounds_down(copies):
    """``eps' <= log(L(e^eps - 1) + 1)``, i.e. ``e^eps' <= L(e^eps - 1) + 1``, checked with
    a rational upper bound of ``e^eps'`` against a lower bound of the right side; and it is
    within a few ulps of the exact value (not rounded down needlessly far)."""
    for eps in _epsilons(copies, 0.01, 20.0):
        b = _budget.amplified(eps, copies)
        assert exp_upper(b) <= copies * (exp_lower(eps) - 1) + 1
        with decimal.localcontext() as ctx:
            ctx.prec = DIGITS
            exact = (copies * (decimal.Decimal(eps).exp() - 1) + 1).ln()
        assert decimal.Decimal(b) >= exact - 2 * decimal.Decimal(math.ulp(b))


def test_effective_rounds_up():
    with decimal.localcontext() as ctx:
        ctx.prec = 90
        for value in (decimal.Decimal(1) / 3, decimal.Decimal(2).ln(), decimal.Decimal("0.5")):
            out = _budget.effective(value)
            assert decimal.Decimal(out) >= value and decimal.Decimal(math.nextafter(out, -math.inf)) < value
