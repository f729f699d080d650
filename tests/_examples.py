"""Every conformance subject (each registered protocol's ``Protocol.example`` and the server
options of tests/test_conformance.py) as ``(protocol, params, reports, make_server)``, built
once per session: the cases of test_read_once.py and test_inplace_commit.py."""

from __future__ import annotations

import functools
import warnings

import pytest

from ldpfast._base import protocols
from ldpfast.testing._case import SEED
from test_conformance import SUBJECTS


def case_params():
    """Every subject as a fixture parameter named by its id."""
    return [pytest.param(subject, id=subject) for subject in SUBJECTS]


@functools.lru_cache(maxsize=None)
def example(case_id):
    """(protocol, params, reports, make_server) of a subject."""
    pid, make, _ = SUBJECTS[case_id]
    proto = protocols()[pid]
    with warnings.catch_warnings():  # PrivSketch parameters and clients warn that they are not eps-LDP
        warnings.simplefilter("ignore")
        params, values = proto.example()
        reports = proto.client(params, rng=SEED).perturb(values)
    return proto, params, reports, (make or proto.aggregator)
