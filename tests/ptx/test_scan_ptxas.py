"""ptxas accepts the scans, arg-reductions and topk of every element type, along rows and
columns, inside a warp and across warps, for sm_80 and sm_90a (tilec/lowering/scan.py). Like
tests/ptx/test_ptxas.py, these fail (never skip) without ptxas."""

from __future__ import annotations

import pytest

import tilec
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import assemble

ARCHES = ("sm_80", "sm_90a")
DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64")


def _source(t: str) -> str:
    sums = "i32" if t in ("i8", "i16") else t
    return f"""
@kernel(warps=8)
def rows(x: {t}[M, N], s: {sums}[M, N], h: {t}[M, N], a: i32[M], v: {t}[M, 8], i: i32[M, 8]):
    for tm in tiles(M):
        r = x[tm, :]
        s[tm, :] = cumsum(r, axis=1) + cumprod(r, axis=1)
        h[tm, :] = cummax(r, axis=1) + cummin(r, axis=1)
        a[tm] = argmax(r, axis=1) + argmin(r, axis=1)
        v[tm, :] = topk(r, 8, axis=1)
        i[tm, :] = topk_indices(r, 8, axis=1)

@kernel(warps=4)
def columns(x: {t}[M, N], s: {sums}[M, N], a: i32[N], v: {t}[2, N]):
    for tn in tiles(N):
        c = x[:, tn]
        s[:, tn] = cumsum(c, axis=0)
        a[tn] = argmax(c, axis=0)
        v[:, tn] = topk(c, 2, axis=0)
"""


# Rows of 512 over 8 warps (two warps a row), columns of 256; and awkward extents in f32.
CASES = [(t, "M=32,N=512") for t in DTYPES] + [("f32", "M=256,N=32"), ("f32", "M=3,N=37")]


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize(("dtype", "extents"), CASES)
def test_scans_assemble(tmp_path, arch, dtype, extents):
    path = tmp_path / "scans.tile"
    path.write_text(_source(dtype))
    fixed = DEFAULT_PIPELINE.replace("tiling,", f'tiling{{extents="{extents}"}},', 1)
    pipeline = target_pipeline(fixed, arch)
    program = tilec.compile(str(path), pipeline=pipeline)
    report = assemble(compile_to_ptx(program.module, arch), arch)
    assert sorted(report) == ["columns", "rows"]
