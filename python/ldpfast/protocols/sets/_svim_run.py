"""The SVIM frequent-items algorithm run end to end on a data set (simulation): the user
split :func:`svim_groups` and :func:`svim`, which chains the three protocols of
:mod:`ldpfast.protocols.sets.svim` (found through the registry, so that this module, whose
simulation entry that module registers, does not import it back). Exported by
:mod:`ldpfast.protocols.sets.privsketch`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ..._base import protocol
from ..._random import KeySource, RngLike
from ..._validate import check_epsilon, check_int
from ...datasets import SetData
from ...errors import ParameterError
from .._registration import draw
from ._sets import as_sets
from ._svim import SVIM_SHARES

if TYPE_CHECKING:
    from ...experiments import SetAlgorithm

__all__ = ["svim_groups", "svim", "SvimResult"]

#: Users' sets in CSR form: ``(offsets int64[n+1], items uint64)``.
_CSR = Tuple[np.ndarray, np.ndarray]
#: What :func:`ldpfast.protocols.sets._sets.as_sets` reads as users' sets.
_Sets = Union[SetData, _CSR, Sequence[ArrayLike]]


def svim_groups(sets: _Sets, shares: Sequence[float] = SVIM_SHARES,
                rng: RngLike = None) -> Tuple[_CSR, _CSR, _CSR]:
    """Split users at random into SVIM's groups G1 / G2 / G3 (``shares``, default 40% /
    10% / 50%; the first ``int(s1 n)`` of a random permutation, the next ``int((s1+s2) n) -
    int(s1 n)``, the rest). Returns three ``(offsets, items)`` CSR pairs. ``rng``: None =
    OS entropy; a seed makes the split reproducible (simulation)."""
    fractions = tuple(float(s) for s in shares)
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1.0) > 1e-9:
        raise ParameterError(f"shares must be three positive numbers summing to 1, got {fractions}")
    offsets, items = as_sets(sets, 2**64)
    gen = KeySource(rng).generator()
    n = offsets.size - 1
    perm = gen.permutation(n)
    cut1, cut2 = int(fractions[0] * n), int((fractions[0] + fractions[1]) * n)
    return (_select_users(offsets, items, perm[:cut1]), _select_users(offsets, items, perm[cut1:cut2]),
            _select_users(offsets, items, perm[cut2:]))


def _select_users(offsets: np.ndarray, items: np.ndarray, users: np.ndarray) -> _CSR:
    sizes = np.diff(offsets)[users]
    starts = offsets[users]
    out_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    index = np.repeat(starts - out_offsets[:-1], sizes) + np.arange(out_offsets[-1])
    return out_offsets, items[index]


@dataclasses.dataclass
class SvimResult:
    """``top``: the k items SVIM reports (most frequent first); ``estimates``: their
    frequency estimates; ``candidates``: phase-1 candidates; ``L``: the phase-2 length."""

    top: np.ndarray
    estimates: np.ndarray
    candidates: np.ndarray
    L: int


def svim(sets: SetData, epsilon: float, k: int = 50, rng: RngLike = None, threads: int = 0,
         shares: Sequence[float] = SVIM_SHARES, reference: bool = False) -> SvimResult:
    """SVIM frequent items ([PS] section 4.1; Wang, Li, Jha 2018; R3 ``svsm.find_singleton``),
    simulated on ``sets`` by running the three Client/Server phases in turn.

    ``rng`` (None = OS entropy; a seed is for simulation only) becomes one numpy Generator
    that draws, in order, the group split (:func:`svim_groups` with ``shares``) and the
    keys of the phase-1, phase-2 and phase-3 clients, so the result equals running
    ``SVIMItemClient``/``SVIMItemServer``, ``SVIMLengthClient``/``SVIMLengthServer`` and
    ``SVIMPaddedClient``/``SVIMPaddedServer`` by hand with that Generator. ``threads``:
    C++ worker threads (0 = default; results do not depend on it).
    G1: one sampled item per user (the dummy d for an empty set; R3 skips those users), OLH
    (``g = round(e^eps) + 1``; R3 truncates, ``int(e^eps) + 1``), the top 2k of [0, d) become candidates C. G2:
    ``|S ∩ C|`` with OLH; L = the smallest length whose estimated cumulative share exceeds
    0.9, at most 31. G3: pad ``S ∩ C`` with distinct dummies to L and sample a slot
    (``reference=True``: R3's single dummy, not eps-LDP, warns), GRR
    with ``eps' = log(L(e^eps-1)+1)`` when ``|C| < L e^eps (4L-1) + 1``, else OLH(eps);
    ``fhat = L chat3/(0.9 n3)``. Returns the top k of C (:class:`SvimResult`).
    Raises ParameterError for bad epsilon, k, shares or items outside [0, d).
    """
    eps = check_epsilon(epsilon)
    k = check_int("k", k, 1)
    gen = KeySource(rng).generator()
    groups = svim_groups(sets, shares, gen)
    items, lengths, padded = (protocol(pid) for pid in ("svim-items", "svim-lengths", "svim-padded"))
    items_params = items.params(epsilon=eps, d=sets.d, k=k)
    server1 = items.aggregator(items_params, threads)
    server1.update(items.client(items_params, gen, threads).perturb(groups[0]))
    length_params = server1.length_params()
    server2 = lengths.aggregator(length_params, threads)
    server2.update(lengths.client(length_params, gen, threads).perturb(groups[1]))
    padded_params = server2.padded_params(reference)
    server3 = padded.aggregator(padded_params, threads)
    server3.update(padded.client(padded_params, gen, threads).perturb(groups[2]))
    top, estimates = server3.top(k)
    return SvimResult(top=top, estimates=estimates, candidates=np.asarray(length_params.candidates, dtype=np.int64),
                      L=padded_params.L)


def simulate_svim(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    """The whole pipeline on a data set: estimates of its top k, zero elsewhere."""
    result = svim(sets, eps, k=k, rng=draw(gen))
    est = np.zeros(sets.d)
    est[np.asarray(result.top, dtype=np.intp)] = result.estimates
    return est


def svim_simulations() -> Tuple[SetAlgorithm]:
    # SVIM's whole pipeline (its three user groups), listed under its first phase
    from ...experiments import SetAlgorithm

    return (SetAlgorithm("svim", "SVIM", "protocols.sets.svim", simulate_svim,
                         "SVIM frequent items: three user groups, top-k only (Wang, Li, Jha 2018)",
                         whole_domain=False),)
