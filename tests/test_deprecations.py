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
