"""The lowering of `tile.scan`, `tile.arg_reduce` and `tile.topk` (tilec/lowering/scan.py),
run without a GPU: the very functions that emit LLVM IR are called with a stand-in for the
kernel lowering whose builder computes instead of emitting, on numpy arrays that hold one
value per thread of the block (lockstep, as a warp runs). Shuffles gather from the lanes
`shfl.sync` reads, the scratch is an array, a store runs only in the threads of its `when`.
What comes out, slot by slot in every thread, must be what the interpreter computes, for
layouts that put the axis in one thread, across lanes, across warps, in repeats and with
replicated copies. The PTX itself is checked by ptxas (tests/ptx) and lit (tests/lit/scan).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from llvmlite import ir

from tilec.dialects import scan as S
from tilec.interp.numerics import maximumf, minimumf
from tilec.interp.scan import topk_positions
from tilec.ir.attributes import BlockedLayout
from tilec.ir.core import Block
from tilec.ir.types import FloatType, TileType, f32, i32
from tilec.lowering import scan as lowering
from tilec.lowering.layouts import WARP_SIZE, ThreadMap, default_layout, slice_layout


def _value(v):
    if isinstance(v, ir.Constant):
        return np.asarray(v.constant)
    return v


class _VectorBuilder:
    """The few `llvmlite.ir.IRBuilder` methods the scan lowering calls, on per-thread arrays."""

    def _binary(fn):
        def method(self, a, b, name=""):
            return fn(_value(a), _value(b))

        return method

    add = _binary(lambda a, b: a + b)
    mul = _binary(lambda a, b: a * b)
    and_ = _binary(lambda a, b: a & b)
    or_ = _binary(lambda a, b: a | b)
    lshr = _binary(lambda a, b: a >> b)
    shl = _binary(lambda a, b: a << b)

    def not_(self, a, name=""):
        return ~_value(a)

    def select(self, c, x, y, name=""):
        x, y = _value(x), _value(y)
        dtype = np.result_type(x, y) if np.ndim(x) or np.ndim(y) else None
        return np.where(_value(c), x, y).astype(dtype or np.asarray(x).dtype)

    def icmp_unsigned(self, op, a, b, name=""):
        return _COMPARE[op](_value(a), _value(b))

    icmp_signed = icmp_unsigned

    def fcmp_ordered(self, op, a, b, name=""):
        a, b = _value(a), _value(b)
        return _COMPARE[op](a, b) & ~np.isnan(a) & ~np.isnan(b)

    def fcmp_unordered(self, op, a, b, name=""):
        assert op == "uno"
        return np.isnan(_value(a)) | np.isnan(_value(b))


_COMPARE = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


class _BlockOfThreads:
    """Stands in for `tilec.lowering.llvm._KernelLowering`: the same methods, computing."""

    def __init__(self, num_warps: int):
        self.threads = WARP_SIZE * num_warps
        t = np.arange(self.threads, dtype=np.int64)
        self.lane, self.warp = t % WARP_SIZE, t // WARP_SIZE
        self.b = self.prologue = _VectorBuilder()
        self.values: dict = {}
        self.scratch: dict[tuple[int, str], np.ndarray] = {}
        self.active: np.ndarray | None = None
        self.barriers = 0

    # thread coordinates
    def unique_owner(self, m: ThreadMap):
        return m.unique_owners() if m.replicated else None

    def dim_indices(self, m: ThreadMap):
        return [[idx[:, k] for k in range(idx.shape[1])] for idx in m.indices()]

    def flat_indices(self, m: ThreadMap, coefficients):
        indices = m.indices()
        flats = []
        for slot in range(m.num_slots):
            k = m.slot_multi_index(slot)
            flats.append(sum(idx[:, kd] * c for idx, kd, c in zip(indices, k, coefficients)))
        return flats or [np.zeros(self.threads, dtype=np.int64)]

    # scratch: one array per (byte offset, element type); barriers order nothing in lockstep
    def barrier(self):
        self.barriers += 1

    def before_scratch_write(self, op):
        pass

    def after_scratch_read(self, op):
        pass

    def when(self, predicate, emit):
        self.active = None if predicate is None else np.broadcast_to(predicate, self.threads)
        emit()
        self.active = None

    def scratch_store(self, t, index, value, byte_offset=0):
        key = (byte_offset, str(t))
        index = np.broadcast_to(_value(index), self.threads)
        value = np.broadcast_to(_value(value), self.threads).astype(np.float64)
        active = np.ones(self.threads, bool) if self.active is None else self.active
        buffer, written = self.scratch.setdefault(key, (np.zeros(4096), np.zeros(4096, bool)))
        where, what = index[active], value[active]
        buffer[where] = what
        # two writers of one element must agree (they hold copies of one value)
        np.testing.assert_array_equal(buffer[where], what)
        written[where] = True

    def scratch_load(self, t, index, byte_offset=0):
        buffer, written = self.scratch[(byte_offset, str(t))]
        index = np.broadcast_to(_value(index), self.threads)
        assert written[index].all(), "a read of scratch no thread wrote"
        return buffer[index].astype(np.int64 if str(t).startswith("i") else np.float32)

    # arithmetic the lowering asks for by kind
    def _combine(self, kind, t, x, y):
        x, y = np.asarray(_value(x)), np.asarray(_value(y))
        if isinstance(t, FloatType):
            fn = {"sum": np.add, "prod": np.multiply, "max": maximumf, "min": minimumf}[kind]
            return fn(x.astype(np.float32), y.astype(np.float32)).astype(np.float32)
        fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[kind]
        with np.errstate(over="ignore"):
            return fn(x.astype(np.int32), y.astype(np.int32)).astype(np.int32)

    def _widen(self, v, src, dst):
        return np.asarray(_value(v)).astype(np.float32)


def _shuffle(block: _BlockOfThreads):
    def shuffle(L, v, mode, operand):
        v = np.broadcast_to(_value(v), block.threads)
        lane, warp = block.lane, block.warp
        amount = np.broadcast_to(_value(operand), block.threads)
        if mode == "up":
            source = np.where(lane >= amount, lane - amount, lane)
        elif mode == "bfly":
            source = lane ^ amount
        else:
            source = amount & (WARP_SIZE - 1)
        return v[warp * WARP_SIZE + source]

    return shuffle


def _layouts(shape: tuple[int, ...], warps: int) -> list[BlockedLayout]:
    """Layouts that spread a 2-D shape in every way the lowering distinguishes."""
    found = {default_layout(shape, warps), default_layout(shape, warps, 4)}
    for spt, lanes0, warps0 in itertools.product((1, 4), (1, 4, 32), (1, warps)):
        for order in ((1, 0), (0, 1)):
            found.add(
                BlockedLayout(
                    (1, spt), (lanes0, WARP_SIZE // lanes0), (warps0, warps // warps0), order
                )
            )
            found.add(
                BlockedLayout(
                    (spt, 1), (WARP_SIZE // lanes0, lanes0), (warps // warps0, warps0), order
                )
            )
    return sorted(found, key=str)


def _run(op_class, shape, layout, warps, x, **attrs):
    t = TileType(shape, f32 if x.dtype == np.float32 else i32, layout)
    block_args = Block([t])
    op = op_class.make(input=block_args.args[0], **attrs)
    for r in op.results:  # results in the lowering's layouts, as assign-layouts gives them
        if isinstance(r.type, TileType):
            result_layout = layout
            if op_class is S.ArgReduceOp:
                result_layout = slice_layout(layout, attrs["axis"])
            r.type = TileType(r.type.shape, r.type.element, result_layout)
    L = _BlockOfThreads(warps)
    m = ThreadMap(layout, shape)
    table = m.table()
    L.values[op.input] = [x.reshape(-1)[table[:, s]] for s in range(m.num_slots)]
    saved = lowering._shuffle
    lowering._shuffle = _shuffle(L)
    try:
        results = lowering.LOWERINGS[op_class](L, op)
    finally:
        lowering._shuffle = saved
    outs = []
    for r, slots in zip(op.results, results):
        if not isinstance(r.type, TileType):
            outs.append(np.broadcast_to(_value(slots), L.threads))
            continue
        rm = ThreadMap(r.type.layout, r.type.shape)
        rt = rm.table()
        got = np.zeros(int(np.prod(r.type.shape)))
        for slot, v in enumerate(slots):
            v = np.broadcast_to(_value(v), L.threads).astype(np.float64)
            got[rt[:, slot]] = v
            # every copy of an element holds the same value
            np.testing.assert_array_equal(got[rt[:, slot]], v)
        outs.append(got.reshape(r.type.shape))
    return outs, L


CASES = [((4, 64), 4), ((8, 32), 4), ((2, 256), 8), ((16, 16), 2), ((1, 8), 1), ((64, 4), 4)]


def _inputs(shape, seed, ties=False):
    rng = np.random.default_rng(seed)
    if ties:
        return rng.integers(-2, 3, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("shape", "warps"), CASES)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_scan_lowering_matches_numpy_in_every_layout(shape, warps, kind):
    x = np.round(_inputs(shape, 0) * 8) / 8  # sums of eighths are exact in any order
    for layout, axis in itertools.product(_layouts(shape, warps), (0, 1)):
        (got,), _ = _run(S.ScanOp, shape, layout, warps, x, kind=kind, axis=axis)
        fn = {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind]
        np.testing.assert_array_equal(got, fn.accumulate(x, axis=axis), err_msg=str(layout))


def test_integer_cumsum_lowering_wraps():
    shape, warps = (4, 64), 4
    x = np.full(shape, 2**30, dtype=np.int32)
    for layout in _layouts(shape, warps):
        (got,), _ = _run(S.ScanOp, shape, layout, warps, x, kind="sum", axis=1)
        want = np.cumsum(x.astype(np.int64), axis=1).astype(np.int32)
        np.testing.assert_array_equal(got, want, err_msg=str(layout))


@pytest.mark.parametrize(("shape", "warps"), CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_arg_reduce_lowering_first_on_ties_and_nan_wins(shape, warps, ties):
    x = _inputs(shape, 1, ties)
    if shape[1] > 2 and shape[0] > 1:
        x[0, shape[1] - 1] = x[0, 1] = np.nan
    for layout, axis, kind in itertools.product(_layouts(shape, warps), (0, 1), ("max", "min")):
        (got,), _ = _run(S.ArgReduceOp, shape, layout, warps, x, kind=kind, axis=axis)
        want = (np.argmax if kind == "max" else np.argmin)(x, axis=axis)
        np.testing.assert_array_equal(got, want, err_msg=f"{layout} axis {axis} {kind}")


@pytest.mark.parametrize(("shape", "warps"), CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_topk_lowering_sorted_ties_by_lower_position(shape, warps, ties):
    x = _inputs(shape, 2, ties)
    if shape[1] > 2:
        x[-1, 2] = np.nan
    for layout, axis in itertools.product(_layouts(shape, warps), (0, 1)):
        k = min(4, shape[axis])
        (values, positions), _ = _run(S.TopKOp, shape, layout, warps, x, k=k, axis=axis)
        want = topk_positions(x, k, axis)
        np.testing.assert_array_equal(positions, want, err_msg=f"{layout} axis {axis}")
        np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis=axis))


def test_scan_across_warps_uses_one_barrier_and_within_a_warp_none():
    shape = (1, 256)
    across = BlockedLayout((1, 1), (1, 32), (1, 8), (1, 0))
    _, block = _run(S.ScanOp, shape, across, 8, _inputs(shape, 3), kind="sum", axis=1)
    assert block.barriers == 1
    inside = BlockedLayout((1, 1), (1, 32), (8, 1), (1, 0))
    _, block = _run(S.ScanOp, (8, 256), inside, 8, _inputs((8, 256), 3), kind="sum", axis=1)
    assert block.barriers == 0
