"""Option values no command can use: one line ``ldpfast CMD: error: ...`` naming the option
and the value, exit status 2, nothing done (issue 29: values that gave a traceback or a
quiet empty result)."""

import numpy as np
import pytest

from ldpfast import arrow, cli
from ldpfast.errors import ParameterError
from ldpfast.protocols.frequency import grr


def _refused(capsys, argv, *fragments):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize("eps", ["", " , ", "3:1", "nan", "1,inf"])
def test_shuffle_without_a_finite_local_epsilon_is_refused(capsys, eps):
    """An empty --eps printed an empty table and exited 0."""
    _refused(capsys, ["shuffle", "--eps", eps, "--n", "1000"], "ldpfast shuffle: error: --eps must be", repr(eps))


@pytest.mark.parametrize("rows", ["1e30", str(10**30), str(2**63), "0", "-1"])
def test_aggregate_batch_rows_outside_arrows_range_is_refused(capsys, tmp_path, rows):
    """--batch-rows 1e30 was an argparse error, 10^30 an OverflowError traceback inside
    pyarrow; now both, and 0, name the range. Nothing is written."""
    folder = tmp_path / "reports"
    folder.mkdir()
    params = grr.GRRParams(epsilon=1.0, d=10)
    arrow.write_parquet(grr.GRRClient(params, rng=1).perturb(np.arange(10)), folder / "a.parquet", params)
    state = tmp_path / "state"
    _refused(capsys, ["aggregate", "--reports", str(folder), "--state", str(state), "--batch-rows", rows],
             "ldpfast aggregate: error: --batch-rows must be an integer in [1, 2^63 - 1], got")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]
    for bad in (10**30, 0):
        with pytest.raises(ParameterError, match=f"batch_rows must be in .*got {bad}"):
            next(arrow.iter_parquet(folder / "a.parquet", batch_rows=bad))
