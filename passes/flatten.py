"""The `flatten` pass: an element-wise kernel over dense tensors runs as one dimension.

A kernel such as

    def tanh_gelu(x: bf16[M, N], y: bf16[M, N]):
        for tm, tn in tiles(M, N):
            y[tm, tn] = gelu(x[tm, tn])

computes each element of `y` from the element of `x` at the same position, so where its
tensors are *dense* -- row-major with no gaps, element (i, j) at `i * N + j` -- it computes the
same as a kernel over one dimension of M * N elements. The 2-D form pays for its rows: a
`BM x BN` tile moves 16 bytes an access only where every row starts on a 16-byte boundary,
which a row of 7001 bf16 never does (two bytes an access, eight times the instructions), and a
tile that straddles the last columns leaves lanes idle. The 1-D form has one boundary, at the
end: its tiles start at multiples of their size, so every run of 16 bytes is aligned whatever N
is, and `tiling` sizes them as it sizes a vector add. `torch.compile` (Inductor) views dense
tensors the same way.

**Decides**: whether a kernel is rewritten. It is when (1) its grid tiles two or more
dimensions by symbols (`for tm, tn in tiles(M, N)`), none of whose tile sizes is pinned; (2)
its body is one block of `arith` and `math` ops, `tile.full`, `tile.splat`, `tile.cast`,
`tile.select` and unmasked `tile.load`/`tile.store` -- nothing that moves an element to
another position (reductions, broadcasts, dots, scans, gathers, atomics, random numbers) and
nothing that reads a position (`offsets`, extents as values); (3) every access is at the
grid's tile starts, in order, and every tile is the grid's tile; (4) every tensor argument
has exactly the grid's dimensions, in order, and the specialization says it is dense
(`tilec.dense`, which `@tilec.jit` records for contiguous tensors whose elements number at
most 2^31 - 1, and `tilec compile --assume dense` for every tensor). Otherwise the kernel is
left as it is, with a remark saying why for a kernel of one block over a grid of two or more
axes without reductions or dots (the kernels that might have been flattened).

**Rewrite**: each tensor argument `[D1, .., Dk]` becomes `[F]`, F a new dimension named
`D1_.._Dk` (the kernel attribute `tilec.flattened = [F, D1, .., Dk]` records what it stands
for), the grid becomes `[[F, BF]]`, every access takes the offset `program_id(0) * BF`, and
every tile is `[BF]`. The facts follow the views: each pointer stays aligned, `x.stride.0` is 1,
and `x.extent.0` is a multiple of the product of what the extents were multiples of.
Exact (the same operations on the same elements).

**Assumes**: it runs before `tiling`, on the frontend's IR. A flattened kernel is launched on
its source's tensors by the runtime and the interpreter, each viewed as one dimension of its
elements (`tilec.runtime.launcher`, `tilec.interp.launch`); a tensor that is not dense is
refused there (it never reaches a kernel compiled for dense tensors: the jit's key records it).

**Pins**: a kernel that pins a tile size of its grid (`@kernel(tile={"M": 4, "N": 256})`) keeps
its 2-D tiles; `--disable flatten` and `@tilec.jit(disable=["flatten"])` keep every kernel's.
Option `enable`; the tuner searches it (`flatten.enable`). Remarks: per kernel flattened,
what and why; per kernel that might have been, why not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.attributes import ArrayAttr, StringAttr
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import SYMBOL_RE, TensorType, TileType, index
from tilec.lowering.abi import (
    DIVISOR,
    Specialization,
    argument_name,
    kernel_specialization,
    set_kernel_specialization,
)
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["FLATTENED_ATTRIBUTE", "Flatten", "Flattening", "flattening"]

# The kernel attribute of a flattened kernel: [F, D1, .., Dk], the new dimension and the ones
# whose product it is (read by the ABI, the launcher and the interpreter).
FLATTENED_ATTRIBUTE = "tilec.flattened"

# The tile ops a flattened kernel may hold besides `arith` and `math` (each computes an element
# from elements at its own position, or none).
_ELEMENTWISE = (T.FullOp, T.SplatOp, T.CastOp, T.SelectOp, T.LoadOp, T.StoreOp)


@dataclass(frozen=True)
class Flattening:
    """What `flattening` found: the grid's dimensions and tile symbols, the tensors (argument
    names), and the new dimension's name."""

    dims: tuple[str, ...]
    symbols: tuple[str, ...]
    tensors: tuple[str, ...]
    flat_dim: str

    @property
    def flat_symbol(self) -> str:
        return "B" + self.flat_dim


def flattening(kernel: FuncOp) -> Flattening | str:
    """Whether `kernel`'s ops and types allow it to run as one dimension (conditions (1)-(3)
    of the module docstring, and (4) but for the facts): the plan, or why not. What the
    jit asks to know whether a specialization should record which tensors are dense."""
    grid = kernel.attributes.get("tilec.grid")
    axes = [(str(d), str(s)) for d, s in grid.value] if grid is not None else []
    if len(axes) < 2:
        return "the grid tiles fewer than two dimensions"
    dims = tuple(d for d, _ in axes)
    symbols = tuple(s for _, s in axes)
    if len(set(dims)) != len(dims):
        return "the grid tiles one dimension twice"
    pinned = kernel.attributes.get("tilec.pinned_tiles")
    held = sorted(str(s) for s, _ in (pinned.value if pinned is not None else ()))
    if set(held) & set(symbols):
        return f"its tile sizes are pinned ({', '.join(held)})"
    if "tilec.whole_dims" in kernel.attributes:
        return "it takes a dimension whole"
    block = kernel.body.block
    starts = _tile_starts(block, symbols)
    if isinstance(starts, str):
        return starts
    tile_shape = symbols
    for op in block.ops:
        if op.regions:
            return f"{op.name} holds a region"
        family = op.name.split(".")[0]
        if not (
            isinstance(op, (*_ELEMENTWISE, ReturnOp, T.SymbolOp, T.ProgramIdOp))
            or family in ("arith", "math")
        ):
            return f"{op.name} does not compute element by element"
        for v in [*op.operands, *op.results]:
            if isinstance(v.type, TileType) and tuple(v.type.shape) != tile_shape:
                return (
                    f"{op.name} has a tile [{', '.join(map(str, v.type.shape))}], not the "
                    f"grid's [{', '.join(tile_shape)}]"
                )
        if isinstance(op, (T.LoadOp, T.StoreOp)):
            if op.mask is not None:
                return "an access is masked"
            if not (isinstance(op.view, BlockArgument) and op.view.block is block):
                return "an access's view is not a kernel argument"
            if list(op.offsets) != starts:
                return f"an access of {_name(op.view)} is not at the grid's tile starts"
        elif isinstance(op, (T.SymbolOp, T.ProgramIdOp)):
            continue
        elif any(v in starts for v in op.operands) and not (
            isinstance(op, arith.MulIOp) and op.result in starts
        ):
            return f"{op.name} uses a tile's position as a value"
    tensors = []
    for i, arg in enumerate(kernel.arguments):
        if isinstance(arg.type, TensorType):
            if tuple(arg.type.shape) != dims:
                return f"{_name(arg)} is not shaped [{', '.join(dims)}]"
            tensors.append(argument_name(kernel, i))
    if not tensors:
        return "it has no tensor argument"
    used = {
        str(d) for a in kernel.arguments if isinstance(a.type, TensorType) for d in a.type.shape
    }
    used |= {str(s) for op in block.ops if isinstance(op, T.SymbolOp) for s in [op.symbol]}
    flat = "_".join(dims)
    while flat in used or "B" + flat in used or not SYMBOL_RE.fullmatch(flat):
        flat += "_F"
    return Flattening(dims, symbols, tuple(tensors), flat)


def _tile_starts(block, symbols: tuple[str, ...]) -> list[Value] | str:
    """The grid's tile starts, `program_id(a) * B_a` for each axis a, as the frontend makes
    them (each value the only one of its axis), or why not."""
    pids: dict[int, Value] = {}
    syms: dict[str, Value] = {}
    for op in block.ops:
        if isinstance(op, T.ProgramIdOp):
            pids.setdefault(op.attributes["axis"].value, op.result)
        elif isinstance(op, T.SymbolOp):
            syms.setdefault(op.symbol, op.result)
    starts = []
    for axis, symbol in enumerate(symbols):
        pid, size = pids.get(axis), syms.get(symbol)
        found = [
            op.result
            for op in block.ops
            if isinstance(op, arith.MulIOp) and {op.lhs, op.rhs} == {pid, size}
        ]
        if pid is None or size is None or len(found) != 1:
            return f"grid axis {axis} is not tiled by {symbol}"
        if any(not isinstance(u, arith.MulIOp) or u.result is not found[0] for u in pid.uses):
            return f"the block's index along grid axis {axis} is used as a value"
        starts.append(found[0])
    return starts


@register_pass
class Flatten(Pass):
    """Runs an element-wise kernel over dense tensors as one dimension of their elements.

    See the module docstring for when it applies, the rewrite, and why it is exact.
    """

    name = "flatten"
    summary = "Run an element-wise kernel over dense tensors as one dimension"
    exact = True

    @dataclass
    class Options:
        enable: bool = option(True, "flatten element-wise kernels over dense tensors")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            if FLATTENED_ATTRIBUTE in kernel.attributes:
                continue
            plan = flattening(kernel)
            if isinstance(plan, str):
                if _elementwise_grid(kernel):
                    ctx.remark(kernel, f"not flattened: {plan}")
                continue
            spec = kernel_specialization(kernel)
            loose = [t for t in plan.tensors if t not in spec.dense]
            if loose:
                ctx.remark(
                    kernel,
                    f"not flattened: {', '.join(loose)} not known to be dense (row-major, no "
                    "gaps); @tilec.jit records it for contiguous tensors",
                )
                continue
            _rewrite(kernel, plan, spec, ctx)


def _elementwise_grid(kernel: FuncOp) -> bool:
    """Whether a kernel is one block over a grid of two or more axes (a remark is worth it)."""
    grid = kernel.attributes.get("tilec.grid")
    return (
        grid is not None
        and len(grid.value) >= 2
        and not any(op.regions for op in kernel.body.block.ops)
        and not any(isinstance(op, (T.ReduceOp, T.DotOp)) for op in kernel.body.block.ops)
    )


def _rewrite(kernel: FuncOp, plan: Flattening, spec: Specialization, ctx: PassContext) -> None:
    block = kernel.body.block
    starts = _tile_starts(block, plan.symbols)
    assert not isinstance(starts, str)
    first = next(op for op in block.ops if isinstance(op, (T.SymbolOp, T.ProgramIdOp)))
    b = Builder.before_op(first)
    size = b.create(T.SymbolOp, symbol=StringAttr(plan.flat_symbol)).result
    size.name_hint = plan.flat_symbol
    pid = b.create(T.ProgramIdOp, axis=0).result
    start = b.create(arith.MulIOp, lhs=pid, rhs=size, result_types=[index]).result
    start.name_hint = "tf"
    tile = (plan.flat_symbol,)
    for op in list(block.ops):
        for r in op.results:
            if isinstance(r.type, TileType):
                r.type = TileType(tile, r.type.element, None)
        if isinstance(op, (T.LoadOp, T.StoreOp)):
            at = Builder.before_op(op)
            padding = op.attributes.get("padding")
            if isinstance(op, T.LoadOp):
                load = at.create(
                    T.LoadOp,
                    view=op.view,
                    offsets=[start],
                    padding=padding,
                    result_types=[op.result.type],
                )
                load.result.name_hint = op.result.name_hint
                op.result.replace_all_uses_with(load.result)
            else:
                at.create(T.StoreOp, view=op.view, offsets=[start], value=op.value)
            op.erase()
    for arg in kernel.arguments:
        if isinstance(arg.type, TensorType):
            arg.type = TensorType((plan.flat_dim,), arg.type.element)
    # The 2-D grid's starts, indices and symbols: nothing uses them now.
    for v in starts:
        v.op.erase()
    for op in list(block.ops):
        old = (isinstance(op, T.ProgramIdOp) and op.result is not pid) or (
            isinstance(op, T.SymbolOp) and op.symbol in plan.symbols
        )
        if old and not op.result.has_uses:
            op.erase()
    flat = ArrayAttr((StringAttr(plan.flat_dim), StringAttr(plan.flat_symbol)))
    kernel.attributes["tilec.grid"] = ArrayAttr((flat,))
    kernel.attributes[FLATTENED_ATTRIBUTE] = ArrayAttr(
        tuple(StringAttr(d) for d in (plan.flat_dim, *plan.dims))
    )
    set_kernel_specialization(kernel, flat_specialization(spec, plan))
    rank = len(plan.dims)
    rows = [
        t
        for t in plan.tensors
        if spec.multiple(f"{t}.extent.{rank - 1}") * _element_bytes(kernel, t) % 16
    ]
    why = (
        f"rows of {plan.dims[-1]} elements of {', '.join(rows)} are not known to be whole "
        "16-byte runs, so 2-D tiles would move them a few bytes an access"
        if rows
        else "one boundary instead of one a row: no partial rows, no index arithmetic per row"
    )
    ctx.remark(
        kernel,
        f"flattened: element-wise over dense [{', '.join(plan.dims)}] tensors "
        f"({', '.join(plan.tensors)}), run as one dimension {plan.flat_dim} of "
        f"{' * '.join(plan.dims)} elements tiled by {plan.flat_symbol} ({why})",
    )


def flat_specialization(spec: Specialization, plan: Flattening) -> Specialization:
    """The facts of the flattened views: pointers as they were, unit strides, each extent a
    multiple of the product of what its dimensions were multiples of (capped at `DIVISOR`)."""
    mine = set(plan.tensors)

    def keep(name: str) -> bool:
        return name.split(".")[0] not in mine or "." not in name

    rank = len(plan.dims)
    unit = {n for n in spec.unit if keep(n)} | {f"{t}.stride.0" for t in plan.tensors}
    divisible = {n for n in spec.divisible if keep(n)}
    multiples = {(n, m) for n, m in spec.multiples if keep(n)}
    for t in plan.tensors:
        m = math.prod(spec.multiple(f"{t}.extent.{a}") for a in range(rank))
        if m >= DIVISOR:
            divisible.add(f"{t}.extent.0")
        elif m > 1:
            multiples.add((f"{t}.extent.0", m))
    return Specialization(
        spec.aligned,
        frozenset(unit),
        frozenset(divisible),
        frozenset(multiples),
        spec.positive,
        spec.dense - mine,
    )


def _element_bytes(kernel: FuncOp, tensor: str) -> int:
    from tilec.lowering.layouts import element_bytes

    for i, arg in enumerate(kernel.arguments):
        if argument_name(kernel, i) == tensor:
            return element_bytes(arg.type.element)
    return 1


def _name(view: Value) -> str:
    if isinstance(view, OpResult):
        return "a view"
    return getattr(view, "name_hint", None) or "a view"
