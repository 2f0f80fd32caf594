"""The `vectorize` pass: the widest legal global access for every load, store and async copy.

A thread's run of `v` consecutive elements along the last dimension can move as one access of
`v * element bytes` (at most 16) when, for the tensor view `x` of rank r:

* contiguity: the last stride is 1 (`x.stride.{r-1}` in the kernel's `tilec.unit`);
* alignment: the address of every run's first element is a multiple of `v * element bytes`:
  `x` is 16-byte aligned (`tilec.aligned`), every other stride is a multiple of v
  (`tilec.divisible`: of 16; `tilec.multiples`: of 2, 4 or 8), and the offset of the last dimension is a known multiple of v
  (index arithmetic: constants, `program_id * BN`, loop variables that start and step by
  multiples, `tile.dim` of divisible extents, sums and products of those);
* a thread holds v consecutive elements: v divides `size_per_thread` of the last dimension of
  the value's layout (of a `#slice` layout -- a bias row broadcast over a tile's rows -- the
  runs its thread map keeps in consecutive slots) (a `tile.async_copy` has no register layout: v divides the slot's last
  dimension and `copy_layout(slot shape, num_warps, v)` is a valid layout, and the access is 4,
  8 or 16 bytes, as `cp.async` needs);
* one predicate for the run: the extent of the last dimension is a multiple of v (a
  `tile.async_copy` needs no such thing: `cp.async` zero-fills the tail past the extent through
  its source size) and the mask, if any, is known equal within runs of v (splats, broadcasts
  along the last dimension, `iota < n` with n a multiple of v, and elementwise combinations).

It also proves, per dimension of every `tile.load` and `tile.store`, that the tile lies inside
the view's extent, and records it as `in_bounds = [true, false, ...]` (a promise the lowering
keeps no bounds check for, and the interpreter checks):

* the extent is static E and the offset a constant c with 0 <= c and c + tile <= E; or
* the offset is `program_id(a)` (times the tile) on grid axis a, which covers the dim in tiles
  of exactly this tile's size, and the extent is a known multiple of the tile (`tilec.divisible`
  promises 16; a tile of 1 divides everything): every block's tile is a whole one.

The facts come from the kernel's attributes (`tilec.lowering.abi.kernel_specialization`), which
the `assume` pass writes. It sets `vector = v` (v >= 2) on the op and remarks, for every access,
its width; for an access narrower than `max_bytes`, why (every condition that bound it).

Float atomic adds whose old values nobody reads (`tile.atomic_rmw`, `tile.atomic_scatter` of
f32, f16 or bf16, relaxed or release) take `vector = v` under the same conditions as a store
(a scattered dimension is never the last): the sm_90 lowering issues one vector `red` per run
(`red.global.add.v4.f32`, `red.global.add.noftz.v8.bf16`), older targets one per element.

The same index arithmetic decides how many elements share a Philox run in `tile.philox`
(random numbers give four consecutive offsets one run, a word each): `group = g` (4 or 2) when,
along the last dimension, every aligned run of g elements holds consecutive offsets from a
multiple of g (offsets built as `iota + splat` sums whose other terms are constant along the
last dimension and known multiples of g, e.g. `offsets(tm)[:, None] * N + offsets(tn)[None, :]`
with N a known multiple of 4) and the layout gives each thread whole runs (g divides its
`size_per_thread` of the last dimension). The lowering then runs Philox once per run instead
of once per element: a quarter of the integer work of a dropout.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith, random, scf, shared
from tilec.dialects import atomic as A
from tilec.dialects import gather as G
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import ArrayAttr, BoolAttr, IntegerAttr
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import FloatType, IndexType, IntegerType, TileType, element_type
from tilec.lowering.abi import Specialization, kernel_specialization
from tilec.lowering.exchange import thread_map
from tilec.lowering.layouts import as_blocked, copy_layout, element_bytes, layout_error
from tilec.lowering.memory import vector_slots
from tilec.passes.specialize import attribute_pairs
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["Vectorize", "widths_before_layouts"]

# Loads and stores of tiles, gathered ones included (a gathered dimension is never contiguous
# nor known in bounds; the others are accessed as a load's).
_GATHERS = (G.GatherOp, G.ScatterOp)
_ACCESSES = (T.LoadOp, T.StoreOp, *_GATHERS)
# Atomics that a vector `red` may combine (sm_90: `red.global.add.v4.f32`, `.noftz.v8.bf16`).
_REDUCTIONS = (A.AtomicRMWOp, A.AtomicScatterOp)
_RED_VECTOR_TYPES = (FloatType("f32"), FloatType("f16"), FloatType("bf16"))
_READS = (T.LoadOp, G.GatherOp)

# What "known multiple of" says of a value known to be 0: any power of two.
_ANY = 1 << 30

_ELEMENTWISE = (
    arith.AndIOp,
    arith.OrIOp,
    arith.XOrIOp,
    arith.CmpIOp,
    arith.CmpFOp,
    T.SelectOp,
    T.CastOp,
)
# iota <pred> n is equal within runs of r elements when n is a multiple of r (iota on the left).
_THRESHOLD_PREDICATES = {"slt", "sge", "ult", "uge"}
_SWAPPED = {"sgt": "slt", "sle": "sge", "ugt": "ult", "ule": "uge"}


@register_pass
class Vectorize(Pass):
    """Widens global loads, stores and async copies to the widest legal access (16 bytes).

    Reads the kernel's argument facts (`tilec.aligned`, `tilec.unit`, `tilec.divisible`, from
    the `assume` pass), the index arithmetic of each access's offsets, the layout of its value
    (`#blocked` `size_per_thread` of the last dimension) and its mask; sets `vector = v` where
    v >= 2 elements can move in one access (the module docstring lists the conditions). With
    `enable=false` it removes every `vector`. Remarks: each access's width, and for one
    narrower than `max_bytes` every reason that keeps it so.
    """

    name = "vectorize"
    summary = "Widest legal (16-byte) global accesses from argument facts and index arithmetic"

    @dataclass
    class Options:
        max_bytes: int = option(16, "widest access in bytes (a power of two, at most 16)")
        enable: bool = option(True, "set vector widths (false: every access one element)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        for kernel in module.walk():
            if isinstance(kernel, FuncOp):
                facts = _KernelFacts(kernel)
                for op in kernel.walk():
                    if isinstance(op, (*_ACCESSES, shared.AsyncCopyOp)) or _vector_red(op):
                        self._vectorize(op, facts, ctx)
                    elif isinstance(op, random.PhiloxOp):
                        self._group(op, facts, ctx)

    def _group(self, op: random.PhiloxOp, facts: _KernelFacts, ctx: PassContext) -> None:
        """`group = g` on a `tile.philox` whose threads hold whole aligned runs of g
        consecutive offsets (the module docstring), with a remark either way."""
        op.attributes.pop("group", None)
        t = op.offsets.type
        if not isinstance(t, TileType) or not self.options.enable:
            return
        if not t.is_static:
            ctx.remark(op, "philox: one run per element (the tile's shape is not known yet)")
            return
        limits = [(facts.counter_run(op.offsets), "offsets")]
        try:
            layout = as_blocked(t.layout)
            limits.append((_low_bit(min(layout.size_per_thread[-1], t.shape[-1])), "layout"))
        except ValueError:
            limits.append((1, "layout"))
        limits.append((_low_bit(t.shape[-1]), "shape"))
        g = min([4] + [limit for limit, _ in limits])
        if g >= 2:
            op.attributes["group"] = IntegerAttr(g)
            ctx.remark(op, f"philox: one Philox run per {g} consecutive offsets of a thread")
            return
        why = {
            "offsets": "offsets not known to be consecutive from multiples of 2 along the last "
            "dimension",
            "layout": "the layout gives a thread single elements of the last dimension",
            "shape": f"the last dimension holds an odd number ({t.shape[-1]}) of elements",
        }
        reasons = [why[what] for limit, what in limits if limit < 2]
        ctx.remark(op, "philox: one run per element: " + "; ".join(reasons))

    def _vectorize(self, op: Operation, facts: _KernelFacts, ctx: PassContext) -> None:
        op.attributes.pop("vector", None)
        op.attributes.pop("in_bounds", None)
        op.attributes.pop("checked", None)
        what = op.name.removeprefix("tile.").replace("_", " ")
        size = element_bytes(op.view.type.element)
        if not self.options.enable:
            ctx.remark(op, f"{what}: not vectorized (vectorize disabled)")
            return
        bounds = ""
        if isinstance(op, _ACCESSES):
            inside = facts.in_bounds(op)
            if any(inside):
                op.attributes["in_bounds"] = ArrayAttr(tuple(BoolAttr(x) for x in inside))
                dims = [str(d) for d, x in enumerate(inside) if x]
                bounds = (
                    f"; no bounds check along dim{'s' if len(dims) > 1 else ''} "
                    f"{', '.join(dims)} (whole tiles inside the view)"
                )
        widest = max(1, min(self.options.max_bytes, 16) // size)
        limits = facts.limits(op, widest)
        v = min([widest] + [limit for limit, _ in limits])
        framed = _framed(op)
        if framed and v < widest:
            checked = min([widest] + [limit for limit, _ in facts.limits(op, widest, checked=True)])
            if checked > v:
                op.attributes["vector"] = IntegerAttr(checked)
                op.attributes["checked"] = BoolAttr(True)
                ctx.remark(
                    op,
                    f"{what}: {checked * size}-byte accesses ({checked} x {size} bytes) checked "
                    "at run time (the row's frame starts aligned, align-rows): a run whose "
                    "address is aligned and whose elements are all inside moves in one access, "
                    "others element by element" + bounds,
                )
                return
        if v < widest and _walks_its_view(op, facts, limits, widest):
            op.attributes["vector"] = IntegerAttr(widest)
            op.attributes["checked"] = BoolAttr(True)
            dim = op.view.type.shape[0]
            ctx.remark(
                op,
                f"{what}: {widest * size}-byte accesses ({widest} x {size} bytes) checked at run "
                f"time: the blocks walk {dim} in whole tiles, and {dim} is not known to be a "
                f"multiple of {widest}, so only the last block's last run may be partial: a run "
                "whose elements are all inside moves in one access, that one element by element"
                + bounds,
            )
            return
        if v > 1:
            op.attributes["vector"] = IntegerAttr(v)
        message = f"{what}: {v * size}-byte accesses ({v} x {size} bytes)"
        if v < widest:
            reasons = [reason for limit, reason in limits if limit == v]
            message += ", not " + f"{widest * size}: " + "; ".join(reasons)
        ctx.remark(op, message + bounds)


def _vector_red(op: Operation) -> bool:
    """Whether `op` is an atomic a vector `red` can do: a float add (f32, f16, bf16) whose
    old values nobody reads, in an order `red` has. (Others keep one element an atomic.)"""
    if not isinstance(op, _REDUCTIONS):
        return False
    if op.attributes["kind"].value != "add" or op.result.has_uses:
        return False
    if op.view.type.element not in _RED_VECTOR_TYPES:
        return False
    return A.memory_order(op) in ("relaxed", "release")


def _walks_its_view(
    op: Operation,
    facts: _KernelFacts,
    limits: list[tuple[int, str]],
    widest: int,
    registers: bool = True,
) -> bool:
    """Whether `op` moves the tile of its block in a one-dimensional view the grid walks in
    whole tiles (`offset = program_id * B`, B a multiple of `widest`: a vector add, a
    flattened kernel), and nothing but the view's extent keeps it below `widest`: then every
    run is inside but the last block's last, and runs checked at run time (`checked`) move
    the rest in one access each. (A row of weights read by every block, or a tile of a 2-D
    view, is not walked so: its runs would all take the slow path where they start
    unaligned, which is what `align-rows` measured.)"""
    if not isinstance(op, (T.LoadOp, T.StoreOp)) or op.view.type.rank != 1:
        return False
    if any(limit < widest and not reason.startswith("extent of dim") for limit, reason in limits):
        return False
    tile = (op.result.type if isinstance(op, T.LoadOp) else op.value.type).shape[0]
    if not isinstance(tile, int) or tile % widest:
        return False
    if not facts._tile_start(op.offsets[0], str(op.view.type.shape[0]), tile):
        return False
    checked = facts.limits(op, widest, registers, checked=True)
    return min([widest] + [limit for limit, _ in checked]) == widest


def _framed(op: Operation) -> bool:
    """Whether `op` is a row access that `align-rows` started on an aligned frame."""
    return isinstance(op, (T.LoadOp, T.StoreOp)) and "frame" in op.attributes


def _slice_run(t: TileType, widest: int) -> int:
    """The longest run (a power of two, at most `widest`) of consecutive elements along the
    last dimension that a thread of `t`'s slice layout holds in consecutive slots
    (`tilec.lowering.memory.vector_slots`, which the lowering's vector accesses use)."""
    try:
        m = thread_map(t)
    except ValueError:
        return 1
    run = widest
    while run > 1:
        try:
            vector_slots(m.counts, m.dims[-1].offsets, run)
            return run
        except ValueError:
            run //= 2
    return 1


def widths_before_layouts(kernel: FuncOp, max_bytes: int = 16) -> dict[Operation, int]:
    """Per `tile.load` and `tile.store` of `kernel`, the widest access in elements (at most
    `max_bytes`) that its view's facts, offsets, extent and mask allow, whatever the layout:
    what `assign-layouts` gives each thread as its run (a thread holding 8 contiguous f16
    that it can only load 2 bytes at a time spreads a warp's access over 16 sectors)."""
    facts = _KernelFacts(kernel)
    widths = {}
    for op in kernel.walk():
        if isinstance(op, _ACCESSES):
            widest = max(1, max_bytes // element_bytes(op.view.type.element))
            limits = facts.limits(op, widest, False, checked=_framed(op))
            width = min([widest] + [v for v, _ in limits])
            if width < widest and _walks_its_view(op, facts, limits, widest, False):
                width = widest  # runs checked at run time (`_walks_its_view`)
            widths[op] = width
    return widths


# Ops that keep an integer tile's values along its last dimension (an integer cast may wrap at
# 2^32, which keeps runs of consecutive values from multiples of a power of two up to 2^32).
_INDEX_PRESERVING = (T.ExpandDimsOp, T.ConvertLayoutOp, T.CastOp, arith.IndexCastOp, arith.ExtSIOp)


def _integer_to_integer(op: Operation) -> bool:
    return all(
        isinstance(element_type(v.type), (IntegerType, IndexType))
        for v in (op.operands[0], op.results[0])
    )


def _constant(v: Value) -> int | None:
    """The integer constant `v` holds (`constant_value`), else None."""
    attr = constant_value(v)
    value = attr.value if attr is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _low_bit(n: int) -> int:
    """The largest power of two dividing `n` (`_ANY` for 0)."""
    return min(n & -n, _ANY) if n else _ANY


class _KernelFacts:
    """What one kernel knows: its specialization and the multiples its index values are."""

    def __init__(self, kernel: FuncOp):
        self.kernel = kernel
        self.spec: Specialization = kernel_specialization(kernel)
        self.names = {arg: arg.name_hint or f"arg{i}" for i, arg in enumerate(kernel.arguments)}
        self._multiples: dict[Value, int] = {}
        self._counter_runs: dict[Value, int] = {}
        self._element_multiples: dict[Value, int] = {}
        warps = kernel.attributes.get("tilec.num_warps")
        self.num_warps = warps.value if warps is not None else None
        # Each grid axis: the dimension it tiles and the tile (None where not yet specialized).
        sizes = dict(attribute_pairs(kernel, "tilec.tile_sizes"))
        self.grid = [
            (str(dim), sizes.get(str(symbol)))
            for dim, symbol in attribute_pairs(kernel, "tilec.grid")
        ]

    # -- the conditions ---------------------------------------------------------------------

    def limits(
        self, op: Operation, widest: int, registers: bool = True, checked: bool = False
    ) -> list[tuple[int, str]]:
        """Each condition that caps the vector below `widest`: (largest v it allows, why);
        `registers=False` leaves out the value's layout (not chosen yet); `checked=True`
        leaves out what a run checked at run time needs not be proved (alignment, bounds and
        mask: the address, extents and mask of every run are tested when it moves)."""
        view = op.view
        name = self.names.get(view) if isinstance(view, BlockArgument) else None
        if name is None or view.block is not self.kernel.body.block:
            return [(1, "the view is not a kernel argument")]
        rank = view.type.rank
        last = rank - 1
        out: list[tuple[int, str]] = []
        if f"{name}.stride.{last}" not in self.spec.unit:
            out.append((1, f"stride of dim {last} ({name}.stride.{last}) not known to be 1"))
        if checked:  # loads and stores only (`_framed`)
            value_type = op.result.type if isinstance(op, _READS) else op.value.type
            return out + (self._register_limits(value_type, widest) if registers else [])
        if name not in self.spec.aligned:
            out.append((1, f"{name} not known to be 16-byte aligned"))
        for d in range(last):
            stride = f"{name}.stride.{d}"
            m = self.spec.multiple(stride)
            if m < widest:
                out.append((m, f"stride of dim {d} ({stride}) not known divisible by {widest}"))
        m = self.multiple(op.offsets[last])
        if m < widest:
            out.append(
                (m, f"offset of dim {last} not known to be a multiple of {widest} (only of {m})")
            )
        if isinstance(op, shared.AsyncCopyOp):
            out += self._copy_limits(op, widest)
        else:
            value_type = op.result.type if isinstance(op, _READS) else op.value.type
            if isinstance(op, (*_GATHERS, A.AtomicScatterOp)) and op.axis == last:
                out.append((1, f"dim {last} is gathered: its elements are not contiguous"))
            if registers:
                out += self._register_limits(value_type, widest)
            extent = self._extent_multiple(name, view.type.shape[last], last)
            if extent < widest:
                out.append(
                    (
                        extent,
                        f"extent of dim {last} ({name}.extent.{last}) not known to be a "
                        f"multiple of {widest}",
                    )
                )
        if op.mask is not None:
            run = self.run(op.mask)
            if run < widest:
                out.append((run, f"mask not known to be equal within runs of {widest}"))
        return out

    def _register_limits(self, t: TileType, widest: int) -> list[tuple[int, str]]:
        if isinstance(t.layout, T.SliceLayout):
            # A row of its parent's elements, held by every thread of the sliced dimension (a
            # bias row broadcast over a tile's rows): the runs its thread map keeps together.
            run = _slice_run(t, widest)
            if run < widest:
                plural = "element" if run == 1 else "elements"
                return [(run, f"slice layout holds {run} contiguous {plural} per thread")]
            return []
        try:
            layout = as_blocked(t.layout)
        except ValueError:
            return [(1, f"layout {t.layout} is not a register layout")]
        run = min(layout.size_per_thread[-1], t.shape[-1])
        if run < widest:
            plural = "element" if run == 1 else "elements"
            return [(run, f"layout holds {run} contiguous {plural} per thread")]
        return []

    def _copy_limits(self, op: shared.AsyncCopyOp, widest: int) -> list[tuple[int, str]]:
        shape = shared.slot_type(op.buffer.type).shape
        if self.num_warps is None:
            return [(1, "the kernel has no tilec.num_warps (run assign-layouts)")]
        size = element_bytes(op.view.type.element)
        out = []
        v = min(widest, _low_bit(shape[-1]))
        if v < widest:
            plural = "element" if shape[-1] == 1 else "elements"
            out.append((v, f"a row of the slot {list(shape)} holds {shape[-1]} {plural}"))
        chunk = v
        while chunk > 1 and layout_error(
            copy_layout(shape, self.num_warps, chunk), shape, self.num_warps
        ):
            chunk //= 2
        if chunk < v:
            out.append((chunk, f"slot {list(shape)} has no copy layout in chunks of {v}"))
        if chunk * size < 4:
            out.append((1, f"cp.async needs 4, 8 or 16 bytes, {chunk * size} at most here"))
        return out

    def _extent_multiple(self, name: str, dim, axis: int) -> int:
        if isinstance(dim, int):
            return _low_bit(dim)
        return self.spec.multiple(f"{name}.extent.{axis}")

    # -- bounds -------------------------------------------------------------------------------

    def in_bounds(self, op: T.LoadOp | T.StoreOp) -> list[bool]:
        """Per dimension of the access, whether its tile is known to lie inside the view."""
        view = op.view
        name = self.names.get(view) if isinstance(view, BlockArgument) else None
        tile = (op.result.type if isinstance(op, _READS) else op.value.type).shape
        out = []
        for d, (extent, offset, size) in enumerate(zip(view.type.shape, op.offsets, tile)):
            if isinstance(op, _GATHERS) and d == op.axis:
                out.append(False)  # its indices decide
            elif isinstance(extent, int):
                start = _constant(offset)
                out.append(start is not None and start >= 0 and start + size <= extent)
            elif name is not None and isinstance(size, int):
                whole = self._extent_multiple(name, extent, d) % size == 0
                out.append(whole and self._tile_start(offset, str(extent), size))
            else:
                out.append(False)
        return out

    def _tile_start(self, offset: Value, dim: str, size: int) -> bool:
        """Whether `offset` is `program_id(a) * size` on a grid axis a that tiles `dim` by
        `size` (so the offsets are 0, size, 2 size, ... below the extent)."""
        factor = 1
        if isinstance(offset, OpResult) and isinstance(offset.op, arith.MulIOp):
            for a, b in ((offset.op.lhs, offset.op.rhs), (offset.op.rhs, offset.op.lhs)):
                c = _constant(b)
                if c is not None:
                    offset, factor = a, c
                    break
        if not (isinstance(offset, OpResult) and isinstance(offset.op, T.ProgramIdOp)):
            return False
        if factor != size:
            return False
        axis = offset.op.attributes["axis"].value
        if axis >= len(self.grid):
            return False
        grid_dim, grid_tile = self.grid[axis]
        return grid_dim == dim and grid_tile == size

    # -- index arithmetic ---------------------------------------------------------------------

    def multiple(self, v: Value) -> int:
        """The largest power of two `v` (an integer scalar) is known to be a multiple of."""
        found = self._multiples.get(v)
        if found is None:
            self._multiples[v] = 1  # a cycle (a loop-carried value) knows nothing
            found = self._multiples[v] = min(self._multiple(v), _ANY)
        return found

    def _multiple(self, v: Value) -> int:
        if isinstance(v, BlockArgument):
            region = v.block.parent
            owner = region.parent if region is not None else None
            if isinstance(owner, scf.ForOp) and v is owner.induction_var:
                return min(self.multiple(owner.lower), self.multiple(owner.step))
            return 1
        if not isinstance(v, OpResult):
            return 1
        op = v.op
        if isinstance(op, arith.ConstantOp):
            value = op.attributes["value"].value
            return _low_bit(int(value)) if isinstance(value, int) else 1
        if isinstance(op, arith.MulIOp):
            return self.multiple(op.operands[0]) * self.multiple(op.operands[1])
        if isinstance(op, (arith.AddIOp, arith.SubIOp, arith.MaxSIOp, arith.MinSIOp)):
            return min(self.multiple(op.operands[0]), self.multiple(op.operands[1]))
        if isinstance(op, arith.ShLIOp):
            shift = op.operands[1]
            if isinstance(shift, OpResult) and isinstance(shift.op, arith.ConstantOp):
                return self.multiple(op.operands[0]) << int(shift.op.attributes["value"].value)
            return self.multiple(op.operands[0])
        if isinstance(op, (arith.IndexCastOp, arith.ExtSIOp)):
            return self.multiple(op.operands[0])
        if isinstance(op, T.DimOp):
            name = self.names.get(op.view) if isinstance(op.view, BlockArgument) else None
            if name is None:
                return 1
            return self._extent_multiple(name, op.view.type.shape[op.axis], op.axis)
        if isinstance(op, scf.IfOp) and not op.otherwise.empty:
            # Either branch's value (a split's loop bounds: the whole loop's, or a chunk's).
            index = op.results.index(v)
            return min(
                self.multiple(region.block.ops[-1].operands[index])
                for region in (op.then, op.otherwise)
            )
        return 1

    # -- random offsets -------------------------------------------------------------------------

    def counter_run(self, v: Value) -> int:
        """The largest power of two r such that along the last dimension of the integer tile
        `v`, every aligned run of r elements holds r consecutive values from a multiple of r
        (1: nothing known). Memoized: offsets are DAGs that share subexpressions."""
        found = self._counter_runs.get(v)
        if found is None:
            found = self._counter_runs[v] = self._counter_run(v)
        return found

    def _counter_run(self, v: Value) -> int:
        t = v.type
        if not isinstance(t, TileType) or t.shape[-1] == 1 or not isinstance(v, OpResult):
            return 1
        op = v.op
        if isinstance(op, T.IotaOp):
            return _ANY
        if isinstance(op, (arith.AddIOp, arith.SubIOp)):
            pairs = [(op.lhs, op.rhs)]
            if isinstance(op, arith.AddIOp):
                pairs.append((op.rhs, op.lhs))
            return max(
                min(self.counter_run(a), self.run(b), self.elements_multiple(b)) for a, b in pairs
            )
        if isinstance(op, T.BroadcastOp):
            return 1 if op.input.type.shape[-1] == 1 else self.counter_run(op.input)
        if isinstance(op, _INDEX_PRESERVING) and _integer_to_integer(op):
            return self.counter_run(op.operands[0])
        return 1

    def elements_multiple(self, v: Value) -> int:
        """The largest power of two every element of the integer tile (or scalar) `v` is known
        to be a multiple of (memoized)."""
        found = self._element_multiples.get(v)
        if found is None:
            found = self._element_multiples[v] = self._elements_multiple(v)
        return found

    def _elements_multiple(self, v: Value) -> int:
        if not isinstance(v.type, TileType):
            return self.multiple(v)
        if not isinstance(v, OpResult):
            return 1
        op = v.op
        if isinstance(op, T.SplatOp):
            return self.multiple(op.input)
        if isinstance(op, T.FullOp):
            value = op.attributes["value"].value
            return _low_bit(int(value)) if isinstance(value, int) else 1
        if isinstance(op, arith.MulIOp):
            return min(self.elements_multiple(op.lhs) * self.elements_multiple(op.rhs), _ANY)
        if isinstance(op, (arith.AddIOp, arith.SubIOp)):
            return min(self.elements_multiple(op.lhs), self.elements_multiple(op.rhs))
        if isinstance(op, T.BroadcastOp) or (
            isinstance(op, _INDEX_PRESERVING) and _integer_to_integer(op)
        ):
            return self.elements_multiple(op.operands[0])
        return 1

    # -- masks ----------------------------------------------------------------------------------

    def run(self, v: Value) -> int:
        """The largest power of two r such that the tile `v` is known equal within every
        aligned run of r elements along its last dimension (`_ANY` for a scalar)."""
        t = v.type
        if not isinstance(t, TileType):
            return _ANY
        if t.shape[-1] == 1:
            return _ANY
        if not isinstance(v, OpResult):
            return 1
        op = v.op
        if isinstance(op, (T.SplatOp, T.FullOp)):
            return _ANY
        if isinstance(op, T.BroadcastOp):
            return _ANY if op.input.type.shape[-1] == 1 else self.run(op.input)
        if isinstance(op, T.ExpandDimsOp):  # the new dim is not last: a size-1 last returned
            return self.run(op.input)
        if isinstance(op, T.ConvertLayoutOp):
            return self.run(op.input)
        if isinstance(op, arith.CmpIOp):
            threshold = self._threshold_run(op)
            if threshold is not None:
                return threshold
        if isinstance(op, _ELEMENTWISE):
            return min(self.run(x) for x in op.operands)
        return 1

    def _threshold_run(self, op: arith.CmpIOp) -> int | None:
        """`iota (+ splat a) < splat n` (and its kin): equal within runs of r where r divides
        n - a; None when the compare is not of that form."""
        lhs, rhs, predicate = op.lhs, op.rhs, op.predicate
        if predicate in _SWAPPED:
            lhs, rhs, predicate = rhs, lhs, _SWAPPED[predicate]
        if predicate not in _THRESHOLD_PREDICATES:
            return None
        start = self._iota_start(lhs)
        bound = self._splat_multiple(rhs)
        if start is None or bound is None:
            return None
        return min(start, bound)

    def _iota_start(self, v: Value) -> int | None:
        """For `v` = iota + (splats), the multiple its start is known to be (None: not so)."""
        if not isinstance(v, OpResult):
            return None
        op = v.op
        if isinstance(op, T.IotaOp):
            return _ANY
        if isinstance(op, (arith.IndexCastOp, arith.ExtSIOp, T.ConvertLayoutOp)):
            return self._iota_start(op.operands[0])
        if isinstance(op, arith.AddIOp):
            for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
                start, offset = self._iota_start(a), self._splat_multiple(b)
                if start is not None and offset is not None:
                    return min(start, offset)
        return None

    def _splat_multiple(self, v: Value) -> int | None:
        if not isinstance(v.type, TileType):
            return self.multiple(v)
        if isinstance(v, OpResult) and isinstance(v.op, T.SplatOp):
            return self.multiple(v.op.input)
        if isinstance(v, OpResult) and isinstance(v.op, T.FullOp):
            value = v.op.attributes["value"].value
            return _low_bit(int(value)) if isinstance(value, int) else None
        return None
