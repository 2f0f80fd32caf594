"""The IR's text form: exact round-trips of every IR file in the repository (custom, generic
and located forms), value naming, error rendering, and property tests for literals."""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilec.diagnostics import TileError
from tilec.dialects import arith
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.ir import Block, Builder, FloatAttr, Region, parse_module, print_op, verify
from tilec.ir.attributes import ArrayAttr, IntegerAttr, StringAttr
from tilec.ir.parser import Parser
from tilec.ir.types import TensorType, TileType, f32, f64

ROOT = Path(__file__).resolve().parents[2]
SPLIT_MARKER = "// -----"


def _ir_files() -> list[Path]:
    files = [*ROOT.glob("tests/**/*.tir"), *ROOT.glob("examples/**/*.tir")]
    return sorted(p for p in files if "Output" not in p.relative_to(ROOT).parts)


def _chunks(path: Path) -> list[tuple[str, int]]:
    """(text, line offset) of each module in `path`: split like `tilec opt` does when a RUN
    line asks for --split-input-file."""
    text = path.read_text(encoding="utf-8")
    if "--split-input-file" not in text:
        return [(text, 0)]
    chunks, current, start = [], [], 0
    for number, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append(("\n".join(current), start))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append(("\n".join(current), start))
    return chunks


def _expects_errors(path: Path) -> bool:
    """Error tests (`RUN: not tilec ...`) hold IR that must fail; the rest must be valid."""
    return re.search(r"RUN:\s*not\s+tilec", path.read_text(encoding="utf-8")) is not None


IR_FILES = _ir_files()


def test_the_repository_has_ir_files():
    names = {p.name for p in IR_FILES}
    assert {"matmul.tir", "softmax.tir", "vector_add.tir", "tile_shape.tir"} <= names


def _round_trips(text: str, name: str, line_offset: int = 0) -> None:
    module = parse_module(text, name, line_offset=line_offset)
    verify(module)
    printed = print_op(module)
    again = parse_module(printed, name + ".printed")
    verify(again)
    assert print_op(again) == printed, "print(parse(print(m))) differs from print(m)"

    generic = print_op(module, generic=True)
    from_generic = parse_module(generic, name + ".generic")
    assert print_op(from_generic) == printed, "the generic form does not read back the same"
    assert print_op(from_generic, generic=True) == generic

    located = print_op(module, print_locations=True)
    assert print_op(parse_module(located, name + ".located"), print_locations=True) == located


@pytest.mark.parametrize("path", IR_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_ir_file_round_trips_exactly(path: Path):
    expects_errors = _expects_errors(path)
    checked = 0
    for text, line_offset in _chunks(path):
        if expects_errors:
            try:
                verify(parse_module(text, str(path), line_offset=line_offset))
            except TileError:
                continue  # a case that is meant to fail
        _round_trips(text, str(path), line_offset)
        checked += 1
    assert checked or expects_errors


# ---------------------------------------------------------------------------------------------
# Value names


def _kernel(*arg_types, name="k"):
    body = Block(arg_types)
    return FuncOp.make(sym_name=name, body=Region([body])), body


def test_name_hints_are_kept_and_made_unique():
    func, body = _kernel(f32)
    (x,) = body.args
    x.name_hint = "x"
    b = Builder.at_end(body)
    first = b.create(arith.AddFOp, lhs=x, rhs=x).result
    second = b.create(arith.MulFOp, lhs=first, rhs=x).result
    third = b.create(arith.SubFOp, lhs=second, rhs=x).result
    unnamed = b.create(arith.NegFOp, operand=third).result
    numeric = b.create(arith.NegFOp, operand=unnamed).result
    first.name_hint = "x"  # collides with the argument
    second.name_hint = "x_1"  # collides with the suffix the first collision gets
    third.name_hint = "sum"
    numeric.name_hint = "7"  # numbers are never kept: they are positions
    b.create(ReturnOp)
    text = print_op(ModuleOp.make(body=Region([Block(ops=[func])])))
    assert "%x_1 = arith.addf %x, %x : f32" in text
    assert "%x_1_1 = arith.mulf %x_1, %x : f32" in text
    assert "%sum = arith.subf %x_1_1, %x : f32" in text
    assert "%0 = arith.negf %sum : f32" in text
    assert "%1 = arith.negf %0 : f32" in text
    # The printed names read back as the same names.
    assert print_op(parse_module(text)) == text


def test_names_restart_in_each_kernel():
    funcs = []
    for name in ("a", "b"):
        func, body = _kernel(f32, name=name)
        b = Builder.at_end(body)
        b.create(arith.AddFOp, lhs=body.args[0], rhs=body.args[0])
        b.create(ReturnOp)
        funcs.append(func)
    text = print_op(ModuleOp.make(body=Region([Block(ops=funcs)])))
    assert text.count("func @a(%0: f32)") == 1 and text.count("func @b(%0: f32)") == 1
    assert text.count("%1 = arith.addf %0, %0 : f32") == 2


def test_printing_a_lone_op():
    _, body = _kernel(f32)
    add = Builder.at_end(body).create(arith.AddFOp, lhs=body.args[0], rhs=body.args[0])
    # Its operand is defined outside what is printed: the name says so.
    assert str(add) == "%0 = arith.addf %<<undefined:1>>, %<<undefined:1>> : f32"


# ---------------------------------------------------------------------------------------------
# Errors


def test_parse_error_renders_line_and_caret():
    text = "func @f(%x: f32) {\n  %y = arith.addf %x, %z : f32\n  return\n}\n"
    with pytest.raises(TileError) as info:
        parse_module(text, "bad.tir")
    assert info.value.render() == (
        "bad.tir:2:23: error: use of undefined value '%z'\n"
        "  %y = arith.addf %x, %z : f32\n"
        "                      ^"
    )


def test_unknown_op_error_has_a_hint():
    with pytest.raises(TileError) as info:
        parse_module("func @f() {\n  %p = tile.programid 0\n  return\n}\n", "hint.tir")
    rendered = info.value.render()
    assert rendered.startswith("hint.tir:2:8: error: unknown operation 'tile.programid'\n")
    assert "\n  %p = tile.programid 0\n       ^\nhint: did you mean 'tile.program_id'" in rendered


def test_verify_error_renders_with_the_source_line():
    text = "func @f(%t: tile<4x4xf32>) {\n  %r = tile.reduce sum %t axis 2 : tile<4x4xf32> -> tile<4xf32>\n  return\n}\n"
    module = parse_module(text, "verify.tir")
    with pytest.raises(TileError) as info:
        verify(module)
    assert info.value.render() == (
        "verify.tir:2:3: error: 'tile.reduce' op axis 2 is out of range for rank 2 "
        "(expected 0..1)\n"
        "  %r = tile.reduce sum %t axis 2 : tile<4x4xf32> -> tile<4xf32>\n"
        "  ^"
    )


def test_errors_in_split_chunks_keep_file_line_numbers():
    chunk = "func @f() {\n  %x = tile.full 0 : tile<4xf32>\n  return\n}\n"
    module = parse_module(chunk, "split.tir", line_offset=10)
    with pytest.raises(TileError) as info:
        verify(module)
    assert str(info.value.loc) == "split.tir:12:3"


# ---------------------------------------------------------------------------------------------
# Property tests: literals and types read back exactly


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _parse_attribute(text: str):
    return Parser(text, "<attr>").parse_attribute()


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_attributes_round_trip_exactly(x: float):
    parsed = _parse_attribute(str(FloatAttr(x)))
    assert isinstance(parsed, FloatAttr)
    if math.isnan(x):
        assert math.isnan(parsed.value)
    else:
        assert _bits(parsed.value) == _bits(x)  # -0.0 stays -0.0


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_constants_round_trip_through_modules(x: float):
    text = f"func @f() {{\n  %c = arith.constant {FloatAttr(x)} : f64\n  return\n}}\n"
    module = parse_module(text)
    printed = print_op(module)
    (const, _) = module.body.block.ops[0].body.block.ops
    value = const.attributes["value"].value
    assert math.isnan(value) if math.isnan(x) else _bits(value) == _bits(x)
    assert print_op(parse_module(printed)) == printed
    assert print_op(parse_module(print_op(module, generic=True))) == printed


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_integer_constants_round_trip(n: int):
    text = f"func @f() {{\n  %c = arith.constant {n} : i64\n  return\n}}\n"
    module = parse_module(text)
    verify(module)
    assert module.body.block.ops[0].body.block.ops[0].attributes["value"] == IntegerAttr(n)
    assert print_op(parse_module(print_op(module))) == print_op(module)


@given(st.text())
def test_string_attributes_round_trip(s: str):
    assert _parse_attribute(str(StringAttr(s))) == StringAttr(s)


@given(st.lists(st.integers(min_value=-5, max_value=5), max_size=6))
def test_array_attributes_round_trip(values: list[int]):
    attr = ArrayAttr(tuple(IntegerAttr(v) for v in values))
    assert _parse_attribute(str(attr)) == attr


DIMS = st.one_of(
    st.integers(min_value=0, max_value=4096),
    st.from_regex(r"[A-Z][A-Z0-9_]{0,5}", fullmatch=True),
    st.none(),
)


@given(st.lists(DIMS, max_size=4), st.sampled_from(["i1", "i8", "i32", "index", "f16", "bf16"]))
def test_shaped_types_round_trip(shape: list, element: str):
    element_type = Parser(element).parse_type()
    for t in (TileType(tuple(shape), element_type), TensorType(tuple(shape), element_type)):
        assert Parser(str(t)).parse_type() == t


def test_layouted_types_round_trip():
    text = "tile<BMxBNxf32, #mma<version = 2, warps_per_cta = [4, 1], instr_shape = [16, 8, 16]>>"
    t = Parser(text).parse_type()
    assert str(t) == text and t.layout.warps_per_cta == (4, 1)
    assert Parser(str(TileType((4,), f64))).parse_type() == TileType((4,), f64)


def test_layout_aliases_round_trip_and_are_checked():
    from tilec.diagnostics import TileError
    from tilec.ir import parse_module, print_op

    text = (
        "#blocked = #blocked<size_per_thread = [1], threads_per_warp = [32], "
        "warps_per_cta = [4], order = [0]>\n"
        "module {\n"
        "  func @f(%x: tile<128xf32, #blocked>) {\n"
        "    return\n"
        "  }\n"
        "}\n"
    )
    module = parse_module(text, "a.tir")
    assert print_op(module) == text
    assert "#blocked<size_per_thread" in print_op(module, local_scope=True).split("\n")[1]
    with pytest.raises(TileError, match="undefined attribute alias '#blocked2'"):
        parse_module(text.replace("#blocked>", "#blocked2>"), "b.tir")
    with pytest.raises(TileError, match="attribute alias '#blocked' is defined twice"):
        parse_module(text.split("\n")[0] + "\n" + text, "c.tir")
