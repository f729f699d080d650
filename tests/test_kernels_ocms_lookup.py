"""_core.ocms_lookup_list and ocms_lookup_range, the CMS-RAPPOR server's kernels: counts[j] +=
sum_i bits[i, h_i(xs[j])] with the hash of ocms_count_list (the range: xs[j] = x_begin + j),
exact against a reference built from ocms_hash (itself checked against big-int and
carry-less references in test_kernels_ocms.py) and against the server's former formula
(one ocms_count_list row per set bit), on every backend and split."""

import numpy as np
import pytest

from ldpfast import _core
from ldpfast.kernels.field import core_field
from ldpfast.protocols.frequency import rappor_cms

PRIME = 2**64 - 59
R1_PRIME = 18361375334787046697
GF_LOW = {8: 0b11011, 16: 0b101011, 64: 0b11011}   # z^l + these terms is irreducible (SPEC section 6)


def make_field(kind, param):
    return _core.Field.prime(param) if kind == "prime" else _core.Field.binary(param, GF_LOW[param])


def field_elements(rng, kind, param, n):
    if kind == "binary" and param == 64:
        return rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    return rng.integers(0, param if kind == "prime" else 2**param, n, dtype=np.uint64)


def lookup_ref(field, bits, a0, a1, xs):
    """sum_i bits[i, h_i(x)] per candidate, every pair hashed by ocms_hash."""
    n, m = bits.shape
    h = _core.ocms_hash(field, np.repeat(a0, xs.size), np.repeat(a1, xs.size), np.tile(xs, n), m)
    return bits[np.arange(n)[:, None], h.reshape(n, xs.size).astype(np.intp)].sum(axis=0, dtype=np.uint64)


def set_bit_counts(field, bits, a0, a1, xs, threads=1):
    """The server's former formula: OCMS match counting on one row (z = b, a0_i, a1_i) per set bit."""
    user, symbol = np.nonzero(bits)
    counts = np.zeros(xs.size, dtype=np.uint64)
    _core.ocms_count_list(field, symbol.astype(np.uint64), a0[user], a1[user], bits.shape[1], xs, counts, threads)
    return counts


# (field kind, prime or l, m, reports): m spans one-byte rows to 65536-byte ones (a lookup
# block of two reports); 261 reports cross the 256-report blocks of small m.
CASES = [("prime", PRIME, 2, 261), ("prime", PRIME, 1000, 261), ("prime", R1_PRIME, 65536, 40),
         ("prime", 101, 7, 261), ("binary", 8, 3, 261), ("binary", 16, 64, 261), ("binary", 64, 1000, 100)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1] % 1000}-m{c[2]}")
def test_lookup_matches_reference(backend, case):
    kind, param, m, n = case
    rng = np.random.default_rng([param % 2**32, m])
    field = make_field(kind, param)
    size = param if kind == "prime" else 2**param
    # two counter tiles (4096) and a tail that fills no vector, distinct and unsorted
    x_count = min(size, 4096 + 13)
    xs = rng.permutation(size)[:x_count].astype(np.uint64) if size <= 2**16 else field_elements(rng, kind, param,
                                                                                                  x_count)
    bits = (rng.random((n, m)) < 0.5).astype(np.uint8)
    a0, a1 = field_elements(rng, kind, param, n), field_elements(rng, kind, param, n)
    want = lookup_ref(field, bits, a0, a1, xs)
    for threads in (1, 2):
        counts = np.full(x_count, 7, dtype=np.uint64)   # the kernel adds to what is there
        _core.ocms_lookup_list(field, bits, a0, a1, m, xs, counts, threads)
        np.testing.assert_array_equal(counts, want + 7)
    if m <= 8:   # the set-bit formula hashes n m / 2 rows per candidate
        np.testing.assert_array_equal(want, set_bit_counts(field, bits, a0, a1, xs))


# (field kind, prime or l, m, reports, x_begin, x_count): two counter tiles and a tail; a
# range shorter than the walk's minimum (4 vectors); the last candidates of the field.
RANGES = [("prime", PRIME, 227, 261, 10**6, 4096 + 13), ("prime", R1_PRIME, 65536, 12, 0, 3000),
          ("prime", PRIME, 7, 261, 5, 3), ("prime", 101, 2, 261, 0, 101), ("prime", PRIME, 64, 70, PRIME - 300, 300),
          ("binary", 16, 64, 130, 2**16 - 1000, 1000)]


@pytest.mark.parametrize("case", RANGES, ids=lambda c: f"{c[0]}{c[1] % 1000}-m{c[2]}-x{c[5]}")
def test_lookup_range_matches_reference(backend, case):
    kind, param, m, n, x_begin, x_count = case
    rng = np.random.default_rng([m, n, x_count])
    field = make_field(kind, param)
    bits = (rng.random((n, m)) < 0.5).astype(np.uint8)
    a0, a1 = field_elements(rng, kind, param, n), field_elements(rng, kind, param, n)
    want = lookup_ref(field, bits, a0, a1, np.arange(x_begin, x_begin + x_count, dtype=np.uint64))
    for threads in (1, 2):
        counts = np.full(x_count, 7, dtype=np.uint64)
        _core.ocms_lookup_range(field, bits, a0, a1, m, x_begin, counts, threads)
        np.testing.assert_array_equal(counts, want + 7)


@pytest.mark.parametrize("n,x_count", [(4096, 1100), (2048, 4096 + 13)], ids=["report-blocks", "both-ways"])
def test_lookup_thread_split_is_exact(backend, n, x_count):
    """Few candidates split reports into blocks with partial counts; with more, 7 threads
    split candidates and reports. Integer sums: every split gives the same counts."""
    rng = np.random.default_rng([n, x_count])
    field, m = make_field("prime", PRIME), 7
    xs = field_elements(rng, "prime", PRIME, x_count)
    bits = (rng.random((n, m)) < 0.5).astype(np.uint8)
    a0, a1 = field_elements(rng, "prime", PRIME, n), field_elements(rng, "prime", PRIME, n)
    x_begin = int(xs[0]) % (PRIME - x_count)
    results, ranged = [], []
    for threads in (1, 2, 7):
        counts = np.zeros(x_count, dtype=np.uint64)
        _core.ocms_lookup_list(field, bits, a0, a1, m, xs, counts, threads)
        results.append(counts)
        counts = np.zeros(x_count, dtype=np.uint64)
        _core.ocms_lookup_range(field, bits, a0, a1, m, x_begin, counts, threads)
        ranged.append(counts)
    for counts in results[1:]:
        np.testing.assert_array_equal(counts, results[0])
    for counts in ranged[1:]:
        np.testing.assert_array_equal(counts, ranged[0])
    pick = np.array([0, 1, x_count // 2, x_count - 1], dtype=np.uint64)
    np.testing.assert_array_equal(results[0][pick], lookup_ref(field, bits, a0, a1, xs[pick]))
    np.testing.assert_array_equal(ranged[0][pick], lookup_ref(field, bits, a0, a1, np.uint64(x_begin) + pick))


@pytest.mark.parametrize("variant", ["symmetric", "asymmetric"])
def test_server_sums_equal_the_set_bit_count(variant):
    """The server's sums on client reports (a Fortran-ordered bits column: the update's copy
    makes it C-contiguous) equal the former one-row-per-set-bit count, for candidates that
    take the list kernel (spaced, or a run out of order) and the range kernel (the whole
    dictionary, a run from 100)."""
    params = rappor_cms.CMSRAPPORParams(epsilon=1.0, d=5000, m=48, variant=variant)
    values = np.random.default_rng(5).integers(0, params.d, 400)
    reports = rappor_cms.CMSRAPPORClient(params, rng=9).perturb(values)
    fortran = rappor_cms.CMSRAPPORReports(a0=reports.a0, a1=reports.a1, bits=np.asfortranarray(reports.bits))
    field = core_field(params.field_size)
    run = np.arange(100, 3100, dtype=np.uint64)
    for candidates in (np.arange(0, params.d, 3, dtype=np.uint64), run[::-1].copy(), None, run):
        server = rappor_cms.CMSRAPPORServer(params, candidates=candidates, threads=2).update(fortran)
        np.testing.assert_array_equal(server._sums, set_bit_counts(field, reports.bits, reports.a0, reports.a1,
                                                                   server.candidates))
        assert server.n == 400


def test_binding_rejects_bad_arguments():
    field = _core.Field.prime(101)
    bits, ok, xs = np.zeros((2, 5), np.uint8), np.array([1, 2], np.uint64), np.array([3, 4, 5], np.uint64)
    counts = np.full(3, 9, np.uint64)
    bad = [
        (TypeError, "bits must have dtype uint8, got int64", (bits.astype(np.int64), ok, ok, 5, xs, counts)),
        (ValueError, r"bits must have 2 dimension\(s\), got 1", (bits.ravel(), ok, ok, 5, xs, counts)),
        (ValueError, "bits must be C-contiguous", (np.zeros((5, 2), np.uint8).T, ok, ok, 5, xs, counts)),
        (ValueError, "bits must have m = 6 columns, got 5", (bits, ok, ok, 6, xs, counts)),
        (ValueError, "m must be >= 2, got 1", (np.zeros((2, 1), np.uint8), ok, ok, 1, xs, counts)),
        (ValueError, "a0 has length 3, expected 2", (bits, xs, ok, 5, xs, counts)),
        (ValueError, "counts has length 2, expected 3", (bits, ok, ok, 5, xs, counts[:2].copy())),
        (ValueError, r"a1 must hold field elements in \[0, 101\), got a1\[1\] = 101",
         (bits, ok, np.array([0, 101], np.uint64), 5, xs, counts)),
        (ValueError, r"candidates\[2\] = 200", (bits, ok, ok, 5, np.array([3, 4, 200], np.uint64), counts)),
        (ValueError, r"bits must hold 0 or 1, got bits\[1, 3\] = 2",
         (np.array([[0, 1, 1, 0, 0], [1, 0, 0, 2, 1]], np.uint8), ok, ok, 5, xs, counts)),
    ]
    for error, message, args in bad:
        with pytest.raises(error, match=message):
            _core.ocms_lookup_list(field, *args)
    with pytest.raises(ValueError, match="x_begin = 99 with 3 candidates"):
        _core.ocms_lookup_range(field, bits, ok, ok, 5, 99, counts)
    with pytest.raises(ValueError, match="bits must have m = 6 columns, got 5"):
        _core.ocms_lookup_range(field, bits, ok, ok, 6, 0, counts)
    readonly = counts.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="counts must be writable"):
        _core.ocms_lookup_list(field, bits, ok, ok, 5, xs, readonly)
    assert counts.tolist() == [9, 9, 9]   # refused calls leave counts as they were
