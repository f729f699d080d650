"""Server-side aggregators: the ``update``/``merge`` template, locks, the byte container
round trip (see :mod:`ldpfast._base` for the contract)."""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import inspect
import io
import json
import struct
import threading
import zlib
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Mapping, Optional, Tuple, Type, TypeVar, cast

import numpy as np

from ._container import (_MAC_NAME, FORMAT_MAGIC, FORMAT_VERSION, _check_layout, _checked_key, _describe,
                         _layout_nbytes, _native, _npy_array, _npy_header, _parse_container)
from ._labels import is_labels
from .domain import domain_from_dict
from ._memory import check_allocation
from ._params import _KNOWN_PARAMS, Params, params_summary
from ._registry import _REGISTRY, _declare_base, protocol_or_format_error
from ._reports import Reports
from .errors import FormatError, IncompatibleError, ParameterError, ReportError

if TYPE_CHECKING:
    from .estimates import Estimate

A = TypeVar("A", bound="Aggregator")

#: ``(server, candidates) -> Estimate``, the function behind :meth:`Aggregator.frequencies`:
#: :mod:`ldpfast.estimates`, a layer above this one, plugs it in when it is imported (the
#: ``ldpfast`` package imports it first thing, so it is always there).
_estimator: Optional[Callable[..., "Estimate"]] = None


def set_estimator(estimate: Callable[..., "Estimate"]) -> None:
    """Make ``estimate`` the function behind :meth:`Aggregator.frequencies`."""
    global _estimator
    _estimator = estimate


class _State(dict):
    """A committed aggregator state: name -> array (or other immutable value). Committed
    states are never modified in place (their arrays are made read-only); an update or
    merge builds a new one and commits it with a single attribute assignment. Caches
    derived from a state (e.g. decoded transforms) are stored as attributes of it, so a
    commit invalidates them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for value in self.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """``method`` run under its aggregator's lock."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    call._ldpfast_locked = True  # type: ignore[attr-defined]
    return cast(F, call)


def _label_candidates(estimate: F) -> F:
    """``estimate(candidates, ...)`` that also takes labels as candidates, turned into
    value ids by the parameters' domain (:mod:`ldpfast.domain`)."""
    @functools.wraps(estimate)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        domain = self.params.label_domain
        if domain is not None:
            if args and is_labels(args[0]):
                args = (domain.encode(args[0]),) + args[1:]
            elif is_labels(kwargs.get("candidates")):
                kwargs["candidates"] = domain.encode(kwargs["candidates"])
        return estimate(self, *args, **kwargs)

    call._ldpfast_labels = True  # type: ignore[attr-defined]
    return cast(F, call)


def _aggregator_name(obj: Any) -> str:
    cls = type(obj)
    protocol_id = getattr(obj, "protocol", "") if isinstance(obj, Aggregator) else ""
    where = f"{cls.__module__}.{cls.__qualname__}"
    return f"a {protocol_id!r} aggregator ({where})" if protocol_id else f"{where}"


def _params_text(params: Params) -> str:
    """Parameters for error messages, with their domain (part of the fingerprint)."""
    domain = params.label_domain
    return _describe(params) + (f" with {domain!r}" if domain is not None else "")


class Aggregator:
    """Base class of server-side aggregators.

    ``update`` and ``merge`` are templates shared by every protocol; a protocol implements

    * ``_validate(reports)``: raise ReportError unless the batch fits the parameters
      (ranges, shapes); it reads only the parameters and the batch;
    * ``_ingest(reports)``: the new state (a mapping, built from copies: the committed
      state is never modified in place) with the batch added; it may raise ReportError too;
    * ``_merged(theirs)``: the new state with another aggregator's state added (default:
      elementwise sum);
    * ``_state()`` / ``_set_state(state)``: the canonical arrays written by ``to_bytes``
      (default: the committed state itself), ``_check_state`` for ``from_bytes``, and
      ``_state_layout(params)``: the shapes and dtypes of the state arrays, known from the
      parameters alone (checked against stored bytes before anything is allocated, and
      against the memory budget at construction).

    ``update`` checks the batch's type, its columns' dtypes and lengths and its parameter
    fingerprint, calls ``_validate`` and ``_ingest`` and commits the new state with one
    attribute assignment, so a rejected batch, an exception or a KeyboardInterrupt
    (raised between Python steps or out of a C++ call) leaves either the old state or the
    complete new one, never a partial one. Each aggregator has a lock: ``update``,
    ``merge``, ``to_bytes`` and every public method run under it, so one aggregator may be
    used from several Python threads (updates are serialized; the C++ kernels use several
    threads inside each call). Arrays of a batch must not be modified while it is being
    added.

    The contract (checked for every protocol by tests/test_contract.py): ``cls(params)``
    is empty and the merge identity; ``merge`` is exact, associative and commutative and
    changes only ``self``; equal states give equal bytes. Aggregators that keep reports
    instead of counts must store them in a canonical order (e.g. sorted), or merged bytes
    depend on the order."""

    protocol: ClassVar[str] = ""
    params_type: ClassVar[type] = Params
    #: The batch type ``update`` accepts (default: the registered protocol's Reports).
    reports_type: ClassVar[Optional[type]] = None
    #: True when ``_ingest`` itself checks every value before building the new state (e.g.
    #: in the C++ kernel) and calls ``_validate`` only to name a bad report: ``update``
    #: then skips the separate ``_validate`` pass (``validate`` still runs it).
    _ingest_validates: ClassVar[bool] = False

    _st: _State
    #: ``estimate(candidates, ...) -> ndarray`` (fractions), defined by each protocol's
    #: server (declared here for type checkers: code that holds an ``Aggregator`` may call it).
    estimate: Callable[..., np.ndarray]

    def __init__(self, params: Params):
        if not isinstance(params, self.params_type):
            raise IncompatibleError(
                f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self._lock = threading.RLock()
        layout = self._state_layout(params)
        if layout is not None:
            check_allocation(_layout_nbytes(layout), f"the state of a {self.protocol!r} server "
                                                     f"with {_describe(params)}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        estimate = vars(cls).get("estimate")
        if inspect.isfunction(estimate) and not getattr(estimate, "_ldpfast_labels", False):
            cls.estimate = _label_candidates(estimate)
        for name, value in list(vars(cls).items()):
            if (not name.startswith("_") and name not in ("update", "merge", "to_bytes")
                    and inspect.isfunction(value) and not getattr(value, "_ldpfast_locked", False)):
                setattr(cls, name, _locked(value))

    # -- to implement ---------------------------------------------------------------
    @classmethod
    def _state_layout(cls, params: Params) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        """``{name: (shape, dtype)}`` of the state arrays for ``params``, or None when
        the state size is not fixed by the parameters (e.g. kept reports)."""
        return None

    def _state(self) -> Mapping[str, np.ndarray]:
        """The integral state arrays (merge adds them elementwise)."""
        return self._st

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({name: np.array(value) for name, value in state.items()})

    def _validate(self, reports: Any) -> None:
        """Raise ReportError unless ``reports`` (a checked batch of the protocol's Reports
        type) fits the parameters (no state access)."""

    def _ingest(self, reports: Any) -> Mapping[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _ingest")

    def _merged(self, theirs: Mapping[str, Any]) -> Mapping[str, Any]:
        """The state with ``theirs`` (another aggregator's committed state) added."""
        mine = self._committed()
        return {name: _checked_sum(name, mine[name], theirs[name]) for name in mine}

    def _committed(self) -> Mapping[str, Any]:
        """The committed state (aggregators written before the template keep their
        arrays in their own attributes: their ``_state()``)."""
        try:
            return self._st
        except AttributeError:
            return self._state()

    def _commit(self, state: Mapping[str, Any]) -> None:
        if hasattr(self, "_st"):
            self._st = _State(state)  # the commit: one assignment
        else:
            self._set_state(dict(state))

    # -- contract -------------------------------------------------------------------
    def _accepted(self, reports: Any) -> "Reports":
        """A shallow snapshot of ``reports`` (columns reassigned later do not affect it),
        with its type, columns and parameter fingerprint checked."""
        expected = self.reports_type or _REGISTRY[self.protocol].reports
        if not isinstance(reports, expected):
            name = expected.__name__
            if name == "Reports":  # the protocol modules' short name: say which module
                name = f"{expected.__module__}.{name}"
            raise ReportError(f"reports must be {name}, got {type(reports).__name__}")
        batch = cast(Reports, copy.copy(reports))
        batch._check_columns()
        fingerprint = batch.params_fingerprint
        if fingerprint is not None and fingerprint != self.params.fingerprint:
            made_with = _KNOWN_PARAMS.get(fingerprint)
            origin = _params_text(made_with) if made_with is not None else "unknown parameters"
            raise IncompatibleError(
                f"reports were made with other parameters than this server's: reports "
                f"{origin} (fingerprint {str(fingerprint)[:16]}), server {_params_text(self.params)} "
                f"(fingerprint {self.params.fingerprint[:16]})")
        return batch

    def validate(self, reports: "Reports") -> None:
        """Raise as :meth:`update` would for ``reports``, without adding them (some checks
        that need the aggregation itself, e.g. PrivSketch's ordering matrices, run only in
        ``update``)."""
        self._validate(self._accepted(reports))

    def update(self: A, reports: "Reports") -> A:
        """Add a batch of reports; returns self. The batch is checked whole first (type,
        column dtypes and lengths, parameter fingerprint, values); a rejected or
        interrupted batch leaves the aggregator unchanged.

        Raises:
            ReportError: the batch is of another type or does not fit the parameters.
            IncompatibleError: the batch records other parameters (``params_fingerprint``).
        """
        batch = self._accepted(reports)
        if not self._ingest_validates:
            self._validate(batch)
        if len(batch) == 0:
            return self
        with self._lock:
            self._st = _State(self._ingest(batch))  # the commit: one assignment
        return self

    def merge(self: A, other: A) -> A:
        """Add ``other``'s reports into this aggregator (exact; ``other`` is unchanged).

        Raises:
            IncompatibleError: ``other`` is of another protocol, has other parameters or
                is this very aggregator (its reports would count twice; merge a copy,
                ``s.merge(copy.copy(s))``, if that is really meant).
        """
        if type(other) is not type(self):
            raise IncompatibleError(f"cannot merge {_aggregator_name(other)} into {_aggregator_name(self)}")
        if other.params != self.params or other.params.fingerprint != self.params.fingerprint:
            raise IncompatibleError(
                f"cannot merge aggregators with different parameters: {_params_text(self.params)} "
                f"vs {_params_text(other.params)}")
        if other is self:
            raise IncompatibleError(
                "cannot merge an aggregator into itself (its reports would count twice); "
                "merge a copy, s.merge(copy.copy(s)), if that is meant")
        with other._lock:
            theirs = other._committed()
        with self._lock:
            self._commit(self._merged(theirs))
        return self

    def to_bytes(self, key: Optional[bytes] = None) -> bytes:
        """Versioned container: magic, format version, protocol id, parameter JSON and
        fingerprint, the state arrays (.npy), and a CRC-32 of everything before it.

        The CRC-32 detects accidental corruption only: anyone can change the bytes and
        recompute it. With ``key`` (bytes, from the caller), an HMAC-SHA256 of the
        content is added, which :meth:`from_bytes` verifies when given the same key; use
        it for aggregators that cross a trust boundary."""
        with self._lock:
            state = dict(self._state())
        head = {"protocol": self.protocol, "fingerprint": self.params.fingerprint,
                **{k: v for k, v in json.loads(self.params.to_json()).items() if k in ("params", "domain")}}
        if key is not None:
            head["mac"] = _MAC_NAME
        header = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
        buf = io.BytesIO()
        buf.write(FORMAT_MAGIC)
        buf.write(struct.pack("<HI", FORMAT_VERSION, len(header)))
        buf.write(header)
        buf.write(struct.pack("<I", len(state)))
        for name in sorted(state):
            raw = io.BytesIO()
            array = np.asarray(state[name])
            np.save(raw, np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")),
                    allow_pickle=False)
            encoded = name.encode()
            buf.write(struct.pack("<HQ", len(encoded), raw.tell()))
            buf.write(encoded)
            buf.write(raw.getvalue())
        body = buf.getvalue()
        if key is not None:
            body += hmac.new(_checked_key(key), body, hashlib.sha256).digest()
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls: Type[A], blob: bytes, key: Optional[bytes] = None, domain: Any = None) -> A:
        """Inverse of :meth:`to_bytes`. On the base class ``Aggregator`` itself, returns an
        aggregator of whichever registered protocol the bytes hold.

        Bytes record a vocabulary (:class:`ldpfast.Domain`) by its fingerprint only: pass
        it as ``domain`` to have labels again (checked against the fingerprint).

        Sizes, shapes and dtypes are checked against the stored parameters before any
        array is allocated, and the state values are checked (e.g. counts consistent with
        the number of reports), so malformed input costs time and memory proportional to
        its own size. ``key``: required exactly when the bytes were written with one.

        Raises:
            FormatError: the bytes are truncated, corrupt, of another format version or
                protocol, hold state that does not fit their parameters, are
                authenticated and no or another key is given, or are not authenticated
                and a key is given.
        """
        header, arrays = _parse_container(blob, key, verify=True)
        if cls.protocol and header["protocol"] != cls.protocol:
            raise FormatError(f"bytes hold a {header['protocol']!r} aggregator, not {cls.protocol!r}")
        target: Type[A] = cls if cls.protocol else protocol_or_format_error(header["protocol"]).aggregator
        try:
            params = target.params_type.from_dict(header["params"])
            if "domain" in header:
                params = params.with_domain(domain_from_dict(header["domain"]))
        except Exception as exc:  # the stored values are untrusted: any rejection is a format error
            raise FormatError(f"stored parameters are invalid: {_describe(exc)}") from None
        if params.fingerprint != header["fingerprint"]:
            raise FormatError("parameter fingerprint does not match the stored parameters")
        if domain is not None:
            params = params.with_domain(domain)
            if params.fingerprint != header["fingerprint"]:
                raise ParameterError(f"domain must be the one the bytes were written with, got {domain!r}")
        images: Dict[str, Tuple[memoryview, Tuple[int, ...], np.dtype, bool, int]] = {}
        for name, image in arrays:
            if name in images:
                raise FormatError(f"state array {name!r} is stored twice")
            images[name] = (image, *_npy_header(name, image))
        try:
            layout = target._state_layout(params)
        except Exception as exc:
            raise FormatError(f"stored parameters are invalid: {_describe(exc)}") from None
        if layout is not None:
            _check_layout(layout, {name: (info[1], info[2]) for name, info in images.items()})
        state = {name: _native(_npy_array(name, *info)) for name, info in images.items()}
        try:
            agg = target(params)
        except ParameterError as exc:
            raise FormatError(f"the stored aggregator cannot be loaded: {exc}") from None
        agg._check_state(state)
        agg._set_state(state)
        return agg

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        """Raise FormatError unless ``state`` (read by ``from_bytes``) fits this aggregator.
        The default wants the names, shapes and dtypes of an empty aggregator's state;
        aggregators whose state size varies (e.g. kept reports) override it, and
        aggregators add checks of the values."""
        expected = self._state()
        if set(state) != set(expected):
            raise FormatError(f"stored state arrays {sorted(state)} do not match the parameters, "
                              f"which need {sorted(expected)}")
        for k in state:
            want = np.asarray(expected[k])
            if state[k].shape != want.shape or state[k].dtype != want.dtype:
                raise FormatError(
                    f"state array {k!r} has shape {state[k].shape} and dtype {state[k].dtype}; "
                    f"the parameters need {want.shape} and {want.dtype}")

    def __reduce__(self):
        # the domain object travels too: bytes know a vocabulary by its fingerprint only
        domain = self.params.label_domain
        if domain is None:
            return (type(self).from_bytes, (self.to_bytes(),))
        return (type(self).from_bytes, (self.to_bytes(), None, domain))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        with self._lock:
            a = dict(self._state())
        with other._lock:
            b = dict(other._state())
        return (self.params == other.params and self.params.fingerprint == other.params.fingerprint
                and set(a) == set(b)
                and all(np.array_equal(a[k], b[k]) for k in a))

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        n = getattr(self, "n", None)
        extra = self._repr_extra()
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={self.protocol!r}, n={n}, {params_summary(self.params)}"
                f"{', ' + extra if extra else ''})")

    def _repr_extra(self) -> str:
        """More state to show in ``repr`` (e.g. a mode); empty by default."""
        return ""

    @_locked  # several estimate calls on one state
    def frequencies(self, candidates: Any = None, method: str = "debiased", **options: Any) -> "Estimate":
        """The frequency estimates of ``candidates`` with standard errors, as an
        :class:`ldpfast.estimates.Estimate` (intervals, top-k, heavy hitters with
        false-discovery control, consistency post-processing, ``to_pandas``).
        ``candidates`` as for :meth:`estimate`. ``method``: ``"debiased"`` (the unbiased
        estimates of :meth:`estimate`), ``"ibu"`` or ``"mle"`` (likelihood-based, on the
        simplex; :mod:`ldpfast.estimation`, whose ``tol``/``max_iter`` pass through ``options``)."""
        if _estimator is None:
            raise RuntimeError("ldpfast.estimates is not loaded (import ldpfast first)")
        return _estimator(self, candidates, method=method, **options)


_declare_base("aggregator", Aggregator)


def _checked_sum(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` in ``a``'s dtype, refusing a sum that would wrap around."""
    total = np.add(a, b, dtype=a.dtype)
    if a.dtype.kind in "iu" and a.size:
        with np.errstate(over="ignore"):
            wrapped = (total < a) if a.dtype.kind == "u" else ((b > 0) & (total < a)) | ((b < 0) & (total > a))
        if wrapped.any():
            raise IncompatibleError(f"merging would overflow the {a.dtype} state array {name!r}")
    return total


def _exact_sum(counts: np.ndarray) -> int:
    """The exact sum of a uint64 array (no wrap-around: summed as two 32-bit halves)."""
    counts = np.asarray(counts, dtype=np.uint64).ravel()
    high = int(np.add.reduce(counts >> np.uint64(32), dtype=np.uint64))
    low = int(np.add.reduce(counts & np.uint64(0xFFFFFFFF), dtype=np.uint64))
    return (high << 32) + low


def load_aggregator(blob: bytes, key: Optional[bytes] = None, domain: Any = None) -> "Aggregator":
    """The aggregator of whichever registered protocol ``blob`` holds (see
    :meth:`Aggregator.from_bytes`)."""
    return Aggregator.from_bytes(blob, key=key, domain=domain)
