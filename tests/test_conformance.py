"""Every registered protocol through ldpfast.testing's conformance checks (the aggregator
contract, bytes and batch fuzzing, concurrency and Ctrl-C, the registered variance against
simulation, the privacy audit), one test per protocol and check. Also the server options
below (on the contract, bytes, batches and concurrency checks) and the toy test double
(tests/_toy_protocol.py), so the harness itself is exercised on a protocol outside
ldpfast.protocols. The tolerances of the statistical checks are derived in
ldpfast/testing/_statistics.py."""

import functools

import numpy as np
import pytest

import _toy_protocol  # noqa: F401  (registers "toy-count")
from ldpfast import testing
from ldpfast._base import protocols

# PrivSketch's parameters warn at every construction (they are not eps-LDP, which the audit
# check reports as a skip); the checks build them hundreds of times.
pytestmark = pytest.mark.filterwarnings("ignore::ldpfast.errors.PrivacyWarning")

#: Server options run through the checks that concern the server (subject -> protocol, make_server).
SERVER_OPTIONS = {
    "ocms-candidates": ("ocms", lambda params: protocols()["ocms"].aggregator(params, candidates=np.arange(0, 300, 7))),
    "cms-rappor-candidates": ("cms-rappor", lambda params: protocols()["cms-rappor"].aggregator(
        params, candidates=np.arange(0, 300, 7))),
}
OPTION_GROUPS = ("contract", "bytes", "batches", "concurrency")


def _subjects():
    out = {pid: (pid, None, None) for pid, proto in sorted(protocols().items()) if proto.example is not None}
    out.update({subject: (pid, make, OPTION_GROUPS) for subject, (pid, make) in SERVER_OPTIONS.items()})
    return out


SUBJECTS = _subjects()


@functools.lru_cache(maxsize=1)  # the tests run subject by subject: one example in memory
def _checks(subject):
    pid, make_server, groups = SUBJECTS[subject]
    return {check.name: check for check in testing.protocol_checks(pid, make_server=make_server, include=groups)}


@pytest.mark.parametrize("subject, check", [
    pytest.param(subject, name, id=f"{subject}::{name}") for subject, (_, _, groups) in SUBJECTS.items()
    for name, group in testing.CHECK_GROUPS.items() if groups is None or group in groups])
def test_protocol_conforms(subject, check):
    try:
        _checks(subject)[check]()
    except testing.CheckSkipped as exc:
        pytest.skip(str(exc))


def test_every_builtin_protocol_registers_an_example_and_its_extremes():
    for hook in ("example", "extremes"):
        missing = sorted(pid for pid, proto in protocols().items() if proto.builtin and getattr(proto, hook) is None)
        assert not missing, f"built-in protocols without Protocol.{hook} (needed by check_protocol): {missing}"
