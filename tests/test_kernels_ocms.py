"""OCMS+RR kernels: field hashing against pure-Python big-int / carry-less references,
every backend bit-exact against scalar, decode counts against a direct reference."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ldpfast
from ldpfast import _core

PRIME = 2**64 - 59                 # SPEC 2.2
R1_PRIME = 18361375334787046697    # the prime of [PAN]'s reference code R1
SMALL_PRIMES = [13, 31, 101]
PRIMES = [PRIME, R1_PRIME, *SMALL_PRIMES]

# SPEC section 6: irreducible polynomials of GF(2^l), as exponents below z^l.
GF_POLYS = {
    2: (1, 0), 3: (1, 0), 4: (1, 0), 5: (2, 0), 7: (1, 0), 8: (4, 3, 1, 0), 16: (5, 3, 1, 0),
    17: (3, 0), 20: (3, 0), 31: (3, 0), 32: (7, 3, 2, 0), 63: (1, 0), 64: (4, 3, 1, 0),
}


def poly_low(l):
    return sum(1 << e for e in GF_POLYS[l])


def gf_mul_ref(a, b, l):
    """Carry-less product, then reduction by z^l + poly_low, bit by bit."""
    prod = 0
    for i in range(l):
        if (b >> i) & 1:
            prod ^= a << i
    full = (1 << l) | poly_low(l)
    for i in range(2 * l - 2, l - 1, -1):
        if (prod >> i) & 1:
            prod ^= full << (i - l)
    return prod


def hash_ref(field_kind, size_or_l, a0, a1, x, m):
    if field_kind == "prime":
        return ((a0 + a1 * x) % size_or_l) % m
    return (gf_mul_ref(a1, x, size_or_l) ^ a0) % m


def make_field(kind, param):
    return _core.Field.prime(param) if kind == "prime" else _core.Field.binary(param, poly_low(param))


def field_size(kind, param):
    return param if kind == "prime" else 2**param


def u64(values):
    return np.array([int(v) for v in values], dtype=np.uint64)


def uniform_elements(rng, size, n):
    """n uniform integers in [0, size), size <= 2^64."""
    if size == 2**64:
        return rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    return rng.integers(0, size, n, dtype=np.uint64, endpoint=False)


FIELDS = [("prime", p) for p in PRIMES] + [("binary", l) for l in sorted(GF_POLYS)]


# --------------------------------------------------------------------------------------
# Field arithmetic against pure-Python references

def test_gf256_aes_product():
    field = _core.Field.binary(8, 0x1B)
    assert int(_core.field_mul(field, u64([0x57]), u64([0x83]))[0]) == 0xC1
    assert gf_mul_ref(0x57, 0x83, 8) == 0xC1


@settings(max_examples=60, deadline=None)
@given(data=st.data(), field=st.sampled_from(FIELDS))
def test_hash_matches_reference(data, field):
    kind, param = field
    size = field_size(kind, param)
    elements = st.integers(0, size - 1)
    n = data.draw(st.integers(1, 6))
    a0 = data.draw(st.lists(elements, min_size=n, max_size=n))
    a1 = data.draw(st.lists(elements, min_size=n, max_size=n))
    x = data.draw(st.lists(elements, min_size=n, max_size=n))
    m = data.draw(st.one_of(st.integers(2, 64), st.integers(2, 2**64 - 1)))
    got = _core.ocms_hash(make_field(kind, param), u64(a0), u64(a1), u64(x), m)
    want = [hash_ref(kind, param, a0[i], a1[i], x[i], m) for i in range(n)]
    assert [int(v) for v in got] == want


@settings(max_examples=40, deadline=None)
@given(data=st.data(), field=st.sampled_from(FIELDS))
def test_field_mul_matches_reference(data, field):
    kind, param = field
    elements = st.integers(0, field_size(kind, param) - 1)
    a = data.draw(elements)
    b = data.draw(elements)
    got = int(_core.field_mul(make_field(kind, param), u64([a]), u64([b]))[0])
    assert got == ((a * b) % param if kind == "prime" else gf_mul_ref(a, b, param))


def test_hash_extremes_prime():
    p = PRIME
    values = [0, 1, 2, p - 2, p - 1]
    a0, a1, x = zip(*[(u, v, w) for u in values for v in values for w in values])
    for m in [2, 3, 5, 10**9 + 7, 2**63 - 1, 2**63, 2**63 + 1, p - 1, p, 2**64 - 1]:
        got = _core.ocms_hash(_core.Field.prime(p), u64(a0), u64(a1), u64(x), m)
        assert [int(v) for v in got] == [((u + v * w) % p) % m for u, v, w in zip(a0, a1, x)]


# --------------------------------------------------------------------------------------
# Decode counts against a direct reference

def counts_ref(kind, param, z, a0, a1, m, xs):
    """Match counts, computed with Python integers (object arrays)."""
    xs_o = np.array([int(v) for v in xs], dtype=object)
    out = np.zeros(len(xs), dtype=np.uint64)
    for zi, b0, b1 in zip(z, a0, a1):
        if kind == "prime":
            h = ((int(b0) + int(b1) * xs_o) % param) % m
        else:
            h = np.array([(gf_mul_ref(int(b1), int(x), param) ^ int(b0)) % m for x in xs], dtype=object)
        out += (h == int(zi)).astype(np.uint64)
    return out


def random_reports(rng, kind, param, n, m, x_begin, x_count):
    """Reports whose symbol is the true hash of a candidate half of the time."""
    size = field_size(kind, param)
    field = make_field(kind, param)
    a0 = uniform_elements(rng, size, n)
    a1 = uniform_elements(rng, size, n)
    truth = x_begin + rng.integers(0, max(x_count, 1), n).astype(np.uint64)
    h = _core.ocms_hash(field, a0, a1, truth, m)
    noise = rng.integers(0, min(m, 2**63), n, dtype=np.uint64)
    z = np.where(rng.random(n) < 0.5, h, noise).astype(np.uint64)
    return field, z, a0, a1


DECODE_CASES = [
    # kind, field param, n, m, x_begin, x_count
    ("prime", PRIME, 0, 5, 0, 17),
    ("prime", PRIME, 1, 2, 0, 1),
    ("prime", PRIME, 7, 2, 3, 13),
    ("prime", PRIME, 33, 5, 10**6, 71),
    ("prime", PRIME, 9, 10**9 + 7, 0, 40),
    ("prime", PRIME, 9, 2**63 - 25, 0, 40),
    ("prime", PRIME, 9, 2**63, 0, 40),
    ("prime", PRIME, 9, 2**63 + 7, 5, 23),
    ("prime", PRIME, 9, PRIME - 1, 5, 23),
    ("prime", PRIME, 11, 3, PRIME - 37, 37),   # candidates up to p - 1
    ("prime", R1_PRIME, 11, 149, R1_PRIME - 29, 29),
    ("prime", 13, 20, 3, 0, 13),
    ("prime", 101, 15, 20, 90, 11),
    ("binary", 8, 10, 5, 0, 256),
    ("binary", 17, 10, 7, 100, 50),
    ("binary", 64, 10, 13, 2**64 - 30, 30),
    ("binary", 63, 6, 2**40 + 1, 5, 19),
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: f"{c[0]}{c[1] % 1000}-n{c[2]}-m{c[3]}-x{c[5]}")
def test_decode_matches_reference(backend, case):
    kind, param, n, m, x_begin, x_count = case
    rng = np.random.default_rng([n, x_count, m % 2**32])
    field, z, a0, a1 = random_reports(rng, kind, param, n, m, x_begin, x_count)
    xs = np.arange(x_begin, x_begin + x_count, dtype=np.uint64)
    want = counts_ref(kind, param, z, a0, a1, m, xs)
    counts = np.full(x_count, 7, dtype=np.uint64)  # the kernels add to what is there
    _core.ocms_count_range(field, z, a0, a1, m, x_begin, counts)
    np.testing.assert_array_equal(counts, want + 7)
    perm = rng.permutation(x_count)
    listed = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_list(field, z, a0, a1, m, xs[perm].copy(), listed)
    np.testing.assert_array_equal(listed, want[perm])


@pytest.mark.parametrize("m", [2, 5, 149, 10**9 + 7, 2**62 + 3, 2**63, 2**63 + 1, PRIME - 1])
def test_count_range_backends_agree(backend, m):
    """Several report blocks (256) and counter tiles (4096), a ragged tail, x_begin > 0."""
    rng = np.random.default_rng(m % 2**32)
    n, x_begin, x_count = 261, 12345, 4096 + 13
    field, z, a0, a1 = random_reports(rng, "prime", PRIME, n, m, x_begin, x_count)
    got = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_range(field, z, a0, a1, m, x_begin, got)
    listed = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_list(field, z, a0, a1, m, np.arange(x_begin, x_begin + x_count, dtype=np.uint64), listed)
    ldpfast.set_backend("scalar")
    want = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_range(field, z, a0, a1, m, x_begin, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(listed, want)
    # About n/2 reports carry a candidate's true hash (sd sqrt(n)/2 = 8.1); 5.5 sd below: P < 1e-7.
    assert want.sum() >= n // 2 - 45


@pytest.mark.parametrize("small_range", [True, False])
def test_decode_thread_split_is_exact(backend, small_range):
    """Few candidates x many reports splits reports into blocks with partial counts;
    many candidates splits candidates. Every thread count gives the same counts."""
    rng = np.random.default_rng(11)
    n, x_count = (20000, 300) if small_range else (600, 9000)
    field, z, a0, a1 = random_reports(rng, "prime", PRIME, n, 7, 0, x_count)
    xs = np.arange(x_count, dtype=np.uint64)
    results = []
    for threads in (1, 2, 7):
        ranged = np.zeros(x_count, dtype=np.uint64)
        _core.ocms_count_range(field, z, a0, a1, 7, 0, ranged, threads)
        listed = np.zeros(x_count, dtype=np.uint64)
        _core.ocms_count_list(field, z, a0, a1, 7, xs, listed, threads)
        results += [ranged, listed]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    # Spot-check a few candidates against the reference.
    pick = np.array([0, 1, x_count // 2, x_count - 1])
    np.testing.assert_array_equal(results[0][pick], counts_ref("prime", PRIME, z, a0, a1, 7, xs[pick]))


# --------------------------------------------------------------------------------------
# Client kernels: every backend bit-exact with scalar

KEY = bytes(range(32))


@pytest.mark.parametrize("field_case", [("prime", PRIME), ("prime", 101), ("binary", 64), ("binary", 20)])
def test_hash_and_perturb_backends_agree(backend, field_case):
    kind, param = field_case
    rng = np.random.default_rng(5)
    size = field_size(kind, param)
    field = make_field(kind, param)
    n = 1000 + 3
    a0, a1, x = (uniform_elements(rng, size, n) for _ in range(3))
    results = [_core.ocms_hash(field, a0, a1, x, 13)]
    results += list(_core.ocms_perturb(field, KEY, x, 13, 2**62))
    ldpfast.set_backend("scalar")
    want = [_core.ocms_hash(field, a0, a1, x, 13)] + list(_core.ocms_perturb(field, KEY, x, 13, 2**62))
    for got, exp in zip(results, want):
        np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("field_case", [("prime", PRIME), ("prime", 13), ("binary", 8), ("binary", 64)])
def test_perturb_reports_are_valid(backend, field_case):
    kind, param = field_case
    size = field_size(kind, param)
    field = make_field(kind, param)
    x = np.arange(5000, dtype=np.uint64) % np.uint64(min(size, 2**63))
    m = 11
    z, a0, a1 = _core.ocms_perturb(field, KEY, x, m, 0)  # threshold 0: never flips
    np.testing.assert_array_equal(z, _core.ocms_hash(field, a0, a1, x, m))
    if size < 2**64:
        assert int(a0.max()) < size and int(a1.max()) < size
    z2, b0, b1 = _core.ocms_perturb(field, KEY, x, m, 2**64 - 1)  # always flips
    np.testing.assert_array_equal(b0, a0)  # the seeds come first from the same stream
    np.testing.assert_array_equal(b1, a1)
    assert int(z2.max()) < m and not np.any(z2 == z)
    # Seeds are uniform: the top bits of a0 over 5000 draws hit both halves.
    assert 0 < int(np.count_nonzero(a0 >= np.uint64(size // 2))) < len(x)


def test_perturb_thread_counts_agree(backend):
    field = _core.Field.prime(PRIME)
    x = np.arange(40000, dtype=np.uint64)
    outs = [_core.ocms_perturb(field, KEY, x, 5, 2**62, threads) for threads in (1, 2, 7)]
    for out in outs[1:]:
        for a, b in zip(out, outs[0]):
            np.testing.assert_array_equal(a, b)


def test_randomized_response_backends_agree(backend):
    y = (np.arange(10000, dtype=np.uint64) * np.uint64(7)) % np.uint64(13)
    got = _core.randomized_response(KEY, y, 13, 2**63)
    ldpfast.set_backend("scalar")
    np.testing.assert_array_equal(got, _core.randomized_response(KEY, y, 13, 2**63))


# --------------------------------------------------------------------------------------
# Input checks of the bindings

def test_binding_rejects_non_field_inputs():
    field = _core.Field.prime(101)
    ok = u64([1, 2])
    with pytest.raises(ValueError, match=r"a0 must hold field elements in \[0, 101\), got a0\[1\] = 101"):
        _core.ocms_hash(field, u64([0, 101]), ok, ok, 5)
    with pytest.raises(ValueError, match="a1"):
        _core.ocms_count_range(field, ok, ok, u64([0, 200]), 5, 0, np.zeros(3, np.uint64))
    with pytest.raises(ValueError, match="x_begin = 99 with 3 candidates"):
        _core.ocms_count_range(field, ok, ok, ok, 5, 99, np.zeros(3, np.uint64))
    with pytest.raises(ValueError, match=r"candidates\[0\] = 101"):
        _core.ocms_count_list(field, ok, ok, ok, 5, u64([101]), np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="m must be >= 2, got 1"):
        _core.ocms_count_range(field, ok, ok, ok, 1, 0, np.zeros(3, np.uint64))
    with pytest.raises(ValueError, match=r"y\[1\] = 5"):
        _core.randomized_response(KEY, u64([0, 5]), 5, 0)
    with pytest.raises(TypeError, match="z must have dtype uint64"):
        _core.ocms_count_range(field, np.zeros(2, np.int64), ok, ok, 5, 0, np.zeros(3, np.uint64))


@pytest.mark.parametrize("l,x_begin,x_count,m", [
    (16, 0, 2**16, 5),             # whole field, aligned blocks
    (20, 1000, 9000, 7),           # partial blocks at both ends (one short, one long)
    (64, 2**64 - 5000, 5000, 2**63 + 9),
    (32, 2**31 - 3000, 7000, 16),  # m a power of two
])
def test_count_range_gf_blocks_match_direct(backend, l, x_begin, x_count, m):
    """The Gray-code block walk of GF(2^l) against count_list's direct evaluation."""
    rng = np.random.default_rng(l)
    field, z, a0, a1 = random_reports(rng, "binary", l, 37, m, x_begin, x_count)
    ranged = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_range(field, z, a0, a1, m, x_begin, ranged)
    listed = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_list(field, z, a0, a1, m, np.arange(x_begin, x_begin + x_count, dtype=np.uint64), listed)
    np.testing.assert_array_equal(ranged, listed)
    # About 37/2 reports carry a candidate's true hash (sd 3.04); 5.4 sd below: P < 1e-7.
    assert ranged.sum() >= 2
    pick = np.array([0, x_count // 3, x_count - 1])
    np.testing.assert_array_equal(ranged[pick], counts_ref("binary", l, z, a0, a1, m,
                                                            np.arange(x_begin, x_begin + x_count)[pick]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), field=st.sampled_from(FIELDS))
def test_decode_property(backend, data, field):
    """Random small decodes (any m, any position of the range in the field) vs the reference."""
    kind, param = field
    size = field_size(kind, param)
    n = data.draw(st.integers(0, 12))
    x_count = data.draw(st.integers(1, min(size, 40)))
    x_begin = data.draw(st.integers(0, size - x_count))
    m = data.draw(st.one_of(st.integers(2, 50), st.integers(2, 2**64 - 1)))
    elements = st.integers(0, size - 1)
    a0 = u64(data.draw(st.lists(elements, min_size=n, max_size=n)))
    a1 = u64(data.draw(st.lists(elements, min_size=n, max_size=n)))
    # Symbols: the true hash of some candidate, or anything below m.
    f = make_field(kind, param)
    targets = u64(data.draw(st.lists(st.integers(x_begin, x_begin + x_count - 1), min_size=n, max_size=n)))
    z = _core.ocms_hash(f, a0, a1, targets, m) if n else u64([])
    xs = np.arange(x_begin, x_begin + x_count, dtype=np.uint64)
    want = counts_ref(kind, param, z, a0, a1, m, xs)
    ranged = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_range(f, z, a0, a1, m, x_begin, ranged)
    listed = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_list(f, z, a0, a1, m, xs, listed)
    np.testing.assert_array_equal(ranged, want)
    np.testing.assert_array_equal(listed, want)
    assert int(want.sum()) >= n  # each report matches its own target


def test_decode_split_both_ways_is_exact(backend):
    """Candidate chunks x report blocks with partial counts (10^8 pairs, 7 threads)."""
    rng = np.random.default_rng(12)
    n, x_count = 20000, 5000
    field, z, a0, a1 = random_reports(rng, "prime", PRIME, n, 3, 0, x_count)
    one, many = np.zeros(x_count, np.uint64), np.zeros(x_count, np.uint64)
    _core.ocms_count_range(field, z, a0, a1, 3, 0, one, 1)
    _core.ocms_count_range(field, z, a0, a1, 3, 0, many, 7)
    np.testing.assert_array_equal(one, many)
    # About x_count / m matches per report (mean 3.3e7, sd < 5e3): half of that is 3000 sd away.
    assert int(one.sum()) >= n * x_count // 3 // 2


def test_unpickled_report_columns_are_accepted():
    """Report columns that crossed a process boundary (pickle, np.load) have an equal but
    not identical dtype object; the bindings must accept them."""
    import pickle

    field = _core.Field.prime(2**64 - 59)
    a0, a1, x = (pickle.loads(pickle.dumps(np.arange(5, dtype=np.uint64) + k)) for k in (1, 2, 3))
    assert a0.dtype is not np.dtype(np.uint64)
    expected = [((1 + i) + (2 + i) * (3 + i)) % (2**64 - 59) % 7 for i in range(5)]
    assert _core.ocms_hash(field, a0, a1, x, 7).tolist() == expected
