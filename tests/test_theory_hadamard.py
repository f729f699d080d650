"""ldpfast.theory.hadamard against SPEC section 6 (checkable facts) and identities."""

import math

import pytest

from ldpfast.errors import ParameterError
from ldpfast.theory import hadamard as th


def test_c_eps_and_hrr_variance_spec_vectors():
    assert th.c_eps(1.0) == pytest.approx(2.1639534, abs=5e-8)
    assert th.hrr_variance(1.0, 1e4, 0.0) == pytest.approx(4.682694e-4, rel=1e-6)
    assert th.hrr_variance(1.0, 1e4, 1.0) == pytest.approx(3.682694e-4, rel=1e-6)
    # counts form: n c^2 - c(x)
    assert th.hrr_variance(1.0, 1e4, 0.25, counts=True) == pytest.approx(1e4 * th.c_eps(1.0) ** 2 - 2500, rel=1e-12)


def test_hoeffding_bound_spec_vector():
    assert th.hrr_error_bound(1.0, 1e6, 0.05) == pytest.approx(5877.74, abs=0.01)


@pytest.mark.parametrize("n, eps, beta, expected", [
    (1e6, 1, 0.01, (13, 128.168, 256)),
    (1e6, 4, 0.01, (13, 267.373, 512)),
    (1e5, 1, 0.05, (9, 48.711, 64)),
    (1e8, 2, 1e-6, (35, 1287.33, 2048)),
])
def test_hadaoracle_defaults_spec_vectors(n, eps, beta, expected):
    k, m_raw, m = th.hadaoracle_defaults(eps, n, beta)
    assert k == expected[0] and m == expected[2]
    assert m_raw == pytest.approx(expected[1], abs=0.01)


def test_hadaoracle_k_is_odd_and_chernoff_sufficient():
    for beta in (0.5, 0.1, 0.01, 1e-3, 1e-9):
        k = th.hadaoracle_k(beta)
        assert k % 2 == 1 and k >= 2.5 * math.log(1 / beta)
        assert math.exp(-k * th.KL_HALF_EIGHTH) <= beta
    assert th.KL_HALF_EIGHTH == pytest.approx(0.4133, abs=1e-4)


def test_hadaoracle_m_clamped_by_domain():
    assert th.hadaoracle_defaults(1.0, 1e8, 0.01, d=100)[2] == 128
    assert th.hadaoracle_defaults(1.0, 10, 0.01)[2] == 2


def test_hadaheavy_defaults_spec_vector():
    dflt = th.hadaheavy_defaults(1.0, 1e6, 0.05, 2**32)
    assert (dflt["b"], dflt["B"], dflt["t"]) == (10, 1024, 4)
    assert dflt["delta"] == pytest.approx(43390.6, abs=0.05)
    assert dflt["report_threshold"] == pytest.approx(86781.2, abs=0.1)
    assert dflt["tau"] == pytest.approx(130171.8, abs=0.1)
    assert dflt["max_outputs"] == 23
    assert (dflt["k"], dflt["m"]) == (63, 32)
    over = th.hadaheavy_defaults(1.0, 1e6, 0.05, 2**32, delta=1000.0)
    assert over["delta"] == 1000.0 and over["tau"] == 3000.0


def test_rhr_parameters_spec_vectors():
    got = [th.rhr_parameters(eps, 10**6) for eps in (1, 2, 3, 4, 5)]
    assert [g[0] for g in got] == [2, 3, 5, 6, 8]
    assert [g[1] for g in got] == [2, 4, 16, 32, 128]
    assert [g[2] for g in got] == [4, 8, 32, 64, 256]
    assert [g[3] for g in got] == [524288, 262144, 65536, 32768, 8192]


def test_olh_g_spec_vectors():
    assert [th.olh_g(e) for e in (0.5, 1, 2, 3, 4, 5, 8)] == [3, 4, 8, 21, 56, 149, 2982]


def test_he_variance_spec_vectors():
    expected = [4.6827e-4, 1.7241e-4, 1.2206e-4, 1.0760e-4, 1.0273e-4]
    for eps, value in zip((1, 2, 3, 4, 5), expected):
        assert th.he_variance(eps, 1e4) == pytest.approx(value, rel=1e-4)


def test_cmshe_matches_he_within_a_fraction_of_a_percent():
    for eps in (1, 2, 3, 4, 5):
        ratio = th.cmshe_variance(eps, 1e4, 0.0, m=1024) / th.he_variance(eps, 1e4)
        assert 1.0 < ratio < 1.0 + 3.0 / 1024
    # with m = 2 the CMS estimator is HE's own: m^2/(m-1)^2 (c^2 - 1/m^2) = 4 c^2 - 1 per user
    c2 = th.c_eps(1.0) ** 2
    assert th.cmshe_variance(1.0, 1.0, 0.0, m=2) == pytest.approx(4 * c2 - 1)


def test_olh_variance_is_pan_eq6():
    # [PAN] Eq. 6 / Eq. 20 vectors (n = 1e4, eps = 3, m = 5), SPEC 6
    assert th.olh_variance(3, 1e4, 0.0, g=5) == pytest.approx(3.981474e-5, rel=1e-6)
    assert th.olh_variance(3, 1e4, 1.0, g=5) == pytest.approx(3.446313e-5, rel=1e-6)
    assert th.olh_variance(3, 1e4, 0.3, g=5) == pytest.approx(3.820926e-5, rel=1e-6)


def test_rhr_variance_reduces_to_he_and_grows_with_shared_residues():
    assert th.rhr_variance(0.5, 1e4, 0.1, residue_fraction=1.0) == pytest.approx(th.he_variance(0.5, 1e4, 0.1))
    assert th.rhr_variance(1.0, 1e4, 0.0, 1.0) > th.he_variance(1.0, 1e4) > th.rhr_variance(1.0, 1e4, 0.0, 0.0)


def test_hadaoracle_group_mse_and_bound():
    bias, var = th.hadaoracle_group_mse(1.0, 1e6, 13, 256, c_x=1000.0, sum_sq_other=0.0)
    assert bias == pytest.approx((1e6 - 1000) / 256)
    assert var == pytest.approx(1e6 * 13 * th.c_eps(1.0) ** 2 - 1000 - bias)
    bound, beta = th.hadaoracle_error_bound(1.0, 1e6, 13, 256)
    assert bound == pytest.approx(4 * th.c_eps(1.0) * math.sqrt(13e6) + 16e6 / 256)
    assert beta == pytest.approx(math.exp(-13 * th.KL_HALF_EIGHTH))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), 701.0, True, "1"])
def test_theory_rejects_bad_epsilon(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        th.c_eps(bad)


def test_theory_rejects_bad_beta_and_n():
    with pytest.raises(ParameterError, match="beta"):
        th.hadaoracle_k(1.5)
    with pytest.raises(ParameterError, match="n must"):
        th.hrr_variance(1.0, -5)


def test_rhr_size_covers_every_column():
    for eps in (0.5, 1, 2, 3, 5):
        for d in (2, 3, 5, 7, 8, 9, 100, 127, 128, 129, 1000):
            b, base, _, hsize = th.rhr_parameters(eps, d)
            assert (d - 1) // base + 1 < hsize <= max(2, 2 * ((d - 1) // base + 1))
            r1 = 1 << max(0, math.ceil(math.log2(d // base + 1)))
            if r1 > (d - 1) // base + 1:  # wherever R1's size is large enough, it is ours
                assert hsize == r1
