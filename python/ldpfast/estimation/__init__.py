"""Likelihood-based frequency estimation: IBU (EM) and maximum likelihood from a
protocol's aggregated state, through the report channel its registration provides
(``Protocol.channel``; :mod:`ldpfast.estimation.channel`).

    est = server.frequencies(method="mle")      # or "ibu"; "debiased" is the default
    channel = ldpfast.estimation.channel_of(server, candidates)
    fit = ldpfast.estimation.ibu(channel)           # stops within 0.1 standard errors of the MLE
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .channel import (LIKELIHOODS, Channel, Separable, hadamard_channel, report_channel, support_channel,
                      symbol_channel)
from .accuracy import BOOTSTRAP_FITS, bootstrap_bias, standard_errors
from .solve import IBU_PRECISION, MLE_PRECISION, Fit, default_tol, duality_gap, fisher_std, ibu, log_likelihood, mle

__all__ = ["Channel", "Separable", "Fit", "LIKELIHOODS", "symbol_channel", "support_channel", "report_channel",
           "hadamard_channel", "ibu", "mle",
           "fisher_std", "log_likelihood", "duality_gap", "default_tol", "IBU_PRECISION", "MLE_PRECISION", "channel_of",
           "METHODS", "standard_errors", "bootstrap_bias", "BOOTSTRAP_FITS"]

#: The estimators of ``server.frequencies(method=...)``.
METHODS = ("debiased", "ibu", "mle")


def channel_of(server: Any, candidates: Optional[np.ndarray] = None, **options: Any) -> Channel:
    """The report channel of ``server``'s state for ``candidates`` (None: the whole
    domain, or what the server answers for by default), from the protocol's registered
    ``channel`` hook; ``options`` go to the hook (OLH and OCMS: ``likelihood="full"``
    for the kept reports' full likelihood instead of the match counts' composite one).

    Raises:
        NotImplementedError: the protocol registers no channel (the message says which).
    """
    from .._registry import protocol

    hook = protocol(server.protocol).channel
    if hook is None:
        raise NotImplementedError(f"{server.protocol!r} registers no report channel, so it has no IBU/MLE "
                                  f"estimates; use method='debiased'")
    channel = hook(server, candidates, **options)
    if not isinstance(channel, Channel):
        raise TypeError(f"{server.protocol!r}'s channel hook returned {type(channel).__name__}, not a Channel")
    return channel
