"""The `transpose-dot` pass: `a.T @ b.T` computed as `(b @ a).T` on sm_90a, so that both operands
reach wgmma from shared memory. Translation validation of the whole sm_90a pipeline, pass by
pass, on the kernels it rewrites (the default pipeline's check, tests/unit/test_translation_
validation.py, runs without a target and so without this pass); the PTX it leads to; the dots
it leaves alone and why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.interp.runner import random_arguments
from tilec.ir.verifier import verify
from tilec.passmanager import PassContext, parse_pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONTIGUOUS = 'assume{all="aligned,unit,divisible"},'


def _output_ulp(e: np.ndarray) -> np.ndarray | float:
    """One unit in the last place of each element of a 16-bit float output (0 otherwise)."""
    if e.dtype == np.float16:
        return np.spacing(np.abs(e)).astype(np.float64)
    if e.dtype.name == "bfloat16":  # 7 mantissa bits against f32's 23
        return np.spacing(np.abs(e.astype(np.float32))).astype(np.float64) * 2.0**16
    return 0.0


@pytest.mark.parametrize("kernel", ["gemm_tt", "gemm_tt_bf16"])
@pytest.mark.parametrize("extents", [{"M": 1, "N": 3, "K": 2}, {"M": 144, "N": 80, "K": 208}])
def test_every_pass_of_the_sm90a_pipeline_preserves_a_transposed_gemm(kernel, extents):
    module = tilec.compile(str(EXAMPLES / "gemm_layouts.tile"), kernels=[kernel]).module
    inputs = random_arguments(module.lookup(kernel), extents, seed=3)
    context = PassContext()
    ran = []
    for p in parse_pipeline(CONTIGUOUS + target_pipeline(DEFAULT_PIPELINE, "sm_90a")):
        before = module.clone()
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
        ran.append(p.name)
        got, sizes = run_kernel(module, kernel, inputs, None)
        expected, _ = run_kernel(before, kernel, inputs, sizes)
        for g, e in zip(got, expected):
            if p.exact:
                np.testing.assert_array_equal(g, e, err_msg=p.name)
            else:
                # A pass that reassociates the f32 sums (the dot's order of products) may land
                # the rounding to a 16-bit output one unit of its last place away, as numpy's
                # own matmul does for (b @ a).T against a.T @ b.T: by the order of the BLAS
                # kernel it picks for the CPU at run time (this failed on one machine's CPU
                # with numpy 2.3 and 2.4 alike, and passed on others).
                scale = max(float(np.max(np.abs(e.astype(np.float64)), initial=0.0)), 1.0)
                error = np.abs(g.astype(np.float64) - e.astype(np.float64))
                allowed = 1e-5 * scale + _output_ulp(e)
                assert np.all(error <= allowed), (p.name, float(np.max(error - allowed)))
    assert "transpose-dot" in ran
    said = [r.message for r in context.remarks if r.pass_name == "transpose-dot"]
    assert said and said[0].startswith("a.T @ b.T computed as (b @ a).T")


def test_the_swapped_gemm_reads_both_operands_by_descriptors_and_copies_them_by_tma():
    compiled = tilec.compile(
        str(EXAMPLES / "gemm_layouts.tile"),
        kernels=["gemm_tt"],
        pipeline=CONTIGUOUS + DEFAULT_PIPELINE,
        target="ptx",
        arch="sm_90a",
    )
    ptx = compiled.ptx
    assert "ldmatrix" not in ptx  # no operand through registers
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") == 4
    assert "cp.async.bulk.tensor" in ptx


def test_sm80_and_the_option_leave_the_dot_as_written():
    path = str(EXAMPLES / "gemm_layouts.tile")
    for arch, options in (("sm_80", None), ("sm_90a", {"transpose-dot": {"enable": False}})):
        pipeline = tilec.compiler.build_pipeline(options=options)
        compiled = tilec.compile(path, kernels=["gemm_tt"], pipeline=pipeline, target="ptx",
                                 arch=arch)  # fmt: skip
        transposes = [op for op in compiled.module.walk() if op.name == "tile.transpose"]
        assert len(transposes) == 0 or arch == "sm_90a"
        said = [r.message for r in compiled.remarks if r.pass_name == "transpose-dot"]
        assert said == (
            [] if arch == "sm_80" else ["operands kept as written: option enable=false"]
        )


@pytest.mark.parametrize(
    "kernel, why",
    [
        ("gemm_tn", "only one operand is stored transposed"),
        ("gemm_nt", "only one operand is stored transposed"),
    ],
)
def test_a_dot_with_one_transposed_operand_is_left_with_a_reason(kernel, why):
    compiled = tilec.compile(str(EXAMPLES / "gemm_layouts.tile"), kernels=[kernel],
                             target="tir", arch="sm_90a",
                             pipeline=target_pipeline(DEFAULT_PIPELINE, "sm_90a"))  # fmt: skip
    said = [r.message for r in compiled.remarks if r.pass_name == "transpose-dot"]
    assert said and why in said[0]
