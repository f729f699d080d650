"""HRR, HE, CMS+HE, RHR, OLH (ldpfast.protocols.frequency.hadamard) and the Hadamard C++ kernels.

Statistical tolerances: Z = 5.0 standard deviations (two-sided normal tail 5.7e-7 per
assertion); variance checks use the chi-square distribution of the sample variance at
tail probability 1e-7 on each side. Every test is seeded, so none can flake.
"""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

import ldpfast
from ldpfast import _core
from ldpfast._validate import probability_threshold
from ldpfast.protocols import _hadamard_layout
from ldpfast.protocols.frequency import hadamard_variants, hadaoracle, olh, rhr
from ldpfast.protocols.frequency import hadamard as H
from ldpfast.kernels.field import gf64_field
from ldpfast.errors import DTypeError, FormatError, IncompatibleError, ParameterError, ReportError
from ldpfast.theory import hadamard as th

Z = 5.0
KEY = bytes(range(32))


def parity_sign(r, c):
    """Reference H[r, c] = (-1)^popcount(r & c) for uint64 arrays."""
    v = (np.asarray(r, dtype=np.uint64) & np.asarray(c, dtype=np.uint64))
    bits = np.unpackbits(v.view(np.uint8)).reshape(-1, 64).sum(axis=1)
    return np.where(bits % 2, -1, 1).astype(np.int8)


def chi2_bounds(df, tail=1e-7):
    return stats.chi2.ppf(tail, df), stats.chi2.ppf(1 - tail, df)


# -- kernels --------------------------------------------------------------------------
def _table(rows, col_offset=0, groups=1, hash_modulus=0, shift=0, seed=1):
    coef = np.random.default_rng(seed).integers(0, 2**63, size=(groups, 2), dtype=np.uint64)
    t = np.zeros((groups, 7), dtype=np.uint64)
    t[:, 0:2] = coef
    t[:, 2] = hash_modulus
    t[:, 3] = col_offset
    t[:, 4] = rows
    t[:, 5] = np.arange(groups, dtype=np.uint64) * np.uint64(rows)
    t[:, 6] = shift
    return t


def _levels(groups):
    return np.array([0], np.uint32), np.array([groups], np.uint32)


def test_perturb_without_flips_is_the_hadamard_entry(backend):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 1000, 5000, dtype=np.uint64)
    for offset in (0, 1):
        g, r, b = _core.hadamard_perturb(KEY, x, _table(1024, offset), *_levels(1), flip_threshold=0)
        assert g is None and r.dtype == np.uint32 and b.dtype == np.int8
        assert r.max() < 1024
        np.testing.assert_array_equal(b, parity_sign(r.astype(np.uint64), x + np.uint64(offset)))


def test_perturb_hashed_groups_match_field_hash(backend):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True)
    table = _table(64, 0, groups=5, hash_modulus=64, shift=3)
    field = gf64_field()
    g, r, b = _core.hadamard_perturb(KEY, x, table, *_levels(5), field=field, flip_threshold=0)
    assert g.max() < 5
    y = _core.ocms_hash(field, table[g, 0].copy(), table[g, 1].copy(), x >> np.uint64(3), 64)
    np.testing.assert_array_equal(b, parity_sign(r.astype(np.uint64), y))


class PyElementRng:
    """Pure-Python model of ElementRng (rng.hpp): element i reads ChaCha20 blocks
    (counter i, nonce stream | block << 48) as little-endian 64-bit words."""

    def __init__(self, key, stream, element):
        self.key, self.stream, self.element, self.block, self.words = key, stream, element, 0, []

    def next_u64(self):
        if not self.words:
            raw = _core.chacha20_block(self.key, self.element, self.stream | (self.block << 48))
            self.block += 1
            self.words = list(np.frombuffer(raw, dtype="<u8").tolist())
        return self.words.pop(0)

    def below(self, bound):
        product = self.next_u64() * bound
        if product % 2**64 < bound:
            threshold = (2**64 - bound) % bound
            while product % 2**64 < threshold:
                product = self.next_u64() * bound
        return product >> 64


def test_perturb_matches_pure_python_model(backend):
    """Client randomness contract: row = below(D), then flip if the next word < threshold."""
    x = np.random.default_rng(9).integers(0, 1000, 300, dtype=np.uint64)
    thr = probability_threshold(0.3)
    for rows_size in (1024, 512):
        _, r, b = _core.hadamard_perturb(KEY, x, _table(rows_size), *_levels(1), flip_threshold=thr)
        for i in range(len(x)):
            rng = PyElementRng(KEY, 3, i)
            row = rng.below(rows_size)
            sign = int(parity_sign(np.array([row], np.uint64), x[i:i + 1])[0])
            if rng.next_u64() < thr:
                sign = -sign
            assert (int(r[i]), int(b[i])) == (row, sign)


def test_flip_rate_matches_probability():
    n = 200_000
    x = np.zeros(n, dtype=np.uint64)
    prob = 0.3
    _, r, b = _core.hadamard_perturb(KEY, x, _table(2), *_levels(1), flip_threshold=probability_threshold(prob))
    flips = np.count_nonzero(b == -1)  # column 0: H[r, 0] = +1
    assert abs(flips - n * prob) < Z * math.sqrt(n * prob * (1 - prob))


def test_perturb_backends_and_threads_agree(backend):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2**20, 40_000, dtype=np.uint64)
    table = _table(128, 0, groups=7, hash_modulus=128)
    first, count = np.array([0, 3], np.uint32), np.array([3, 4], np.uint32)
    thr = _hadamard_layout.binary_flip_threshold(1.0)
    got = _core.hadamard_perturb(KEY, x, table, first, count, field=gf64_field(), flip_threshold=thr, threads=3)
    previous = _core.active_backend()
    _core.set_backend("scalar")
    try:
        ref = _core.hadamard_perturb(KEY, x, table, first, count, field=gf64_field(), flip_threshold=thr, threads=1)
    finally:
        _core.set_backend(previous)
    for a, c in zip(got, ref):
        np.testing.assert_array_equal(a, c)
    # level draw: half the users per level, then uniform within
    level1 = np.count_nonzero(got[0] >= 3)
    assert abs(level1 - 20_000) < Z * math.sqrt(40_000 * 0.25)


@pytest.mark.parametrize("groups", [1, 6])
def test_accumulate_matches_numpy_all_threads(backend, groups):
    rng = np.random.default_rng(3)
    n, width = 300_000, 512
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    g = rng.integers(0, groups, n).astype(np.uint32) if groups > 1 else None
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    ref = np.zeros(groups * width, np.int64)
    np.add.at(ref, (g.astype(np.int64) * width if g is not None else 0) + rows, bits)
    for threads in (1, 2, 3, 8):
        z = np.zeros(groups * width, np.int64)
        _core.hadamard_accumulate(g, rows, bits, base, z, threads)
        np.testing.assert_array_equal(z, ref)


@pytest.mark.parametrize("n_bad", [0, 1, 3])
def test_validated_update_is_all_or_nothing(backend, n_bad):
    rng = np.random.default_rng(30 + n_bad)
    n, width, groups = 400_000, 256, 5
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    g = rng.integers(0, groups, n).astype(np.uint32)
    bad_at = np.sort(rng.choice(n, n_bad, replace=False))
    bits[bad_at] = 0
    group_rows = np.full(groups, width, np.uint64)
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    start = rng.integers(-5, 5, groups * width).astype(np.int64)
    for threads in (1, 2, 4):
        z = start.copy()
        got = _core.hadamard_update(g, rows, bits, group_rows, base, z, threads)
        if n_bad:
            assert got == bad_at[0]
            np.testing.assert_array_equal(z, start)
        else:
            ref = start.copy()
            np.add.at(ref, g.astype(np.int64) * width + rows, bits)
            assert got == n
            np.testing.assert_array_equal(z, ref)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 20_000), st.sampled_from(["group", "row", "bit", "none"]), st.integers(0, 2**31))
def test_first_invalid_matches_reference(position, what, seed):
    rng = np.random.default_rng(seed)
    n = 20_001
    rows = rng.integers(0, 16, n).astype(np.uint32)
    groups = rng.integers(0, 3, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    group_rows = np.array([16, 8, 16], np.uint64)
    rows[groups == 1] %= 8
    if what == "group":
        groups[position] = 3
    elif what == "row":
        groups[position] = 1
        rows[position] = 8
    elif what == "bit":
        bits[position] = rng.choice([0, 2, 127, -128])
    expected = n if what == "none" else position
    assert _core.hadamard_first_invalid(groups, rows, bits, group_rows, 2) == expected


def _heavy_cell_batch(rng, n, width, groups):
    """Uniform reports plus cells hit far more often than an int16 partial table can hold:
    +1 x 200_000 (six int16 overflows), -1 x 100_000, +1 x 32_767 and x 32_768 (the int16
    limit and one past it), and a mixed-sign cell whose partial sums swing across the
    whole int16 range. Shuffled, so every worker's range gets a share of each."""
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    g = rng.integers(0, groups, n).astype(np.uint32) if groups > 1 else None
    start = 0
    for cell, count, sign in ((7, 200_000, 1), (9, 100_000, -1), (11, 32_767, 1), (13, 32_768, 1)):
        rows[start:start + count] = cell
        bits[start:start + count] = sign
        start += count
    swing = 120_000  # runs of 40_000 +1, then 80_000 -1 (ordered), at cell 15
    rows[start:start + swing] = 15
    bits[start:start + 40_000] = 1
    bits[start + 40_000:start + swing] = -1
    perm = np.concatenate([rng.permutation(start), np.arange(start, start + swing),
                           rng.permutation(np.arange(start + swing, n))])
    rows, bits = rows[perm], bits[perm]
    if g is not None:
        g = g[perm]
        g[start:start + swing] = 1  # keep the swing cell's run in one group and in order
    return g, rows, bits


@pytest.mark.parametrize("log2_width,groups", [(21, 1), (9, 1), (19, 4)])
def test_accumulate_exact_beyond_int16_range(backend, log2_width, groups):
    """Large z (> 2^20 cells) uses int16 partial tables that spill a cell to a side log when
    it would overflow; smaller z uses int32 tables. Both must equal np.bincount exactly,
    for every thread count, through accumulate and the validated update."""
    rng = np.random.default_rng(40 + log2_width)
    width = 2**log2_width
    n = 3_300_000  # > 3 * 2^20: three int16 workers even for 2^21 cells
    g, rows, bits = _heavy_cell_batch(rng, n, width, groups)
    cells = rows.astype(np.int64) + (g.astype(np.int64) * width if g is not None else 0)
    ref = np.bincount(cells, weights=bits, minlength=groups * width).astype(np.int64)
    assert np.abs(ref).max() > 2**15  # the batch really exceeds the int16 range
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    group_rows = np.full(groups, width, np.uint64)
    for threads in (1, 2, 3):
        z = np.zeros(groups * width, np.int64)
        _core.hadamard_accumulate(g, rows, bits, base, z, threads)
        np.testing.assert_array_equal(z, ref)
        z = np.full(groups * width, -3, np.int64)
        assert _core.hadamard_update(g, rows, bits, group_rows, base, z, threads) == n
        np.testing.assert_array_equal(z, ref - 3)


@pytest.mark.parametrize("groups", [1, 3])
def test_accumulate_exact_for_tables_beyond_private_copies(backend, groups):
    """Tables above 2^23 cells are split among the threads by cell range (each thread scans
    every report and adds those in its range). Every cell, including the range edges, the
    first and the last cell, must equal np.bincount for every thread count; an invalid
    report leaves z unchanged."""
    rng = np.random.default_rng(60 + groups)
    width = (2**23 + 4099) // groups + 1  # > 2^23 cells in all, not a multiple of any thread count
    n = 600_000
    g, rows, bits = _heavy_cell_batch(rng, n, width, groups)
    rows[-4:] = [0, width - 1, width // 2, width // 3]
    cells = rows.astype(np.int64) + (g.astype(np.int64) * width if g is not None else 0)
    n_cells = groups * width
    ref = np.bincount(cells, weights=bits, minlength=n_cells).astype(np.int64)
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    group_rows = np.full(groups, width, np.uint64)
    z = np.empty(n_cells, np.int64)
    for threads in (1, 2, 3, 5):
        z[:] = 0
        _core.hadamard_accumulate(g, rows, bits, base, z, threads)
        np.testing.assert_array_equal(z, ref)
        z[:] = 7
        assert _core.hadamard_update(g, rows, bits, group_rows, base, z, threads) == n
        np.testing.assert_array_equal(z, ref + 7)
    bits[n // 2] = 0
    z[:] = 7
    assert _core.hadamard_update(g, rows, bits, group_rows, base, z, 3) == n // 2
    assert (z == 7).all()


@pytest.mark.parametrize("log2_width,groups", [(9, 1), (21, 1), (9, 3), (19, 3)])
def test_validated_update_finds_first_invalid(backend, log2_width, groups):
    """Validation is fused into the accumulation loop (16 reports at a time, plus the
    unchecked tail of each worker's range). Bad groups, rows (against their own group's
    size) and bits at block edges and in worker tails must be found exactly, z unchanged."""
    rng = np.random.default_rng(50 + log2_width + groups)
    width = 2**log2_width
    n = 3 * 2**20 + 1001
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    if groups == 1:
        g, group_rows = None, np.array([width], np.uint64)
    else:
        g = rng.integers(0, groups, n).astype(np.uint32)
        group_rows = np.array([width, width // 2, width], np.uint64)  # group 1 uses half its cells
        rows[g == 1] %= width // 2
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    start = rng.integers(-9, 9, groups * width).astype(np.int64)
    thirds = [n // 3, 2 * n // 3, n]
    positions = [0, 15, 16, 17, 4095, 4096, n // 2, thirds[0] - 1, thirds[0] - 40, thirds[1] - 63, n - 1, n - 70]
    kinds = ("row", "bit") if groups == 1 else ("group", "row", "bit")
    for pos in positions:
        for what in kinds:
            gg = g.copy() if g is not None else None
            r, b = rows.copy(), bits.copy()
            if what == "group":
                gg[pos] = groups + pos % 5
            elif what == "row" and groups == 1:
                r[pos] = width + pos % 7
            elif what == "row":
                gg[pos] = 1
                r[pos] = width // 2 + pos % 7  # in range for groups 0 and 2, not for group 1
            else:
                b[pos] = (0, 2, -128, 127)[pos % 4]
            later = min(n - 1, pos + 1 + pos % 50)
            b[later] = 0  # a second invalid report after the first never wins
            for threads in (1, 2, 3):
                z = start.copy()
                assert _core.hadamard_update(gg, r, b, group_rows, base, z, threads) == pos, (pos, what, threads)
                np.testing.assert_array_equal(z, start)


@pytest.mark.parametrize("log2_cells, n", [(15, 40_000), (14, 70_000)], ids=["one-table", "two-tables"])
@pytest.mark.parametrize("groups", [1, 3])
def test_direct_tables_are_all_or_nothing(backend, log2_cells, n, groups):
    """Private int32 tables larger than L1 and at most 1 MiB are filled straight from the
    columns (each report read once into registers, checked, added; no block copy), one or
    two of them. Sums equal np.add.at; a bad group, row or bit at the first report, a
    1024-block edge, the middle or the last leaves z, group_sizes and count unchanged, for
    every thread count."""
    rng = np.random.default_rng(70 + log2_cells + groups)
    width = 2**log2_cells // groups
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    g = rng.integers(0, groups, n).astype(np.uint32) if groups > 1 else None
    cells = rows.astype(np.int64) + (g.astype(np.int64) * width if g is not None else 0)
    group_rows = np.full(groups, width, np.uint64)
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    start = rng.integers(-9, 9, groups * width).astype(np.int64)
    ref = start.copy()
    np.add.at(ref, cells, bits)
    sizes_ref = np.bincount(g if g is not None else np.zeros(n, np.int64), minlength=groups)
    kinds = ("row", "bit") if groups == 1 else ("group", "row", "bit")
    for threads in (1, 2):
        # the path taken: max(1, min(threads, n // 2^15)) int32 tables of 64 or 128 KiB
        tables = max(1, min(threads, n // 2**15)) * groups * width * 4
        assert _core.hadamard_update_scratch_bytes(n, groups * width, groups, threads) == tables + threads * groups * 8
        z, sizes, count = start.copy(), np.zeros(groups, np.int64), np.zeros(1, np.int64)
        assert _core.hadamard_update(g, rows, bits, group_rows, base, z, threads, sizes, count) == n
        np.testing.assert_array_equal(z, ref)
        np.testing.assert_array_equal(sizes, sizes_ref)
        assert count[0] == n
        for pos in (0, 1023, 1024, n // 2, n - 1):
            for what in kinds:
                gg = g.copy() if g is not None else None
                r, b = rows.copy(), bits.copy()
                if what == "group":
                    gg[pos] = groups
                elif what == "row":
                    r[pos] = width + pos % 3
                else:
                    b[pos] = (0, 2, -128, 127)[pos % 4]
                z, sizes, count = start.copy(), np.zeros(groups, np.int64), np.zeros(1, np.int64)
                assert _core.hadamard_update(gg, r, b, group_rows, base, z, threads, sizes, count) == pos
                np.testing.assert_array_equal(z, start)
                assert not sizes.any() and count[0] == 0


def test_rhr_kernel_backends_and_threads_agree(backend):
    x = np.random.default_rng(5).integers(0, 10**6, 30_000, dtype=np.uint64)
    thr = probability_threshold(0.6)
    got = _core.rhr_perturb(KEY, x, 4, 2**16, thr, None, 3)
    previous = _core.active_backend()
    _core.set_backend("scalar")
    try:
        ref = _core.rhr_perturb(KEY, x, 4, 2**16, thr, None, 1)
    finally:
        _core.set_backend(previous)
    for a, c in zip(got, ref):
        np.testing.assert_array_equal(a, c)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3000), max_size=4), st.sampled_from(["hrr", "cmshe", "rhr"]))
def test_merge_of_any_split_equals_one_pass(cuts, name):
    params, client_cls, server_cls = make(name)
    reports = client_cls(params, rng=17).perturb(np.arange(3000) % params.d)
    bounds = [0, *sorted(cuts), 3000]
    merged = server_cls(params)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        part = type(reports)(**{k: v[lo:hi] for k, v in reports.columns().items()})
        merged.merge(server_cls(params).update(part))
    assert merged == server_cls(params).update(reports)


def test_rhr_kernel_without_flips(backend):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 10**6, 5000, dtype=np.uint64)
    z, r = _core.rhr_perturb(KEY, x, 3, 2**17, 0)
    h01 = (parity_sign(r.astype(np.uint64), (x >> np.uint64(3)) + np.uint64(1)) > 0).astype(np.uint64)
    np.testing.assert_array_equal(z.astype(np.uint64), 2 * (x & np.uint64(7)) + h01)


# -- protocol factories ---------------------------------------------------------------
def make(name, eps=1.0, d=200):
    if name == "hrr":
        p = H.HRRParams(epsilon=eps, d=d)
        return p, H.HRRClient, H.HRRServer
    if name == "he":
        return H.HEParams(epsilon=eps, d=d), H.HEClient, H.HEServer
    if name == "cmshe":
        return H.CMSHEParams(epsilon=eps, d=d, k=64, m=32, hash_seed=11), H.CMSHEClient, H.CMSHEServer
    if name == "rhr":
        return rhr.RHRParams(epsilon=eps, d=d), rhr.RHRClient, rhr.RHRServer
    if name == "olh":
        return olh.OLHParams(epsilon=eps, d=d), olh.OLHClient, olh.OLHServer
    raise AssertionError(name)


PROTOCOLS = ["hrr", "he", "cmshe", "rhr", "olh"]


@pytest.mark.parametrize("name", PROTOCOLS)
def test_merge_and_serialization_round_trip(name):
    params, client_cls, server_cls = make(name)
    values = np.random.default_rng(5).integers(0, params.d, 4000)
    client = client_cls(params, rng=7)
    a, b = client.perturb(values[:2500]), client.perturb(values[2500:])
    whole = server_cls(params).update(a).update(b)
    left, right = server_cls(params).update(a), server_cls(params).update(b)
    assert left.merge(right) == whole
    empty = server_cls(params)
    assert empty.merge(whole) == whole  # empty aggregator is the identity
    restored = server_cls.from_bytes(whole.to_bytes())
    assert restored == whole
    np.testing.assert_array_equal(restored.estimate(np.arange(10)), whole.estimate(np.arange(10)))
    assert pickle.loads(pickle.dumps(whole)) == whole
    blob = bytearray(whole.to_bytes())
    blob[len(blob) // 2] ^= 1
    with pytest.raises(FormatError):
        server_cls.from_bytes(bytes(blob))
    other_params = make(name, eps=2.0)[0]
    with pytest.raises(IncompatibleError):
        whole.merge(server_cls(other_params))
    assert name in ldpfast._base.protocols()


@pytest.mark.parametrize("name", ["hrr", "he", "cmshe", "rhr"])
def test_server_thread_count_independence(name):
    params, client_cls, server_cls = make(name, d=5000)
    values = np.random.default_rng(6).integers(0, params.d, 200_000)
    reports = client_cls(params, rng=3, threads=1).perturb(values)
    reports3 = client_cls(params, rng=3, threads=3).perturb(values)
    for col in reports.columns():
        np.testing.assert_array_equal(reports.columns()[col], reports3.columns()[col])
    one = server_cls(params, threads=1).update(reports)
    many = server_cls(params, threads=4).update(reports)
    assert one == many


def test_seeded_clients_reproduce_and_os_entropy_differs():
    params = H.HRRParams(epsilon=1.0, d=100)
    values = np.arange(100).repeat(10)
    a, b = H.HRRClient(params, rng=5).perturb(values), H.HRRClient(params, rng=5).perturb(values)
    np.testing.assert_array_equal(a.bits, b.bits)
    assert H.HRRClient(params, rng=5).seeded and not H.HRRClient(params).seeded
    c, e = H.HRRClient(params).perturb(values), H.HRRClient(params).perturb(values)
    assert not (np.array_equal(c.rows, e.rows) and np.array_equal(c.bits, e.bits))


# -- HRR statistics -------------------------------------------------------------------
def _hrr_runs(eps, d, values, runs, seed, rows=None):
    params = H.HRRParams(epsilon=eps, d=d)
    client = H.HRRClient(params, rng=seed)
    out = np.empty((runs, d))
    for i in range(runs):
        server = H.HRRServer(params)
        assigned = None if rows is None else server.assign_rows(len(values), rng=seed * 1000 + i)
        out[i] = server.update(client.perturb(values, rows=assigned)).estimate()
    return out


def test_hrr_unbiased_with_stated_variance():
    # eps = 3 makes c_eps^2 = 1.22 close to f = 0.9, so Var = (c^2 - f)/n is distinguishable
    # from c^2/n: ratio 0.26 vs 1.
    d, n, runs, eps = 16, 1000, 3000, 3.0
    values = np.concatenate([np.full(900, 5), np.arange(100) % 16])
    f = np.bincount(values, minlength=d) / n
    est = _hrr_runs(eps, d, values, runs, seed=21)
    lo, hi = chi2_bounds(runs - 1)
    for x in (5, 0, 15, 3):
        var = th.hrr_variance(eps, n, f[x])
        assert abs(est[:, x].mean() - f[x]) < Z * math.sqrt(var / runs)
        s2 = est[:, x].var(ddof=1)
        assert lo < (runs - 1) * s2 / var < hi, (x, s2, var)


def test_hrr_hoeffding_bound_holds_with_stated_probability():
    d, n, runs, eps, beta = 64, 2000, 400, 1.0, 0.05
    values = np.concatenate([np.full(1000, 9), np.arange(1000) % d])
    counts = np.bincount(values, minlength=d)
    est = _hrr_runs(eps, d, values, runs, seed=23) * n
    bound = th.hrr_error_bound(eps, n, beta)
    limit = int(stats.binom.isf(1e-6, runs, beta)) + 1  # P(Bin(runs, beta) >= limit) < 1e-6
    for x in (9, 0, 63):
        assert np.count_nonzero(np.abs(est[:, x] - counts[x]) > bound) < limit


def test_hrr_server_assigned_rows_unbiased():
    d, n, runs, eps = 32, 500, 600, 1.0
    values = np.concatenate([np.full(250, 7), np.arange(250) % d])
    f = np.bincount(values, minlength=d) / n
    est = _hrr_runs(eps, d, values, runs, seed=22, rows=True)
    for x in (7, 1, 31):
        assert abs(est[:, x].mean() - f[x]) < Z * math.sqrt(th.hrr_variance(eps, n, f[x]) / runs)


def test_hrr_counts_and_candidates():
    params = H.HRRParams(epsilon=2.0, d=1000)
    server = H.HRRServer(params).update(H.HRRClient(params, rng=1).perturb(np.arange(1000)))
    full = server.estimate()
    np.testing.assert_allclose(server.estimate(np.array([3, 999])), full[[3, 999]])
    np.testing.assert_allclose(server.estimate(counts=True), full * server.n)
    assert params.hadamard_size == 1024 and server.z.shape == (1024,) and not server.z.flags.writeable


# -- HE vs CMS+HE vs RHR on [PAN]'s Zipf data -----------------------------------------
def pan_zipf(eps):
    """[PAN]/R1 deterministic Zipf data (SPEC 2.8): counts max(1, round(1e4 p_r)) for
    p_r ~ 1/r^2, r = 1..100, truncated to 10,000 objects; value (r-1) 2^(b-1)."""
    p = 1.0 / np.arange(1, 101) ** 2
    p /= p.sum()
    counts, total = [], 0
    for r in range(100):
        c = min(max(1, int(round(1e4 * p[r]))), 10_000 - total)
        counts.append(c)
        total += c
    b = math.ceil(eps * math.log2(math.e))
    xs = np.arange(100, dtype=np.uint64) * np.uint64(2 ** (b - 1))
    return xs, np.array(counts)


def test_pan_zipf_dataset_matches_spec():
    xs, counts = pan_zipf(1.0)
    assert list(counts[:10]) == [6116, 1529, 680, 382, 245, 170, 125, 96, 76, 61]
    assert counts.sum() == 10_000 and np.count_nonzero(counts) == 96


def _mean_sq_error(server_factory, client_factory, xs, counts, runs, seed):
    """A = mean over runs and x in X of (fhat(x) - f(x))^2."""
    values = np.repeat(xs, counts)
    f = counts / counts.sum()
    total = 0.0
    for i in range(runs):
        params, server_type = server_factory(i)
        server = server_type(params).update(client_factory(params, seed * 7919 + i).perturb(values))
        total += np.mean((server.estimate(xs) - f) ** 2)
    return total / runs


def _tolerance(variances, runs):
    """sd of A when the errors are independent normals: sqrt(2 sum V^2 / runs) / |X|."""
    v = np.asarray(variances)
    return math.sqrt(2.0 * np.sum(v * v) / runs) / len(v)


def test_he_and_cmshe_have_the_same_mse_and_rhr_is_worse_on_adversarial_residues():
    eps, d, runs = 1.0, 10**6, 40
    xs, counts = pan_zipf(eps)
    n = counts.sum()
    f = counts / n
    sum_sq = np.sum(f * f)
    v_he = np.array([th.he_variance(eps, n, fx) for fx in f])
    v_cms = np.array([th.cmshe_variance(eps, n, fx, m=1024, k=2048, sum_sq_other=sum_sq - fx * fx) for fx in f])
    v_rhr = np.array([th.rhr_variance(eps, n, fx, residue_fraction=1.0) for fx in f])

    a_he = _mean_sq_error(lambda i: (H.HEParams(epsilon=eps, d=d), H.HEServer),
                          lambda p, s: H.HEClient(p, rng=s), xs, counts, runs, 1)
    a_cms = _mean_sq_error(lambda i: (H.CMSHEParams(epsilon=eps, d=d, hash_seed=1000 + i), H.CMSHEServer),
                           lambda p, s: H.CMSHEClient(p, rng=s), xs, counts, runs, 2)
    a_rhr = _mean_sq_error(lambda i: (rhr.RHRParams(epsilon=eps, d=d), rhr.RHRServer),
                           lambda p, s: rhr.RHRClient(p, rng=s), xs, counts, runs, 3)
    sd_he, sd_cms, sd_rhr = (_tolerance(v, runs) for v in (v_he, v_cms, v_rhr))
    # each against its closed form
    assert abs(a_he - v_he.mean()) < Z * sd_he
    assert abs(a_cms - v_cms.mean()) < Z * sd_cms
    assert abs(a_rhr - v_rhr.mean()) < Z * sd_rhr
    # [PAN] 6.1: HE and CMS+HE have the same MSE (closed forms within 0.3%)
    assert abs(v_cms.mean() / v_he.mean() - 1) < 3e-3
    assert abs(a_he - a_cms) < Z * math.hypot(sd_he, sd_cms) + abs(v_cms.mean() - v_he.mean())
    # RHR is worse than HE, and worse than OCMS's worst-case MSE on this data
    # (SPEC 6: 3.99817e-4 at eps = 1 with the integer optimal m)
    assert a_rhr - a_he > Z * math.hypot(sd_he, sd_rhr)
    assert a_rhr - 3.99817e-4 > Z * sd_rhr


def test_olh_unbiased_with_stated_variance():
    eps, d, n, runs = 2.0, 50, 800, 600
    params = olh.OLHParams(epsilon=eps, d=d)
    assert params.g == 8
    values = np.concatenate([np.full(400, 3), np.arange(400) % d])
    f = np.bincount(values, minlength=d) / n
    client = olh.OLHClient(params, rng=31)
    xs = np.array([3, 0, 49])
    est = np.array([olh.OLHServer(params).update(client.perturb(values)).estimate(xs) for _ in range(runs)])
    lo, hi = chi2_bounds(runs - 1)
    for j, x in enumerate(xs):
        var = th.olh_variance(eps, n, f[x])
        assert abs(est[:, j].mean() - f[x]) < Z * math.sqrt(var / runs)
        assert lo < (runs - 1) * est[:, j].var(ddof=1) / var < hi
    full = olh.OLHServer(params).update(client.perturb(values))
    np.testing.assert_allclose(full.estimate()[xs], full.estimate(xs))


def test_rhr_unbiased_on_spread_data():
    eps, d, n, runs = 2.0, 1000, 2000, 300
    params = rhr.RHRParams(epsilon=eps, d=d)
    values = np.concatenate([np.full(1000, 123), np.arange(1000)])
    f = np.bincount(values, minlength=d) / n
    client = rhr.RHRClient(params, rng=41)
    xs = np.array([123, 124, 0, 999])
    est = np.array([rhr.RHRServer(params).update(client.perturb(values)).estimate(xs) for _ in range(runs)])
    residue = np.bincount(values % params.base, minlength=params.base) / n
    for j, x in enumerate(xs):
        var = th.rhr_variance(eps, n, f[x], residue_fraction=residue[x % params.base])
        assert abs(est[:, j].mean() - f[x]) < Z * math.sqrt(var / runs)


# -- validation -----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), 701.0, True, "1", None])
@pytest.mark.parametrize("cls", [H.HRRParams, H.HEParams, rhr.RHRParams, olh.OLHParams])
def test_params_reject_bad_epsilon(cls, bad):
    with pytest.raises(ParameterError, match="epsilon"):
        cls(epsilon=bad, d=10)


@pytest.mark.parametrize("bad", [1, 0, -3, 2**31, 2.5, "10"])
def test_params_reject_bad_d(bad):
    with pytest.raises(ParameterError, match="d must"):
        H.HRRParams(epsilon=1.0, d=bad)


def test_other_param_errors():
    with pytest.raises(ParameterError, match="k must"):
        H.CMSHEParams(epsilon=1.0, d=10, k=0)
    with pytest.raises(ParameterError, match="m must"):
        H.CMSHEParams(epsilon=1.0, d=10, m=1)
    with pytest.raises(ParameterError, match="epsilon must be <= 21"):
        rhr.RHRParams(epsilon=25.0, d=10)
    with pytest.raises(ParameterError, match="g must"):
        olh.OLHParams(epsilon=1.0, d=10, g=1)
    with pytest.raises(ParameterError, match="threads"):
        H.HRRServer(H.HRRParams(epsilon=1.0, d=10), threads=-1)
    with pytest.raises(ParameterError, match="rng"):
        H.HRRClient(H.HRRParams(epsilon=1.0, d=10), rng="seed")


def test_client_rejects_bad_values_and_rows():
    params = H.HRRParams(epsilon=1.0, d=100)
    client = H.HRRClient(params, rng=1)
    with pytest.raises(ParameterError, match=r"values must be in \[0, 100\), got 100"):
        client.perturb(np.array([1, 100]))
    with pytest.raises(ParameterError, match="values"):
        client.perturb(np.array([-1, 3]))
    with pytest.raises(DTypeError, match="values must be integers"):
        client.perturb(np.array([1.5]))
    with pytest.raises(ParameterError, match="rows"):
        client.perturb(np.array([1, 2]), rows=np.array([0]))
    with pytest.raises(ParameterError, match=r"rows\[1\] = 128"):
        client.perturb(np.array([1, 2]), rows=np.array([0, 128]))
    with pytest.raises(ParameterError, match="groups"):
        H.CMSHEClient(H.CMSHEParams(epsilon=1.0, d=10, k=4, m=8, hash_seed=1), rng=1).perturb(
            np.array([1, 2]), groups=np.array([0, 4]))


def test_rejected_batch_leaves_state_unchanged():
    params = H.HRRParams(epsilon=1.0, d=100)
    server = H.HRRServer(params).update(H.HRRClient(params, rng=1).perturb(np.arange(100)))
    before = server.to_bytes()
    good = H.HRRClient(params, rng=2).perturb(np.arange(50))
    bad_bits = H.HRRReports(rows=good.rows.copy(), bits=good.bits.copy())
    bad_bits.bits[30] = 0
    with pytest.raises(ReportError, match="report 30: bit must be -1 or \\+1, got 0"):
        server.update(bad_bits)
    bad_rows = H.HRRReports(rows=good.rows.copy(), bits=good.bits.copy())
    bad_rows.rows[49] = 128
    with pytest.raises(ReportError, match="report 49: row 128"):
        server.update(bad_rows)
    with pytest.raises(ReportError, match="reports must be HRRReports"):
        server.update(H.HEClient(H.HEParams(epsilon=1.0, d=100), rng=1).perturb(np.arange(3)))
    assert server.to_bytes() == before
    rhr_server = rhr.RHRServer(rhr.RHRParams(epsilon=1.0, d=100))
    with pytest.raises(ReportError, match="z = 4"):
        rhr_server.update(rhr.RHRReports(z=np.array([4], np.uint32), rows=np.array([0], np.uint32)))
    olh_server = olh.OLHServer(olh.OLHParams(epsilon=1.0, d=100))
    with pytest.raises(ReportError, match=r"z must be hash values in \[0, 4\), got 9"):
        olh_server.update(olh.OLHReports(z=np.array([9], np.uint64), a0=np.array([0], np.uint64),
                                         a1=np.array([0], np.uint64)))
    assert rhr_server.n == 0 and olh_server.n == 0


def test_reports_reject_wrong_dtypes_and_lengths():
    with pytest.raises(DTypeError, match="rows must have dtype uint32, got int64"):
        H.HRRReports(rows=np.zeros(3, np.int64), bits=np.zeros(3, np.int8))
    with pytest.raises(ReportError, match="equal lengths"):
        H.HRRReports(rows=np.zeros(3, np.uint32), bits=np.ones(2, np.int8))


def test_estimate_without_reports_raises():
    for name in PROTOCOLS:
        params, _, server_cls = make(name)
        with pytest.raises(ReportError, match="no reports"):
            server_cls(params).estimate(np.array([1]))


@pytest.mark.parametrize("params, client, server", [
    (H.CMSHEParams(epsilon=1.0, d=100, k=1, m=16, hash_seed=1), H.CMSHEClient, H.CMSHEServer),
    (hadamard_variants.AppleCMSHEParams(epsilon=1.0, d=100, k=1, m=16, hash_seed=1),
     hadamard_variants.AppleCMSHEClient, hadamard_variants.AppleCMSHEServer),
    (hadaoracle.HadaOracleParams(epsilon=1.0, d=100, k=1, m=16, hash_seed=1), hadaoracle.HadaOracleClient,
     hadaoracle.HadaOracleServer),
])
def test_one_group_layout_reports_group_zero(params, client, server):
    # k = 1 is allowed; the kernel returns no groups column for a one-group layout, so the
    # client of a grouped protocol fills in group 0
    reports = client(params, rng=1).perturb(np.arange(10))
    assert reports.groups.dtype == np.uint32 and not reports.groups.any() and len(reports.groups) == 10
    assert server(params).update(reports).group_sizes.tolist() == [10]


def test_one_group_permutation_partition_takes_the_assigned_groups():
    """With k = 1, the groups a server assigns are all 0: the client takes them (and the
    same rows as without them); any other group is refused by value."""
    params = hadaoracle.HadaOracleParams(epsilon=1.0, d=100, k=1, m=16, hash_seed=1, partition="permutation")
    groups, rows = hadaoracle.HadaOracleServer(params).assign(50, rng=2)
    assert not groups.any()
    reports = hadaoracle.HadaOracleClient(params, rng=1).perturb(np.arange(50), groups=groups, rows=rows)
    assert not reports.groups.any() and np.array_equal(reports.rows, rows)
    assert hadaoracle.HadaOracleServer(params).update(reports).group_sizes.tolist() == [50]
    groups[7] = 1
    with pytest.raises(ParameterError, match="groups must be 0 or None.*got 1"):
        hadaoracle.HadaOracleClient(params, rng=1).perturb(np.arange(50), groups=groups, rows=rows)
