"""The bit-vector kernels (cpp/kernels/bitvec.cpp, rappor.cpp): the per-group column counts
against a numpy reference (every backend, several thread counts, rows that cross the
byte-counter and bit-sliced-counter flushes and the worker split, long rows), the
read-once validation (first bad group or padding bit), every client kernel bit-exact
across backends, the exact bit-sliced Bernoulli sampler, and memoization (the permanent
response is a function of the secret and the value only)."""

import math
import os

import numpy as np
import pytest
from scipy import stats

from ldpfast import _core
from ldpfast.protocols._bitvec import pack_bits, unpack_bits
from ldpfast.protocols._memo import new_secrets

KEY = bytes(range(32))
ALPHA = 1e-8
Z = stats.norm.isf(ALPHA / 2)


def reference_counts(rows, k, groups, n_groups):
    bits = unpack_bits(rows, k).astype(np.float64)
    member = np.zeros((len(rows), n_groups))
    member[np.arange(len(rows)), 0 if groups is None else groups.astype(np.intp)] = 1.0
    return (member.T @ bits).astype(np.uint64)


@pytest.mark.parametrize("k, n_groups", [(1, 1), (7, 3), (64, 1), (100, 5), (128, 64), (200, 2)])
def test_column_counts_match_numpy(backend, k, n_groups):
    rng = np.random.default_rng(k * 7 + n_groups)
    n = 3000
    rows = pack_bits(rng.integers(0, 2, size=(n, k), dtype=np.uint8))
    groups = rng.integers(0, n_groups, n).astype(np.uint32) if n_groups > 1 else None
    counts, per_group, bad = _core.bitvec_column_counts(rows, k, groups, n_groups, 1)
    assert bad == n
    np.testing.assert_array_equal(counts, reference_counts(rows, k, groups, n_groups))
    expected_n = np.bincount(groups, minlength=n_groups) if groups is not None else [n]
    np.testing.assert_array_equal(per_group, expected_n)


@pytest.mark.parametrize("n_groups", [1, 64])
def test_column_counts_do_not_depend_on_threads(backend, n_groups):
    # 2^17 rows: two workers with private tables, then reduced.
    rng = np.random.default_rng(3)
    rows = np.frombuffer(rng.bytes(16 << 17), dtype=np.uint8).reshape(-1, 16)
    groups = rng.integers(0, n_groups, rows.shape[0]).astype(np.uint32)
    one = _core.bitvec_column_counts(rows, 128, groups, n_groups, 1)
    two = _core.bitvec_column_counts(rows, 128, groups, n_groups, 2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    g = n_groups // 2
    np.testing.assert_array_equal(one[0][g], unpack_bits(rows[groups == g], 128).sum(axis=0))


def test_column_counts_long_runs_of_one_group(backend):
    # 300 ones per bit in one group: the byte counters flush at 255 and must carry exactly.
    rows = np.full((300, 3), 0xFF, dtype=np.uint8)
    counts, per_group, bad = _core.bitvec_column_counts(rows, 24, np.ones(300, np.uint32), 2, 1)
    assert bad == 300 and per_group.tolist() == [0, 300]
    assert counts[0].sum() == 0 and (counts[1] == 300).all()


@pytest.mark.parametrize("n_groups", [1, 3])
def test_column_counts_of_long_rows(backend, n_groups):
    # k = 20_001 bits (313 words, the last one partial). One group: rows are added 8 at a
    # time to 8 bit-sliced counter planes (vectors, then single words, then the last word),
    # flushed before 256 rows. 600 rows cross flushes and end in a partial group of 8; rows
    # 100..399 (one group) are all ones, so every counter reaches the flush bound at once.
    # A bad group or padding bit in the middle of a group of 8 stops there, the rows
    # before it counted.
    k, n = 20_001, 600
    rng = np.random.default_rng(11 + n_groups)
    rows = pack_bits(rng.integers(0, 2, size=(n, k), dtype=np.uint8))
    groups = rng.integers(0, n_groups, n).astype(np.uint32)
    groups[100:400] = n_groups - 1
    rows[100:400] = pack_bits(np.ones((1, k), dtype=np.uint8))
    for stop, bad_group in ((n, False), (517, True), (571, False)):
        cut, cut_rows = groups.copy(), rows
        if bad_group:
            cut[stop] = n_groups
        elif stop < n:
            cut_rows = rows.copy()
            cut_rows[stop, -1] |= 0x80  # bit 20_007: beyond k
        counts, per_group, bad = _core.bitvec_column_counts(cut_rows, k, cut, n_groups, 1)
        assert bad == stop
        for g in range(n_groups):
            np.testing.assert_array_equal(counts[g], unpack_bits(rows[:stop][groups[:stop] == g], k).sum(axis=0))
        np.testing.assert_array_equal(per_group, np.bincount(groups[:stop], minlength=n_groups))


@pytest.mark.parametrize("threads", [1, 2])
def test_column_counts_name_the_first_invalid_report(backend, threads):
    rng = np.random.default_rng(5)
    n, k = 80_000, 30
    rows = pack_bits(rng.integers(0, 2, size=(n, k)))
    groups = rng.integers(0, 4, n).astype(np.uint32)
    bad_rows = rows.copy()
    bad_rows[61_000, 3] |= 0x40          # bit 30: beyond k
    bad_rows[70_000, 3] |= 0x80
    assert _core.bitvec_column_counts(bad_rows, k, groups, 4, threads)[2] == 61_000
    bad_groups = groups.copy()
    bad_groups[45_123] = 4
    bad_groups[66_000] = 9
    assert _core.bitvec_column_counts(rows, k, bad_groups, 4, threads)[2] == 45_123


def test_column_count_arguments_are_checked():
    rows = np.zeros((3, 2), dtype=np.uint8)
    with pytest.raises(ValueError, match="rows must have 1 bytes per row"):
        _core.bitvec_column_counts(rows, 8, None, 1)
    with pytest.raises(ValueError, match="groups has length 2, expected 3"):
        _core.bitvec_column_counts(rows, 16, np.zeros(2, np.uint32), 1)
    with pytest.raises(TypeError, match="rows must have dtype uint8"):
        _core.bitvec_column_counts(rows.astype(np.int8), 16, None, 1)


def _client_outputs():
    rng = np.random.default_rng(2)
    n = 3001
    secrets = new_secrets(n, rng=3)
    x = rng.integers(0, 100, n).astype(np.uint64)
    rows = pack_bits(rng.integers(0, 2, size=(n, 100)))
    words = [rng.bytes(int(v)) for v in rng.integers(0, 80, 200)]
    data = np.frombuffer(b"".join(words), dtype=np.uint8).copy()
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int64)
    cohorts = rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32)
    bloom = pack_bits(rng.integers(0, 2, size=(200, 128)))
    rappor_secrets = new_secrets(200, rng=4)
    return {
        "unary": _core.unary_perturb(KEY, x, 100, 2**63, 3 * 2**60),
        "memo_unary": _core.memo_unary_perturb(KEY, secrets, x, 100, 2**63, 2**61, True, 2**63 + 5, 2**62 - 7),
        "memo_permanent": _core.memo_unary_perturb(KEY, secrets, x, 100, 2**63, 2**61, False, 0, 0),
        "bit_response": _core.bit_response(KEY, rows, 100, 2**64 - 2**60, 2**60),
        "memo_grr": _core.memo_grr(KEY, secrets, x, 100, 2**62, True, 2**61),
        "dbitflip": _core.dbitflip_perturb(secrets, x, 100, 7, 2**63 + 2**62, 2**62),
        "memo_draws": _core.memo_draws(secrets, 3, 2**64 - 59, 2),
        "bloom": _core.rappor_bloom_positions(2, 1024, 8, data, offsets, cohorts),
        "cohorts": _core.rappor_cohorts(1, rappor_secrets, 64),
        "prr": [_core.rappor_permanent(e, k, 37, rappor_secrets, b"metric", np.ascontiguousarray(bloom[:, :k // 8]))
                for e, k in ((0, 32), (1, 32), (2, 128))],
    }


def test_client_kernels_are_identical_on_every_backend():
    previous = _core.active_backend()
    outputs = {}
    try:
        for name in _core.supported_backends():
            _core.set_backend(name)
            outputs[name] = _client_outputs()
    finally:
        _core.set_backend(previous)
    reference = outputs["scalar"]
    for name, got in outputs.items():
        for kernel, value in got.items():
            mine = list(value) if isinstance(value, (tuple, list)) else [value]
            theirs = list(reference[kernel]) if isinstance(value, (tuple, list)) else [reference[kernel]]
            for a, b in zip(mine, theirs):
                np.testing.assert_array_equal(a, b, err_msg=f"{kernel} on {name}")


def test_client_outputs_do_not_depend_on_threads():
    secrets = new_secrets(20_000, rng=1)
    x = np.arange(20_000, dtype=np.uint64) % 50
    a = _core.memo_unary_perturb(KEY, secrets, x, 50, 2**63, 2**61, True, 2**63, 2**61, threads=1)
    b = _core.memo_unary_perturb(KEY, secrets, x, 50, 2**63, 2**61, True, 2**63, 2**61, threads=2)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("t_one, t_zero", [(2**63, 2**62), (2**64 - 1, 1), (12345678901234567890, 987654321)])
def test_bernoulli_rows_have_the_exact_probabilities(t_one, t_zero):
    # Every bit is an independent Bernoulli(t / 2^64) given its input bit; the observed rate
    # of N bits is within Z = 5.7 sd of it (or, for probabilities within 2^-60 of 0 or 1,
    # every bit equals its limit with probability > 1 - N 2^-60).
    n, k = 20_000, 200
    given = pack_bits(np.random.default_rng(1).integers(0, 2, size=(n, k)))
    out = unpack_bits(_core.bit_response(KEY, given, k, t_one, t_zero), k)
    dense = unpack_bits(given, k).astype(bool)
    for mask, t in ((dense, t_one), (~dense, t_zero)):
        p, count = t / 2**64, int(mask.sum())
        rate = out[mask].mean()
        sd = math.sqrt(p * (1 - p) / count)
        assert abs(rate - p) <= max(Z * sd, 2.0**-60 * 2), (rate, p)
    assert not unpack_bits(_core.bit_response(KEY, given, k, 0, 0), k).any()


def test_unary_rows_have_one_hot_bit():
    # OUE at p = 1/2 and q = 0 (threshold 0: never): only the value's bit can be set.
    x = np.arange(1000, dtype=np.uint64) % 70
    rows = unpack_bits(_core.unary_perturb(KEY, x, 70, 2**63, 0), 70)
    hot = rows[np.arange(1000), x.astype(np.intp)]
    assert rows.sum() == hot.sum() and 400 < hot.sum() < 600   # Binomial(1000, 1/2): 6.3 sd


def test_the_permanent_response_is_a_function_of_secret_and_value():
    secrets = new_secrets(1, rng=9)
    many = np.repeat(secrets, 500, axis=0)
    for value in (0, 17):
        x = np.full(500, value, dtype=np.uint64)
        prr = _core.memo_unary_perturb(os.urandom(32), many, x, 64, 2**63, 2**62, False, 0, 0)
        assert (prr == prr[0]).all()                       # memoized: one response per (secret, value)
        reports = _core.memo_unary_perturb(os.urandom(32), many, x, 64, 2**63, 2**62, True, 2**63, 2**61)
        assert len({r.tobytes() for r in reports}) > 400   # instantaneous: fresh per report
        grr_prr = _core.memo_grr(os.urandom(32), many, x, 10**6, 2**63, False, 0)
        assert (grr_prr == grr_prr[0]).all()
    other = new_secrets(500, rng=10)
    prr = _core.memo_grr(KEY, other, np.zeros(500, np.uint64), 10**6, 2**63, False, 0)
    assert len(set(prr.tolist())) > 200                    # other users: independent permanent responses


def test_dbitflip_samples_distinct_sorted_buckets_once_per_user():
    secrets = new_secrets(2000, rng=2)
    buckets, bits = _core.dbitflip_perturb(secrets, np.zeros(2000, np.uint64), 20, 5, 2**63, 2**62)
    assert (np.diff(buckets.astype(np.int64), axis=1) > 0).all() and buckets.max() < 20
    again, _ = _core.dbitflip_perturb(secrets, np.full(2000, 7, np.uint64), 20, 5, 2**63, 2**62)
    np.testing.assert_array_equal(buckets, again)          # the buckets do not depend on the value
    # each bucket is sampled with probability 5/20: counts within Z sd of 2000 * 5/20
    counts = np.bincount(buckets.ravel(), minlength=20)
    assert np.all(np.abs(counts - 500) < Z * math.sqrt(2000 * 0.25 * 0.75))
