"""The IR's data structures: types, attributes, values and use lists, the builder, the rewrite
helpers on ops (replace uses, erase, move, clone), op declarations (accessors, inference,
verification) and the tile/math folders."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from tilec.diagnostics import Location
from tilec.dialects import arith, scf
from tilec.dialects import math as math_dialect
from tilec.dialects import tile as tile_dialect
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.ir import (
    ArrayAttr,
    Block,
    BoolAttr,
    Builder,
    FloatAttr,
    IntegerAttr,
    Region,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    VerifyError,
    op_class,
    verify,
)
from tilec.ir.attributes import BlockedLayout, to_attribute
from tilec.ir.types import (
    IntegerType,
    SharedType,
    TensorType,
    TileType,
    bf16,
    bit_width,
    element_type,
    f16,
    f32,
    f64,
    i1,
    i8,
    i32,
    i64,
    index,
    is_float,
    is_integer,
)

LOC = Location("kernel.tile", 3, 7)
HAVE_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None


def kernel(*arg_types, names=()):
    """A module with one kernel whose body is an empty block; returns (module, block, builder)."""
    body = Block(arg_types)
    for arg, name in zip(body.args, names):
        arg.name_hint = name
    func = FuncOp.make(sym_name="k", body=Region([body]))
    module = ModuleOp.make(body=Region([Block(ops=[func])]))
    return module, body, Builder.at_end(body)


def finish(b: Builder) -> None:
    b.create(ReturnOp)


# ---------------------------------------------------------------------------------------------
# Types


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (i1, "i1"),
        (i64, "i64"),
        (index, "index"),
        (bf16, "bf16"),
        (TileType((128, 64), f16), "tile<128x64xf16>"),
        (TileType(("BM", "BK"), f16), "tile<BMxBKxf16>"),
        (TileType((), f32), "tile<f32>"),
        (TensorType((None, None), f32), "!tile.tensor<?x?xf32>"),
        (TensorType(("M", 8), i8), "!tile.tensor<Mx8xi8>"),
        (SharedType((3, 128, 64), f16), "!smem<3x128x64xf16>"),
    ],
)
def test_type_text(t, text):
    assert str(t) == text


def test_tile_type_with_layout_prints_it():
    layout = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
    t = TileType((128, 64), f32, layout)
    assert str(t) == (
        "tile<128x64xf32, #blocked<size_per_thread = [1, 4], threads_per_warp = [4, 8], "
        "warps_per_cta = [4, 1], order = [1, 0]>>"
    )
    assert t != TileType((128, 64), f32)  # the layout is part of the type


def test_types_compare_and_hash_by_value():
    assert TileType(("BM", 4), f32) == TileType(("BM", 4), f32)
    assert hash(TileType(("BM", 4), f32)) == hash(TileType(("BM", 4), f32))
    assert TileType(("BM", 4), f32) != TileType(("BN", 4), f32)
    assert TileType((4,), f32) != TensorType((4,), f32)
    assert IntegerType(32) == i32
    assert len({f16, bf16, f16}) == 2


@pytest.mark.parametrize("bad", [-1, "bm", "B-M", 1.5, True, "1M"])
def test_invalid_dimensions_are_rejected(bad):
    with pytest.raises(ValueError, match="invalid dimension"):
        TileType((bad,), f32)
    with pytest.raises(ValueError, match="invalid dimension"):
        TensorType((4, bad), f32)


def test_shaped_type_properties():
    t = TileType((4, "BN", 2), f16)
    assert t.rank == 3
    assert not t.is_static
    assert t.num_elements is None
    assert TileType((4, 8), f16).num_elements == 32
    assert element_type(t) == f16 and element_type(f32) == f32
    assert is_float(t) and not is_integer(t)
    assert is_integer(TileType((4,), index))
    assert bit_width(index) == 64 and bit_width(TileType((2,), bf16)) == 16


# ---------------------------------------------------------------------------------------------
# Attributes


@pytest.mark.parametrize(
    ("attr", "text"),
    [
        (IntegerAttr(-3), "-3"),
        (FloatAttr(1.5), "1.5"),
        (FloatAttr(-0.0), "-0.0"),
        (FloatAttr(float("inf")), "inf"),
        (FloatAttr(float("-inf")), "-inf"),
        (FloatAttr(float("nan")), "nan"),
        (FloatAttr(1e-7), "1e-07"),
        (BoolAttr(True), "true"),
        (StringAttr('say "hi"\n'), '"say \\"hi\\"\\n"'),
        (ArrayAttr((IntegerAttr(1), IntegerAttr(0))), "[1, 0]"),
        (TypeAttr(TileType((4,), f32)), "tile<4xf32>"),
        (SymbolRefAttr("kernel"), "@kernel"),
        (SymbolRefAttr("two words"), '@"two words"'),
        (UnitAttr(), "unit"),
        (
            tile_dialect.MmaLayout(2, (2, 2), (16, 8, 16)),
            "#mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8, 16]>",
        ),
        (
            tile_dialect.SharedLayout(8, 1, 8, (1, 0)),
            "#shared<vec = 8, per_phase = 1, max_phase = 8, order = [1, 0]>",
        ),
    ],
)
def test_attribute_text(attr, text):
    assert str(attr) == text


def test_attribute_equality():
    assert FloatAttr(float("nan")) == FloatAttr(float("nan"))  # constants, not IEEE compares
    assert FloatAttr(0.0) != FloatAttr(-0.0)
    assert hash(FloatAttr(float("nan"))) == hash(FloatAttr(float("nan")))
    assert IntegerAttr(1) != BoolAttr(True)
    assert ArrayAttr((IntegerAttr(1),)).value == (1,)


def test_to_attribute_wraps_plain_values():
    assert to_attribute(True) == BoolAttr(True)
    assert to_attribute(3) == IntegerAttr(3)
    assert to_attribute(2.0) == FloatAttr(2.0)
    assert to_attribute([1, 0]) == ArrayAttr((IntegerAttr(1), IntegerAttr(0)))
    assert to_attribute(f16) == TypeAttr(f16)
    with pytest.raises(TypeError):
        to_attribute(object())


# ---------------------------------------------------------------------------------------------
# Values, use lists and the builder


def test_use_lists_count_each_use():
    _, body, b = kernel(f32, f32)
    x, y = body.args
    add = b.create(arith.AddFOp, lhs=x, rhs=x)
    assert x.uses == [add, add]
    assert y.uses == []
    add.set_operand(1, y)
    assert x.uses == [add] and y.uses == [add]
    add.set_operands([y, y])
    assert x.uses == [] and y.uses == [add, add]


def test_replace_all_uses_with():
    _, body, b = kernel(f32, f32)
    x, y = body.args
    add = b.create(arith.AddFOp, lhs=x, rhs=x).result
    mul = b.create(arith.MulFOp, lhs=add, rhs=x).result
    x.replace_all_uses_with(y)
    assert not x.has_uses
    assert add.op.operands == [y, y] and mul.op.operands == [add, y]
    assert len(y.uses) == 3
    x.replace_all_uses_with(x)  # no-op


def test_replace_uses_if():
    _, body, b = kernel(f32, f32)
    x, y = body.args
    add = b.create(arith.AddFOp, lhs=x, rhs=x)
    mul = b.create(arith.MulFOp, lhs=x, rhs=x)
    x.replace_uses_if(y, lambda user: user is mul)
    assert add.operands == [x, x] and mul.operands == [y, y]


def test_builder_insertion_points():
    _, body, b = kernel(f32)
    (x,) = body.args
    first = b.create(arith.AddFOp, lhs=x, rhs=x)
    last = b.create(arith.MulFOp, lhs=x, rhs=x)
    before_last = Builder.before_op(last).create(arith.SubFOp, lhs=x, rhs=x)
    after_first = Builder.after_op(first).create(arith.DivFOp, lhs=x, rhs=x)
    at_start = Builder.at_start(body).create(arith.NegFOp, operand=x)
    after_last = Builder.after_op(last).create(arith.RemFOp, lhs=x, rhs=x)
    assert body.ops == [at_start, first, after_first, before_last, last, after_last]
    with b.at(body, first):
        inner = b.create(arith.MaximumFOp, lhs=x, rhs=x)
    assert body.ops.index(inner) == body.ops.index(first) - 1
    assert b.create(arith.MinimumFOp, lhs=x, rhs=x) is body.ops[-1]  # back at the end


def test_builder_stamps_locations():
    _, body, b = kernel(f32)
    (x,) = body.args
    b.loc = LOC
    assert b.create(arith.AddFOp, lhs=x, rhs=x).loc == LOC
    other = Location("other.tile", 9, 1)
    with b.located(other):
        assert b.create(arith.AddFOp, lhs=x, rhs=x).loc == other
    assert b.create(arith.AddFOp, lhs=x, rhs=x, loc=other).loc == other
    assert b.create(arith.AddFOp, lhs=x, rhs=x).loc == LOC
    op = body.ops[0]
    assert Builder.before_op(op).loc == op.loc


def test_builder_without_insertion_point():
    with pytest.raises(ValueError, match="no insertion point"):
        Builder().create(tile_dialect.ProgramIdOp, axis=0)


# ---------------------------------------------------------------------------------------------
# Rewrite helpers on ops


def test_erase_refuses_an_op_with_uses():
    _, body, b = kernel(f32)
    (x,) = body.args
    add = b.create(arith.AddFOp, lhs=x, rhs=x)
    b.create(arith.NegFOp, operand=add.result)
    with pytest.raises(ValueError, match="still has uses"):
        add.erase()
    assert add.parent is body


def test_erase_drops_operand_uses_including_nested_ones():
    _, body, b = kernel(index, f32)
    n, x = body.args
    loop = b.create(scf.ForOp, lower=n, upper=n, step=n, inits=[x], result_types=[f32])
    loop_body = loop.body.block
    loop_body.add_arg(index)
    acc = loop_body.add_arg(f32)
    inner = Builder.at_end(loop_body)
    s = inner.create(arith.AddFOp, lhs=acc, rhs=x).result
    inner.create(scf.YieldOp, values=[s])
    assert len(x.uses) == 2 and len(n.uses) == 3
    loop.erase()
    assert x.uses == [] and n.uses == []
    assert loop not in body.ops and loop.parent is None


def test_replace_with_and_detach():
    _, body, b = kernel(f32, f32)
    x, y = body.args
    add = b.create(arith.AddFOp, lhs=x, rhs=y)
    neg = b.create(arith.NegFOp, operand=add.result)
    add.replace_with([x])
    assert neg.operands == [x] and add not in body.ops
    with pytest.raises(ValueError):
        neg.replace_with([])
    neg.detach()
    assert neg.parent is None and neg not in body.ops and neg in x.uses  # uses kept


def test_move_before_and_after():
    _, body, b = kernel(f32)
    (x,) = body.args
    a, c, d = (b.create(arith.AddFOp, lhs=x, rhs=x) for _ in range(3))
    d.move_before(a)
    assert body.ops == [d, a, c]
    d.move_after(c)
    assert body.ops == [a, c, d]
    a.move_after(d)
    assert body.ops == [c, d, a]


def test_clone_remaps_operands_and_regions():
    _, body, b = kernel(index, f32, f32)
    n, x, y = body.args
    loop = b.create(scf.ForOp, lower=n, upper=n, step=n, inits=[x], result_types=[f32])
    loop_body = loop.body.block
    loop_body.add_arg(index, "i")
    acc = loop_body.add_arg(f32, "acc")
    inner = Builder.at_end(loop_body)
    s = inner.create(arith.AddFOp, lhs=acc, rhs=x).result
    s.name_hint = "s"
    inner.create(scf.YieldOp, values=[s])

    mapping = {x: y}
    copy = loop.clone(mapping)
    assert copy is not loop and copy.parent is None
    assert copy.operands == [n, n, n, y]  # x remapped to y
    assert mapping[loop.results[0]] is copy.results[0]
    new_block = copy.body.block
    assert new_block is not loop_body
    assert [a.name_hint for a in new_block.args] == ["i", "acc"]
    new_add, new_yield = new_block.ops
    # Inside, values of the original region map to their clones; outer ones through `mapping`.
    assert new_add.operands == [new_block.args[1], y]
    assert new_yield.operands == [new_add.result]
    assert new_add.result.name_hint == "s"
    assert mapping[acc] is new_block.args[1]
    # The original is untouched.
    assert loop_body.ops[0].operands == [acc, x]
    b.insert(copy)
    finish(b)


def test_walk_orders_and_ancestry():
    module, body, b = kernel(index)
    (n,) = body.args
    loop = b.create(scf.ForOp, lower=n, upper=n, step=n)
    loop.body.block.add_arg(index)
    y = Builder.at_end(loop.body.block).create(scf.YieldOp)
    ret = b.create(ReturnOp)
    func = body.parent_op
    names = [op.name for op in module.walk()]
    assert names == [
        "builtin.module",
        "builtin.func",
        "scf.for",
        "scf.yield",
        "builtin.return",
    ]
    assert [op.name for op in module.walk(post_order=True)][-1] == "builtin.module"
    assert y.parent_op is loop and loop.parent_op is func and ret.block is body
    assert func.is_ancestor_of(y) and not loop.is_ancestor_of(ret)


# ---------------------------------------------------------------------------------------------
# Declarations: make, accessors, inference


def test_make_infers_result_types():
    _, body, b = kernel(
        TileType(("BM", "BK"), f16),
        TileType(("BK", "BN"), f16),
        TileType(("BM", "BN"), f32),
    )
    a, bb, acc = body.args
    dot = b.create(tile_dialect.DotOp, a=a, b=bb, acc=acc)
    assert dot.result.type == acc.type
    red = b.create(tile_dialect.ReduceOp, kind="max", input=dot.result, axis=0)
    assert red.result.type == TileType(("BN",), f32)
    assert red.kind == "max" and red.axis == 0
    scalar = b.create(tile_dialect.ReduceOp, kind="sum", input=red.result, axis=0)
    assert scalar.result.type == f32
    t = b.create(tile_dialect.TransposeOp, input=dot.result, perm=[1, 0])
    assert t.result.type == TileType(("BN", "BM"), f32)
    e = b.create(tile_dialect.ExpandDimsOp, input=red.result, axis=1)
    assert e.result.type == TileType(("BN", 1), f32)
    assert b.create(tile_dialect.ProgramIdOp, axis=2).result.type == index
    assert b.create(tile_dialect.SymbolOp, symbol="BM").result.type == index
    finish(b)


def test_make_reports_missing_and_unknown_fields():
    with pytest.raises(TypeError, match="operand 'a' is required"):
        tile_dialect.DotOp.make()
    with pytest.raises(TypeError, match="unknown fields"):
        tile_dialect.ProgramIdOp.make(axis=0, dimension=1)
    with pytest.raises(TypeError, match="cannot be inferred"):
        tile_dialect.FullOp.make(value=0.0)
    with pytest.raises(ValueError, match="not a permutation"):
        _, body, _ = kernel(TileType((4, 4), f32))
        tile_dialect.TransposeOp.make(input=body.args[0], perm=[0, 0])


def test_load_store_accessors_follow_operand_segments():
    view_t = TensorType(("M", "N"), f32)
    _, body, b = kernel(view_t, index, index, TileType((4, 4), i1))
    view, i, j, mask = body.args
    plain = b.create(
        tile_dialect.LoadOp, view=view, offsets=[i, j], result_types=[TileType((4, 4), f32)]
    )
    masked = b.create(
        tile_dialect.LoadOp,
        view=view,
        offsets=[j, i],
        mask=mask,
        padding=-1.0,
        result_types=[TileType((4, 4), f32)],
    )
    assert plain.view is view and plain.offsets == [i, j] and plain.mask is None
    assert masked.offsets == [j, i] and masked.mask is mask
    assert plain.padding is None and masked.padding == -1.0
    store = b.create(tile_dialect.StoreOp, view=view, offsets=[i, j], value=masked.result)
    assert store.value is masked.result and store.mask is None and not store.results
    finish(b)
    verify(body.parent_op.parent_op)


def test_every_op_is_registered_with_a_summary():
    expected = [
        "tile.program_id",
        "tile.num_programs",
        "tile.dim",
        "tile.symbol",
        "tile.load",
        "tile.store",
        "tile.dot",
        "tile.reduce",
        "tile.broadcast",
        "tile.splat",
        "tile.expand_dims",
        "tile.reshape",
        "tile.transpose",
        "tile.full",
        "tile.iota",
        "tile.cast",
        "tile.select",
        "tile.convert_layout",
        "math.exp",
        "math.exp2",
        "math.log",
        "math.log2",
        "math.sqrt",
        "math.rsqrt",
        "math.sin",
        "math.cos",
        "math.tanh",
        "math.erf",
        "math.absf",
        "math.floor",
        "math.ceil",
        "math.fma",
    ]
    for name in expected:
        cls = op_class(name)
        assert cls is not None, name
        assert cls.summary, name
        assert cls.assembly_format is not None, name
    assert op_class("tile.full") is tile_dialect.FullOp
    assert op_class("math.absf") is math_dialect.AbsFOp


# ---------------------------------------------------------------------------------------------
# Verification through the API


def test_verify_error_names_op_and_location():
    _, body, b = kernel(TileType(("BM", "BK"), f16), TileType(("BN", "BK"), f16))
    a, bb = body.args
    acc = b.create(tile_dialect.FullOp, value=0.0, result_types=[TileType(("BM", "BN"), f32)])
    b.create(tile_dialect.DotOp, a=a, b=bb, acc=acc.result, loc=LOC)
    finish(b)
    with pytest.raises(VerifyError) as info:
        verify(body.parent_op.parent_op)
    assert info.value.loc == LOC
    assert info.value.message.startswith("'tile.dot' op 'a' is BMxBK and 'b' is BNxBK")
    assert str(info.value).startswith("kernel.tile:3:7: error: 'tile.dot' op")


def test_verify_rejects_use_before_definition():
    _, body, b = kernel(f32)
    (x,) = body.args
    first = b.create(arith.AddFOp, lhs=x, rhs=x)
    second = b.create(arith.NegFOp, operand=first.result)
    second.move_before(first)
    finish(b)
    with pytest.raises(VerifyError, match=r"'arith\.negf' op operand #0 is not defined before"):
        verify(body.parent_op.parent_op)


def test_full_op_checks_value_against_element_type():
    _, _, b = kernel()
    full = b.create(tile_dialect.FullOp, value=1, result_types=[TileType((4,), f32)], loc=LOC)
    finish(b)
    with pytest.raises(VerifyError, match="value 1 must be a float for element type f32"):
        verify(full.parent_op.parent_op)


# ---------------------------------------------------------------------------------------------
# Folders


def _const(b: Builder, value, t):
    if isinstance(t, TileType):
        return b.create(tile_dialect.FullOp, value=value, result_types=[t]).result
    return b.create(arith.ConstantOp, value=value, result_types=[t]).result


def test_transpose_of_transpose_folds_to_the_input():
    _, body, b = kernel(TileType((2, 3, 4), f32))
    (x,) = body.args
    t1 = b.create(tile_dialect.TransposeOp, input=x, perm=[2, 0, 1]).result  # 4x2x3
    back = b.create(tile_dialect.TransposeOp, input=t1, perm=[1, 2, 0])  # 2x3x4
    assert back.result.type == x.type
    assert back.fold() == [x]
    not_back = b.create(tile_dialect.TransposeOp, input=t1, perm=[2, 1, 0])
    assert not_back.fold() is None
    identity = b.create(tile_dialect.TransposeOp, input=x, perm=[0, 1, 2])
    assert identity.fold() == [x]


def test_same_type_conversions_fold_to_the_input():
    t = TileType(("BM", 4), f32)
    _, body, b = kernel(t)
    (x,) = body.args
    for cls in (
        tile_dialect.ReshapeOp,
        tile_dialect.BroadcastOp,
        tile_dialect.CastOp,
        tile_dialect.ConvertLayoutOp,
    ):
        assert b.create(cls, input=x, result_types=[t]).fold() == [x], cls.name
    other = b.create(tile_dialect.ReshapeOp, input=x, result_types=[TileType((4, "BM"), f32)])
    assert other.fold() is None


def test_convert_layout_round_trip_folds():
    blocked = TileType((16, 16), f32, BlockedLayout((1, 1), (4, 8), (4, 1), (1, 0)))
    mma = TileType((16, 16), f32, tile_dialect.MmaLayout(2, (2, 2), (16, 8, 16)))
    _, body, b = kernel(blocked)
    (x,) = body.args
    to_mma = b.create(tile_dialect.ConvertLayoutOp, input=x, result_types=[mma]).result
    back = b.create(tile_dialect.ConvertLayoutOp, input=to_mma, result_types=[blocked])
    assert back.fold() == [x]


def test_constants_fold_through_shape_ops():
    _, _, b = kernel()
    scalar = _const(b, 2.5, f32)
    splat = b.create(tile_dialect.SplatOp, input=scalar, result_types=[TileType(("BM",), f32)])
    assert splat.fold() == [FloatAttr(2.5)]
    row = _const(b, 7, TileType((1, "BN"), i32))
    bc = b.create(tile_dialect.BroadcastOp, input=row, result_types=[TileType(("BM", "BN"), i32)])
    assert bc.fold() == [IntegerAttr(7)]
    e = b.create(tile_dialect.ExpandDimsOp, input=row, axis=0)
    assert e.fold() == [IntegerAttr(7)]
    # An integer constant of a float type (arith.constant allows it) becomes a float.
    int_valued = _const(b, 3, f16)
    splat16 = b.create(tile_dialect.SplatOp, input=int_valued, result_types=[TileType((4,), f16)])
    assert splat16.fold() == [FloatAttr(3.0)]


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1.0 + 2**-11, f32, f16, FloatAttr(1.0)),  # halfway: to even
        (1.0 + 3 * 2**-11, f32, f16, FloatAttr(1.0 + 2**-9)),  # halfway: to even (up)
        (70000.0, f32, f16, FloatAttr(math.inf)),
        (-2.75, f32, i32, IntegerAttr(-2)),  # toward zero
        (3e9, f32, i32, None),  # out of range: undefined, not folded
        (math.nan, f32, i32, None),
        (0.5, f32, i1, BoolAttr(True)),
        (300, i32, i8, IntegerAttr(44)),  # wraps
        (-1, i8, i64, IntegerAttr(-1)),  # sign-extends
        (True, i1, f32, FloatAttr(1.0)),
        (2**53 + 1, i64, f64, None),  # would round twice through f64
        (16777217, i32, f32, FloatAttr(16777216.0)),
        (1.5, f32, bf16, FloatAttr(1.5) if HAVE_ML_DTYPES else None),  # bf16 needs ml_dtypes
    ],
)
def test_cast_folds_like_the_hardware(value, source, target, expected):
    _, _, b = kernel()
    c = _const(b, value, source)
    cast = b.create(tile_dialect.CastOp, input=c, result_types=[target])
    assert cast.fold() == (None if expected is None else [expected])


def test_select_folds_constant_conditions():
    t = TileType((4,), f32)
    _, body, b = kernel(t, t, TileType((4,), i1))
    x, y, cond = body.args
    yes = _const(b, True, TileType((4,), i1))
    no = _const(b, False, TileType((4,), i1))
    assert b.create(tile_dialect.SelectOp, condition=yes, true_value=x, false_value=y).fold() == [x]
    assert b.create(tile_dialect.SelectOp, condition=no, true_value=x, false_value=y).fold() == [y]
    assert b.create(tile_dialect.SelectOp, condition=cond, true_value=x, false_value=x).fold() == [
        x
    ]
    assert (
        b.create(tile_dialect.SelectOp, condition=cond, true_value=x, false_value=y).fold() is None
    )


def test_dim_folds_static_extents():
    _, body, b = kernel(TensorType(("M", 64), f32))
    (view,) = body.args
    assert b.create(tile_dialect.DimOp, view=view, axis=1).fold() == [IntegerAttr(64)]
    assert b.create(tile_dialect.DimOp, view=view, axis=0).fold() is None


def _fold_unary(cls, value, t):
    _, _, b = kernel()
    return b.create(cls, operand=_const(b, value, t)).fold()


def test_math_folds_in_the_element_type():
    (e16,) = _fold_unary(math_dialect.ExpOp, 1.0, f16)
    assert e16 == FloatAttr(float(np.float16(np.e)))
    (e32,) = _fold_unary(math_dialect.ExpOp, 1.0, f32)
    assert e32 == FloatAttr(float(np.float32(np.e)))
    assert _fold_unary(math_dialect.LogOp, -1.0, f32) == [FloatAttr(math.nan)]
    assert _fold_unary(math_dialect.LogOp, 0.0, f64) == [FloatAttr(-math.inf)]
    assert _fold_unary(math_dialect.RsqrtOp, 4.0, f32) == [FloatAttr(0.5)]
    assert _fold_unary(math_dialect.AbsFOp, -0.0, f32) == [FloatAttr(0.0)]
    assert _fold_unary(math_dialect.FloorOp, -1.5, f32) == [FloatAttr(-2.0)]
    assert _fold_unary(math_dialect.CeilOp, -1.5, f32) == [FloatAttr(-1.0)]
    (erf,) = _fold_unary(math_dialect.ErfOp, 0.5, f32)
    assert erf == FloatAttr(float(np.float32(math.erf(0.5))))
    # A constant tile holds one value: it folds the same way.
    (tile_exp,) = _fold_unary(math_dialect.Exp2Op, 3.0, TileType(("BM",), f32))
    assert tile_exp == FloatAttr(8.0)


def test_math_does_not_fold_non_constants():
    _, body, b = kernel(f32)
    assert b.create(math_dialect.SinOp, operand=body.args[0]).fold() is None


def _fold_fma(a, b_, c, t):
    _, _, b = kernel()
    op = b.create(math_dialect.FmaOp, a=_const(b, a, t), b=_const(b, b_, t), c=_const(b, c, t))
    return op.fold()


def test_fma_rounds_once():
    eps = 2.0**-52
    # (1 + eps)(1 - eps) - 1 = -eps^2: lost entirely by a separate multiply and add.
    assert _fold_fma(1 + eps, 1 - eps, -1.0, f64) == [FloatAttr(-(eps**2))]
    # f32: 641 * 6700417 = 2^32 + 1 exactly, so the sum is 1 above the f32 halfway point
    # 2^56 + 2^32. Rounding through f64 loses the 1, lands on the tie and rounds to even
    # (down); rounding once rounds up.
    assert _fold_fma(641.0, 6700417.0, 2.0**56, f32) == [FloatAttr(2.0**56 + 2.0**33)]
    assert _fold_fma(-641.0, 6700417.0, -(2.0**56), f32) == [FloatAttr(-(2.0**56 + 2.0**33))]
    assert _fold_fma(2.0, 3.0, 1.0, f16) == [FloatAttr(7.0)]
    assert _fold_fma(math.inf, 0.0, 1.0, f32) == [FloatAttr(math.nan)]
    assert _fold_fma(-0.0, 1.0, -0.0, f32) == [FloatAttr(-0.0)]
    assert _fold_fma(65504.0, 2.0, 0.0, f16) == [FloatAttr(math.inf)]
