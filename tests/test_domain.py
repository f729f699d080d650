"""Labels in, labels out (ldpfast.domain): every client perturbs labels exactly as it
perturbs their value ids, servers take labels as candidates, the domain is part of the
parameter fingerprint (reports, bytes, pickles, JSON, Parquet), the label hash matches its
published definition, and the prefix heavy hitters recover byte prefixes."""

import hashlib
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import ldpfast
from ldpfast import Domain, HashedDomain, PrefixDomain
from ldpfast._base import params_from_json, protocols
from ldpfast.domain import DomainRef, domain_from_dict, hash_labels, label_hash
from ldpfast.errors import DTypeError, FormatError, IncompatibleError, ParameterError

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

DOCS = Path(__file__).resolve().parents[1] / "docs" / "guide" / "strings.md"
SEED = 20261126


def _words(d):
    return [f"w{i:05d}" for i in range(d)]


def _as_labels(pid, inputs, words):
    if protocols()[pid].inputs == "pairs":  # the CSR triple of keys and values
        offsets, keys, values = inputs
        return offsets, np.array([words[int(k)] for k in keys]), values
    if protocols()[pid].inputs == "sets":
        return [[words[int(x)] for x in user] for user in inputs]
    return [words[int(x)] for x in np.asarray(inputs)]


def _columns(reports):
    return {name: np.asarray(getattr(reports, name)) for name in type(reports).column_types}


def _same_reports(a, b):
    ca, cb = _columns(a), _columns(b)
    assert ca.keys() == cb.keys()
    for name in ca:
        np.testing.assert_array_equal(ca[name], cb[name], err_msg=name)


@pytest.mark.filterwarnings("ignore::UserWarning")   # PrivSketch's PrivacyWarning: not what is tested
@pytest.mark.parametrize("pid", sorted(protocols()))
def test_every_client_perturbs_labels_as_their_ids(pid):
    proto = protocols()[pid]
    params, inputs = proto.example()
    if not isinstance(getattr(params, "d", None), int) or params.d < 1:
        pytest.skip(f"{pid} has no integer dictionary [0, d) (a test double, or RAPPOR's string values)")
    if proto.inputs == "records":
        with pytest.raises(ParameterError, match="label domain|not labels"):
            params.with_domain(Domain(_words(params.d)))
        pytest.skip(f"{pid} takes records of integer attributes (labels: Marginal tables), not a label domain")
    words = _words(params.d)
    labelled = params.with_domain(Domain(words))
    from_ids = proto.client(labelled, rng=SEED).perturb(inputs)
    from_labels = proto.client(labelled, rng=SEED).perturb(_as_labels(pid, inputs, words))
    _same_reports(from_ids, from_labels)
    assert from_labels.params_fingerprint == labelled.fingerprint != params.fingerprint
    if proto.inputs == "values":  # pandas categorical and Arrow dictionary array give the same ids
        labels = _as_labels(pid, inputs, words)
        categorical = pd.Categorical(labels, categories=words[::-1])   # codes differ from the ids
        _same_reports(from_ids, proto.client(labelled, rng=SEED).perturb(pd.Series(categorical)))
        _same_reports(from_ids, proto.client(labelled, rng=SEED).perturb(pa.array(labels).dictionary_encode()))
        _same_reports(from_ids, proto.client(labelled, rng=SEED).perturb(np.array(labels)))


def test_labels_without_a_domain_name_the_fix():
    from ldpfast.protocols.frequency import grr

    with pytest.raises(DTypeError, match=r"with_domain\(ldpfast.Domain"):
        grr.GRRClient(grr.GRRParams(epsilon=1.0, d=4)).perturb(["a", "b"])
    with pytest.raises(DTypeError, match="no domain"):
        grr.GRRClient(grr.GRRParams(epsilon=1.0, d=4)).perturb(pd.Series(["a"], dtype="category"))


def test_domain_maps_labels_both_ways_and_refuses_what_it_lacks():
    dom = Domain(["apple", "banana", "cherry"])
    np.testing.assert_array_equal(dom.encode(["cherry", "apple", "cherry"]), [2, 0, 2])
    assert dom.decode([1, 2]).tolist() == ["banana", "cherry"]
    assert "apple" in dom and "kiwi" not in dom and len(dom) == 3
    with pytest.raises(ParameterError, match="'kiwi'"):
        dom.encode(["apple", "kiwi"])
    with pytest.raises(ParameterError, match="missing"):
        dom.encode(pd.Categorical(["apple", None]))
    with pytest.raises(ParameterError, match="distinct.*'a'"):
        Domain(["a", "b", "a"])
    with pytest.raises(DTypeError, match="all str or all bytes"):
        Domain(["a", b"b"])
    with pytest.raises(ParameterError, match=r"\[0, 3\)"):
        dom.decode([3])
    # categories a value does not use may be unknown to the domain
    np.testing.assert_array_equal(dom.encode(pd.Categorical(["apple"], categories=["kiwi", "apple"])), [0])
    assert Domain.from_pandas(pd.Categorical(["b", "a", "b"])).labels.tolist() == ["a", "b"]
    assert Domain.from_pandas(pd.Series(["b", "a", "b"])).labels.tolist() == ["b", "a"]
    assert Domain.from_arrow(pa.array(["x", "y", "x"]).dictionary_encode()).labels.tolist() == ["x", "y"]


def test_vocabulary_fingerprint_is_the_documented_byte_layout():
    labels = ["a", "é", ""]
    encoded = [s.encode() for s in labels]
    offsets = np.cumsum([0] + [len(b) for b in encoded]).astype("<u8")
    expected = hashlib.sha256(b"ldpfast-vocabulary-v1:" + b"s" + np.array([3], "<u8").tobytes()
                              + offsets.tobytes() + b"".join(encoded)).hexdigest()
    assert Domain(labels).fingerprint == expected
    assert Domain([b"a", b"\xc3\xa9", b""]).fingerprint != expected     # bytes labels are another kind


def test_the_domain_is_part_of_the_fingerprint_everywhere(tmp_path):
    from ldpfast import arrow
    from ldpfast.protocols.frequency import grr

    words = _words(50)
    plain = grr.GRRParams(epsilon=2.0, d=50)
    labelled = plain.with_domain(Domain(words))
    other = plain.with_domain(Domain(words[::-1]))
    assert len({plain.fingerprint, labelled.fingerprint, other.fingerprint}) == 3
    reports = grr.GRRClient(labelled, rng=1).perturb(words[:10] * 20)
    for params in (plain, other):
        with pytest.raises(IncompatibleError, match="Domain"):
            grr.GRRServer(params).update(reports)
    server = grr.GRRServer(labelled).update(reports)
    with pytest.raises(IncompatibleError, match="different parameters"):
        grr.GRRServer(plain).merge(server)
    # bytes and JSON know the vocabulary by its fingerprint; attaching it restores it
    blob = server.to_bytes()
    loaded = ldpfast.load(blob)
    assert isinstance(loaded.params.label_domain, DomainRef) and loaded.params.fingerprint == labelled.fingerprint
    with pytest.raises(ParameterError, match="fingerprint"):
        loaded.estimate(["w00001"])
    assert ldpfast.load(blob, domain=Domain(words)) == server
    with pytest.raises(ParameterError, match="vocabulary these parameters were made with"):
        ldpfast.load(blob, domain=Domain(words[::-1]))
    restored = params_from_json(labelled.to_json())
    assert restored.fingerprint == labelled.fingerprint
    assert restored.with_domain(Domain(words)).label_domain.decodes
    # pickles carry the vocabulary itself (joblib, multiprocessing, Dask)
    again = pickle.loads(pickle.dumps(server))
    assert again == server and again.params.label_domain == Domain(words)
    np.testing.assert_array_equal(again.estimate(["w00003", "w00001"]), server.estimate([3, 1]))
    # Parquet: the reports keep the fingerprint, the server built from the stored parameters takes them
    path = tmp_path / "r.parquet"
    arrow.write_parquet(reports, path, params=labelled)
    stored, back = arrow.read_parquet(path)
    assert stored.fingerprint == back.params_fingerprint == labelled.fingerprint
    assert grr.GRRServer(stored).update(back).n == grr.GRRServer(labelled).update(back).n == 200


def test_stored_domains_are_checked():
    assert domain_from_dict({"kind": "hashed", "version": 1, "d": 100}) == HashedDomain(100, collisions="allow")
    assert domain_from_dict({"kind": "prefix", "version": 1, "width": 3}) == PrefixDomain(3)
    for bad in ({"kind": "hashed", "version": 2, "d": 100}, {"kind": "prefix", "version": 1, "width": 9},
                {"kind": "vocabulary", "version": 1, "size": 3}, [], {"kind": "other"}):
        with pytest.raises(FormatError):
            domain_from_dict(bad)


def _published_vectors():
    """The label-hash test vectors of docs/guide/strings.md (label, H as 16 hex digits)."""
    rows = re.findall(r"^\| `([^`]*)` \| `([0-9a-f]{16})` \|", DOCS.read_text(encoding="utf-8"), re.M)
    assert len(rows) >= 4, "docs/guide/strings.md lists the label-hash test vectors"
    return rows


@pytest.mark.parametrize("label,hex_digest", _published_vectors())
def test_label_hash_matches_its_definition_and_the_published_vectors(label, hex_digest):
    by_definition = int.from_bytes(hashlib.sha256(b"ldpfast-label-v1:" + label.encode()).digest()[:8], "big")
    assert label_hash(label) == by_definition == int(hex_digest, 16)
    assert label_hash(label.encode()) == by_definition
    assert int(hash_labels([label, label], d=1000)[1]) == by_definition % 1000


def test_open_dictionary_estimates_labels_given_as_candidates():
    from ldpfast.protocols.frequency import ocms

    params = ocms.OCMSParams.optimal(epsilon=3.0, d=2**64 - 60).with_domain(HashedDomain())
    assert params.label_domain.d == 2**64 - 60
    users = ["café"] * 300 + ["naïve"] * 200 + [f"once{i}" for i in range(500)]
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=SEED).perturb(users))
    ids = hash_labels(["café", "naïve", "never"], d=2**64 - 60)
    np.testing.assert_array_equal(server.estimate(["café", "naïve", "never"]), server.estimate(ids))
    with pytest.raises(ParameterError, match="cannot turn values back"):
        params.label_domain.decode(ids)
    with pytest.raises(ParameterError, match="HashedDomain is for d=10"):
        ocms.OCMSParams.optimal(epsilon=3.0, d=100).with_domain(HashedDomain(10, collisions="allow"))


def test_prefix_domain_packs_bytes_and_prefix_searches_return_them():
    from ldpfast.protocols.heavy import pem

    dom = PrefixDomain().bind(2**64)
    assert dom.width == 8 and PrefixDomain().bind(2**56 + 5).width == 7
    ids = dom.encode(["ab", "https://example.org", b"\xff"])
    assert ids.tolist() == [int.from_bytes(b"ab".ljust(8, b"\0"), "big"), int.from_bytes(b"https://", "big"),
                            0xFF << 56]
    assert dom.decode(ids).tolist() == [b"ab", b"https://", b"\xff"]
    with pytest.raises(ParameterError, match="d >= 256"):
        PrefixDomain().bind(255)
    # PEM over 7-byte prefixes of URL strings finds the two heavy ones, labelled
    rng = np.random.default_rng(SEED)
    urls = np.array(["news.example/a", "sport.example/b"] + [f"u{i}.example" for i in range(3000)], dtype=object)
    share = np.r_[0.3, 0.2, np.full(3000, 0.5 / 3000)]
    users = urls[rng.choice(urls.size, size=20000, p=share)]
    params = pem.PEMParams.create(epsilon=4.0, d=2**56, n=users.size, k=4).with_domain(PrefixDomain())
    server = pem.PEMServer(params).update(pem.PEMClient(params, rng=SEED).perturb(users))
    found = server.top_k()      # k = 4 prefixes kept per step: the 'u' prefixes hold half the users
    assert found.labels[:2].tolist() == [b"news.ex", b"sport.e"]


def test_hadaheavy_finds_the_heavy_byte_prefixes():
    """HadaHeavy over 8-byte prefixes (d = 2^64) with its own thresholds (beta = 0.05):
    the two URLs holding 30% and 20% of 300,000 users are found and labelled; the
    5,000 others hold 0.01% each."""
    from ldpfast.protocols.heavy import hadaheavy

    rng = np.random.default_rng(SEED)
    urls = np.array(["news.example/a", "sport.example/b"] + [f"u{i}.example" for i in range(5000)], dtype=object)
    users = urls[rng.choice(urls.size, size=300_000, p=np.r_[0.3, 0.2, np.full(5000, 0.5 / 5000)])]
    params = hadaheavy.HadaHeavyParams.create(epsilon=4.0, d=2**64, n=users.size,
                                              hash_seed=3).with_domain(PrefixDomain())
    found = hadaheavy.HadaHeavyServer(params).update(hadaheavy.HadaHeavyClient(params,
                                                                               rng=SEED).perturb(users)).heavy_hitters()
    assert found.labels.tolist() == [b"news.exa", b"sport.ex"]
    np.testing.assert_array_equal(found.items, PrefixDomain(8).encode(["news.exa", "sport.ex"]))


def test_click_streams_as_strings_give_the_integer_estimates():
    """The bundled Kosarak click-streams with every page id written as a URL string: the
    set protocol's estimates from the strings equal those from the ids."""
    from ldpfast import datasets
    from ldpfast.protocols.sets import ps_olh

    sets = datasets.load_sets("kosarak-prefix")
    n = 5000
    users = [sets.user(i) for i in range(n)]
    pages = np.array([f"https://portal.example/{i}" for i in range(sets.d)], dtype=object)
    params = ps_olh.PSOLHParams(epsilon=2.0, d=sets.d, pad_len=4)
    labelled = params.with_domain(Domain(pages))
    by_label = ps_olh.PSOLHServer(labelled).update(
        ps_olh.PSOLHClient(labelled, rng=SEED).perturb([pages[u].tolist() for u in users]))
    by_id = ps_olh.PSOLHServer(labelled).update(ps_olh.PSOLHClient(labelled, rng=SEED).perturb(users))
    top = ["https://portal.example/6", "https://portal.example/3", "https://portal.example/11"]
    np.testing.assert_array_equal(by_label.estimate(top), by_id.estimate([6, 3, 11]))


def test_a_million_word_vocabulary_round_trips():
    words = np.char.add("word", np.arange(10**6).astype("U7")).astype(object)
    dom = Domain(words)
    picks = np.random.default_rng(SEED).integers(0, 10**6, size=2000)
    np.testing.assert_array_equal(dom.encode(words[picks]), picks)
    again = pickle.loads(pickle.dumps(dom))
    assert again.fingerprint == dom.fingerprint and again.decode(picks[:5]).tolist() == words[picks[:5]].tolist()


def test_inputs_that_are_not_labels_are_refused_with_one_error():
    for bad in (None, 5, 2.5):
        with pytest.raises(DTypeError, match=f"labels must be a list.*got {type(bad).__name__}"):
            Domain(bad)
        with pytest.raises(DTypeError, match="labels must be a list"):
            HashedDomain(1000, collisions="allow").encode(bad)


LABEL_FORMS = {
    "list": list,
    "object array": lambda labels: np.array(labels, dtype=object),
    "pandas": lambda labels: pd.Series(labels, dtype=object),
    "categorical": lambda labels: pd.Categorical.from_codes(  # object categories: pandas' own strings are UTF-8
        [list(dict.fromkeys(labels)).index(s) for s in labels], pd.Index(list(dict.fromkeys(labels)), dtype=object)),
    "arrow": lambda labels: pa.array(labels),
}


@pytest.mark.parametrize("form", sorted(LABEL_FORMS))
@pytest.mark.parametrize("bad,reason", [("x\ud800", "valid Unicode"), ("x\0", "NUL"), (b"x\0", "NUL")])
def test_lone_surrogates_and_trailing_nuls_are_refused_naming_the_index(form, bad, reason):
    """A lone surrogate has no UTF-8 bytes; numpy string arrays drop a trailing NUL (so such
    a label would be another one from an array): every domain refuses both, from every
    input kind that can hold them, naming the label's index."""
    if form == "arrow" and bad == "x\ud800":
        pytest.skip("Arrow strings are UTF-8: they cannot hold a lone surrogate")
    good = ["a", "b"] if isinstance(bad, str) else [b"a", b"b"]
    labels = LABEL_FORMS[form](good + [bad])
    with pytest.raises(ParameterError, match=rf"labels\[2\] must .*{reason}"):
        Domain(labels)
    for domain in (HashedDomain(2**40), PrefixDomain(4), Domain(good)):
        with pytest.raises(ParameterError, match=rf"labels\[2\] must .*{reason}"):
            domain.encode(labels)
    with pytest.raises(ParameterError, match=reason):
        label_hash(bad)


def test_a_refused_label_of_a_set_protocol_names_its_user():
    from ldpfast.protocols.sets import ps_olh

    for domain, bad, reason in ((HashedDomain(collisions="allow"), "x\0", "NUL"),
                                (Domain(["a", "b", "c"]), "kiwi", "in the domain")):
        params = ps_olh.PSOLHParams(epsilon=2.0, d=2**20, pad_len=2).with_domain(domain)
        with pytest.raises(ParameterError, match=rf"user 1: labels\[1\] must .*{reason}"):
            ps_olh.PSOLHClient(params, rng=SEED).perturb([["a", "b"], ["c", bad], ["a"]])


def test_numpy_string_arrays_drop_trailing_nuls_before_a_domain_sees_them():
    """The documented rule: a NUL inside a label is kept everywhere; numpy 'U'/'S' arrays
    cannot hold a trailing one, so their labels are those without it."""
    assert np.array(["x\0"]).tolist() == ["x"]
    np.testing.assert_array_equal(HashedDomain(2**40).encode(np.array(["x\0", "a\0b"])),
                                  HashedDomain(2**40).encode(["x", "a\0b"]))


def test_hashed_domain_takes_d_up_to_2_to_the_64():
    """At d = 2^64 (HadaHeavy, HadaOracle, Hashtogram, TreeHist-CS) a label's value is its
    hash; above, the constructor refuses d with the allowed range."""
    from ldpfast.protocols.heavy import hadaheavy

    assert HashedDomain(2**64).encode(["apple", "café"]).tolist() == [label_hash("apple"), label_hash("café")]
    params = hadaheavy.HadaHeavyParams.create(epsilon=2.0, d=2**64, n=1000, hash_seed=1).with_domain(HashedDomain())
    ids = hadaheavy.HadaHeavyClient(params, rng=SEED).perturb(["apple"] * 3)
    assert ids.params_fingerprint == params.fingerprint
    for bad in (2**64 + 1, 1, 2.0**40, True):
        with pytest.raises(ParameterError, match=r"d must be an integer in \[2, 2\^64\], got"):
            HashedDomain(bad)
    with pytest.raises(ParameterError, match="d must be in"):
        hash_labels(["a"], d=2**65)
