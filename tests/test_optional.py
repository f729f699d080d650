"""Optional packages: each feature whose package is missing raises one
MissingDependencyError naming the extra to install, and the command line prints it as one
line (exit 2) instead of a traceback. The missing import is simulated by putting None in
``sys.modules`` (Python then refuses the import)."""

import sys

import numpy as np
import pytest

from ldpfast import arrow, cli
from ldpfast.errors import MissingDependencyError
from ldpfast.protocols.frequency import grr


@pytest.fixture
def without(monkeypatch):
    """``without("pyarrow")``: that package (and its submodules) cannot be imported."""
    def block(package):
        for name in [m for m in list(sys.modules) if m == package or m.startswith(package + ".")] + [package]:
            monkeypatch.setitem(sys.modules, name, None)
    return block


def _params_and_reports():
    params = grr.GRRParams(epsilon=1.0, d=10)
    return params, grr.GRRClient(params, rng=1).perturb(np.arange(10))


def test_arrow_without_pyarrow_names_the_extra(without, tmp_path):
    params, reports = _params_and_reports()
    without("pyarrow")
    for call in (lambda: arrow.to_arrow(reports, params),
                 lambda: arrow.write_parquet(reports, tmp_path / "r.parquet", params),
                 lambda: arrow.read_parquet(tmp_path / "r.parquet")):
        with pytest.raises(MissingDependencyError, match=r"needs pyarrow, which is not installed: "
                                                         r"pip install 'ldpfast\[arrow\]'"):
            call()


def test_aggregate_without_pyarrow_is_one_line(without, tmp_path, capsys):
    params, reports = _params_and_reports()
    arrow.write_parquet(reports, tmp_path / "a.parquet", params)
    (tmp_path / "p.json").write_text(params.to_json())
    without("pyarrow")
    for extra in ([], ["--params", str(tmp_path / "p.json")]):
        rc = cli.main(["aggregate", "--reports", str(tmp_path), "--state", str(tmp_path / "s.bin"), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and err == ("ldpfast aggregate: error: ldpfast's Arrow/Parquet support needs pyarrow, which "
                                   "is not installed: pip install 'ldpfast[arrow]'\n")


def test_dask_without_dask_names_the_extra(without):
    from ldpfast import dask as ldask

    without("dask")
    with pytest.raises(MissingDependencyError, match=r"ldpfast.dask needs dask.*'ldpfast\[dask\]'"):
        ldask.aggregate([], grr.GRRParams(epsilon=1.0, d=10))


def test_to_pandas_without_pandas_names_the_extra(without):
    params, reports = _params_and_reports()
    estimate = grr.GRRServer(params).update(reports).frequencies()
    without("pandas")
    with pytest.raises(ImportError, match=r"pandas.*pip install 'ldpfast\[pandas\]'"):
        estimate.to_pandas()


def test_simulate_plot_without_matplotlib_is_one_line(without, capsys):
    without("matplotlib")
    rc = cli.main(["simulate", "-p", "grr", "--runs", "1", "--eps", "1", "--n", "300"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "pip install 'ldpfast[plot]'" in err and "--no-plot" in err


def test_shuffle_without_scipy_is_one_line(without, capsys):
    without("scipy")
    rc = cli.main(["shuffle", "--eps", "1", "--n", "1e5"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("ldpfast shuffle: error: the shuffle accountant (binomial tails) needs scipy, which is "
                               "not installed: pip install 'ldpfast[shuffle]'\n")


def test_spark_without_pyspark_names_the_extra(without, tmp_path, capsys):
    import ldpfast.spark

    params, reports = _params_and_reports()
    arrow.write_parquet(reports, tmp_path / "a.parquet", params)
    without("pyspark")
    with pytest.raises(MissingDependencyError, match=r"ldpfast.spark needs pyspark.*'ldpfast\[spark\]'"):
        ldpfast.spark.aggregate(tmp_path)
    rc = cli.main(["aggregate", "--reports", str(tmp_path), "--state", str(tmp_path / "s.bin"), "--engine", "spark"])
    err = capsys.readouterr().err
    assert rc == 2 and err == ("ldpfast aggregate: error: --engine spark needs pyspark, which is not installed: "
                               "pip install 'ldpfast[spark]'\n")
