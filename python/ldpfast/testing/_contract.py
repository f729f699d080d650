"""The aggregator contract: the update template, exact merges, byte and pickle round trips,
parameters, standard errors, and the Arrow/Parquet and wire round trips."""

from __future__ import annotations

import copy
import inspect
import pickle
import tempfile
from pathlib import Path
from typing import Any, List, cast

import numpy as np

from .._base import Aggregator, load_aggregator, params_from_json, protocols, read_header
from ..errors import FormatError, IncompatibleError
from ._case import Case, CheckSkipped, register, slice_reports


@register("contract")
def update_is_the_shared_template(case: Case) -> None:
    """Servers add batches through ``Aggregator.update`` (checked batch, fingerprint, one-step
    commit under the lock), implement ``_ingest`` and keep the committed state in ``_st``."""
    agg = case.server()
    assert type(agg).update is Aggregator.update, f"{type(agg).__name__} overrides update: implement _ingest"
    assert type(agg)._ingest is not Aggregator._ingest, f"{type(agg).__name__} does not implement _ingest"
    assert hasattr(agg, "_st"), "the committed state must live in one attribute (_st)"


@register("contract")
def empty_aggregator_is_the_merge_identity(case: Case) -> None:
    """An empty server merged into a full one, or a full one into an empty one, changes no byte."""
    full = case.server(case.reports)
    blob = full.to_bytes()
    assert case.server().merge(full).to_bytes() == blob
    assert full.merge(case.server()).to_bytes() == blob
    empty = case.server()
    assert case.aggregator.from_bytes(empty.to_bytes()).to_bytes() == empty.to_bytes()


@register("contract")
def merge_is_exact_associative_and_commutative(case: Case) -> None:
    """One server of all reports, one fed three batches, and three merged in any grouping or
    order hold the same bytes."""
    a, b, c = case.parts
    whole = case.server(case.reports).to_bytes()
    in_parts = case.server(a, b, c).to_bytes()
    left = case.server(a).merge(case.server(b)).merge(case.server(c)).to_bytes()
    right = case.server(a).merge(case.server(b).merge(case.server(c))).to_bytes()
    swapped = case.server(c).merge(case.server(a)).merge(case.server(b)).to_bytes()
    assert whole == in_parts, "adding the reports in three batches differs from adding them at once"
    assert whole == left == right == swapped, "merging is not exact, associative and commutative"


@register("contract")
def merge_modifies_only_the_left_side(case: Case) -> None:
    """``left.merge(right)`` leaves ``right`` unchanged."""
    left, right = case.server(case.parts[0]), case.server(case.parts[1])
    before = right.to_bytes()
    left.merge(right)
    assert right.to_bytes() == before


@register("contract")
def merge_refuses_other_parameters_and_other_protocols(case: Case) -> None:
    """Merging a server of other parameters or of another protocol raises IncompatibleError
    and changes nothing; bytes of another protocol do not load as this one (FormatError)."""
    agg = case.server(case.parts[0])
    before = agg.to_bytes()
    other = case.other_params()
    if other is not None:
        assert other != case.params
        try:
            agg.merge(case.server(params=other))
        except IncompatibleError as exc:
            assert "different parameters" in str(exc), exc
        else:
            raise AssertionError("a server of other parameters was merged")
    known = protocols()
    foreign = next(proto for pid, proto in sorted(known.items(), key=lambda item: item[0] != "grr")
                   if pid != case.id and proto.example is not None)
    assert foreign.example is not None
    stranger: Aggregator = foreign.aggregator(foreign.example()[0])
    try:
        agg.merge(stranger)
    except IncompatibleError:
        pass
    else:
        raise AssertionError(f"a {foreign.id!r} server was merged into a {case.id!r} one")
    try:
        type(stranger).from_bytes(before)
    except FormatError as exc:
        assert "aggregator, not" in str(exc), exc
    else:
        raise AssertionError(f"{case.id!r} bytes loaded as a {foreign.id!r} aggregator")
    assert agg.to_bytes() == before


@register("contract")
def bytes_and_pickle_round_trip(case: Case) -> None:
    """``from_bytes``, ``ldpfast.load``, pickle and copies give an equal server with the same
    bytes and estimates; the header names the protocol and the parameter fingerprint."""
    agg = case.server(case.reports)
    blob = agg.to_bytes()
    expected = case.estimate(agg)
    copies: List[Aggregator] = [case.aggregator.from_bytes(blob), pickle.loads(pickle.dumps(agg)),
                                load_aggregator(blob), Aggregator.from_bytes(cast(Any, bytearray(blob))),
                                copy.copy(agg), copy.deepcopy(agg)]
    for restored in copies:
        assert type(restored) is case.protocol.aggregator, type(restored)
        assert restored == agg and restored.to_bytes() == blob
        np.testing.assert_array_equal(case.estimate(restored), expected)
    header = read_header(blob)
    assert header["protocol"] == case.id and header["fingerprint"] == case.params.fingerprint


@register("contract")
def params_are_hashable_and_round_trip_through_json(case: Case) -> None:
    """Parameters survive JSON (``params_from_json``, ``from_json``) and pickle, equal and
    with the same hash and fingerprint; unknown protocols and bad JSON raise FormatError."""
    params = case.params
    again = params_from_json(params.to_json())
    assert type(again) is type(params) and again == params and hash(again) == hash(params)
    assert again.fingerprint == params.fingerprint
    assert type(params).from_json(params.to_json()) == params
    assert pickle.loads(pickle.dumps(params)) == params
    for text in ('{"protocol": "no-such-protocol", "params": {}}', "not json"):
        try:
            params_from_json(text)
        except FormatError:
            continue
        raise AssertionError(f"params_from_json accepted {text!r}")


@register("contract")
def frequencies_have_standard_errors_or_say_why(case: Case) -> None:
    """``frequencies()`` gives finite positive standard errors from the registered closed form
    (``Protocol.variance``), or NaN with a note saying why there is none."""
    agg = case.server(case.reports)
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    needs_candidates = first is not None and first.default is inspect.Parameter.empty
    est = agg.frequencies(np.arange(min(case.domain, 16)) if needs_candidates else None)
    assert est.values.shape == est.std.shape == est.candidates.shape and est.note
    if np.isnan(est.std).all():
        assert case.protocol.variance is None or "no closed-form" in est.note, est.note
    else:
        assert case.protocol.variance is not None and np.isfinite(est.std).all() and (est.std > 0).all()


@register("contract")
def reports_round_trip_through_arrow_and_parquet(case: Case) -> None:
    """Batches survive Arrow tables and Parquet files (column dtypes and shapes included),
    with their parameters, and aggregate to the same bytes when streamed back."""
    from .. import arrow

    try:
        table = arrow.to_arrow(case.reports, case.params)
    except ImportError as exc:
        raise CheckSkipped(str(exc)) from None
    assert arrow.from_arrow(table, case.params) == case.reports
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reports.parquet"
        arrow.write_parquet(case.reports, path, case.params, row_group_size=500)
        got_params, got = arrow.read_parquet(path)
        assert got_params == case.params and type(got) is type(case.reports)
        for name, column in case.reports.columns().items():
            assert getattr(got, name).dtype == column.dtype, name
            np.testing.assert_array_equal(getattr(got, name), column)
        streamed = case.server(*(batch for _, batch in arrow.iter_parquet(path, batch_rows=700)))
    assert streamed.to_bytes() == case.server(case.reports).to_bytes()


@register("contract")
def wire_encoding_round_trips(case: Case) -> None:
    """The compact wire encoding (``Protocol.wire_fields``) decodes what it encodes, in both
    framings, to a batch with the decoder's fingerprint that aggregates to the same bytes."""
    from .. import wire

    try:
        wire.fields(case.params)
    except NotImplementedError:
        raise CheckSkipped(f"protocol {case.id!r} has no wire encoding") from None
    part = case.parts[0]
    back = wire.decode(case.params, wire.encode(case.params, part), len(part))
    assert back == part and back.params_fingerprint == case.params.fingerprint
    first = slice_reports(part, 0, 50)
    assert wire.decode_each(case.params, wire.encode_each(case.params, first)) == first
    assert case.server(back).to_bytes() == case.server(part).to_bytes()
