"""The contract every protocol follows: parameters, report batches, clients, aggregators,
and the registry that ties them together.

* ``Params`` subclasses are frozen dataclasses: hashable, comparable (fields and label domain), serializable to a
  canonical JSON dict, with a ``fingerprint`` (sha256 of that JSON) (:mod:`ldpfast._params`).
* ``Reports`` subclasses are typed containers of equal-length numpy columns; batches
  record the fingerprint of the parameters that made them (``params_fingerprint``; None
  for batches built by hand) (:mod:`ldpfast._reports`).
* ``ClientBase`` is the base of every client: the shared constructor ``(params, rng,
  threads)``, OS-entropy or seeded keys, and the fingerprint stamped on every batch
  ``perturb`` returns (:mod:`ldpfast._client`).
* ``Aggregator`` subclasses hold integral state only (counts), so ``merge`` is exact,
  associative and commutative. An empty aggregator is the merge identity; ``update`` is
  one template for every protocol: it checks the whole batch (type, dtypes, lengths,
  parameter fingerprint, values) reading each value once, and adds it to the state in
  place, all or nothing (a ``Delta`` with exact rollback, or a kernel's own), under a
  per-aggregator lock (safe from several threads, and a rejected or interrupted batch
  leaves no partial state); ``to_bytes``/``from_bytes``
  (also used by pickle) write a versioned, checksummed container
  (:mod:`ldpfast._aggregator`, byte layout in :mod:`ldpfast._container`).
* ``Protocol`` is the single registration of a protocol: its classes and the hooks the
  generic layers use (example, input kind, wire fields, closed-form variance, simulation
  entries, audit plan); a protocol module calls ``register_protocol`` once per protocol
  (:mod:`ldpfast._registry`; CONTRIBUTING.md walks through adding one).

Every malformed aggregator input (truncated, corrupted, wrong protocol, unknown version,
state that does not fit the parameters or holds impossible values) raises
:class:`~ldpfast.errors.FormatError`, after time and memory proportional to its size.
The CRC-32 catches accidents (truncation, bit rot), not tampering: anyone can recompute
it. Bytes that cross a trust boundary should carry the keyed MAC.

This module re-exports every name of those modules that other modules import.
"""

from __future__ import annotations

# Every name below is re-exported: protocol modules and tests import them from here.
from ._aggregator import Aggregator, _aggregator_name, _exact_sum, load_aggregator  # noqa: F401
from ._delta import Delta, _checked_sum, _State, sparse_counts  # noqa: F401
from ._client import ClientBase  # noqa: F401
from ._memory import _length  # noqa: F401
from ._methods import _locked  # noqa: F401
from ._container import (FORMAT_MAGIC, FORMAT_VERSION, _check_layout, _checked_key, _Cursor,  # noqa: F401
                         _describe, _layout_nbytes, _MAC_NAME, _MAC_SIZE, _MAX_STATE_ARRAYS, _native,
                         _npy_array, _npy_header, _parse_container, _parse_header, read_header)
from ._params import (_KNOWN_PARAMS, Params, _jsonable, _parse_params_json,  # noqa: F401
                      _short, params_summary)
from ._registry import (_REGISTRY, INPUT_KINDS, AuditHooks, ComparisonRow, Protocol, WireField,  # noqa: F401
                        bits_for, params_from_json, protocol, protocol_or_format_error, protocols,
                        register_protocol)
from ._reports import Reports

__all__ = ["Params", "Reports", "Aggregator", "Delta", "ClientBase", "Protocol", "AuditHooks", "ComparisonRow",
           "WireField", "bits_for", "register_protocol", "protocols", "protocol", "params_from_json", "load_aggregator",
           "read_header", "params_summary", "FORMAT_MAGIC", "FORMAT_VERSION", "INPUT_KINDS"]
