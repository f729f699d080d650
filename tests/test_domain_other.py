"""Labels outside the dictionary: ``Domain(labels, other=...)`` counts them in one "other"
value, estimated and labelled like any value; and ``HashedDomain``'s collision rule."""

import json
import pickle
import warnings

import numpy as np
import pytest

from ldpfast import Domain, HashedDomain, arrow, cli
from ldpfast._aggregator import load_aggregator
from ldpfast._base import params_from_json
from ldpfast._registry import protocol
from ldpfast.domain import DomainRef, domain_from_dict
from ldpfast.errors import CollisionWarning, DTypeError, ParameterError

VOCABULARY = Domain(["apple", "banana", "cherry"], other="<other>")


def test_labels_outside_the_vocabulary_are_one_value_in_every_input_form():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    assert VOCABULARY.labels.tolist() == ["apple", "banana", "cherry", "<other>"] and len(VOCABULARY) == 4
    assert VOCABULARY.other == "<other>" and Domain(["a"]).other is None
    users = ["apple", "kiwi", "cherry", "mango", "<other>"]
    expected = [0, 3, 2, 3, 3]
    for form in (users, np.array(users), pd.Series(users), pd.Categorical(users), pa.array(users),
                 pa.array(users).dictionary_encode()):
        assert VOCABULARY.encode(form).tolist() == expected, type(form)
    assert VOCABULARY.decode([3, 0]).tolist() == ["<other>", "apple"]
    assert VOCABULARY.encode_sets([["kiwi", "mango", "apple"], ["fig"]])[1].tolist() == [0, 3, 3]  # once per user
    assert Domain.from_pandas(pd.Categorical(["b", "a"]), other="?").labels.tolist() == ["a", "b", "?"]
    assert Domain.from_arrow(pa.array(["b", "a"]), other="?").encode(["z", "a"]).tolist() == [2, 1]


def test_the_other_bucket_is_part_of_the_identity_and_default_stays_closed():
    plain = Domain(["apple", "banana", "cherry", "<other>"])
    assert plain != VOCABULARY and plain.labels.tolist() == VOCABULARY.labels.tolist()
    assert "other" not in plain.to_dict() and VOCABULARY.to_dict()["other"] is True
    grr = protocol("grr")
    with_other, without = (grr.params(epsilon=1.0, d=4).with_domain(dom) for dom in (VOCABULARY, plain))
    assert with_other.fingerprint != without.fingerprint
    assert pickle.loads(pickle.dumps(VOCABULARY)) == VOCABULARY
    stored = params_from_json(with_other.to_json())
    assert isinstance(stored.label_domain, DomainRef) and stored.fingerprint == with_other.fingerprint
    assert stored.with_domain(VOCABULARY).fingerprint == with_other.fingerprint
    with pytest.raises(ParameterError, match="must be the vocabulary"):
        stored.with_domain(plain)
    assert domain_from_dict(VOCABULARY.to_dict()).to_dict() == VOCABULARY.to_dict()
    with pytest.raises(ParameterError, match=r"labels\[1\] must be in the domain \(4 labels\), got 'kiwi'"):
        plain.encode(["apple", "kiwi"])


@pytest.mark.parametrize("make, message", [
    (lambda: Domain(["a", "b"], other="a"), "other must not be one of the labels"),
    (lambda: Domain(["a", "b"], other=b"z"), "other must be str like the labels, got bytes"),
    (lambda: Domain(["a", "b"], other="z\0"), "other must not end in a NUL"),
    (lambda: VOCABULARY.encode(["apple", b"kiwi"]), r"labels\[1\] must be str like the domain's labels, got bytes"),
    (lambda: VOCABULARY.encode(["apple", None]), r"labels\[1\] must be str like the domain's labels, got NoneType"),
    (lambda: VOCABULARY.encode(["apple", "x\ud800"]), r"labels\[1\] must be valid Unicode"),
    (lambda: grr_params(d=3), "d must be >= the 4 labels"),
])
def test_refusals_name_the_parameter_and_value(make, message):
    with pytest.raises((ParameterError, DTypeError), match=message):
        make()


def grr_params(d):
    return protocol("grr").params(epsilon=1.0, d=d).with_domain(VOCABULARY)


def _values():
    """20,000 users: 60% apple, 10% banana, 30% outside the vocabulary (two labels, and 4,000 distinct ones)."""
    return ["apple"] * 12_000 + ["banana"] * 2_000 + ["kiwi", "fig"] * 1_000 + [f"u{i}" for i in range(4_000)]


@pytest.mark.parametrize("pid, make", [
    ("grr", lambda p: p.params(epsilon=2.0, d=4)),
    ("olh", lambda p: p.params(epsilon=2.0, d=4)),
    ("ps-olh", lambda p: p.params(epsilon=4.0, d=4, pad_len=3)),
])
def test_estimates_and_intervals_cover_the_other_bucket(pid, make):
    entry = protocol(pid)
    params = make(entry).with_domain(VOCABULARY)
    if pid == "ps-olh":     # sets of at most pad_len items: the target is f; two outside labels count once
        data = [["apple"]] * 14_000 + [["banana", "kiwi"]] * 4_000 + [["apple", "zz", "yy"]] * 2_000
        truth = {"apple": 0.8, "banana": 0.2, "cherry": 0.0, "<other>": 0.3}
    else:
        data, truth = _values(), {"apple": 0.6, "banana": 0.1, "cherry": 0.0, "<other>": 0.3}
    server = entry.aggregator(params)
    server.update(entry.client(params, rng=7).perturb(data))
    est = server.frequencies()
    assert est.labels.tolist() == ["apple", "banana", "cherry", "<other>"]
    # Unbiased estimates, normal at n = 20,000: |estimate - f| > 4.5 std has probability 6.8e-6
    # per value (12 checks: under 1e-4 in all), so a miss is a bias, not chance.
    expected = np.array([truth[label] for label in est.labels])
    assert np.all(np.abs(est.values - expected) <= 4.5 * est.std), (est.values, est.std)
    low, high = est.confidence_interval(confidence=0.95)
    assert np.all(low < high) and np.all((low <= est.values) & (est.values <= high))
    assert server.frequencies(["<other>"]).values.tolist() == est.values[3:].tolist()


def test_parquet_aggregate_and_estimate_carry_the_other_bucket(capsys, tmp_path):
    pytest.importorskip("pyarrow")
    grr = protocol("grr")
    params = grr_params(d=4)
    (tmp_path / "reports").mkdir()
    arrow.write_parquet(grr.client(params, rng=3).perturb(_values()), tmp_path / "reports" / "a.parquet", params)
    (tmp_path / "labels.txt").write_text("apple\nbanana\ncherry\n<other>\n")
    assert cli.main(["aggregate", "--reports", str(tmp_path / "reports"), "--state", str(tmp_path / "state"),
                     "--output", str(tmp_path / "agg.bin")]) == 0
    capsys.readouterr()
    assert cli.main(["estimate", str(tmp_path / "state"), "--labels", str(tmp_path / "labels.txt"),
                     "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    expected = load_aggregator((tmp_path / "agg.bin").read_bytes(), domain=VOCABULARY).frequencies()
    assert [r["label"] for r in rows] == ["apple", "banana", "cherry", "<other>"]
    assert [r["estimate"] for r in rows] == expected.values.tolist()


# -- HashedDomain: collisions --------------------------------------------------------------------

def test_shared_value_probability_is_the_closed_form():
    assert HashedDomain(2, collisions="allow").shared_value_probability(1) == 0.5
    assert HashedDomain(4, collisions="allow").shared_value_probability(3) == pytest.approx(1 - 0.75**3, rel=1e-15)
    assert HashedDomain(2**64).shared_value_probability(10**6) == pytest.approx(10**6 / 2**64, rel=1e-6)


def test_small_d_is_refused_medium_d_warns_large_d_is_silent():
    grr = protocol("grr")
    with pytest.raises(ParameterError, match=r"d=4 is too small for a HashedDomain.*collisions='allow'"):
        grr.params(epsilon=1.0, d=4).with_domain(HashedDomain())      # the GRR, d = 4
    with pytest.raises(ParameterError, match=r"d=1048575 is too small"):
        HashedDomain(2**20 - 1)
    with pytest.warns(CollisionWarning, match=r"d=1048576\): a label shares its value with one of 10\^6 other "
                                              r"labels with probability 0.61"):
        HashedDomain(2**20)
    with pytest.warns(CollisionWarning, match="probability 9.1e-07"):
        protocol("olh").params(epsilon=1.0, d=2**40 - 1).with_domain(HashedDomain())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HashedDomain(2**40)
        HashedDomain(4, collisions="allow")
        assert domain_from_dict({"kind": "hashed", "version": 1, "d": 4}).d == 4   # stored data are read
    with pytest.raises(ParameterError, match="collisions must be 'warn' or 'allow', got 'ignore'"):
        HashedDomain(2**50, collisions="ignore")
