"""The canonical row order of kept (z, a0, a1) reports (OCMS, OLH): the sort that replaced
np.lexsort, the merge of sorted chunks (partials loaded from bytes, e.g. on Spark's
driver), and bytes whose rows are out of order. Exact comparisons: the order is a pure
function of the rows, so there is no tolerance to derive."""

import io

import numpy as np
import pytest

from ldpfast._container import read_header, write_container
from ldpfast.protocols.frequency import _hashed_reports as hashed
from ldpfast.protocols.frequency import olh


def _rows(rng, n, m):
    """Rows with the rare cases forced: runs of equal (z, a0) with other a1, whole repeated
    rows, and the largest z and field values."""
    z = rng.integers(0, min(m, 6), n, dtype=np.uint64)
    a0 = rng.integers(0, 2**64 - 59, n, dtype=np.uint64)
    a1 = rng.integers(0, 2**64 - 59, n, dtype=np.uint64)
    a0[10:40], z[10:40] = a0[0], z[0]            # one run of 31 equal (z, a0), a1 distinct
    a1[20:30] = a1[0]                             # ... of which 11 whole repeats
    a0[50:60:2], z[50:60:2] = 2**64 - 60, m - 1   # scattered equal (z, a0) at the top values
    return z, a0, a1


def _lexsorted(z, a0, a1):
    order = np.lexsort((a1, a0, z))
    return z[order], a0[order], a1[order]


@pytest.mark.parametrize("m", [8, 2**20, 2**40])  # radix keys of 16, 32 and 64 bits
def test_sorted_rows_order_as_lexsort(m):
    rows = _rows(np.random.default_rng(m), 3000, m)
    for got, want in zip(hashed._sorted_rows(*rows, m), _lexsorted(*rows)):
        np.testing.assert_array_equal(got, want)


def test_sorted_chunks_merge_as_lexsort_or_decline():
    rng = np.random.default_rng(1)
    rows = _rows(rng, 6000, 8)
    cuts = [0, 1, 700, 2500, 6000]  # a chunk of one row among larger ones
    chunks = tuple(hashed._sorted_rows(*(c[a:b] for c in rows), 8) for a, b in zip(cuts, cuts[1:]))
    merged = hashed._merged_rows(chunks)
    assert merged is not None
    for got, want in zip(merged, _lexsorted(*rows)):
        np.testing.assert_array_equal(got, want)
    assert hashed._is_sorted(*merged) and not hashed._is_sorted(*rows)
    # one step per value of z would cost more than sorting: declined (the caller sorts)
    spread = tuple(hashed._sorted_rows(rng.integers(0, 2**40, 500, dtype=np.uint64), c[1][:500], c[2][:500], 2**40)
                   for c in chunks[1:])
    assert hashed._merged_rows(spread) is None


@pytest.fixture(scope="module")
def olh_case():
    params = olh.OLHParams(epsilon=2.0, d=50)  # g = 8: the merge runs value by value of z
    values = np.random.default_rng(2).integers(0, 50, 9000)
    reports = olh.OLHClient(params, rng=3).perturb(values)
    return params, reports, olh.OLHServer(params).update(reports).to_bytes()


def test_partials_from_bytes_merge_to_one_process_bytes(olh_case):
    """Partials travel as bytes (sorted chunks, checked on loading) and merge, in any order,
    to the bytes of one server given every report."""
    params, reports, whole = olh_case
    cuts = [0, 2000, 2001, 5000, 9000]
    blobs = [olh.OLHServer(params).update(olh.OLHReports(**{k: v[a:b] for k, v in reports.columns().items()}))
             .to_bytes() for a, b in zip(cuts, cuts[1:])]
    for order in (blobs, blobs[::-1], blobs[1::2] + blobs[::2]):
        total = olh.OLHServer(params)
        for blob in order:
            total.merge(olh.OLHServer.from_bytes(blob))
        assert total.to_bytes() == whole


def test_bytes_with_rows_out_of_order_load_to_the_canonical_state(olh_case):
    """Bytes written by another writer may hold the rows in any order (they are the same
    reports): loading checks the order, and the bytes written again are the canonical ones."""
    params, _, whole = olh_case
    state = {name: np.load(io.BytesIO(image)) for name, image in _arrays(whole)}
    shuffled = np.random.default_rng(4).permutation(state["z"].size)
    blob = write_container(read_header(whole), {name: column[shuffled] for name, column in state.items()})
    assert blob != whole
    again = olh.OLHServer.from_bytes(blob)
    assert again.to_bytes() == whole
    np.testing.assert_array_equal(again.estimate([0, 1, 2]), olh.OLHServer.from_bytes(whole).estimate([0, 1, 2]))


def _arrays(blob):
    """(name, .npy image) of each state array of aggregator bytes."""
    from ldpfast._container import _parse_container

    return _parse_container(blob)[1]
