"""Data sets: the bundled real set-valued files, loaders for user-supplied paths, and
the synthetic and derived data sets of [PAN] section 6.

* Set-valued data are held in CSR form (:class:`SetData`): user ``i`` holds
  ``items[offsets[i]:offsets[i+1]]`` (sorted, de-duplicated). See ``data/PROVENANCE.md``
  for where each bundled file comes from.
* Single-valued data (one value per user, the setting of frequency oracles such as
  OCMS+RR, HE, RHR, OLH, GRR) are held in :class:`ValueData`, together with the values
  of interest ``X`` the paper evaluates on and the prior ``f*`` it gives MSE-OCMS.

Constructions of [PAN] (CSF 2025) section 6, following the reference code
(github.com/mingen-pan/CountMeanSketch, ``evaluation/sketch_experiment.py``):
:func:`pan_zipf` (deterministic, as the figures were made) and :func:`sampled_zipf`
(as the text describes), :func:`pan_gaussian` (seed 317, or the text's random mean) and
:func:`mini_kosarak` (with the SPMF separator tokens the reference code counts, or
items only).

The UCI Adult census extract (numeric and categorical attributes): :func:`load_adult`.
Records of several categorical attributes (:class:`RecordData`): :func:`correlated_records`
(synthetic, with dependent attributes) and :func:`adult_records`.

Modules: :mod:`~ldpfast.datasets.adult` (Adult), :mod:`~ldpfast.datasets.sets` (set-valued data and the bundled files),
:mod:`~ldpfast.datasets.values` (single-valued data) and :mod:`~ldpfast.datasets.pan` (the
[PAN] data sets and :func:`load_dataset`); every name is importable from ``ldpfast.datasets``.
"""

from .adult import ADULT_CATEGORICAL, ADULT_NUMERIC, AdultData, load_adult
from .pan import (KOSARAK_USERS, SYNTHETIC, load_dataset, mini_kosarak, pan_gaussian, pan_zipf, rhr_base,
                  sampled_zipf, zipf_probabilities)
from .records import RECORD_DATA, RecordData, adult_records, correlated_records
from .sets import BUNDLED, SetData, bundled_path, load_sets, zipf_sets
from .values import ValueData, load_values, sets_to_values

__all__ = ["AdultData", "load_adult", "ADULT_NUMERIC", "ADULT_CATEGORICAL",
           "RecordData", "correlated_records", "adult_records", "RECORD_DATA",
           "SetData", "ValueData", "BUNDLED", "load_sets", "bundled_path", "zipf_sets", "load_values",
           "sets_to_values", "pan_zipf", "sampled_zipf", "zipf_probabilities", "rhr_base",
           "pan_gaussian", "mini_kosarak", "KOSARAK_USERS", "SYNTHETIC", "load_dataset"]
