"""RAPPOR (ldpfast.protocols.repeated.rappor): bit compatibility with the reference clients'
encodings, checked against a second, independent implementation written here from their
description (hashlib/hmac, google/rappor's client/python/rappor.py and client/cpp/encoder.cc),
plus literal vectors it produced; the privacy budgets' closed forms; and the decoders'
statistics (the least-squares decode is unbiased with the sandwich variance; the lasso finds
the heavy candidates; EM's standard errors cover)."""

import dataclasses
import hashlib
import hmac
import math
import struct

import numpy as np
import pytest
from _moments import ALPHA, check_mean, check_variance
from scipy import stats

from ldpfast import audit
from ldpfast._base import protocol
from ldpfast.errors import ParameterError, PrivacyWarning, ReportError
from ldpfast.protocols.repeated import rappor
from ldpfast.protocols._memo import new_secrets


# -- the independent route: the reference clients, from their description -----------------
def ref_bloom(word, cohort, h, k):
    digest = hashlib.md5(struct.pack(">L", cohort) + word).digest()
    out = 0
    for i in range(h):
        out |= 1 << (digest[i] % k)
    return out


def ref_masks(digest, k, threshold):
    uniform = f_mask = 0
    for i in range(k):
        uniform |= (digest[i] & 1) << i
        f_mask |= int((digest[i] >> 1) < threshold) << i
    return uniform, f_mask


def ref_prr_python(secret, bits, f, k):
    digest = hmac.new(secret, struct.pack(">L", bits), hashlib.sha256).digest()
    uniform, f_mask = ref_masks(digest, k, f * 128)     # the Python client's float threshold
    return (bits & ~f_mask) | (uniform & f_mask)


def ref_prr_cpp(secret, encoder_id, bits, f, k):
    digest = hmac.new(secret, b"\x01" + encoder_id + struct.pack(">L", bits), hashlib.sha256).digest()
    uniform, f_mask = ref_masks(digest, k, int(np.float32(f) * np.float32(128)))   # uint8(float f * 128)
    return (bits & ~f_mask) | (uniform & f_mask)


def ref_cohort(secret, m, mac=None):
    mac = mac or hmac.new(secret, b"", hashlib.sha256).digest()
    return struct.unpack("<I", mac[:4])[0] & (m - 1)


def ref_drbg(key, value, nbytes):
    k, v = b"\x00" * 32, b"\x01" * 32
    for separator in (b"\x00", b"\x01"):
        k = hmac.new(k, v + separator + key + value, hashlib.sha256).digest()
        v = hmac.new(k, v, hashlib.sha256).digest()
    out = b""
    while len(out) < nbytes:
        v = hmac.new(k, v, hashlib.sha256).digest()
        out += v
    return out[:nbytes]


def ref_bloom_drbg(word, cohort, h, k):
    per = (max(1, (k - 1).bit_length()) - 1) // 8 + 1
    digest = hashlib.md5(struct.pack(">L", cohort) + word).digest()
    out = 0
    for i in range(h):
        out |= 1 << (int.from_bytes(digest[i * per:(i + 1) * per], "little") % k)
    return out


def ref_prr_drbg(secret, encoder_id, bits, f, k):
    digest = ref_drbg(secret, b"\x01" + encoder_id + bits.to_bytes(k // 8, "big"), k)
    uniform, f_mask = ref_masks(digest, k, int(np.float32(f) * np.float32(128)))
    return (bits & ~f_mask) | (uniform & f_mask)


SECRETS = [b"secret-0", b"another secret of 32 bytes long!", b"x" * 40]
WORDS = [b"abc", b"v17", b"https://example.com/"]
# (secret, word, cohort, bloom, PRR python f=0.5, PRR cpp 'metric' f=0.25), k=32, h=2, m=64,
# the cohort derived as the C++ client does; produced by the functions above.
VECTORS = [
    (0, 0, 19, 8704, 1534488, 2147624452), (0, 1, 19, 2097664, 1117790729, 279052800),
    (0, 2, 19, 65, 3393323105, 8392785), (1, 0, 8, 536870976, 76567105, 554373185),
    (1, 1, 8, 513, 630499912, 2563), (1, 2, 8, 3221225472, 3844100208, 3226599440),
    (2, 0, 16, 268435456, 448792160, 310412339), (2, 1, 16, 138412032, 140531713, 943722816),
    (2, 2, 16, 1073741840, 3272081537, 1242039377),
]


@pytest.mark.parametrize("row", VECTORS)
def test_literal_vectors(row):
    s, w, cohort, bloom, prr_py, prr_cc = row
    assert ref_cohort(SECRETS[s], 64) == cohort and ref_bloom(WORDS[w], cohort, 2, 32) == bloom
    assert ref_prr_python(SECRETS[s], bloom, 0.5, 32) == prr_py
    assert ref_prr_cpp(SECRETS[s], b"metric", bloom, 0.25, 32) == prr_cc
    py = rappor.RAPPORClient(rappor.RAPPORParams(k=32, h=2, m=64, f=0.5))
    assert py.bloom([WORDS[w]], [cohort]).to_integers() == [bloom]
    assert py.permanent([WORDS[w]], [SECRETS[s]]).to_integers() == [prr_py]
    assert py.permanent([WORDS[w]], [SECRETS[s]]).cohort.tolist() == [cohort]
    cc = rappor.RAPPORClient(rappor.RAPPORParams(k=32, h=2, m=64, f=0.25, encoding="cpp", encoder_id="metric"))
    assert cc.permanent([WORDS[w]], [SECRETS[s]]).to_integers() == [prr_cc]


def test_drbg_literal_vector():
    secret, word = SECRETS[1], WORDS[2]
    cohort = struct.unpack("<I", ref_drbg(secret, b"", 32)[:4])[0] & 127
    bloom = ref_bloom_drbg(word, cohort, 2, 128)
    assert (cohort, bloom) == (97, 83076749736557242074502339777003520)
    expected = 27997048629944108507178906467405177417
    assert ref_prr_drbg(secret, b"home-page", bloom, 0.5, 128) == expected
    client = rappor.RAPPORClient(rappor.RAPPORParams(k=128, h=2, m=128, f=0.5, encoding="cpp-drbg",
                                                     encoder_id="home-page"))
    got = client.permanent([word], [secret])
    assert got.cohort.tolist() == [97] and got.to_integers() == [expected]


@pytest.mark.parametrize("encoding, k, h, m, f", [("python", 32, 2, 64, 0.5), ("python", 13, 4, 8, 0.3),
                                                  ("cpp", 32, 16, 16, 0.75), ("cpp", 8, 1, 1, 0.1),
                                                  ("cpp-drbg", 128, 3, 32, 0.5), ("cpp-drbg", 512, 8, 4, 0.3),
                                                  ("cpp-drbg", 16, 2, 2, 0.9)])
def test_bit_compatible_with_the_reference_encodings(encoding, k, h, m, f):
    rng = np.random.default_rng(k + h)
    n = 60
    words = [rng.bytes(int(v)) for v in rng.integers(0, 70, n)]
    secrets = [rng.bytes(int(v)) for v in rng.integers(1, 90, n)] if encoding != "cpp-drbg" else \
        [rng.bytes(32) for _ in range(n)]
    params = rappor.RAPPORParams(k=k, h=h, m=m, f=f, encoding=encoding,
                                 encoder_id="id-7" if encoding != "python" else "")
    client = rappor.RAPPORClient(params, rng=1)
    got = client.permanent(words, secrets)
    for i in range(n):
        key = secrets[i]
        if encoding == "cpp-drbg":
            cohort = ref_cohort(key, m, ref_drbg(key, b"", 32))
            bloom = ref_bloom_drbg(words[i], cohort, h, k)
            expected = ref_prr_drbg(key, b"id-7", bloom, f, k)
        else:
            cohort = ref_cohort(key, m)
            bloom = ref_bloom(words[i], cohort, h, k)
            expected = ref_prr_python(key, bloom, f, k) if encoding == "python" else \
                ref_prr_cpp(key, b"id-7", bloom, f, k)
        assert int(got.cohort[i]) == cohort
        assert got.to_integers()[i] == expected, (i, encoding)
    # the same user and value always give the same PRR; the IRR is fresh per report
    again = client.permanent(words, secrets)
    assert again == got
    reports = [client.perturb(words[:1], secrets[:1]).to_integers()[0] for _ in range(40)]
    assert len(set(reports)) > 1


def test_values_and_report_formats():
    data, offsets = rappor.encode_values([0, 7, 10, 123456789])
    assert offsets.tolist() == [0, 1, 2, 4, 13]
    assert bytes(data) == b"0710123456789"
    strings, _ = rappor.encode_values(["é", b"\xff"])
    assert bytes(strings) == "é".encode() + b"\xff"
    with pytest.raises(ParameterError, match="values must be bytes, str or non-negative integers"):
        rappor.encode_values([1.5])
    reports = rappor.RAPPORReports.from_bit_strings([3, 0], ["0000000000000101", "1000000000000000"])
    assert reports.to_integers() == [5, 32768] and reports.bits.shape == (2, 2)
    assert rappor.RAPPORReports.from_integers([1], [2**31 + 1], 32).bits.tolist() == [[1, 0, 0, 128]]
    with pytest.raises(ReportError):
        rappor.RAPPORReports.from_integers([1], [2**32], 32)


def test_params_budgets_follow_the_paper():
    # Erlingsson et al. Theorems 1 and 2, with the samplers' exact f (128ths), p and q.
    p = rappor.RAPPORParams(k=16, h=2, m=64, p=0.5, q=0.75, f=0.5)
    assert p.f128 == 64 and p.eps_inf == pytest.approx(2 * 2 * math.log(0.75 / 0.25), rel=1e-12)
    qs, ps = 0.75 * 0.75 + 0.25 * 0.5, 0.25 * 0.75 + 0.75 * 0.5
    assert (p.q_star, p.p_star) == (qs, ps)
    assert p.eps_1 == pytest.approx(2 * math.log(qs * (1 - ps) / (ps * (1 - qs))), rel=1e-12)
    # f = 0.3: the Python client counts r < 38.4 (39 of 128), the C++ one truncates to 38
    assert rappor.RAPPORParams(f=0.3).f128 == 39 and rappor.RAPPORParams(f=0.3, encoding="cpp").f128 == 38
    assert rappor.RAPPORParams(p=0.0, q=1.0).irr_thresholds() is None
    for bad, message in [({"k": 33}, "k must be in"), ({"k": 36, "encoding": "cpp-drbg"}, "multiple of 8"),
                         ({"h": 17}, "h must be in"), ({"f": 1.0}, r"f must give f_effective < 1 .*got f=1.0"),
                         ({"f": 0.999}, r"got f=0.999 \(f_effective = 1 in the python"),
                         ({"p": 0.5, "q": 0.5}, "differ"),
                         ({"encoding": "java"}, "encoding must be one of"),
                         ({"f": 0.001, "encoding": "cpp"}, "rounds to 0/128")]:
        with pytest.raises(ParameterError, match=message):
            rappor.RAPPORParams(**bad)


# -- decoding --------------------------------------------------------------------------------
def _counts_of(params, values, cohorts, seed):
    reports = rappor.RAPPORClient(params, rng=seed).perturb(values, cohorts=cohorts)
    return rappor.RAPPORServer(params).update(reports)


def test_least_squares_decode_is_unbiased_with_the_sandwich_variance():
    # Balanced fixed cohorts and i.i.d. values: given the cohort sizes the least-squares
    # decode is linear in the counts, unbiased, and its variance is exactly the sandwich
    # at the true f (each report's bits are independent given its value and Bloom bits).
    params = rappor.RAPPORParams(k=16, h=2, m=8, p=0.25, q=0.75, f=0.25, d=6)
    f = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    n, runs = 800, 300
    rng = np.random.default_rng(7)
    values = rng.choice(6, size=(runs, n), p=f)
    cohorts = np.tile(np.arange(8), n // 8)
    reports = rappor.RAPPORClient(params, rng=8).perturb(values.ravel(), cohorts=np.tile(cohorts, runs))
    bits = np.unpackbits(reports.bits, axis=1, bitorder="little", count=16).reshape(runs, n, 16)
    group = np.zeros((8, n))
    group[cohorts, np.arange(n)] = 1.0
    per_run = np.einsum("cu,rub->rcb", group, bits).astype(np.uint64)    # runs x cohorts x bits
    estimates = np.array([rappor.RAPPORServer.from_counts(params, c, np.full(8, n // 8)).estimate() for c in per_run])
    server = rappor.RAPPORServer.from_counts(params, per_run[0], np.full(8, n // 8))
    variance = protocol("rappor").variance(server, np.arange(6))[0](f)
    for x in range(6):
        check_mean(estimates[:, x], f[x], variance[x])
        # the estimate is a weighted sum of n independent bounded reports: excess kurtosis O(1/n)
        check_variance(estimates[:, x], variance[x], 0.0)


def test_lasso_finds_the_heavy_candidates_among_many():
    # 200 candidates, 5 reported: Bonferroni-level lasso keeps them, least squares refit
    # estimates each within 5 standard errors, and no absent candidate is significant.
    params = rappor.RAPPORParams(k=32, h=2, m=32, p=0.25, q=0.75, f=0.25)
    candidates = [f"value-{i}".encode() for i in range(200)]
    f = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
    values = np.random.default_rng(1).choice(5, size=100_000, p=f)
    server = _counts_of(params, [candidates[v] for v in values], None, 2)
    decoded = server.decode(candidates, method="lasso")
    assert decoded.selected[:5].all()
    assert np.all(np.abs(decoded.values[:5] - f) < 5 * decoded.std[:5])
    assert decoded.significant(0.05).tolist() == [True] * 5 + [False] * 195
    em = server.decode(candidates, method="em")
    assert np.all(np.abs(em.values[:5] - f) < 5 * em.std[:5]) and em.values[5:].sum() < 0.02
    nnls = server.decode(candidates, method="nnls")
    assert np.all(np.abs(nnls.values[:5] - f) < 0.02)
    with pytest.raises(ParameterError, match="method='ls' fits at most 500"):
        server.decode([str(i) for i in range(501)], method="ls")


def test_em_standard_errors_cover():
    # Over 100 runs, z = (EM estimate - f)/std of the 4 heavy candidates is standard normal
    # (composite-likelihood sandwich): mean(z^2) within the chi-square(400)/400 bounds.
    params = rappor.RAPPORParams(k=16, h=2, m=16, p=0.25, q=0.75, f=0.25, d=8)
    f = np.array([0.3, 0.25, 0.2, 0.1, 0.06, 0.05, 0.03, 0.01])
    runs, n = 100, 4000
    values = np.random.default_rng(3).choice(8, size=runs * n, p=f)
    reports = rappor.RAPPORClient(params, rng=4).perturb(values)
    z = []
    for r in range(runs):
        part = rappor.RAPPORReports(cohort=reports.cohort[r * n:(r + 1) * n], bits=reports.bits[r * n:(r + 1) * n])
        decoded = rappor.RAPPORServer(params).update(part).decode(method="em")
        z.append((decoded.values[:4] - f[:4]) / decoded.std[:4])
    z2 = np.square(z).ravel()
    dof = z2.size
    lo, hi = stats.chi2.ppf(ALPHA / 2, dof) / dof, stats.chi2.isf(ALPHA / 2, dof) / dof
    assert lo < z2.mean() < hi, (z2.mean(), lo, hi)


def test_server_from_counts_and_decode_checks():
    params = rappor.RAPPORParams(k=8, h=1, m=2, d=4)
    server = rappor.RAPPORServer.from_counts(params, np.array([[3] * 8, [1] * 8]), [5, 2])
    assert server.n == 7 and server.counts.tolist() == [[3] * 8, [1] * 8]
    with pytest.raises(ParameterError, match="counts do not fit the parameters"):
        rappor.RAPPORServer.from_counts(params, np.array([[6] * 8, [1] * 8]), [5, 2])
    with pytest.raises(ParameterError, match="method must be one of"):
        server.decode(method="magic")
    with pytest.raises(ParameterError, match="needs candidates"):
        rappor.RAPPORServer(rappor.RAPPORParams()).update(rappor.RAPPORClient(rappor.RAPPORParams(),
                                                                              rng=1).perturb(["a"])).estimate()


# -- audits: both budgets, within a derived margin --------------------------------------------
def _margin(p0, p1, n):
    # log(lo/hi): each Clopper-Pearson bound is z = 2.81 (alpha/4 = 0.0025 one-sided) sd from
    # its estimate, which is within 4 sd of the truth except with probability 6e-5.
    return (2.81 + 4) * (math.sqrt((1 - p0) / (n * p0)) + math.sqrt((1 - p1) / (n * p1)))


@pytest.mark.parametrize("budget", ["report", "permanent"])
def test_audit_is_tight_for_both_budgets(budget):
    eps, n = 1.0, 300_000
    params = audit.default_params("rappor", eps)
    result = audit.audit(params, n, rng=3, budget=budget)
    if budget == "report":   # event: x0's bit 1, x1's bit 0 (one hash, disjoint bits)
        p0, p1 = params.q_star * (1 - params.p_star), params.p_star * (1 - params.q_star)
        claimed = params.eps_1
    else:
        half = params.f_effective / 2
        p0, p1 = (1 - half) ** 2, half ** 2
        claimed = params.eps_inf
    assert math.log(p0 / p1) == pytest.approx(claimed, rel=1e-9)
    assert claimed - _margin(p0, p1, n) < result.eps_lb <= claimed, result
    assert result.budget == budget and result.epsilon == claimed


def test_default_secrets_come_from_the_os():
    client = rappor.RAPPORClient(rappor.RAPPORParams(m=4))
    assert not client.seeded
    a, b = client.permanent(["x"] * 200), client.permanent(["x"] * 200)
    assert a != b                       # fresh secrets: fresh users
    secrets = new_secrets(200)
    assert client.permanent(["x"] * 200, secrets) == client.permanent(["x"] * 200, secrets)


def test_frequencies_of_string_candidates():
    params = rappor.RAPPORParams(k=16, h=2, m=4, p=0.25, q=0.75)
    reports = rappor.RAPPORClient(params, rng=1).perturb(["a", "b", "a", "c"] * 500)
    estimate = rappor.RAPPORServer(params).update(reports).frequencies(["a", "b", "c"])
    assert repr(estimate).startswith("Estimate(protocol='rappor', n=2000, 3 candidates {a: ")
    assert np.isfinite(estimate.std).all() and "sandwich" in estimate.note


# -- the published client's IRR, secrets, values, f = 0 and f = 1 (issue 29) ------------------
def ref_encode(encoding, secret, word, cohort, h, k, f, p_word, q_word):
    """google/rappor's Encoder (client/python/rappor.py; client/cpp/encoder.cc's EncodeBits):
    Bloom filter, PRR, then ``irr = (p_bits & ~prr) | (q_bits & prr)`` with the words its
    ``irr_rand.p_gen()``/``q_gen()`` (C++: ``GetMask(prob_p)``/``GetMask(prob_q)``) return."""
    bloom = ref_bloom(word, cohort, h, k)
    prr = ref_prr_python(secret, bloom, f, k) if encoding == "python" else ref_prr_cpp(secret, b"m", bloom, f, k)
    return (p_word & ~prr) | (q_word & prr)


def ref_mask_word(rng, prob, k):
    """A word whose bits are 1 with probability ``prob`` (the reference ``_SecureRandom``'s rule)."""
    return sum(int(rng.random() < prob) << i for i in range(k))


@pytest.mark.parametrize("encoding, f", [("python", 0.5), ("python", 0.0), ("cpp", 0.25), ("cpp", 0.0)])
def test_injected_irr_words_give_the_published_clients_reports_bit_for_bit(encoding, f):
    k, h, m, n = 32, 2, 16, 200
    rng = np.random.default_rng(29)
    words = [rng.bytes(int(v)) for v in rng.integers(0, 40, n)]
    secrets = [rng.bytes(int(v)) for v in rng.integers(1, 80, n)]
    cohorts = rng.integers(0, m, n)
    p_words = [ref_mask_word(rng, 0.25, k) for _ in range(n)]
    q_words = [ref_mask_word(rng, 0.75, k) for _ in range(n)]
    with pytest.warns(PrivacyWarning) if f == 0.0 else _no_warning():
        params = rappor.RAPPORParams(k=k, h=h, m=m, p=0.25, q=0.75, f=f, encoding=encoding,
                               encoder_id="m" if encoding == "cpp" else "")
    got = rappor.RAPPORClient(params).perturb(words, secrets, cohorts, irr_words=(p_words, q_words))
    expected = [ref_encode(encoding, secrets[i], words[i], int(cohorts[i]), h, k, f, p_words[i], q_words[i])
                for i in range(n)]
    assert got.to_integers() == expected
    assert got.cohort.tolist() == cohorts.tolist()
    if f == 0.0:   # no PRR: the report is the IRR of the Bloom filter itself
        bloom = [ref_bloom(words[i], int(cohorts[i]), h, k) for i in range(n)]
        assert expected == [(p_words[i] & ~bloom[i]) | (q_words[i] & bloom[i]) for i in range(n)]


class _no_warning:
    def __enter__(self):
        self._catch = __import__("warnings").catch_warnings()
        self._catch.__enter__()
        __import__("warnings").simplefilter("error", PrivacyWarning)

    def __exit__(self, *exc):
        return self._catch.__exit__(*exc)


def test_injected_irr_words_are_checked():
    client = rappor.RAPPORClient(rappor.RAPPORParams(k=8, m=2))
    secrets = [b"one", b"two"]
    for words, message in [((1, 2), r"p_words must be a sequence of 2 entries \(one per value\), got int 1"),
                           ([[1, 2]], r"irr_words must be a pair"),
                           (([1, 256], [0, 0]), r"p_words\[1\] must be an integer in \[0, 2\^8\), got 256"),
                           (([1, 2], [0, -1]), r"q_words\[1\] must be an integer in \[0, 2\^8\), got -1"),
                           (([1, 2], [0, True]), r"q_words\[1\] must be an integer"),
                           (([1, 2], [0]), r"q_words must have one word per value \(2\), got 1")]:
        with pytest.raises(ParameterError, match=message):
            client.perturb(["a", "b"], secrets, irr_words=words)
    # all ones / all zeros: the report is q's word where the PRR is 1, p's where it is 0
    prr = client.permanent(["a", "b"], secrets).to_integers()
    assert client.perturb(["a", "b"], secrets, irr_words=([0, 0], [255, 255])).to_integers() == prr
    assert client.perturb(["a", "b"], secrets, irr_words=([255, 255], [0, 0])).to_integers() == [255 ^ v for v in prr]


def test_secrets_anyone_could_compute_or_users_would_share_are_refused():
    client = rappor.RAPPORClient(rappor.RAPPORParams(k=16, m=4, d=16), rng=1)
    fresh = rappor.RAPPORClient(rappor.RAPPORParams(k=16, m=4, d=16), rng=1)
    cases = [([b""] * 3, r"secrets\[0\] is empty or all zero bytes"),
             ([b"a", b"\x00\x00", b"b"], r"secrets\[1\] is empty or all zero bytes"),
             ([b"a", b"b", b"a"], r"secrets\[0\] and secrets\[2\] are one key"),
             ([b"b", b"a", b"a\x00"], r"secrets\[1\] and secrets\[2\] are one key"),   # HMAC zero-pads keys
             (["x", "y", "z"], r"secrets\[0\] must be bytes, got str"),
             ([b"a", 2, b"c"], r"secrets\[1\] must be bytes, got int"),
             (b"abc", r"secrets must be a sequence of 3 byte strings"),
             ([b"a", b"b"], r"secrets must have one entry per value \(3\), got 2"),
             (np.zeros((3, 8), np.uint8), r"secrets\[0\] is empty or all zero bytes"),
             (np.array([[1, 2], [3, 4], [1, 2]], np.uint8), r"secrets\[0\] and secrets\[2\] are one key")]
    for secrets, message in cases:
        with pytest.raises(ParameterError, match=message):
            client.perturb([1, 2, 3], secrets)
    drbg = rappor.RAPPORClient(rappor.RAPPORParams(k=16, m=4, encoding="cpp-drbg"))
    with pytest.raises(ParameterError, match="one length in the cpp-drbg encoding"):
        drbg.perturb(["a", "b"], [b"a" * 32, b"b" * 31])
    # a refused call leaves the client as it was: its next reports are a fresh client's
    assert client.perturb([1, 2, 3], [b"u", b"v", b"w"]) == fresh.perturb([1, 2, 3], [b"u", b"v", b"w"])



def test_repeated_secrets_are_found_byte_for_byte_whatever_the_fingerprints():
    from ldpfast.protocols.repeated import _rappor_inputs

    rows = np.array([[1, 2], [3, 4], [5, 6], [3, 4]], np.uint8)
    colliding = np.zeros(4, np.uint64)      # every fingerprint equal: the rows decide
    assert _rappor_inputs._first_repeat(rows, colliding) == (1, 3)
    assert _rappor_inputs._first_repeat(rows[:3], colliding[:3]) is None
    fingerprints, blank = _rappor_inputs._fingerprints(rows)
    assert _rappor_inputs._first_repeat(rows, fingerprints) == (1, 3) and not blank.any()

def test_integer_values_are_range_checked_against_the_dictionary():
    client = rappor.RAPPORClient(rappor.RAPPORParams(k=16, m=4, d=16), rng=1)
    for values, shown in [([2**70], 2**70), ([3, 16], 16), (np.array([20], np.uint64), 20), (2**64, 2**64),
                          ([1, "a", 2**65], 2**65)]:
        with pytest.raises(ParameterError, match=rf"values must be integers in \[0, 16\), got {shown} at index"):
            client.perturb(values, [b"k%d" % i for i in range(np.size(values) if not isinstance(values, int) else 1)])
    assert len(client.perturb([0, 15, "a"], [b"x", b"y", b"z"])) == 3   # strings are the deployment's own words


def test_a_deployment_without_prr_is_decoded_with_a_warning():
    # f = 0 (no PRR): reports still decode without bias (q* = q, p* = p); each estimate is
    # within Z (5.84) standard errors of the truth except with probability ALPHA.
    with pytest.warns(PrivacyWarning, match="no longitudinal protection"):
        params = rappor.RAPPORParams(k=16, h=2, m=8, p=0.25, q=0.75, f=0.0, d=6)
    assert params.f128 == 0 and params.eps_inf == math.inf and (params.q_star, params.p_star) == (0.75, 0.25)
    assert params.eps_1 == pytest.approx(2 * math.log(0.75 * 0.75 / (0.25 * 0.25)), rel=1e-12)
    client = rappor.RAPPORClient(params, rng=3)
    secrets = new_secrets(4)
    assert client.permanent([0, 1, 2, 3], secrets, np.arange(4)) == client.bloom([0, 1, 2, 3], np.arange(4))
    f = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    values = np.random.default_rng(9).choice(6, size=200_000, p=f)
    reports = client.perturb(values, cohorts=np.arange(values.size) % 8)
    server = rappor.RAPPORServer(params).update(reports)
    truth = np.bincount(values, minlength=6) / values.size
    decoded = server.decode(method="ls")
    assert np.all(np.abs(decoded.values - truth) < 5.84 * decoded.std)
    # the deployment's logs read back as its integers
    again = rappor.RAPPORServer(params).update(rappor.RAPPORReports.from_integers(reports.cohort,
                                                                                  reports.to_integers(), 16))
    assert np.array_equal(again.counts, server.counts)
    with pytest.raises(ParameterError, match=r"rounds to 0/128 .*read with f=0"):
        rappor.RAPPORParams(f=0.001, encoding="cpp")


@pytest.mark.parametrize("eps_inf, eps_1, fields", [
    (4.0, 1.0, {}), (8.0, 0.5, {"h": 4, "encoding": "cpp", "m": 8}),
    (1.0, 0.25, {"k": 64, "h": 3, "encoding": "cpp-drbg"}), (3.0, 2.99, {"h": 1})])
def test_from_budgets_spends_at_most_each_budget_and_the_next_setting_more(eps_inf, eps_1, fields):
    """eps_inf and eps_1 are the exact budgets of the samplers' probabilities (rounded up to a
    double): f is a whole 128th and p a whole 2^-53, so 'tight' is one grid step: f one 128th
    lower, or p one 2^-53 lower (q = 1 - p), spends more than asked."""
    params = rappor.RAPPORParams.from_budgets(eps_inf=eps_inf, eps_1=eps_1, **fields)
    assert {name: getattr(params, name) for name in fields} == fields
    assert params.eps_inf <= eps_inf and params.eps_1 <= eps_1
    assert dataclasses.replace(params, f=params.f - 1 / 128).eps_inf > eps_inf
    finer = params.p - 2.0**-53
    capped = eps_1 > dataclasses.replace(params, p=0.0, q=1.0).eps_1   # no report reveals more than its PRR
    assert capped == (eps_1 == 2.99)   # 2.99 > the PRR's 2 ln(209/47) = 2.984 (f = 47/128 for eps_inf = 3)
    if not capped:
        assert dataclasses.replace(params, p=finer, q=1.0 - finer).eps_1 > eps_1
    hooks = protocol("rappor").audit   # what ldpfast audit holds the client to
    assert hooks.effective_epsilon(params) <= eps_1 and hooks.permanent_epsilon(params) <= eps_inf


def test_from_budgets_refuses_what_no_setting_meets():
    limit = 2 * math.log(129 / 127)
    assert rappor.RAPPORParams.from_budgets(limit * 1.001, 0.01, h=1).f_effective == 127 / 128
    floor = r"eps_inf \(the permanent response.s epsilon\) must be at least 2 h ln\(129/127\) = 0.03125.*got 0.01"
    with pytest.raises(ParameterError, match=floor):
        rappor.RAPPORParams.from_budgets(0.01, 0.005, h=1)
    with pytest.raises(ParameterError, match=r"eps_1 \(one report\) must be <= eps_inf .*eps_1=3.0 > eps_inf=2.0"):
        rappor.RAPPORParams.from_budgets(2.0, 3.0)
    with pytest.raises(ParameterError, match=r"eps_inf must be a finite positive number, got -1"):
        rappor.RAPPORParams.from_budgets(-1, 0.5)
    with pytest.raises(ParameterError, match=r"from_budgets sets p, q and f .*got f=0.5"):
        rappor.RAPPORParams.from_budgets(4.0, 1.0, f=0.5)


def test_upper_bounds_hold_for_every_candidate_selected_or_not():
    # A fixed population (4 heavy candidates, a light one, 8% of values outside the
    # dictionary); each run re-randomizes it (fresh secrets and IRR). `upper` = s + z sigma
    # where E[s] >= f (a candidate's own bits; other values only add) and sigma >= sd(s);
    # sigma <= sqrt(h * 0.25/min pi(1-pi)) sd(s) = 1.53 sd(s) here (Cauchy-Schwarz over the
    # h bits, one bit's variance between pi(1-pi) = 0.2148 and 1/4), so
    # z sd(s) <= E[upper] - E[s] <= 1.53 z sd(s) up to sampling error (Z = 5.84 standard
    # errors: the mean's sd(s)/sqrt(R), the sample sd's relative 1/sqrt(2R)).
    params = rappor.RAPPORParams(k=16, h=2, m=8, p=0.25, q=0.75, f=0.25)
    candidates = [f"c{i}".encode() for i in range(40)]
    n, runs, alpha = 10_000, 200, 0.05
    counts = [3000, 2500, 2000, 1500, 200]
    population = sum(([candidates[i]] * c for i, c in enumerate(counts)), [])
    population += [f"other-{j}".encode() for j in range(n - len(population))]
    order = np.random.default_rng(5).permutation(n)
    population = [population[i] for i in order]
    cohorts = np.arange(n) % 8
    reports = rappor.RAPPORClient(params, rng=6).perturb(population * runs, cohorts=np.tile(cohorts, runs))
    truth = np.array(counts + [0] * 35) / n
    uppers, unselected = [], 0
    for r in range(runs):
        part = rappor.RAPPORReports(cohort=reports.cohort[r * n:(r + 1) * n], bits=reports.bits[r * n:(r + 1) * n])
        decoded = rappor.RAPPORServer(params).update(part).decode(candidates, method="lasso", alpha=alpha)
        assert np.isnan(decoded.std[~decoded.selected]).all() and np.isfinite(decoded.std[decoded.selected]).all()
        assert "no standard error (0 by selection): see upper" in decoded.note or decoded.selected.all()
        unselected += not decoded.selected[4]
        uppers.append(decoded.upper)
    uppers = np.array(uppers)
    assert unselected > 0                    # the light candidate is sometimes left out
    misses = (uppers < truth).sum(axis=0)    # pointwise level 1 - alpha: Binomial(runs, <= alpha)
    assert misses.max() <= stats.binom.isf(ALPHA / 40, runs, alpha), misses
    # E[s] of the light candidate from the population's Bloom filters
    client = rappor.RAPPORClient(params)
    blooms = np.unpackbits(client.bloom(population, cohorts).bits, axis=1, bitorder="little", count=16)
    own = np.unpackbits(client.bloom([candidates[4]] * 8, np.arange(8)).bits, axis=1, bitorder="little", count=16)
    expected = sum((cohorts == c).sum() / n * blooms[cohorts == c][:, own[c] == 1].mean() for c in range(8))
    z, sd = stats.norm.isf(alpha), uppers[:, 4].std(ddof=1)
    excess = uppers[:, 4].mean() - expected
    slack = 5.84 / math.sqrt(2 * runs)
    assert z * sd * (1 - slack) - 5.84 * sd / math.sqrt(runs) < excess, (excess, sd)
    assert excess < 1.53 * z * sd * (1 + slack) + 5.84 * sd / math.sqrt(runs), (excess, sd)


def test_decoding_beyond_the_memory_budget_is_refused_before_allocating():
    import tracemalloc

    import ldpfast

    params = rappor.RAPPORParams(k=32, h=2, m=2**12, d=400)
    server = rappor.RAPPORServer(params).update(rappor.RAPPORClient(params, rng=1).perturb(np.arange(1000) % 400))
    try:
        # the candidates' Bloom bits (400 x 4096 pairs at 48 + 9 x 2.725 + 80 bytes: 238 MiB) fit;
        # the dense fit (131072 cohort bits x 400 candidates, 4 float matrices: 1.6 GiB) does not
        ldpfast.set_memory_limit(512 << 20)
        tracemalloc.start()
        with pytest.raises(ParameterError, match=r"dense least-squares fit of 400 candidates over 131072 cohort bits"):
            server.decode(method="ls")
        assert tracemalloc.get_traced_memory()[1] < 240 << 20   # at most the Bloom bits' check, not the fit
        tracemalloc.stop()
        ldpfast.set_memory_limit(64 << 20)
        tracemalloc.start()
        with pytest.raises(ParameterError, match=r"the Bloom bits of 400 candidates in 4096 cohorts would need"):
            server.decode(method="lasso")
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
        ldpfast.set_memory_limit(None)
