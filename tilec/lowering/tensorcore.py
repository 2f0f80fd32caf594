"""Tensor-core dots through `mma.sync` (sm_80 and later), and how a `tile.load_shared` reads a
dot operand: `ldmatrix` fragments, or for `wgmma` (`tilec.lowering.wgmma`) the slot itself.

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

int8. i8 operands into an i32 accumulator (`#mma<..., instr_shape = [16, 8, 32]>`) are
`mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`: per k-step of 32, A register i holds row
`g + 8 (i & 1)` at k `4t + 16 (i >> 1) + 0..3`, B register i holds k `4t + 16 i + 0..3` of
column `g`, c0..c3 are as for f32. The sums wrap around in i32, as the interpreter's do.

* A (stored [M, K]) is read as for f16 with 16-byte steps: an `ldmatrix` b16 register is
  bytes `4t .. 4t + 3` of a 16-byte row, exactly an s8 register. An A stored [K, M] is not
  lowered (`ldmatrix.trans` moves 16-bit elements; tiling keeps such dots on the FMA path).
* The n8 tiles go in pairs over 16 columns: tile `2p` ("even") has column `j` at column
  `2 j` of pair `p` (`c0 = 16 warp_n + 16 W_n p`), tile `2p + 1` at `2 j + 1`; the
  accumulator's `#blocked` twin gives lane t columns `4t .. 4t + 3` of each pair, and
  instruction tile `ni`'s c0, c1 are the thread's columns `ni % 2` and `ni % 2 + 2` of it.
* B stored [N, K] (K-major): one `ldmatrix.x4` per pair and k-step, matrix `j` having rows
  (columns of B) `c0 + 2r + (j >> 1)` and k bytes `16 (j & 1) ..`: the registers as loaded.
* B stored [K, N] (N-major): one `ldmatrix.x4.trans` per pair and k-step over the pair's 16
  bytes of columns; lane t of a matrix gets its rows `2t`, `2t + 1`, each b16 element the
  bytes of columns `2g`, `2g + 1` of one k row. Matrix `2 h + s` takes the k rows (of the
  k-step's half h) `16 h + 4 (r >> 1) + 2 (((r >> 2) & 1) ^ s) + (r & 1)`, so each lane's
  two matrices of a half hold k `4t + {0, 1}` and `4t + {2, 3}`, and the 8 rows of a matrix
  lie in 8 swizzle phases. `prmt.b32` then takes the even bytes of the two for the even tile
  and the odd bytes for the odd tile (4 per pair and k-step; lanes with `t >= 2` have their
  two matrices the other way round, which flips bit 2 of each selector nibble).


"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import shared as S
from tilec.dialects import tile as T
from tilec.dialects.tile import DotOperandLayout, MmaLayout
from tilec.ir.core import Operation
from tilec.ir.types import FloatType, TileType
from tilec.lowering.layouts import (
    ThreadMap,
    element_bytes,
)

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering
from tilec.lowering.shared_memory import (
    F32,
    I32,
    SharedBuffer,
    _asm,
    _i32,
    _shared_address,
    _slot_base,
    _slot_places,
    _swizzled_bytes,
)

__all__ = [
    "Fragments",
    "WgmmaOperand",
    "is_register_fragment_conversion",
    "is_tensor_core_dot",
    "lower_load_shared",
    "lower_mma_dot",
    "lower_register_fragments",
]


def is_tensor_core_dot(op: Operation) -> bool:
    """Whether `op` is a `tile.dot` the lowering turns into `mma.sync`."""
    return (
        isinstance(op, T.DotOp)
        and isinstance(op.result.type.layout, MmaLayout)
        and isinstance(op.a.type.layout, DotOperandLayout)
        and isinstance(op.b.type.layout, DotOperandLayout)
    )


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
    layout = t.layout
    # wgmma reads a version-3 operand from the slot; a version-2 one is mma.sync fragments in
    # registers (below), for either instruction.
    if isinstance(layout, DotOperandLayout) and layout.version == 3:
        return [WgmmaOperand(buf, slot_base, transposed)]
    if isinstance(layout, DotOperandLayout):
        fragments = _fragments(k, buf, slot_base, t, transposed)
        return [fragments if _dot_follows(op) else fragments.load_all()]
    out = []
    for r, c in _slot_places(k, ThreadMap(t.layout, t.shape)):
        if transposed:  # element (r, c) of the result is (c, r) of the slot
            r, c = c, r
        out.append(k.shared_load(t.element, k.b.add(slot_base, _swizzled_bytes(k, buf, r, c))))
    return [out]


def is_register_fragment_conversion(op: Operation) -> bool:
    """Whether `op` is a `tile.convert_layout` into A fragments from the accumulator layout
    (`passes.assign_layouts.register_a_operand`): a repacking of registers."""
    return isinstance(op, T.ConvertLayoutOp) and isinstance(op.result.type.layout, DotOperandLayout)


def lower_register_fragments(k: _KernelLowering, op: Operation) -> list[Any]:
    """A fragments from a tile held as an `m16n8k16` accumulator on warps `[W, 1]`.

    The tile's slots are (row index `ri`, column index `ci`) row-major, `ci` running over a
    thread's pairs of columns (`2t`, `2t + 1`) of each 8-column tile (`as_blocked`); A fragment
    `(mi, kk)` is rows `2 mi`, `2 mi + 1` of columns `4 kk .. 4 kk + 3` (module docstring), each
    b32 register two adjacent 16-bit elements, the lower column in the low half."""
    t: TileType = op.result.type
    layout: DotOperandLayout = t.layout  # type: ignore[assignment]
    if layout.index != 0 or layout.version != 2 or layout.warps_per_cta[1] != 1:
        raise ValueError(f"{op.name}: only mma.sync A fragments come from registers, not {layout}")
    rows, depth = t.shape
    wm = layout.warps_per_cta[0]
    values = k.values[op.input]
    width = depth // 4  # slots per row index
    b = k.b
    half = ir.IntType(16)

    def pack(lo: ir.Value, hi: ir.Value) -> ir.Value:
        lo_bits = b.zext(b.bitcast(lo, half) if lo.type != half else lo, I32)
        hi_bits = b.zext(b.bitcast(hi, half) if hi.type != half else hi, I32)
        return b.or_(lo_bits, b.shl(hi_bits, _i32(16)))

    regs: dict[tuple[int, int], list[ir.Value]] = {}
    for mi in range(rows // (16 * wm)):
        for kk in range(depth // 16):
            out = []
            for ri, ci in (
                (2 * mi, 4 * kk),
                (2 * mi + 1, 4 * kk),
                (2 * mi, 4 * kk + 2),
                (2 * mi + 1, 4 * kk + 2),
            ):
                slot = ri * width + ci
                out.append(pack(values[slot], values[slot + 1]))
            regs[(mi, kk)] = out
    fragments = Fragments(depth // 16, lambda kk: {})
    fragments.regs = regs
    return [fragments.load_all()]


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
    rides in the instruction's immediate offset). In a slot stored in blocks of columns
    (`col_block`: each block holds every row), the thread's block adds its bytes to the
    per-thread part and a constant column of whole blocks adds to the constant."""

    def __init__(self, k: _KernelLowering, buf: SharedBuffer, row_t, col_t, col_t_limit: int):
        self.k, self.buf = k, buf
        self.row_t, self.col_t, self.col_t_limit = row_t, col_t, col_t_limit
        self.layout = buf.layout
        self.size = element_bytes(buf.type.element)
        self.parts: dict[int, ir.Value] = {}
        p = k.prologue
        L = self.layout
        self.block = L.col_block if L is not None and L.col_block else 0
        # Columns of one stored row (a block's when the slot is stored in blocks).
        self.cols = self.block or buf.slot_shape[-1]
        if L is None or (L.max_phase == 1 and not self.block):
            self.linear = p.mul(p.add(p.mul(row_t, _i32(self.cols)), col_t), _i32(self.size))
            return
        self.linear = None
        self.row_bytes = p.mul(row_t, _i32(self.cols * self.size))
        if self.block:
            rows = math.prod(buf.slot_shape[:-1])
            self.block_bytes = rows * self.block * self.size
            shift = _i32(self.block.bit_length() - 1)
            thread_block = p.mul(p.lshr(col_t, shift), _i32(self.block_bytes))
            self.row_bytes = p.add(self.row_bytes, thread_block)
            col_t = p.and_(col_t, _i32(self.block - 1))
        phase = p.and_(p.lshr(row_t, _i32(L.per_phase.bit_length() - 1)), _i32(L.max_phase - 1))
        chunk = p.lshr(col_t, _i32(L.vec.bit_length() - 1))
        self.thread_chunk = p.xor(chunk, phase)

    def splits(self, row_c: int, col_c: int) -> bool:
        L = self.layout
        if L is None or (L.max_phase == 1 and not self.block):
            return True
        if self.block:  # whole blocks only: the thread's own block is its part
            return row_c % (L.per_phase * L.max_phase) == 0 and col_c % self.block == 0
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
        if self.block:
            constant += (col_c // self.block) * self.block_bytes
            col_c = 0
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
    # Elements in one 16-byte ldmatrix row, and the k of one instruction (two such rows): 8
    # and 16 for f16/bf16, 16 and 32 for i8 (m16n8k32, whose s8 fragments are the same bytes).
    chunk = 16 // element_bytes(t.element)
    step = 2 * chunk
    int8 = chunk == 16
    if int8 and layout.index == 1:
        return _int8_b_fragments(k, buf, slot_base, t, transposed, warp_n)
    if int8 and transposed:
        raise ValueError(
            "mma.sync m16n8k32 needs an i8 A stored K-major: ldmatrix.trans moves 16-bit "
            "elements (tiling keeps such dots on the FMA path)"
        )
    rr = p.and_(k.lane, _i32(7))
    j = p.lshr(k.lane, _i32(3))
    j_lo, j_hi = p.and_(j, _i32(1)), p.lshr(j, _i32(1))
    slot_address = _shared_address(k, slot_base)

    def ldmatrix(
        where: _SwizzledAddresses, row_c: int, col_c: int, count: int, trans: str
    ) -> list[ir.Value]:
        return _ldmatrix(k, slot_address, where, row_c, col_c, count, trans)

    if layout.index == 0:
        rows, depth = t.shape
        # lanes 8j..8j+7 address the 8 stored rows of matrix j: j & 1 picks the m half,
        # j >> 1 the k half
        m_half = p.mul(j_lo, _i32(8 * wm))
        m_t = p.add(p.shl(warp_m, _i32(3)), m_half)
        if transposed:  # stored [K, M]: rows are k
            where = _SwizzledAddresses(k, buf, p.add(rr, p.shl(j_hi, _i32(3))), m_t, 16 * wm)
        else:
            where = _SwizzledAddresses(k, buf, p.add(m_t, rr), p.mul(j_hi, _i32(chunk)), step)

        def load_a(kk: int) -> dict:
            if transposed:
                return {
                    (mi, kk): ldmatrix(where, 16 * kk, 16 * wm * mi, 4, ".trans")
                    for mi in range(rows // (16 * wm))
                }
            return {
                (mi, kk): ldmatrix(where, 16 * wm * mi, step * kk, 4, "")
                for mi in range(rows // (16 * wm))
            }

        return Fragments(depth // step, load_a)

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


def _ldmatrix(
    k: _KernelLowering,
    slot_address: ir.Value,
    where: _SwizzledAddresses,
    row_c: int,
    col_c: int,
    count: int,
    trans: str,
) -> list[ir.Value]:
    """One `ldmatrix.x{count}{trans}` of the 8x8 b16 matrices whose rows lanes 8j..8j+7
    address, at `where`'s per-thread row and column plus (`row_c`, `col_c`)."""
    b = k.b
    part, constant = where.offset(row_c, col_c)
    address = b.add(slot_address, part)
    if constant:
        address = b.add(address, _i32(constant))
    names = ", ".join(f"${i}" for i in range(count))
    out = _asm(
        k,
        ir.LiteralStructType([I32] * count),
        [address],
        f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {{{names}}}, [${count}];",
        ",".join(["=r"] * count) + ",r",
    )
    return [b.extract_value(out, i) for i in range(count)]


def _int8_b_fragments(
    k: _KernelLowering,
    buf: SharedBuffer,
    slot_base: ir.Value,
    t: TileType,
    transposed: bool,
    warp_n: ir.Value,
) -> Fragments:
    """The B fragments of `mma.sync.m16n8k32` (s8) for a pair of n8 tiles per `ldmatrix.x4`
    (module docstring, "int8"). K-major (stored [N, K]): matrix `j` has rows
    `n0 + 2r + (j >> 1)`, k bytes `16 (j & 1) ..`: the fragments as loaded. N-major (stored
    [K, N]): `.trans` of 16-byte rows of k, then `prmt` splits each lane's two b16 columns
    into the even and the odd tile."""
    layout: DotOperandLayout = t.layout  # type: ignore[assignment]
    wn = layout.warps_per_cta[1]
    depth, cols = t.shape
    pairs = cols // (16 * wn)
    p = k.prologue
    lane = k.lane
    jm = p.lshr(lane, _i32(3))  # the matrix this lane addresses a row of
    r = p.and_(lane, _i32(7))
    n_warp = p.shl(warp_n, _i32(4))
    slot_address = _shared_address(k, slot_base)
    if transposed:
        row_t = p.add(p.add(n_warp, p.shl(r, _i32(1))), p.lshr(jm, _i32(1)))
        where = _SwizzledAddresses(k, buf, row_t, p.shl(p.and_(jm, _i32(1)), _i32(4)), 32)

        def load_k_major(kk: int) -> dict:
            regs = {}
            for pair in range(pairs):
                got = _ldmatrix(k, slot_address, where, 16 * wn * pair, 32 * kk, 4, "")
                regs[(2 * pair, kk)], regs[(2 * pair + 1, kk)] = got[:2], got[2:]
            return regs

        return Fragments(depth // 32, load_k_major)
    # Row r of matrix j = 2 half + s: k = 16 half + 4 (r >> 1) + 2 (((r >> 2) & 1) ^ s) +
    # (r & 1). Lane t of a matrix gets its rows 2t, 2t + 1: k 4t + {0, 1} from the matrix
    # with s = t >> 1, 4t + {2, 3} from the other. Rows 2t, 2t + 1 of lanes t and t + 2 are 8
    # apart plus 2, so the 8 rows of a matrix fall in 8 different swizzle phases.
    half = p.lshr(jm, _i32(1))
    s = p.and_(jm, _i32(1))
    pair_bits = p.shl(p.xor(p.and_(p.lshr(r, _i32(2)), _i32(1)), s), _i32(1))
    row_t = p.add(
        p.add(p.shl(half, _i32(4)), p.shl(p.lshr(r, _i32(1)), _i32(2))),
        p.add(pair_bits, p.and_(r, _i32(1))),
    )
    where = _SwizzledAddresses(k, buf, row_t, n_warp, 16 * wn)
    # A b16 element of a `.trans` register is (k row, 2 columns): bytes (k0, n 2g), (k0, 2g+1),
    # (k1, 2g), (k1, 2g+1). `prmt` takes the even bytes of the (lo, hi) pair of k rows for the
    # even tile, the odd ones for the odd tile; lanes with t >= 2 hold the pair swapped
    # (their lo pair is matrix s = 1), which flips bit 2 of every selector nibble.
    swap = p.mul(p.and_(p.lshr(lane, _i32(1)), _i32(1)), _i32(0x4444))
    even_select = p.xor(_i32(0x6420), swap)
    odd_select = p.xor(_i32(0x7531), swap)

    def prmt(x: ir.Value, y: ir.Value, select: ir.Value) -> ir.Value:
        return _asm(
            k, I32, [x, y, select], "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", side_effect=False
        )

    def load_n_major(kk: int) -> dict:
        regs = {}
        for pair in range(pairs):
            d = _ldmatrix(k, slot_address, where, 32 * kk, 16 * wn * pair, 4, ".trans")
            regs[(2 * pair, kk)] = [prmt(d[0], d[1], even_select), prmt(d[2], d[3], even_select)]
            regs[(2 * pair + 1, kk)] = [prmt(d[0], d[1], odd_select), prmt(d[2], d[3], odd_select)]
        return regs

    return Fragments(depth // 32, load_n_major)


def lower_mma_dot(k: _KernelLowering, op: Operation) -> list[Any]:
    """`mma.sync.m16n8k16` over the warp tile, for every k-step (module docstring)."""
    if str(op.a.type.element) == "i8":
        return _lower_int8_mma_dot(k, op)
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


def _lower_int8_mma_dot(k: _KernelLowering, op: Operation) -> list[Any]:
    """`mma.sync.m16n8k32.row.col.s32.s8.s8.s32` over the warp tile, for every k-step of 32.
    Instruction tile `ni` is the even (`ni` even) or odd column half of 16-column pair
    `ni // 2`: its `c0, c1` are the thread's columns `e` and `e + 2` of the pair, `e = ni % 2`
    (module docstring, "int8"). The sums wrap around in i32, as the hardware's do."""
    b = k.b
    a: Fragments = k.values[op.a]
    bb: Fragments = k.values[op.b]
    acc_t: TileType = op.result.type
    if str(acc_t.element) != "i32" or str(op.b.type.element) != "i8":
        raise ValueError(f"mma.sync m16n8k32 takes i8 operands into i32, not {acc_t.element}")
    wm, wn = acc_t.layout.warps_per_cta
    rows, cols = acc_t.shape
    m_tiles, n_tiles, k_steps = rows // (16 * wm), cols // (8 * wn), op.a.type.shape[1] // 32
    width = 2 * n_tiles  # accumulator slots per row index: 4 per pair of n8 tiles
    acc = list(k.values[op.acc])
    four = ir.LiteralStructType([I32] * 4)
    text = (
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
    )
    for kk in range(k_steps):
        a.load(kk)
        bb.load(kk)
        for mi in range(m_tiles):
            for ni in range(n_tiles):
                column = 4 * (ni // 2) + ni % 2
                slots = [
                    (2 * mi) * width + column,
                    (2 * mi) * width + column + 2,
                    (2 * mi + 1) * width + column,
                    (2 * mi + 1) * width + column + 2,
                ]
                out = _asm(
                    k,
                    four,
                    [*a.regs[(mi, kk)], *bb.regs[(ni, kk)], *(acc[s] for s in slots)],
                    text,
                    "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3",
                    side_effect=False,
                )
                for i, s in enumerate(slots):
                    acc[s] = b.extract_value(out, i)
    return [acc]
