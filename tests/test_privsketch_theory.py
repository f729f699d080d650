"""ldpfast.theory.privsketch against the numbers of SPEC section 6 (K = 4, M = 128, n = 1e5)."""

import numpy as np
import pytest

from ldpfast import theory

N = 1e5
EPS = [0.5, 1, 3, 16]


def test_flip_probabilities():
    assert theory.privsketch_flip_probability(3) == pytest.approx(0.0474259, rel=1e-6)
    assert theory.privsketch_nosmp_flip_probability(3) == pytest.approx(0.4985352, rel=1e-6)
    assert theory.multi_pcms_min_flip_probability(3) == pytest.approx(0.4985352, rel=1e-6)
    assert theory.multi_pcms_mean_flip_probability(3) == pytest.approx(0.4941409, rel=1e-6)


@pytest.mark.parametrize("i,eps", list(enumerate(EPS)))
def test_variances(i, eps):
    nosmp = [10.48576, 2.621439, 0.2912703, 0.01023917]
    zero = [2.005861e-2, 4.713849e-3, 2.823219e-4, 5.761802e-10]
    one = [2.516861e-2, 9.823849e-3, 5.392322e-3, 5.110001e-3]
    centred = [2.133611e-2, 5.991349e-3, 1.559822e-3, 1.277501e-3]
    assert theory.privsketch_nosmp_variance(eps, N) == pytest.approx(nosmp[i], rel=1e-6)
    assert theory.privsketch_variance(eps, N, 0.0) == pytest.approx(zero[i], rel=1e-6)
    assert theory.privsketch_variance(eps, N, 1.0) == pytest.approx(one[i], rel=1e-6)
    assert theory.privsketch_centred_variance(eps, N) == pytest.approx(centred[i], rel=1e-6)


def test_centred_beats_r2_exactly_above_one_quarter():
    r2 = theory.privsketch_variance(3.0, N, np.array([0.2, 0.3]))
    centred = theory.privsketch_centred_variance(3.0, N)
    assert r2[0] < centred < r2[1]


def test_bloom_false_positive_rate():
    expected = {10: 3.238e-5, 15: 1.5176e-4, 62: 0.021991, 80: 0.047177, 100: 0.087301}
    for L, value in expected.items():
        assert theory.bloom_false_positive_rate(L) == pytest.approx(value, rel=2e-4)


def test_rejects_bad_inputs():
    for bad in (0.0, -1.0, float("nan"), float("inf"), 701.0):
        with pytest.raises(ValueError, match="epsilon"):
            theory.privsketch_variance(bad, N)
    with pytest.raises(ValueError, match="n"):
        theory.privsketch_nosmp_variance(1.0, 0)
