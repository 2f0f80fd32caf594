"""Writing a 16-bit tile held in tensor-core fragments to the shared scratch with `stmatrix`.

A GEMM's epilogue converts its f16/bf16 result from the accumulator's layout (`#mma`: a lane
holds two adjacent columns of a row, rows 8 apart) to a coalesced one through the shared
scratch (`_KernelLowering.remap`). Written element by element, LLVM pairs the two columns into
one 4-byte `st.shared` a pair: a 128 x 256 bf16 tile is 64 stores a thread. On Hopper the
epilogue's shared-memory exchange is where one block an SM stalls after its loop (ncu on bmm
8 x 1024^3: 23% of the stall samples in the epilogue, on MIO throttle; docs/benchmarks.md).
`stmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_90) writes four 8 x 8 matrices of 16-bit
elements a warp in one instruction: each lane gives four registers (a pair of adjacent columns
of each matrix, the fragment order `mma` leaves them in) and the address of one matrix row
(16 contiguous bytes) -- a quarter of the instructions.

`stmatrix_plan` reads from the tile's thread map (numbers at compile time, nothing assumed
about the layout's name) whether every element is in such a fragment: for each slot the
lane's element is (r0 + lane / 4, c0 + 2 (lane % 4)) with (r0, c0) the same in every lane of
a warp, c0 a multiple of 8, and the next column in another slot of the same thread. Matrices
go to instructions four at a time in order of their corners, and every instruction must place
its four alike (relative to its first, in every warp) -- a wgmma accumulator's warp holds rows
r and r + 64 of column blocks c and c + 8, an mma.sync one's rows r and r + 8. The scratch
must put each matrix row's 16 bytes contiguously and 16-byte aligned (unit column stride, a
row stride of a multiple of 8 elements: the remap's padded rows are). No copies (a replicated
layout keeps element stores).

Lane l gives the address of row l % 8 of matrix l / 8 (`lane_shift`): the flat index its
instruction's first slot has in lane l, plus the rows and columns from the element that slot
holds there to the row lane l must name. tests/unit/test_stmatrix.py runs the instruction's
definition over every lane in numpy and checks that each element lands where the element
stores put it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from tilec.ir.types import TileType
from tilec.lowering.layouts import WARP_SIZE, element_bytes
from tilec.lowering.llvm_types import I32

__all__ = ["StmatrixPlan", "lane_shift", "stmatrix_plan", "store_matrices"]

ARCHES = ("sm_90", "sm_90a")


@dataclass(frozen=True)
class StmatrixPlan:
    """Per `stmatrix.x4`, the first slot of each of its four matrices' pairs (in the order
    the instruction takes them); `partner[s]`: the slot with the column after slot s's;
    `offsets`: where each matrix of an instruction starts in the scratch, relative to its
    first (the same for every instruction)."""

    squares: tuple[tuple[int, ...], ...]
    partner: dict[int, int]
    row_stride: int
    offsets: tuple[int, ...]  # where each matrix starts, in elements after the first's


def stmatrix_plan(t: TileType, strides: tuple[int, ...], arch: str) -> StmatrixPlan | None:
    """How to write `t` (thread map from its layout) into a scratch of element `strides`
    with `stmatrix` (module docstring), or None where it cannot."""
    from tilec.lowering.exchange import thread_map

    if arch not in ARCHES or t.rank != 2 or element_bytes(t.element) != 2:
        return None
    if len(strides) != 2 or strides[1] != 1 or strides[0] % 8:
        return None
    m = thread_map(t)
    if m.replicated or m.num_threads % WARP_SIZE:
        return None
    rows, cols = m.indices()
    slots = [m.slot_multi_index(s) for s in range(m.num_slots)]
    r = np.stack([rows[:, k[0]] for k in slots], axis=1)  # [threads, slots]
    c = np.stack([cols[:, k[1]] for k in slots], axis=1)
    lane = np.arange(m.num_threads) % WARP_SIZE
    r0 = (r - (lane // 4)[:, None]).reshape(-1, WARP_SIZE, m.num_slots)
    c0 = (c - 2 * (lane % 4)[:, None]).reshape(-1, WARP_SIZE, m.num_slots)
    if not ((r0 == r0[:, :1]).all() and (c0 == c0[:, :1]).all()):
        return None
    top, left = r0[:, 0, :], c0[:, 0, :]  # [warps, slots]: each slot's matrix corner
    firsts = [s for s in range(m.num_slots) if (left[:, s] % 8 == 0).all()]
    seconds = {s for s in range(m.num_slots) if (left[:, s] % 8 == 1).all()}
    if 2 * len(firsts) != m.num_slots or len(seconds) != len(firsts):
        return None
    partner = {}
    for s in firsts:
        match = [p for p in seconds if (top[:, p] == top[:, s]).all()]
        match = [p for p in match if (left[:, p] == left[:, s] + 1).all()]
        if len(match) != 1:
            return None
        partner[s] = match[0]
    # Fours of matrices, in order of their corners (columns first): each `stmatrix.x4` the
    # same corners relative to its first, in every warp, so one lane formula serves them all.
    order = sorted(firsts, key=lambda s: (int(left[0, s]), int(top[0, s])))
    if len(order) % 4:
        return None
    squares = [tuple(order[i : i + 4]) for i in range(0, len(order), 4)]
    offsets = None
    for square in squares:
        dr = top[:, list(square)] - top[:, [square[0]]]  # [warps, 4]
        dc = left[:, list(square)] - left[:, [square[0]]]
        if not ((dr == dr[:1]).all() and (dc == dc[:1]).all()):
            return None
        these = tuple(int(a) * strides[0] + int(b) for a, b in zip(dr[0], dc[0]))
        if offsets is not None and these != offsets:
            return None
        offsets = these
    return StmatrixPlan(tuple(squares), partner, strides[0], offsets or (0, 0, 0, 0))


def store_matrices(
    k: Any, plan: StmatrixPlan, values: list[ir.Value], flats: list[ir.Value], byte_offset: int
) -> None:
    """Emit the plan's `stmatrix.x4` stores of `values` (the tile's slots) into the scratch;
    `flats`: each slot's element index there, `byte_offset`: where the tile starts."""
    from tilec.lowering.shared_memory import _asm, _shared_address

    b = k.b

    def c(v: int) -> ir.Constant:
        return ir.Constant(I32, v)

    shift = lane_shift(plan, k.lane, _Builder(b))
    half = ir.IntType(16)

    def pack(lo: ir.Value, hi: ir.Value) -> ir.Value:
        lo_bits = b.zext(b.bitcast(lo, half), I32)
        hi_bits = b.zext(b.bitcast(hi, half), I32)
        return b.or_(lo_bits, b.shl(hi_bits, c(16)))

    for square in plan.squares:
        registers = [pack(values[s], values[plan.partner[s]]) for s in square]
        element = b.add(flats[square[0]], shift)
        address = _shared_address(k, b.add(b.mul(element, c(2)), c(byte_offset)))
        _asm(
            k,
            ir.VoidType(),
            [address, *registers],
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};",
            "r,r,r,r,r,~{memory}",
        )


def lane_shift(plan: StmatrixPlan, lane: Any, ops: Any = None) -> Any:
    """How far (in elements) lane `lane`'s address for an instruction is from the flat index
    its instruction's first slot has in that lane: row l % 8 of matrix j = l / 8, less the
    element that slot holds in lane l (row l / 4, column 2 (l % 4)). `lane` an int (`ops`
    None) or an LLVM value with `ops` an `_Builder` -- the one formula both ways."""
    ops = ops or _Ints()
    row = ops.sub(ops.and_(lane, 7), ops.lshr(lane, 2))
    shift = ops.sub(ops.mul(row, plan.row_stride), ops.mul(ops.and_(lane, 3), 2))
    j = ops.lshr(lane, 3)
    o = plan.offsets  # matrix j starts o[j] after matrix 0: o[j] by j's two bits
    low, high = ops.and_(j, 1), ops.lshr(j, 1)
    shift = ops.add(shift, ops.mul(low, o[1]))
    shift = ops.add(shift, ops.mul(high, o[2]))
    return ops.add(shift, ops.mul(ops.and_(low, high), o[3] - o[1] - o[2]))


class _Ints:
    """`lane_shift`'s arithmetic on Python ints."""

    def and_(self, a: int, b: int) -> int:
        return a & b

    def lshr(self, a: int, b: int) -> int:
        return a >> b

    def add(self, a: int, b: int) -> int:
        return a + b

    def sub(self, a: int, b: int) -> int:
        return a - b

    def mul(self, a: int, b: int) -> int:
        return a * b


class _Builder:
    """`lane_shift`'s arithmetic as i32 LLVM instructions (int operands become constants)."""

    def __init__(self, b: ir.IRBuilder):
        self.b = b

    @staticmethod
    def _v(x: Any) -> ir.Value:
        return ir.Constant(I32, x) if isinstance(x, int) else x

    def and_(self, a: Any, b: Any) -> ir.Value:
        return self.b.and_(self._v(a), self._v(b))

    def lshr(self, a: Any, b: Any) -> ir.Value:
        return self.b.lshr(self._v(a), self._v(b))

    def add(self, a: Any, b: Any) -> ir.Value:
        return self.b.add(self._v(a), self._v(b))

    def sub(self, a: Any, b: Any) -> ir.Value:
        return self.b.sub(self._v(a), self._v(b))

    def mul(self, a: Any, b: Any) -> ir.Value:
        return self.b.mul(self._v(a), self._v(b))
