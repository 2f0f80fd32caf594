"""Launching kernels in the interpreter: argument checks (each error names the parameter, what
it expected and what it got), symbol binding, tile sizes, the grid, overflow, array kinds."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilec
from tilec.interp import InterpreterError, LaunchError, prepare_launch, run_kernel
from tilec.interp.launch import DEFAULT_TILE_SIZE

MATMUL = tilec.compile("examples/matmul.tile")
SOFTMAX = tilec.compile("examples/softmax.tile")
LAYERNORM = tilec.compile("examples/layernorm.tile")
ATTENTION = tilec.compile("examples/attention.tile")
SAXPY = tilec.compile("examples/vector_add.tile")


def matmul_args(m=5, n=6, k=7, dtype=np.float16):
    return [np.ones((m, k), dtype), np.ones((k, n), dtype), np.zeros((m, n), dtype)]


def launch_error(program, kernel, args, **options) -> str:
    with pytest.raises(LaunchError) as e:
        prepare_launch(program, kernel, args, **options)
    return e.value.render()


# ---------------------------------------------------------------------------------------------
# Arguments


def test_wrong_argument_count_lists_the_parameters():
    message = launch_error(MATMUL, "matmul", matmul_args()[:2])
    assert "kernel 'matmul' takes 3 argument(s), got 2" in message
    assert "hint: its parameters: a: f16[M, K], b: f16[K, N], c: f16[M, N]" in message
    assert message.startswith("examples/matmul.tile:3:1: error:")  # points at the kernel


def test_wrong_dtype_names_parameter_expected_and_got():
    args = matmul_args()
    args[1] = args[1].astype(np.float32)
    message = launch_error(MATMUL, "matmul", args)
    assert "argument 'b' of kernel 'matmul' (b: f16[K, N]): expected dtype f16, got float32" in (
        message
    )
    assert "x.astype(numpy.float16)" in message


def test_wrong_rank_and_disagreeing_dimensions():
    args = matmul_args()
    args[0] = np.ones((5, 7, 1), np.float16)
    assert "(a: f16[M, K]): expected 2 dimension(s) [M, K], got 3 (shape (5, 7, 1))" in (
        launch_error(MATMUL, "matmul", args)
    )
    args = matmul_args()
    args[1] = np.ones((8, 6), np.float16)
    message = launch_error(MATMUL, "matmul", args)
    assert "dimension K is 7 in 'a' (axis 1) but 8 in 'b' (axis 0)" in message


def test_fixed_extents_must_match():
    program = tilec.compile(
        "def k(x: f32[M, 4], y: f32[M, 4]):\n    for tm in tiles(M):\n        y[tm, :] = x[tm, :]\n"
    )
    message = launch_error(program, "k", [np.ones((3, 5), np.float32), np.ones((3, 4), np.float32)])
    assert "(x: f32[M, 4]): dimension 1 must be 4, got 5" in message


def test_scalars_are_checked_and_converted():
    x = np.ones(3, np.float32)
    assert "(alpha: f32): expected a number for f32, got str 'two'" in launch_error(
        SAXPY, "saxpy", ["two", x, x, x.copy()]
    )
    launch = prepare_launch(SAXPY, "saxpy", [1, x, x, x.copy()])  # an int is a fine f32
    assert launch.arguments[0] == np.float32(1.0) and launch.arguments[0].dtype == np.float32
    program = tilec.compile(
        "def k(x: i8[N], n: i8):\n    for tn in tiles(N):\n        x[tn] = x[tn] + n\n"
    )
    x8 = np.zeros(3, np.int8)
    assert "(n: i8): 300 does not fit i8 (-128 to 127)" in launch_error(program, "k", [x8, 300])
    assert "(n: i8): expected an integer for i8, got float 1.5" in launch_error(
        program, "k", [x8, 1.5]
    )


def test_f16_scalars_round_to_nearest():
    program = tilec.compile(
        "def k(x: f16[N], s: f16):\n    for tn in tiles(N):\n        x[tn] = x[tn] * 0 + s\n"
    )
    x = np.zeros(2, np.float16)
    run_kernel(program, "k", [x, 0.1])
    assert x[0] == np.float16(0.1)


def test_outputs_must_be_writable_in_place():
    args = matmul_args()
    args[2].flags.writeable = False
    assert "(c: f16[M, N]): the kernel writes it, but the array is read-only" in launch_error(
        MATMUL, "matmul", args
    )

    class OnlyArray:
        def __init__(self, array):
            self.array = array

        def __array__(self, dtype=None, copy=None):
            return self.array

    args = matmul_args()
    inputs_ok = [OnlyArray(args[0]), OnlyArray(args[1]), args[2]]
    run_kernel(MATMUL, "matmul", inputs_ok)  # read-only inputs may be copies
    assert np.all(args[2] == 7)
    args[2] = OnlyArray(args[2])
    assert "cannot be written in place" in launch_error(MATMUL, "matmul", args)
    assert "expected a tensor, got list" in launch_error(MATMUL, "matmul", [[1.0], [1.0], [1.0]])


def test_arguments_by_name():
    a, b, c = matmul_args()
    run_kernel(MATMUL, "matmul", {"c": c, "a": a, "b": b})
    assert np.all(c == 7)
    assert "kernel 'matmul' has no parameter 'd'" in launch_error(
        MATMUL, "matmul", {"a": a, "b": b, "c": c, "d": c}
    )
    assert "kernel 'matmul' needs an argument for 'b'" in launch_error(
        MATMUL, "matmul", {"a": a, "c": c}
    )


def test_unknown_kernel():
    message = launch_error(MATMUL, "matmul_typo", matmul_args())
    assert (
        "no kernel named 'matmul_typo'" in message and "kernels: matmul, matmul_pinned" in message
    )
    assert "the module has 2 kernels; name the one to run" in launch_error(
        MATMUL, None, matmul_args()
    )


# ---------------------------------------------------------------------------------------------
# Tile sizes and the grid


def test_tile_sizes_defaults_requests_and_pins():
    launch = prepare_launch(MATMUL, "matmul", matmul_args(100, 70, 33), tile_sizes={"M": 32})
    assert launch.tile_sizes == {
        "BM": (32, "given"),
        "BN": (DEFAULT_TILE_SIZE, "default"),
        "BK": (DEFAULT_TILE_SIZE, "default"),
    }
    assert launch.grid == (4, 5)
    assert prepare_launch(MATMUL, "matmul", matmul_args(), tile_sizes={"BN": 8}).symbols["BN"] == 8
    pinned = prepare_launch(MATMUL, "matmul_pinned", matmul_args(300, 1, 1))
    assert pinned.symbols["BM"] == 128 and pinned.grid == (3, 1)
    assert "tile size BM is pinned to 128 in kernel 'matmul_pinned'; 64 was asked for" in (
        launch_error(MATMUL, "matmul_pinned", matmul_args(), tile_sizes={"M": 64})
    )
    assert "kernel 'matmul' has no tile size 'Q'" in launch_error(
        MATMUL, "matmul", matmul_args(), tile_sizes={"Q": 4}
    )
    assert "tile size BM must be a positive integer, got 0" in launch_error(
        MATMUL, "matmul", matmul_args(), tile_sizes={"M": 0}
    )


def test_whole_dimensions_are_covered():
    x = np.ones((3, 777), np.float32)
    launch = prepare_launch(SOFTMAX, "softmax", [x, x.copy()])
    assert launch.tile_sizes["BN"] == (1024, "covers N")
    assert "does not cover dimension N=777" in launch_error(
        SOFTMAX, "softmax", [x, x.copy()], tile_sizes={"N": 512}
    )


def test_element_variables_make_one_block_per_index():
    q = np.zeros((2, 3, 5, 8), np.float16)
    k = np.zeros((2, 3, 4, 8), np.float16)
    launch = prepare_launch(ATTENTION, "attention", [q, k, k, q.copy(), 1.0])
    assert launch.grid == (2, 3, 1)
    assert launch.symbols["BB"] == 1 and launch.symbols["BD"] == 8


def test_ir_without_a_grid_needs_one():
    from tilec.ir import parse_module

    with open("examples/ir/softmax.tir") as f:
        module = parse_module(f.read(), "examples/ir/softmax.tir")
    x = np.random.default_rng(0).uniform(-1, 1, (5, 7)).astype(np.float32)
    y = np.zeros_like(x)
    assert "has no 'tilec.grid' attribute" in launch_error(module, None, [x, y])
    run_kernel(module, None, [x, y], grid=(5,), tile_sizes={"BN": 8})
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Sizes too large for the kernel's integer types


def huge(n: int, dtype=np.float32) -> np.ndarray:
    """A writable array of `n` elements that takes no memory (every element is the same)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), (n,), (0,), writeable=True)


def test_extents_that_overflow_i32_offsets_are_refused():
    # row_sum_whole masks N in i32; 2**31 - 8 rows plus a tile would wrap.
    program = tilec.compile("examples/row_sum.tile")
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (2**31 - 8, 2), (0, 0))
    out = huge(2**31 - 8)
    message = launch_error(program, "row_sum_whole", [x, out])
    assert "dimension M of 'x' is 2147483640: too large for kernel 'row_sum_whole'" in message
    assert "element offsets in i32" in message


def test_kernels_without_i32_offsets_take_large_extents():
    # vector_add has no i32 arithmetic on offsets: only the (i64) loads and stores see them.
    x = huge(2**32)
    launch = prepare_launch(SAXPY, "vector_add", [x, x, huge(2**32)], tile_sizes={"N": 2**30})
    assert launch.grid == (4,)


# ---------------------------------------------------------------------------------------------
# Kinds of arrays


def test_strided_views_are_read_and_written_in_place():
    base = np.zeros((10, 20), np.float16)
    a = np.arange(35, dtype=np.float16).reshape(5, 7)[:, ::-1]  # negative strides
    b = np.asfortranarray(np.ones((7, 6), np.float16))
    c = base[::2, 1:19:3]  # every other row, every third column
    run_kernel(MATMUL, "matmul", [a, b, c])
    assert np.array_equal(c, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))
    assert base[1].sum() == 0 and base[0, 0] == 0  # nothing outside the view


def test_bf16_arrays():
    program = tilec.compile(
        "def k(x: bf16[N], y: bf16[N]):\n    for tn in tiles(N):\n        y[tn] = x[tn] * 3\n"
    )
    x = np.array([1.0, 1.5, 3e38], ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    run_kernel(program, "k", [x, y])
    assert y.tolist() == [3.0, 4.5, np.inf]


def test_dlpack_objects_are_used_in_place():
    class Capsule:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    a, b, c = matmul_args()
    run_kernel(MATMUL, "matmul", [Capsule(a), Capsule(b), Capsule(c)])
    assert np.all(c == 7)


def test_torch_cpu_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    a = torch.ones((5, 7), dtype=torch.float16)
    b = torch.ones((7, 6), dtype=torch.float16)
    c = torch.zeros((5, 6), dtype=torch.float16)
    run_kernel(MATMUL, "matmul", [a, b, c])
    assert bool((c == 7).all())
    program = tilec.compile(
        "def k(x: bf16[N], y: bf16[N]):\n    for tn in tiles(N):\n        y[tn] = x[tn] + x[tn]\n"
    )
    x = torch.tensor([1.0, 2.5], dtype=torch.bfloat16, requires_grad=True)
    y = torch.zeros(2, dtype=torch.bfloat16)
    run_kernel(program, "k", [x, y])
    assert y.tolist() == [2.0, 5.0]
    message = launch_error(MATMUL, "matmul", [a.float(), b, c])
    assert "(a: f16[M, K]): expected dtype f16, got float32" in message


# ---------------------------------------------------------------------------------------------
# Runtime errors and the trace hook


def test_the_trace_sees_every_op_of_every_block():
    seen: list[tuple[str, tuple[int, ...]]] = []
    launch = prepare_launch(MATMUL, "matmul", matmul_args(20, 20, 40), tile_sizes={"K": 16})
    launch.run(trace=lambda op, state, result: seen.append((op.name, state.program_id)))
    blocks = {pid for _, pid in seen}
    assert blocks == {(i, j) for i in range(2) for j in range(2)}
    dots = [pid for name, pid in seen if name == "tile.dot"]
    assert len(dots) == 4 * 3  # K = 40 in tiles of 16: 3 steps per block


def test_results_that_contradict_their_types_are_reported_at_the_op():
    program = tilec.compile("examples/layernorm.tile")
    x = np.ones((2, 5), np.float16)
    launch = prepare_launch(program, "layernorm", [x, x[0], x[0], x.copy(), 1e-5])
    # Make the first load produce 2 rows where its type says BM = 16: the next op, which
    # computes from it, produces a tile that contradicts its own type.
    load = next(op for op in launch.func.walk() if op.name == "tile.load")
    launch.shapes[load.result.type] = (2, 8)
    with pytest.raises(InterpreterError) as e:
        launch.run()
    assert e.value.render().splitlines() == [
        "examples/layernorm.tile:5:22: error: 'tile.cast' computed a tile of shape 2x8, but its "
        "type tile<BMxBNxf32> is 16x8 here (BM=16, BN=8) (in the block with program id (0))",
        "        r = x[tm, :].to(f32)",
        "                     ^",
    ]


STATIC = """func @double(%x: !tile.tensor<MxNxf32>, %y: !tile.tensor<MxNxf32>) attributes {tilec.grid = [["M", "BM"]], tilec.tile_sizes = [["BM", 4], ["BN", 8]], tilec.whole_dims = ["N"]} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %pid = tile.program_id 0
  %row = arith.muli %pid, %c4 : index
  %t = tile.load %x[%row, %c0] : !tile.tensor<MxNxf32> -> tile<4x8xf32>
  %s = arith.addf %t, %t : tile<4x8xf32>
  tile.store %y[%row, %c0], %s : !tile.tensor<MxNxf32>, tile<4x8xf32>
  return
}"""


def test_static_ir_after_specialization_runs_with_its_sizes():
    from tilec.ir import parse_module

    module = parse_module(STATIC, "static.tir")
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    y = np.zeros_like(x)
    launch = prepare_launch(module, None, [x, y])
    assert launch.grid == (3,)
    assert launch.tile_sizes == {"BM": (4, "specialized"), "BN": (8, "specialized")}
    launch.run()
    assert np.array_equal(y, 2 * x)
    assert "tile size BM is specialized to 4 in kernel 'double'; 8 was asked for" in launch_error(
        module, None, [x, y], tile_sizes={"M": 8}
    )
    wide = np.zeros((2, 9), np.float32)
    assert "dimension N=9 is larger than its tile BN=8, and kernel 'double' uses N whole" in (
        launch_error(module, None, [wide, wide.copy()])
    )
