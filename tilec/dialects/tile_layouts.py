"""The `tile` dialect's layout attributes: how a tile's elements are spread over threads.

`#mma` (tensor-core accumulators), `#shared` (swizzled shared memory), `#dot_operand`
(tensor-core operands) and `#slice` (a layout with one dimension removed). The blocked
layout lives in `tilec.ir.attributes`. A layout is part of a tile's type; `tilec.dialects.tile`
re-exports these classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tilec.ir.attributes import Attribute, ParametricAttr, parametric_attr

__all__ = ["DotOperandLayout", "MmaLayout", "SharedLayout", "SliceLayout"]


@parametric_attr
@dataclass(frozen=True, slots=True)
class MmaLayout(ParametricAttr):
    """The accumulator layout of tensor-core instructions (`mma.sync`, `wgmma`).

    `version`: 2 for Ampere `mma.sync`, 3 for Hopper `wgmma`; `warps_per_cta`: how the block's
    warps tile the accumulator; `instr_shape`: one instruction's M, N, K (e.g. 16, 8, 16).
    `natural_rows` (version 3 only): the rows in wgmma's own order -- warp w holds rows
    16 w + l / 4 and 16 w + 8 + l / 4 -- rather than the `#blocked` twin's, whose warps hold
    8-row groups 8 W rows apart (`tilec.lowering.layouts.as_blocked`). The twin is what the
    ops on `#blocked` tiles share with the accumulator; the natural order is what an A read
    M-major from shared memory (stored [K, M]) needs, since its rows cannot be permuted by
    the copies without splitting them into 16-byte pieces (`tilec.lowering.wgmma`).
    """

    mnemonic: ClassVar[str] = "mma"
    version: int
    warps_per_cta: tuple[int, ...]
    instr_shape: tuple[int, ...]
    natural_rows: bool = False


@parametric_attr
@dataclass(frozen=True, slots=True)
class SharedLayout(ParametricAttr):
    """A swizzled shared-memory layout (XOR swizzle against bank conflicts).

    Rows of `vec` contiguous elements are XOR-ed with `(row / per_phase) % max_phase`;
    `order` lists dimensions from fastest- to slowest-varying. `vec = 1, max_phase = 1` is no
    swizzle.
    """

    mnemonic: ClassVar[str] = "shared"
    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]
    # wgmma operands (`tilec.lowering.wgmma`): `interleave = 2` stores the slot's 8-row
    # group L of G at position 2 (L mod G/2) + L div G/2, the row order of a wgmma accumulator
    # whose warps hold 8-row groups G/2 apart; `col_block = n` stores the last dimension in
    # blocks of n elements, each block holding every row (the N-major operand's 128-byte atoms).
    interleave: int = 1
    col_block: int = 0


@parametric_attr
@dataclass(frozen=True, slots=True)
class DotOperandLayout(ParametricAttr):
    """An operand of a tensor-core `tile.dot`, held in registers as `mma.sync` fragments.

    `index` 0 is the left operand (M x K), 1 the right one (K x N); `warps_per_cta` are those
    of the dot's `#mma` accumulator. Each warp holds the rows of A (columns of B) that its
    accumulator elements need, for all of K, as m16n8k16 (f16/bf16) or m16n8k32 (i8)
    fragments in the register order
    `tilec.lowering.tensorcore` documents.
    """

    mnemonic: ClassVar[str] = "dot_operand"
    index: int
    warps_per_cta: tuple[int, ...]
    # 3: the operand of a `wgmma` dot, read by the tensor cores from its shared buffer (the
    # value is that buffer's slot, no registers).
    version: int = 2


@parametric_attr
@dataclass(frozen=True, slots=True)
class SliceLayout(ParametricAttr):
    """The `parent` layout with dimension `dim` removed (Triton's slice layout).

    A tile of rank r-1 in `#slice<dim = d, parent = P>` is held as a tile of rank r in `P` with
    a size-1 dimension inserted at `d`: each element is held by every thread that held its row
    (or column) of the parent, i.e. replicated over the lanes and warps that `P` spreads along
    `d`. A reduction along `d` leaves its result here, and `tile.expand_dims` at `d` gives back
    `P`, so a reduced value is broadcast back without moving between threads.
    `tilec.lowering.layouts.ThreadMap` states the arithmetic.
    """

    mnemonic: ClassVar[str] = "slice"
    dim: int
    parent: Attribute
