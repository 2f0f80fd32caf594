"""Semantic analysis: the typed tree IR generation walks — dtypes, promotion, shapes,
broadcasting, the grid and sequential loops, masks, pinned options."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from tilec.diagnostics import TileError
from tilec.frontend import analyze, check_file, parse_source
from tilec.frontend import sema as s

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def program(text: str, options: dict | None = None) -> s.Program:
    return analyze(parse_source(textwrap.dedent(text), "test.tile"), options)


def kernel(text: str, options: dict | None = None) -> s.Kernel:
    (only,) = program(text, options).kernels
    return only


def value_of(decls: str, expr: str) -> s.Expr:
    """The checked `expr`, evaluated inside a one-dimensional grid loop over N."""
    k = kernel(f"def k({decls}):\n    for tn in tiles(N):\n        v = {expr}\n")
    (assign,) = k.grid.body
    return assign.value


def error_of(text: str, options: dict | None = None) -> TileError:
    with pytest.raises(TileError) as caught:
        program(text, options)
    return caught.value


MATMUL = """
def matmul(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc
"""


def test_every_example_analyzes():
    names = []
    for path in sorted(EXAMPLES.glob("*.tile")):
        names += [k.name for k in check_file(path).kernels]
    for wanted in ("matmul", "softmax", "layernorm", "attention", "vector_add", "row_sum"):
        assert wanted in names
    assert "transpose" in names and "matmul_bias_gelu" in names


def test_matmul_grid_loop_and_accumulator():
    k = kernel(MATMUL)
    assert [d.name for d in k.dims] == ["M", "K", "N"]
    assert [d.tile_symbol for d in k.dims] == ["BM", "BK", "BN"]
    tm, tn = k.grid.vars
    assert (tm.name, tm.dim.name, tm.grid_axis, tm.element) == ("tm", "M", 0, False)
    assert (tn.name, tn.grid_axis) == ("tn", 1)

    init, loop, store = k.grid.body
    assert isinstance(init, s.Assign) and init.name == "acc"
    assert isinstance(init.value, s.Full)
    assert init.value.type == s.TileType(s.DType.F32, ("BM", "BN"))
    assert init.value.value.value == 0.0

    assert isinstance(loop, s.SeqLoop)
    assert loop.var.name == "tk" and loop.var.grid_axis is None
    assert loop.carried == (s.Carried("acc", s.TileType(s.DType.F32, ("BM", "BN"))),)
    (update,) = loop.body
    assert isinstance(update.value, s.Binary) and update.value.op == "add"
    dot = update.value.rhs
    assert isinstance(dot, s.Dot)
    assert dot.type == s.TileType(s.DType.F32, ("BM", "BN"))
    assert dot.contraction == s.AxisExtent(k.dims[1], loop.var)
    load_a = dot.lhs
    assert isinstance(load_a, s.Load) and load_a.type == s.TileType(s.DType.F16, ("BM", "BK"))
    first, second = load_a.access.indices
    assert first.kind is s.IndexKind.TILE and first.var is tm and first.masked
    assert second.kind is s.IndexKind.TILE and second.var is loop.var and second.size == "BK"

    assert isinstance(store, s.Store)
    assert store.access.tensor.name == "c" and store.access.masked
    assert isinstance(store.value, s.Cast)  # f32 accumulator stored into f16
    assert store.value.type == s.TileType(s.DType.F16, ("BM", "BN"))


def test_format_kernel_is_readable():
    text = s.format_kernel(kernel(MATMUL))
    assert text.split("\n") == [
        "kernel matmul(a: f16[M, K], b: f16[K, N], c: f16[M, N])",
        "  dims M (BM), K (BK), N (BN)",
        "  grid tm in M[BM] axis 0, tn in N[BN] axis 1",
        "    acc = full:f32[BM, BN](0.0:f32)",
        "    for tk in K[BK] carry acc: f32[BM, BN]",
        "      acc = add:f32[BM, BN](%acc:f32[BM, BN], dot:f32[BM, BN]("
        "load:f16[BM, BK] a[tm, tk] masked, load:f16[BK, BN] b[tk, tn] masked))",
        "    store c[tm, tn] masked = cast:f16[BM, BN](%acc:f32[BM, BN])",
    ]


@pytest.mark.parametrize(
    ("a", "b", "result"),
    [
        ("f16", "f16", "f16"),
        ("f16", "f32", "f32"),
        ("f16", "bf16", "f32"),
        ("bf16", "f64", "f64"),
        ("i8", "i32", "i32"),
        ("i32", "i64", "i64"),
        ("i32", "f16", "f16"),
        ("i64", "f32", "f32"),
        ("i1", "i8", "i8"),
        ("i1", "f16", "f16"),
    ],
)
def test_promotion_of_strong_operands(a: str, b: str, result: str):
    value = value_of(f"x: {a}[N], y: {b}[N]", "x[tn] - y[tn]")
    assert value.type == s.TileType(s.DType(result), ("BN",))
    assert value.lhs.type == value.rhs.type == value.type  # operands converted explicitly


def test_scalar_and_tile_operands_share_one_rule():
    # Kernel arguments are strong: an f32 scale promotes an f16 tile.
    value = value_of("x: f16[N], scale: f32", "x[tn] * scale")
    assert value.type == s.TileType(s.DType.F32, ("BN",))
    assert isinstance(value.rhs, s.Broadcast) and isinstance(value.rhs.operand, s.ParamRef)


@pytest.mark.parametrize(
    ("decls", "expr", "dtype"),
    [
        ("x: f16[N]", "x[tn] * 2.0", "f16"),  # a float literal takes the tile's dtype
        ("x: f16[N]", "x[tn] + 1", "f16"),
        ("x: i8[N]", "x[tn] + 1", "i8"),
        ("x: i8[N]", "x[tn] * 0.5", "f32"),  # a float literal with ints gives f32
        ("x: i32[N]", "x[tn] / 2", "f32"),  # '/' is true division
        ("x: i16[N]", "x[tn] // 2", "i16"),
        ("x: i32[N]", "x[tn] ** 2", "f32"),
        ("x: f16[N]", "x[tn] < 0.5", "i1"),
        ("x: i32[N]", "(x[tn] > 0) & (x[tn] < 9)", "i1"),
        ("x: i32[N]", "x[tn] << 2", "i32"),
        ("x: i32[N]", "exp(x[tn])", "f32"),  # math on integers computes in f32
        ("x: i32[N]", "abs(x[tn])", "i32"),
        ("x: bf16[N]", "sigmoid(x[tn])", "bf16"),
        ("x: f16[N]", "where(x[tn] > 0, x[tn], 0.0)", "f16"),
        ("x: f16[N]", "where(x[tn] > 0, 1.0, 0)", "f32"),
    ],
)
def test_promotion_with_weak_literals(decls: str, expr: str, dtype: str):
    assert value_of(decls, expr).type.dtype is s.DType(dtype)


def test_literals_fold_to_weak_constants():
    folded = value_of("x: f32[N]", "(2 * 3 + 1) / 2")
    assert isinstance(folded, s.Constant) and folded.weak and folded.value == 3.5
    power = value_of("x: f32[N]", "-2 ** 2")
    assert power.value == -4.0
    root = value_of("x: f32[N]", "sqrt(4)")
    assert isinstance(root, s.Constant) and root.value == 2.0 and root.weak
    assert value_of("x: f32[N]", "-inf").value == -math.inf
    assert value_of("x: f32[N]", "~5").value == -6
    assert value_of("x: f32[N]", "7 // 2").type.dtype is s.DType.I32
    assert value_of("x: f32[N]", "2 ** 40 * 2 ** 30").type.dtype is s.DType.F32
    assert value_of("x: f32[N]", "1 << 40").type.dtype is s.DType.I64


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("(inf).to(i8)", 127),
        ("(-inf).to(i16)", -(2**15)),
        ("(inf - inf).to(i32)", 0),
        ("(-2.7).to(i32)", -2),
        ("(1e30).to(i64)", 2**63 - 1),
        ("(300).to(i8)", 44),
        ("(-129).to(i8)", 127),
        ("(0.5).to(i1)", True),
    ],
)
def test_a_constant_conversion_folds_to_what_it_gives_at_run_time(expr: str, value):
    """Found by the GPU fuzzer (seed 1005789): `(inf).to(i8)` was an error ("cannot convert
    inf to i8") although the same conversion of a tile saturates to 127."""
    folded = value_of("x: f32[N]", expr)
    assert isinstance(folded, s.Constant) and folded.value == value


def test_a_name_bound_once_to_a_literal_stays_weak():
    k = kernel(
        """
        def k(x: f16[N], y: f16[N]):
            for tn in tiles(N):
                half = 0.5
                y[tn] = x[tn] * half
        """
    )
    store = k.grid.body[1]
    assert store.value.type.dtype is s.DType.F16
    assert not isinstance(store.value, s.Cast)


def test_broadcasting_inserts_explicit_nodes():
    k = kernel(
        """
        def k(x: f32[M, N], b: f32[N], y: f32[M, N]):
            for tm in tiles(M):
                row = x[tm, :]
                y[tm, :] = row + b[:]
        """
    )
    store = k.grid.body[1]
    added = store.value
    assert added.type.shape == ("BM", "BN")
    assert isinstance(added.rhs, s.Broadcast) and added.rhs.operand.type.shape == ("BN",)
    outer = value_of("x: f32[N]", "x[tn][:, None] * x[tn][None, :]")
    assert outer.type.shape == ("BN", "BN")
    assert isinstance(outer.lhs.operand, s.ExpandDims) and outer.lhs.operand.axes == (1,)


def test_store_broadcasts_and_casts_to_the_region():
    k = kernel(
        """
        def k(y: f16[M, N]):
            for tm in tiles(M):
                y[tm, :] = 0
        """
    )
    (store,) = k.grid.body
    assert store.value.type == s.TileType(s.DType.F16, ("BM", "BN"))
    assert isinstance(store.value, s.Broadcast)
    assert isinstance(store.value.operand, s.Constant) and store.value.operand.value == 0.0


def test_augmented_store_reads_the_region():
    k = kernel(
        """
        def k(x: f32[M, N], y: f32[M, N]):
            for tm in tiles(M):
                y[tm, :] += x[tm, :]
        """
    )
    (store,) = k.grid.body
    assert isinstance(store.value, s.Binary)
    assert isinstance(store.value.lhs, s.Load) and store.value.lhs.access.tensor.name == "y"


def test_reductions_types_shapes_and_extents():
    k = kernel(
        """
        def k(x: f16[M, N], q: i8[M, N], y: f32[M]):
            for tm in tiles(M):
                a = sum(x[tm, :], axis=1)
                b = max(x[tm, :], axis=-1, keepdims=True)
                c = sum(q[tm, :], axis=1)
                d = mean(q[tm, :], axis=1)
                e = min(x[tm, :])
        """
    )
    a, b, c, d, e = (stmt.value for stmt in k.grid.body)
    n = k.dim("N")
    assert a.type == s.TileType(s.DType.F16, ("BM",))
    assert a.axes == (1,) and a.extents == (s.AxisExtent(n, None),)  # N is used whole
    assert b.type.shape == ("BM", 1) and b.axes == (1,) and b.keepdims
    assert c.type.dtype is s.DType.I32
    assert d.type.dtype is s.DType.F32 and isinstance(d.operand, s.Cast)
    assert e.type.shape == () and e.axes == (0, 1)
    tm = k.grid.vars[0]
    assert e.extents == (s.AxisExtent(k.dim("M"), tm), s.AxisExtent(n, None))


def test_reduction_over_a_tiled_axis_names_its_loop_variable():
    k = check_file(EXAMPLES / "row_sum.tile").kernel("row_sum")
    loop = k.grid.body[1]
    (update,) = loop.body
    reduce = update.value.rhs
    assert isinstance(reduce, s.Reduce)
    assert reduce.extents == (s.AxisExtent(k.dim("N"), loop.var),)


def test_dot_dtypes():
    assert value_of("a: i8[N, N], b: i8[N, N]", "a[tn, tn] @ b[tn, tn]").type.dtype is s.DType.I32
    f64 = value_of("a: f64[N, N]", "dot(a[tn, tn], a[tn, tn].T)")
    assert f64.type.dtype is s.DType.F64 and isinstance(f64.rhs, s.Transpose)
    bf16 = value_of("a: bf16[N, 16]", "a[tn, :] @ a[tn, :].T")
    assert bf16.type == s.TileType(s.DType.F32, ("BN", "BN"))
    assert bf16.contraction is None  # a fixed extent has no padding lanes


def test_element_variables_drop_dimensions():
    k = check_file(EXAMPLES / "attention.tile").kernel("attention")
    b, h, tm = k.grid.vars
    assert b.element and h.element and not tm.element
    assert [v.grid_axis for v in k.grid.vars] == [0, 1, 2]
    assert k.dim("B").pinned == 1 and k.options.tile == {"B": 1, "H": 1}
    load_q = k.grid.body[0].value
    assert load_q.type == s.TileType(s.DType.F16, ("BM", "BD"))
    index_b, _, index_m, index_d = load_q.access.indices
    assert index_b.kind is s.IndexKind.SCALAR and index_b.size is None and not index_b.masked
    assert isinstance(index_b.value, s.LoopIndex) and index_b.value.var is b
    assert index_m.kind is s.IndexKind.TILE
    assert index_d.kind is s.IndexKind.WHOLE and index_d.masked
    assert k.dim("D").whole and not k.dim("N").whole


def test_attention_carries_its_running_statistics():
    k = check_file(EXAMPLES / "attention.tile").kernel("attention")
    loop = next(stmt for stmt in k.grid.body if isinstance(stmt, s.SeqLoop))
    assert sorted(c.name for c in loop.carried) == ["acc", "l_i", "m_i"]
    # names first assigned inside the loop (s, p, alpha, m_new) are local to it
    assert {a.name for a in loop.body} == {"s", "m_new", "p", "alpha", "l_i", "acc", "m_i"}


def test_element_variable_as_a_value_and_scalar_indices():
    k = kernel(
        """
        def k(x: f32[B, N], y: f32[B, N], z: f32[N], i: i32):
            for b, tn in tiles(B, N, tile={B: 1}):
                y[b, tn] = x[b, tn] * b + x[i, tn] + x[0, tn]
        """
    )
    (store,) = k.grid.body
    assert store.access.type.shape == ("BN",)
    kinds = [index.kind for index in store.access.indices]
    assert kinds == [s.IndexKind.SCALAR, s.IndexKind.TILE]
    assert "index(b):i32" in s.format_expr(store.value)
    assert "x[$i:i32, tn]" in s.format_expr(store.value)


def test_fixed_extents_are_exact():
    k = kernel(
        """
        def k(x: f32[M, 4], y: f32[M]):
            for tm in tiles(M):
                y[tm] = sum(x[tm, :], axis=1)
        """
    )
    (store,) = k.grid.body
    load = store.value.operand
    whole = load.access.indices[1]
    assert whole.kind is s.IndexKind.WHOLE and whole.size == 4 and not whole.masked
    assert store.value.extents == (None,)


def test_offsets_arange_and_masks_by_hand():
    value = value_of("x: f32[N]", "where(offsets(tn) < N, x[tn], 0.0)")
    assert isinstance(value, s.Select)
    offsets = value.cond.lhs
    assert isinstance(offsets, s.Binary) and offsets.op == "add"
    assert isinstance(offsets.lhs.operand, s.LoopIndex) and isinstance(offsets.rhs, s.Iota)
    assert isinstance(value.cond.rhs.operand, s.DimSize)
    iota = value_of("x: f32[N]", "arange(16)")
    assert isinstance(iota, s.Iota) and iota.type == s.TileType(s.DType.I32, (16,))


def test_sequential_nest_and_sibling_loops():
    k = kernel(
        """
        def k(x: f32[M, N, K], y: f32[M]):
            for tm in tiles(M):
                acc = zeros([tm], f32)
                for tn, tk in tiles(N, K):
                    acc += sum(sum(x[tm, tn, tk], axis=2), axis=1)
                for tn in tiles(N):
                    acc = acc * 2.0
                y[tm] = acc
        """
    )
    _init, nest, sibling, _store = k.grid.body
    assert nest.var.name == "tn" and isinstance(nest.body[0], s.SeqLoop)
    assert nest.body[0].var.name == "tk"
    assert (
        nest.carried
        == nest.body[0].carried
        == (s.Carried("acc", s.TileType(s.DType.F32, ("BM",))),)
    )
    assert sibling.var.dim is nest.var.dim


def test_carried_through_two_levels():
    k = kernel(
        """
        def k(x: f32[M, N, K], y: f32[M]):
            for tm in tiles(M):
                acc = zeros([tm], f32)
                for tn in tiles(N):
                    part = zeros([tm], f32)
                    for tk in tiles(K):
                        acc += sum(sum(x[tm, tn, tk], axis=2), axis=1)
                        part += 1.0
                y[tm] = acc
        """
    )
    outer = k.grid.body[1]
    inner = outer.body[1]
    assert [c.name for c in outer.carried] == ["acc"]
    assert [c.name for c in inner.carried] == ["acc", "part"]


def test_kernel_options_from_the_decorator():
    k = kernel(
        """
        @kernel(tile={"M": 128, N: 64}, warps=8, stages=3)
        def k(x: f32[M, N]):
            for tm, tn in tiles(M, N):
                x[tm, tn] = 0.0
        """
    )
    assert k.options == s.KernelOptions(tile={"M": 128, "N": 64}, warps=8, stages=3)
    assert k.dim("M").pinned == 128


def test_jit_options_apply_over_the_source():
    text = """
        @kernel(tile={"M": 128}, warps=8)
        def k(x: f32[M, N]):
            for tm, tn in tiles(M, N):
                x[tm, tn] = 0.0
        """
    k = kernel(text, {"tile": {"M": 64, "n": 32}, "stages": 2})
    assert k.options.tile == {"M": 64, "N": 32}
    assert (k.options.warps, k.options.stages) == (8, 2)
    k = kernel(text, {"tile": {"N": 1}})
    assert k.grid.vars[1].element


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"blocks": 2}, "unknown kernel option 'blocks'"),
        ({"tile": {"Q": 64}}, "'Q' is not a dimension of kernel 'k'"),
        ({"tile": {"M": 48}}, "a tile size must be a power of two, not 48"),
        ({"tile": {"M": "64"}}, "tile size of M must be an integer"),
        ({"tile": [64]}, "option tile must be a dict from dimension name to tile size"),
        ({"warps": 6}, "warps must be one of 1, 2, 4, 8, 16, 32, not 6"),
        ({"stages": 9}, "stages must be between 1 and 8, not 9"),
        ({"stages": True}, "option stages must be an integer"),
    ],
)
def test_bad_jit_options_point_at_the_kernel(options: dict, message: str):
    error = error_of(
        "def k(x: f32[M, N]):\n    for tm in tiles(M):\n        x[tm, :] = 0.0\n", options
    )
    assert error.message == message
    assert (error.loc.line, error.loc.col) == (1, 5)


def test_dimension_names_become_upper_case_symbols():
    k = kernel(
        """
        def k(x: f32[seq, d_model]):
            for ts in tiles(seq):
                x[ts, :] = 1.0
        """
    )
    seq, d_model = k.dims
    assert (seq.name, seq.spelling, seq.tile_symbol) == ("SEQ", "seq", "BSEQ")
    assert d_model.tile_symbol == "BD_MODEL" and d_model.whole
    assert k.grid.body[0].access.type.shape == ("BSEQ", "BD_MODEL")


def test_docstrings_and_placeholders():
    k = kernel(
        '''
        def k(x: f32[N]):
            """Zero x."""
            for tn in tiles(N):
                ...
                pass
                x[tn] = 0.0
        '''
    )
    assert k.doc == "Zero x." and len(k.grid.body) == 1


def test_several_kernels_and_lookup():
    p = check_file(EXAMPLES / "matmul.tile")
    assert [k.name for k in p.kernels] == ["matmul", "matmul_pinned"]
    assert p.kernel("matmul_pinned").options.warps == 8
    with pytest.raises(KeyError):
        p.kernel("nope")


def test_carried_value_may_be_rebound_with_a_literal():
    k = kernel(
        """
        def k(x: f16[M, N]):
            for tm in tiles(M):
                m = zeros([tm, 1], f16)
                for tn in tiles(N):
                    m = 0
                x[tm, 0] = sum(m, axis=1)
        """
    )
    loop = k.grid.body[1]
    (reset,) = loop.body
    assert reset.value.type == s.TileType(s.DType.F16, ("BM", 1))


def test_common_dtype_is_symmetric():
    for a in s.DType:
        for b in s.DType:
            assert s.common_dtype(a, b) is s.common_dtype(b, a)
