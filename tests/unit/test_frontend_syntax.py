"""The tile grammar and the syntax tree: shapes of nodes, positions, the Python-function source
path, and syntax errors worded for people (more cases live in tests/frontend_errors/)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from tilec import grammar
from tilec.diagnostics import TileError
from tilec.frontend import parse_file, parse_function, parse_source, syntax
from tilec.frontend.source import function_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def parse_expr(text: str) -> syntax.Expr:
    module = parse_source(f"x = {text}\n", "expr.tile")
    (statement,) = module.body
    assert isinstance(statement, syntax.Assign)
    return statement.value


def error_of(text: str) -> TileError:
    with pytest.raises(TileError) as caught:
        parse_source(text, "bad.tile")
    return caught.value


def test_grammar_ships_as_package_data():
    text = grammar.grammar_text()
    assert text.startswith("// The tile DSL")
    assert "start:" in text


def test_parser_is_built_once():
    assert syntax._get_parser() is syntax._get_parser()


def test_every_example_parses():
    for path in EXAMPLES.glob("*.tile"):
        module = parse_file(path)
        assert all(isinstance(s, syntax.FunctionDef) for s in module.body), path.name


def test_matmul_tree_and_positions():
    text = textwrap.dedent(
        """\
        def matmul(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
            for tm, tn in tiles(M, N):
                acc = zeros([tm, tn], f32)
                for tk in tiles(K):
                    acc += a[tm, tk] @ b[tk, tn]
                c[tm, tn] = acc
        """
    )
    (kernel,) = parse_source(text, "mm.tile").body
    assert isinstance(kernel, syntax.FunctionDef)
    assert kernel.name == "matmul"
    assert (kernel.loc.line, kernel.loc.col, kernel.name_loc.col) == (1, 1, 5)
    a = kernel.params[0]
    assert a.name == "a" and (a.loc.line, a.loc.col) == (1, 12)
    assert isinstance(a.annotation, syntax.Subscript)
    assert [i.id for i in a.annotation.indices] == ["M", "K"]

    (grid,) = kernel.body
    assert isinstance(grid, syntax.For)
    assert [t.id for t in grid.targets] == ["tm", "tn"]
    assert isinstance(grid.iter, syntax.Call) and grid.iter.func.id == "tiles"
    assert (grid.loc.line, grid.loc.col) == (2, 5)

    init, inner, store = grid.body
    assert isinstance(init, syntax.Assign) and init.target.id == "acc"
    assert isinstance(init.value.args[0], syntax.ListExpr)
    (update,) = inner.body
    assert isinstance(update, syntax.AugAssign) and update.op == "+"
    assert (update.loc.line, update.loc.col) == (5, 17)  # the '+='
    assert isinstance(update.value, syntax.BinOp) and update.value.op == "@"
    assert (update.value.loc.line, update.value.loc.col) == (5, 30)  # the '@'
    assert isinstance(store.target, syntax.Subscript)
    assert store.target.value.id == "c"


def test_operator_precedence_follows_python():
    tree = parse_expr("a + b * c ** -d")
    assert tree.op == "+"
    assert tree.right.op == "*"
    assert tree.right.right.op == "**"
    assert isinstance(tree.right.right.right, syntax.UnaryOp)
    negated_power = parse_expr("-x ** 2")  # -(x ** 2), as in Python
    assert isinstance(negated_power, syntax.UnaryOp)
    assert negated_power.operand.op == "**"
    mixed = parse_expr("a & b | c ^ d << 1")
    assert mixed.op == "|" and mixed.left.op == "&" and mixed.right.op == "^"
    assert mixed.right.right.op == "<<"
    left_assoc = parse_expr("a - b - c")
    assert left_assoc.left.op == "-" and left_assoc.left.left.id == "a"
    comparison = parse_expr("a + 1 <= b")
    assert isinstance(comparison, syntax.Compare) and comparison.op == "<="


def test_literals():
    assert parse_expr("0x1F").value == 31
    assert parse_expr("1_000").value == 1000
    assert parse_expr("0b101").value == 5
    assert parse_expr("1e-3").value == pytest.approx(1e-3)
    assert parse_expr(".5").value == 0.5
    assert parse_expr("2.").value == 2.0
    assert isinstance(parse_expr("True"), syntax.BoolLit)
    assert isinstance(parse_expr("None"), syntax.NoneLit)
    assert isinstance(parse_expr("..."), syntax.EllipsisLit)
    assert parse_expr("'a' \"b\"").value == "ab"


def test_subscripts_slices_and_new_axes():
    tree = parse_expr("x[tm, :, None, ::2, 1:]")
    assert isinstance(tree, syntax.Subscript)
    tm, whole, new_axis, stepped, lower = tree.indices
    assert isinstance(tm, syntax.Name)
    assert isinstance(whole, syntax.Slice) and (whole.lower, whole.upper, whole.step) == (
        None,
        None,
        None,
    )
    assert isinstance(new_axis, syntax.NoneLit)
    assert stepped.step.value == 2 and stepped.lower is None
    assert lower.lower.value == 1 and lower.upper is None


def test_calls_methods_and_keywords():
    tree = parse_expr("sum(x[tm, :].to(f32), axis=1, keepdims=True)")
    assert isinstance(tree, syntax.Call) and tree.func.id == "sum"
    (arg,) = tree.args
    assert isinstance(arg.func, syntax.Attribute) and arg.func.attr == "to"
    assert [k.name for k in tree.keywords] == ["axis", "keepdims"]
    transposed = parse_expr("a.T")
    assert isinstance(transposed, syntax.Attribute) and transposed.attr == "T"


def test_decorators_attach_to_the_function():
    text = '@kernel(tile={"M": 64}, warps=4)\ndef k(x: f32[M]):\n    pass\n'
    (kernel,) = parse_source(text, "d.tile").body
    (decorator,) = kernel.decorators
    assert isinstance(decorator, syntax.Call) and decorator.func.id == "kernel"
    tile = decorator.keywords[0].value
    assert isinstance(tile, syntax.DictExpr) and tile.keys[0].value == "M"
    assert kernel.loc.line == 2


def test_layout_comments_semicolons_and_continuations():
    text = (
        "# a comment\n"
        "\n"
        "def k(x: f32[N],\n"
        "      y: f32[N]):  # arguments over two lines\n"
        "    for tn in tiles(N):\n"
        "        a = x[tn]; b = \\\n"
        "            a + 1\n"
        "\n"
        "        y[tn] = b\n"
    )
    (kernel,) = parse_source(text, "l.tile").body
    assert [p.name for p in kernel.params] == ["x", "y"]
    (loop,) = kernel.body
    a, b, store = loop.body
    assert (a.loc.line, b.loc.line, b.loc.col, store.loc.line) == (6, 6, 20, 9)


def test_tabs_indent_consistently():
    text = "def k(x: f32[N]):\n\tfor tn in tiles(N):\n\t\tx[tn] = 1.0\n"
    (kernel,) = parse_source(text, "t.tile").body
    (loop,) = kernel.body
    assert len(loop.body) == 1


def test_offsets_shift_every_location():
    text = "def k(x: f32[N]):\n    for tn in tiles(N):\n        x[tn] = 1.0\n"
    (kernel,) = parse_source(text, "f.py", line_offset=10, col_offset=4, register=False).body
    (loop,) = kernel.body
    (store,) = loop.body
    assert (kernel.loc.line, kernel.loc.col) == (11, 5)
    assert (store.loc.line, store.loc.col) == (13, 13)


def test_parse_errors_render_the_line_and_a_caret():
    error = error_of("def k(x: f32[N]):\n    for tn in tiles(N)\n        pass\n")
    assert error.render() == (
        "bad.tile:2:23: error: expected ':' after for-loop header\n"
        "    for tn in tiles(N)\n"
        "                      ^"
    )


@pytest.mark.parametrize(
    ("text", "line", "col", "message"),
    [
        ("def k(x: f32[N]):\n    y = (1 +\n", 2, 9, "'(' was never closed"),
        ("def k(x: f32[N]):\n    y = [1, 2)\n", 2, 14, "closing ')' does not match '['"),
        ("def k(x: f32[N]):\n    y = 1)\n", 2, 10, "unmatched ')'"),
        ("  def k(x: f32[N]):\n    pass\n", 1, 3, "unexpected indent"),
        ("def k(x f32):\n    pass\n", 1, 9, "unexpected name 'f32'"),
        ("def k(x: f32[N]):\n    y = for\n", 2, 9, "unexpected keyword 'for'"),
        (
            "def k(x: f32[N]):\n    y = 1 +* 2\n",
            2,
            12,
            "expected an expression after '+', found '*'",
        ),
        (
            "def k(x: f32[N]):\n    for t tiles(N):\n        pass\n",
            2,
            11,
            ("expected 'in' after the loop variables, found name 'tiles'"),
        ),
        (
            "def k(x: f32[N]):\n    y = 1j\n",
            2,
            9,
            "complex numbers are not supported in tile kernels",
        ),
        (
            "def k(x: f32[N]):\n    y = b'x'\n",
            2,
            9,
            "bytes literals are not supported in tile kernels",
        ),
        ("def k(x: f32[N]):\n    y = ?\n", 2, 9, "unexpected character '?'"),
        ("def k(x: f32[N]):\n    y = \x00\n", 2, 9, "unexpected character U+0000"),
        (
            "def k(x: f32[N]):\n    y = 3 \\ 4\n",
            2,
            11,
            "a line continuation '\\' must end its line",
        ),
        ("def k(x: f32[N]):\n    del x\n", 2, 5, "'del' is not supported in tile kernels"),
        ("def k(x: f32[N]):\n    raise x\n", 2, 5, "'raise' is not supported in tile kernels"),
        (
            "def k(x: f32[N]):\n    y = {1, 2}\n",
            2,
            9,
            "set literals are not supported in tile kernels",
        ),
        ("def k(x: f32[N]):\n    y = x in z\n", 2, 11, "'in' is not supported in tile kernels"),
        (
            "def k(x: f32[N]):\n    y: f32 = 1\n",
            2,
            5,
            ("variable annotations are not supported in tile kernels"),
        ),
        ("async def k(x: f32[N]):\n    pass\n", 1, 1, "'async' is not supported in tile kernels"),
        (
            "def k(x: f32[N], *, y: f32[N]):\n    pass\n",
            1,
            18,
            "keyword-only markers ('*') are not supported in tile kernels",
        ),
        (
            "def k(x: f32[N], /):\n    pass\n",
            1,
            18,
            ("positional-only markers ('/') are not supported in tile kernels"),
        ),
    ],
)
def test_syntax_errors(text: str, line: int, col: int, message: str):
    error = error_of(text)
    assert error.message == message
    assert (error.loc.line, error.loc.col) == (line, col)


def test_lark_errors_never_escape_for_odd_input():
    for text in ["", "\n\n", ")", "(", "def", "@", "'''", "\t\tx", "x = [\n", "\\", "# only\n"]:
        try:
            parse_source(text, "odd.tile")
        except TileError as error:
            assert error.loc.known
            error.render()


# ---------------------------------------------------------------- kernels written in Python

PYTHON_KERNELS = '''\
from __future__ import annotations


def jit(**options):
    return lambda fn: fn


@jit(
    warps=4,
)
def add(x: f32[N], y: f32[N], out: f32[N]):
    for tn in tiles(N):
        out[tn] = x[tn] + y[tn]


class Holder:
    @staticmethod
    @jit()
    def scale(x: f32[N], s: f32):
        """Multiply in place."""
        for tn in tiles(N):
            x[tn] = x[tn] * s

    @staticmethod
    def broken(x: f32[N]):
        for tn in tiles(N):
            x[tn] = x[tn] + q
'''


@pytest.fixture(scope="module")
def python_kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("jit") / "kernels_for_test.py"
    path.write_text(PYTHON_KERNELS, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kernels_for_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernels_for_test"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["kernels_for_test"]


def _line_of(text: str) -> int:
    return PYTHON_KERNELS.split("\n").index(text) + 1


def test_python_function_keeps_file_lines(python_kernels):
    (kernel,) = parse_function(python_kernels.add).body
    assert kernel.decorators == ()  # dropped: options come from the jit call
    assert kernel.loc.line == _line_of("def add(x: f32[N], y: f32[N], out: f32[N]):")
    (loop,) = kernel.body
    (store,) = loop.body
    assert store.loc.line == _line_of("        out[tn] = x[tn] + y[tn]")
    assert store.loc.col == 9


def test_indented_python_function_keeps_file_columns(python_kernels):
    source = function_source(python_kernels.Holder.scale)
    assert source.col_offset == 4
    (kernel,) = parse_function(python_kernels.Holder.scale).body
    assert (kernel.loc.line, kernel.loc.col) == (_line_of("    def scale(x: f32[N], s: f32):"), 5)
    (_doc, loop) = kernel.body
    (store,) = loop.body
    assert (store.loc.line, store.loc.col) == (_line_of("            x[tn] = x[tn] * s"), 13)


def test_errors_in_python_functions_quote_the_py_file(python_kernels):
    from tilec.frontend import analyze

    with pytest.raises(TileError) as caught:
        analyze(parse_function(python_kernels.Holder.broken))
    rendered = caught.value.render().split("\n")
    line = _line_of("            x[tn] = x[tn] + q")
    assert rendered[0].endswith(f"kernels_for_test.py:{line}:29: error: unknown name 'q'")
    assert rendered[1] == "            x[tn] = x[tn] + q"
    assert rendered[2] == " " * 28 + "^"


def test_functions_without_source_are_a_tile_error():
    namespace: dict = {}
    exec("def made_up(x):\n    pass\n", namespace)
    with pytest.raises(TileError, match="cannot read the source of made_up"):
        parse_function(namespace["made_up"])
