"""Deprecated names keep working until their removal release, each with a DeprecationWarning
that names the replacement (CHANGELOG.md's deprecation policy)."""

import numpy as np
import pytest

import _toy_protocol as toy


def test_reports_arrow_methods_warn_and_delegate_to_the_adapter():
    pytest.importorskip("pyarrow")
    from ldpfast import arrow

    params = toy.ToyParams(m=37)
    reports = toy.ToyClient(params, rng=4).perturb(np.arange(100) % 37)
    with pytest.warns(DeprecationWarning, match=r"ldpfast\.arrow\.to_arrow\(reports, params\)"):
        table = reports.to_arrow(params)
    assert table.equals(arrow.to_arrow(reports, params))
    with pytest.warns(DeprecationWarning, match=r"ldpfast\.arrow\.from_arrow\(table, params"):
        back = toy.ToyReports.from_arrow(table, params)
    assert back == reports and type(back) is toy.ToyReports


# Every name of the 0.1.0 protocol modules (and of the paths added before they moved to
# ldpfast.protocols), by old module: each still resolves, to the object of its one home.
OLD_NAMES = {
    "ldpfast.hadamard": ["HRRParams", "HRRServer", "CMSHEClient", "OLHParams", "OLHClient", "OLHReports", "OLHServer",
                         "RHRParams", "RHRClient", "RHRReports", "RHRServer", "GroupBitReports", "BitReports", "PRIME",
                         "gf64_field", "probability_threshold", "binary_flip_threshold", "Layout", "LayoutClient",
                         "LayoutServer", "cached_layout", "as_values", "prime_field"],
    "ldpfast.privsketch": ["Params", "Server", "PrivacyWarning", "SketchParams", "as_sets", "MultiPCMSMeanParams",
                           "PSOLHServer", "SVIMPaddedServer", "svim", "svim_groups", "SvimResult", "padding_length",
                           "olh_g", "PRIME", "SafeParams", "SafeClient", "SafeReports", "SafeServer"],
    "ldpfast.privsketch_baselines": ["MultiPCMSMinServer", "PSOLHParams", "SVIMItemParams", "svim", "olh_g",
                                     "SVIM_SHARES", "padding_length"],
    "ldpfast.ocms": ["Params", "Client", "Server", "hash_range", "finite_field_size", "uint64_column",
                     "decode_matches", "PRIME"],
    "ldpfast.svim": ["SVIM_SHARES", "SVIM_COVERAGE", "SVIM_MAX_L", "SVIMItemServer"],
    **{f"ldpfast.{name}": ["Params", "Client", "Reports", "Server"] for name in (
        "grr", "hadaoracle", "hadaheavy", "hashtogram", "npcms", "rappor_cms", "subset_selection", "treehist_cs")},
    "ldpfast.olh": ["OLHParams", "OLHServer"], "ldpfast.rhr": ["RHRParams", "RHRServer"],
    "ldpfast.multi_pcms": ["MultiPCMSMeanParams", "MultiPCMSMinServer"], "ldpfast.ps_olh": ["PSOLHParams"],
    "ldpfast.privsketch_ldp": ["SafeParams", "SafeServer"], "ldpfast.hadamard_variants": ["AppleCMSHEParams"],
    # the flat paths of 0.2, before the family sub-packages: one registered class of each module
    **{f"ldpfast.protocols.{name}": [cls] for name, cls in (
        ("blh", "Server"), ("dbitflip", "DBitFlipParams"), ("grr", "Params"), ("hadaheavy", "Server"),
        ("hadamard", "HRRParams"), ("hadamard_variants", "RHROriginalServer"), ("hadaoracle", "Client"),
        ("hashtogram", "Reports"), ("longitudinal", "LGRRParams"), ("longitudinal_unary", "LOUEServer"),
        ("multi_pcms", "MultiPCMSMinParams"), ("npcms", "Params"), ("ocms", "Server"), ("olh", "OLHParams"),
        ("pem", "Params"), ("pgr", "Server"), ("privsketch", "NoSmpParams"), ("privsketch_ldp", "SafeServer"),
        ("ps_olh", "PSOLHClient"), ("rappor", "Params"), ("rappor_cms", "Server"), ("rhr", "RHRParams"),
        ("subset_selection", "Params"), ("svim", "SVIMItemParams"), ("treehist_cs", "Server"),
        ("unary", "OUEParams"))},
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_module_paths_resolve_every_name_with_a_warning(old):
    import importlib
    import re

    from ldpfast import _deprecated

    assert set(OLD_NAMES) == {f"ldpfast.{name}" for name in _deprecated.MOVED}
    module = importlib.import_module(old)  # the import statement works (no file: the finder)
    for name in OLD_NAMES[old]:
        with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)}\.{name} is deprecated and will be removed "
                                                    r"in ldpfast 0\.3\.0") as caught:
            value = getattr(module, name)
        advice = re.search(r"; use (ldpfast[\w.]*)\.(\w+)$", str(caught[0].message))
        if advice:  # a public new home: the very same object, under its name (GRRParams for grr.Params)
            assert advice.group(2) in (name, getattr(value, "__name__", name))
            assert getattr(importlib.import_module(advice.group(1)), advice.group(2)) is value
    with pytest.raises(AttributeError, match="moved to"):
        module.no_such_name  # noqa: B018


def test_package_attribute_and_from_imports_warn(monkeypatch):
    import sys

    import ldpfast
    from ldpfast.protocols.frequency import grr

    if "grr" in vars(ldpfast):   # set by an earlier ``import ldpfast.grr``
        monkeypatch.delattr(ldpfast, "grr")
    monkeypatch.delitem(sys.modules, "ldpfast.grr", raising=False)
    assert "grr" not in dir(ldpfast) and "protocols" in dir(ldpfast)

    with pytest.warns(DeprecationWarning,
                      match=r"ldpfast\.grr is deprecated .* use ldpfast\.protocols\.frequency\.grr$"):
        old = ldpfast.grr
    with pytest.warns(DeprecationWarning,
                      match=r"ldpfast\.grr\.Server .* use ldpfast\.protocols\.frequency\.grr\.GRRServer$"):
        from ldpfast.grr import Server
    assert Server is grr.GRRServer
    with pytest.warns(DeprecationWarning):
        assert old.Params is grr.GRRParams


def test_flat_protocol_paths_warn_and_name_the_family(monkeypatch):
    import sys

    import ldpfast.protocols as package
    from ldpfast.protocols.sets import svim

    if "svim" in vars(package):   # set by an earlier ``import ldpfast.protocols.svim``
        monkeypatch.delattr(package, "svim")
    monkeypatch.delitem(sys.modules, "ldpfast.protocols.svim", raising=False)

    assert set(package.FLAT_PATHS) == {f"{name}" for name in (
        "blh", "dbitflip", "grr", "hadaheavy", "hadamard", "hadamard_variants", "hadaoracle", "hashtogram",
        "longitudinal", "longitudinal_unary", "multi_pcms", "npcms", "ocms", "olh", "pem", "pgr", "privsketch",
        "privsketch_ldp", "ps_olh", "rappor", "rappor_cms", "rhr", "subset_selection", "svim", "treehist_cs", "unary")}
    with pytest.warns(DeprecationWarning, match=r"ldpfast\.protocols\.svim is deprecated .* use "
                                                r"ldpfast\.protocols\.sets\.svim$"):
        from ldpfast.protocols import svim as old
    with pytest.warns(DeprecationWarning, match=r"ldpfast\.protocols\.svim\.SVIMItemServer .* use "
                                                r"ldpfast\.protocols\.sets\.svim\.SVIMItemServer$"):
        assert old.SVIMItemServer is svim.SVIMItemServer
    assert "svim" not in package.module_names() and "sets" in package.module_names()


def test_pickles_and_golden_bytes_made_before_the_move_keep_loading():
    """Pickles name classes by their defining module and name: ldpfast.<old>.Params in
    ldpfast 0.1.0, ldpfast.protocols.<name>.Params in 0.2, ldpfast.protocols.<family>.<name>
    .<Protocol><Role> since (the old ones made here by rewriting the names); all load. The
    golden files (tests/golden/) hold protocol ids, no module path (tests/test_contract.py
    loads them)."""
    import pickle

    from ldpfast.protocols.frequency import grr

    params = grr.GRRParams(epsilon=1.0, d=8)
    server = grr.GRRServer(params).update(grr.GRRClient(params, rng=1).perturb(np.arange(8)))
    blob = pickle.dumps((server, params), protocol=2)
    assert b"ldpfast.protocols.frequency.grr\nGRRServer" in blob
    assert pickle.loads(blob) == (server, params)
    for path in (b"ldpfast.grr", b"ldpfast.protocols.grr"):
        old = blob.replace(b"ldpfast.protocols.frequency.grr\nGRR", path + b"\n")
        with pytest.warns(DeprecationWarning, match=r"ldpfast\.(protocols\.)?grr\.(Server|Params) is deprecated"):
            assert pickle.loads(old) == (server, params)
