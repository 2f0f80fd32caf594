"""Which arguments a launch may copy into a buffer with 16-byte rows (`pitched_operands`: the
matrices a kernel only reads, as operands of its products) and which tensors need it
(`needs_pitch`), without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.jit import load_kernel
from tilec.passes.tiling_operands import pitched_operands
from tilec.runtime.arguments import DeviceTensor
from tilec.runtime.pitched import flat_rows, needs_pitch, pitched_row_bytes, pitched_strides

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_both_operands_of_a_gemm_may_be_pitched_and_its_output_not(layout):
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", f"gemm_{layout}")
    # each read again across the other operand's dimension (N for a, M for b)
    assert gemm._pitched == ((0, ("N",)), (1, ("M",)))


def test_an_operand_the_kernel_also_writes_is_not_pitched(tmp_path):
    source = """
def scaled(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
            a[tm, tk] = a[tm, tk] * 2.0
        c[tm, tn] = acc
"""
    (tmp_path / "scaled.tile").write_text(source)
    kernel = load_kernel(tmp_path / "scaled.tile")._kernel
    assert pitched_operands(kernel) == ((1, ("M",)),)  # b only


def test_row_kernels_have_none_and_batched_operands_are_pitched_whole():
    assert load_kernel(EXAMPLES / "layernorm.tile")._pitched == ()
    # bmm's [Z, M, K] and [Z, K, N]: each read again across the other's M or N
    assert load_kernel(EXAMPLES / "bmm.tile")._pitched == ((0, ("N",)), (1, ("M",)))
    # the experts' weights [E, N, K] of the MoE GEMM, read again across the tokens
    assert (1, ("T",)) in load_kernel(EXAMPLES / "moe_gemm.tile")._pitched


def test_no_pitch_operands_option_turns_it_off():
    gemm = load_kernel(EXAMPLES / "gemm_layouts.tile", "gemm_nn", pitch_operands=False)
    assert gemm._pitched == ()


def _tensor(shape, strides, pointer=0x1000, dtype="f16"):
    return DeviceTensor(pointer, shape, strides, dtype, 0)


@pytest.mark.parametrize(
    "shape, strides, pointer, expected",
    [
        ((1001, 1999), (1999, 1), 0x1000, True),  # rows 3998 bytes apart
        ((1001, 2000), (2000, 1), 0x1000, False),  # 4000 bytes: a multiple of 16
        ((1001, 2000), (2000, 1), 0x1006, True),  # an odd address
        ((1001, 1999), (2008, 1), 0x1000, False),  # a view of padded rows: already pitched
        ((1999, 1001), (1, 1999), 0x1000, False),  # column-major: not a row-copy's business
        ((1, 1999), (1999, 1), 0x1000, False),  # one row at an aligned address
        ((64, 100), (50, 1), 0x1000, False),  # overlapping rows: no copy is the same
        ((0, 1999), (1999, 1), 0x1000, False),
        ((8, 1001, 999), (1001 * 999, 999, 1), 0x1000, True),  # a contiguous batch
        ((8, 1001, 1000), (1001 * 1000, 1000, 1), 0x1000, False),
        ((8, 500, 999), (1001 * 999, 999, 1), 0x1000, False),  # batches apart: not one copy
        ((1, 500, 999), (1001 * 999, 999, 1), 0x1000, True),  # one matrix of such a batch
        ((2, 3, 40, 77), (3 * 40 * 77, 40 * 77, 77, 1), 0x1000, True),  # [B, H, S, D]
    ],
)
def test_which_tensors_need_a_pitched_copy(shape, strides, pointer, expected):
    assert needs_pitch(_tensor(shape, strides, pointer)) is expected


def test_a_batch_is_copied_as_the_rows_of_all_its_matrices():
    batch = _tensor((8, 1001, 999), (1001 * 999, 999, 1))
    assert flat_rows(batch) == (8 * 1001, 999)
    assert pitched_strides(batch) == (1001 * 1000, 1000, 1)
    assert pitched_strides(_tensor((3, 1999), (1999, 1))) == (2000, 1)
    assert pitched_strides(_tensor((2, 3, 40, 77), (9240, 3080, 77, 1), dtype="f32")) == (
        3 * 40 * 80,
        40 * 80,
        80,
        1,
    )
    assert flat_rows(_tensor((8, 500, 999), (1001 * 999, 999, 1))) is None
    assert flat_rows(_tensor((999,), (1,))) is None


def test_pitched_rows_are_rounded_up_to_16_bytes():
    assert pitched_row_bytes(_tensor((3, 1999), (1999, 1))) == 4000
    assert pitched_row_bytes(_tensor((3, 77), (77, 1), dtype="f32")) == 320
    assert pitched_row_bytes(_tensor((3, 8), (9, 1))) == 16
