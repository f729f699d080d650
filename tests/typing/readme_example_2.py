# README.md's second example, verbatim (tests/test_docs.py checks the copy): CI runs
# `mypy --strict` over tests/typing, so the example type-checks as a user's code would.
import numpy as np
from ldpfast.protocols.frequency import grr, hadamard, olh, rhr

eps, d, n = 3.0, 4096, 100_000
values = np.random.default_rng(2).zipf(1.3, n) % d
truth = np.bincount(values, minlength=d) / n
candidates = np.arange(5)

protocols = {
    "GRR": (grr.GRRParams(epsilon=eps, d=d), grr.GRRClient, grr.GRRServer),
    "HE": (hadamard.HEParams(epsilon=eps, d=d), hadamard.HEClient, hadamard.HEServer),
    "RHR": (rhr.RHRParams(epsilon=eps, d=d), rhr.RHRClient, rhr.RHRServer),
    "OLH": (olh.OLHParams(epsilon=eps, d=d), olh.OLHClient, olh.OLHServer),
    "HRR": (hadamard.HRRParams(epsilon=eps, d=d), hadamard.HRRClient, hadamard.HRRServer),
    "CMS+HE": (hadamard.CMSHEParams(epsilon=eps, d=d, hash_seed=11),
               hadamard.CMSHEClient, hadamard.CMSHEServer),
}
for name, (params, Client, Server) in protocols.items():
    reports = Client(params, rng=5).perturb(values)      # seeded: simulation only
    server = Server(params)
    server.update(reports)
    error = np.abs(server.estimate(candidates) - truth[candidates]).max()
    print(f"{name:7s} max error on the top values: {error:.4f}")
    assert error < 0.05
