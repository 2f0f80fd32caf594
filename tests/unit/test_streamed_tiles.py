"""What a block keeps in flight, and the grids of kernels whose loop walks another axis:
`occupancy.streamed_load_bytes` (loads no other block reads, together per loop body) and
`tile_shapes`' narrowing of the contiguous run where the known grid is small. The choices
are checked against the configurations the H200's regret runs timed fastest
(docs/benchmarks/regret-full-b1ca8d8.json); `tilec.benchmarks.regret_replay` looks them up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.compiler import compile as compile_tile
from tilec.dialects.builtin import FuncOp
from tilec.passes.occupancy import streamed_load_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _kernel(example: str, name: str, extents: str, passes: str = "") -> FuncOp:
    pipeline = f'canonicalize,cse,tiling{{extents="{extents}"}}' + passes
    program = compile_tile(EXAMPLES / f"{example}.tile", target="tir", pipeline=pipeline)
    (kernel,) = [
        op for op in program.module.walk() if isinstance(op, FuncOp) and op.sym_name == name
    ]
    return kernel


def _sizes(kernel: FuncOp) -> dict[str, int]:
    return {str(s): int(v) for s, v in kernel.attributes["tilec.tile_sizes"].value}


def test_both_operands_of_an_elementwise_kernel_are_streamed():
    # swiglu's a and b (1 x 4096 bf16 each) are read by one block only: 16 KiB in flight.
    kernel = _kernel("swiglu", "swiglu", "M=8192,N=8192")
    assert _sizes(kernel)["BN"] == 4096
    assert streamed_load_bytes(kernel) == 2 * 4096 * 2


def test_a_tile_every_block_along_a_grid_axis_reads_is_not_streamed():
    # head_gate's gate g[ts, :] leaves out the heads' grid axis: 32 blocks read it (from L2);
    # only x[ts, h, :] streams.
    kernel = _kernel("head_gate", "head_gate", "S=8192,H=32,D=128")
    bs = _sizes(kernel)["BS"]
    assert streamed_load_bytes(kernel) == bs * 128 * 2


def test_loads_of_two_loops_are_not_in_flight_together():
    # mask-bounds splits cross-entropy's loop into the unmasked tiles and the rest: two loads
    # of the logits, one loop after the other, so one tile's bytes are in flight.
    kernel = _kernel("cross_entropy", "cross_entropy", "M=4096,V=32000", ",mask-bounds")
    loads = [op for op in kernel.walk() if op.name == "tile.load" and op.result.type.rank == 2]
    assert len(loads) == 2
    assert streamed_load_bytes(kernel) == 4096 * 4


def test_warps_follow_the_streamed_bytes():
    # 4 blocks of 16 warps keep 64 KiB of a and b in flight (4 warps: 128 KiB). The H200
    # (regret run of b1ca8d8): 16 warps 0.0982 ms, 8 warps 0.0982, 4 warps 0.1064.
    kernel = _kernel("swiglu", "swiglu", "M=8192,N=8192", ",assign-layouts")
    assert kernel.attributes["tilec.num_warps"].value == 16


@pytest.mark.parametrize(
    ("m", "n", "expected"),
    [
        # one block of 128 columns would be split across the GPU with one combine for all;
        # 128 x 32 tiles give 4 blocks (H200: 0.0150 ms against 0.0199; 16384 x 128: 0.0092
        # against 0.0122)
        (65536, 128, (128, 32)),
        (16384, 128, (128, 32)),
        (262144, 512, (128, 32)),  # 16 blocks, not 4 (the split model: 130.9 against 132.7 us)
        # 64 columns: 2 blocks of a line each, not 1
        (300000, 64, (128, 32)),
        # 4096 columns: 32 blocks of 128, 128 of 32 -- still under 2 an SM, so a line a row
        (16384, 4096, (128, 32)),
        # 65536 columns: 512 blocks of 128 fill the GPU, the run stays a warp's accesses
        (1024, 65536, (32, 128)),
    ],
)
def test_column_sums_narrow_their_run_while_the_grid_is_small(m, n, expected):
    sizes = _sizes(_kernel("col_sum", "col_sum", f"M={m},N={n}"))
    assert (sizes["BM"], sizes["BN"]) == expected


def test_column_sums_of_unknown_extents_keep_a_warps_run():
    program = compile_tile(
        EXAMPLES / "col_sum.tile", target="tir", pipeline="canonicalize,cse,tiling"
    )
    (kernel,) = [op for op in program.module.walk() if isinstance(op, FuncOp)]
    assert _sizes(kernel)["BN"] == 128


@pytest.mark.parametrize(
    ("n", "run"),
    [
        (5000, 1024),  # 4096: 39% of the lanes past the extent (a second tile of 904); 1024: 2.3%
        (8192, None),  # the class itself fills it
        (32000, None),  # 16384: 2.3% idle, within the slack of 512's exact fill
        (10007, 2048),
        (3584, 512),
        (1000, None),
        (768, 256),  # 1024: a quarter of the lanes idle
        (20000, None),  # past the classes
    ],
)
def test_the_run_that_fills_a_rows_extent(n, run):
    """The lanes of a row's last tile past its extent do no work: the jit records the longest
    power-of-two run that fills the exact extent within the slack (`tilec.jit_sizes.fill_run`)."""
    from tilec.jit_sizes import fill_run

    assert fill_run(n) == run


@pytest.mark.parametrize(
    ("n", "element_bytes", "run"),
    [
        (1152, 2, 128),  # a DiT's hidden size: 256 leave a tenth of the lanes idle, 128 none
        (896, 2, 128),  # 1024 (the class) an eighth idle
        (640, 2, 128),
        (1152, 1, 128),
        (777, 4, 64),  # one line of f32 is 32 elements: 64 is within the slack of 32's fill
        (777, 1, 128),  # one line of 8-bit elements is 128
    ],
)
def test_the_shortest_run_that_fills_a_row_is_one_line(n, element_bytes, run):
    """The shortest run `fill_run` considers is one 128-byte line of the row's narrowest
    element, not a fixed count of elements whatever their width."""
    from tilec.jit_sizes import fill_run

    assert fill_run(n, element_bytes) == run


MODULATE = """
def modulate(x: bf16[B, S, D], scale: bf16[B, D], shift: bf16[B, D], y: bf16[B, S, D]):
    for tb, ts, td in tiles(B, S, D):
        sc = scale[tb, td].to(f32)
        sh = shift[tb, td].to(f32)
        y[tb, ts, td] = x[tb, ts, td].to(f32) * (1.0 + sc[:, None, :]) + sh[:, None, :]
"""


@pytest.mark.parametrize(
    ("extents", "fills", "sizes"),
    [
        # B's class (64, the lowest) stands for any batch, 2 among them: S grows, not B.
        ("B=64,S=4096,D=2048", "D=128", {"BB": 1, "BS": 32, "BD": 128}),
        ("B=64,S=1024,D=1024", "", {"BB": 1, "BS": 4, "BD": 1024}),
        # Two classes above the lowest (B > 256, S > 2048): each doubling goes to the axis
        # whose doubled tile may idle the fewer lanes (S at 16 rows: 15 of 2064; B at 2: 1 of
        # 258, at 4: 3 of 260), and the rows end 2 x 16.
        ("B=512,S=4096,D=2048", "D=128", {"BB": 2, "BS": 16, "BD": 128}),
    ],
)
def test_rows_grow_along_the_axis_that_leaves_the_fewest_lanes_idle(extents, fills, sizes):
    """`tile_shapes` (5.): a size class stands for any extent above half of it, the lowest for
    any extent at all, so the rows grow along the axis whose doubled tile may leave the
    smallest fraction of its lanes past its extent (a DiT's modulation with a batch of 2 took
    4 x 4 rows, half of them past B, then 8 x 4)."""
    from tilec.compiler import compile_source

    options = f'extents="{extents}"' + (f' fills="{fills}"' if fills else "")
    program = compile_source(
        MODULATE, target="tir", pipeline=f"canonicalize,cse,tiling{{{options}}}"
    )
    (kernel,) = [op for op in program.module.walk() if isinstance(op, FuncOp)]
    assert {k: v for k, v in _sizes(kernel).items() if k in sizes} == sizes


def test_a_grid_along_an_awkward_row_takes_the_run_that_fills_it():
    """bias_gelu over 4096 x 5000: the jit's size class says N <= 8192, and tiles of 4096 would
    leave 39% of the lanes idle; with `fills` (what the jit passes) the contiguous run is 1024
    and the rows grow to keep the bytes in flight (4 x 1024, as many bytes as 1 x 4096)."""
    plain = _sizes(_kernel("bias_gelu", "bias_gelu", "M=4096,N=8192"))
    filled = _sizes(_kernel("bias_gelu", "bias_gelu", 'M=4096,N=8192" fills="N=1024', ""))
    assert (plain["BM"], plain["BN"]) == (1, 4096)
    assert (filled["BM"], filled["BN"]) == (4, 1024)


def test_the_jit_passes_the_fill_of_a_row_it_specializes():
    """`@tilec.jit` records `fill_run` of each row dimension in the specialization key and
    gives it to tiling (option `fills`): two extents of one size class with different fills
    compile apart, and the pipeline names the run."""
    import numpy as np

    from tilec.jit import _specialization, load_kernel
    from tilec.lowering.abi import kernel_parameters

    kernel = load_kernel(EXAMPLES / "bias_gelu.tile", "bias_gelu")
    calls = {}
    for n in (5000, 8192):
        x = np.zeros((16, n), np.float16)
        b = np.zeros(n, np.float16)
        arguments = kernel._checker.convert([x, b, x.copy()])
        calls[n] = kernel._key(arguments)
        pipeline, _ = kernel.plan_specialized(
            _specialization(kernel_parameters(kernel._kernel), arguments),
            arguments.extents,
            "sm_90a",
        )
        assert ('fills="N=1024"' in pipeline) == (n == 5000), pipeline
    assert calls[5000] != calls[8192]
