"""Simulation harness: run frequency oracles on a data set over an eps grid, many runs,
and measure the errors [PAN] (Pan, CSF 2025) section 6 reports.

Metrics over the values of interest ``X`` (true frequencies ``f``, estimates ``fhat_t``
of run ``t = 1..T``):

* worst-case MSE, [PAN] Eq. 19: ``max_{x in X} (1/T) sum_t (fhat_t(x) - f(x))^2``
  (an upward-biased estimator of ``max_x MSE(x)``; [PAN] Appendix K bounds it, see
  :func:`appendix_k_factor`);
* ``l1 = mean_t sum_{x in X} |fhat_t(x) - f(x)|`` and ``l2 = mean_t sum_{x in X} (fhat_t(x) - f(x))^2``.

Closed forms next to the measurements (:mod:`ldpfast.theory`): the variance of each
estimate at the true frequencies, whose maximum over ``X`` is the closed-form worst-case
MSE: [PAN] Eq. 8/20 for OCMS+RR with its integer ``m`` (HE: ``m = 2``; OLH: ``m = g``),
CMS+HE with the variance of its per-run hash family ([PAN] Thm 3.10), RHR with the share of
users in each residue class, HRR and GRR; l2 is [PAN] Eq. 22 with ``|X|`` in place of ``d``
and l1 its Cauchy-Schwarz bound ``sqrt(|X| l2)``, as the reference code R1 plots them.

Every run redraws every random choice; run ``t`` of algorithm ``a`` at ``eps`` uses a seed
derived from ``(seed, a, data set, eps, t)``, so any cell can be re-run alone and results do
not depend on the order or on the number of threads. Seeded = simulation only.

The package by concern: :mod:`~ldpfast.experiments.algorithms` (the protocol tables),
:mod:`~ldpfast.experiments.runner` (the runs), :mod:`~ldpfast.experiments.results` (result
types, JSON and tables), :mod:`~ldpfast.experiments.plots` (figures, matplotlib imported only
when drawing), :mod:`~ldpfast.experiments.pan` (the [PAN] section 6 reproduction) and
:mod:`~ldpfast.experiments.progress`, :mod:`~ldpfast.experiments.records` (record protocols: several
attributes per user), and :mod:`~ldpfast.experiments.rounds` (repeated collection
with memoized protocols: per-round errors and per-user privacy loss); the l1/l2/worst-case MSE helpers live in
:mod:`ldpfast.metrics`. Every name is importable from ``ldpfast.experiments``.
"""

from ..metrics import l1_loss, l2_loss, worst_case_mse
from .algorithms import (ALGORITHMS, HEAVY_ALGORITHMS, KINDS, PAN_ALGORITHMS, PAN_METRIC_ALGORITHMS,
                         RECORD_ALGORITHMS, SET_ALGORITHMS, Algorithm, HeavyAlgorithm, RecordAlgorithm, SetAlgorithm,
                         algorithm_kind, available_algorithms, get_algorithm)
from .pan import PAN_DATASETS, pan_checks, pan_report, reproduce_pan
from .plots import plot_kind_results, plot_results, require_matplotlib
from .progress import ProgressBar
from .results import (CellResult, HeavyCellResult, HeavySimulationResult, SetCellResult,
                      SetSimulationResult, SimulationResult)
from .records import RecordCellResult, RecordSimulationResult, simulate_records
from .rounds import RoundsData, RoundsResult, churn_rounds, click_rounds, plot_rounds, rounds_protocols, simulate_rounds
from .runner import DataSource, appendix_k_factor, run_once, simulate, simulate_heavy, simulate_sets

# Names used by the command line and tests, importable from here as before the split.
from .pan import PAN_RHR_WORST_CLAIMS as PAN_RHR_WORST_CLAIMS
from .pan import _metric_value as _metric_value
from .pan import pan_dataset as pan_dataset
from .runner import _check_eps as _check_eps

__all__ = ["Algorithm", "ALGORITHMS", "available_algorithms", "get_algorithm",
           "appendix_k_factor",
           "worst_case_mse", "l1_loss", "l2_loss", "CellResult", "SimulationResult",
           "simulate", "run_once", "SetAlgorithm", "SET_ALGORITHMS", "HeavyAlgorithm", "HEAVY_ALGORITHMS",
           "KINDS", "algorithm_kind", "SetCellResult", "SetSimulationResult", "HeavyCellResult",
           "HeavySimulationResult", "simulate_sets", "simulate_heavy", "plot_kind_results", "ProgressBar",
           "plot_results", "require_matplotlib", "DataSource",
           "PAN_DATASETS", "PAN_ALGORITHMS", "PAN_METRIC_ALGORITHMS", "reproduce_pan", "pan_checks",
           "pan_report", "RoundsData", "RoundsResult", "churn_rounds", "click_rounds", "simulate_rounds",
           "rounds_protocols", "plot_rounds", "RecordAlgorithm", "RECORD_ALGORITHMS", "RecordCellResult",
           "RecordSimulationResult", "simulate_records"]
