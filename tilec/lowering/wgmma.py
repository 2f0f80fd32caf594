"""`wgmma` on sm_90a: the warpgroup dot, its shared-memory matrix descriptors, and the
asynchronous window it opens (issued without waiting in a pipelined loop, completed at the
next barrier or at the loop's exit). `lower_wgmma_dot` documents the operand layouts and
the register order; `wgmma_operand_walk` each descriptor's walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import scf
from tilec.dialects import shared as S
from tilec.dialects import tile as T
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE
from tilec.dialects.tile import DotOperandLayout, MmaLayout
from tilec.dialects.tma import MbarrierInvalOp, MbarrierWaitOp
from tilec.dialects.warp_specialize import (
    FIRST_TURN_BARRIER,
    PINGPONG_ATTRIBUTE,
    enclosing_region,
)
from tilec.ir.core import Operation, OpResult
from tilec.ir.types import TileType
from tilec.lowering.layouts import (
    element_bytes,
)

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering
from tilec.lowering.shared_memory import (
    I64,
    _asm,
    _i32,
    _shared_address,
)
from tilec.lowering.tensorcore import (
    Fragments,
    WgmmaOperand,
)

__all__ = [
    "SWIZZLE_ATOM",
    "WGMMA_ROWS",
    "carried_in_flight",
    "chained_wgmma_slots",
    "deferred_wgmma_slots",
    "drain_loop",
    "finish_iteration",
    "is_wgmma_dot",
    "lower_barrier",
    "lower_wgmma_dot",
    "pipelined_loop",
    "uses_wgmma",
    "wgmma_descriptor_low",
    "wgmma_operand_walk",
    "wgmma_step_offset",
]


def is_wgmma_dot(op: Operation) -> bool:
    """Whether `op` is a `tile.dot` the lowering turns into `wgmma` (sm_90a): a version-3
    accumulator, B read from its shared buffer (`#dot_operand` version 3), A either read from
    its buffer too or held in registers as `mma.sync` A fragments (version 2: wgmma's
    register-A form takes the same registers)."""
    return (
        isinstance(op, T.DotOp)
        and isinstance(op.result.type.layout, MmaLayout)
        and op.result.type.layout.version == 3
        and isinstance(op.a.type.layout, DotOperandLayout)
        and op.a.type.layout.version in (2, 3)
        and isinstance(op.b.type.layout, DotOperandLayout)
        and op.b.type.layout.version == 3
    )


def uses_wgmma(kernel: Operation) -> bool:
    """Whether the kernel has a `wgmma` dot (`_KernelLowering.wgmma` holds the answer)."""
    return any(is_wgmma_dot(op) for op in kernel.walk())


def lower_barrier(k: _KernelLowering, op: Operation) -> None:
    loop = op.parent_op
    if isinstance(loop, scf.ForOp) and carried_in_flight(loop) and not scf.dots_in_flight(loop):
        # Last iteration's wgmmas must have finished reading their slot before anyone
        # passes the barrier and refills it (`lower_wgmma_dot`).
        args = loop.body.block.args
        for j in carried_in_flight(loop):
            arg = args[1 + j]
            k.values[arg] = _wgmma_wait(k, k.values[arg])
    if k.wgmma:
        # Shared memory written by this thread (landed cp.async copies, st.shared) that wgmma
        # reads next goes through the async proxy: make it visible there before the barrier.
        _asm(k, ir.VoidType(), [], "fence.proxy.async.shared::cta;", "")
    k.barrier()


def finish_iteration(k: _KernelLowering, loop: Operation, yielded: list[Any]) -> list[Any]:
    """The values one iteration of `loop` passes to the next (`for_op`, before the back
    edge): the wgmmas in flight whose accumulator the next iteration reads by other
    instructions first (`carried_in_flight` says which it does not) are waited for here."""
    if isinstance(loop, scf.ForOp):
        carried = carried_in_flight(loop)
        for j in deferred_wgmma_slots(loop):
            if j not in carried:
                yielded[j] = _wgmma_wait(k, yielded[j])
    return yielded


def drain_loop(k: _KernelLowering, loop: Operation, results: list[Any]) -> list[Any]:
    """The values `loop` leaves when its last iteration ends (`for_op`'s `loop.exit`): the
    wgmmas of that iteration still in flight (`carried_in_flight`) are waited for here,
    before the path where the loop never ran joins with its initial values."""
    if isinstance(loop, scf.ForOp):
        for j in carried_in_flight(loop):
            results[j] = _wgmma_wait(k, results[j])
    return results


def deferred_wgmma_slots(loop: Operation) -> list[int]:
    """The loop-carried values of `loop` that a `wgmma` dot computes without waiting: those
    the dot's result feeds straight to the `scf.yield` of a loop that the pipeline pass made
    (its body starts with a wait and a barrier, an `async_wait` follows it).
    `lower_wgmma_dot` then issues without waiting, and the wait comes later: at the barrier
    at the top of the next iteration (`carried_in_flight`), or at the end of the iteration,
    after the copies that follow the dot were issued (`finish_iteration`)."""
    if not pipelined_loop(loop):
        return []
    return [
        j
        for j, v in enumerate(loop.yield_op.operands)
        if isinstance(v, OpResult)
        and v.op.parent_op is loop
        and is_wgmma_dot(v.op)
        and all(u is loop.yield_op for u in v.uses)
    ]


def pipelined_loop(loop: Operation) -> bool:
    """Whether `loop` has the shape `pipeline` gives a loop: its body waits for its step's
    copies (`tile.async_wait`; with the TMA unit, index arithmetic then `tile.mbarrier_wait`)
    and synchronizes before anything else, and the loop is followed by the drain of its
    copies (`tile.async_wait`; with the TMA unit, a barrier and `tile.mbarrier_inval`)."""
    body = loop.body.block.ops
    block = loop.block
    after = block.ops[block.ops.index(loop) + 1 :] if block is not None else []
    waits = [i for i, op in enumerate(body) if isinstance(op, (S.AsyncWaitOp, MbarrierWaitOp))]
    if waits and _consumer_loop(loop, body, waits[0], after):
        return True
    if not waits or len(body) <= waits[0] + 2 or not isinstance(body[waits[0] + 1], S.BarrierOp):
        return False
    if isinstance(body[waits[0]], S.AsyncWaitOp):
        if waits[0] != 0:
            return False
        return bool(after) and isinstance(after[0], S.AsyncWaitOp)
    if any(isinstance(op, T.DotOp) for op in body[: waits[0]]):
        return False
    return _drained(loop)


def _consumer_loop(loop: Operation, body: list, wait: int, after: list) -> bool:
    """A warp-specialized consumer's loop (passes/pipeline_warp_specialize.py): in the
    consumer region, its body waits on its stage's mbarrier before any dot (no barrier: the
    producer refills a stage only once the consumers release it, `tile.mbarrier_arrive`), and
    a barrier follows it."""
    found = enclosing_region(loop)
    return (
        found is not None
        and not found[1]
        and isinstance(body[wait], MbarrierWaitOp)
        and not any(isinstance(op, T.DotOp) for op in body[:wait])
        and bool(after)
        and isinstance(after[0], S.BarrierOp)
    )


def _drained(loop: Operation) -> bool:
    """Whether the TMA copies of `loop` are drained after it (a barrier, then
    `tile.mbarrier_inval`): right after it, or, for the main loop of persistent blocks
    (passes/pipeline_persistent.py), after the loop that walks the tiles around it -- the next
    tile's copies and this tile's epilogue come between, and `drain_loop` waits for the
    wgmmas still in flight at the main loop's exit all the same."""
    block = loop.block
    after = block.ops[block.ops.index(loop) + 1 :] if block is not None else []
    if (
        len(after) > 1
        and isinstance(after[0], S.BarrierOp)
        and isinstance(after[1], MbarrierInvalOp)
    ):
        return True
    walk = loop.parent_op
    kernel = walk.parent_op if walk is not None else None
    return (
        isinstance(walk, scf.ForOp)
        and scf.is_range_loop(walk)
        and kernel is not None
        and PERSISTENT_ATTRIBUTE in kernel.attributes
        and _drained(walk)
    )


def chained_wgmma_slots(loop: Operation) -> list[int]:
    """The loop-carried values of `loop` that a wgmma dot updates in place: the yielded value
    is the dot's result, used only by the yield, and the carried argument is used only by
    the same dot, as its accumulator (a GEMM's chain)."""
    args = loop.body.block.args
    found = []
    for j, v in enumerate(loop.yield_op.operands):
        if not (isinstance(v, OpResult) and v.op.parent_op is loop and is_wgmma_dot(v.op)):
            continue
        uses = args[1 + j].uses
        if (
            all(u is loop.yield_op for u in v.uses)
            and len(uses) == 1
            and uses[0] is v.op
            and v.op.acc is args[1 + j]
        ):
            found.append(j)
    return found


def carried_in_flight(loop: Operation) -> list[int]:
    """The deferred slots whose wgmmas stay in flight across the back edge, waited for at the
    next iteration's barrier (before any thread refills the slot they read) and at the
    loop's exit (`drain_loop`): those whose carried value only the same dot reads next, as
    its accumulator (a GEMM's chain, updated in place). An accumulator that other
    instructions read first (attention's `acc * alpha`) is waited for at the end of its
    iteration instead: across the back edge ptxas may copy its registers, and a copy of a
    wgmma's accumulator before its wait serializes every wgmma of the kernel (C7514, measured
    on attention: a wait after each instruction)."""
    chained = set(chained_wgmma_slots(loop))
    return [j for j in deferred_wgmma_slots(loop) if j in chained]


WARPGROUP_THREADS = 128


def _takes_turns(op: Operation) -> bool:
    """Whether `op` is the first wgmma dot of a loop whose warpgroups take turns
    (`tilec.pingpong`, passes/pipeline_pingpong.py)."""
    loop = op.parent_op
    if not (isinstance(loop, scf.ForOp) and PINGPONG_ATTRIBUTE in loop.attributes):
        return False
    return next(d for d in loop.body.block.ops if is_wgmma_dot(d)) is op


def pingpong_barriers(k: _KernelLowering) -> list[ir.Value]:
    """This warpgroup's named barrier (2 + g) and the next warpgroup's (2 + (g + 1) % G), for
    warpgroup g of the G consumer warpgroups."""
    b = k.b
    groups = k.abi.num_warps // 4
    g = b.lshr(k.warp, _i32(2))
    own = b.add(g, _i32(FIRST_TURN_BARRIER))
    after = b.add(g, _i32(1))
    wrapped = b.select(b.icmp_unsigned("==", after, _i32(groups)), _i32(0), after)
    return [own, b.add(wrapped, _i32(FIRST_TURN_BARRIER))]


def _wgmma_wait(k: _KernelLowering, values: list[ir.Value]) -> list[ir.Value]:
    """`wgmma.wait_group 0`, with the accumulator registers it completes tied through it (so
    nothing reads them before)."""
    count = len(values)
    kind = _register_kind(values[0].type)
    out = _asm(
        k,
        ir.LiteralStructType([values[0].type] * count),
        list(values),
        "wgmma.wait_group.sync.aligned 0;",
        ",".join([f"={kind}"] * count + [str(r) for r in range(count)]),
    )
    return [k.b.extract_value(out, r) for r in range(count)]


def _register_kind(t: ir.Type) -> str:
    """The inline-asm constraint letter of an accumulator register: f32 or s32."""
    return "f" if isinstance(t, ir.FloatType) else "r"


WGMMA_ROWS = 64  # one warpgroup's rows of the accumulator (m64nNk16)
SWIZZLE_ROW = 128  # bytes: one row of a 128-byte swizzle atom
SWIZZLE_ATOM = 1024  # bytes: the 128-byte swizzle repeats every 8 rows of 128 bytes
_SWIZZLE_128B = 1 << 30  # the descriptor's swizzle mode 1, in its high 32 bits (bit 62)


def wgmma_descriptor_low(address: ir.Value, lbo: int, b: ir.IRBuilder) -> ir.Value:
    """The low 32 bits of a matrix descriptor: the start address and the leading byte offset
    (both >> 4). The high word (stride offset 1024, 128-byte swizzle) is a constant."""
    start = b.and_(b.lshr(address, _i32(4)), _i32(0x3FFF))
    return b.or_(start, _i32((lbo >> 4) << 16))


K_STEP = 16  # the k of wgmma.m64nNk16 for 16-bit operands
K_MAJOR_STEP = 32  # bytes a k-step advances along a K-major operand's 128-byte row
# The instruction of each operand kind: its PTX types (accumulator, A, B), and whether it takes
# the immediate scales (-1 negates) and transpose operands. 8-bit operands go k32 (32 bytes a
# k-step, as 16-bit ones do), K-major only (no transpose operands).
_WGMMA_KINDS = {  # operand element: (PTX types, accumulator element, scales, transposes)
    "f16": ("f32.f16.f16", "f32", True, True),
    "bf16": ("f32.bf16.bf16", "f32", True, True),
    "f8e4m3": ("f32.e4m3.e4m3", "f32", True, False),
    "f8e5m2": ("f32.e5m2.e5m2", "f32", True, False),
    "i8": ("s32.s8.s8", "i32", False, False),
}


def wgmma_operand_walk(
    index: int, transposed: bool, depth: int, rows: int = WGMMA_ROWS, element_size: int = 2
) -> tuple[bool, int, int, int]:
    """How `lower_wgmma_dot` walks operand `index` (0: A, 1: B) of a K tile of `depth`
    elements of `element_size` bytes in shared memory, the operand having `rows` rows along M
    or N: (K-major, leading byte
    offset, bytes of one column block of 64 -- what a K-major walk adds every 4 k-steps, 0
    for N-major --, bytes from one warpgroup's 64 rows of A to the next; 0 for B).
    K-major (A stored [M, K], B stored [N, K]): LBO unused (16), a k-step is 32 bytes along
    the 128-byte row, a K tile wider than 64 is stored in blocks of 64 columns (`col_block`)
    each holding every row, warpgroup g starts 64 rows (8 KiB) on. N-major (B stored [K, N],
    blocks of 64 columns): LBO is one block, a k-step is 16 rows of 128 bytes. M-major (A
    stored [K, M], read so only where the accumulator keeps wgmma's own row order): the same
    walk, warpgroup g starting at column block g (`depth` rows of 128 bytes on).
    `wgmma_step_offset` turns a walk into a k-step's bytes."""
    if index == 0 and transposed:
        return False, depth * SWIZZLE_ROW, 0, depth * SWIZZLE_ROW
    if index == 0 or transposed:
        block = rows * SWIZZLE_ROW if depth * element_size > SWIZZLE_ROW else 0
        return True, 16, block, WGMMA_ROWS * SWIZZLE_ROW if index == 0 else 0
    return False, depth * SWIZZLE_ROW, 0, 0


def wgmma_step_offset(k_major: bool, block_bytes: int, kk: int) -> int:
    """Bytes from an operand's start to k-step `kk` (32 bytes of each row: 16 elements of 2
    bytes, or 32 of 1) of its walk."""
    if not k_major:
        return kk * K_STEP * SWIZZLE_ROW  # 16 rows of 128 bytes
    per_block = SWIZZLE_ROW // K_MAJOR_STEP
    return (kk // per_block) * block_bytes + (kk % per_block) * K_MAJOR_STEP


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
    (`wgmma_operand_walk`, `tnspB` = 0); a K tile wider than 64 is walked block by block
    (`wgmma_step_offset`). An A stored [K, M] is read M-major (`tnspA` = 1) where the
    accumulator keeps wgmma's own rows (`natural_rows`: thread (w, l) holds rows 16 w + 8 i +
    l / 4, so A's buffer is in the tensor's order, column block g for warpgroup g). An A held
    in registers (`#dot_operand` version 2: stored [K, M] under the twin's row order
    and read by `ldmatrix.trans`, staged once before the loop and read by `ldmatrix`, or
    repacked from another dot's accumulator) is the fragments of `mma.sync`'s A, which hold
    the accumulator's rows as they are (`Fragments`; wgmma's register A of warp w is rows 16 w + l / 4 (+ 8) of the
    hardware's, the same as its accumulator's). Register d[4 j + 2 i + c] of n8 block j is the slot of
    row repeat i and column 8 j + 2 (l % 4) + c. One asm statement fences, issues the k-steps,
    commits and waits for them, so LLVM cannot move anything into the asynchronous window.
    """
    a: WgmmaOperand | Fragments = k.values[op.a]
    bop: WgmmaOperand = k.values[op.b]
    acc_t: TileType = op.result.type
    a_t: TileType = op.a.type
    kind = str(a_t.element)
    if kind not in _WGMMA_KINDS or str(op.b.type.element) != kind:
        raise ValueError(f"wgmma takes f16, bf16, f8 or i8 operands, not {a_t.element}")
    types, accumulator, scaled, transposable = _WGMMA_KINDS[kind]
    if str(acc_t.element) != accumulator:
        raise ValueError(
            f"wgmma of {kind} operands accumulates in {accumulator}, not {acc_t.element}"
        )
    size = element_bytes(a_t.element)
    n = acc_t.shape[1]
    depth = a_t.shape[1]
    row_bytes = depth * size
    steps = row_bytes // K_MAJOR_STEP  # k-steps of 32 bytes: k16 (16-bit) or k32 (8-bit)
    instr_k = K_MAJOR_STEP // size
    if not transposable and (isinstance(a, Fragments) or not bop.transposed or a.transposed):
        raise ValueError(f"wgmma reads {kind} operands from shared memory K-major only")
    if row_bytes % SWIZZLE_ROW or n % 64 or n > 256:
        raise ValueError(
            "wgmma lowering needs K tiles of a multiple of 128 bytes and N a multiple of 64 <= 256"
        )
    in_registers = isinstance(a, Fragments)  # A held in registers as mma.sync A fragments
    m_major = not in_registers and a.transposed
    if m_major != acc_t.layout.natural_rows:
        raise ValueError(
            "wgmma reads an A stored [K, M] by descriptor exactly where the accumulator keeps "
            f"wgmma's own row order (natural_rows): A {'M' if m_major else 'K'}-major, "
            f"accumulator {acc_t.layout}"
        )
    warps = acc_t.layout.warps_per_cta[0]
    if in_registers and acc_t.shape[0] != 16 * warps:
        raise ValueError(
            f"wgmma's A from registers needs 16 rows a warp (M = {16 * warps}), not M = "
            f"{acc_t.shape[0]}"
        )
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
        rows = acc_t.shape[index]
        major, lbo, block, group_bytes = wgmma_operand_walk(
            index, operand.transposed, depth, rows, size
        )
        address = _shared_address(k, operand.slot_base)
        if group_bytes:
            address = b.add(address, k.prologue.mul(group, _i32(group_bytes)))
        walks.append((address, lbo, major, block))
    high = _i32((SWIZZLE_ATOM >> 4) | _SWIZZLE_128B)
    descriptors: list[ir.Value] = []
    # Each operand's descriptor is built once; a k-step adds its bytes / 16 to the start
    # address field (the address >> 4 in the low 14 bits): shared addresses are below 2^18
    # (228 KiB), so the sum never carries out of the field, and one add replaces the shift,
    # mask and or of a new descriptor (20 descriptors a step of attention at d128).
    starts = [wgmma_descriptor_low(address, lbo, b) for address, lbo, _, _ in walks]
    for kk in range(steps):
        for (_, _, major, block), start in zip(walks, starts):
            step = wgmma_step_offset(major, block, kk)
            assert step % 16 == 0, step
            low = b.add(start, _i32(step >> 4)) if step else start
            wide = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), ir.Constant(I64, 32)))
            descriptors.append(wide)
    trans_b = 0 if bop.transposed else 1  # 0: B is K-major
    trans_a = 1 if m_major else 0  # 1: A is M-major
    a_regs: list[ir.Value] = []
    if in_registers:
        for kk in range(steps):
            a.load(kk)
            a_regs += a.regs[(0, kk)]
    acc = list(k.values[op.acc])
    per_row = n // 4  # slots per row repeat: n/8 column groups x 2
    order = [i * per_row + 2 * j + c for j in range(n // 8) for i in range(2) for c in range(2)]
    count = len(order)
    regs = "{" + ", ".join(f"${r}" for r in range(count)) + "}"
    turns = None  # the asm operands of this warpgroup's named barrier and the next one's
    if _takes_turns(op):
        first = 2 * count + len(descriptors) + len(a_regs)
        turns = (first, first + 1)
    lines = ["{", ".reg .pred p;", "setp.ne.b32 p, 1, 0;"]
    if turns is not None:
        lines.append(f"bar.sync ${turns[0]}, {2 * WARPGROUP_THREADS};")
    lines.append("wgmma.fence.sync.aligned;")
    instruction = f"wgmma.mma_async.sync.aligned.m64n{n}k{instr_k}.{types}"
    scales = ", 1, 1" if scaled else ""
    for kk in range(steps):
        if in_registers:  # operands: accumulators, B's descriptors, then A's registers
            first = 2 * count + steps + 4 * kk
            da = "{" + ", ".join(f"${first + r}" for r in range(4)) + "}"
            db = f"${2 * count + kk}"
            lines.append(f"{instruction} {regs}, {da}, {db}, p{scales}, {trans_b};")
            continue
        da, db = f"${2 * count + 2 * kk}", f"${2 * count + 2 * kk + 1}"
        transposes = f", {trans_a}, {trans_b}" if transposable else ""
        lines.append(f"{instruction} {regs}, {da}, {db}, p{scales}{transposes};")
    loop = op.parent_op
    deferred = isinstance(loop, scf.ForOp) and any(
        loop.yield_op.operands[j] is op.result for j in deferred_wgmma_slots(loop)
    )
    lines += ["wgmma.commit_group.sync.aligned;"]
    if turns is not None:  # the next warpgroup's turn, before this one waits for its dots
        lines.append(f"bar.arrive ${turns[1]}, {2 * WARPGROUP_THREADS};")
    if not deferred:  # else the next barrier, or the wait after the loop, waits
        lines.append("wgmma.wait_group.sync.aligned 0;")
    elif scf.dots_in_flight(loop) and any(
        loop.yield_op.operands[j] is op.result for j in carried_in_flight(loop)
    ):  # the previous iteration's group is done: the slot it read may be refilled
        lines.append("wgmma.wait_group.sync.aligned 1;")
    lines.append("}")
    text = "\n\t".join(lines)
    register = _register_kind(acc[0].type)
    barrier_ids = [] if turns is None else pingpong_barriers(k)
    constraints = ",".join(
        [f"={register}"] * count
        + [str(r) for r in range(count)]
        + ["l"] * len(descriptors)
        + ["r"] * len(a_regs)
        + ["r"] * len(barrier_ids)
    )
    out = _asm(
        k,
        ir.LiteralStructType([acc[0].type] * count),
        [*(acc[s] for s in order), *descriptors, *a_regs, *barrier_ids],
        text,
        constraints,
    )
    for r, s in enumerate(order):
        acc[s] = b.extract_value(out, r)
    return [acc]
