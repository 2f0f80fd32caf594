"""What every op means: one handler per op kind, the interpreter's definition of the IR.

`SEMANTICS` maps an op class to `handler(state, op, operands) -> result`: the operands are the
values of the op's operands (numpy arrays for tiles, numpy scalars for scalars, `TensorView`s
for tensors), and the result is one value, or a list for ops with no or several results.
Handlers never modify their operands (values are immutable; cached constant tiles are even
read-only), and compute whole tiles with numpy, never element by element.

Dtype behaviour (see `tilec.interp.numerics`): floats round to their element type after every
op (f16 and bf16 computed in f32 and rounded; math functions computed in f64 and rounded once,
by the same functions the constant folders use, so folding never changes a result); integers
wrap; `index` is int64; float → int truncates toward zero and saturates; comparisons follow
the ordered/unordered predicates on NaN; `maximumf`/`minimumf` return NaN if either operand
is; `tile.dot` accumulates in its accumulator's type; `tile.load` reads only in-bounds,
unmasked elements (the rest take `padding`) and `tile.store` writes only those.

New ops register their handlers with `@semantics(OpClass)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import arith, scf
from tilec.dialects import math as math_ops
from tilec.dialects import tile as tile_ops
from tilec.interp.numerics import (
    BF16,
    F32,
    F64,
    dtype_of,
    float_to_int,
    fma,
    int_to_float,
    is_f8,
    is_float_dtype,
    is_narrow_float,
    maximumf,
    minimumf,
    round_from_f64,
    round_to_f8,
    tree_reduce,
)
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["SEMANTICS", "semantics"]

Handler = Callable[["BlockState", Operation, list[Any]], Any]

SEMANTICS: dict[type[Operation], Handler] = {}


def semantics(*op_classes: type[Operation]) -> Callable[[Handler], Handler]:
    """Decorator: `handler` defines what ops of `op_classes` compute."""

    def register(handler: Handler) -> Handler:
        for cls in op_classes:
            SEMANTICS[cls] = handler
        return handler

    return register


# ---------------------------------------------------------------------------------------------
# Helpers


def _same_shapes(state: BlockState, op: Operation, *values: Any) -> None:
    shape = np.shape(values[0])
    for v in values[1:]:
        if np.shape(v) != shape:
            raise state.error(
                op,
                "has operands of different shapes: "
                + ", ".join(str(tuple(np.shape(x))) for x in values),
            )


def _concrete_shape(state: BlockState, op: Operation, t: Any) -> tuple[int, ...]:
    """The shape of type `t` in this launch; an error if it has a `?` dimension."""
    shape = state.launch.shape(t)
    if None in shape:
        raise state.error(op, f"needs the size of every dimension of {t}, but one is '?'")
    return shape  # type: ignore[return-value]


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _cached(state: BlockState, op: Operation, make: Callable[[], Any]) -> Any:
    """A per-launch constant of `op` (same in every block)."""
    cache = state.launch.op_cache
    value = cache.get(op)
    if value is None:
        value = cache[op] = make()
    return value


def element_constant(value: Any, dtype: np.dtype) -> Any:
    """A constant attribute's value as a numpy scalar of `dtype` (floats rounded to nearest
    even, integers wrapped, i1 as a bool)."""
    if dtype == np.bool_:
        return np.bool_(bool(value))
    if is_float_dtype(dtype):
        return round_from_f64(float(value), dtype)[()]
    info = np.iinfo(dtype)
    wrapped = (int(value) - info.min) % (1 << info.bits) + info.min
    return dtype.type(wrapped)


def _signed(x: Any) -> Any:
    """i1 values as signed 1-bit integers (true is -1) in int8; other integers unchanged."""
    if np.asarray(x).dtype == np.bool_:
        return np.negative(np.asarray(x).astype(np.int8))
    return x


def _bits(dtype: np.dtype) -> int:
    return 1 if dtype == np.bool_ else dtype.itemsize * 8


def _unsigned(x: Any) -> Any:
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return x.astype(np.uint8)
    return x.astype(np.dtype(f"u{x.dtype.itemsize}"))


# ---------------------------------------------------------------------------------------------
# Where this block is, sizes and constants


@semantics(tile_ops.ProgramIdOp)
def _program_id(state: BlockState, op: Operation, args: list[Any]) -> Any:
    pid = state.program_id
    return np.int64(pid[op.axis] if op.axis < len(pid) else 0)  # missing axes have one block


@semantics(tile_ops.NumProgramsOp)
def _num_programs(state: BlockState, op: Operation, args: list[Any]) -> Any:
    grid = state.launch.grid
    return np.int64(grid[op.axis] if op.axis < len(grid) else 1)


@semantics(tile_ops.DimOp)
def _dim(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.int64(args[0].shape[op.axis])


@semantics(tile_ops.SymbolOp)
def _symbol(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.int64(state.launch.symbols[op.symbol])


@semantics(arith.ConstantOp)
def _constant(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return _cached(
        state, op, lambda: element_constant(op.attributes["value"].value, dtype_of(op.result.type))
    )


@semantics(tile_ops.FullOp)
def _full(state: BlockState, op: Operation, args: list[Any]) -> Any:
    def make() -> np.ndarray:
        dtype = dtype_of(op.result.type)
        value = element_constant(op.attributes["value"].value, dtype)
        return _frozen(np.full(_concrete_shape(state, op, op.result.type), value, dtype))

    return _cached(state, op, make)


@semantics(tile_ops.IotaOp)
def _iota(state: BlockState, op: Operation, args: list[Any]) -> Any:
    def make() -> np.ndarray:
        (n,) = _concrete_shape(state, op, op.result.type)
        return _frozen(np.arange(n, dtype=dtype_of(op.result.type)))

    return _cached(state, op, make)


# ---------------------------------------------------------------------------------------------
# Float arithmetic


def _float_binary(compute: Callable[[Any, Any], Any]) -> Handler:
    def handler(state: BlockState, op: Operation, args: list[Any]) -> Any:
        a, b = args
        _same_shapes(state, op, a, b)
        dtype = a.dtype
        if is_narrow_float(dtype):
            return compute(a.astype(F32), b.astype(F32)).astype(dtype)
        return compute(a, b)

    return handler


for _op, _compute in (
    (arith.AddFOp, np.add),
    (arith.SubFOp, np.subtract),
    (arith.MulFOp, np.multiply),
    (arith.DivFOp, np.divide),
    (arith.RemFOp, np.fmod),
    (arith.MaximumFOp, maximumf),
    (arith.MinimumFOp, minimumf),
):
    SEMANTICS[_op] = _float_binary(_compute)


@semantics(arith.NegFOp)
def _negf(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.negative(args[0])  # flips the sign bit, also of NaN and zero


@semantics(
    math_ops.ExpOp,
    math_ops.Exp2Op,
    math_ops.LogOp,
    math_ops.Log2Op,
    math_ops.SqrtOp,
    math_ops.RsqrtOp,
    math_ops.SinOp,
    math_ops.CosOp,
    math_ops.TanhOp,
    math_ops.ErfOp,
    math_ops.AbsFOp,
    math_ops.FloorOp,
    math_ops.CeilOp,
)
def _math_unary(state: BlockState, op: Operation, args: list[Any]) -> Any:
    # The op's own `compute` (f64 in, f64 out), the function its folder uses.
    x = args[0]
    return round_from_f64(type(op).compute(np.asarray(x, dtype=F64)), x.dtype)


@semantics(math_ops.PowFOp)
def _powf(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x, y = args
    _same_shapes(state, op, x, y)
    return round_from_f64(np.power(np.asarray(x, F64), np.asarray(y, F64)), x.dtype)


@semantics(math_ops.FmaOp)
def _fma(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a, b, c = args
    _same_shapes(state, op, a, b, c)
    return fma(a, b, c, a.dtype)


_CMPF: dict[str, Callable[[Any, Any], Any]] = {
    "oeq": np.equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
    "olt": np.less,
    "ole": np.less_equal,
    "one": lambda a, b: np.less(a, b) | np.greater(a, b),
    "ueq": lambda a, b: ~(np.less(a, b) | np.greater(a, b)),
    "ugt": lambda a, b: ~np.less_equal(a, b),
    "uge": lambda a, b: ~np.less(a, b),
    "ult": lambda a, b: ~np.greater_equal(a, b),
    "ule": lambda a, b: ~np.greater(a, b),
    "une": np.not_equal,
    "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
}


@semantics(arith.CmpFOp)
def _cmpf(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a, b = args
    _same_shapes(state, op, a, b)
    if a.dtype == BF16:
        a, b = a.astype(F32), b.astype(F32)  # exact
    return _CMPF[op.predicate](a, b)


# ---------------------------------------------------------------------------------------------
# Integer arithmetic (wraps around; i1 computes as a signed 1-bit integer)


def _int_binary(compute: Callable[[Any, Any, int], Any]) -> Handler:
    def handler(state: BlockState, op: Operation, args: list[Any]) -> Any:
        a, b = args
        _same_shapes(state, op, a, b)
        if a.dtype == np.bool_:
            return (np.asarray(compute(_signed(a), _signed(b), 1)) & 1).astype(np.bool_)
        return compute(a, b, _bits(a.dtype))

    return handler


def _divsi(a: Any, b: Any, width: int) -> Any:
    # Division by zero is unspecified in PTX; the hardware gives all ones, and so do we.
    # INT_MIN / -1 wraps to INT_MIN.
    zero = b == 0
    divisor = np.where(zero, b.dtype.type(1), b)
    remainder = np.fmod(a, divisor)
    quotient = (a - remainder) // divisor  # exact division: truncates toward zero
    return np.where(zero, a.dtype.type(-1), quotient)


def _remsi(a: Any, b: Any, width: int) -> Any:
    zero = b == 0
    return np.where(zero, a, np.fmod(a, np.where(zero, b.dtype.type(1), b)))


def _ceildivsi(a: Any, b: Any, width: int) -> Any:
    quotient = _divsi(a, b, width)
    remainder = _remsi(a, b, width)
    round_up = (b != 0) & (remainder != 0) & ((remainder < 0) == (b < 0))
    return np.where(round_up, quotient + a.dtype.type(1), quotient)


def _shli(a: Any, b: Any, width: int) -> Any:
    # PTX clamps shift amounts (read as unsigned) to the width: everything shifts out.
    out = (b < 0) | (b >= width)
    return np.where(out, a.dtype.type(0), np.left_shift(a, np.where(out, b.dtype.type(0), b)))


def _shrsi(a: Any, b: Any, width: int) -> Any:
    out = (b < 0) | (b >= width)
    shifted = np.right_shift(a, np.where(out, b.dtype.type(0), b))
    return np.where(out, np.where(a < 0, a.dtype.type(-1), a.dtype.type(0)), shifted)


for _op, _int_compute in (
    (arith.AddIOp, lambda a, b, w: a + b),
    (arith.SubIOp, lambda a, b, w: a - b),
    (arith.MulIOp, lambda a, b, w: a * b),
    (arith.DivSIOp, _divsi),
    (arith.RemSIOp, _remsi),
    (arith.CeilDivSIOp, _ceildivsi),
    (arith.MaxSIOp, lambda a, b, w: np.maximum(a, b)),
    (arith.MinSIOp, lambda a, b, w: np.minimum(a, b)),
    (arith.AndIOp, lambda a, b, w: a & b),
    (arith.OrIOp, lambda a, b, w: a | b),
    (arith.XOrIOp, lambda a, b, w: a ^ b),
    (arith.ShLIOp, _shli),
    (arith.ShRSIOp, _shrsi),
):
    SEMANTICS[_op] = _int_binary(_int_compute)

_CMPI_RELATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@semantics(arith.CmpIOp)
def _cmpi(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a, b = args
    _same_shapes(state, op, a, b)
    predicate = op.predicate
    if predicate in ("eq", "ne"):
        return _CMPI_RELATIONS[predicate](a, b)
    if predicate[0] == "u":
        return _CMPI_RELATIONS[predicate[1:]](_unsigned(a), _unsigned(b))
    return _CMPI_RELATIONS[predicate[1:]](_signed(a), _signed(b))


# ---------------------------------------------------------------------------------------------
# Choice and conversions


@semantics(tile_ops.SelectOp)
def _select(state: BlockState, op: Operation, args: list[Any]) -> Any:
    condition, on_true, on_false = args
    _same_shapes(state, op, condition, on_true, on_false)
    return np.where(condition, on_true, on_false)


def convert(x: Any, source: np.dtype, target: np.dtype) -> Any:
    """`tile.cast`: floats round to nearest even, float → int truncates toward zero (and
    saturates; NaN gives 0), integers wrap or sign-extend, → i1 is `!= 0`, i1 → is 0 or 1."""
    if source == target:
        return x
    if is_f8(source):  # exact in f32
        return convert(np.asarray(x).astype(F32), F32, target)
    if is_f8(target):
        wide = x if is_float_dtype(source) else convert(x, source, F32)
        return round_to_f8(wide, target)
    source_float = is_float_dtype(source)
    target_float = is_float_dtype(target)
    if target == np.bool_:
        return np.not_equal(x, source.type(0))
    if source_float and target_float:
        return _convert_float(x, source, target)
    if source_float:
        return float_to_int(x, target)
    if target_float:
        if source == np.bool_:
            return np.asarray(x).astype(target)
        return int_to_float(x, target)
    return np.asarray(x).astype(target)  # integers: wrap, or sign-extend (i1 gives 0 or 1)


def _convert_float(x: Any, source: np.dtype, target: np.dtype) -> Any:
    if source == F64:
        return round_from_f64(x, target)
    if is_narrow_float(source) and is_narrow_float(target):
        return np.asarray(x).astype(F32).astype(target)  # f16 <-> bf16: exact to f32, one rounding
    return np.asarray(x).astype(target)  # widening is exact; f32 -> f16/bf16 rounds once


@semantics(tile_ops.CastOp)
def _cast(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    return convert(x, x.dtype, dtype_of(op.result.type))


@semantics(arith.ExtFOp, arith.TruncFOp)
def _float_cast(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    return _convert_float(x, x.dtype, dtype_of(op.result.type))


@semantics(arith.SIToFPOp)
def _sitofp(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return int_to_float(_signed(args[0]), dtype_of(op.result.type))


@semantics(arith.FPToSIOp)
def _fptosi(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return float_to_int(args[0], dtype_of(op.result.type))


@semantics(arith.ExtSIOp)
def _extsi(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.asarray(_signed(args[0])).astype(dtype_of(op.result.type))


@semantics(arith.TruncIOp)
def _trunci(state: BlockState, op: Operation, args: list[Any]) -> Any:
    target = dtype_of(op.result.type)
    if target == np.bool_:
        return (np.asarray(args[0]) & 1).astype(np.bool_)
    return np.asarray(args[0]).astype(target)


@semantics(arith.IndexCastOp)
def _index_cast(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    target = dtype_of(op.result.type)
    if target == np.int64:
        return np.asarray(_signed(x)).astype(np.int64)
    # index -> a narrower integer. In tile IR `index` values are sizes and offsets; one that
    # does not fit would wrap into a wrong offset or mask, so it is an error, not a result.
    info = np.iinfo(target) if target != np.bool_ else None
    low, high = (info.min, info.max) if info is not None else (-1, 0)
    if np.any(x < low) or np.any(x > high):
        bad = np.asarray(x)[(np.asarray(x) < low) | (np.asarray(x) > high)].flat[0]
        raise state.error(
            op,
            f"converts the index value {bad} to {op.result.type}, which cannot hold it",
            hint="the sizes of this launch are too large for the integer type the kernel uses",
        )
    if target == np.bool_:
        return np.asarray(x) != 0
    return np.asarray(x).astype(target)


# ---------------------------------------------------------------------------------------------
# Memory


def _in_bounds(
    extents: tuple[int, ...], offsets: list[Any], shape: tuple[int, ...]
) -> tuple[tuple[slice, ...], tuple[slice, ...]] | None:
    """The part of a tile at `offsets` that lies inside a tensor of `extents`: the slices of
    the tensor and of the tile, or None when no element is inside."""
    box: list[slice] = []
    local: list[slice] = []
    for extent, offset, size in zip(extents, offsets, shape):
        start = int(offset)
        low = max(0, -start)
        high = min(size, extent - start)
        if high <= low:
            return None
        box.append(slice(start + low, start + high))
        local.append(slice(low, high))
    return tuple(box), tuple(local)


def _access_operands(
    state: BlockState, op: Operation, args: list[Any], rank: int, has_value: bool
) -> tuple[Any, list[Any], Any, Any]:
    view = args[0]
    offsets = args[1 : 1 + rank]
    rest = args[1 + rank :]
    value = rest.pop(0) if has_value else None
    mask = rest[0] if rest else None
    return view, offsets, value, mask


def _check_in_bounds(
    state: BlockState, op: Operation, extents: tuple[int, ...], offsets: list[Any], shape
) -> None:
    """The op's `in_bounds` promise (vectorize): the lowering checks no bounds along those
    dimensions, so a tile that reaches outside there is a compiler error, caught here."""
    promised = op.attributes.get("in_bounds")
    if promised is None:
        return
    for d, (inside, extent, offset, size) in enumerate(
        zip(promised.value, extents, offsets, shape)
    ):
        start = int(offset)
        if inside and (start < 0 or start + size > extent):
            raise state.error(
                op,
                f"breaks its in_bounds promise along dim {d}: elements {start}..{start + size - 1}"
                f" of an extent of {extent}",
                hint="the pass that set in_bounds (vectorize) proved something false",
            )


@semantics(tile_ops.LoadOp)
def _load(state: BlockState, op: Operation, args: list[Any]) -> Any:
    view, offsets, _, mask = _access_operands(state, op, args, len(args[0].shape), False)
    shape = _concrete_shape(state, op, op.result.type)
    dtype = view.array.dtype
    padding = _cached(
        state,
        op,
        lambda: element_constant(
            op.attributes["padding"].value if "padding" in op.attributes else 0, dtype
        ),
    )
    if mask is not None and mask.shape != shape:
        raise state.error(op, f"has a mask of shape {mask.shape} for a tile of shape {shape}")
    _check_in_bounds(state, op, view.shape, offsets, shape)
    tile = np.full(shape, padding, dtype)
    inside = _in_bounds(view.shape, offsets, shape)
    if inside is not None:
        box, local = inside
        tile[local] = view.read(box)
    if mask is not None:
        tile = np.where(mask, tile, padding)
    return tile


@semantics(tile_ops.StoreOp)
def _store(state: BlockState, op: Operation, args: list[Any]) -> Any:
    view, offsets, value, mask = _access_operands(state, op, args, len(args[0].shape), True)
    if mask is not None and mask.shape != value.shape:
        raise state.error(
            op, f"has a mask of shape {mask.shape} for a value of shape {value.shape}"
        )
    _check_in_bounds(state, op, view.shape, offsets, value.shape)
    inside = _in_bounds(view.shape, offsets, value.shape)
    if inside is not None:
        box, local = inside
        view.write(box, value[local], None if mask is None else mask[local])
    return []


# ---------------------------------------------------------------------------------------------
# Compute


@semantics(tile_ops.DotOp)
def _dot(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a, b, acc = args
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or acc.shape != (m, n):
        raise state.error(
            op, f"cannot multiply {a.shape} by {b.shape} into an accumulator of {acc.shape}"
        )
    if acc.dtype == np.int32:
        # i8 operands: products and sums are exact in i64 (K < 2**33); wrap into i32 once.
        product = np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
        return acc + product
    # f16 and bf16 products are exact in f32, so multiplying in f32 and summing in f32 is the
    # f32 accumulation the IR asks for (and numpy's f32 matmul is BLAS, its f16 one is slow).
    # BLAS picks its summation order by the operands' memory layout too (OpenBLAS's 32x32x32
    # with a transposed B rounds 1 ulp from a contiguous one), and a transpose's view or a
    # shared-memory read's copy is how an op produced a tile, not its value: contiguous
    # operands make the result a function of the values, the same before and after a pass.
    a = np.ascontiguousarray(a, dtype=acc.dtype)
    b = np.ascontiguousarray(b, dtype=acc.dtype)
    return acc + np.matmul(a, b)


def _float_combiner(kind: str, dtype: np.dtype) -> tuple[Callable[[Any, Any], Any], Any]:
    combine: Callable[[Any, Any], Any] = {
        "sum": np.add,
        "prod": np.multiply,
        "max": maximumf,
        "min": minimumf,
    }[kind]
    # -0.0 is the identity of addition (-0.0 + x is x for every x, +0.0 + -0.0 is not -0.0).
    identity = {"sum": -0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[kind]
    if is_narrow_float(dtype):
        wide = combine
        return (lambda x, y: wide(x.astype(F32), y.astype(F32)).astype(dtype)), identity
    return combine, identity


_INT_REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
}


@semantics(tile_ops.ReduceOp)
def _reduce(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    axis = op.axis
    kind = op.kind
    dtype = x.dtype
    if is_float_dtype(dtype):
        combine, identity = _float_combiner(kind, dtype)
        return tree_reduce(x, axis, combine, dtype.type(identity))
    signed = np.asarray(_signed(x))
    if signed.shape[axis] == 0:
        identity = {"sum": 0, "prod": 1}.get(kind)
        if identity is None:
            raise state.error(op, f"takes the {kind} of an empty axis")
        signed = np.full((*signed.shape[:axis], 1, *signed.shape[axis + 1 :]), identity)
    reduced = _INT_REDUCTIONS[kind](signed, axis=axis).astype(signed.dtype)
    if dtype == np.bool_:
        return (reduced & 1).astype(np.bool_)
    return reduced


# ---------------------------------------------------------------------------------------------
# Shapes


@semantics(tile_ops.SplatOp)
def _splat(state: BlockState, op: Operation, args: list[Any]) -> Any:
    shape = _concrete_shape(state, op, op.result.type)
    return np.broadcast_to(np.asarray(args[0]), shape)  # a read-only view: values are immutable


@semantics(tile_ops.BroadcastOp)
def _broadcast(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    target = state.launch.shape(op.result.type)
    shape = tuple(x.shape[i] if d is None else d for i, d in enumerate(target))
    if any(s != 1 and s != d for s, d in zip(x.shape, shape)):
        raise state.error(op, f"cannot broadcast a tile of shape {x.shape} to {shape}")
    return np.broadcast_to(x, shape)


@semantics(tile_ops.ExpandDimsOp)
def _expand_dims(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.expand_dims(args[0], op.axis)


@semantics(tile_ops.ReshapeOp)
def _reshape(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = args[0]
    shape = _concrete_shape(state, op, op.result.type)
    if int(np.prod(shape)) != x.size:
        raise state.error(
            op, f"cannot reshape a tile of shape {x.shape} ({x.size} elements) to {shape}"
        )
    return np.reshape(x, shape)


@semantics(tile_ops.TransposeOp)
def _transpose(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return np.transpose(args[0], op.perm)


@semantics(tile_ops.ConvertLayoutOp)
def _convert_layout(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return args[0]  # where the elements live changes, not their values


# ---------------------------------------------------------------------------------------------
# Control flow


def _results(op: Operation, values: list[Any]) -> Any:
    return values[0] if len(op.results) == 1 else values


@semantics(scf.ForOp)
def _for(state: BlockState, op: Operation, args: list[Any]) -> Any:
    lower, upper, step, *carried = args
    if step <= 0:
        raise state.error(op, f"has step {step}; a loop's step must be positive")
    block = op.body.block
    make_index = np.asarray(lower).dtype.type
    for i in range(int(lower), int(upper), int(step)):
        carried = state.run_block(block, [make_index(i), *carried])
    return _results(op, carried)


@semantics(scf.IfOp)
def _if(state: BlockState, op: Operation, args: list[Any]) -> Any:
    region = op.then if args[0] else op.otherwise
    values = [] if region.empty else state.run_block(region.block, [])
    return _results(op, values)
