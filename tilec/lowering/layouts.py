"""Which thread owns which element of a tile: the arithmetic of `#blocked` layouts.

A block runs `32 * num_warps` threads; thread `t` is lane `t % 32` of warp `t // 32`. A
`#blocked<size_per_thread, threads_per_warp, warps_per_cta, order>` layout on a static shape
spreads elements as Triton's blocked layout does. Lanes are numbered over dimensions in
`order` (fastest first) with `threads_per_warp[d]` lanes along dimension `d`, and warps
likewise with `warps_per_cta`. Along dimension `d` a thread's first element is

    p_d = (warp_d * threads_per_warp[d] + lane_d) * size_per_thread[d]

and it holds `size_per_thread[d]` consecutive elements from there, repeated every
`cta_d = size_per_thread[d] * threads_per_warp[d] * warps_per_cta[d]` elements to the end of
the dimension. Where a dimension is smaller than `cta_d`, positions wrap around
(`p_d mod size`) and several threads hold the same element (replication): that is how a
`1xN` tile broadcast along its first axis is held by every thread that needs it.

A `#slice<dim = d, parent = P>` tile (a reduction's result) is held as the `P` tile with a
size-1 dimension inserted at `d`: the threads that `P` spreads along `d` all hold copies. Its
`ThreadMap` has the parent's maps of the other dimensions, and keeps the map of `d` among its
`replicas` so that stores and shared-memory writes still pick one owner per element.

A thread's elements are the Cartesian product, over dimensions, of its index lists
`(p_d mod size_d) + offset` for the compile-time `offsets` of `DimMap`; its registers
(*slots*) enumerate that product in row-major order. Everything here is a pure function of
layouts and shapes: the lowering emits the same arithmetic as IR (`DimMap` gives the shifts
and masks), and asks this module, at compile time, whether a change of layout or shape can
stay in registers or must go through shared memory.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tilec.dialects.tile import DotOperandLayout, MmaLayout, SliceLayout
from tilec.ir.attributes import Attribute, BlockedLayout
from tilec.ir.types import IndexType, IntegerType, Type

__all__ = [
    "MMA_I8_INSTR_SHAPE",
    "MMA_INSTR_SHAPE",
    "WARP_SIZE",
    "DimMap",
    "ThreadMap",
    "as_blocked",
    "blocked_equivalent",
    "broadcast_source_layout",
    "contiguous_elements",
    "copy_layout",
    "default_layout",
    "element_bytes",
    "expand_layout",
    "insert_unit_dim",
    "layout_error",
    "local_source_slots",
    "mma_accumulator_layout",
    "mma_warp_columns",
    "permute_layout",
    "remove_unit_dims",
    "row_major_strides",
    "same_placement",
    "slice_layout",
    "wgmma_accumulator_layout",
]

WARP_SIZE = 32
MMA_INSTR_SHAPE = (16, 8, 16)  # mma.sync.m16n8k16: f16/bf16 operands, f32 accumulator
# mma.sync.m16n8k32: s8 operands, s32 accumulator. Its accumulator pairs two n8 tiles whose
# columns interleave (`as_blocked`), which is what lets ldmatrix.trans read an N-major B.
MMA_I8_INSTR_SHAPE = (16, 8, 32)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def element_bytes(t: Type) -> int:
    """Bytes of one element in memory: `i1` is a byte, `index` 8 bytes."""
    if isinstance(t, IndexType):
        return 8
    if isinstance(t, IntegerType) and t.width == 1:
        return 1
    return t.width // 8  # type: ignore[attr-defined]


def mma_accumulator_layout(
    warps_per_cta: Sequence[int], instr_shape: tuple[int, int, int] = MMA_INSTR_SHAPE
) -> MmaLayout:
    """The `#mma` layout of an `mma.sync` accumulator tiled over `warps_per_cta`: m16n8k16
    (f16/bf16) unless `instr_shape` is `MMA_I8_INSTR_SHAPE` (m16n8k32, s8)."""
    return MmaLayout(2, tuple(warps_per_cta), tuple(instr_shape))


def mma_warp_columns(layout: MmaLayout) -> int:
    """Accumulator columns one warp holds side by side in an `#mma` version-2 layout: 8 for
    m16n8k16, 16 for m16n8k32 (two n8 tiles with interleaved columns)."""
    return 16 if tuple(layout.instr_shape) == MMA_I8_INSTR_SHAPE else 8


def wgmma_accumulator_layout(
    warps: int, n: int, k: int = 16, natural_rows: bool = False
) -> MmaLayout:
    """The `#mma` layout of a `wgmma.m64nNkK` accumulator on `warps` warps (warpgroups of 4
    stacked along M, 16 rows per warp) with N = `n`; K is 16 for 16-bit operands, 32 for
    8-bit ones (the registers are laid out the same). `natural_rows`: the rows in wgmma's own
    order (`MmaLayout`), for an A read M-major by a descriptor."""
    return MmaLayout(3, (warps, 1), (64, n, k), natural_rows)


def _natural_row_map(warps: int) -> DimMap:
    """The rows of a `natural_rows` wgmma accumulator on `warps` warps: warp w, lane l holds
    rows 16 w + l / 4 and 16 w + 8 + l / 4 (the hardware's D fragment)."""
    return DimMap(16 * warps, (0, 8), 2, 7, 1, 0, warps - 1, 16, False)


def as_blocked(layout: Attribute) -> BlockedLayout:
    """The `#blocked` layout that spreads elements exactly as `layout` does.

    An `#mma` accumulator (version 2, m16n8k16) is one: in each 16x8 instruction tile lane `l`
    holds rows `l/4` and `l/4 + 8`, columns `2(l%4)` and `2(l%4) + 1`, and warps repeat that
    pattern. Here warps interleave at the granularity of 8 rows and 8 columns (warp `w` holds
    rows `8 w_m + 8 W_m i + l/4`): an instruction's two row halves are then `8 W_m` rows apart,
    which `mma.sync` does not mind (`ldmatrix` takes one address per row), and every op that
    works on `#blocked` tiles works on accumulators unchanged.

    The m16n8k32 accumulator (s8 operands, s32, `MMA_I8_INSTR_SHAPE`) has the same rows, and
    its instruction tiles go in pairs over 16 columns: the "even" tile's column `j` is column
    `2 j` of the 16, the "odd" one's `2 j + 1`, so lane `l` holds columns `4(l%4) .. 4(l%4) + 3`
    (size_per_thread [1, 4]) and warps interleave every 16 columns. That is the column order
    in which `ldmatrix.trans` delivers an N-major int8 B (`tilec.lowering.tensorcore`).
    """
    if isinstance(layout, MmaLayout):
        if layout.natural_rows:
            raise ValueError(
                f"{layout}: rows in wgmma's own order have no #blocked twin (ThreadMap places them)"
            )
        if layout.version == 3:
            # wgmma: the same per-instruction pattern with the warps stacked along M, each
            # warp's two 8-row halves 8 W rows apart (the A buffer's `interleave` makes the
            # hardware's rows these: `tilec.lowering.wgmma.lower_wgmma_dot`).
            warps = tuple(layout.warps_per_cta)
            if len(warps) != 2 or warps[1] != 1 or warps[0] % 4:
                raise ValueError(f"{layout}: wgmma needs warps_per_cta [4 k, 1]")
            return BlockedLayout((1, 2), (8, 4), warps, (1, 0))
        shape = tuple(layout.instr_shape)
        if layout.version != 2 or shape not in (MMA_INSTR_SHAPE, MMA_I8_INSTR_SHAPE):
            raise ValueError(
                f"{layout}: only version 2 with instr_shape [16, 8, 16] or [16, 8, 32] is lowered"
            )
        columns = 4 if shape == MMA_I8_INSTR_SHAPE else 2
        return BlockedLayout((1, columns), (8, 4), tuple(layout.warps_per_cta), (1, 0))
    if not isinstance(layout, BlockedLayout):
        raise ValueError(f"{layout} has no #blocked equivalent")
    return layout


def _twin_of(layout: Attribute) -> Attribute:
    """`layout`, or for a natural-rows `#mma` the same accumulator in the twin's row order:
    what `ThreadMap` takes lanes and columns from."""
    if isinstance(layout, MmaLayout) and layout.natural_rows:
        return dataclasses.replace(layout, natural_rows=False)
    return layout


def copy_layout(shape: Sequence[int], num_warps: int, vector: int) -> BlockedLayout:
    """Which thread copies which elements of a tile in accesses of `vector` consecutive
    elements along the last dimension: `default_layout` of the shape counted in vectors."""
    if shape[-1] % vector:
        raise ValueError(f"vector {vector} does not divide the last dimension of {list(shape)}")
    chunks = (*shape[:-1], shape[-1] // vector)
    base = default_layout(chunks, num_warps)
    return BlockedLayout(
        (*base.size_per_thread[:-1], vector), base.threads_per_warp, base.warps_per_cta, base.order
    )


def layout_error(layout: Attribute, shape: Sequence[int], num_warps: int) -> str | None:
    """Why `layout` cannot hold a tile of `shape` in a block of `num_warps` warps (None: it
    can). Sizes must be powers of two, lanes must multiply to 32 and warps to `num_warps`;
    an `#mma` accumulator must be 2-D and a whole number of warp tiles (16 W_m x 8 W_n;
    16 W_n for m16n8k32)."""
    if isinstance(layout, (MmaLayout, DotOperandLayout)):
        warps = tuple(layout.warps_per_cta)
        if len(shape) != 2 or len(warps) != 2:
            return "a tensor-core layout needs a 2-D tile and 2 warp counts"
        if math.prod(warps) != num_warps:
            return f"warps_per_cta multiply to {math.prod(warps)}, not {num_warps}"
        if isinstance(layout, MmaLayout):
            if layout.natural_rows and layout.version != 3:
                return "natural_rows is wgmma's row order (version 3)"
            try:
                as_blocked(_twin_of(layout))
            except ValueError as e:
                return str(e)
            m = 16 * warps[0]
            n = (mma_warp_columns(layout) if layout.version == 2 else 8) * warps[1]
            if layout.natural_rows:
                # Its own slices' parent and its broadcasts' operands (it has no #blocked twin
                # to stand for them): the accumulator's shape, or 1 along either dimension.
                whole = (m, layout.instr_shape[1])
                if all(s in (w, 1) for s, w in zip(shape, whole)):
                    return None
                return (
                    f"a wgmma accumulator on {warps[0]} warps is {m}x{whole[1]} (or 1 along a "
                    "dimension)"
                )
            if layout.version == 3 and tuple(shape) != (m, layout.instr_shape[1]):
                return f"a wgmma accumulator on {warps[0]} warps is {m}x{layout.instr_shape[1]}"
            if shape[0] % m or shape[1] % n:
                return f"tile {list(shape)} is not a whole number of {m}x{n} warp tiles"
        return None
    if isinstance(layout, SliceLayout):
        if not 0 <= layout.dim <= len(shape):
            return f"slices dimension {layout.dim} of a {len(shape) + 1}-D parent"
        parent_shape = (*shape[: layout.dim], 1, *shape[layout.dim :])
        problem = layout_error(layout.parent, parent_shape, num_warps)
        return None if problem is None else f"parent {layout.parent}: {problem}"
    if not isinstance(layout, BlockedLayout):
        return f"{layout} is not a layout of tiles in registers"
    rank = len(shape)
    fields = (layout.size_per_thread, layout.threads_per_warp, layout.warps_per_cta, layout.order)
    if any(len(f) != rank for f in fields):
        return f"has {len(layout.order)} dimensions, the tile {rank}"
    if sorted(layout.order) != list(range(rank)):
        return f"order {list(layout.order)} is not a permutation of 0..{rank - 1}"
    if not all(_is_power_of_two(x) for f in fields[:3] for x in f):
        return "size_per_thread, threads_per_warp and warps_per_cta must be powers of two"
    if not all(_is_power_of_two(s) for s in shape):
        return f"tile shape {list(shape)} is not made of powers of two"
    if math.prod(layout.threads_per_warp) != WARP_SIZE:
        return f"threads_per_warp multiply to {math.prod(layout.threads_per_warp)}, not 32"
    if math.prod(layout.warps_per_cta) != num_warps:
        return f"warps_per_cta multiply to {math.prod(layout.warps_per_cta)}, not {num_warps}"
    return None


def default_layout(shape: Sequence[int], num_warps: int, vector: int = 1) -> BlockedLayout:
    """The layout tilec gives a tile of `shape` unless an op needs another.

    Row-major (the last dimension is fastest, as in memory, so a warp's loads of a row are
    coalesced); each thread holds runs of `vector` consecutive elements of the last dimension
    (fewer when the dimension is shorter), which the vectorize pass turns into one access each
    (assign-layouts asks for 16 bytes); lanes fill dimensions from the fastest, warps from the
    slowest, so that a warp holds whole rows where it can and reductions along the last axis
    stay within a warp. Threads left over once a dimension is covered go to the slowest
    dimension, where they replicate elements.
    """
    rank = len(shape)
    order = tuple(range(rank - 1, -1, -1))
    per_thread = [1] * rank
    if rank:
        per_thread[-1] = max(1, min(vector, shape[-1]))
    lanes = [1] * rank
    remaining = WARP_SIZE
    for d in order:
        take = min(remaining, max(1, shape[d] // per_thread[d]))
        lanes[d] = take
        remaining //= take
    lanes[order[-1]] *= remaining
    warps = [1] * rank
    remaining = num_warps
    for d in reversed(order):
        take = min(remaining, max(1, shape[d] // (per_thread[d] * lanes[d])))
        warps[d] = take
        remaining //= take
    warps[order[-1]] *= remaining
    return BlockedLayout(tuple(per_thread), tuple(lanes), tuple(warps), order)


def slice_layout(parent: Attribute, dim: int) -> SliceLayout:
    """The layout of a reduction along `dim` of a tile in `parent`: each result element stays
    in every thread that held part of its row, so expanding it back (`expand_layout`) and
    broadcasting it are register copies. An `#mma` parent is sliced as its `#blocked` twin
    (one with `natural_rows`, which has none, as itself)."""
    if isinstance(parent, MmaLayout) and not parent.natural_rows:
        parent = as_blocked(parent)
    return SliceLayout(dim, parent)


def blocked_equivalent(layout: Attribute, shape: Sequence[int]) -> BlockedLayout | None:
    """A `#blocked` layout that places the elements of a tile of `shape` exactly as `layout`
    does, when there is one: a blocked layout is itself, an `#mma` its twin, a slice its
    parent without the sliced dimension when that dimension spreads over no lanes or warps
    (nothing is replicated)."""
    if isinstance(layout, SliceLayout):
        parent = blocked_equivalent(layout.parent, (*shape[: layout.dim], 1, *shape[layout.dim :]))
        if parent is None:
            return None
        keep = [d for d in range(len(shape) + 1) if d != layout.dim]
        return remove_unit_dims(parent, (*shape[: layout.dim], 1, *shape[layout.dim :]), keep)
    try:
        return as_blocked(layout)
    except ValueError:
        return None


def same_placement(a: Attribute, b: Attribute, shape: Sequence[int]) -> bool:
    """Whether every thread holds the same elements, in the same registers, in both layouts."""
    if a == b:
        return True
    ma, mb = ThreadMap(a, shape), ThreadMap(b, shape)
    return (
        ma.num_threads == mb.num_threads
        and ma.num_slots == mb.num_slots
        and bool((ma.table() == mb.table()).all())
        and bool((ma.unique_owners() == mb.unique_owners()).all())
    )


def contiguous_elements(layout: Attribute, shape: Sequence[int]) -> int:
    """How many consecutive elements of the last dimension each thread holds in a run (its
    widest access): `size_per_thread` of the last dimension for every register layout, slices
    included (1 when the slice removed the parent's last dimension)."""
    if not shape:
        return 1
    m = ThreadMap(layout, shape)
    offsets = m.dims[-1].offsets
    run = 1
    while run < len(offsets) and offsets[run] == run:
        run += 1
    return run


def expand_layout(layout: Attribute, axis: int) -> Attribute:
    """The layout that keeps every element in its thread when a size-1 dimension is inserted
    at `axis` (`tile.expand_dims`): a slice along `axis` gives back its parent; a slice along
    another dimension stays a slice of the expanded parent; `#blocked` gets `insert_unit_dim`
    (a layout with no `#blocked` twin has no expanded form: ValueError)."""
    if isinstance(layout, SliceLayout):
        if layout.dim == axis:
            return layout.parent
        if axis < layout.dim:
            return SliceLayout(layout.dim + 1, expand_layout(layout.parent, axis))
        return SliceLayout(layout.dim, expand_layout(layout.parent, axis + 1))
    return insert_unit_dim(as_blocked(layout), axis)


def insert_unit_dim(layout: BlockedLayout, axis: int) -> BlockedLayout:
    """`layout` for the same elements after a size-1 dimension is inserted at `axis`.

    The new dimension takes one lane and one warp, so every thread keeps its elements; it is
    placed fastest in `order`, which matches `default_layout` of the expanded shape whenever
    the input was in its own default layout."""

    def widen(values: tuple[int, ...]) -> tuple[int, ...]:
        return (*values[:axis], 1, *values[axis:])

    order = (axis, *(d if d < axis else d + 1 for d in layout.order))
    return BlockedLayout(
        widen(layout.size_per_thread),
        widen(layout.threads_per_warp),
        widen(layout.warps_per_cta),
        order,
    )


def remove_unit_dims(
    layout: BlockedLayout, shape: Sequence[int], keep: Sequence[int]
) -> BlockedLayout | None:
    """`layout` without the size-1 dimensions not in `keep` (the dimensions that remain, in
    order), or None when a dropped dimension spreads lanes or warps (its elements would be
    replicated across threads, which the smaller layout cannot say)."""
    dropped = [d for d in range(len(shape)) if d not in keep]
    for d in dropped:
        if shape[d] != 1 or layout.threads_per_warp[d] != 1 or layout.warps_per_cta[d] != 1:
            return None
    renumber = {d: i for i, d in enumerate(keep)}
    return BlockedLayout(
        tuple(min(layout.size_per_thread[d], shape[d]) for d in keep),
        tuple(layout.threads_per_warp[d] for d in keep),
        tuple(layout.warps_per_cta[d] for d in keep),
        tuple(renumber[d] for d in layout.order if d in renumber),
    )


def permute_layout(layout: BlockedLayout, perm: Sequence[int]) -> BlockedLayout:
    """`layout` for the same elements after `tile.transpose perm` (result dim i = input dim
    perm[i]): every thread keeps its elements."""
    inverse = {p: i for i, p in enumerate(perm)}
    return BlockedLayout(
        tuple(layout.size_per_thread[p] for p in perm),
        tuple(layout.threads_per_warp[p] for p in perm),
        tuple(layout.warps_per_cta[p] for p in perm),
        tuple(inverse[d] for d in layout.order),
    )


def broadcast_source_layout(result_layout: BlockedLayout) -> BlockedLayout:
    """The layout a `tile.broadcast` operand needs for the broadcast to stay in registers: the
    result's own parameters. On the operand's size-1 dimensions they wrap around, so every
    thread holds the one element its whole row (or column) of the result repeats."""
    return result_layout


# ---------------------------------------------------------------------------------------------
# Owner-of-element arithmetic


@dataclass(frozen=True)
class DimMap:
    """How one dimension of a tile spreads over the threads of a block.

    A thread's first index along the dimension is `position mod size`, where
    `position = ((lane >> lane_shift) & lane_mask) * lane_mul
              + ((warp >> warp_shift) & warp_mask) * warp_mul`;
    it holds that index plus each of `offsets`. `wraps`: the layout covers more than `size`
    along this dimension, so threads whose `position >= size` hold copies (replicas)."""

    size: int
    offsets: tuple[int, ...]
    lane_shift: int
    lane_mask: int
    lane_mul: int
    warp_shift: int
    warp_mask: int
    warp_mul: int
    wraps: bool

    def position(self, lane, warp):
        """The unwrapped first position (numpy arrays or ints)."""
        return ((lane >> self.lane_shift) & self.lane_mask) * self.lane_mul + (
            (warp >> self.warp_shift) & self.warp_mask
        ) * self.warp_mul

    def base(self, lane, warp):
        return self.position(lane, warp) & (self.size - 1)


class ThreadMap:
    """The elements each thread of a block holds for a tile of `shape` in `layout`."""

    def __init__(
        self,
        layout: Attribute,
        shape: Sequence[int],
        dims: list[DimMap] | None = None,
        replicas: tuple[DimMap, ...] = (),
    ):
        self.shape = tuple(shape)
        if isinstance(layout, SliceLayout) and dims is None:
            k = layout.dim
            parent = ThreadMap(layout.parent, (*self.shape[:k], 1, *self.shape[k:]))
            layout = parent.layout
            dims = parent.dims[:k] + parent.dims[k + 1 :]
            replicas = (*parent.replicas, parent.dims[k])
        natural = isinstance(layout, MmaLayout) and layout.natural_rows
        # A natural-rows accumulator: its twin's lanes and columns, wgmma's own rows.
        self.layout = layout = as_blocked(_twin_of(layout))
        self.num_warps = math.prod(layout.warps_per_cta)
        self.num_threads = WARP_SIZE * self.num_warps
        if dims is None:
            dims = self._dims()
            if natural and self.shape[0] > 1:  # (a unit dimension is every thread's alike)
                dims[0] = _natural_row_map(self.num_warps)
        self.dims = dims
        # Dimensions the tile does not have that still spread threads (a slice's): every
        # thread along them holds a copy; the owner of an element is the one at position 0.
        self.replicas = tuple(d for d in replicas if d.wraps)
        self.counts = tuple(len(d.offsets) for d in self.dims)
        self.num_slots = math.prod(self.counts)
        self.slot_strides = row_major_strides(self.counts)

    @classmethod
    def checked(cls, layout: BlockedLayout, shape: Sequence[int], num_warps: int) -> ThreadMap:
        problem = layout_error(layout, shape, num_warps)
        if problem is not None:
            raise ValueError(f"layout {layout} for shape {list(shape)}: {problem}")
        return cls(layout, shape)

    def _dims(self) -> list[DimMap]:
        L = self.layout
        lane_stride = warp_stride = 1
        strides: dict[int, tuple[int, int]] = {}
        for d in L.order:
            strides[d] = (lane_stride, warp_stride)
            lane_stride *= L.threads_per_warp[d]
            warp_stride *= L.warps_per_cta[d]
        dims = []
        for d, size in enumerate(self.shape):
            spt, tpw, wpc = L.size_per_thread[d], L.threads_per_warp[d], L.warps_per_cta[d]
            cta = spt * tpw * wpc
            run = min(spt, size)  # consecutive elements per repetition
            count = run * max(1, size // cta)
            offsets = tuple((k // run) * cta + k % run for k in range(count))
            ls, ws = strides[d]
            dims.append(
                DimMap(
                    size,
                    offsets,
                    ls.bit_length() - 1,
                    tpw - 1,
                    spt,
                    ws.bit_length() - 1,
                    wpc - 1,
                    tpw * spt,
                    cta > size,
                )
            )
        return dims

    def without_dim(self, axis: int) -> ThreadMap:
        """What each thread holds of the tile with `axis` removed (after reducing along it):
        the same index lists for the other dimensions. Not a blocked layout in general."""
        shape = self.shape[:axis] + self.shape[axis + 1 :]
        dims = self.dims[:axis] + self.dims[axis + 1 :]
        return ThreadMap(self.layout, shape, dims, self.replicas)

    @property
    def owner_dims(self) -> tuple[DimMap, ...]:
        """Every map that decides whether a thread holds copies: the dimensions' and the
        replicas' (a thread is an element's unique owner where `position < size` in each)."""
        return (*self.dims, *self.replicas)

    # -- compile-time tables ----------------------------------------------------------------

    def _lanes_warps(self) -> tuple[np.ndarray, np.ndarray]:
        t = np.arange(self.num_threads)
        return t % WARP_SIZE, t // WARP_SIZE

    def indices(self) -> list[np.ndarray]:
        """Per dimension, `[threads, count]`: the index of each of a thread's positions."""
        lane, warp = self._lanes_warps()
        return [
            d.base(lane, warp)[:, None] + np.asarray(d.offsets, dtype=np.int64)[None, :]
            for d in self.dims
        ]

    def slot_multi_index(self, slot: int) -> tuple[int, ...]:
        return tuple((slot // s) % c for s, c in zip(self.slot_strides, self.counts))

    def table(self) -> np.ndarray:
        """`[threads, slots]`: the row-major flat index of the element in each slot."""
        flat = np.zeros((self.num_threads, 1), dtype=np.int64)
        for idx, stride in zip(self.indices(), row_major_strides(self.shape)):
            flat = (flat[:, :, None] + idx[:, None, :] * stride).reshape(self.num_threads, -1)
        return flat

    def unique_owners(self) -> np.ndarray:
        """`[threads]` bool: the threads that hold no replicated copies (each element has
        exactly one such owner)."""
        lane, warp = self._lanes_warps()
        ok = np.ones(self.num_threads, dtype=bool)
        for d in self.owner_dims:
            if d.wraps:
                ok &= d.position(lane, warp) < d.size
        return ok

    @property
    def replicated(self) -> bool:
        return any(d.wraps for d in self.owner_dims)


def local_source_slots(
    source: ThreadMap, result: ThreadMap, coefficients: Sequence[int]
) -> list[int] | None:
    """For a tile `result` whose element at multi-index `i` is the source element at flat
    (row-major) index `sum(i[d] * coefficients[d])`: the source slot each result slot reads,
    the same in every thread, or None when some thread does not hold an element it needs (the
    values must then move between threads, through shared memory)."""
    if source.num_threads != result.num_threads:
        return None
    flat = np.zeros((result.num_threads, 1), dtype=np.int64)
    for idx, c in zip(result.indices(), coefficients):
        flat = (flat[:, :, None] + idx[:, None, :] * c).reshape(result.num_threads, -1)
    lane, warp = source._lanes_warps()
    slot = np.zeros_like(flat)
    for d, stride, slot_stride in zip(
        source.dims, row_major_strides(source.shape), source.slot_strides
    ):
        index = (flat // stride) % d.size
        offset_to_k = np.full(d.size, -1, dtype=np.int64)
        offset_to_k[list(d.offsets)] = np.arange(len(d.offsets))
        delta = index - d.base(lane, warp)[:, None]
        inside = (delta >= 0) & (delta < d.size)
        k = np.where(inside, offset_to_k[np.clip(delta, 0, d.size - 1)], -1)
        if (k < 0).any():
            return None
        slot += k * slot_stride
    if not (slot == slot[0]).all():
        return None
    return slot[0].tolist()
