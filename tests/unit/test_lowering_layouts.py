"""Owner-of-element arithmetic of #blocked layouts (`tilec.lowering.layouts`) and the
exchange decisions built on it (`tilec.lowering.exchange`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilec
from tilec.dialects import tile as T
from tilec.ir.attributes import BlockedLayout
from tilec.lowering.exchange import kernel_scratch_bytes, op_scratch_bytes, reduce_plan
from tilec.lowering.layouts import (
    ThreadMap,
    default_layout,
    insert_unit_dim,
    layout_error,
    local_source_slots,
    permute_layout,
    remove_unit_dims,
    row_major_strides,
)


def _check_owner_map(layout: BlockedLayout, shape: tuple[int, ...], num_warps: int) -> None:
    """Every element is held; the unique owners hold each exactly once; a thread's slots are
    distinct elements; every element has the same number of copies."""
    m = ThreadMap.checked(layout, shape, num_warps)
    table = m.table()
    numel = math.prod(shape)
    assert table.shape == (32 * num_warps, m.num_slots)
    assert table.min() >= 0 and table.max() < numel
    owners = m.unique_owners()
    assert sorted(table[owners].ravel().tolist()) == list(range(numel))  # a bijection
    for row in table:
        assert len(set(row.tolist())) == len(row)
    copies = np.bincount(table.ravel(), minlength=numel)
    assert (copies == copies[0]).all() and copies[0] >= 1
    assert (copies[0] == 1) == (not m.replicated)


SHAPES_AND_WARPS = [
    ((1024,), 4),
    ((64,), 4),
    ((4,), 4),
    ((4, 1024), 4),
    ((64, 64), 4),
    ((64, 32), 1),
    ((128, 128), 8),
    ((16, 8), 2),
    ((4, 1), 4),
    ((1, 256), 4),
    ((1, 1, 4, 64), 4),
    ((2, 4, 8), 32),
]


@pytest.mark.parametrize(("shape", "num_warps"), SHAPES_AND_WARPS)
def test_default_layout_owner_map_is_a_bijection(shape, num_warps):
    _check_owner_map(default_layout(shape, num_warps), shape, num_warps)


@pytest.mark.parametrize(
    ("layout", "shape"),
    [
        (BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0)), (128, 64)),
        (BlockedLayout((2, 2), (8, 4), (2, 2), (0, 1)), (64, 32)),
        (BlockedLayout((4, 1), (2, 16), (1, 4), (1, 0)), (8, 16)),  # wraps along both
        (BlockedLayout((8,), (32,), (4,), (0,)), (256,)),
        (BlockedLayout((1, 1, 2), (2, 4, 4), (4, 1, 1), (2, 0, 1)), (16, 8, 8)),
    ],
)
def test_hand_written_layouts_cover_their_tiles(layout, shape):
    _check_owner_map(layout, shape, math.prod(layout.warps_per_cta))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 7), min_size=1, max_size=3),
    st.sampled_from([1, 2, 4, 8, 16]),
)
def test_default_layouts_are_valid_for_any_power_of_two_shape(exponents, num_warps):
    shape = tuple(1 << e for e in exponents)
    layout = default_layout(shape, num_warps)
    assert layout_error(layout, shape, num_warps) is None
    _check_owner_map(layout, shape, num_warps)


def test_layout_errors_say_what_is_wrong():
    good = BlockedLayout((1, 1), (1, 32), (4, 1), (1, 0))
    assert layout_error(good, (4, 64), 4) is None
    assert "not 32" in layout_error(BlockedLayout((1, 1), (2, 8), (4, 1), (1, 0)), (4, 64), 4)
    assert "not 8" in layout_error(good, (4, 64), 8)
    assert "permutation" in layout_error(BlockedLayout((1, 1), (1, 32), (4, 1), (0, 0)), (4, 4), 4)
    assert "powers of two" in layout_error(good, (4, 48), 4)
    assert "dimensions" in layout_error(good, (64,), 4)


def test_slots_enumerate_a_threads_elements_row_major():
    # 64x64 in 4 warps: lanes along columns, warps along rows; 16 rows x 2 columns per thread.
    m = ThreadMap(default_layout((64, 64), 4), (64, 64))
    assert m.counts == (16, 2)
    assert [d.offsets for d in m.dims] == [tuple(range(0, 64, 4)), (0, 32)]
    table = m.table()
    lane, warp = 5, 2  # thread 69
    expected = [r * 64 + c for r in range(warp, 64, 4) for c in (lane, lane + 32)]
    assert table[32 * warp + lane].tolist() == expected


def test_expand_dims_and_squeeze_keep_elements_in_their_threads():
    src = default_layout((4,), 4)
    expanded = insert_unit_dim(src, 1)
    assert expanded == default_layout((4, 1), 4)
    slots = local_source_slots(ThreadMap(src, (4,)), ThreadMap(expanded, (4, 1)), (1, 0))
    assert slots == [0]
    squeezed = remove_unit_dims(expanded, (4, 1), [0])
    assert squeezed == src
    spread = BlockedLayout((1, 1), (1, 32), (4, 1), (1, 0))  # lanes on the size-1 dimension
    assert remove_unit_dims(spread, (4, 1), [0]) is None


def test_broadcast_is_local_when_the_operand_wraps_like_the_result():
    result = default_layout((4, 256), 4)
    operand, target = ThreadMap(result, (4, 1)), ThreadMap(result, (4, 256))
    assert local_source_slots(operand, target, (1, 0)) == [0] * target.num_slots
    # The reduction's 1-D default layout does not hold the rows where the broadcast needs them.
    column = ThreadMap(insert_unit_dim(default_layout((4,), 4), 1), (4, 1))
    assert local_source_slots(column, target, (1, 0)) is None


def test_transpose_permutes_the_layout_without_moving_elements():
    layout = default_layout((64, 32), 4)
    transposed = permute_layout(layout, (1, 0))
    src, dst = ThreadMap(layout, (64, 32)), ThreadMap(transposed, (32, 64))
    slots = local_source_slots(src, dst, (1, 32))  # result[i, j] = source[j, i]
    assert slots is not None and sorted(slots) == list(range(src.num_slots))
    # Into the default layout of the transposed shape, elements must move.
    default = ThreadMap(default_layout((32, 64), 4), (32, 64))
    assert local_source_slots(src, default, (1, 32)) is None


def test_row_major_strides():
    assert row_major_strides((4, 8, 2)) == (16, 2, 1)
    assert row_major_strides((5,)) == (1,)


# -- exchange decisions on real kernels ----------------------------------------------------------

PIPELINE = "canonicalize,cse,specialize,assign-layouts,canonicalize,cse,dce"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _kernel(example: str, name: str):
    program = tilec.compile(str(EXAMPLES / example), pipeline=PIPELINE, kernels=[name])
    return program.module.functions[0]


def test_softmax_reduction_plan():
    kernel = _kernel("softmax.tile", "softmax")
    reduces = [op for op in kernel.walk() if isinstance(op, T.ReduceOp)]
    assert len(reduces) == 2
    plan = reduce_plan(reduces[0])
    # [4, 1024] with lanes along the row and one warp per row: 5 shuffles, no warps to combine,
    # and the result (a slice of the row layout) stays where the shuffles left it.
    assert plan.lane_bits == (1, 2, 4, 8, 16)
    assert plan.warps == 1
    assert plan.result_slots == [0]
    assert op_scratch_bytes(reduces[0]) == 0
    # Reductions, broadcasts back and the mask all stay in registers.
    assert kernel_scratch_bytes(kernel) == 0


def test_dot_scratch_holds_both_operands():
    kernel = _kernel("matmul.tile", "matmul")
    (dot,) = [op for op in kernel.walk() if isinstance(op, T.DotOp)]
    assert op_scratch_bytes(dot) == 64 * 32 * 2 + 32 * 64 * 2
    assert kernel_scratch_bytes(kernel) == 8192
