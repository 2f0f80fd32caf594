"""`flatten` (`passes/flatten.py`): an element-wise kernel over dense tensors runs as one
dimension of their elements, and a one-dimensional access the grid walks in whole tiles moves
16 bytes at a time whatever its extent (`vectorize`'s runs checked at run time). Checked in
the interpreter after every pass against the 2-D kernel (bit for bit) at awkward shapes, the
refusals and their remarks, the jit's specialization and key, and the launcher's views."""

from __future__ import annotations

import numpy as np
import pytest

from tests.validation import check_each_pass
from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.dialects import tile as T
from tilec.interp import LaunchError, run_kernel
from tilec.interp.runner import random_arguments
from tilec.passmanager import PassContext, parse_pipeline

KERNELS = """
def gelu_tanh(x: bf16[M, N], y: bf16[M, N]):
    for tm, tn in tiles(M, N):
        u = x[tm, tn].to(f32)
        y[tm, tn] = 0.5 * u * (1.0 + tanh(0.7978845608 * (u + 0.044715 * u * u * u)))


def pick(x: f32[M, N], g: f16[M, N], s: f32, out: f32[M, N]):
    for tm, tn in tiles(M, N):
        out[tm, tn] = where(x[tm, tn] > 0.0, x[tm, tn] * s, g[tm, tn].to(f32))


def swish3(a: f32[B, S, D], b: f32[B, S, D], y: f16[B, S, D]):
    for tb, ts, td in tiles(B, S, D):
        t = a[tb, ts, td]
        y[tb, ts, td] = (t * sigmoid(t) * b[tb, ts, td]).to(f16)


def bias_add(x: f32[M, N], bias: f32[N], y: f32[M, N]):
    for tm, tn in tiles(M, N):
        y[tm, tn] = x[tm, tn] + bias[tn][None, :]


def positions(x: f32[M, N], y: f32[M, N]):
    for tm, tn in tiles(M, N):
        y[tm, tn] = x[tm, tn] + offsets(tn)[None, :].to(f32)


def row_sums(x: f32[M, N], y: f32[M]):
    for tm in tiles(M):
        acc = zeros([tm], f32)
        for tn in tiles(N):
            acc += sum(x[tm, tn], axis=1)
        y[tm] = acc


@kernel(tile={"M": 4, "N": 256})
def pinned(x: f32[M, N], y: f32[M, N]):
    for tm, tn in tiles(M, N):
        y[tm, tn] = x[tm, tn] * 2.0


def row_scale(x: f32[M, N], w: f32[N], y: f32[M, N]):
    for tm in tiles(M):
        for tn in tiles(N):
            y[tm, tn] = x[tm, tn] * w[tn][None, :]


def scale(x: bf16[N], y: bf16[N]):
    for tn in tiles(N):
        y[tn] = x[tn] * 2.0
"""


def _module(name: str):
    return compile_source(KERNELS, "k.tile", kernels=[name]).module


def _facts(module, name: str, dense: bool = True) -> str:
    func = module.lookup(name)
    views = [a for a in func.arguments if hasattr(a.type, "rank")]
    tensors = [a.name_hint for a in views]
    units = ",".join(f"{a.name_hint}.stride.{a.type.rank - 1}" for a in views)
    dense_text = f' dense="{",".join(tensors)}"' if dense else ""
    return f'assume{{aligned="{",".join(tensors)}" unit="{units}"{dense_text}}}'


def _run(module, name: str, pipeline: str) -> PassContext:
    ctx = PassContext()
    for p in parse_pipeline(pipeline):
        ctx.current_pass = p.name
        p.run(module, ctx)
    return ctx


def _remarks(ctx: PassContext, pass_name: str) -> list[str]:
    return [r.message for r in ctx.remarks if r.pass_name == pass_name]


@pytest.mark.parametrize("name", ["gelu_tanh", "pick", "swish3"])
@pytest.mark.parametrize("sizes", [(37, 19, 5), (1, 1, 1), (3, 4097, 2)])
def test_every_pass_keeps_what_a_flattened_kernel_computes(name, sizes):
    module = _module(name)
    func = module.lookup(name)
    dims = ("B", "S", "D") if name == "swish3" else ("M", "N")
    extents = dict(zip(dims, sizes))
    inputs = random_arguments(func, extents, seed=7)
    ctx = check_each_pass(module, name, _facts(module, name) + "," + DEFAULT_PIPELINE, inputs)
    func = module.lookup(name)
    assert [str(d) for d in func.attributes["tilec.flattened"].value] == ["_".join(dims), *dims]
    assert all(a.type.rank == 1 for a in func.arguments if hasattr(a.type, "rank"))
    (remark,) = _remarks(ctx, "flatten")
    assert remark.startswith(f"flattened: element-wise over dense [{', '.join(dims)}] tensors")


def test_the_flattened_kernel_computes_what_the_2d_kernel_computes():
    """Against the frontend's own 2-D kernel, rows whose starts no 16 bytes align."""
    source = _module("gelu_tanh")
    flat = _module("gelu_tanh")
    _run(flat, "gelu_tanh", _facts(flat, "gelu_tanh") + "," + DEFAULT_PIPELINE)
    x, y = random_arguments(source.lookup("gelu_tanh"), {"M": 13, "N": 7001}, seed=3)
    expected = y.copy()
    run_kernel(source, "gelu_tanh", [x, expected])
    run_kernel(flat, "gelu_tanh", [x, y])  # 2-D arrays, viewed as their elements
    np.testing.assert_array_equal(y, expected)
    assert y.shape == (13, 7001)


def test_a_flattened_kernel_refuses_an_array_with_gaps():
    module = _module("gelu_tanh")
    _run(module, "gelu_tanh", _facts(module, "gelu_tanh") + ",flatten")
    x, y = random_arguments(_module("gelu_tanh").lookup("gelu_tanh"), {"M": 8, "N": 10}, seed=1)
    with pytest.raises(LaunchError, match="row-major array with no gaps"):
        run_kernel(module, "gelu_tanh", [x[:, :5], y[:, :5]])


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("bias_add", "tile.load has a tile [BN], not the grid's [BM, BN]"),
        ("positions", "arith.index_cast uses a tile's position as a value"),
        ("pinned", "its tile sizes are pinned (BM, BN)"),
    ],
)
def test_kernels_that_read_positions_or_pin_tiles_stay_2d(name, why):
    module = _module(name)
    ctx = _run(module, name, _facts(module, name) + ",flatten")
    assert "tilec.flattened" not in module.lookup(name).attributes
    assert _remarks(ctx, "flatten") == [f"not flattened: {why}"]


def test_reductions_and_1d_kernels_are_left_without_a_remark():
    for name in ("row_sums", "scale"):
        module = _module(name)
        ctx = _run(module, name, _facts(module, name) + ",flatten")
        assert "tilec.flattened" not in module.lookup(name).attributes
        assert _remarks(ctx, "flatten") == []


def test_without_the_dense_fact_the_kernel_stays_2d_and_says_why():
    module = _module("pick")
    ctx = _run(module, "pick", _facts(module, "pick", dense=False) + ",flatten")
    assert "tilec.flattened" not in module.lookup("pick").attributes
    assert _remarks(ctx, "flatten") == [
        "not flattened: x, g, out not known to be dense (row-major, no gaps); @tilec.jit "
        "records it for contiguous tensors"
    ]


def test_the_flat_views_carry_the_product_of_the_extents_multiples():
    module = _module("pick")
    facts = _facts(module, "pick").replace("}", ' multiples="x.extent.0=4,x.extent.1=2"}')
    _run(module, "pick", facts + ",flatten")
    func = module.lookup("pick")
    multiples = func.attributes["tilec.multiples"].elements
    assert [[e.value for e in p.elements] for p in multiples] == [["x.extent.0", 8]]
    assert sorted(map(str, func.attributes["tilec.unit"].value)) == [
        "g.stride.0",
        "out.stride.0",
        "x.stride.0",
    ]
    assert "tilec.dense" not in func.attributes


def test_a_walked_1d_view_moves_16_bytes_with_its_last_run_checked():
    """`scale` over N (not known to be a multiple of 8): checked runs of 8 bf16; a bias row
    the N axis of the grid walks too; not a row of weights a loop reads in every block."""
    module = _module("scale")
    ctx = _run(module, "scale", _facts(module, "scale") + "," + DEFAULT_PIPELINE)
    accesses = [op for op in module.walk() if isinstance(op, (T.LoadOp, T.StoreOp))]
    assert [(op.attributes["vector"].value, "checked" in op.attributes) for op in accesses] == [
        (8, True),
        (8, True),
    ]
    assert any(
        "checked at run time: the blocks walk N in whole tiles" in m
        for m in _remarks(ctx, "vectorize")
    )
    module = _module("bias_add")
    _run(module, "bias_add", _facts(module, "bias_add") + "," + DEFAULT_PIPELINE)
    (bias,) = [
        op for op in module.walk() if isinstance(op, T.LoadOp) and op.view.name_hint == "bias"
    ]
    assert "checked" in bias.attributes
    module = _module("row_scale")
    _run(module, "row_scale", _facts(module, "row_scale") + "," + DEFAULT_PIPELINE)
    (w,) = [op for op in module.walk() if isinstance(op, T.LoadOp) and op.view.name_hint == "w"]
    assert "checked" not in w.attributes


@pytest.mark.parametrize("n", [1, 7, 8, 4097, 12345])
def test_checked_runs_compute_what_plain_accesses_compute(n):
    module = _module("scale")
    (x, y) = random_arguments(module.lookup("scale"), {"N": n}, seed=n)
    expected = y.copy()
    run_kernel(_module("scale"), "scale", [x, expected])
    _run(module, "scale", _facts(module, "scale") + "," + DEFAULT_PIPELINE)
    run_kernel(module, "scale", [x, y])
    np.testing.assert_array_equal(y, expected)


def test_the_jit_flattens_a_call_on_dense_tensors_and_keys_the_layout(tmp_path):
    """A contiguous call compiles the flattened kernel (16-byte accesses at 3000 x 7001 bf16,
    whose rows no 16 bytes align); a call on tensors with gaps has another key and keeps the
    kernel 2-D; the launcher gives the flattened kernel its grid from the source's extents
    and refuses tensors with gaps."""
    import ml_dtypes

    from tilec.jit import load_kernel
    from tilec.runtime import DeviceTensor
    from tilec.runtime.arguments import Arguments
    from tilec.runtime.arguments import LaunchError as RuntimeLaunchError
    from tilec.runtime.launcher import Launcher

    path = tmp_path / "k.tile"
    path.write_text(KERNELS)
    k = load_kernel(str(path), "gelu_tanh")
    x = np.zeros((3000, 7001), ml_dtypes.bfloat16)
    kernel = k.compile_for(x, x.copy(), arch="sm_90a")
    assert kernel.abi.flattened == ("M_N", "M", "N")
    assert [(g.dim, g.tile) for g in kernel.abi.grid] == [("M_N", 4096)]
    assert kernel.specialization.unit == {"x.stride.0", "y.stride.0"}
    loads = [line for line in kernel.ptx.splitlines() if "ld.global" in line]
    assert loads and any(".v4." in line for line in loads)

    dense = k._checker.convert([x, x.copy()])
    assert k.specialization_of(dense).dense == {"x", "y"}
    rows = [DeviceTensor(256, (3000, 7001), (7008, 1), "bf16", 0) for _ in range(2)]
    gappy = Arguments(rows, dict(dense.extents), 0, None, [])
    assert not k.specialization_of(gappy).dense
    assert k._key(gappy) != k._key(dense)
    # 2.5e9 elements: past what the kernel's 32-bit bounds compare, so the 2-D grid
    huge = [DeviceTensor(256, (50000, 50000), (50000, 1), "bf16", 0) for _ in range(2)]
    assert not k.specialization_of(Arguments(huge, {"M": 50000, "N": 50000}, 0, None, [])).dense

    launcher = Launcher(kernel.ptx, kernel.abi, kernel.specialization)
    assert launcher.grid(dense) == (-(-3000 * 7001 // 4096), 1, 1)
    flat = launcher._flat(dense.values)
    assert [(v.shape, v.strides) for v in flat] == [((3000 * 7001,), (1,))] * 2
    with pytest.raises(RuntimeLaunchError, match="a dense tensor"):
        launcher._flat(rows)
