"""Data set constructions of [PAN] section 6 (checked against SPEC section 6) and loaders."""

import gzip

import numpy as np
import pytest

from ldpfast import datasets as ds
from ldpfast.errors import FormatError, ParameterError


# -- Zipf --------------------------------------------------------------------------

def test_rhr_base_matches_spec():
    # SPEC 6: b = 2, 3, 5, 6, 8 -> base = 2, 4, 16, 32, 128 for eps 1..5
    assert [ds.rhr_base(e) for e in (1, 2, 3, 4, 5)] == [2, 4, 16, 32, 128]
    with pytest.raises(ParameterError, match="epsilon"):
        ds.rhr_base(0)


@pytest.mark.parametrize("eps", [1, 2, 3, 4, 5])
def test_pan_zipf_is_r1_construction(eps):
    data = ds.pan_zipf(eps)
    base = ds.rhr_base(eps)
    assert data.n == 10_000 and data.d == 1_000_000 and data.f_star == 1.0
    np.testing.assert_array_equal(data.candidates, np.arange(100) * base)
    counts = data.counts()
    np.testing.assert_array_equal(counts[:10], [6116, 1529, 680, 382, 245, 170, 125, 96, 76, 61])
    assert (counts > 0).sum() == 96 and counts.sum() == 10_000
    assert np.all(data.values % base == 0)  # every value shares residue 0 in RHR


def test_pan_zipf_parameters():
    assert ds.pan_zipf(d=100_000).d == 100_000
    np.testing.assert_array_equal(ds.pan_zipf().candidates, np.arange(100))
    np.testing.assert_array_equal(ds.pan_zipf(3, stride=7).candidates[:3], [0, 7, 14])
    with pytest.raises(ParameterError, match="d must exceed"):
        ds.pan_zipf(5, d=1000)  # 99 * 128 >= 1000
    with pytest.raises(ParameterError, match="n must"):
        ds.pan_zipf(n=0)


def test_sampled_zipf_matches_probabilities():
    data = ds.sampled_zipf(100_000, rng=5)
    p = ds.zipf_probabilities()
    assert data.d == 100_000 and data.n == 100_000
    # Each count is Binomial(n, p_r): z = 5.5 gives a two-sided false-failure
    # probability of 3.8e-8 per value (< 1e-6 for the 5 values checked).
    f = data.frequencies()[:5]
    sd = np.sqrt(p[:5] * (1 - p[:5]) / data.n)
    assert np.all(np.abs(f - p[:5]) < 5.5 * sd)
    np.testing.assert_array_equal(ds.sampled_zipf(100, rng=5).values, ds.sampled_zipf(100, rng=5).values)


# -- Gaussian ----------------------------------------------------------------------

def test_pan_gaussian_r1_matches_spec():
    data = ds.pan_gaussian()
    assert data.n == 10_000 and data.d == 10_000 and data.f_star == 0.0
    assert data.values.min() == 811 and data.values.max() == 1193
    assert np.unique(data.values).size == 316
    assert data.max_frequency() == 0.0105 and data.counts(np.array([1000]))[0] == 105
    np.testing.assert_array_equal(data.candidates, np.arange(10_000))
    legacy = np.random.RandomState(317).normal(1000, 50, 10_000)
    np.testing.assert_array_equal(data.values, [int(max(0, v)) for v in legacy])


def test_pan_gaussian_paper_variant():
    a = ds.pan_gaussian("paper", rng=3)
    b = ds.pan_gaussian("paper", rng=3)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.values.min() >= 0 and a.values.max() <= 9999
    center = np.median(a.values)
    assert 1000 - 10 <= center <= 9000 + 10
    clipped = ds.pan_gaussian("paper", mean=9990, rng=1)
    assert clipped.values.max() == 9999
    with pytest.raises(ParameterError, match="variant"):
        ds.pan_gaussian("other")


# -- mini-Kosarak ------------------------------------------------------------------

def _write(tmp_path, name, text, gz=False):
    path = tmp_path / name
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return str(path)


def test_mini_kosarak_construction_exact(tmp_path):
    path = _write(tmp_path, "k.dat", "1 2\n2\n")
    # tokens: -2 twice (users), -1 three times (clicks), item 1 once, item 2 twice
    faithful = ds.mini_kosarak(path, scale=1, d=10, n_interest=5)
    np.testing.assert_array_equal(np.sort(faithful.values), [0, 0, 1, 1, 1, 3, 4, 4])
    np.testing.assert_array_equal(faithful.candidates, np.arange(5))
    clean = ds.mini_kosarak(path, mode="clean", scale=1, d=10, n_interest=5)
    np.testing.assert_array_equal(np.sort(clean.values), [3, 4, 4])
    # round(count/2) half to even, as R1's Python round: 2->1, 3->2, 1->0, 2->1
    halved = ds.mini_kosarak(path, scale=2, d=10, n_interest=5)
    np.testing.assert_array_equal(np.sort(halved.values), [0, 1, 1, 4])
    with pytest.raises(ParameterError, match="d must exceed"):
        ds.mini_kosarak(path, scale=1, d=4, n_interest=2)
    with pytest.raises(ParameterError, match="mode"):
        ds.mini_kosarak(path, mode="sets")


def test_mini_kosarak_prefix_faithful():
    data = ds.mini_kosarak()
    sets = ds.load_sets("kosarak-prefix")
    scale = 100 * sets.n / ds.KOSARAK_USERS
    tokens = sets.items.size + 1  # line 10,102 repeats item 86 once; the SPMF file keeps it
    counts = data.counts(np.array([0, 1]))
    assert counts[0] == round(sets.n / scale) and counts[1] == round(tokens / scale)
    assert 160_000 < data.n < 175_000  # comparable to the paper's "over 170,000 entries"
    assert data.frequencies(np.array([1]))[0] > 0.4  # the -1 separator is the value above 0.4
    assert data.d == 26_000 and data.f_star == 1.0 and data.candidates.size == 1000
    clean = ds.mini_kosarak(mode="clean")
    assert clean.counts(np.array([0, 1])).sum() == 0
    assert clean.frequencies(np.array([1])).max() < 0.4


# -- loaders -----------------------------------------------------------------------

def test_load_values(tmp_path):
    path = _write(tmp_path, "v.txt.gz", "3\n\n5\n3\n7\n3\n5\n", gz=True)
    data = ds.load_values(path, candidates=2)
    assert data.n == 6 and data.d == 8
    np.testing.assert_array_equal(data.candidates, [3, 5])  # most frequent first
    np.testing.assert_array_equal(data.counts(), [3, 2])
    assert ds.load_values(path, d=100, candidates=None).candidates.size == 100
    with pytest.raises(ParameterError, match="d must exceed"):
        ds.load_values(path, d=5)


@pytest.mark.parametrize("text,match", [("1\n2 3\n", "line 2: expected one value"),
                                         ("1\nx\n", "line 2: value must be an integer")])
def test_load_values_rejects_bad_lines(tmp_path, text, match):
    with pytest.raises(FormatError, match=match):
        ds.load_values(_write(tmp_path, "bad.txt", text))


def test_load_values_rejects_negative_and_missing(tmp_path):
    with pytest.raises(ParameterError, match="non-negative"):
        ds.load_values(_write(tmp_path, "neg.txt", "1\n-4\n"))
    with pytest.raises(ParameterError, match="existing file"):
        ds.load_values(str(tmp_path / "missing.txt"))


def test_sets_to_values():
    sets = ds.SetData.from_lists([[1, 2], [], [2, 3, 4]], name="toy")
    entries = ds.sets_to_values(sets, "entries", candidates=None)
    np.testing.assert_array_equal(entries.values, [1, 2, 2, 3, 4])
    sample = ds.sets_to_values(sets, "sample", rng=0)
    assert sample.n == 2 and sample.values[0] in (1, 2) and sample.values[1] in (2, 3, 4)
    with pytest.raises(ParameterError, match="mode"):
        ds.sets_to_values(sets, "all")


def test_value_data_validation():
    with pytest.raises(ParameterError, match=r"values must lie in \[0, d\)"):
        ds.ValueData(np.array([0, 5]), 5, np.array([0]))
    with pytest.raises(ParameterError, match="distinct"):
        ds.ValueData(np.array([0]), 5, np.array([1, 1]))
    with pytest.raises(ParameterError, match="f_star"):
        ds.ValueData(np.array([0]), 5, np.array([1]), f_star=2.0)


def test_load_dataset_dispatch(tmp_path):
    assert ds.load_dataset("zipf", epsilon=3).candidates[1] == 16
    assert ds.load_dataset("zipf", n=500, d=5000).n == 500
    assert ds.load_dataset("gaussian").f_star == 0.0
    assert ds.load_dataset("mini-kosarak-clean").name == "mini-kosarak-clean"
    bms = ds.load_dataset("bms-webview-1", values="sample", rng=1, candidates=10)
    assert bms.n == 59_601 and bms.candidates.size == 10
    one = ds.load_dataset(_write(tmp_path, "one.txt", "4\n4\n2\n"))
    np.testing.assert_array_equal(one.candidates, [4, 2])
    many = ds.load_dataset(_write(tmp_path, "sets.txt", "4 5\n4\n"))
    assert many.n == 3  # one report per (user, item) entry
    with pytest.raises(ParameterError, match="data must be one of"):
        ds.load_dataset("nope")
