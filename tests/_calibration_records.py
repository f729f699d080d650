"""Calibration cases of the record and key-value protocols (tests/_calibration.py imports them).

Records: 20,000 correlated records of three attributes (4, 6 and 3 values). A record
protocol's cells are the values of its units, unit after unit (multifreq.py, calm.py): each
attribute (SPL, SMP, RS+FD), each collected marginal (CALM, every 2-way one), the product of
all attributes (the full joint); a marginal's cell is the C-order index of its attributes'
values. Every estimate is unbiased for the share of ALL users in the cell (SMP and CALM: one
group's users stand for all, the group draw in the variance). Key-value sets: ratings-like
sets of at most ``pad_len`` pairs (PCKV's estimators are unbiased only then), target the share
of users holding each key.
"""

from typing import Any, Dict, List, Tuple

import numpy as np

from _calibration import Case
from ldpfast.protocols.multiattribute import calm, multifreq, pckv, privkv
from ldpfast.protocols.multiattribute._grid_hooks import correlated_records
from ldpfast.protocols.multiattribute._kv import ratings

DOMAINS = (4, 6, 3)
N_RECORDS = 20_000
N_KV = 20_000
D_KEYS = 12
PAIRS = 2


def records() -> np.ndarray:
    return correlated_records(DOMAINS, N_RECORDS, rho=0.5)


def _units(params: Any) -> List[Tuple[int, ...]]:
    """The attribute tuples whose cells the protocol estimates, in its cell order."""
    if params.protocol == "calm":
        return [tuple(key) for key in params.marginals]
    if params.protocol == "joint":
        return [tuple(range(len(params.domains)))]
    return [(j,) for j in range(len(params.domains))]


def cell_shares(params: Any, data: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Each unit's cells' shares of all users, concatenated."""
    shares = []
    for key in _units(params):
        cells = np.ravel_multi_index(tuple(data[:, a] for a in key), [params.domains[a] for a in key])
        shares.append(np.bincount(cells, minlength=int(np.prod([params.domains[a] for a in key]))) / len(data))
    return np.concatenate(shares)[candidates]


def key_value_sets() -> Any:
    return ratings(D_KEYS, N_KV, max_pairs=PAIRS, seed=4)


def key_shares(params: Any, data: Any, candidates: np.ndarray) -> np.ndarray:
    """The share of users holding each key (the sets' keys are distinct within a user)."""
    offsets, keys, _ = data
    return np.bincount(keys.astype(np.int64), minlength=params.d)[candidates] / (offsets.size - 1)


RECORD_CASES: Dict[str, Case] = {
    # GRR per unit; SPL spends eps/3 per attribute, hence its larger budget
    "spl": Case(lambda: multifreq.SPLParams(epsilon=4.0, domains=DOMAINS), records, cell_shares, 0.1),
    "smp": Case(lambda: multifreq.SMPParams(epsilon=2.0, domains=DOMAINS), records, cell_shares, 0.1),
    "rsfd": Case(lambda: multifreq.RSFDParams(epsilon=2.0, domains=DOMAINS), records, cell_shares, 0.1),
    "calm": Case(lambda: calm.CALMParams(epsilon=2.0, domains=DOMAINS), records, cell_shares, 0.05),
    "joint": Case(lambda: calm.JointParams(epsilon=4.0, domains=DOMAINS), records, cell_shares, 0.05),
    "pckv-ue": Case(lambda: pckv.PCKVUEParams(epsilon=2.0, d=D_KEYS, pad_len=PAIRS), key_value_sets, key_shares,
                    0.05),
    "pckv-grr": Case(lambda: pckv.PCKVGRRParams(epsilon=2.0, d=D_KEYS, pad_len=PAIRS), key_value_sets, key_shares,
                     0.05),
    "privkv": Case(lambda: privkv.PrivKVParams(epsilon=4.0, d=D_KEYS), key_value_sets, key_shares, 0.05),
}
