"""Atomic read-modify-writes of global memory (`tile.*` names): `atomic_add`, `atomic_max`,
`atomic_min` and `atomic_cas` of the language.

    %old = tile.atomic_rmw add %Y[%i, %j], %v : !tile.tensor<MxNxf32>, tile<BMxBNxf32>
    %old = tile.atomic_rmw max %C[%i], %v, mask %ok {sem = "acq_rel"} : !tile.tensor<Nxi32>, tile<BNxi32>
    %old = tile.atomic_cas %C[%i], %expected, %new : !tile.tensor<Nxi32>, tile<BNxi32>
    %old = tile.atomic_scatter add %C[%c0], %bins axis 0, %ones : !tile.tensor<Nxi32>, tile<BNxi32>, tile<BNxi32>

Each element of the tile at `offsets` that lies inside the view's runtime extents (and where
the optional `mask` holds) is updated by one indivisible read-modify-write: `add` adds the
value, `max`/`min` keep the larger/smaller (signed for integers; floats in IEEE 754
totalOrder: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN), `tile.atomic_cas` writes
`value` where the element equals `compare` (bitwise). The result is the element as it was
just before the update (the tile of the value's type; `padding` 0 elsewhere). When nothing
uses the result the lowering issues `red`, not `atom`.

`sem` is the PTX memory order of each element's operation, at GPU scope: `relaxed` (the
default), `acquire`, `release` or `acq_rel`. Elements of one op are independent operations:
the op orders nothing among them.

`tile.atomic_scatter` is `tile.atomic_rmw` on a gathered region (`tilec.dialects.gather`):
along `axis` the element of lane `i` is `offsets[axis] + indices[i]` (a 1-D index tile, one
index per row) or `offsets[axis] + indices[...]` (one per element), the histogram's
`counts[values[tn]]` and the embedding backward's `grad_table[ids[tm], td]`. Lanes that name
the same element are separate operations, so all of them count. An index outside the extent
is out of range as for `tile.scatter`: the interpreter reports it, compiled code skips the
lane. It is a separate op for the reason gathers are: nothing that plans rectangles sees it.

These ops have effects: no pass merges, removes or moves them (none has the `Pure` trait).
"""

from __future__ import annotations

from tilec.ir.attributes import IntegerAttr, StringAttr
from tilec.ir.constraints import BOOL_LIKE, INDEX, TENSOR, TILE
from tilec.ir.core import SEGMENTS_ATTR, Attr, Operand, Operation, Result, Value, register_op
from tilec.ir.types import FloatType, IntegerType, TileType, Type

__all__ = [
    "ATOMIC_OPS",
    "MEMORY_ORDERS",
    "RMW_ELEMENTS",
    "RMW_KINDS",
    "AtomicCasOp",
    "AtomicRMWOp",
    "AtomicScatterOp",
    "supported_elements",
]

RMW_KINDS = ("add", "max", "min")
MEMORY_ORDERS = ("relaxed", "acquire", "release", "acq_rel")

# What PTX's atom/red take (ptxas 12.9, sm_80 and sm_90a): add of 32- and 64-bit integers and
# floats, and of f16 (.noftz); bf16 add needs sm_90 (the lowering says so on sm_80). There is
# no atom.max/min of f32/f64: the lowering maps them to integer max/min of the bits, which is
# why their order is totalOrder. 16-bit max/min (sm_90 only, f16/bf16) are left out.
RMW_ELEMENTS: dict[str, tuple[Type, ...]] = {
    "add": (
        IntegerType(32),
        IntegerType(64),
        FloatType("f16"),
        FloatType("bf16"),
        FloatType("f32"),
        FloatType("f64"),
    ),
    "max": (IntegerType(32), IntegerType(64), FloatType("f32"), FloatType("f64")),
    "min": (IntegerType(32), IntegerType(64), FloatType("f32"), FloatType("f64")),
    "cas": (IntegerType(32), IntegerType(64)),
}


def supported_elements(kind: str) -> tuple[Type, ...]:
    """The element types an atomic of `kind` ('add', 'max', 'min', 'cas') takes."""
    return RMW_ELEMENTS[kind]


def _check(op: Operation, values: list[tuple[str, Value]]) -> None:
    view, value, mask = op.view.type, op.value.type, op.mask
    if len(op.offsets) != view.rank:
        raise op.error(
            f"needs {view.rank} offset(s), one per dimension of {view}, but has {len(op.offsets)}"
        )
    kind = op.kind if isinstance(op, (AtomicRMWOp, AtomicScatterOp)) else "cas"
    for name, v in values:
        t = v.type
        if not isinstance(t, TileType) or t.rank != view.rank:
            raise op.error(f"{name} {t} must be a tile of the rank of the view {view}")
        if t.element != view.element:
            raise op.error(
                f"{name} element type {t.element} differs from the view's {view.element}"
            )
        if t.shape != value.shape:
            raise op.error(f"{name} {t} must have the shape of the value {value}")
    if view.element not in RMW_ELEMENTS[kind]:
        names = ", ".join(str(t) for t in RMW_ELEMENTS[kind])
        raise op.error(f"atomic {kind} of {view.element} is not supported (supported: {names})")
    if mask is not None:
        t = mask.type
        if not (isinstance(t, TileType) and t.element == IntegerType(1) and t.shape == value.shape):
            raise op.error(f"mask must be a tile of i1 shaped like the value {value}, got {t}")
    if op.result.type != value:
        raise op.error(f"result {op.result.type} must have the value's type {value}")


_VECTOR_DOC = (
    "elements combined by one vector `red` along the last dimension (vectorize: float adds "
    "whose old values nobody reads); default 1"
)


@register_op
class AtomicRMWOp(Operation):
    """Atomically combine `value` into the tile at `offsets` of `view` (add, max or min); the
    result holds the elements as they were before (0 outside the extents and the mask)."""

    name = "tile.atomic_rmw"
    summary = "Atomic add/max/min of a tile into a tensor region; returns the old values."
    kind = Attr(StringAttr, choices=RMW_KINDS)
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    value = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    sem = Attr(StringAttr, optional=True, choices=MEMORY_ORDERS, doc="memory order; relaxed")
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    result = Result(TILE)
    assembly_format = (
        "$kind $view `[` $offsets `]` `,` $value (`,` `mask` $mask)? attr-dict "
        "`:` type($view) `,` type($value)"
    )

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [_value_type(operands, attributes)]

    def verify_(self) -> None:
        _check(self, [("value", self.value)])


@register_op
class AtomicCasOp(Operation):
    """Atomically write `value` where the tile at `offsets` equals `compare`; the result holds
    the elements as they were before (0 outside the extents and the mask)."""

    name = "tile.atomic_cas"
    summary = "Atomic compare-and-swap of a tile in a tensor region; returns the old values."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    compare = Operand(TILE)
    value = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    sem = Attr(StringAttr, optional=True, choices=MEMORY_ORDERS, doc="memory order; relaxed")
    result = Result(TILE)
    assembly_format = (
        "$view `[` $offsets `]` `,` $compare `,` $value (`,` `mask` $mask)? attr-dict "
        "`:` type($view) `,` type($value)"
    )

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [_value_type(operands, attributes)]

    def verify_(self) -> None:
        _check(self, [("compare", self.compare), ("value", self.value)])


@register_op
class AtomicScatterOp(Operation):
    """Atomically combine `value` into the tile of `view` whose positions along `axis` are the
    elements `offsets[axis] + indices` (add, max or min); the result holds the elements as
    they were before each lane's update (0 outside the extents, the range and the mask)."""

    name = "tile.atomic_scatter"
    summary = "Atomic add/max/min of a tile into rows chosen by an integer tile; old values."
    kind = Attr(StringAttr, choices=RMW_KINDS)
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    indices = Operand(TILE)
    value = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    axis = Attr(IntegerAttr)
    sem = Attr(StringAttr, optional=True, choices=MEMORY_ORDERS, doc="memory order; relaxed")
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    result = Result(TILE)
    assembly_format = (
        "$kind $view `[` $offsets `]` `,` $indices `axis` $axis `,` $value (`,` `mask` $mask)? "
        "attr-dict `:` type($view) `,` type($indices) `,` type($value)"
    )

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [_value_type(operands, attributes)]

    def verify_(self) -> None:
        from tilec.dialects.gather import check_index_tile

        check_index_tile(self, self.view, self.offsets, self.indices, self.axis, self.value.type)
        _check(self, [("value", self.value)])


def _value_type(operands: list, attributes: dict) -> Type:
    """The type of the `value` operand: the result's. It follows the view and the offsets
    (and, for a compare-and-swap, the compare operand)."""
    segments = [s.value for s in attributes[SEGMENTS_ATTR].elements]
    return operands[sum(segments[:-2]) + segments[-2] - 1].type


ATOMIC_OPS = (AtomicRMWOp, AtomicCasOp, AtomicScatterOp)


def memory_order(op: Operation) -> str:
    """The op's memory order (`relaxed` when not given)."""
    sem = op.attributes.get("sem")
    return "relaxed" if sem is None else sem.value
