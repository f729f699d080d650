"""ldpfast.wire: exact bit counts, round trips, and rejection of malformed messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import _toy_protocol as toy
from ldpfast import wire
from ldpfast._base import protocols
from ldpfast.errors import IncompatibleError, ReportError

#: protocol id -> (params factory, expected bits per report as the paper states it).
#: Filled for the families present on this branch.
PAPER_BITS = {}


def _reference_pack(values_by_field, widths):
    """Bit string of reports concatenated MSB first, by Python integers (reference)."""
    acc, nbits = 0, 0
    for row in zip(*values_by_field):
        for value, bits in zip(row, widths):
            acc = (acc << bits) | int(value)
            nbits += bits
    pad = (-nbits) % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big") if nbits else b""


def test_bits_for():
    assert [wire.bits_for(s) for s in (1, 2, 3, 4, 5, 8, 9, 2**64)] == [0, 1, 2, 2, 3, 3, 4, 64]
    with pytest.raises(ValueError):
        wire.bits_for(0)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 2**20), n=st.integers(0, 300), seed=st.integers(0, 2**32 - 1))
def test_packed_encoding_matches_reference_and_round_trips(m, n, seed):
    params = toy.ToyParams(m=m)
    rng = np.random.default_rng(seed)
    reports = toy.ToyClient(params, rng=seed).perturb(rng.integers(0, m, size=n))
    bits = (m - 1).bit_length() + 1
    assert wire.report_bits(params) == bits
    blob = wire.encode(params, reports)
    codes = [reports.y, (reports.s > 0).astype(np.uint64)]
    assert blob == _reference_pack(codes, [bits - 1, 1])
    back = wire.decode(params, blob, n)
    np.testing.assert_array_equal(back.y, reports.y)
    np.testing.assert_array_equal(back.s, reports.s)
    messages = wire.encode_each(params, reports)
    assert all(len(msg) == (bits + 7) // 8 for msg in messages)
    assert [m_ for m_ in messages] == [_reference_pack([[y], [c]], [bits - 1, 1])
                                       for y, c in zip(codes[0], codes[1])]
    each = wire.decode_each(params, messages)
    np.testing.assert_array_equal(each.y, reports.y)
    np.testing.assert_array_equal(each.s, reports.s)


def test_large_batch_crosses_chunk_boundaries():
    params = toy.ToyParams(m=37)  # 7 bits per report: chunks must stay byte-aligned
    n = 3 * (1 << 16) + 5
    reports = toy.ToyClient(params, rng=1).perturb(np.arange(n) % 37)
    blob = wire.encode(params, reports)
    assert len(blob) == (7 * n + 7) // 8
    back = wire.decode(params, blob, n)
    np.testing.assert_array_equal(back.y, reports.y)
    np.testing.assert_array_equal(back.s, reports.s)


def test_malformed_messages_are_rejected():
    params = toy.ToyParams(m=37)  # y needs 6 bits, values 37..63 are invalid
    reports = toy.ToyClient(params, rng=2).perturb(np.arange(10) % 37)
    blob = wire.encode(params, reports)
    with pytest.raises(ReportError, match="need 9 bytes"):
        wire.decode(params, blob[:-1], 10)
    with pytest.raises(ReportError, match="padding"):
        wire.decode(params, blob[:-1] + bytes([blob[-1] | 1]), 10)
    with pytest.raises(ReportError, match="y must be < m=37"):  # the protocol's own validation
        wire.decode_each(params, [bytes([0b1111110_0])])
    with pytest.raises(ReportError, match="padding"):
        wire.decode_each(params, [bytes([0b0000010_1])])
    with pytest.raises(ReportError, match="1 bytes"):
        wire.decode_each(params, [b"\x00\x00"])
    with pytest.raises(IncompatibleError):
        wire.encode(toy.ToyParams(m=37), type("Other", (), {"protocol": "x"})())


def test_values_that_do_not_fit_are_rejected_on_encode():
    params = toy.ToyParams(m=4)  # 2 bits
    with pytest.raises(ReportError, match="< 2\\*\\*2"):
        wire.encode(params, toy.ToyReports(y=np.array([1, 4], np.uint64), s=np.array([1, 1], np.int8)))
    with pytest.raises(ReportError, match="values in"):
        wire.encode(params, toy.ToyReports(y=np.array([1, 2], np.uint64), s=np.array([1, 0], np.int8)))


@pytest.mark.parametrize("pid", sorted(PAPER_BITS) or [pytest.param("none", marks=pytest.mark.skip(
    reason="no protocol family with a wire encoding is merged on this branch"))])
def test_report_bits_are_the_papers(pid):
    make, expected = PAPER_BITS[pid]
    params = make()
    assert wire.report_bits(params) == expected
    proto = protocols()[pid]
    values = np.arange(200) % getattr(params, "d", 2)
    reports = proto.client(params, rng=3).perturb(values)
    back = wire.decode(params, wire.encode(params, reports), len(reports))
    for name, column in reports.columns().items():
        np.testing.assert_array_equal(getattr(back, name), column)
    agg_a = proto.aggregator(params).update(reports)
    agg_b = proto.aggregator(params).update(wire.decode_each(params, wire.encode_each(params, reports)))
    assert agg_a.to_bytes() == agg_b.to_bytes()
