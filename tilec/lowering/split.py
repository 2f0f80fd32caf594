"""Lowering of split reductions (`tilec.dialects.split`): partials to and from the workspace,
and the ticket that elects the block that combines them.

The workspace and the counters are hidden kernel parameters (global pointers, after every
argument's and before any tensor map's: `tilec.lowering.abi`). Slot `i` starts at byte `i * slot_bytes`; a tile is
stored in it row-major, each element by its unique owner (`st.global`), and read back by every
thread that holds the element, with `ld.relaxed.gpu` (a read that L1 may not have cached).

The ticket is CUDA's threadFenceReduction pattern in the PTX memory model's terms:

    every thread:  fence.acq_rel.gpu        its workspace stores, released at GPU scope
    bar.sync                                 ... all of them before thread 0's ticket
    thread 0:      atom.acq_rel.gpu.global.inc.u32 old, [counters + 4 b], S - 1
                   last = (old == S - 1)
    bar.red.or.pred                          thread 0's verdict to every thread (an OR of
                                             one predicate over the block: no shared memory)
    every thread:  fence.acq_rel.gpu         the other blocks' partials, acquired

`atom.inc` with bound S - 1 counts 0, 1, ..., S - 1 and wraps to 0 on the last arrival, so
the counter is back at 0 for the next launch without another store.

A split scan's ops (`tile.split_ticket`, `tile.publish`, `tile.wait_published`,
`tile.clear_counters`) are the same counters as flags:

    split_ticket:   thread 0: atom.relaxed.gpu.global.inc.u32 (the order of arrival; only
                    forward progress hangs on it, no data), through 4 bytes of the shared
                    scratch and a barrier to every thread
    publish:        every thread: fence.acq_rel.gpu; bar.sync; thread 0: st.release.gpu 1
    wait_published: thread t spins on counters first + t, first + t + threads, ... with
                    ld.acquire.gpu (a nanosleep between tries); bar.sync; fence.acq_rel.gpu
    clear_counters: thread t stores 0 to its counters (st.relaxed.gpu; the kernel's end
                    orders them before the next launch)

The barrier after the waits carries each thread's acquire to the whole block (causality is
transitive through bar.sync, as CUDA's grid synchronisation relies on). Both barriers sit under
uniform control flow: the split count is the same in every thread. The verdict once went
through a static shared-memory word; a kernel with one has its dynamic shared memory placed
after it, which broke the 1024-byte alignment that swizzled TMA and wgmma buffers need (a
split GEMM faulted with a misaligned address, H200, 2026-12-04).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.dialects import split as W
from tilec.dialects.tile_layouts import MmaLayout
from tilec.ir.core import Operation
from tilec.ir.types import i32
from tilec.lowering.exchange import thread_map
from tilec.lowering.layouts import row_major_strides
from tilec.lowering.llvm_types import register_kind

__all__ = [
    "LOWERINGS",
    "lower_last_arrival",
    "lower_workspace_load",
    "lower_workspace_read",
    "lower_workspace_store",
    "split_parameters",
]

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8 = ir.IntType(8)
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)


def split_parameters(lowering: Any) -> tuple[ir.Argument, ir.Argument]:
    """The workspace and counters parameters of the kernel being lowered (after every
    argument's, before any tensor map's: `tilec.lowering.abi.kernel_parameters`)."""
    kinds = {p.kind: arg for arg, p in zip(lowering.fn.args, lowering.abi.parameters)}
    return kinds["workspace"], kinds["counters"]


def _slot_base(lowering: Any, slot: ir.Value, offset: int, slot_bytes: int) -> ir.Value:
    """The address of byte `offset` of slot `slot` (an i64)."""
    b = lowering.b
    workspace, _ = split_parameters(lowering)
    start = b.mul(slot, ir.Constant(I64, slot_bytes))
    if offset:
        start = b.add(start, ir.Constant(I64, offset))
    return b.gep(workspace, [start], source_etype=I8)


def _fence(b: ir.IRBuilder) -> None:
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "fence.acq_rel.gpu;", "~{memory}", True)
    b.call(asm, [])


def _packed(lowering: Any, t: Any) -> int:
    """The vector width (4 or 2 words) of a tile stored as its threads hold it, or 0 for
    row-major. An accumulator tile (`#mma`: every element held by one thread, none
    replicated) of 32-bit words, in a kernel without producer warps, goes to its slot and
    back as its threads hold it -- thread `tid`'s registers `4j .. 4j+3` at words
    `(j * threads + tid) * 4`: a warp moves 512 contiguous bytes an instruction. Only
    `tile.workspace_read` of the same type reads such a slot back (the combine of a split
    GEMM), so the slot's order is the lowering's own choice. Row-major per element, as
    before, took 10 us a 128 KiB partial on the H200 (2026-12-04)."""
    if not isinstance(t.layout, MmaLayout) or getattr(t.element, "width", 0) != 32:
        return 0
    if getattr(lowering.abi, "producer_warps", 0):
        return 0
    count = thread_map(t).num_slots
    threads = lowering.num_warps * 32
    if count * threads * 4 != W.tile_bytes(t):
        return 0  # some element held twice or not at all: not a plain accumulator
    return 4 if count % 4 == 0 else 2 if count % 2 == 0 else 0


def _packed_addresses(lowering: Any, base: ir.Value, count: int, width: int) -> list[ir.Value]:
    """The address of each `width`-word group of this thread's `count` registers (`_packed`)."""
    b = lowering.b
    threads = lowering.num_warps * 32
    thread = b.zext(lowering._sreg("tid.x"), I64)
    addresses = []
    for j in range(count // width):
        word = b.mul(
            b.add(b.mul(ir.Constant(I64, j), ir.Constant(I64, threads)), thread),
            ir.Constant(I64, width),
        )
        addresses.append(b.gep(base, [b.mul(word, ir.Constant(I64, 4))], source_etype=I8))
    return addresses


def _packed_store(lowering: Any, op: Operation, base: ir.Value, width: int) -> None:
    b = lowering.b
    t = op.value.type
    _, _, reg = register_kind(t.element)
    values = [lowering._to_bits(v, reg, t.element) for v in lowering.values[op.value]]
    regs = ", ".join(f"${i + 1}" for i in range(width))
    asm = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [GLOBAL_PTR, *[reg] * width]),
        f"st.global.v{width}.b32 [$0], {{{regs}}};",
        "l," + ",".join(["r"] * width) + ",~{memory}",
        side_effect=True,
    )
    for j, address in enumerate(_packed_addresses(lowering, base, len(values), width)):
        b.call(asm, [address, *values[j * width : (j + 1) * width]])


def _packed_read(lowering: Any, op: Operation, base: ir.Value, width: int) -> list[Any]:
    b = lowering.b
    t = op.result.type
    count = thread_map(t).num_slots
    regs = ", ".join(f"${i}" for i in range(width))
    asm = ir.InlineAsm(
        ir.FunctionType(ir.LiteralStructType([I32] * width), [GLOBAL_PTR]),
        f"ld.relaxed.gpu.global.v{width}.b32 {{{regs}}}, [${width}];",
        ",".join(["=r"] * width) + ",l,~{memory}",
        side_effect=True,
    )
    values = []
    for address in _packed_addresses(lowering, base, count, width):
        words = b.call(asm, [address])
        values += [lowering._from_bits(b.extract_value(words, i), t.element) for i in range(width)]
    return values


def lower_workspace_store(lowering: Any, op: Operation) -> None:
    from tilec.lowering.llvm_types import memory_type

    b = lowering.b
    t = op.value.type
    width = _packed(lowering, t)
    if width:
        base = _slot_base(lowering, lowering.values[op.slot], op.offset, op.slot_bytes)
        _packed_store(lowering, op, base, width)
        return None
    m = thread_map(t)
    base = _slot_base(lowering, lowering.values[op.slot], op.offset, op.slot_bytes)
    flats = lowering.flat_indices(m, row_major_strides(t.shape))
    letter, ptx_type, reg = register_kind(t.element)
    asm = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [GLOBAL_PTR, reg]),
        f"st.global.{ptx_type} [$0], $1;",
        f"l,{letter},~{{memory}}",
        side_effect=True,
    )
    element = memory_type(t.element)

    def emit() -> None:
        for flat, v in zip(flats, lowering.values[op.value]):
            pointer = b.gep(base, [flat], source_etype=element)
            b.call(asm, [pointer, lowering._to_bits(v, reg, t.element)])

    lowering.when(lowering.unique_owner(m), emit)
    return None


def lower_workspace_read(lowering: Any, op: Operation) -> list[Any]:
    from tilec.lowering.llvm_types import memory_type

    b = lowering.b
    t = op.result.type
    m = thread_map(t)
    base = _slot_base(lowering, lowering.values[op.slot], op.offset, op.slot_bytes)
    width = _packed(lowering, t)
    if width:
        return [_packed_read(lowering, op, base, width)]
    flats = lowering.flat_indices(m, row_major_strides(t.shape))
    letter, ptx_type, reg = register_kind(t.element)
    asm = ir.InlineAsm(
        ir.FunctionType(reg, [GLOBAL_PTR]),
        f"ld.relaxed.gpu.global.{ptx_type} $0, [$1];",
        f"={letter},l,~{{memory}}",
        side_effect=True,
    )
    element = memory_type(t.element)
    values = []
    for flat in flats:
        raw = b.call(asm, [b.gep(base, [flat], source_etype=element)])
        values.append(lowering._from_bits(raw, t.element))
    return [values]


def lower_workspace_load(lowering: Any, op: Operation) -> list[Any]:
    from tilec.lowering.llvm_types import constant, memory_type

    b = lowering.b
    t = op.result.type
    if isinstance(t.layout, MmaLayout):
        # Slots of accumulator tiles hold them as their threads do (`_packed`): read back
        # by `tile.workspace_read` only.
        raise ValueError("tile.workspace_load of an #mma tile: the combine reads it by slot")
    m = thread_map(t)
    base = _slot_base(lowering, lowering.values[op.first], op.offset, op.slot_bytes)
    element_bytes = W.tile_bytes(type(t)((1,), t.element))
    strides = (op.slot_bytes // element_bytes, *row_major_strides(t.shape[1:]))
    flats = lowering.flat_indices(m, strides)
    rows = lowering.dim_indices(m)[0]
    count = lowering.values[op.count]
    inside = [b.icmp_signed("<", b.sext(r, I64), count) for r in rows]
    padding = op.attributes["padding"].value
    letter, ptx_type, reg = register_kind(t.element)
    other = lowering._to_bits(
        constant(t.element, int(padding) if isinstance(padding, bool) else padding), reg, t.element
    )
    asm = ir.InlineAsm(
        ir.FunctionType(reg, [GLOBAL_PTR, I1, reg]),
        f"mov.b{reg.width} $0, $3;\n\t@$2 ld.relaxed.gpu.global.{ptx_type} $0, [$1];",
        f"={letter},l,b,{letter},~{{memory}}",
        side_effect=True,
    )
    element = memory_type(t.element)
    values = []
    for slot, flat in zip(range(m.num_slots), flats):
        row = m.slot_multi_index(slot)[0]
        pointer = b.gep(base, [flat], source_etype=element)
        raw = b.call(asm, [pointer, inside[row], other])
        values.append(lowering._from_bits(raw, t.element))
    return [values]


def lower_last_arrival(lowering: Any, op: Operation) -> list[Any]:
    b = lowering.b
    _fence(b)
    lowering.barrier()
    first, old, bound = _ticket(lowering, op, "acq_rel")
    mine = b.and_(first, b.icmp_unsigned("==", old, bound))
    # Thread 0's verdict to every thread: a barrier that ORs one predicate over the block.
    if lowering.barrier_scope is None:
        where = "0"
    else:
        number, threads = lowering.barrier_scope
        where = f"{number}, {threads}"
    vote = ir.InlineAsm(
        ir.FunctionType(I32, [I1]),
        f"{{\n\t.reg .pred q;\n\tbar.red.or.pred q, {where}, $1;\n\tselp.u32 $0, 1, 0, q;\n\t}}",
        "=r,b,~{memory}",
        side_effect=True,
    )
    verdict = b.call(vote, [mine])
    lowering.unfenced_reads = []
    _fence(b)
    return [b.icmp_unsigned("!=", verdict, ir.Constant(I32, 0))]


def _counter(lowering: Any, index: ir.Value) -> ir.Value:
    _, counters = split_parameters(lowering)
    return lowering.b.gep(counters, [index], source_etype=I32)


def _ticket(lowering: Any, op: Operation, order: str) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Thread 0's `atom.<order>.gpu.global.inc.u32` on counter `op.counter` with bound
    `op.count` - 1 (0, 1, ..., count - 1, then back to 0): (thread 0?, the old value -- 0 in
    the other threads --, the bound)."""
    b = lowering.b
    first = b.icmp_unsigned("==", lowering._sreg("tid.x"), ir.Constant(I32, 0))
    counter = _counter(lowering, lowering.values[op.counter])
    bound = b.trunc(b.sub(lowering.values[op.count], ir.Constant(I64, 1)), I32)
    atom = ir.InlineAsm(
        ir.FunctionType(I32, [I1, GLOBAL_PTR, I32]),
        f"mov.u32 $0, 0;\n\t@$1 atom.{order}.gpu.global.inc.u32 $0, [$2], $3;",
        "=r,b,l,r,~{memory}",
        side_effect=True,
    )
    old = b.call(atom, [first, counter, bound])
    return first, old, bound


def lower_split_ticket(lowering: Any, op: Operation) -> list[Any]:
    b = lowering.b
    first, ticket, _ = _ticket(lowering, op, "relaxed")
    lowering.before_scratch_write(op)
    lowering.when(first, lambda: lowering.scratch_store(i32, ir.Constant(I32, 0), ticket))
    lowering.barrier()
    shared = lowering.scratch_load(i32, ir.Constant(I32, 0))
    lowering.after_scratch_read(op)
    return [b.zext(shared, I64)]


def lower_publish(lowering: Any, op: Operation) -> None:
    b = lowering.b
    _fence(b)
    lowering.barrier()
    first = b.icmp_unsigned("==", lowering._sreg("tid.x"), ir.Constant(I32, 0))
    store = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [GLOBAL_PTR]),
        "st.release.gpu.global.u32 [$0], 1;",
        "l,~{memory}",
        side_effect=True,
    )
    counter = _counter(lowering, lowering.values[op.counter])
    lowering.when(first, lambda: b.call(store, [counter]))
    return None


def _each_counter(lowering: Any, op: Operation, name: str, emit) -> None:
    """`emit(index)` in a loop over counters first + t, first + t + threads, ... below
    first + count, t the thread (a loop of LLVM blocks: the counts are run-time values)."""
    b = lowering.b
    threads = ir.Constant(I64, lowering.num_warps * 32)
    start = b.add(lowering.values[op.first], b.zext(lowering._sreg("tid.x"), I64))
    end = b.add(lowering.values[op.first], lowering.values[op.count])
    entry = b.block
    head = lowering.fn.append_basic_block(f"{name}.head")
    body = lowering.fn.append_basic_block(f"{name}.body")
    done = lowering.fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(start, entry)
    b.cbranch(b.icmp_signed("<", i, end), body, done)
    b.position_at_end(body)
    emit(i)
    i.add_incoming(b.add(i, threads), b.block)
    b.branch(head)
    b.position_at_end(done)


def lower_wait_published(lowering: Any, op: Operation) -> None:
    b = lowering.b
    poll = ir.InlineAsm(
        ir.FunctionType(I32, [GLOBAL_PTR]),
        "ld.acquire.gpu.global.u32 $0, [$1];",
        "=r,l,~{memory}",
        side_effect=True,
    )
    pause = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "nanosleep.u32 64;", "", True)

    def spin(i: ir.Value) -> None:
        counter = _counter(lowering, i)
        again = lowering.fn.append_basic_block("wait.spin")
        ready = lowering.fn.append_basic_block("wait.ready")
        b.branch(again)
        b.position_at_end(again)
        flag = b.call(poll, [counter])
        unset = b.icmp_unsigned("==", flag, ir.Constant(I32, 0))
        with b.if_then(unset):
            b.call(pause, [])
        b.cbranch(unset, again, ready)
        b.position_at_end(ready)

    _each_counter(lowering, op, "wait", spin)
    lowering.barrier()
    _fence(b)
    return None


def lower_clear_counters(lowering: Any, op: Operation) -> None:
    b = lowering.b
    store = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [GLOBAL_PTR]),
        "st.relaxed.gpu.global.u32 [$0], 0;",
        "l,~{memory}",
        side_effect=True,
    )
    _each_counter(lowering, op, "clear", lambda i: b.call(store, [_counter(lowering, i)]))
    return None


LOWERINGS = {
    W.SplitTicketOp: lower_split_ticket,
    W.PublishOp: lower_publish,
    W.WaitPublishedOp: lower_wait_published,
    W.ClearCountersOp: lower_clear_counters,
}
