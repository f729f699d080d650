"""One valid range per parameter (issue 29): what a protocol's parameters accept, its client
and server serve, with finite estimates. The conformance check ``extremes``
(ldpfast/testing/_extremes.py) runs every protocol at its registered extremes
(tests/test_conformance.py); here the bounds that moved, the helper that finds the last
accepted value, and the check itself failing on infinite estimates."""

import dataclasses
import math

import numpy as np
import pytest

from ldpfast import testing
from ldpfast._base import protocols
from ldpfast.errors import ParameterError
from ldpfast.kernels.field import PRIME
from ldpfast.protocols.frequency import blh, olh
from ldpfast.protocols.repeated import longitudinal
from ldpfast.protocols.sets import npcms, ps_olh, svim
from ldpfast.protocols._registration import edges
from ldpfast.protocols.sets._sets import MAX_SET_DOMAIN
from ldpfast.protocols.sets._svim import MIN_COVERAGE

pytestmark = pytest.mark.filterwarnings("ignore::ldpfast.errors.PrivacyWarning")

OLH_FAMILY = {"olh": lambda d: olh.OLHParams(epsilon=1.0, d=d), "blh": lambda d: blh.BLHParams(epsilon=1.0, d=d),
              "l-olh": lambda d: longitudinal.LOLHParams(eps_inf=3.0, eps_1=1.0, d=d)}


@pytest.mark.parametrize("pid", OLH_FAMILY)
def test_olh_family_domain_ends_where_its_server_field_does(pid):
    """Their servers keep the reports in an OCMS server, whose field must hold d + 1
    elements: d = PRIME passed the parameters and the client, then the server refused it
    with OCMS's field_size message. Now the parameters refuse it, naming d."""
    make = OLH_FAMILY[pid]
    with pytest.raises(ParameterError, match=rf"^d must be in \[2, {PRIME - 1}\], got {PRIME}$"):
        make(PRIME)
    params = make(PRIME - 1)
    proto = protocols()[pid]
    ends = np.array([0, PRIME - 2], dtype=np.uint64)
    server = proto.aggregator(params).update(proto.client(params, rng=1).perturb(ends))
    assert np.isfinite(server.estimate(ends)).all()


@pytest.mark.parametrize("make", [
    lambda d: npcms.NPCMSParams.create(epsilon=1.0, d=d, K=2, M=8, seed=1),
    lambda d: ps_olh.PSOLHParams(epsilon=1.0, d=d, pad_len=2),
    lambda d: svim.SVIMItemParams(epsilon=1.0, d=d, k=2)], ids=["npcms", "ps-olh", "svim-items"])
def test_set_protocols_refuse_items_beyond_int64(make):
    """Users' items are int64 (SetData): d = 2^63 + 1 passed the parameters and the client
    then raised OverflowError on the item 2^63."""
    with pytest.raises(ParameterError, match=rf"^d must be in \[1, {MAX_SET_DOMAIN}\], got {MAX_SET_DOMAIN + 1}$"):
        make(MAX_SET_DOMAIN + 1)
    assert make(MAX_SET_DOMAIN).d == MAX_SET_DOMAIN


@pytest.mark.parametrize("params_type", [svim.SVIMLengthParams, svim.SVIMPaddedParams])
def test_svim_coverage_that_cannot_give_finite_estimates_is_refused(params_type):
    """Phase 3 divides by the coverage: 1e-320 gave infinite estimates."""
    extra = {"L": 3} if params_type is svim.SVIMPaddedParams else {}
    for bad in (1e-320, math.nextafter(MIN_COVERAGE, 0.0), 0.0, -0.5, 1.5, math.nan):
        with pytest.raises(ParameterError, match="^coverage must be"):
            params_type(epsilon=2.0, d=60, candidates=(0, 5, 10), coverage=bad, **extra)
    smallest = params_type(epsilon=2.0, d=60, candidates=(0, 5, 10), coverage=MIN_COVERAGE, **extra)
    assert smallest.coverage == MIN_COVERAGE


def test_npcms_at_the_smallest_epsilon_estimates():
    """epsilon = 2^-20 split over 2L entries is below MIN_EPSILON: the sampler took the share,
    the estimate's debias constant refused it."""
    params = npcms.NPCMSParams.create(epsilon=2.0**-20, d=16, K=2, M=8, L=4, seed=1)
    reports = npcms.NPCMSClient(params, rng=1).perturb([[0, 1], [15]] * 20)
    assert np.isfinite(npcms.NPCMSServer(params).update(reports).estimate(np.arange(16))).all()


def test_edges_finds_the_last_accepted_values():
    """A refused end moves in to the last value the parameters accept: one step further
    (the next float, the next integer) is refused."""
    params = olh.OLHParams(epsilon=1.0, d=300, g=4)
    low, high, d_low, d_high = edges(d=(2, 2**64))(params)
    assert low.epsilon == 2.0**-20 and d_low.d == 2 and d_high.d == PRIME - 1
    assert 22 < high.epsilon < 24 and high.g == 4
    with pytest.raises(ParameterError, match="epsilon"):
        dataclasses.replace(params, epsilon=math.nextafter(high.epsilon, math.inf))
    with pytest.raises(ParameterError, match="^d must"):
        dataclasses.replace(params, d=d_high.d + 1)


def test_the_extremes_check_fails_on_infinite_estimates():
    """The check is not vacuous: SVIM phase 3 with the coverage it used to accept (forced
    past the parameters' validation) fails it."""
    proto = protocols()["svim-padded"]

    def too_small_coverage(params):
        forced = dataclasses.replace(params)
        object.__setattr__(forced, "coverage", 1e-320)
        return [forced]

    checks = testing.protocol_checks(dataclasses.replace(proto, extremes=too_small_coverage), include=["extremes"])
    with pytest.raises(AssertionError, match="inf"):
        checks[0]()


def test_lolh_hash_range_ends_where_its_report_server_does():
    """L-OLH's parameters took g = 40985878436 at eps_1 = 1; the OCMS server keeping its
    reports (randomized response at eps_1 over g symbols) refused it. Now the parameters do."""
    with pytest.raises(ParameterError, match=r"^eps_1 .*over 40985878436 symbols.*got 1\.0$"):
        longitudinal.LOLHParams(eps_inf=3.0, eps_1=1.0, d=300, g=40985878436)
    largest = edges(g=(2, 2**62))(longitudinal.LOLHParams(eps_inf=3.0, eps_1=1.0, d=300))[-1]
    assert longitudinal.LOLHServer(largest).params.g == largest.g > 4
