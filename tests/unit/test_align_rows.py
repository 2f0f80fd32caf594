"""The `align-rows` pass (opt-in): a one-row block of an awkward width rotated onto a 16-byte
aligned start computes what it did (interpreter, before and after the pass, at widths that
need the shift and the clamp); the kernels it leaves alone say why; the rotated accesses lower
to checked runs (a vector access where a run is whole, element by element elsewhere)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE
from tilec.example_cases import case_kernel
from tilec.interp.runner import random_arguments
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pipeline(extents: dict[str, int], enable: bool = True, facts: str = "aligned,unit") -> str:
    sizes = ",".join(f"{d}={n}" for d, n in extents.items())
    text = DEFAULT_PIPELINE.replace("tiling,", f'tiling{{extents="{sizes}"}},', 1)
    text = text.replace("align-rows", f"align-rows{{enable={str(enable).lower()}}}")
    return f'assume{{all="{facts}"}},' + text


def _run_through(example: str, kernel: str, extents: dict[str, int], **kw):
    """The kernel's outputs in the interpreter just before and just after `align-rows`, the
    kernel after it, and the remarks."""
    kernel, dtypes = case_kernel(kernel)  # "rmsnorm[T=f32]": a binding of its dtype parameter
    module = tilec.compile(
        os.path.join(ROOT, "examples", example),
        kernels=[kernel],
        options={"dtypes": dtypes} if dtypes else None,
    ).module
    inputs = random_arguments(module.lookup(kernel), extents, seed=3)
    context = PassContext()
    for p in parse_pipeline(_pipeline(extents, **kw)):
        before = module.clone()
        context.current_pass = p.name
        p.run(module, context)
        if p.name == "align-rows":
            after, sizes = run_kernel(module, kernel, inputs, None)
            expected, _ = run_kernel(before, kernel, inputs, sizes)
            return after, expected, module.lookup(kernel), context.remarks
    raise AssertionError("align-rows is not in the default pipeline")


# Widths that leave rows misaligned (37, 200, 1025), one where the shift must be clamped
# (61 in a 64-wide tile: a row starting 7 elements past a boundary would need 68).
@pytest.mark.parametrize("n", [37, 61, 200, 1025])
@pytest.mark.parametrize(
    ("example", "kernel"),
    [
        ("softmax.tile", "softmax"),
        ("softmax.tile", "softmax_f16"),
        ("layernorm.tile", "layernorm"),
        ("rmsnorm.tile", "rmsnorm[T=f32]"),
    ],
)
def test_rotated_rows_compute_what_they_did(example, kernel, n):
    after, expected, func, _ = _run_through(example, kernel, {"M": 7, "N": n})
    assert func.attributes.get("tilec.row_frame") is not None, "the rows were not rotated"
    for got, want in zip(after, expected):
        scale = max(float(np.nanmax(np.abs(want.astype(np.float64)), initial=0.0)), 1.0)
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=0, atol=1e-5 * scale
        )


def test_rows_known_aligned_are_left_alone():
    _, _, func, remarks = _run_through(
        "softmax.tile", "softmax_f16", {"M": 7, "N": 64}, facts="aligned,unit,divisible"
    )
    assert func.attributes.get("tilec.row_frame") is None
    assert any("every row starts aligned" in r.message for r in remarks)


def test_a_row_walked_by_a_loop_is_left_alone():
    # cross-entropy walks its vocabulary in tiles: no whole row a block, nothing to rotate.
    _, _, func, remarks = _run_through("cross_entropy.tile", "cross_entropy", {"M": 5, "V": 300})
    assert func.attributes.get("tilec.row_frame") is None
    assert not any("rows rotated" in r.message for r in remarks)


def test_a_scan_along_the_row_is_left_alone():
    source = (
        "def rowscan(x: f32[M, N], y: f32[M, N]):\n"
        "    for tm in tiles(M):\n"
        "        y[tm, :] = cumsum(x[tm, :], axis=1)\n"
    )
    program = tilec.compile(source, pipeline=_pipeline({"M": 7, "N": 37}))
    assert program.module.lookup("rowscan").attributes.get("tilec.row_frame") is None
    assert any(
        "rows not rotated: tile.scan moves elements between positions" in r.message
        for r in program.remarks
    )


def test_off_by_default():
    _, _, func, _ = _run_through("softmax.tile", "softmax_f16", {"M": 7, "N": 37}, enable=False)
    assert func.attributes.get("tilec.row_frame") is None
    for op in func.walk():
        assert "frame" not in op.attributes and "checked" not in op.attributes


def test_checked_runs_lower_to_vector_and_element_accesses():
    program = tilec.compile(
        os.path.join(ROOT, "examples", "softmax.tile"),
        kernels=["softmax_f16"],
        pipeline=_pipeline({"M": 8192, "N": 3077}),
        target="ptx",
        arch="sm_90a",
    )
    ptx = program.ptx
    # Four runs of 8 f16 a thread (a 4096-wide tile over 128 threads), loaded and stored whole
    # on the fast path, element by element (predicated) on the other.
    assert ptx.count("ld.global.v4.b32") == 4 and ptx.count("st.global.v4.b32") == 4
    assert ptx.count("ld.global.b16") == 32 and ptx.count("st.global.b16") == 32
