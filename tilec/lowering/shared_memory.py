"""Shared buffers and asynchronous copies: where each `tile.alloc_shared` lives, the swizzled
layouts of its slots, and the lowering of the ops that fill and read them as plain memory
(`tile.async_copy`, commit, wait, `tile.store_shared`); the tensor cores' reads are in
`tilec.lowering.tensorcore` and `tilec.lowering.wgmma`.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import scf
from tilec.dialects import shared as S
from tilec.dialects.tile import DotOperandLayout, SharedLayout
from tilec.dialects.tma import MbarrierInitOp, TmaCopyOp
from tilec.ir.core import Operation
from tilec.ir.types import SharedType, TileType
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
    "interleaved",
    "scratch_bases",
    "scratch_bases_for",
    "scratch_fences",
    "shared_bytes",
    "slot_bytes",
    "stored_row",
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


def slot_bytes(t: SharedType) -> int:
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
            end = max(end, attr.value + slot_bytes(op.result.type) * op.result.type.shape[0])
    for op in allocs:
        if op not in offsets:
            offsets[op] = _aligned(end)
            end = offsets[op] + slot_bytes(op.result.type) * op.result.type.shape[0]
    return offsets


def buffer_bytes(kernel: Operation) -> int:
    """Bytes of shared memory the kernel's buffers take (the scratch starts here)."""
    end = 0
    for op, offset in buffer_offsets(kernel).items():
        t = op.result.type
        end = max(end, offset + slot_bytes(t) * t.shape[0])
    attr = kernel.attributes.get("tilec.shared_bytes")
    if attr is not None:
        end = max(end, attr.value)
    return _aligned(end) if end else 0


def buffer_live_ranges(kernel: Operation) -> tuple[list[Operation], dict[Operation, tuple]]:
    """The kernel's ops in program order, and for each `tile.alloc_shared` the first and last
    position at which its bytes are in use. A use inside a loop keeps the buffer in use for
    the whole outermost loop around it (the next iteration uses it again), except loops each
    of whose iterations fills it before reading it (`_loops_refilling`); a buffer that
    `tile.async_copy` fills stays in use until the next `tile.async_wait 0` (a copy in flight
    still writes it). smem-placement places buffers and the lowering places its scratch by
    these same ranges."""
    ops = list(kernel.walk())
    position = {id(op): i for i, op in enumerate(ops)}

    loop_end: dict[int, int] = {}

    def span(use: Operation, refilled: set[int]) -> tuple[int, int]:
        outer = None
        parent = use.parent_op
        while parent is not None and parent is not kernel:
            if isinstance(parent, scf.ForOp) and id(parent) not in refilled:
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
        refilled = _loops_refilling(op, position)
        spans = [span(u, refilled) for u in _buffer_uses(op)] or [
            (position[id(op)], position[id(op)])
        ]
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


def _loops_refilling(alloc: Operation, position: dict[int, int]) -> set[int]:
    """The loops (by `id`) each of whose iterations fills the buffer before it reads it: the
    buffer's first use writes a whole slot (the `tile.async_copy` of a pipeline's prologue,
    or a `tile.store_shared`, for the loops around its own) in a block that holds every other
    use, so an iteration of such a loop starts on fresh data, and the bytes are free between
    one iteration's last use and the next one's first (a K loop run once per expert: the
    conversions after it may reuse its buffers)."""
    uses = sorted(alloc.result.uses, key=lambda u: position[id(u)])
    whole = (S.AsyncCopyOp, TmaCopyOp, S.StoreSharedOp, MbarrierInitOp)  # write every slot
    if not uses or not isinstance(uses[0], whole):
        return set()
    block = uses[0].parent
    for use in uses[1:]:
        inside = use
        while inside is not None and inside.parent is not block:
            inside = inside.parent_op
        if inside is None:
            return set()
    loops = []
    parent = uses[0].parent_op
    while parent is not None:
        if isinstance(parent, scf.ForOp):
            loops.append(id(parent))
        parent = parent.parent_op
    # A store's own loop keeps the buffer for all of it, as before the pipeline makes the
    # store a prologue before that loop: the same bytes as it will need, and no sharing
    # between buffers of one iteration (wgmma may still be reading one as the next is stored).
    if isinstance(uses[0], S.StoreSharedOp):
        loops = loops[1:]
    return set(loops)


def _buffer_uses(alloc: Operation) -> list[Operation]:
    """The ops that touch `alloc`'s bytes: its uses, and the uses of a `tile.load_shared` of it
    that reads no values but a wgmma operand (`#dot_operand` version 3: the descriptor's
    address, which the dots read through wherever they are -- attention's q read before the
    loop by every step's dot)."""
    uses = list(alloc.result.uses)
    for use in alloc.result.uses:
        if isinstance(use, S.LoadSharedOp) and _descriptor_operand(use.result.type):
            uses.extend(use.result.uses)
    return uses


def _descriptor_operand(t: Any) -> bool:
    layout = getattr(t, "layout", None)
    return isinstance(layout, DotOperandLayout) and layout.version == 3


def scratch_bases_for(
    kernel: Operation, spans: dict[Operation, tuple[int, int]]
) -> dict[Operation, int]:
    """Where each op that needs scratch (`exchange.op_scratch_bytes`) starts it, given the
    bytes each buffer spans (`spans`: start, end): the lowest aligned offset whose scratch
    overlaps no buffer still in use at that op (`buffer_live_ranges`) -- below a buffer that
    outlives the op (a cluster's mbarriers, live to the kernel's end) when the bytes before
    it are free."""
    ops, ranges = buffer_live_ranges(kernel)
    bases: dict[Operation, int] = {}
    for i, op in enumerate(ops):
        need = op_scratch_bytes(op)
        if need == 0:
            continue
        live = sorted(span for alloc, span in spans.items() if i <= ranges[alloc][1])
        base = 0
        for start, end in live:
            if base + need <= start:
                break
            base = max(base, _aligned(end, SCRATCH_ALIGNMENT))
        bases[op] = base
    return bases


def scratch_bases(kernel: Operation) -> dict[Operation, int]:
    """`scratch_bases_for` the kernel's buffers where they are (`buffer_offsets`)."""
    spans = {}
    for alloc, offset in buffer_offsets(kernel).items():
        t = alloc.result.type
        spans[alloc] = (offset, offset + slot_bytes(t) * t.shape[0])
    return scratch_bases_for(kernel, spans)


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
        return slot_bytes(self.type)


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


def lower_alloc_shared(k: _KernelLowering, op: Operation) -> list[Any]:
    return [SharedBuffer(k.buffer_offsets[op], op.result.type)]


def lower_async_commit(k: _KernelLowering, op: Operation) -> None:
    _asm(k, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}")


def lower_async_wait(k: _KernelLowering, op: Operation) -> None:
    _asm(k, ir.VoidType(), [], f"cp.async.wait_group {op.pending};", "~{memory}")


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
