"""Bounds checks of the C++ bindings hold for values near 2^64, where a naive sum wraps
around (cell_base + group_rows once passed for 2^64 - 1 + 2 = 1 and wrote outside z)."""

import numpy as np
import pytest

from ldpfast import _core

U64_MAX = (1 << 64) - 1


def _update(cell_base, group_rows, z_size=1024, rows=(0, 1)):
    rows = np.array(rows, np.uint32)
    bits = np.ones(len(rows), np.int8)
    z = np.zeros(z_size, np.int64)
    guard = np.zeros(3 * z_size, np.int64)  # z sits in the middle third of a larger buffer
    z = guard[z_size:2 * z_size]
    got = _core.hadamard_update(None, rows, bits, np.array([group_rows], np.uint64),
                                np.array([cell_base], np.uint64), z, 1)
    return got, guard, z


@pytest.mark.parametrize("cell_base, group_rows", [
    (U64_MAX, 2),                    # sum wraps to 1
    (U64_MAX - 1023, 2048),          # sum wraps to exactly len(z)
    (5, U64_MAX - 2),                # sum wraps to 2; rows up to 2^32 would pass the row check
    (1 << 63, 1 << 63),              # sum wraps to 0
    (0, U64_MAX),                    # no wrap, too large
    (1024, 1),                       # no wrap, one past the end
])
def test_hadamard_update_rejects_groups_outside_z(cell_base, group_rows):
    with pytest.raises(ValueError, match=r"cell_base\[0\] \+ group_rows\[0\] = .* exceeds the size of z"):
        _update(cell_base, group_rows)


def test_hadamard_update_accepts_a_group_ending_at_the_last_cell():
    got, guard, z = _update(1022, 2)
    assert got == 2
    assert z[1022] == 1 and z[1023] == 1
    assert guard.sum() == 2


def test_gf2_64_candidate_range_must_not_wrap():
    field = _core.Field.binary(64, 27)
    z = a0 = a1 = np.zeros(3, np.uint64)
    with pytest.raises(ValueError, match="must be < 2\\^64"):
        _core.ocms_count_range(field, z, a0, a1, 4, U64_MAX - 9, np.zeros(11, np.uint64))
    counts = np.zeros(10, np.uint64)  # x_begin .. 2^64 - 1 exactly
    _core.ocms_count_range(field, z, a0, a1, 4, U64_MAX - 9, counts)
    # h(x) = a0 + a1 x = 0 for every x, and z = 0: every report matches every candidate.
    assert counts.tolist() == [3] * 10


def test_full_sketch_clients_return_zeroed_sampled_cells():
    """Without sampling the `sampled` output is unused; it must still not carry stale heap
    bytes (it used to be uninitialised memory)."""
    field = _core.Field.prime((1 << 61) - 1)
    K, M, n = 2, 8, 5000
    offsets = np.arange(n + 1, dtype=np.int64)
    items = np.arange(n, dtype=np.uint64)
    a = np.arange(1, K + 1, dtype=np.uint64)
    for _ in range(3):  # fresh allocations, some reusing freed blocks
        sampled, bits, order = _core.privsketch_perturb(field, a, a, K, M, offsets, items, bytes(32), 0, False, 0)
        assert not sampled.any() and order is None and bits.shape == (n, K * M)
