"""OCMS decode by solving h(x) = z (GF(2^l), m = 2^b): match counts identical to the full
scan (itself checked against a pure-Python reference in test_kernels_ocms.py) on every
backend and thread count, over random and edge parameters."""

import numpy as np
import pytest

from ldpfast import _core
from ldpfast.protocols.frequency import ocms
from ldpfast.kernels import field as kfield


def binary_field(l):
    poly = kfield.irreducible_polynomial(l)
    return _core.Field.binary(l, sum(1 << e for e in poly[1:]))


def gf_mul_ref(a, b, l):
    poly = kfield.irreducible_polynomial(l)
    full = sum(1 << e for e in poly)
    prod = 0
    for i in range(l):
        if (b >> i) & 1:
            prod ^= a << i
    for i in range(2 * l - 2, l - 1, -1):
        if (prod >> i) & 1:
            prod ^= full << (i - l)
    return prod


def reports(rng, l, m, n):
    """Random reports plus the edge cases: a1 = 0 (every x or none matches), symbols
    z >= m and, for m > 2^l, 2^l <= z < m (never match), and many true matches."""
    top = 2**l
    a0 = rng.integers(0, top, n, dtype=np.uint64, endpoint=False)
    a1 = rng.integers(0, top, n, dtype=np.uint64, endpoint=False)
    z = rng.integers(0, min(m, 2**63), n, dtype=np.uint64)
    a1[:4] = 0
    z[0] = a0[0] % m              # a1 = 0 and z = a0 mod m: matches every candidate
    z[4] = m                      # out of range
    z[5] = 2**64 - 1
    if m > top:
        z[6] = top                # in [2^l, m): no field value hashes there
    x = rng.integers(0, min(top, 2**63), n, dtype=np.uint64)
    half = n // 2
    z[8:half] = _core.ocms_hash(binary_field(l), a0[8:half], a1[8:half], x[8:half], m)
    return z, a0, a1


def counts(field, rs, m, x_begin, x_count, threads, method):
    out = np.zeros(x_count, dtype=np.uint64)
    _core.ocms_count_range(field, *rs, m, x_begin, out, threads, method=method)
    return out


# (l, b, x_begin, x_count): tiny fields, b around l (dimension 0 or negative slack),
# ranges crossing 2^14-candidate tiles unaligned, the top of GF(2^64).
CASES = [
    (1, 1, 0, 2), (2, 1, 1, 3), (3, 2, 0, 8), (4, 4, 3, 13), (4, 6, 0, 16), (5, 1, 7, 25),
    (8, 3, 0, 256), (8, 8, 17, 200), (8, 9, 0, 256), (13, 1, 100, 8000), (16, 2, 12345, 40000),
    (16, 10, 0, 65536), (17, 5, 16380, 9), (20, 6, 70000, 70000), (20, 19, 1, 1),
    (31, 4, 2**31 - 50000, 50000), (32, 16, 2**32 - 40000, 40000), (63, 7, 2**62, 30000),
    (64, 1, 0, 5000), (64, 12, 2**64 - 33000, 33000), (64, 63, 2**64 - 1000, 1000),
]


@pytest.mark.parametrize("l, b, x_begin, x_count", CASES)
def test_affine_counts_equal_scan(backend, l, b, x_begin, x_count):
    rng = np.random.default_rng(1000 * l + b)
    field, m = binary_field(l), 2**b
    rs = reports(rng, l, m, 400)
    expected = counts(field, rs, m, x_begin, x_count, 1, "scan")
    assert expected.sum() > 0  # the comparison is not vacuous
    for threads in (1, 2, 3, 8):
        np.testing.assert_array_equal(counts(field, rs, m, x_begin, x_count, threads, "affine"), expected)
    np.testing.assert_array_equal(counts(field, rs, m, x_begin, x_count, 2, "auto"), expected)


@pytest.mark.parametrize("l", [3, 5, 8])
def test_affine_counts_equal_reference(l):
    """Against a pure-Python count, every m = 2^b up to 2^(l+1)."""
    rng = np.random.default_rng(l)
    top = 2**l
    for b in range(1, l + 2):
        m = 2**b
        z, a0, a1 = reports(rng, l, m, 60)
        ref = np.array([sum((gf_mul_ref(int(a1[i]), x, l) ^ int(a0[i])) % m == int(z[i]) for i in range(60))
                        for x in range(top)], dtype=np.uint64)
        np.testing.assert_array_equal(counts(binary_field(l), (z, a0, a1), m, 0, top, 1, "affine"), ref)


def test_many_reports_split_across_tasks():
    """Enough reports that one task walks them in two cursor blocks (2^16 reports each),
    and that several threads split them into blocks with partial counts."""
    rng = np.random.default_rng(7)
    field, m = binary_field(12), 8
    rs = reports(rng, 12, m, 70000)
    expected = counts(field, rs, m, 5, 3000, 1, "scan")
    for threads in (1, 2, 5):
        np.testing.assert_array_equal(counts(field, rs, m, 5, 3000, threads, "affine"), expected)


def test_method_choice_and_errors():
    gf = binary_field(20)
    assert _core.ocms_decode_method(gf, 16, 1 << 20) == "affine"
    assert _core.ocms_decode_method(gf, 1024, 4096) == "affine"
    assert _core.ocms_decode_method(gf, 1024, 16) == "scan"       # the solve costs more than 16 checks
    assert _core.ocms_decode_method(gf, 12, 1 << 20) == "scan"    # m not a power of two
    prime = _core.Field.prime(2**61 - 1)
    assert _core.ocms_decode_method(prime, 16, 1 << 20) == "scan"
    one = np.zeros(1, dtype=np.uint64)
    with pytest.raises(ValueError, match="affine"):
        _core.ocms_count_range(prime, one, one, one, 16, 0, np.zeros(4, np.uint64), method="affine")
    with pytest.raises(ValueError, match="affine"):
        _core.ocms_count_range(gf, one, one, one, 12, 0, np.zeros(4, np.uint64), method="affine")
    with pytest.raises(ValueError, match="method"):
        _core.ocms_count_range(gf, one, one, one, 16, 0, np.zeros(4, np.uint64), method="fast")


def test_server_estimates_unchanged():
    """A GF(2^l) server with m a power of two decodes by solving; its whole-dictionary
    estimates equal those from scanned counts."""
    params = ocms.OCMSParams(epsilon=3.0, d=5000, m=16, field_size=2**13, field_kind="binary")
    values = np.random.default_rng(3).integers(0, 5000, 3000)
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=5).perturb(values))
    assert _core.ocms_decode_method(params.field, params.m, params.d) == "affine"
    scanned = np.zeros(params.d, dtype=np.uint64)
    r = server.reports()
    _core.ocms_count_range(params.field, r.z, r.a0, r.a1, params.m, 0, scanned, method="scan")
    np.testing.assert_array_equal(server.match_counts(), scanned)
    np.testing.assert_array_equal(server.estimate(), ocms.decode_matches(params, scanned, server.n))
