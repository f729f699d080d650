"""Importing the simulation harness stays cheap: matplotlib (the optional ``plot`` extra)
is imported only when a figure is drawn, and every name of the split packages is still
reachable from its old path."""

import os
import subprocess
import sys

from ldpfast import datasets, experiments, metrics


def test_importing_experiments_does_not_import_matplotlib():
    code = ("import sys, ldpfast.experiments, ldpfast.datasets; "
            "sys.exit(3 if 'matplotlib' in sys.modules else 0)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_old_paths_export_every_public_name():
    for module in (experiments, datasets, metrics):
        assert [name for name in module.__all__ if not hasattr(module, name)] == []
    # Used by the command line and the Pan report tests, outside __all__.
    for name in ("pan_dataset", "PAN_RHR_WORST_CLAIMS", "_metric_value", "_check_eps"):
        assert hasattr(experiments, name)
    assert experiments.worst_case_mse is metrics.worst_case_mse
