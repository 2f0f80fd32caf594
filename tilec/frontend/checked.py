"""The checked, typed tile program that semantic analysis (`tilec.frontend.sema`) produces
and IR generation (`tilec.frontend.irgen`) walks: dtypes and promotion, tile and tensor types,
dimensions, parameters, expressions (each with its dtype and shape), tensor accesses,
statements, kernels. docs/language.md is the reference for what they mean."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Union

from tilec.diagnostics import Location

__all__ = [
    "BINARY_OPS",
    "COMPARISONS",
    "DTYPES",
    "INT_RANGES",
    "KIND_ORDER",
    "SYMBOL_RE",
    "AccessIndex",
    "ArgReduce",
    "Assign",
    "Atomic",
    "AxisExtent",
    "Binary",
    "Broadcast",
    "Carried",
    "Cast",
    "Constant",
    "DType",
    "Dim",
    "DimSize",
    "Dimension",
    "Dot",
    "Effect",
    "ExpandDims",
    "Expr",
    "Full",
    "GridLoop",
    "If",
    "IndexKind",
    "Iota",
    "Kernel",
    "KernelOptions",
    "Load",
    "LoopIndex",
    "LoopVar",
    "Math",
    "Param",
    "ParamRef",
    "Philox",
    "Program",
    "RangeIndex",
    "RangeLoop",
    "RangeVar",
    "Reduce",
    "ScalarParam",
    "Scan",
    "Select",
    "SeqLoop",
    "Stmt",
    "Store",
    "TensorAccess",
    "TensorParam",
    "TileType",
    "TopK",
    "Transpose",
    "Unary",
    "VarRef",
    "common_dtype",
]


# ---------------------------------------------------------------------------- dtypes


class DType(Enum):
    """Element types. `str(dtype)` is the name used in the DSL and in the IR."""

    I1 = "i1"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    F8E4M3 = "f8e4m3"
    F8E5M2 = "f8e5m2"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    @property
    def kind(self) -> str:
        """'bool' (i1), 'int' or 'float'."""
        if self is DType.I1:
            return "bool"
        return "float" if self.value[0] in "fb" else "int"

    @property
    def bits(self) -> int:
        return 8 if self.is_f8 else int(self.value.lstrip("bfi"))

    @property
    def is_f8(self) -> bool:
        """f8e4m3 and f8e5m2: stored, loaded and converted (`.to`), never computed with."""
        return self in (DType.F8E4M3, DType.F8E5M2)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    def __str__(self) -> str:
        return self.value


DTYPES: dict[str, DType] = {d.value: d for d in DType}
KIND_ORDER = {"bool": 0, "int": 1, "float": 2}
INT_RANGES = {
    DType.I8: (-(2**7), 2**7 - 1),
    DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1),
    DType.I64: (-(2**63), 2**63 - 1),
}


def common_dtype(a: DType, b: DType) -> DType:
    """The dtype two strong operands are converted to: the higher kind wins (bool < int <
    float); within a kind the wider type wins; f16 with bf16 gives f32 (neither holds the
    other), f8e4m3 with f8e5m2 gives f16."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if KIND_ORDER[a.kind] > KIND_ORDER[b.kind] else b
    if {a, b} == {DType.F16, DType.BF16}:
        return DType.F32
    if {a, b} == {DType.F8E4M3, DType.F8E5M2}:
        return DType.F16  # holds both exactly
    return a if a.bits >= b.bits else b


# ---------------------------------------------------------------------------- types and names

Dim = Union[str, int]
"""One tile dimension: a tile-size symbol ('BM') or a constant extent."""


@dataclass(frozen=True, slots=True)
class TileType:
    """The type of a value held by a block: a dtype and a shape (`()` for a scalar)."""

    dtype: DType
    shape: tuple[Dim, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return not self.shape

    def with_dtype(self, dtype: DType) -> TileType:
        return TileType(dtype, self.shape)

    def with_shape(self, shape: tuple[Dim, ...]) -> TileType:
        return TileType(self.dtype, shape)

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


SYMBOL_RE = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(eq=False, slots=True)
class Dimension:
    """A named extent of the kernel's tensors (`M` in `a: f16[M, K]`), known at launch.

    `name` is upper case (IR symbols must be); `spelling` is how the source writes it.
    """

    name: str
    spelling: str
    loc: Location
    pinned: int | None = None  # a tile size the author fixed (1: iterate element by element)
    whole: bool = False  # used whole (':' or by name in a shape): its tile covers the extent

    @property
    def tile_symbol(self) -> str:
        """The symbol of this dimension's tile size in tile shapes: 'B' + name ('BM')."""
        return "B" + self.name

    def __str__(self) -> str:
        return self.spelling


@dataclass(eq=False, slots=True)
class TensorParam:
    """A tensor argument: global memory with a symbolic shape and runtime strides."""

    name: str
    dtype: DType
    dims: tuple[Dimension | int, ...]  # int: a fixed extent written in the signature
    position: int
    loc: Location

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.dims)}]"


@dataclass(eq=False, slots=True)
class ScalarParam:
    """A scalar argument (read-only)."""

    name: str
    dtype: DType
    position: int
    loc: Location


Param = Union[TensorParam, ScalarParam]


@dataclass(eq=False, slots=True)
class LoopVar:
    """The variable of a `tiles()` loop: one tile of `dim`.

    At IR level it is an `index`: the element offset where the tile starts (a multiple of the
    tile size `dim.tile_symbol`). An `element` variable iterates the dimension one element at a
    time (its tile size is pinned to 1): indexing a tensor with it drops the dimension.
    """

    name: str
    dim: Dimension
    element: bool
    grid_axis: int | None  # the launch-grid axis, or None in a sequential loop
    loc: Location

    @property
    def size_symbol(self) -> str:
        return self.dim.tile_symbol


@dataclass(frozen=True, slots=True)
class AxisExtent:
    """Which lanes of a tile axis of size `dim.tile_symbol` hold real data.

    Lane i is real when `start + i < extent(dim)`, where `start` is the tile offset of `var`
    (0 when `var` is None: the dimension is used whole). Lanes past the extent are padding:
    reductions and dot contractions must leave them out.
    """

    dim: Dimension
    var: LoopVar | None


@dataclass(eq=False, slots=True)
class RangeVar:
    """The variable of a `range()` loop: a block-uniform integer scalar of `dtype` (i32, or
    i64 when a bound is i64). At IR level it is an `index`."""

    name: str
    dtype: DType
    loc: Location


# ---------------------------------------------------------------------------- checked expressions
# Every expression has `type` (dtype + shape) and `loc`. Implicit conversions are explicit nodes.


@dataclass(kw_only=True, eq=False, slots=True)
class Expr:
    type: TileType
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class Constant(Expr):
    """A compile-time scalar. `weak`: an untyped Python literal that takes the dtype of the
    strong operand it meets (and so never appears as the operand of a `Binary`)."""

    value: bool | int | float
    weak: bool = False


@dataclass(kw_only=True, eq=False, slots=True)
class VarRef(Expr):
    """The current value of a local name (loop-carried values included)."""

    name: str


@dataclass(kw_only=True, eq=False, slots=True)
class ParamRef(Expr):
    """A scalar argument's value."""

    param: ScalarParam


@dataclass(kw_only=True, eq=False, slots=True)
class DimSize(Expr):
    """The runtime extent of a dimension, as an i32 scalar."""

    dim: Dimension


@dataclass(kw_only=True, eq=False, slots=True)
class LoopIndex(Expr):
    """The element offset of a loop variable's tile (the element index, for an element
    variable), as an i32 scalar; with `end`, the offset just past the tile (start + tile
    size, not clipped to the extent: `tile_end(t)`)."""

    var: LoopVar
    end: bool = False


@dataclass(kw_only=True, eq=False, slots=True)
class RangeIndex(Expr):
    """The current value of a `range()` loop's variable."""

    var: RangeVar


@dataclass(kw_only=True, eq=False, slots=True)
class Load(Expr):
    """Read one tile of a tensor (masked where `access` says so; masked lanes are padding)."""

    access: TensorAccess


@dataclass(kw_only=True, eq=False, slots=True)
class Iota(Expr):
    """0, 1, ..., n-1 along the single axis of `type` (i32)."""


@dataclass(kw_only=True, eq=False, slots=True)
class Full(Expr):
    """A tile of `type` with every element equal to the scalar `value` (of `type.dtype`)."""

    value: Expr


BINARY_OPS = (
    *("add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum"),
    *("and", "or", "xor", "shl", "shr"),
    *("lt", "le", "gt", "ge", "eq", "ne"),
)
COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})


@dataclass(kw_only=True, eq=False, slots=True)
class Binary(Expr):
    """Element-wise `lhs op rhs`; both operands have the same type. Comparisons give i1.

    `div` and `pow` are float-only (integer operands were converted); `floordiv`/`mod` follow
    Python (floor division, result with the divisor's sign); `and/or/xor` are bitwise (logical
    on i1); `shr` is arithmetic.
    """

    op: str  # one of BINARY_OPS
    lhs: Expr
    rhs: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class Unary(Expr):
    """`neg` (-x) or `not` (~x: bitwise not, logical on i1)."""

    op: str
    operand: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class Math(Expr):
    """An element-wise math function of one operand of the result's type.

    All but `abs` take and give floats. `gelu` is the exact form x/2·(1 + erf(x/√2));
    `sigmoid` is 1/(1 + exp(-x)); `rsqrt` is 1/sqrt(x).
    """

    fn: str  # the builtin's name (tilec.frontend.builtins: a declaration with Math nodes)
    operand: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class Philox(Expr):
    """Per element of `offsets` (i32 or i64) of offset o, word `(o mod 4) xor xor` of
    Philox-4x32-10 (`tile.philox`, tilec/dialects/random.py) with key `seed` (an i32 or i64
    scalar) and counter `o div 4`; `type` is i32 of the offsets' shape. `rand`, `randn` and
    `randint` are built from it (tilec/frontend/sema_random.py)."""

    seed: Expr
    offsets: Expr
    xor: int


@dataclass(kw_only=True, eq=False, slots=True)
class Select(Expr):
    """`where(cond, on_true, on_false)`; all three already have the result's shape."""

    cond: Expr
    on_true: Expr
    on_false: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class Reduce(Expr):
    """`kind` ∈ sum, max, min, mean over `axes` of `operand`.

    `extents[i]` says which lanes of `axes[i]` are real (None: all of them); padding lanes must
    not take part (use the identity of the reduction; `mean` divides by the count of real
    lanes). `sum`/`mean` of f16/bf16 accumulate in f32 and round the result.
    """

    kind: str
    operand: Expr
    axes: tuple[int, ...]
    keepdims: bool
    extents: tuple[AxisExtent | None, ...]


@dataclass(kw_only=True, eq=False, slots=True)
class Scan(Expr):
    """`cumsum`/`cumprod`/`cummax`/`cummin`: the inclusive scan (`kind` ∈ sum, prod, max, min)
    of `operand` along `axis`. Padding lanes trail the real ones, so they never reach a real
    lane's result. `operand` already has the result's dtype; f16/bf16 sums and products
    compute in f32 and round once per element."""

    kind: str
    operand: Expr
    axis: int


@dataclass(kw_only=True, eq=False, slots=True)
class ArgReduce(Expr):
    """`argmax`/`argmin` (`kind` max or min) of `operand` along `axis`: i32 positions in the
    tile, first on ties, the first NaN wins. `extent` gives the real lanes of `axis`; padding
    lanes must not win."""

    kind: str
    operand: Expr
    axis: int
    keepdims: bool
    extent: AxisExtent | None


@dataclass(kw_only=True, eq=False, slots=True)
class TopK(Expr):
    """`topk` (`indices` False: the values) or `topk_indices` (True: their i32 positions) of
    `operand` along `axis`: the `k` largest, descending, ties by lower position, NaN first.
    `extent` gives the real lanes of `axis`; padding lanes rank below every real one."""

    operand: Expr
    k: int
    axis: int
    indices: bool
    extent: AxisExtent | None


@dataclass(kw_only=True, eq=False, slots=True)
class Dot(Expr):
    """`lhs @ rhs` on 2-D tiles of the same dtype; accumulates (and returns) f32 for f16,
    bf16 and f32 inputs, f64 for f64, i32 for i8. `contraction` gives the real lanes of the
    contracted axis (None: all); padding lanes must contribute nothing."""

    lhs: Expr
    rhs: Expr
    contraction: AxisExtent | None


@dataclass(kw_only=True, eq=False, slots=True)
class Cast(Expr):
    """Convert `operand` to `type.dtype` (same shape). Float → int truncates toward zero."""

    operand: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class Broadcast(Expr):
    """numpy's `broadcast_to(operand, type.shape)`: leading axes may be added; axes of size 1
    are repeated. A scalar operand becomes a splat."""

    operand: Expr


@dataclass(kw_only=True, eq=False, slots=True)
class ExpandDims(Expr):
    """Insert axes of size 1 at positions `axes` of the result (`x[:, None]`)."""

    operand: Expr
    axes: tuple[int, ...]


@dataclass(kw_only=True, eq=False, slots=True)
class Transpose(Expr):
    """Permute the axes: result axis i is operand axis `permutation[i]`."""

    operand: Expr
    permutation: tuple[int, ...]


# ---------------------------------------------------------------------------- tensor accesses


class IndexKind(Enum):
    TILE = "tile"  # a loop variable's tile of this dimension
    WHOLE = "whole"  # ':': the whole dimension
    SCALAR = "scalar"  # one integer index: the dimension is dropped from the tile
    GATHER = "gather"  # an integer tile of indices (tilec.frontend.sema_gather)


@dataclass(kw_only=True, eq=False, slots=True)
class AccessIndex:
    """How one dimension of a tensor is indexed."""

    kind: IndexKind
    dim: Dimension | int  # the tensor's dimension (int: a fixed extent)
    var: LoopVar | None = None  # TILE: the loop variable
    value: Expr | None = None  # SCALAR: an integer scalar (LoopIndex for element variables);
    # GATHER: the integer index tile
    size: Dim | None = None  # this dimension's size in the tile; None for SCALAR
    masked: bool = False  # lanes may fall outside the tensor (offset + lane >= extent)
    # GATHER: which lanes of the gathered axis are real (those of its index tile; None: all).
    # The others are padding, masked off: never read, written or checked.
    extent: AxisExtent | None = None
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class TensorAccess:
    """A region of a tensor, one index per dimension; `type` is the tile read or written."""

    tensor: TensorParam
    indices: tuple[AccessIndex, ...]
    type: TileType
    loc: Location

    @property
    def masked(self) -> bool:
        return any(index.masked for index in self.indices)


# ---------------------------------------------------------------------------- statements


@dataclass(kw_only=True, eq=False, slots=True)
class Assign:
    """Bind `name` to `value` (a new binding, or the next value of a loop-carried name)."""

    name: str
    value: Expr
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class Store:
    """Write `value` (already of `access.type`) to a tensor region; masked like the access."""

    access: TensorAccess
    value: Expr
    loc: Location


@dataclass(frozen=True, slots=True)
class Carried:
    """A name defined before a sequential loop and reassigned in it (an scf.for iter_arg)."""

    name: str
    type: TileType


@dataclass(kw_only=True, eq=False, slots=True)
class SeqLoop:
    """A `tiles()` loop inside the grid: runs sequentially within the block, one tile of
    `var.dim` per iteration (offset 0, BK, 2·BK, ... below the extent).

    `carried` lists the names whose values flow from one iteration to the next and out of
    the loop; every other name assigned in `body` is local to the body.
    """

    var: LoopVar
    body: tuple[Stmt, ...]
    carried: tuple[Carried, ...]
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class RangeLoop:
    """`for var in range(start, stop, step)` inside the grid: runs sequentially within the
    block, as Python's range does (no iteration when the range is empty). `start` and `stop`
    are block-uniform scalars of `var.dtype`; `step` is a nonzero constant. `carried` as for
    `SeqLoop`."""

    var: RangeVar
    start: Expr
    stop: Expr
    step: int
    body: tuple[Stmt, ...]
    carried: tuple[Carried, ...]
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class If:
    """`if cond: then else: otherwise` on a block-uniform i1 scalar (an `elif` is an `If`
    alone in `otherwise`). `carried` lists the names whose values flow out of the branches
    (an scf.if's results): names assigned before the `if` and reassigned in a branch, and
    names that both branches assign with one type; a branch that does not assign one gives
    the value from before."""

    cond: Expr
    then: tuple[Stmt, ...]
    otherwise: tuple[Stmt, ...]
    carried: tuple[Carried, ...]
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class GridLoop:
    """The kernel's top-level `tiles()` loop: one block per combination of tiles; `vars[i]`
    is grid axis i."""

    vars: tuple[LoopVar, ...]
    body: tuple[Stmt, ...]
    loc: Location


@dataclass(kw_only=True, eq=False, slots=True)
class Atomic(Expr):
    """`atomic_add/max/min(region, value)` or `atomic_cas(region, compare, value)`: one atomic
    read-modify-write per element of the region inside the tensor (and where `mask` holds);
    the value is the elements as they were before (its type is the region's). `value` and
    `compare` are already of the region's type, `mask` (i1) of its shape."""

    kind: str  # add, max, min, cas
    access: TensorAccess
    value: Expr
    compare: Expr | None = None
    mask: Expr | None = None
    sem: str = "relaxed"


@dataclass(kw_only=True, eq=False, slots=True)
class Effect:
    """An expression statement kept for its effect: an atomic whose old values are unused."""

    value: Atomic
    loc: Location


Stmt = Union[Assign, Store, SeqLoop, RangeLoop, If, Effect]


@dataclass(slots=True)
class KernelOptions:
    """Decisions the author pinned. `tile` maps a dimension name ('M') to its tile size."""

    tile: dict[str, int] = field(default_factory=dict)
    warps: int | None = None
    stages: int | None = None
    split: int | None = None  # blocks along the split axis (split-reduction); 1: no split


@dataclass(eq=False, slots=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    dims: tuple[Dimension, ...]  # in order of first appearance in the signature
    grid: GridLoop
    options: KernelOptions
    doc: str | None
    loc: Location

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def dim(self, name: str) -> Dimension:
        for d in self.dims:
            if d.name == name or d.spelling == name:
                return d
        raise KeyError(name)


@dataclass(eq=False, slots=True)
class Program:
    kernels: tuple[Kernel, ...]
    filename: str

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)
