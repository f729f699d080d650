"""Client randomness: the ChaCha20 block function, exact RR sampling, reproducibility.

Statistical assertions use chi-square goodness-of-fit tests at level 1e-7 with fixed
keys/seeds, so they are deterministic and a correct sampler fails with probability < 1e-7.
"""

from fractions import Fraction
import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import _core
from ldpfast.errors import DTypeError, ParameterError
from ldpfast._validate import rr_effective_epsilon
from ldpfast.kernels import randomized_response, rr_flip_threshold

ALPHA = 1e-7


def chacha20_ref(key, counter, nonce):
    """Pure-Python ChaCha20 block (64-bit counter in words 12-13, 64-bit nonce in 14-15)."""
    mask = 0xFFFFFFFF

    def rotl(v, c):
        return ((v << c) | (v >> (32 - c))) & mask

    def qr(s, a, b, c, d):
        for x, y, z, bits in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
            s[x] = (s[x] + s[y]) & mask
            s[z] = rotl(s[z] ^ s[x], bits)

    words = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    words += [int.from_bytes(key[4 * i:4 * i + 4], "little") for i in range(8)]
    words += [counter & mask, counter >> 32, nonce & mask, nonce >> 32]
    s = list(words)
    for _ in range(10):
        for column in range(4):  # column rounds
            qr(s, column, column + 4, column + 8, column + 12)
        for diagonal in range(4):  # diagonal rounds
            qr(s, diagonal, 4 + (diagonal + 1) % 4, 8 + (diagonal + 2) % 4, 12 + (diagonal + 3) % 4)
    return b"".join(((a + b) & mask).to_bytes(4, "little") for a, b in zip(s, words))


def test_chacha20_rfc7539_block_vector():
    # RFC 7539 section 2.3.2: key 00..1f, block counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
    # In the 64/64 layout: words 12, 13 = 1, 0x09000000 and words 14, 15 = 0x4a000000, 0.
    key = bytes(range(32))
    expected = bytes.fromhex(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")
    block = _core.chacha20_block(key, (0x09000000 << 32) | 1, 0x4A000000)
    assert block == expected
    assert chacha20_ref(key, (0x09000000 << 32) | 1, 0x4A000000) == expected


@pytest.mark.parametrize("counter,nonce", [(0, 0), (2**32 - 1, 5), (2**64 - 1, 2**64 - 1), (12345, 2 | (7 << 48))])
def test_chacha20_matches_reference(counter, nonce):
    key = bytes((7 * i + 3) % 256 for i in range(32))
    assert _core.chacha20_block(key, counter, nonce) == chacha20_ref(key, counter, nonce)


def rr_element_ref(key, element, y, m, threshold, stream=1):
    """The RR draw of one batch element, from the pure-Python ChaCha20 (first block only)."""
    block = chacha20_ref(key, element, stream)
    words = [int.from_bytes(block[8 * i:8 * i + 8], "little") for i in range(8)]
    if words[0] >= threshold:
        return y
    bound = m - 1
    product = words[1] * bound
    assert product % 2**64 >= (2**64 - bound) % bound  # no rejection for these inputs
    other = product >> 64
    return other if other < y else other + 1


def test_rr_stream_layout_matches_reference(backend):
    """Every backend's batched (multi-block) ChaCha20 feeds element i from counter i."""
    key = bytes(range(100, 132))
    y = np.arange(37, dtype=np.uint64) % np.uint64(5)
    got = _core.randomized_response(key, y, 5, 2**63)
    want = [rr_element_ref(key, i, int(v), 5, 2**63) for i, v in enumerate(y)]
    assert [int(v) for v in got] == want


def chi2_pvalue_ok(observed, expected_probs):
    observed = np.asarray(observed, dtype=float)
    expected = observed.sum() * np.asarray(expected_probs, dtype=float)
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return statistic < stats.chi2.ppf(1 - ALPHA, len(observed) - 1), statistic


@pytest.mark.parametrize("m,eps,y", [(2, 1.0, 1), (5, 1.0, 2), (5, 3.0, 0), (21, 0.5, 20), (1000, 3.0, 999)])
def test_rr_distribution(m, eps, y):
    n = 200_000
    out = randomized_response(np.full(n, y, dtype=np.int64), m, eps, rng=20261121)
    observed = np.bincount(out.astype(np.int64), minlength=m)
    flip = Fraction(rr_flip_threshold(eps, m), 2**64)  # the realized flip probability
    probs = np.full(m, float(flip / (m - 1)))
    probs[y] = float(1 - flip)
    ok, statistic = chi2_pvalue_ok(observed, probs)
    assert ok, statistic
    # And the realized probability is the GRR one: p = e^eps / (e^eps + m - 1).
    assert abs(float(1 - flip) - math.exp(eps) / (math.exp(eps) + m - 1)) < 1e-15


def test_below_is_uniform_small_bound():
    # Flip always (threshold 2^64 - 1 fails only for the word 2^64 - 1): output uniform on
    # the other m - 1 = 6 symbols, drawn by below(6).
    n, m, y = 120_000, 7, 3
    out = _core.randomized_response(bytes(32), np.full(n, y, dtype=np.uint64), m, 2**64 - 1)
    observed = np.bincount(out.astype(np.int64), minlength=m)
    assert observed[y] == 0
    ok, statistic = chi2_pvalue_ok(np.delete(observed, y), np.full(m - 1, 1 / (m - 1)))
    assert ok, statistic


def test_below_is_uniform_large_bound():
    # bound = m - 1 = 3 * 2^62 (rejection region 2^62 wide): with y = m - 1 the output is the
    # draw itself; 12 equal bins of width 2^60.
    n, m = 120_000, 3 * 2**62 + 1
    out = _core.randomized_response(bytes(range(32)), np.full(n, m - 1, dtype=np.uint64), m, 2**64 - 1)
    bins = (out >> np.uint64(60)).astype(np.int64)
    assert bins.max() < 12
    ok, statistic = chi2_pvalue_ok(np.bincount(bins, minlength=12), np.full(12, 1 / 12))
    assert ok, statistic


def test_same_key_same_output_and_keys_differ():
    y = np.arange(5000, dtype=np.uint64) % np.uint64(50)
    key_a, key_b = bytes(range(32)), bytes(range(1, 33))
    a1 = _core.randomized_response(key_a, y, 50, 2**63)
    a2 = _core.randomized_response(key_a, y, 50, 2**63)
    b = _core.randomized_response(key_b, y, 50, 2**63)
    np.testing.assert_array_equal(a1, a2)
    # Two independent keys agree on an element with probability 1/4 + 1/4*1/49 + 1/2*(...) < 0.3;
    # 5000 agreements would be astronomically unlikely.
    assert np.count_nonzero(a1 == b) < 0.4 * len(y)


def test_thread_count_does_not_change_output(backend):
    y = np.arange(50_000, dtype=np.uint64) % np.uint64(9)
    outs = [_core.randomized_response(bytes(range(32)), y, 9, 2**62, threads) for threads in (1, 2, 7)]
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(randomized_response(y, 9, 1.0, rng=4, threads=1),
                                  randomized_response(y, 9, 1.0, rng=4, threads=3))


def test_key_source_reproducible_when_seeded():
    y = np.arange(2000) % 100
    np.testing.assert_array_equal(randomized_response(y, 100, 1.0, rng=3), randomized_response(y, 100, 1.0, rng=3))
    seq = np.random.SeedSequence(9)
    np.testing.assert_array_equal(randomized_response(y, 100, 1.0, rng=seq),
                                  randomized_response(y, 100, 1.0, rng=np.random.SeedSequence(9)))
    # rng=None draws a fresh OS-entropy key per call: two calls agree on an element with
    # probability < 0.3 (flip prob (99)/(e+99) ~ 0.97), so near-total agreement is impossible.
    a, b = randomized_response(y, 100, 1.0), randomized_response(y, 100, 1.0)
    assert np.count_nonzero(a == b) < 0.5 * len(y)


def test_flip_threshold_is_exact_to_double_precision():
    for eps, m in [(1.0, 2), (math.log(3), 3), (3.0, 5), (0.01, 1000), (23.0, 7), (12.0, 2**40)]:
        exact = (m - 1) / (Fraction(math.expm1(eps)) + m)  # exact given the double expm1(eps)
        t = rr_flip_threshold(eps, m)
        # Rounded up from the 80-digit value: at most 1 unit above; expm1 errs by an ulp.
        assert -float(exact) * 2**64 * 2**-51 <= t - exact * 2**64 <= 1 + float(exact) * 2**64 * 2**-51, (eps, m)
        assert rr_effective_epsilon(t, m) <= eps
    with pytest.raises(ParameterError, match=r"epsilon must be in \[.*, 23.567\] for randomized response over 5"):
        rr_flip_threshold(30.0, 5)  # flip probability below 2^-32: used to round to "never flips"
    with pytest.raises(ParameterError,
                       match=r"epsilon must be in \[.*\] for randomized response over 18446744073709551615"):
        rr_flip_threshold(1e-5, 2**64 - 1)  # keep probability below 2^-32


@pytest.mark.parametrize("kwargs,exc,pattern", [
    (dict(values=[0, 5], m=5, epsilon=1.0), ParameterError, r"values\[1\] = 5"),
    (dict(values=[-2], m=5, epsilon=1.0), ParameterError, r"values\[0\] = -2"),
    (dict(values=[0.5], m=5, epsilon=1.0), DTypeError, "integer array"),
    (dict(values=[[1]], m=5, epsilon=1.0), ParameterError, "1-D"),
    (dict(values=[0], m=1, epsilon=1.0), ParameterError, "m must be an integer in"),
    (dict(values=[0], m=2.0, epsilon=1.0), ParameterError, "m must be an integer"),
    (dict(values=[0], m=5, epsilon=0.0), ParameterError,
     r"epsilon must be finite and in \[9.53674e-07, 66.5\], got 0.0"),
    (dict(values=[0], m=5, epsilon=float("inf")), ParameterError, "epsilon"),
    (dict(values=[0], m=5, epsilon=701), ParameterError, "got 701"),
    (dict(values=[0], m=5, epsilon="1"), ParameterError, "epsilon"),
    (dict(values=[0], m=5, epsilon=1.0, rng="seed"), ParameterError, "rng must be"),
    (dict(values=[0], m=5, epsilon=1.0, threads=-1), ParameterError, "threads"),
])
def test_randomized_response_rejects_bad_input(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        randomized_response(**kwargs)


def test_randomized_response_empty_and_dtypes():
    assert randomized_response([], 5, 1.0, rng=1).shape == (0,)
    out = randomized_response(np.array([1, 2, 3], dtype=np.uint8), 4, 1.0, rng=1)
    assert out.dtype == np.uint64 and out.shape == (3,)


def test_ocms_perturb_stream_layout_matches_reference(backend):
    """Element i of ocms_perturb: a0, a1 = below(p) from words 0, 1 of its first block
    (stream 2), then the RR flip word and the replacement symbol."""
    p, m, threshold = 2**64 - 59, 7, 2**63
    key = bytes(range(50, 82))
    x = np.arange(21, dtype=np.uint64) * np.uint64(1000003)
    z, a0, a1 = _core.ocms_perturb(_core.Field.prime(p), key, x, m, threshold)
    for i in range(len(x)):
        block = chacha20_ref(key, i, 2)
        words = [int.from_bytes(block[8 * k:8 * k + 8], "little") for k in range(8)]
        assert all((w * p) % 2**64 >= (2**64 - p) % p for w in words[:2])  # no rejection here
        assert (int(a0[i]), int(a1[i])) == ((words[0] * p) >> 64, (words[1] * p) >> 64)
        y = ((int(a0[i]) + int(a1[i]) * int(x[i])) % p) % m
        if words[2] >= threshold:
            assert int(z[i]) == y
        else:
            other = (words[3] * (m - 1)) >> 64
            assert int(z[i]) == (other if other < y else other + 1)
