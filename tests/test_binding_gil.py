"""The bindings check O(n) inputs with the GIL released, so other Python threads run
while a large batch is validated.

Each call below fails its check at the last element, so it never reaches the kernel
(whose GIL release is older). With the switch interval raised to 1000 s the calling
thread never hands the GIL over on its own: a spinning thread advances only if the
binding released it. Held during the check, the count stays put on every attempt; the
retries only cover a spinner that is not scheduled within one ~10 ms check on a busy
machine. Inputs are mostly np.zeros (untouched pages cost no memory).
"""

import sys
import threading
import time

import numpy as np
import pytest

from ldpfast import _core

N = 20_000_000
KEY = bytes(32)
PRIME = (1 << 61) - 1


def _ocms_hash():
    a0, a1, x = np.zeros(N, np.uint64), np.zeros(N, np.uint64), np.zeros(N, np.uint64)
    a0[-1] = PRIME
    return (lambda: _core.ocms_hash(_core.Field.prime(PRIME), a0, a1, x, 5, 1)), "a0 must hold field elements"


def _ocms_count_list():
    empty = np.zeros(0, np.uint64)
    candidates, counts = np.zeros(N, np.uint64), np.zeros(N, np.uint64)
    candidates[-1] = PRIME

    def call():
        return _core.ocms_count_list(_core.Field.prime(PRIME), empty, empty, empty, 5, candidates, counts, 1)

    return call, "candidates must hold field elements"


def _randomized_response():
    y = np.zeros(N, np.uint64)
    y[-1] = 7
    return (lambda: _core.randomized_response(KEY, y, 7, 0, 1)), r"y must hold symbols in \[0, m\)"


def _padding_sample():
    offsets = np.zeros(N + 1, np.int64)
    offsets[-2] = 1  # the only decrease is at the end
    items = np.zeros(0, np.uint64)
    return (lambda: _core.privsketch_padding_sample(KEY, offsets, items, 1, 0, 1)), "offsets must be non-decreasing"


def _rhr_rows():
    n = N // 4  # rows are copied into the output first: keep the touched memory small
    x, rows = np.zeros(n, np.uint64), np.zeros(n, np.uint32)
    rows[-1] = 8
    return (lambda: _core.rhr_perturb(KEY, x, 2, 8, 0, rows, 1)), r"rows\[\d+\] = 8 is out of range"


@pytest.mark.parametrize("case", [_ocms_hash, _ocms_count_list, _randomized_response, _padding_sample, _rhr_rows],
                         ids=lambda f: f.__name__.lstrip("_"))
def test_o_n_checks_release_the_gil(case):
    call, message = case()
    spins, stop, started = [0], threading.Event(), threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            spins[0] += 1
            time.sleep(0)  # hands the GIL back to the test as soon as it asks

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    spinner = threading.Thread(target=spin)
    spinner.start()
    started.wait()
    try:
        ran_meanwhile = False
        for _ in range(5):
            before = spins[0]
            with pytest.raises(ValueError, match=message):
                call()
            if spins[0] > before:
                ran_meanwhile = True
                break
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        spinner.join()
    assert ran_meanwhile, "no other thread ran during the O(n) check: the GIL was held"
