"""Type stubs for the compiled core (cpp/bind/*.cpp).

Drafted with pybind11-stubgen, then curated: the bindings take numpy arrays as plain
objects and check dtype, C-contiguity and length themselves (never casting or copying),
so each array parameter is typed with the one dtype the binding accepts. Arrays marked
"in place" must also be writable. Keep in sync with the bindings.
"""

from typing import Any, Dict, Literal, Optional, Tuple, Union

import numpy as np
from numpy.typing import NDArray

_U64 = NDArray[np.uint64]
_I64 = NDArray[np.int64]
_U32 = NDArray[np.uint32]
_U16 = NDArray[np.uint16]
_I8 = NDArray[np.int8]
_U8 = NDArray[np.uint8]
_I32 = NDArray[np.int32]
_F64 = NDArray[np.float64]

class Field:
    """A finite field for hashing: F_p (odd prime p < 2^64) or GF(2^l), l <= 64."""

    @staticmethod
    def prime(p: int) -> Field: ...
    @staticmethod
    def binary(l: int, poly_low: int) -> Field: ...  # noqa: E741 (the paper's name)
    @property
    def is_binary(self) -> bool: ...

# Kernel selection and threads.
def active_backend() -> str: ...
def supported_backends() -> list[str]: ...
def compiled_backends() -> list[str]: ...
def set_backend(name: str, /) -> None: ...
def get_num_threads() -> int: ...
def set_num_threads(threads: int, /) -> None: ...

# Randomness and hashing.
def chacha20_block(key: bytes, counter: int, nonce: int) -> bytes: ...
def field_mul(field: Field, a: _U64, b: _U64) -> _U64: ...
def plain_columns_length(columns: Dict[str, Any], names: Tuple[str, ...], dtypes: Tuple[Any, ...],
                         ndims: Tuple[int, ...]) -> int: ...
def copy_once(src: NDArray[Any], dst: NDArray[Any]) -> None: ...
def ocms_hash(field: Field, a0: _U64, a1: _U64, x: _U64, m: int, threads: int = 0) -> _U64: ...

# Transforms (in place: data).
def fwht(
    data: Union[NDArray[np.float32], NDArray[np.float64], _I64], threads: int = 0
) -> None: ...

# OCMS+RR and k-ary randomized response.
def ocms_perturb(
    field: Field, key: bytes, x: _U64, m: int, flip_threshold: int, threads: int = 0
) -> Tuple[_U64, _U64, _U64]: ...
def randomized_response(
    key: bytes, y: _U64, m: int, flip_threshold: int, threads: int = 0
) -> _U64: ...
def ocms_count_range(  # in place: counts
    field: Field, z: _U64, a0: _U64, a1: _U64, m: int, x_begin: int, counts: _U64,
    threads: int = 0, method: Literal["auto", "scan", "affine"] = "auto",
) -> None: ...
def ocms_decode_method(field: Field, m: int, x_count: int) -> Literal["scan", "affine"]: ...
def ocms_count_list(  # in place: counts
    field: Field, z: _U64, a0: _U64, a1: _U64, m: int, candidates: _U64, counts: _U64,
    threads: int = 0,
) -> None: ...
def ocms_lookup_list(  # in place: counts
    field: Field, bits: _U8, a0: _U64, a1: _U64, m: int, candidates: _U64, counts: _U64,
    threads: int = 0,
) -> None: ...
def ocms_lookup_range(  # in place: counts
    field: Field, bits: _U8, a0: _U64, a1: _U64, m: int, x_begin: int, counts: _U64, threads: int = 0,
) -> None: ...

# Hadamard family (HE, RHR, OLH, HRR, CMS+HE, HadaOracle).
def hadamard_perturb(
    key: bytes,
    x: _U64,
    groups_table: _U64,
    level_first: _U32,
    level_count: _U32,
    field: Optional[Field] = None,
    groups: Optional[_U32] = None,
    rows: Optional[_U32] = None,
    flip_threshold: int = 0,
    threads: int = 0,
) -> Tuple[Optional[_U32], _U32, _I8]: ...
def hadamard_first_invalid(
    groups: Optional[_U32], rows: _U32, bits: _I8, group_rows: _U64, threads: int = 0
) -> int: ...
def hadamard_accumulate(  # in place: z
    groups: Optional[_U32], rows: _U32, bits: _I8, cell_base: _U64, z: _I64, threads: int = 0
) -> None: ...
def hadamard_update(  # in place: z, group_sizes, count
    groups: Optional[_U32],
    rows: _U32,
    bits: _I8,
    group_rows: _U64,
    cell_base: _U64,
    z: _I64,
    threads: int = 0,
    group_sizes: Optional[_I64] = None,
    count: Optional[_I64] = None,
) -> int: ...
def hadamard_update_scratch_bytes(n: int, n_cells: int, n_groups: int, threads: int = 0) -> int: ...
def rhr_perturb(
    key: bytes,
    x: _U64,
    base_bits: int,
    hsize: int,
    flip_threshold: int,
    rows: Optional[_U32] = None,
    threads: int = 0,
) -> Tuple[_U32, _U32]: ...

# PrivSketch.
def privsketch_perturb(
    field: Field,
    a0: _U64,
    a1: _U64,
    K: int,
    M: int,
    offsets: _I64,
    items: _U64,
    key: bytes,
    sampling: int,
    with_order: bool,
    flip_threshold: int,
    threads: int = 0,
) -> Tuple[_U32, _I8, Optional[_U16]]: ...
def privsketch_decode_cell(
    K: int,
    M: int,
    order: _U16,
    cell: _U32,
    bits: _I8,
    bucket_offsets: _I64,
    bucket_cand: _U32,
    bucket_cells: _U16,
    n_cand: int,
    threads: int = 0,
) -> Tuple[_I64, _I64, int]: ...
def privsketch_decode_full(
    K: int, M: int, order: _U16, bits: _I8, cand_cells: _U16, threads: int = 0
) -> Tuple[_I64, _I64, int]: ...
def privsketch_padding_sample(
    key: bytes, offsets: _I64, items: _U64, pad_len: int, dummy: int, threads: int = 0
) -> _U64: ...

# Symbol histograms (GRR's server).
def histogram_update(y: _U64, counts: _U64, threads: int = 0, counts_zero: bool = False,
                     staging: Optional[NDArray[np.uint32]] = None) -> Tuple[int, int, bool]: ...  # in place: counts
def histogram_update_stages(n: int, size: int, threads: int = 0, counts_zero: bool = False) -> bool: ...
def histogram_update_scratch_bytes(n: int, size: int, threads: int = 0, counts_zero: bool = False) -> int: ...
def histogram_affine(counts: _U64, scale: float, offset: float) -> _F64: ...

# Projective Geometry Response.
def pgr_perturb(key: bytes, x: _U64, q: int, t: int, in_threshold: int, threads: int = 0) -> _U32: ...
def pgr_update(y: _U32, points: int, counts: _U64, threads: int = 0) -> int: ...  # in place: counts
def pgr_decode(counts: _U64, q: int, t: int, threads: int = 0) -> _U64: ...
# Bit-vector protocols (OUE/SUE, RAPPOR, the memoized longitudinal clients, dBitFlip).
def bitvec_column_counts(
    rows: _U8, k: int, groups: Optional[_U32], n_groups: int, threads: int = 0
) -> Tuple[_U64, _U64, int]: ...
def unary_perturb(key: bytes, hot: _U64, k: int, t_hot: int, t_cold: int, threads: int = 0) -> _U8: ...
def memo_unary_perturb(
    key: bytes,
    secrets: _U8,
    hot: _U64,
    k: int,
    t1_hot: int,
    t1_cold: int,
    instantaneous: bool,
    t2_one: int,
    t2_zero: int,
    threads: int = 0,
) -> _U8: ...
def bit_response(key: bytes, rows: _U8, k: int, t_one: int, t_zero: int, threads: int = 0) -> _U8: ...
def memo_grr(
    key: bytes, secrets: _U8, x: _U64, m: int, t1: int, instantaneous: bool, t2: int, threads: int = 0
) -> _U64: ...
def dbitflip_perturb(
    secrets: _U8, x: _U64, b: int, sampled: int, t_hot: int, t_cold: int, threads: int = 0
) -> Tuple[_U32, _U8]: ...
def memo_draws(secrets: _U8, purpose: int, bound: int, count: int, threads: int = 0) -> _U64: ...
def rappor_bloom_positions(
    encoding: int, k: int, h: int, data: _U8, offsets: _I64, cohorts: _U32, threads: int = 0
) -> _U32: ...
def rappor_cohorts(encoding: int, secrets: _U8, m: int, threads: int = 0) -> _U32: ...
def rappor_permanent(
    encoding: int, k: int, f128: int, secrets: _U8, encoder_id: bytes, bloom: _U8, threads: int = 0
) -> _U8: ...
def sparse_nn_lasso(  # in place: beta
    col_ptr: _I64,
    rows: _I32,
    n_rows: int,
    target: _F64,
    weight: _F64,
    penalty: _F64,
    tol: float,
    max_passes: int,
    beta: _F64,
) -> int: ...
def sparse_bit_em(  # in place: f
    col_ptr: _I64,
    rows: _I32,
    n_rows: int,
    y: _F64,
    trials: _F64,
    p_one: float,
    p_zero: float,
    other_rate: float,
    f_other: float,
    tol: float,
    max_iter: int,
    f: _F64,
) -> Tuple[int, float]: ...
def sparse_gram(col_ptr: _I64, rows: _I32, n_rows: int, weight: _F64) -> _F64: ...

# Square Wave on a grid.
def square_wave_perturb(key: bytes, x: _U64, d: int, band: int, flip_threshold: int, threads: int = 0) -> _U64: ...
def square_wave_em(
    counts: _U64,
    d: int,
    band: int,
    near: float,
    far: float,
    smooth: bool,
    max_iterations: int,
    likelihood_tol: float,
    l1_tol: float,
) -> Tuple[_F64, int, float]: ...
