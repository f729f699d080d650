"""The largest exact privacy-loss excess over the claimed epsilon, per protocol.

For random epsilons over each protocol's accepted range (the audit configuration and one
with non-power-of-two divisors), computes the exact loss ``log R`` of the integer
thresholds the client uses (``R`` from ``tests/test_budgets.py``'s independent
derivation, 120-digit logarithm) and prints ``max(log R - eps)`` and how often it is > 0.
The acceptance criterion of issue 19: every maximum <= 0.

    python bench/budget_excess.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import decimal
import math
import os
import random
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from test_budgets import _EXTRA, _LOSS  # noqa: E402

from ldpfast import audit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="random epsilons per protocol and configuration")
    args = parser.parse_args()
    rng = random.Random(19)
    print(f"{'protocol':18} {'configs':>8} {'max excess (exact)':>20} {'share > 0':>10}")
    overall = -math.inf
    for pid in sorted(_LOSS):
        makers = [lambda e, pid=pid: audit.default_params(pid, e)] + ([_EXTRA[pid]] if pid in _EXTRA else [])
        worst, above, checked = -math.inf, 0, 0
        for _ in range(args.runs):
            eps = math.exp(rng.uniform(math.log(0.05), math.log(66.0)))
            for make in makers:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        params = make(eps)
                except Exception:
                    continue
                claimed = params.olh_epsilon if pid == "ps-olh" and params.amplify else eps
                with decimal.localcontext() as ctx:
                    ctx.prec = 120
                    ratio = _LOSS[pid](params)
                    loss = decimal.Decimal(ratio.numerator).ln() - decimal.Decimal(ratio.denominator).ln()
                    excess = float(loss - decimal.Decimal(claimed))
                worst = max(worst, excess)
                above += excess > 0
                checked += 1
        overall = max(overall, worst)
        print(f"{pid:18} {checked:8d} {worst:20.3e} {above / max(checked, 1):10.4f}")
    print(f"largest exact excess over all protocols: {overall:.3e}")


if __name__ == "__main__":
    main()
