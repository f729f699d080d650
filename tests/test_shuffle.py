"""The shuffle accountant (ldpfast.theory.shuffle) against brute-force computations.

Every quantity the accountant sums in closed form (binomial tails, blocks of the clone
count) is recomputed here by enumerating the outcomes of small instances, so agreement
is to rounding (1e-12 absolute on deltas of order 1e-3..1), not a statistical tolerance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from ldpfast.errors import ParameterError  # noqa: E402
from ldpfast.theory import shuffle as sh  # noqa: E402
from scipy.stats import binom  # noqa: E402


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def _clone_pair_delta(eps0: float, n: int, eps: float, rho: float) -> float:
    """The w = 0 pair by enumeration: C ~ Bin(n-1, rho) (revealed by the output), A ~ Bin(C, 1/2)."""
    p = math.exp(eps0)
    keep, flip = p / (p + 1), 1 / (p + 1)
    total = 0.0
    for c in range(n):
        clones = binom.pmf(np.arange(c + 1), c, 0.5)
        shifted = np.concatenate([[0.0], clones])            # A + 1
        plain = np.concatenate([clones, [0.0]])              # A
        p0, p1 = keep * shifted + flip * plain, flip * shifted + keep * plain
        total += binom.pmf(c, n - 1, rho) * _hockey(p0, p1, eps)
    return total


def _trinomial_counts(n_others: int, others: tuple, victim: tuple) -> np.ndarray:
    """Distribution of (N0, N1) when n_others users report 0/1/else with ``others`` and one
    user with ``victim`` (probabilities of 0, 1, else), by repeated convolution."""
    dist = np.zeros((n_others + 2, n_others + 2))
    dist[0, 0] = 1.0
    for probs in [others] * n_others + [victim]:
        new = probs[2] * dist
        new[1:, :] += probs[0] * dist[:-1, :]
        new[:, 1:] += probs[1] * dist[:, :-1]
        dist = new
    return dist


@pytest.mark.parametrize("eps0, n", [(1.0, 12), (3.0, 30), (0.5, 7)])
def test_generic_pair_matches_enumeration(eps0, n):
    for analysis, rho in (("variation-ratio", 2 / (math.exp(eps0) + 1)), ("clones", math.exp(-eps0))):
        for eps in (0.05, 0.3, eps0 / 2):
            upper, lower = sh.pair_delta(eps0, n, eps, analysis)
            exact = _clone_pair_delta(eps0, n, eps, rho)
            assert upper == pytest.approx(exact, abs=1e-12) and lower == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("k", [3, 5])
def test_krr_pair_is_the_exact_shuffled_krr(k):
    """With every other user holding a third value, the shuffled k-RR histogram's (N0, N1)
    is sufficient; its hockey-stick divergence is the pair's (C hidden)."""
    eps0, n = 1.5, 9
    e = math.exp(eps0)
    other = 1 / (e + k - 1)
    p0 = _trinomial_counts(n - 1, (other, other, 1 - 2 * other), (e * other, other, 1 - (e + 1) * other))
    p1 = _trinomial_counts(n - 1, (other, other, 1 - 2 * other), (other, e * other, 1 - (e + 1) * other))
    for eps in (0.1, 0.4, 1.0):
        exact = max(_hockey(p0, p1, eps), _hockey(p1, p0, eps))
        assert sh.pair_delta(eps0, n, eps, k=k)[0] == pytest.approx(exact, abs=1e-12)


def test_binary_rr_delta_matches_enumeration():
    eps0, n = 2.0, 25
    q = 1 / (math.exp(eps0) + 1)
    base = binom.pmf(np.arange(n), n - 1, q)
    zero = np.convolve(base, [1 - q, q])                 # victim holds 0
    one = np.convolve(base, [q, 1 - q])                  # victim holds 1
    for eps in (0.1, 0.5, 1.5):
        exact = max(_hockey(zero, one, eps), _hockey(one, zero, eps))
        assert sh.binary_rr_shuffle_delta(eps0, n, eps) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("eps0, n", [(0.5, 50), (1.0, 200), (2.0, 1000), (4.0, 10**4), (1.0, 10**5)])
def test_upper_bound_never_below_exact_binary_rr(eps0, n):
    delta = 1e-6
    bound = sh.shuffle_epsilon(eps0, n, delta)
    # the exact central epsilon of shuffled binary RR, by bisection on its exact delta
    lo, hi = 0.0, eps0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sh.binary_rr_shuffle_delta(eps0, n, mid) > delta else (lo, mid)
    assert bound.lower >= lo * (1 - 1e-6)
    assert bound.upper >= hi * (1 - 1e-9)
    assert bound.upper <= eps0 and bound.upper <= bound.closed_form + 1e-12
    assert sh.pair_delta(eps0, n, bound.upper)[0] <= delta


# wangsw/PrivacyAmplification's upper bounds (T = 24 bisection steps), delta = 1e-6, as
# measured in /work/shared/TOOLBOX.md (copied here): ours must not be looser.
_PUBLISHED = [(10**6, 1.0, 0.003517), (10**6, 4.0, 0.03431), (10**6, 8.0, 0.3039),
              (10**8, 1.0, 0.0002601), (10**8, 4.0, 0.002801), (10**8, 8.0, 0.02567)]


@pytest.mark.parametrize("n, eps0, published", _PUBLISHED)
def test_at_least_as_tight_as_published_numerical_bounds(n, eps0, published):
    bound = sh.shuffle_epsilon(eps0, n, 1e-6)
    assert bound.lower < bound.upper <= published
    assert bound.upper >= 0.97 * published     # the same reduction: agreement, not a different quantity


def test_krr_bound_is_tighter_and_exact():
    generic = sh.shuffle_epsilon(1.0, 10**4, 1e-6)
    krr = sh.shuffle_epsilon(1.0, 10**4, 1e-6, k=8)
    assert krr.upper < generic.upper
    assert krr.lower == pytest.approx(krr.upper, rel=1e-5)


def test_composition_brackets_the_exact_two_round_deltas():
    """Two rounds of a small instance: the upper bound's delta is at least the composed
    clone pair's exact delta, and the lower bound's at most binary RR's exact one."""
    eps0, n, rounds, delta = 1.0, 30, 2, 1e-3
    bound = sh.shuffle_epsilon(eps0, n, delta, rounds=rounds)
    single = sh.shuffle_epsilon(eps0, n, delta)
    assert single.upper <= bound.upper <= rounds * single.upper + 1e-12
    q = 1 / (math.exp(eps0) + 1)
    base = binom.pmf(np.arange(n), n - 1, q)
    zero, one = np.convolve(base, [1 - q, q]), np.convolve(base, [q, 1 - q])
    zero2, one2 = np.outer(zero, zero), np.outer(one, one)
    exact_rr = max(_hockey(zero2, one2, bound.lower), _hockey(one2, zero2, bound.lower))
    assert exact_rr >= delta * (1 - 1e-9)            # lower bound: binary RR still leaks more than delta there
    # the clone pair, both rounds enumerated: its delta at the upper bound is within delta
    rho, p = 2 / (math.exp(eps0) + 1), math.exp(eps0)
    outcomes_p, outcomes_q = [], []
    for c in range(n):
        clones = binom.pmf(np.arange(c + 1), c, 0.5)
        shifted, plain = np.concatenate([[0.0], clones]), np.concatenate([clones, [0.0]])
        weight = binom.pmf(c, n - 1, rho)
        outcomes_p.append(weight * (p * shifted + plain) / (p + 1))
        outcomes_q.append(weight * (shifted + p * plain) / (p + 1))
    one_p, one_q = np.concatenate(outcomes_p), np.concatenate(outcomes_q)
    assert _hockey(np.outer(one_p, one_p), np.outer(one_q, one_q), bound.upper) <= delta * (1 + 1e-9)


def test_bad_input_is_refused():
    for kwargs in ({"eps0": 0.0, "n": 10, "delta": 1e-6}, {"eps0": 1.0, "n": 1, "delta": 1e-6},
                   {"eps0": 1.0, "n": 10, "delta": 1.0}):
        with pytest.raises(ParameterError):
            sh.shuffle_epsilon(**kwargs)
    with pytest.raises(ParameterError, match="rounds"):
        sh.shuffle_epsilon(1.0, 10, 1e-6, rounds=0)
    with pytest.raises(ParameterError, match="analysis"):
        sh.shuffle_epsilon(1.0, 10, 1e-6, analysis="blanket")


def test_cli_shuffle_params_and_json(capsys):
    import json

    from ldpfast.cli import main

    assert main(["shuffle", "--eps", "1,4", "--n", "1e6", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["eps0"] for r in rows] == [1.0, 4.0]
    assert rows[0]["upper"] == pytest.approx(sh.shuffle_epsilon(1.0, 10**6, 1e-6).upper)
    assert main(["params", "--eps", "2", "--d", "1000", "--n", "1e5", "--shuffle-delta", "1e-6", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["shuffle"]
    assert shown["eps0"] == 2.0 and shown["lower"] <= shown["upper"] < 2.0
    assert main(["shuffle", "--eps", "1", "--n", "1"]) == 2
    assert "n must be" in capsys.readouterr().err


def test_pair_deltas_refuse_an_eps_that_is_not_a_finite_number():
    for bad in (math.nan, -0.5, math.inf, "1", True):
        with pytest.raises(ParameterError, match=f"eps must be a finite number >= 0, got {bad!r}"):
            sh.pair_delta(1.0, 100, bad)
        with pytest.raises(ParameterError, match="eps must be"):
            sh.binary_rr_shuffle_delta(1.0, 100, bad)
    with pytest.raises(ParameterError, match="eps0"):
        sh.pair_delta(math.nan, 100, 0.5)
    with pytest.raises(ParameterError, match="k must be"):
        sh.pair_delta(1.0, 100, 0.5, k=1)
    # no loss of the pairs exceeds eps0: delta at any larger eps (e^eps overflows past 709) is delta at eps0
    assert sh.pair_delta(2.0, 100, 800.0) == sh.pair_delta(2.0, 100, 2.0)
    assert sh.binary_rr_shuffle_delta(2.0, 100, 1e6) == sh.binary_rr_shuffle_delta(2.0, 100, 2.0) == 0.0


def test_composed_delta_is_exact_past_the_overflow_of_e_to_the_eps():
    """The issue's reproducer (eps0 = 8, 200 rounds): the bisection asks the composed
    privacy-loss distribution for delta at eps up to 1600, where e^eps overflows. Its suffix
    sums (log space) are checked against the definition summed term by term, which never
    overflows (e^(eps - L) <= 1 where L > eps): both are sums of the same <= 64,000 terms in
    double precision, so they agree to 64,000 x 2^-52 ~ 1.5e-11 absolute (1e-10 allowed, the
    module's stated FFT rounding)."""
    from ldpfast.theory import _pld

    composed = _pld._clone_pld(8.0, 1000, "variation-ratio", 0.05, 8.0).compose(200)
    loss = (composed.offset + np.arange(composed.mass.size)) * composed.h
    for eps in (0.0, 0.5, 50.0, 709.0, 800.0, 1300.0):
        above = loss > eps
        direct = float(np.dot(composed.mass[above], -np.expm1(eps - loss[above]))) + composed.infinite
        assert composed.delta(eps) == pytest.approx(direct, abs=1e-10)
    bound = sh.shuffle_epsilon(8.0, 1000, 1e-6, rounds=200)
    # basic composition of 200 eps0-DP rounds caps it; shuffling 1000 users still amplifies
    assert 0.0 < bound.lower <= bound.upper < 200 * 8.0
    assert bound.upper <= sh.shuffle_epsilon(8.0, 300, 1e-6, rounds=200).upper       # more users, less loss
