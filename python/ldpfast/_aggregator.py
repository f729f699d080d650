"""Server-side aggregators: the ``update``/``merge`` template, locks, the byte container
round trip (see :mod:`ldpfast._base` for the contract; the in-place changes in
:mod:`ldpfast._delta`, the method wrappers in :mod:`ldpfast._methods`)."""

from __future__ import annotations

import inspect
import json
import threading
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Mapping, Optional, Tuple, Type, TypeVar, Union, cast

import numpy as np

from . import _core
from ._container import (_check_layout, _describe, _layout_nbytes, _native, _npy_array, _npy_header,
                         _parse_container, write_container)
from ._delta import Delta, _State
from ._memory import _fits, _length, check_allocation
from ._methods import _label_candidates, _locked, _locked_pair
from .domain import domain_from_dict
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


def _nbytes(value: Any) -> int:
    """Bytes of the arrays in ``value`` (an array, or a tuple or list of them)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(map(_nbytes, value))
    return 0


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
    * ``_ingest(reports)``: the batch's change to the state, as a :class:`Delta` computed
      from the batch and the current state (time and memory O(batch)), which the template
      commits in place; or None after committing in place itself, all or nothing (a C++
      kernel that adds into the state and takes back what it added when it fails); or,
      for aggregators that build a whole new state from copies, that new state (a
      mapping, committed with one assignment). It may raise ReportError too;
    * ``_merged(theirs)``: likewise, another aggregator's state added (default: a Delta
      adding every array elementwise, in place);
    * ``_state()`` / ``_set_state(state)``: the canonical arrays written by ``to_bytes``
      (default: the committed state itself), ``_check_state`` for ``from_bytes``, and
      ``_state_layout(params)``: the shapes and dtypes of the state arrays, known from the
      parameters alone (checked against stored bytes before anything is allocated, and
      against the memory budget at construction).

    ``update`` checks the batch's type, its columns' dtypes and lengths and its parameter
    fingerprint, takes a copy of its columns that the library owns (so each value the
    caller passed is read once: what is checked is what is added), calls ``_validate``
    and ``_ingest`` and commits, so a rejected batch, an exception or a KeyboardInterrupt
    (raised between Python steps or out of a C++ call) leaves either the old state or the
    complete new one, never a partial one. Protocols whose C++ kernel reads every value
    once itself (``_reads_once``) skip the copy of aligned columns. Each aggregator has a
    lock: ``update``, ``merge``, ``to_bytes``, ``==``, every public method and property run
    under it,
    so one aggregator may be used from several Python threads (updates are serialized; the
    C++ kernels use several threads inside each call). Arrays handed to callers never
    share memory with the state, which later updates change in place.

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
    #: True when ``_ingest`` passes the columns to a C++ kernel that reads each value once
    #: (and checks the value it uses): ``update`` then copies only columns that are not
    #: aligned (see :meth:`Reports._owned_columns`).
    _reads_once: ClassVar[bool] = False

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
        self._fixed_nbytes = None if layout is None else _layout_nbytes(layout)
        if self._fixed_nbytes is not None:
            check_allocation(self._fixed_nbytes, lambda: f"the state of a {self.protocol!r} server "
                                                         f"with {_describe(params)}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        estimate = vars(cls).get("estimate")
        if inspect.isfunction(estimate) and not getattr(estimate, "_ldpfast_labels", False):
            cls.estimate = _label_candidates(estimate)
        for name, value in list(vars(cls).items()):
            if name.startswith("_") or name in ("update", "merge", "to_bytes"):
                continue
            if inspect.isfunction(value) and not getattr(value, "_ldpfast_locked", False):
                setattr(cls, name, _locked(value))
            elif (isinstance(value, property) and value.fget is not None
                  and not getattr(value.fget, "_ldpfast_locked", False)):
                # properties read the state, which updates change in place: under the lock too
                setattr(cls, name, property(_locked(value.fget), value.fset, value.fdel, value.__doc__))

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

    def _ingest(self, reports: Any) -> Union["Delta", Mapping[str, Any], None]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _ingest")

    def _merged(self, theirs: Mapping[str, Any]) -> Union["Delta", Mapping[str, Any]]:
        """``theirs`` (another aggregator's committed state) added to this one."""
        delta = self._delta()
        for name in self._st:
            delta.add_dense(name, theirs[name])
        return delta

    def _delta(self) -> Delta:
        """An empty change to this aggregator's state, its steps checked against the memory
        budget."""
        return Delta(self._st, self._check_call)

    def _committed(self) -> Mapping[str, Any]:
        """The committed state (aggregators written before the template keep their
        arrays in their own attributes: their ``_state()``)."""
        try:
            return self._st
        except AttributeError:
            return self._state()

    def _commit(self, change: Union["Delta", Mapping[str, Any], None]) -> None:
        """Commits what ``_ingest`` or ``_merged`` returned (under the lock)."""
        if isinstance(change, Delta):
            change.commit()
        elif change is None:
            pass  # committed in place by the protocol
        elif hasattr(self, "_st"):
            self._st = _State(change)  # a whole new state: one assignment
        else:
            self._set_state(dict(change))

    def _state_nbytes(self) -> int:
        """Bytes of the state arrays (the memory budget counts them beside a call's
        temporaries)."""
        state = getattr(self, "_st", None)  # an attribute, or a property (OLH: its inner server's)
        if state is None:
            return 0
        held = sum(map(_nbytes, vars(state).values())) if state.__dict__ else 0  # caches
        buffers = self.__dict__.get("_column_buffers")
        if buffers:
            held += sum(map(_nbytes, buffers.values()))
        fixed = self.__dict__.get("_fixed_nbytes")  # known from the parameters, else summed
        return held + (fixed if fixed is not None else sum(map(_nbytes, state.values())))

    def _check_call(self, nbytes: int, what: Union[str, Callable[[], str]]) -> None:
        """Refuse (ParameterError) a call whose temporaries, ``nbytes``, would take this
        server's memory (its state and them) over the budget. ``what`` (or a function
        making it, called only then) names the call."""
        check_allocation(int(nbytes), what, held=self._state_nbytes())

    def _check_query(self, candidates: Any, per_candidate: int, default: int, what: str, extra: int = 0) -> None:
        """Refuse a query over ``candidates`` (None: ``default`` values) whose temporaries,
        ``per_candidate`` bytes each (the converted candidates, intermediate and result
        arrays) and ``extra`` bytes (e.g. a decode buffer), would take the server over the
        budget. Runs before the candidates are converted."""
        count = default if candidates is None else _length(candidates)
        over = f"over all {count} values (the default)" if candidates is None else f"of {count} candidates"
        self._check_call(per_candidate * count + extra, f"{what} {over}")

    # -- contract -------------------------------------------------------------------
    def _accepted(self, reports: Any) -> Tuple["Reports", int, bool]:
        """A shallow snapshot of ``reports`` (columns reassigned later do not affect it),
        with its type, columns and parameter fingerprint checked; its length, and whether
        every column is aligned."""
        expected = self.reports_type or _REGISTRY[self.protocol].reports
        if not isinstance(reports, expected):
            raise ReportError(f"reports must be {expected.__name__}, got {type(reports).__name__}")
        batch = cast(Reports, object.__new__(type(reports)))  # copy.copy, without its generic machinery
        batch.__dict__.update(reports.__dict__)
        n, aligned = batch._checked_columns()
        fingerprint = batch.params_fingerprint
        if fingerprint is not None and fingerprint != self.params.fingerprint:
            made_with = _KNOWN_PARAMS.get(fingerprint)
            origin = _params_text(made_with) if made_with is not None else "unknown parameters"
            raise IncompatibleError(
                f"reports were made with other parameters than this server's: reports "
                f"{origin} (fingerprint {str(fingerprint)[:16]}), server {_params_text(self.params)} "
                f"(fingerprint {self.params.fingerprint[:16]})")
        return batch, n, aligned

    def _keeps_batch(self) -> bool:
        """True when ``_ingest`` keeps the batch's columns in the state (they must then be
        fresh copies, not the reused buffers of :meth:`_own`)."""
        return False

    def _own(self, batch: "Reports", aligned: bool = False) -> "Reports":
        """``batch`` with its columns replaced by copies the library owns (only unaligned
        ones when ``_reads_once``), so that each value the caller passed is read once: what
        is checked is what is added. Called under the lock: the copies go into buffers
        kept for the next batch (fresh memory each time costs page faults, the most of a
        copy's time), unless ``_ingest`` keeps the columns. ``aligned``: every column is
        known to be aligned."""
        if aligned and self._reads_once:
            return batch
        names = batch._names()
        owned = [name for name in names if not getattr(batch, name).flags.aligned] if self._reads_once else names
        if not owned:
            return batch
        columns = {name: getattr(batch, name) for name in owned}
        pool: Dict[str, np.ndarray] = self.__dict__.setdefault("_column_buffers", {})
        fresh = self._keeps_batch()
        needed = sum(columns[name].nbytes for name in owned
                     if fresh or not _fits(pool.get(name), columns[name].dtype, columns[name].size))
        self._check_call(needed, lambda: f"a copy of a batch of {len(batch)} reports for {_aggregator_name(self)}")
        for name in owned:  # read once from the caller's memory, each value whole (_core.copy_once)
            column = columns[name]
            if fresh:
                copy = np.empty(column.shape, dtype=column.dtype)
            else:
                if not _fits(pool.get(name), column.dtype, column.size):
                    pool[name] = np.empty(column.size, dtype=column.dtype)
                copy = pool[name][:column.size].reshape(column.shape)
            _core.copy_once(column, copy)
            setattr(batch, name, copy)
        return batch

    def _kept_buffer(self, key: str, size: int, dtype: Any, what: Callable[[], str]) -> np.ndarray:
        """``size`` values of ``dtype`` (uninitialized) in a buffer kept for the next call, like
        :meth:`_own`'s copies (fresh pages cost faults); a buffer that must be made is first
        checked against the memory budget (``what`` names the call)."""
        pool: Dict[str, np.ndarray] = self.__dict__.setdefault("_column_buffers", {})
        buffer = pool.get(key)
        if buffer is None or not _fits(buffer, np.dtype(dtype), size):
            self._check_call(size * np.dtype(dtype).itemsize, what)
            buffer = pool[key] = np.empty(size, dtype=dtype)
        return buffer[:size]

    def validate(self, reports: "Reports") -> None:
        """Raise as :meth:`update` would for ``reports``, without adding them (some checks
        that need the aggregation itself, e.g. PrivSketch's ordering matrices, run only in
        ``update``)."""
        batch, _, aligned = self._accepted(reports)
        with self._lock:
            self._validate(self._own(batch, aligned))

    def update(self: A, reports: "Reports") -> A:
        """Add a batch of reports; returns self. The batch is checked whole first (type,
        column dtypes and lengths, parameter fingerprint, values) and added to the state in
        place in time and memory proportional to the batch; a rejected or interrupted batch
        leaves the aggregator unchanged.

        Raises:
            ReportError: the batch is of another type or does not fit the parameters.
            IncompatibleError: the batch records other parameters (``params_fingerprint``).
        """
        batch, n, aligned = self._accepted(reports)
        with self._lock:
            if not (aligned and self._reads_once):
                self._own(batch, aligned)
            if not self._ingest_validates:
                self._validate(batch)
            if n:
                change = self._ingest(batch)
                if change is not None:  # None: committed in place by _ingest
                    self._commit(change)
        return self

    def merge(self: A, other: A) -> A:
        """Add ``other``'s reports into this aggregator in place (exact; ``other`` is
        unchanged; a failed or interrupted merge leaves this aggregator unchanged).

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
        with _locked_pair(self, other):
            self._commit(self._merged(other._committed()))
        return self

    def to_bytes(self, key: Optional[bytes] = None) -> bytes:
        """Versioned container: magic, format version, protocol id, parameter JSON and
        fingerprint, the state arrays (.npy), and a CRC-32 of everything before it.

        The CRC-32 detects accidental corruption only: anyone can change the bytes and
        recompute it. With ``key`` (bytes, from the caller), an HMAC-SHA256 of the
        content is added, which :meth:`from_bytes` verifies when given the same key; use
        it for aggregators that cross a trust boundary."""
        head = {"protocol": self.protocol, "fingerprint": self.params.fingerprint,
                **{k: v for k, v in json.loads(self.params.to_json()).items() if k in ("params", "domain")}}
        with self._lock:  # updates change the arrays in place: written whole, under the lock
            return write_container(head, self._state(), key)

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
            params_cls: Type[Params] = target.params_type
            params = params_cls.from_dict(header["params"])
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

    def __reduce__(self) -> Tuple[Callable[..., Aggregator], Tuple[object, ...]]:
        # the domain object travels too: bytes know a vocabulary by its fingerprint only
        domain = self.params.label_domain
        if domain is None:
            return (type(self).from_bytes, (self.to_bytes(),))
        return (type(self).from_bytes, (self.to_bytes(), None, domain))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        if other is self:
            return True
        assert isinstance(other, Aggregator)
        with _locked_pair(self, other):  # compared whole: neither changes meanwhile
            a = dict(self._state())
            b = dict(other._state())
            return (self.params == other.params and self.params.fingerprint == other.params.fingerprint
                    and set(a) == set(b)
                    and all(np.array_equal(a[k], b[k]) for k in a))

    # mutable, so unhashable; typeshed's idiom, as object declares __hash__ a method
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

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
