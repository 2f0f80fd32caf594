"""Lowering of shared buffers, asynchronous copies and tensor-core dots (the ops that
`smem-placement` and `pipeline` introduce: `docs/passes.md`).

Shared buffers. `tile.alloc_shared` buffers live at their `offset` (bytes) in the kernel's one
dynamic shared array; without `offset` attributes they are packed in order. The lowering's own
scratch (layout conversions, cross-warp reductions) of an op starts after the buffers live at
that op (`scratch_bases`): after a pipelined loop, its buffers' bytes are reused. A slot of a `!smem<S x R x C>` buffer is `R*C` elements, row-major; with a
`#shared<vec, per_phase, max_phase, order = [1, 0]>` layout, chunk `c // vec` of row `r` is
stored at chunk `(c // vec) ^ ((r // per_phase) % max_phase)` (`swizzled_offset`). Higher-rank
slots flatten their leading dimensions into rows.

Copies. `tile.async_copy` with `vector = v` (elements per access, set by `vectorize`): the
thread that copies each run of `v` elements is `copy_layout(slot shape, num_warps, v)`; when
`v * element bytes` is 4, 8 or 16 each run is one `cp.async` (`.cg` for 16 bytes: it bypasses
L1) whose source size is the bytes inside the view's extents, so that the rest is zero-filled
— partial runs at the edge included. Narrower copies are plain predicated loads and shared
stores (they land at once, which the copy's semantics allow). `tile.async_commit` and
`tile.async_wait N` are `cp.async.commit_group` and `cp.async.wait_group N`; `tile.barrier`
is `bar.sync 0`.

Tensor cores. A `tile.dot` whose accumulator is `#mma` (version 2) and whose operands are
`#dot_operand` tiles is a sequence of `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`.
`#dot_operand` tiles exist only as results of `tile.load_shared`, which reads them with
`ldmatrix` (the right operand with `.trans`, as B is stored K-major). Register order, for a
warp tile of `Mi x Ni` instruction tiles and `Kk = K / 16` steps (`g = lane / 4`,
`t = lane % 4`, rows and columns are the accumulator's, `tilec.lowering.layouts.as_blocked`):

* A fragment `(mi, kk)`: four b32 registers `a0a1, a2a3, a4a5, a6a7` = rows `r0 + g` and
  `r0 + 8 W_m + g` (`r0 = 8 warp_m + 16 W_m mi`), columns `16 kk + 2t (+1)` and `+ 8`.
  One `ldmatrix.x4` reads it: lanes 8j..8j+7 address the rows of matrix `j`.
* B fragment `(ni, kk)`: two b32 registers `b0b1, b2b3` = rows `16 kk + 2t (+1)` and `+ 8`,
  column `c0 + g` (`c0 = 8 warp_n + 8 W_n ni`). One `ldmatrix.x4.trans` reads two of them.
* Accumulator tile `(mi, ni)`: `c0..c3` are the accumulator's slots `(2 mi, 2 ni)`,
  `(2 mi, 2 ni + 1)`, `(2 mi + 1, 2 ni)`, `(2 mi + 1, 2 ni + 1)` (slot = row index x column
  index, row-major).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import scf
from tilec.dialects import shared as S
from tilec.dialects import tile as T
from tilec.dialects.tile import DotOperandLayout, MmaLayout, SharedLayout
from tilec.ir.core import Operation, OpResult
from tilec.ir.types import FloatType, SharedType, TileType
from tilec.lowering.exchange import SCRATCH_ALIGNMENT, op_scratch_bytes
from tilec.lowering.layouts import (
    ThreadMap,
    copy_layout,
    element_bytes,
)

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering

__all__ = [
    "BUFFER_ALIGNMENT",
    "SharedBuffer",
    "buffer_bytes",
    "buffer_live_ranges",
    "buffer_offsets",
    "is_tensor_core_dot",
    "scratch_bases",
    "scratch_bases_for",
    "scratch_fences",
    "shared_bytes",
    "swizzled_offset",
]

BUFFER_ALIGNMENT = 128  # bytes: every buffer starts on a 128-byte line (swizzle phases align)

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
GLOBAL_PTR = ir.PointerType(addrspace=1)


def _aligned(n: int, alignment: int = BUFFER_ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def _slot_bytes(t: SharedType) -> int:
    return math.prod(t.shape[1:]) * element_bytes(t.element)


def buffer_offsets(kernel: Operation) -> dict[Operation, int]:
    """Byte offset of every `tile.alloc_shared` of `kernel`: its `offset` attribute (set by
    smem-placement), else packed in program order after the last one placed."""
    allocs = [op for op in kernel.walk() if isinstance(op, S.AllocSharedOp)]
    offsets: dict[Operation, int] = {}
    end = 0
    for op in allocs:
        attr = op.attributes.get("offset")
        if attr is not None:
            offsets[op] = attr.value
            end = max(end, attr.value + _slot_bytes(op.result.type) * op.result.type.shape[0])
    for op in allocs:
        if op not in offsets:
            offsets[op] = _aligned(end)
            end = offsets[op] + _slot_bytes(op.result.type) * op.result.type.shape[0]
    return offsets


def buffer_bytes(kernel: Operation) -> int:
    """Bytes of shared memory the kernel's buffers take (the scratch starts here)."""
    end = 0
    for op, offset in buffer_offsets(kernel).items():
        t = op.result.type
        end = max(end, offset + _slot_bytes(t) * t.shape[0])
    attr = kernel.attributes.get("tilec.shared_bytes")
    if attr is not None:
        end = max(end, attr.value)
    return _aligned(end) if end else 0


def buffer_live_ranges(kernel: Operation) -> tuple[list[Operation], dict[Operation, tuple]]:
    """The kernel's ops in program order, and for each `tile.alloc_shared` the first and last
    position at which its bytes are in use. A use inside a loop keeps the buffer in use for
    the whole outermost loop around it (the next iteration uses it again); a buffer that
    `tile.async_copy` fills stays in use until the next `tile.async_wait 0` (a copy in flight
    still writes it). smem-placement places buffers and the lowering places its scratch by
    these same ranges."""
    ops = list(kernel.walk())
    position = {id(op): i for i, op in enumerate(ops)}

    loop_end: dict[int, int] = {}

    def span(use: Operation) -> tuple[int, int]:
        outer = None
        parent = use.parent_op
        while parent is not None and parent is not kernel:
            if isinstance(parent, scf.ForOp):
                outer = parent
            parent = parent.parent_op
        if outer is None:
            return position[id(use)], position[id(use)]
        if id(outer) not in loop_end:
            loop_end[id(outer)] = position[id(list(outer.walk())[-1])]
        return position[id(outer)], loop_end[id(outer)]

    ranges: dict[Operation, tuple] = {}
    for op in ops:
        if not isinstance(op, S.AllocSharedOp):
            continue
        spans = [span(u) for u in op.result.uses] or [(position[id(op)], position[id(op)])]
        first, last = min(a for a, _ in spans), max(b for _, b in spans)
        if any(isinstance(u, S.AsyncCopyOp) for u in op.result.uses):
            waits = [
                position[id(w)]
                for w in ops[last + 1 :]
                if isinstance(w, S.AsyncWaitOp) and w.pending == 0
            ]
            last = waits[0] if waits else len(ops)
        ranges[op] = (first, last)
    return ops, ranges


def scratch_bases_for(kernel: Operation, ends: dict[Operation, int]) -> dict[Operation, int]:
    """Where each op that needs scratch (`exchange.op_scratch_bytes`) starts it, given where
    each buffer ends (`ends`, bytes): after every buffer not yet out of use at that op
    (`buffer_live_ranges`)."""
    ops, ranges = buffer_live_ranges(kernel)
    bases: dict[Operation, int] = {}
    for i, op in enumerate(ops):
        if op_scratch_bytes(op) == 0:
            continue
        end = max((e for alloc, e in ends.items() if i <= ranges[alloc][1]), default=0)
        bases[op] = _aligned(end, SCRATCH_ALIGNMENT)
    return bases


def scratch_bases(kernel: Operation) -> dict[Operation, int]:
    """`scratch_bases_for` the kernel's buffers where they are (`buffer_offsets`)."""
    ends = {}
    for alloc, offset in buffer_offsets(kernel).items():
        t = alloc.result.type
        ends[alloc] = offset + _slot_bytes(t) * t.shape[0]
    return scratch_bases_for(kernel, ends)


def scratch_fences(kernel: Operation, bases: dict[Operation, int] | None = None) -> set[Operation]:
    """The ops whose scratch reuses bytes of a buffer: a barrier must precede them, so that
    no thread still reads the buffer while another writes the scratch. `bases`: the kernel's
    `scratch_bases`, when already computed."""
    bases = scratch_bases(kernel) if bases is None else bases
    end = buffer_bytes(kernel)
    return {op for op, base in bases.items() if base < end}


def shared_bytes(kernel: Operation) -> int:
    """Dynamic shared memory the kernel needs: its buffers, and each op's scratch where it
    goes (`scratch_bases`)."""
    need = buffer_bytes(kernel)
    for op, base in scratch_bases(kernel).items():
        need = max(need, base + op_scratch_bytes(op))
    return _aligned(need, SCRATCH_ALIGNMENT) if need else 0


def interleaved(count: int, i: int) -> int:
    """Where `interleave = 2` puts index `i` of `count`: its 8-group L of G at position
    2 (L mod G/2) + L div G/2, the order in which a wgmma accumulator's warps take rows."""
    half = count // 16  # G/2 for G groups of 8
    group, within = divmod(i, 8)
    return (2 * (group % half) + group // half) * 8 + within


def stored_row(layout: SharedLayout | None, rows: int, r: int) -> int:
    """The row of a slot of `rows` rows where `layout` stores row `r` (`interleave`)."""
    if layout is None or layout.interleave == 1:
        return r
    return interleaved(rows, r)


def swizzled_offset(layout: SharedLayout | None, shape: tuple[int, ...], r: int, c: int) -> int:
    """Element offset, within a slot of `shape`, of row `r` (leading dimensions flattened)
    and column `c` of the last dimension."""
    cols = shape[-1]
    if layout is None:
        return r * cols + c
    rows = math.prod(shape[:-1])
    r = stored_row(layout, rows, r)
    base = 0
    if layout.col_block:
        block, c = divmod(c, layout.col_block)
        cols = layout.col_block
        base = block * rows * cols
    if layout.max_phase == 1:
        return base + r * cols + c
    vec = layout.vec
    chunk = (c // vec) ^ ((r // layout.per_phase) % layout.max_phase)
    return base + r * cols + chunk * vec + c % vec


def is_wgmma_dot(op: Operation) -> bool:
    """Whether `op` is a `tile.dot` the lowering turns into `wgmma` (sm_90a)."""
    return (
        isinstance(op, T.DotOp)
        and isinstance(op.result.type.layout, MmaLayout)
        and op.result.type.layout.version == 3
        and all(
            isinstance(x.type.layout, DotOperandLayout) and x.type.layout.version == 3
            for x in (op.a, op.b)
        )
    )


def uses_wgmma(kernel: Operation) -> bool:
    """Whether the kernel has a `wgmma` dot (`_KernelLowering.wgmma` holds the answer)."""
    return any(is_wgmma_dot(op) for op in kernel.walk())


def is_tensor_core_dot(op: Operation) -> bool:
    """Whether `op` is a `tile.dot` the lowering turns into `mma.sync`."""
    return (
        isinstance(op, T.DotOp)
        and isinstance(op.result.type.layout, MmaLayout)
        and isinstance(op.a.type.layout, DotOperandLayout)
        and isinstance(op.b.type.layout, DotOperandLayout)
    )


@dataclass
class SharedBuffer:
    """A lowered `tile.alloc_shared`: where it starts in the shared array, and its type."""

    offset: int
    type: SharedType

    @property
    def layout(self) -> SharedLayout | None:
        layout = self.type.layout
        if layout is not None and not isinstance(layout, SharedLayout):
            raise ValueError(f"{self.type}: not a #shared layout")
        if layout is not None and tuple(layout.order) != tuple(range(self.type.rank - 2, -1, -1)):
            raise ValueError(f"{self.type}: only row-major #shared orders are lowered")
        return layout

    @property
    def slot_shape(self) -> tuple[int, ...]:
        return tuple(self.type.shape[1:])

    @property
    def slot_bytes(self) -> int:
        return _slot_bytes(self.type)


class Fragments:
    """A `#dot_operand` tile in registers: per (instruction tile, k-step), its b32 registers.

    `load(kk)` emits the `ldmatrix` instructions of k-step `kk` at the current point. When
    nothing can write the slot between the `tile.load_shared` and its dot, the dot loads each
    k-step just before using it (a warp tile's fragments for all of K would take as many
    registers as the accumulator); otherwise every k-step is loaded at the `tile.load_shared`.
    """

    def __init__(self, k_steps: int, load) -> None:
        self.k_steps = k_steps
        self._load = load
        self.regs: dict[tuple[int, int], list[ir.Value]] = {}
        self._loaded: set[int] = set()

    def load(self, kk: int) -> None:
        if kk not in self._loaded:
            self._loaded.add(kk)
            self.regs.update(self._load(kk))

    def load_all(self) -> Fragments:
        for kk in range(self.k_steps):
            self.load(kk)
        return self


# ---------------------------------------------------------------------------------------------
# Inline PTX


def _asm(
    k: _KernelLowering,
    ret: ir.Type,
    args: list[ir.Value],
    text: str,
    constraints: str,
    *,
    side_effect: bool = True,
):
    fty = ir.FunctionType(ret, [a.type for a in args])
    return k.b.call(ir.InlineAsm(fty, text, constraints, side_effect=side_effect), args)


def _shared_address(k: _KernelLowering, byte_offset: ir.Value) -> ir.Value:
    """A 32-bit shared-window address of `byte_offset` bytes into the shared array."""
    base = k.b.ptrtoint(k.scratch, I32) if k.scratch is not None else ir.Constant(I32, 0)
    return k.b.add(base, byte_offset)


def _i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


# ---------------------------------------------------------------------------------------------
# Ops


def lower_alloc_shared(k: _KernelLowering, op: Operation) -> list[Any]:
    return [SharedBuffer(k.buffer_offsets[op], op.result.type)]


def lower_barrier(k: _KernelLowering, op: Operation) -> None:
    loop = op.parent_op
    if isinstance(loop, scf.ForOp) and deferred_wgmma_slots(loop):
        # Last iteration's wgmmas must have finished reading their slot before anyone
        # passes the barrier and refills it (`lower_wgmma_dot`).
        args = loop.body.block.args
        for j in deferred_wgmma_slots(loop):
            arg = args[1 + j]
            k.values[arg] = _wgmma_wait(k, k.values[arg])
    if k.wgmma:
        # Shared memory written by this thread (landed cp.async copies, st.shared) that wgmma
        # reads next goes through the async proxy: make it visible there before the barrier.
        _asm(k, ir.VoidType(), [], "fence.proxy.async.shared::cta;", "")
    k.barrier()


def lower_async_commit(k: _KernelLowering, op: Operation) -> None:
    _asm(k, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}")


def lower_async_wait(k: _KernelLowering, op: Operation) -> None:
    _asm(k, ir.VoidType(), [], f"cp.async.wait_group {op.pending};", "~{memory}")


def drain_loop(k: _KernelLowering, loop: Operation, results: list[Any]) -> list[Any]:
    """The values `loop` leaves when its last iteration ends (`for_op`'s `loop.exit`): the
    wgmmas of that iteration are still in flight, so their accumulators are waited for here,
    before the path where the loop never ran joins with its initial values."""
    if isinstance(loop, scf.ForOp):
        for j in deferred_wgmma_slots(loop):
            results[j] = _wgmma_wait(k, results[j])
    return results


def deferred_wgmma_slots(loop: Operation) -> list[int]:
    """The loop-carried values of `loop` that a `wgmma` dot leaves in flight at the end of an
    iteration: those the dot's result feeds straight to the `scf.yield` of a loop that the
    pipeline pass made (its body starts with a wait and a barrier, an `async_wait` follows
    it). `lower_wgmma_dot` then issues without waiting, the barrier at the top of the next
    iteration waits (before any thread refills the slot the wgmmas read), and so does the
    loop's exit (`drain_loop`), before the results are read."""
    body = loop.body.block.ops
    block = loop.block
    after = block.ops[block.ops.index(loop) + 1 :] if block is not None else []
    shaped = (
        len(body) > 2
        and isinstance(body[0], S.AsyncWaitOp)
        and isinstance(body[1], S.BarrierOp)
        and bool(after)
        and isinstance(after[0], S.AsyncWaitOp)
    )
    if not shaped:
        return []
    return [
        j
        for j, v in enumerate(loop.yield_op.operands)
        if isinstance(v, OpResult)
        and v.op.parent_op is loop
        and is_wgmma_dot(v.op)
        and all(u is loop.yield_op for u in v.uses)
    ]


def _wgmma_wait(k: _KernelLowering, values: list[ir.Value]) -> list[ir.Value]:
    """`wgmma.wait_group 0`, with the accumulator registers it completes tied through it (so
    nothing reads them before)."""
    count = len(values)
    out = _asm(
        k,
        ir.LiteralStructType([F32] * count),
        list(values),
        "wgmma.wait_group.sync.aligned 0;",
        ",".join(["=f"] * count + [str(r) for r in range(count)]),
    )
    return [k.b.extract_value(out, r) for r in range(count)]


def _slot_base(k: _KernelLowering, buf: SharedBuffer, slot: ir.Value) -> ir.Value:
    """Byte offset (i32) of slot `slot` of `buf` in the shared array."""
    b = k.b
    index = b.trunc(slot, I32) if slot.type != I32 else slot
    scaled = b.mul(index, _i32(buf.slot_bytes)) if buf.type.shape[0] > 1 else _i32(0)
    return b.add(scaled, _i32(buf.offset)) if buf.offset else scaled


def _swizzled_bytes(
    k: _KernelLowering, buf: SharedBuffer, row: ir.Value, col: int | ir.Value
) -> ir.Value:
    """Byte offset within a slot of element (`row`, `col`) (i32 values or ints)."""
    b = k.b
    shape = buf.slot_shape
    cols = shape[-1]
    size = element_bytes(buf.type.element)
    layout = buf.layout
    col_v = _i32(col) if isinstance(col, int) else col
    base: ir.Value = _i32(0)
    if layout is not None and layout.interleave != 1:  # `stored_row`
        row = _interleaved_value(b, math.prod(shape[:-1]), row)
    if layout is not None and layout.col_block:
        width = layout.col_block
        block = b.lshr(col_v, _i32(width.bit_length() - 1))
        base = b.mul(block, _i32(math.prod(shape[:-1]) * width))
        col_v = b.and_(col_v, _i32(width - 1))
        cols = width
    if layout is None or layout.max_phase == 1:
        flat = b.add(base, b.add(b.mul(row, _i32(cols)), col_v))
        return b.mul(flat, _i32(size))
    vec = layout.vec
    phase = b.and_(b.lshr(row, _i32(layout.per_phase.bit_length() - 1)), _i32(layout.max_phase - 1))
    chunk = b.xor(b.lshr(col_v, _i32(vec.bit_length() - 1)), phase)
    within = b.and_(col_v, _i32(vec - 1))
    flat = b.add(b.add(b.mul(row, _i32(cols)), b.shl(chunk, _i32(vec.bit_length() - 1))), within)
    return b.mul(b.add(base, flat), _i32(size))


def _interleaved_value(b: ir.IRBuilder, count: int, i: ir.Value) -> ir.Value:
    """`interleaved(count, i)` on an i32 value (count a power of two, at least 16)."""
    half = count // 16
    group = b.lshr(i, _i32(3))
    moved = b.or_(
        b.shl(b.and_(group, _i32(half - 1)), _i32(1)),
        b.lshr(group, _i32(half.bit_length() - 1)),
    )
    return b.or_(b.shl(moved, _i32(3)), b.and_(i, _i32(7)))


def lower_async_copy(k: _KernelLowering, op: Operation) -> None:
    """Each thread copies its runs of `vector` elements (see the module docstring).

    The tile's origin is one address for the block; each run adds its thread's offset, which
    does not change between iterations of a loop. When the whole tile lies inside the view
    (every block but those on the edges), the runs are copied without bounds arithmetic; only
    otherwise is each run's size clamped to the extent."""
    if op.mask is not None:
        raise ValueError("tile.async_copy with a mask is not lowered; copy without one")
    b = k.b
    buf: SharedBuffer = k.values[op.buffer]
    view = k.values[op.view]
    shape = buf.slot_shape
    elem = element_bytes(buf.type.element)
    attr = op.attributes.get("vector")
    v = attr.value if attr is not None else 1
    if v * elem not in (4, 8, 16):
        v = 1
    m = ThreadMap(copy_layout(shape, k.num_warps, v), shape)
    offsets = [k.values[x] for x in op.offsets]
    slot_base = _slot_base(k, buf, k.values[op.slot])
    indices = k.dim_indices(m)
    last = len(shape) - 1
    row_strides = [math.prod(shape[d + 1 : last]) for d in range(last)]
    element = k.memory_type(buf.type.element)
    origin: ir.Value = ir.Constant(I64, 0)
    for d in range(len(shape)):
        term = b.mul(offsets[d], view.strides[d])
        origin = term if d == 0 else b.add(origin, term)
    tile_pointer = b.gep(view.pointer, [origin], source_etype=element)
    runs = []  # per run: (destination byte offset, pointer, positions)
    for slot in range(0, m.num_slots, v):
        multi = m.slot_multi_index(slot)
        pos = [indices[d][multi[d]] for d in range(len(shape))]
        within: ir.Value | None = None
        for d in range(len(shape)):
            term = b.mul(b.sext(pos[d], I64), view.strides[d])
            within = term if within is None else b.add(within, term)
        row = _i32(0)
        for d in range(last):
            row = b.add(row, b.mul(pos[d], _i32(row_strides[d])))
        dst = b.add(slot_base, _swizzled_bytes(k, buf, row, pos[last]))
        runs.append((dst, b.gep(tile_pointer, [within], source_etype=element), pos))

    def checked() -> None:
        for dst, pointer, pos in runs:
            inside: ir.Value | None = None
            for d in range(last):
                ok = b.icmp_unsigned("<", b.add(offsets[d], b.sext(pos[d], I64)), view.extents[d])
                inside = ok if inside is None else b.and_(inside, ok)
            col_g = b.add(offsets[last], b.sext(pos[last], I64))
            if v == 1:
                ok = _and(b, inside, b.icmp_unsigned("<", col_g, view.extents[last]))
                k.shared_store(buf.type.element, dst, k.guarded_load(buf.type.element, pointer, ok))
                continue
            # bytes inside the extent along the last dimension: clamp(extent - g, 0, v) * elem
            left = b.sub(view.extents[last], col_g)
            zero, most = ir.Constant(I64, 0), ir.Constant(I64, v)
            left = b.select(b.icmp_signed("<", left, zero), zero, left)
            left = b.select(b.icmp_signed(">", left, most), most, left)
            nbytes = b.mul(b.trunc(left, I32), _i32(elem))
            if inside is not None:
                nbytes = b.select(inside, nbytes, _i32(0))
            # A run wholly outside still needs a valid source address: the view's base.
            keep = b.icmp_unsigned("!=", nbytes, _i32(0))
            _cp_async(k, dst, b.select(keep, pointer, view.pointer), v * elem, nbytes)

    def unchecked() -> None:
        for dst, pointer, _ in runs:
            if v == 1:
                k.shared_store(buf.type.element, dst, b.load(pointer, typ=element))
            else:
                _cp_async(k, dst, pointer, v * elem, None)

    whole: ir.Value | None = None
    for d in range(len(shape)):
        end = b.add(offsets[d], ir.Constant(I64, shape[d]))
        ok = b.icmp_unsigned("<=", end, view.extents[d])
        whole = ok if whole is None else b.and_(whole, ok)
    with b.if_else(whole) as (then, otherwise):
        with then:
            unchecked()
        with otherwise:
            checked()


def _cp_async(
    k: _KernelLowering, dst: ir.Value, src: ir.Value, size: int, nbytes: ir.Value | None
) -> None:
    """One `cp.async` of `size` bytes; `nbytes` (None: all) are read, the rest zero-filled."""
    cache = "cg" if size == 16 else "ca"
    address = _shared_address(k, dst)
    if nbytes is None:
        _asm(
            k,
            ir.VoidType(),
            [address, src],
            f"cp.async.{cache}.shared.global [$0], [$1], {size};",
            "r,l,~{memory}",
        )
        return
    _asm(
        k,
        ir.VoidType(),
        [address, src, nbytes],
        f"cp.async.{cache}.shared.global [$0], [$1], {size}, $2;",
        "r,l,r,~{memory}",
    )


def _and(b: ir.IRBuilder, x: ir.Value | None, y: ir.Value) -> ir.Value:
    return y if x is None else b.and_(x, y)


def lower_store_shared(k: _KernelLowering, op: Operation) -> None:
    """Each unique owner writes its elements at their (swizzled) places."""
    buf: SharedBuffer = k.values[op.buffer]
    t: TileType = op.value.type
    m = ThreadMap(t.layout, t.shape)
    slot_base = _slot_base(k, buf, k.values[op.slot])
    values = k.values[op.value]
    places = _slot_places(k, m)

    def emit() -> None:
        for (r, c), value in zip(places, values):
            k.shared_store(t.element, k.b.add(slot_base, _swizzled_bytes(k, buf, r, c)), value)

    k.when(k.unique_owner(m), emit)


@dataclass
class WgmmaOperand:
    """A `wgmma` operand: no registers, the slot of the shared buffer it is read from."""

    buffer: SharedBuffer
    slot_base: ir.Value  # i32 byte offset of the slot in the shared array
    transposed: bool = False  # the slot holds the operand's transpose (`tile.load_shared`)


def lower_load_shared(k: _KernelLowering, op: Operation) -> list[Any]:
    buf: SharedBuffer = k.values[op.buffer]
    t: TileType = op.result.type
    slot_base = _slot_base(k, buf, k.values[op.slot])
    transposed = "transposed" in op.attributes
    if isinstance(t.layout, DotOperandLayout) and t.layout.version == 3:
        if t.layout.index == 0 and transposed:  # A stored [K, M]: registers (`lower_wgmma_dot`)
            return [_fragments(k, buf, slot_base, t, transposed)]
        return [WgmmaOperand(buf, slot_base, transposed)]
    if isinstance(t.layout, DotOperandLayout):
        fragments = _fragments(k, buf, slot_base, t, transposed)
        return [fragments if _dot_follows(op) else fragments.load_all()]
    out = []
    for r, c in _slot_places(k, ThreadMap(t.layout, t.shape)):
        if transposed:  # element (r, c) of the result is (c, r) of the slot
            r, c = c, r
        out.append(k.shared_load(t.element, k.b.add(slot_base, _swizzled_bytes(k, buf, r, c))))
    return [out]


def _slot_places(k: _KernelLowering, m: ThreadMap) -> list[tuple[ir.Value, ir.Value]]:
    """Per slot of the thread: its flattened row index and its column index (i32)."""
    b = k.b
    indices = k.dim_indices(m)
    last = len(m.shape) - 1
    strides = [math.prod(m.shape[d + 1 : last]) for d in range(last)]
    places = []
    for slot in range(m.num_slots):
        multi = m.slot_multi_index(slot)
        row: ir.Value = _i32(0)
        for d in range(last):
            term = indices[d][multi[d]]
            if strides[d] != 1:
                term = b.mul(term, _i32(strides[d]))
            row = term if d == 0 else b.add(row, term)
        places.append((row, indices[last][multi[last]]))
    return places


# ---------------------------------------------------------------------------------------------
# Tensor cores


def _warp_coordinates(k: _KernelLowering, warps: tuple[int, ...]) -> tuple[ir.Value, ir.Value]:
    """(warp_m, warp_n) of this thread's warp for an accumulator tiled over `warps`."""
    p = k.prologue
    wn = warps[1]
    return p.lshr(k.warp, _i32(wn.bit_length() - 1)), p.and_(k.warp, _i32(wn - 1))


def _dot_follows(op: Operation) -> bool:
    """Whether the only use of `op`'s result is a dot later in the same block with nothing in
    between that could write shared memory or wait (so its reads may move into the dot)."""
    uses = op.result.uses
    if len(uses) != 1 or not isinstance(uses[0], T.DotOp):
        return False
    dot = uses[0]
    if dot.parent is not op.parent:
        return False
    ops = op.parent.ops
    for between in ops[ops.index(op) + 1 : ops.index(dot)]:
        if between.regions or (
            type(between).__module__ == S.__name__ and not isinstance(between, S.LoadSharedOp)
        ):
            return False
    return True


class _SwizzledAddresses:
    """Byte offsets within a slot of elements `(row_t + row_c, col_t + col_c)`, where `row_t`
    and `col_t` are per-thread values (computed once, in the entry block) and `row_c`, `col_c`
    compile-time constants. When the constants keep the swizzle phase and do not overlap the
    thread's chunk bits, the offset is a per-thread part that depends only on `col_c` plus
    a constant: `row_t * R + ((col_t / vec) ^ phase(row_t) ^ col_c / vec) * 16 + row_c * R`,
    so that in the loop each address is one add of a loop-invariant value (and the constant
    rides in the instruction's immediate offset)."""

    def __init__(self, k: _KernelLowering, buf: SharedBuffer, row_t, col_t, col_t_limit: int):
        self.k, self.buf = k, buf
        self.row_t, self.col_t, self.col_t_limit = row_t, col_t, col_t_limit
        self.layout = buf.layout
        self.cols = buf.slot_shape[-1]
        self.size = element_bytes(buf.type.element)
        self.parts: dict[int, ir.Value] = {}
        p = k.prologue
        L = self.layout
        if L is None or L.max_phase == 1:
            self.linear = p.mul(p.add(p.mul(row_t, _i32(self.cols)), col_t), _i32(self.size))
            return
        self.linear = None
        phase = p.and_(p.lshr(row_t, _i32(L.per_phase.bit_length() - 1)), _i32(L.max_phase - 1))
        chunk = p.lshr(col_t, _i32(L.vec.bit_length() - 1))
        self.thread_chunk = p.xor(chunk, phase)
        self.row_bytes = p.mul(row_t, _i32(self.cols * self.size))

    def splits(self, row_c: int, col_c: int) -> bool:
        L = self.layout
        if L is None or L.max_phase == 1:
            return True
        chunk_c = col_c // L.vec
        span = 1 << max(0, (self.col_t_limit // L.vec - 1).bit_length())
        return (
            row_c % (L.per_phase * L.max_phase) == 0 and col_c % L.vec == 0 and chunk_c % span == 0
        )

    def offset(self, row_c: int, col_c: int) -> tuple[ir.Value, int]:
        """(per-thread part, constant bytes) of the element's offset within the slot."""
        constant = row_c * self.cols * self.size
        if self.linear is not None:
            return self.linear, constant + col_c * self.size
        L = self.layout
        if not self.splits(row_c, col_c):
            b = self.k.b
            row = b.add(self.row_t, _i32(row_c))
            col = b.add(self.col_t, _i32(col_c))
            return _swizzled_bytes(self.k, self.buf, row, col), 0
        chunk_c = col_c // L.vec
        part = self.parts.get(chunk_c)
        if part is None:
            p = self.k.prologue
            chunk = p.xor(self.thread_chunk, _i32(chunk_c)) if chunk_c else self.thread_chunk
            part = p.add(self.row_bytes, p.shl(chunk, _i32((L.vec * self.size).bit_length() - 1)))
            self.parts[chunk_c] = part
        return part, constant


def _fragments(
    k: _KernelLowering, buf: SharedBuffer, slot_base: ir.Value, t: TileType, transposed: bool
) -> Fragments:
    """The `ldmatrix` reads of operand `t` from `buf` (module docstring). A K-major slot (A
    stored [M, K], B stored [N, K]) is read without `.trans`, an MN-major one with it: the
    8x8 matrices of a fragment are the same, addressed in the stored layout."""
    layout: DotOperandLayout = t.layout  # type: ignore[assignment]
    wm, wn = layout.warps_per_cta
    warp_m, warp_n = _warp_coordinates(k, (wm, wn))
    p = k.prologue
    rr = p.and_(k.lane, _i32(7))
    j = p.lshr(k.lane, _i32(3))
    j_lo, j_hi = p.and_(j, _i32(1)), p.lshr(j, _i32(1))
    four = ir.LiteralStructType([I32] * 4)
    slot_address = _shared_address(k, slot_base)

    def ldmatrix(
        where: _SwizzledAddresses, row_c: int, col_c: int, count: int, trans: str
    ) -> list[ir.Value]:
        b = k.b
        part, constant = where.offset(row_c, col_c)
        address = b.add(slot_address, part)
        if constant:
            address = b.add(address, _i32(constant))
        names = ", ".join(f"${i}" for i in range(count))
        out = _asm(
            k,
            four if count == 4 else ir.LiteralStructType([I32] * count),
            [address],
            f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {{{names}}}, [${count}];",
            ",".join(["=r"] * count) + ",r",
        )
        return [b.extract_value(out, i) for i in range(count)]

    if layout.index == 0:
        rows, depth = t.shape
        # lanes 8j..8j+7 address the 8 stored rows of matrix j: j & 1 picks the m half,
        # j >> 1 the k half
        m_half = p.mul(j_lo, _i32(8 * wm))
        m_t = p.add(p.shl(warp_m, _i32(3)), m_half)
        if transposed:  # stored [K, M]: rows are k
            where = _SwizzledAddresses(k, buf, p.add(rr, p.shl(j_hi, _i32(3))), m_t, 16 * wm)
        else:
            where = _SwizzledAddresses(k, buf, p.add(m_t, rr), p.shl(j_hi, _i32(3)), 16)

        def load_a(kk: int) -> dict:
            if transposed:
                return {
                    (mi, kk): ldmatrix(where, 16 * kk, 16 * wm * mi, 4, ".trans")
                    for mi in range(rows // (16 * wm))
                }
            return {
                (mi, kk): ldmatrix(where, 16 * wm * mi, 16 * kk, 4, "")
                for mi in range(rows // (16 * wm))
            }

        return Fragments(depth // 16, load_a)

    depth, cols = t.shape
    # lanes 8j..8j+7 address the 8 stored rows of matrix j: j & 1 picks the k half, j >> 1
    # the n tile
    k_t = p.shl(j_lo, _i32(3))
    n_t = p.add(p.shl(warp_n, _i32(3)), p.mul(j_hi, _i32(8 * wn)))
    if transposed:  # stored [N, K]: rows are n
        where = _SwizzledAddresses(k, buf, p.add(n_t, rr), k_t, 16)
    else:
        where = _SwizzledAddresses(k, buf, p.add(rr, k_t), n_t, 16 * wn)
    n_tiles = cols // (8 * wn)

    def read_b(kk: int, ni: int, count: int) -> list[ir.Value]:
        if transposed:
            return ldmatrix(where, 8 * wn * ni, 16 * kk, count, "")
        return ldmatrix(where, 16 * kk, 8 * wn * ni, count, ".trans")

    def load_b(kk: int) -> dict:
        regs = {}
        for ni in range(0, n_tiles, 2):
            if ni + 1 < n_tiles:
                got = read_b(kk, ni, 4)
                regs[(ni, kk)], regs[(ni + 1, kk)] = got[:2], got[2:]
            else:
                regs[(ni, kk)] = read_b(kk, ni, 2)
        return regs

    return Fragments(depth // 16, load_b)


def lower_mma_dot(k: _KernelLowering, op: Operation) -> list[Any]:
    """`mma.sync.m16n8k16` over the warp tile, for every k-step (module docstring)."""
    b = k.b
    a: Fragments = k.values[op.a]
    bb: Fragments = k.values[op.b]
    acc_t: TileType = op.result.type
    a_t: TileType = op.a.type
    if not isinstance(acc_t.element, FloatType) or acc_t.element.width != 32:
        raise ValueError(f"mma.sync accumulates in f32, not {acc_t.element}")
    kind = str(a_t.element)
    if kind not in ("f16", "bf16") or str(op.b.type.element) != kind:
        raise ValueError(f"mma.sync takes f16 or bf16 operands, not {a_t.element}")
    wm, wn = acc_t.layout.warps_per_cta
    rows, cols = acc_t.shape
    m_tiles, n_tiles, k_steps = rows // (16 * wm), cols // (8 * wn), a_t.shape[1] // 16
    width = 2 * n_tiles  # accumulator slots per row index
    acc = list(k.values[op.acc])
    four = ir.LiteralStructType([F32] * 4)
    text = (
        f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 "
        "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
    )
    for kk in range(k_steps):
        a.load(kk)
        bb.load(kk)
        for mi in range(m_tiles):
            for ni in range(n_tiles):
                slots = [
                    (2 * mi) * width + 2 * ni,
                    (2 * mi) * width + 2 * ni + 1,
                    (2 * mi + 1) * width + 2 * ni,
                    (2 * mi + 1) * width + 2 * ni + 1,
                ]
                out = _asm(
                    k,
                    four,
                    [*a.regs[(mi, kk)], *bb.regs[(ni, kk)], *(acc[s] for s in slots)],
                    text,
                    "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3",
                    side_effect=False,
                )
                for i, s in enumerate(slots):
                    acc[s] = b.extract_value(out, i)
    return [acc]


# ---------------------------------------------------------------------------------------------
# wgmma (sm_90a)

WGMMA_ROWS = 64  # one warpgroup's rows of the accumulator (m64nNk16)
SWIZZLE_ATOM = 1024  # bytes: the 128-byte swizzle repeats every 8 rows of 128 bytes
_SWIZZLE_128B = 1 << 30  # the descriptor's swizzle mode 1, in its high 32 bits (bit 62)


def wgmma_descriptor_low(address: ir.Value, lbo: int, b: ir.IRBuilder) -> ir.Value:
    """The low 32 bits of a matrix descriptor: the start address and the leading byte offset
    (both >> 4). The high word (stride offset 1024, 128-byte swizzle) is a constant."""
    start = b.and_(b.lshr(address, _i32(4)), _i32(0x3FFF))
    return b.or_(start, _i32((lbo >> 4) << 16))


def wgmma_operand_walk(index: int, transposed: bool, depth: int) -> tuple[bool, int, int, int]:
    """How `lower_wgmma_dot` walks operand `index` (0: A, 1: B) of a K tile of `depth` in
    shared memory: (K-major, leading byte offset, bytes per k-step of 16, bytes from one
    warpgroup's 64 rows of A to the next; 0 for B). K-major (A stored [M, K], B stored
    [N, K]): LBO unused (16), a k-step is 32 bytes along the 128-byte row, warpgroup g
    starts 64 rows (8 KiB) on. N-major (B stored [K, N], blocks of 64 columns): LBO is one
    block, a k-step is 16 rows of 128 bytes. (A stored [K, M] comes from registers.)"""
    if index == 0 and transposed:
        raise ValueError("wgmma's A stored [K, M] is read into registers, not by a descriptor")
    if index == 0 or transposed:
        return True, 16, 32, WGMMA_ROWS * 128 if index == 0 else 0
    return False, depth * 128, 16 * 128, 0


def lower_wgmma_dot(k: _KernelLowering, op: Operation) -> list[Any]:
    """`wgmma.mma_async.m64nNk16` for each k-step of 16, B (and A) read from shared memory.

    The accumulator `#mma<version = 3, warps_per_cta = [W, 1]>` is the `#blocked` layout
    ((1, 2), (8, 4), (W, 1)): thread (w, l) holds, for i in 0..1, row 8 w + 8 W i + l / 4.
    wgmma gives warp w rows 16 w + 8 i + l / 4 of the rows as stored, so the A buffer stores
    8-row group L at 2 (L mod W) + L div W (`#shared<..., interleave = 2>`): the two agree.
    A as `a @ b` reads it (K-major, 128-byte rows) and B (N-major, in blocks of 64 columns:
    `col_block = 64`) use the 128-byte swizzle; descriptors: A's stride offset 1024 (8 rows of
    128 bytes), B's leading offset the bytes of one column block, stride offset 1024.
    Warpgroup g reads its 64 rows of A from stored row 64 g. An operand read transposed
    (`tile.load_shared {transposed}`) has the other major-ness: B stored [N, K] is K-major
    (`wgmma_operand_walk`, `tnspB` = 0); A stored [K, M] comes from registers, the
    `ldmatrix.trans` fragments of `mma.sync`'s A, which hold the accumulator's rows as they
    are (`Fragments`; wgmma's register A of warp w is rows 16 w + l / 4 (+ 8) of the
    hardware's, the same as its accumulator's). Register d[4 j + 2 i + c] of n8 block j is the slot of
    row repeat i and column 8 j + 2 (l % 4) + c. One asm statement fences, issues the k-steps,
    commits and waits for them, so LLVM cannot move anything into the asynchronous window.
    """
    a: WgmmaOperand | Fragments = k.values[op.a]
    bop: WgmmaOperand = k.values[op.b]
    acc_t: TileType = op.result.type
    a_t: TileType = op.a.type
    kind = str(a_t.element)
    if kind not in ("f16", "bf16") or str(op.b.type.element) != kind:
        raise ValueError(f"wgmma takes f16 or bf16 operands here, not {a_t.element}")
    if not isinstance(acc_t.element, FloatType) or acc_t.element.width != 32:
        raise ValueError(f"wgmma accumulates in f32 here, not {acc_t.element}")
    n = acc_t.shape[1]
    depth = a_t.shape[1]
    if depth * element_bytes(a_t.element) != 128 or n % 64 or n > 256:
        raise ValueError("wgmma lowering needs K tiles of 128 bytes and N a multiple of 64 <= 256")
    in_registers = isinstance(a, Fragments)  # A stored [K, M]: ldmatrix.trans fragments
    for operand in (bop,) if in_registers else (a, bop):
        offset = operand.buffer.offset
        if offset % SWIZZLE_ATOM or operand.buffer.slot_bytes % SWIZZLE_ATOM:
            raise ValueError(
                f"wgmma operand buffer at byte {offset} (slots of {operand.buffer.slot_bytes}): "
                f"its slots must start on {SWIZZLE_ATOM}-byte boundaries"
            )
    b = k.b
    group = k.prologue.lshr(k.warp, _i32(2))
    # Per operand: where warpgroup g's part starts, the leading byte offset, the bytes one
    # k-step of 16 advances (`wgmma_operand_walk`).
    walks = []
    for index, operand in ((1, bop),) if in_registers else ((0, a), (1, bop)):
        _, lbo, step, group_bytes = wgmma_operand_walk(index, operand.transposed, depth)
        address = _shared_address(k, operand.slot_base)
        if group_bytes:
            address = b.add(address, k.prologue.mul(group, _i32(group_bytes)))
        walks.append((address, lbo, step))
    high = _i32((SWIZZLE_ATOM >> 4) | _SWIZZLE_128B)
    descriptors: list[ir.Value] = []
    for kk in range(depth // 16):
        for address, lbo, step in walks:
            low = wgmma_descriptor_low(b.add(address, _i32(kk * step)), lbo, b)
            wide = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), ir.Constant(I64, 32)))
            descriptors.append(wide)
    trans_b = 0 if bop.transposed else 1  # 0: B is K-major
    a_regs: list[ir.Value] = []
    if in_registers:
        for kk in range(depth // 16):
            a.load(kk)
            a_regs += a.regs[(0, kk)]
    acc = list(k.values[op.acc])
    per_row = n // 4  # slots per row repeat: n/8 column groups x 2
    order = [i * per_row + 2 * j + c for j in range(n // 8) for i in range(2) for c in range(2)]
    count = len(order)
    regs = "{" + ", ".join(f"${r}" for r in range(count)) + "}"
    lines = ["{", ".reg .pred p;", "setp.ne.b32 p, 1, 0;", "wgmma.fence.sync.aligned;"]
    for kk in range(depth // 16):
        if in_registers:  # operands: accumulators, B's descriptors, then A's registers
            first = 2 * count + depth // 16 + 4 * kk
            da = "{" + ", ".join(f"${first + r}" for r in range(4)) + "}"
            db = f"${2 * count + kk}"
            lines.append(
                f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} {regs}, "
                f"{da}, {db}, p, 1, 1, {trans_b};"
            )
            continue
        da, db = f"${2 * count + 2 * kk}", f"${2 * count + 2 * kk + 1}"
        lines.append(
            f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} {regs}, "
            f"{da}, {db}, p, 1, 1, 0, {trans_b};"
        )
    loop = op.parent_op
    deferred = isinstance(loop, scf.ForOp) and any(
        loop.yield_op.operands[j] is op.result for j in deferred_wgmma_slots(loop)
    )
    lines += ["wgmma.commit_group.sync.aligned;"]
    if not deferred:  # else the next barrier, or the wait after the loop, waits
        lines.append("wgmma.wait_group.sync.aligned 0;")
    lines.append("}")
    text = "\n\t".join(lines)
    constraints = ",".join(
        ["=f"] * count
        + [str(r) for r in range(count)]
        + ["l"] * len(descriptors)
        + ["r"] * len(a_regs)
    )
    out = _asm(
        k,
        ir.LiteralStructType([F32] * count),
        [*(acc[s] for s in order), *descriptors, *a_regs],
        text,
        constraints,
    )
    for r, s in enumerate(order):
        acc[s] = b.extract_value(out, r)
    return [acc]
