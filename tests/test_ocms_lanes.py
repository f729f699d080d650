"""The OCMS decode kernels at the edges of the 64-bit lane arithmetic (kernels/lanes64.hpp).

The vector kernels compare values as unsigned 64-bit integers; AVX2 emulates that with
values biased by 2^63, and both the Montgomery borrow and the Barrett correction are
such compares. Moduli m on both sides of 2^63 up to 2^64 - 1, field elements next to
p - 1 and symbols next to m put lane values on both sides of the bias boundary, where a
wrong compare changes some counts. Every backend must give the counts of the scalar
kernels, and those match a direct big-integer reference on a sample of candidates.
"""

import numpy as np
import pytest

import ldpfast
from ldpfast import _core

PRIME = 2**64 - 59
EDGE_MODULI = [2, 3, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 59 - 1, 2**64 - 1]


def _coefficients(rng, size, n):
    """a0, a1 mostly near 0 and near size - 1, every 7th a1 uniform."""
    def near_edges(count):
        low = rng.integers(0, 4, count, dtype=np.uint64)
        return np.where(rng.random(count) < 0.5, low, np.uint64(size - 1) - low).astype(np.uint64)

    a0, a1 = near_edges(n), near_edges(n)
    a1[::7] = rng.integers(0, size - 1, len(a1[::7]), dtype=np.uint64, endpoint=True)
    return a0, a1


def _field(kind):
    return _core.Field.prime(PRIME) if kind == "prime" else _core.Field.binary(64, 0x1B)


def _hash_ref(kind, a0, a1, x, m):
    if kind == "prime":
        return ((int(a0) + int(a1) * int(x)) % PRIME) % m
    product = 0
    for bit in range(64):  # carry-less product, reduced by z^64 + z^4 + z^3 + z + 1
        if int(x) >> bit & 1:
            product ^= int(a1) << bit
    for bit in range(127, 63, -1):
        if product >> bit & 1:
            product ^= (1 << bit) ^ (0x1B << (bit - 64))
    return (product ^ int(a0)) % m


@pytest.mark.parametrize("kind", ["prime", "binary"])
@pytest.mark.parametrize("m", EDGE_MODULI)
def test_edge_moduli_match_scalar_and_reference(backend, kind, m):
    rng = np.random.default_rng([m % 2**32, kind == "prime"])
    size = PRIME if kind == "prime" else 2**64
    field = _field(kind)
    n, x_count = 300, 4096 + 1500  # a whole GF block and a long partial one; two walk tiles
    x_begin = size - x_count - 3 if kind == "prime" else 2**64 - 2 * 4096  # candidates near the top
    a0, a1 = _coefficients(rng, size, n)
    xs = np.arange(x_begin, x_begin + x_count, dtype=np.uint64)
    truth = xs[rng.integers(0, x_count, n)]
    z = _core.ocms_hash(field, a0, a1, truth, m)
    z[::5] = np.uint64(m - 1)  # symbols at the top of [0, m)
    z[1::5] = 0

    def decode():
        ranged, listed = np.zeros(x_count, np.uint64), np.zeros(x_count, np.uint64)
        _core.ocms_count_range(field, z, a0, a1, m, x_begin, ranged, 1, "scan")
        _core.ocms_count_list(field, z, a0, a1, m, xs[::-1].copy(), listed, 1)
        return ranged, listed[::-1]

    ranged, listed = decode()
    np.testing.assert_array_equal(ranged, listed)
    ldpfast.set_backend("scalar")
    np.testing.assert_array_equal(ranged, decode()[0])
    # At least the 3/5 of reports whose symbol is a true hash match somewhere.
    assert ranged.sum() >= 3 * n // 5
    for j in [0, 1, x_count // 2, x_count - 1]:
        want = sum(_hash_ref(kind, a0[i], a1[i], xs[j], m) == int(z[i]) for i in range(n))
        assert ranged[j] == want
