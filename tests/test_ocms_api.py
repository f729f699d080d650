"""OCMS+RR public API: conversions, validation, aggregation contract, serialization, and
interoperability with independent clients."""

import math
import pickle
import random
import struct
import zlib

import numpy as np
import pytest

from ldpfast import _base, theory
from ldpfast.protocols.frequency import grr, ocms
from ldpfast.errors import DTypeError, FormatError, IncompatibleError, ParameterError, ReportError
from ldpfast.kernels.field import PRIME, irreducible_polynomial, poly_low_bits

R1_PRIME = 18361375334787046697  # [PAN] reference code R1's prime (not 2^64 - 59)


@pytest.fixture(scope="module")
def params():
    return ocms.OCMSParams.optimal(2.0, 1000)


@pytest.fixture(scope="module")
def reports(params):
    values = np.random.default_rng(1).zipf(1.3, 5000) % params.d
    return ocms.OCMSClient(params, rng=2).perturb(values)


# --- Reports --------------------------------------------------------------------------

def test_reports_convert_python_ints_without_loss():
    r = ocms.OCMSReports(z=[1, 0], a0=[2**64 - 1, 5], a1=np.array([3, 4], dtype=np.int32))
    assert r.a0.dtype == np.uint64 and int(r.a0[0]) == 2**64 - 1
    assert r.a1.tolist() == [3, 4] and len(r) == 2
    objects = ocms.OCMSReports(z=np.array([1, 2], dtype=object), a0=np.array([2**64 - 2, 0], dtype=object), a1=[1, 1])
    assert objects.a0.tolist() == [2**64 - 2, 0]
    single = ocms.OCMSReports(z=1, a0=2, a1=3)
    assert len(single) == 1 and single == ocms.OCMSReports(z=[1], a0=[2], a1=[3])


@pytest.mark.parametrize("columns,message", [
    (dict(z=[1, -1], a0=[1, 1], a1=[1, 1]), r"z must be non-negative integers, got -1 at index 1"),
    (dict(z=[1], a0=[2**64], a1=[1]), r"a0 must be integers in \[0, 2\^64\), got 18446744073709551616"),
    (dict(z=[1], a0=[1], a1=[-5, 2**64]), r"a1 must be integers in \[0, 2\^64\), got -5 at index 0"),
    (dict(z=[1.0], a0=[1], a1=[1]), r"z must hold integers, got 1.0 at index 0"),
    (dict(z=np.array([1.5]), a0=[1], a1=[1]), r"z must hold integers, got dtype float64"),
    (dict(z=[True], a0=[1], a1=[1]), r"z must hold integers, got dtype bool"),
    (dict(z=True, a0=[1], a1=[1]), r"z must be integers, got True"),
    (dict(z=["1"], a0=[1], a1=[1]), r"z must hold integers, got dtype <U1"),
    (dict(z=np.zeros((2, 2), dtype=np.uint64), a0=[1], a1=[1]), r"z must be one-dimensional"),
    (dict(z=[1, 2], a0=[1], a1=[1, 2]), r"report columns must have equal lengths"),
])
def test_reports_reject_malformed_columns(columns, message):
    with pytest.raises(ReportError, match=message):
        ocms.OCMSReports(**columns)


# --- Client ---------------------------------------------------------------------------

def test_client_output_fits_params(params, reports):
    assert len(reports) == 5000
    assert int(reports.z.max()) < params.m
    assert int(reports.a0.max()) < PRIME and int(reports.a1.max()) < PRIME
    assert len(ocms.OCMSClient(params, rng=1).perturb(7)) == 1


@pytest.mark.parametrize("values,message", [
    ([0, 5, 1000], r"values must be integers in \[0, 1000\), got 1000 at index 2"),
    ([3, -1], r"values must be non-negative integers, got -1 at index 1"),
    (np.array([1.0, 2.0]), r"values must hold integers, got dtype float64"),
])
def test_client_rejects_bad_values(params, values, message):
    with pytest.raises(ParameterError, match=message):
        ocms.OCMSClient(params, rng=1).perturb(values)


def test_client_without_a_domain_refuses_strings(params):
    with pytest.raises(DTypeError, match=r"no domain: attach one"):
        ocms.OCMSClient(params, rng=1).perturb("abc")


def test_client_rejects_bad_arguments(params):
    with pytest.raises(ParameterError, match="params must be OCMSParams"):
        ocms.OCMSClient(grr.GRRParams(1.0, 10))
    with pytest.raises(ParameterError, match="threads must be a non-negative int"):
        ocms.OCMSClient(params, threads=-1)
    with pytest.raises(ParameterError, match="rng must be None"):
        ocms.OCMSClient(params, rng="seed")


def test_seeded_client_is_reproducible_and_thread_independent(params):
    values = np.arange(50_000) % params.d
    a = ocms.OCMSClient(params, rng=42, threads=1).perturb(values)
    b = ocms.OCMSClient(params, rng=42, threads=2).perturb(values)
    assert a == b
    assert ocms.OCMSClient(params, rng=43).perturb(values) != a
    client = ocms.OCMSClient(params, rng=42)
    assert client.perturb(values) == a and client.perturb(values) != a  # a fresh key per batch


def test_os_entropy_client_is_not_reproducible(params):
    values = np.zeros(1000, dtype=np.int64)
    first = ocms.OCMSClient(params).perturb(values)
    assert ocms.OCMSClient(params).perturb(values) != first
    assert not np.array_equal(first.a0, ocms.OCMSClient(params).perturb(values).a0)


def test_nonzero_coefficients(params):
    small = ocms.OCMSParams(2.0, 12, 3, 13, a_range="nonzero")
    r = ocms.OCMSClient(small, rng=9).perturb(np.arange(20_000) % 12)
    assert int(r.a0.min()) == 1 and int(r.a1.min()) == 1 and int(r.a0.max()) == 12
    assert r == ocms.OCMSClient(small, rng=9).perturb(np.arange(20_000) % 12)
    np.testing.assert_array_equal(np.bincount(r.a1.astype(np.int64), minlength=13)[0], 0)


# --- Server: validation and atomic updates ----------------------------------------------

def _servers(params):
    return [ocms.OCMSServer(params), ocms.OCMSServer(params, candidates=np.arange(0, 1000, 7))]


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("bad,message", [
    ("z", r"z must be hash values in \[0, 4\), got 4 at index 3"),
    ("a0", r"a0 must be field elements in \[0, 18446744073709551557\), got 18446744073709551557 at index 3"),
    ("a1", r"a1 must be field elements in \[0, 18446744073709551557\)"),
])
def test_rejected_batch_leaves_server_unchanged(params, reports, mode, bad, message):
    server = _servers(params)[mode].update(reports)
    before = server.to_bytes()
    columns = {k: v[:10].copy() for k, v in reports.columns().items()}
    columns[bad][3] = params.m if bad == "z" else PRIME
    with pytest.raises(ReportError, match=message):
        server.update(ocms.OCMSReports(**columns))
    assert server.to_bytes() == before and server.n == len(reports)


def test_update_contract(params, reports):
    server = ocms.OCMSServer(params)
    with pytest.raises(ReportError, match="cannot estimate frequencies from zero reports"):
        server.estimate([1])
    assert server.update(ocms.OCMSReports(z=[], a0=[], a1=[])) is server and server.n == 0
    with pytest.raises(ReportError, match="reports must be OCMSReports, got dict"):
        server.update(reports.columns())
    assert server.update(reports) is server and server.n == len(reports)
    with pytest.raises(ParameterError, match=r"candidates must be values in \[0, 1000\), got 1000"):
        server.estimate([1, 1000])
    stream = ocms.OCMSServer(params, candidates=[3, 1, 2]).update(reports)
    with pytest.raises(ParameterError, match="4 is not"):
        stream.estimate([1, 4])
    np.testing.assert_array_equal(stream.estimate([2, 3]), server.estimate([2, 3]))
    np.testing.assert_array_equal(stream.estimate(), server.estimate([3, 1, 2]))
    with pytest.raises(ParameterError, match="candidates must be distinct"):
        ocms.OCMSServer(params, candidates=[1, 1])
    with pytest.raises(ParameterError, match="keeps no reports"):
        stream.reports()


def test_estimate_options(params, reports):
    server = ocms.OCMSServer(params).update(reports)
    raw = server.estimate(np.arange(20))
    assert raw.min() < 0  # raw estimates are unbiased and can be negative
    np.testing.assert_array_equal(server.estimate(np.arange(20), clip=True), np.clip(raw, 0, 1))
    np.testing.assert_allclose(server.estimate_counts(np.arange(20)), raw * len(reports), rtol=1e-15)
    counts = server.match_counts(np.arange(20))
    assert counts.dtype == np.uint64
    np.testing.assert_array_equal(ocms.decode_matches(params, counts, len(reports)), raw)


def test_server_threads_and_backends_agree(params, reports, backend):
    one = ocms.OCMSServer(params, threads=1).update(reports).match_counts()
    two = ocms.OCMSServer(params, threads=2).update(reports).match_counts()
    np.testing.assert_array_equal(one, two)
    listed = ocms.OCMSServer(params).update(reports).match_counts(np.arange(999, -1, -1))
    np.testing.assert_array_equal(listed[::-1], one)


# --- merge, equality, serialization -----------------------------------------------------

def _split(reports, parts):
    cuts = np.linspace(0, len(reports), parts + 1).astype(int)
    return [ocms.OCMSReports(**{k: v[a:b] for k, v in reports.columns().items()}) for a, b in zip(cuts, cuts[1:])]


@pytest.mark.parametrize("mode", [0, 1])
def test_merge_is_exact_and_order_independent(params, reports, mode):
    whole = _servers(params)[mode].update(reports)
    pieces = _split(reports, 3)
    parts = []
    for piece in pieces:
        server = _servers(params)[mode]
        parts.append(server.update(piece))
    forward = _servers(params)[mode]
    for p in parts:
        forward.merge(p)
    backward = _servers(params)[mode]
    for p in reversed(parts):
        backward.merge(p)
    assert forward == whole and backward == whole
    assert forward.to_bytes() == backward.to_bytes() == whole.to_bytes()
    np.testing.assert_array_equal(forward.estimate(np.arange(0, 1000, 7)), whole.estimate(np.arange(0, 1000, 7)))
    assert parts[0].n == len(pieces[0])  # merge leaves its argument unchanged
    empty = _servers(params)[mode]
    assert empty.merge(whole) == whole  # the empty server is the identity


def test_merge_rejects_incompatible(params, reports):
    keep, stream = _servers(params)
    with pytest.raises(IncompatibleError, match="different parameters"):
        keep.merge(ocms.OCMSServer(ocms.OCMSParams.optimal(2.0, 1001)))
    with pytest.raises(IncompatibleError, match="report-keeping server with a candidate-count"):
        keep.merge(stream)
    with pytest.raises(IncompatibleError, match="different candidates"):
        stream.merge(ocms.OCMSServer(params, candidates=[1, 2]))
    with pytest.raises(IncompatibleError, match="cannot merge"):
        keep.merge(grr.GRRServer(grr.GRRParams(1.0, 10)))
    assert keep != stream


@pytest.mark.parametrize("mode", [0, 1])
def test_bytes_and_pickle_round_trip(params, reports, mode):
    server = _servers(params)[mode].update(reports)
    again = ocms.OCMSServer.from_bytes(server.to_bytes())
    assert again == server and again.n == server.n
    np.testing.assert_array_equal(again.estimate([0, 7, 14]), server.estimate([0, 7, 14]))
    assert pickle.loads(pickle.dumps(server)) == server
    empty = _servers(params)[mode]
    assert ocms.OCMSServer.from_bytes(empty.to_bytes()) == empty
    if mode == 1:
        np.testing.assert_array_equal(again.candidates, np.arange(0, 1000, 7))
    else:
        assert again.reports() == server.reports()


def _rewrite_state(blob, name, mutate):
    """Re-encode the stored array ``name`` after ``mutate`` and fix the checksum: the kind of
    tampering a CRC does not catch."""
    import io
    body = blob[:-4]
    pos = len(_base.FORMAT_MAGIC)
    _, header_len = struct.unpack_from("<HI", body, pos)
    pos += 6 + header_len
    (count,) = struct.unpack_from("<I", body, pos)
    pos += 4
    out = bytearray(body[:pos])
    for _ in range(count):
        name_len, size = struct.unpack_from("<HQ", body, pos)
        key = body[pos + 10:pos + 10 + name_len].decode()
        raw = body[pos + 10 + name_len:pos + 10 + name_len + size]
        pos += 10 + name_len + size
        if key == name:
            arr = mutate(np.load(io.BytesIO(raw)))
            buf = io.BytesIO()
            np.save(buf, arr)
            raw = buf.getvalue()
        out += struct.pack("<HQ", name_len, len(raw)) + key.encode() + raw
    return bytes(out) + struct.pack("<I", zlib.crc32(bytes(out)))


def test_from_bytes_rejects_corrupt_or_tampered(params, reports):
    keep, stream = (s.update(reports) for s in _servers(params))
    blob = keep.to_bytes()
    with pytest.raises(FormatError, match="checksum"):
        ocms.OCMSServer.from_bytes(blob[:100] + bytes([blob[100] ^ 1]) + blob[101:])
    with pytest.raises(FormatError, match="not an ldpfast aggregator"):
        ocms.OCMSServer.from_bytes(b"hello world, this is no aggregator")
    with pytest.raises(FormatError, match="'grr' aggregator"):
        ocms.OCMSServer.from_bytes(grr.GRRServer(grr.GRRParams(1.0, 10)).to_bytes())

    def too_big(z):
        z = z.copy()
        z[0] = params.m
        return z
    with pytest.raises(FormatError, match="stored reports do not fit"):
        ocms.OCMSServer.from_bytes(_rewrite_state(blob, "z", too_big))
    with pytest.raises(FormatError, match="different lengths"):
        ocms.OCMSServer.from_bytes(_rewrite_state(blob, "a1", lambda a: a[:-1]))
    sblob = stream.to_bytes()
    with pytest.raises(FormatError, match="exceed the number of reports"):
        ocms.OCMSServer.from_bytes(_rewrite_state(sblob, "counts", lambda c: c + np.uint64(10**6)))
    with pytest.raises(FormatError, match="stored candidates are invalid"):
        ocms.OCMSServer.from_bytes(_rewrite_state(sblob, "candidates", lambda c: np.zeros_like(c)))
    with pytest.raises(FormatError, match="1-D uint64"):
        ocms.OCMSServer.from_bytes(_rewrite_state(sblob, "n", lambda n: n.astype(np.int64)))


def test_protocol_is_registered():
    proto = _base.protocols()["ocms"]
    assert (proto.params, proto.reports, proto.aggregator, proto.client) == (
        ocms.OCMSParams, ocms.OCMSReports, ocms.OCMSServer, ocms.OCMSClient)


# --- interoperability: reports from independent pure-Python clients ---------------------

def _python_rr(rng, y, m, eps):
    """k-ary RR written from the definition (SPEC 1.2) with Python's own generator."""
    if rng.random() < (m - 1) / (math.expm1(eps) + m):
        other = rng.randrange(m - 1)
        return other if other < y else other + 1
    return y


def test_r1_style_client_with_another_prime_decodes():
    """A client written like [PAN]'s reference code R1: its prime 18361375334787046697,
    a0, a1 from randrange(1, P), plain-m decoding. The server told that field counts exactly
    what a Python reference counts and estimates within Z sd of the truth."""
    eps, d, n = 3.0, 50, 20_000
    params = ocms.OCMSParams(eps, d, 5, R1_PRIME, a_range="nonzero", use_m_prime=False)
    rng = random.Random(2024)
    values = [min(int(rng.paretovariate(1.2)) - 1, d - 1) for _ in range(n)]
    rows = []
    for x in values:
        a0, a1 = rng.randrange(1, R1_PRIME), rng.randrange(1, R1_PRIME)
        rows.append((_python_rr(rng, (a0 + a1 * x) % R1_PRIME % 5, 5, eps), a0, a1))
    z, a0, a1 = zip(*rows)
    server = ocms.OCMSServer(params).update(ocms.OCMSReports(z=list(z), a0=list(a0), a1=list(a1)))
    candidates = [0, 1, 2, 49]
    want = [sum(zi == (u + v * x) % R1_PRIME % 5 for zi, u, v in rows) for x in candidates]
    assert server.match_counts(candidates).tolist() == want
    est = server.estimate(candidates)
    z_crit = 5.73  # two-sided 1e-8 per candidate
    for x, e in zip(candidates, est):
        f = values.count(x) / n
        assert abs(e - f) < z_crit * math.sqrt(theory.ocms_variance(eps, 5, n, f))


def _gf_mul(a, b, l, poly):
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if a >> l:
            a ^= poly
    return out


def test_python_gf2l_client_decodes():
    """Reports hashed by a bit-by-bit Python GF(2^16) implementation (the SPEC 2.3
    polynomial) are counted exactly like the C++ field does."""
    l, m, d = 16, 4, 1000
    poly = sum(1 << e for e in irreducible_polynomial(l))
    assert poly_low_bits(irreducible_polynomial(l)) == poly ^ (1 << l)
    params = ocms.OCMSParams(2.0, d, m, 2**l, "binary")
    rng = random.Random(7)
    rows = []
    for _ in range(3000):
        x, a0, a1 = rng.randrange(d), rng.randrange(2**l), rng.randrange(2**l)
        rows.append((_python_rr(rng, (_gf_mul(a1, x, l, poly) ^ a0) % m, m, 2.0), a0, a1))
    z, a0, a1 = (list(c) for c in zip(*rows))
    server = ocms.OCMSServer(params).update(ocms.OCMSReports(z=z, a0=a0, a1=a1))
    candidates = [0, 1, 77, 999]
    want = [sum(zi == (_gf_mul(v, x, l, poly) ^ u) % m for zi, u, v in rows) for x in candidates]
    assert server.match_counts(candidates).tolist() == want


def test_gf2_64_field_for_dictionaries_beyond_the_prime():
    """d >= PRIME needs GF(2^64) ([PAN] Alg. 1); values near 2^64 hash like the Python field."""
    params = ocms.OCMSParams.optimal(1.0, 2**64 - 1)
    assert (params.field_size, params.poly) == (2**64, (64, 4, 3, 1, 0))
    values = [2**64 - 2, 2**63 + 12345, 5]
    reports = ocms.OCMSClient(params, rng=3).perturb(values)
    poly = sum(1 << e for e in params.poly)
    for x, z, a0, a1 in zip(values, reports.z.tolist(), reports.a0.tolist(), reports.a1.tolist()):
        server = ocms.OCMSServer(params).update(ocms.OCMSReports(z=[z], a0=[a0], a1=[a1]))
        want = int(z == (_gf_mul(a1, x, 64, poly) ^ a0) % params.m)
        assert server.match_counts([x]).tolist() == [want]
