"""Which arguments a launch may copy into a buffer with 16-byte rows (`pitched_operands`: the
matrices a kernel only reads, as operands of its products) and which tensors need it
(`needs_pitch`), without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.jit import load_kernel
from tilec.passes.tiling_operands import pitched_operands
from tilec.runtime.arguments import DeviceTensor
from tilec.runtime.pitched import needs_pitch, pitched_row_bytes

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


def test_row_kernels_and_batched_operands_have_none():
    assert load_kernel(EXAMPLES / "layernorm.tile")._pitched == ()
    assert load_kernel(EXAMPLES / "bmm.tile")._pitched == ()  # 3-D operands


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
    ],
)
def test_which_tensors_need_a_pitched_copy(shape, strides, pointer, expected):
    assert needs_pitch(_tensor(shape, strides, pointer)) is expected


def test_pitched_rows_are_rounded_up_to_16_bytes():
    assert pitched_row_bytes(_tensor((3, 1999), (1999, 1))) == 4000
    assert pitched_row_bytes(_tensor((3, 77), (77, 1), dtype="f32")) == 320
    assert pitched_row_bytes(_tensor((3, 8), (9, 1))) == 16
