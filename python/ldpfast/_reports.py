"""Report batches: typed containers of equal-length numpy columns (see
:mod:`ldpfast._base`)."""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, cast

import numpy as np

from . import _core
from ._params import Params
from .errors import ReportError

R = TypeVar("R", bound="Reports")


class Reports:
    """Mixin for report batches: a dataclass whose fields are equal-length numpy columns.

    Equality compares the columns with ``np.array_equal`` (batches of one type only), and
    ``repr`` names the protocol and the number of reports instead of printing arrays.

    ``params_fingerprint`` (not a column) is the fingerprint of the parameters the batch
    was made with: clients of registered protocols set it, Arrow/Parquet and the wire
    decoder keep it, and a server refuses a batch whose fingerprint is not its own
    (IncompatibleError). Batches built by hand have None, which every server of the
    protocol accepts (the values are still checked against its parameters).

    ``column_types`` declares each column's numpy dtype and number of dimensions as the
    constructor makes them; ``Aggregator.update`` checks them again, since a column may be
    reassigned after construction."""

    protocol: ClassVar[str] = ""
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {}
    # set by the dataclass decorator on each subclass
    __dataclass_fields__: ClassVar[Dict[str, dataclasses.Field[Any]]]
    # per-class caches, filled on first use (read through cls.__dict__: never inherited)
    _column_names: ClassVar[Tuple[str, ...]]
    _declared_types: ClassVar[Dict[str, Tuple[np.dtype[Any], int]]]
    _specs: ClassVar[Tuple[Tuple[str, Optional[np.dtype[Any]], int], ...]]
    _plain: ClassVar[Optional[Tuple[Tuple[str, ...], Tuple[np.dtype[Any], ...], Tuple[int, ...]]]]
    params_fingerprint: Optional[str] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The dataclass decorator runs after this and adds __eq__/__repr__ only where the
        # class body has none, so placing the array-aware ones here keeps them.
        cls.__eq__ = Reports.__eq__  # type: ignore[method-assign]
        cls.__repr__ = Reports.__repr__  # type: ignore[method-assign]
        cls.__hash__ = None  # type: ignore[assignment]  # mutable columns

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self.columns(), other.columns()
        return all(np.array_equal(mine[k], theirs[k]) for k in mine)

    def __repr__(self) -> str:
        size: object
        try:
            size = len(self)
        except Exception:  # half-built batch (a constructor that raised part way)
            size = "?"
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={self.protocol!r}, n={size}, columns={self.column_names()})")

    def columns(self) -> Dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self._names()}

    @classmethod
    def _names(cls) -> Tuple[str, ...]:
        """The column names, computed once per class (``update`` asks on every batch)."""
        names: Optional[Tuple[str, ...]] = cls.__dict__.get("_column_names")
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls))
            cls._column_names = names
        return names

    @classmethod
    def _declared(cls) -> Dict[str, Tuple[np.dtype[Any], int]]:
        """``column_types`` with numpy dtypes, computed once per class."""
        declared: Optional[Dict[str, Tuple[np.dtype[Any], int]]] = cls.__dict__.get("_declared_types")
        if declared is None:
            declared = {name: (np.dtype(kind), ndim) for name, (kind, ndim) in cls.column_types.items()}
            cls._declared_types = declared
        return declared

    def __len__(self) -> int:
        return int(len(getattr(self, self._names()[0])))

    def _check_lengths(self) -> None:
        lengths = {name: len(col) for name, col in self.columns().items()}
        if len(set(lengths.values())) > 1:
            raise ReportError(f"report columns must have equal lengths, got {lengths}")

    @classmethod
    def _column_specs(cls) -> Tuple[Tuple[str, Optional[np.dtype[Any]], int], ...]:
        """``(name, declared dtype or None, declared dimensions)`` per column, computed once
        per class (``update`` checks every batch against them)."""
        specs: Optional[Tuple[Tuple[str, Optional[np.dtype[Any]], int], ...]] = cls.__dict__.get("_specs")
        if specs is None:
            declared = cls._declared()
            specs = tuple((name, *declared.get(name, (None, 0))) for name in cls._names())
            cls._specs = specs
        return specs

    def _check_columns(self) -> int:
        """Raise ReportError unless every column is a numpy array of its declared dtype and
        dimensions, all of one length (made C-contiguous here); returns that length."""
        return self._checked_columns()[0]

    @classmethod
    def _plain_spec(cls) -> Optional[Tuple[Tuple[str, ...], Tuple[np.dtype[Any], ...], Tuple[int, ...]]]:
        """Names, dtypes and dimensions of the columns for ``_core.plain_columns_length``
        (None when a column has no declared dtype), computed once per class."""
        if "_plain" not in cls.__dict__:
            specs = cls._column_specs()
            cls._plain = None if any(dtype is None for _, dtype, _ in specs) else (
                tuple(name for name, _, _ in specs), tuple(cast(np.dtype, dtype) for _, dtype, _ in specs),
                tuple(ndim for _, _, ndim in specs))
        return cls._plain

    def _checked_columns(self) -> Tuple[int, bool]:
        """:meth:`_check_columns`'s length, and whether every column is aligned."""
        plain = self._plain_spec()
        if plain is not None:  # one C++ call for the batches clients and readers make
            length = _core.plain_columns_length(self.__dict__, *plain)
            if length >= 0:
                return length, True
        length, unequal, aligned = -1, False, True
        for name, dtype, ndim in self._column_specs():
            col = getattr(self, name)
            if not isinstance(col, np.ndarray) or col.ndim == 0:
                raise ReportError(f"report column {name!r} must be a numpy array with one row per "
                                  f"report, got {type(col).__name__}")
            if dtype is not None and ((col.dtype is not dtype and col.dtype != dtype) or col.ndim != ndim):
                raise ReportError(
                    f"report column {name!r} must be a {ndim}-D {dtype.name} array, "
                    f"got a {col.ndim}-D {col.dtype} array (build batches with "
                    f"{type(self).__name__}(...), which converts and checks)")
            flags = col.flags
            if not flags.c_contiguous:
                col = np.ascontiguousarray(col)
                setattr(self, name, col)
                flags = col.flags
            aligned &= flags.aligned
            unequal |= 0 <= length != col.shape[0]
            length = col.shape[0]
        if unequal:
            self._check_lengths()
        return max(length, 0), aligned

    @classmethod
    def column_names(cls) -> List[str]:
        """The column names, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_columns(cls: Type[R], columns: Mapping[str, Any], params: Optional[Params] = None) -> R:
        """A batch from named array-likes (e.g. Arrow, pandas or decoded wire columns).

        The default passes ``columns`` to the constructor, which checks dtypes; protocols
        whose columns may arrive in another integer type override this to convert safely.

        Raises:
            ReportError: a column is missing or unexpected.
        """
        names = cls.column_names()
        missing = [n for n in names if n not in columns]
        extra = [n for n in columns if n not in names]
        if missing or extra:
            raise ReportError(f"{cls.__name__} columns must be {names}, "
                              f"missing {missing}, unexpected {extra}")
        return cls(**{n: np.asarray(columns[n]) for n in names})

    @classmethod
    def wire_fields(cls, params: Params) -> Sequence[Tuple[Any, ...]]:
        """Per-report fields of the compact wire encoding (see :mod:`ldpfast.wire`):
        ``[(column, bits)]`` for unsigned columns with values in ``[0, 2**bits)``, or
        ``(column, bits, codebook[, dtype])`` for a column whose values are the entries of
        ``codebook`` (sent as the index); ``dtype`` is the decoded column's numpy dtype.
        Protocols that support :mod:`ldpfast.wire` override this with the bit counts
        their paper states for one report."""
        raise NotImplementedError(f"{cls.__name__} does not define a wire encoding (wire_fields)")

    def to_arrow(self, params: Optional[Params] = None) -> Any:
        """Deprecated since 0.2.0, removed in 0.3.0: use :func:`ldpfast.arrow.to_arrow`
        ``(reports, params)``."""
        return _arrow_adapter("Reports.to_arrow(params)", "ldpfast.arrow.to_arrow(reports, params)").to_arrow(
            self, params)

    @classmethod
    def from_arrow(cls: Type[R], table: Any, params: Optional[Params] = None) -> R:
        """Deprecated since 0.2.0, removed in 0.3.0: use :func:`ldpfast.arrow.from_arrow`
        ``(table, params, reports_type=cls)``."""
        adapter = _arrow_adapter("Reports.from_arrow(table, params)",
                                 "ldpfast.arrow.from_arrow(table, params, reports_type=...)")
        return cast(R, adapter.from_arrow(table, params, reports_type=cls))


def _arrow_adapter(old: str, new: str) -> Any:
    """:mod:`ldpfast.arrow`, for the deprecated methods above: the adapter sits above this
    module, which therefore loads it by name instead of importing it."""
    warnings.warn(f"{old} is deprecated and will be removed in ldpfast 0.3.0; use {new}", DeprecationWarning,
                  stacklevel=3)
    return importlib.import_module("ldpfast.arrow")
