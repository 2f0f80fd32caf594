"""Expressions: literals, names, operators with dtype promotion and broadcasting, constant
folding, attributes (`.T`, `.to()`), subscripts of tiles.

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

import math

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.builtins import BUILTIN_NAMES
from tilec.frontend.checked import (
    COMPARISONS,
    DTYPES,
    Binary,
    Cast,
    Constant,
    DimSize,
    DType,
    ExpandDims,
    Expr,
    Load,
    LoopIndex,
    ParamRef,
    RangeIndex,
    ScalarParam,
    TensorParam,
    TileType,
    Transpose,
    Unary,
    VarRef,
)
from tilec.frontend.sema_common import (
    _OPERATORS,
    _broadcast_shapes,
    _broadcast_to,
    _checked_constant,
    _convert_constant,
    _did_you_mean,
    _expr_loc,
    _fold_binary,
    _int_constant,
    _promote,
    _refuse_f8,
)


class ExpressionChecks:
    """Expressions: the checker's methods for them."""

    # ---------------------------------------------------------------- expressions

    def _expr(self, node: ast.Expr | ast.Slice) -> Expr:
        method = _EXPRESSIONS.get(type(node))
        if method is None:
            raise self._not_a_value(node)
        return getattr(self, method)(node)

    def _not_a_value(self, node: ast.Expr | ast.Slice) -> TileError:
        loc = _expr_loc(node)
        if isinstance(node, ast.Slice):
            return TileError("':' can only appear in an index", loc)
        if isinstance(node, ast.NoneLit):
            return TileError(
                "None is not a value", loc, hint="None can add an axis to a tile: x[:, None]"
            )
        if isinstance(node, ast.StrLit):
            return TileError(
                "strings are not values in tile kernels",
                loc,
                hint="strings may only be docstrings and tile-size keys",
            )
        if isinstance(node, ast.EllipsisLit):
            return TileError("'...' is not a value", loc)
        if isinstance(node, ast.ListExpr):
            return TileError(
                "a list is not a value",
                loc,
                hint="lists only give the shape of zeros() and full()",
            )
        if isinstance(node, ast.TupleExpr):
            return TileError("tuples are not values in tile kernels", loc)
        if isinstance(node, ast.DictExpr):
            return TileError(
                "a dict is not a value", loc, hint="dicts only give tile sizes: tile={...}"
            )
        raise AssertionError(f"unknown expression {node!r}")  # pragma: no cover

    def _int_literal(self, node: ast.IntLit) -> Expr:
        return _int_constant(node.value, node.loc)

    def _float_literal(self, node: ast.FloatLit) -> Expr:
        return Constant(value=node.value, type=TileType(DType.F32), weak=True, loc=node.loc)

    def _bool_literal(self, node: ast.BoolLit) -> Expr:
        return Constant(value=node.value, type=TileType(DType.I1), weak=True, loc=node.loc)

    def _name(self, node: ast.Name) -> Expr:
        name = node.id
        binding, _ = self._binding(name)
        if binding is not None:
            if binding.constant is not None:
                c = binding.constant
                return Constant(value=c.value, type=c.type, weak=True, loc=node.loc)
            return VarRef(name=name, type=binding.type, loc=node.loc)
        range_var = self.range_vars.get(name)
        if range_var is not None:
            return RangeIndex(var=range_var, type=TileType(range_var.dtype), loc=node.loc)
        var = self.loop_vars.get(name)
        if var is not None:
            if var.element:
                return LoopIndex(var=var, type=TileType(DType.I32), loc=node.loc)
            raise TileError(
                f"'{name}' is a tile of {var.dim}, not a value",
                node.loc,
                hint=f"offsets({name}) gives the indices of the elements it covers",
            )
        param = self.params.get(name)
        if isinstance(param, ScalarParam):
            return ParamRef(param=param, type=TileType(param.dtype), loc=node.loc)
        if isinstance(param, TensorParam):
            example = ", ".join(":" for _ in param.dims)
            raise TileError(
                f"tensor '{name}' must be indexed to read from it",
                node.loc,
                hint=f"read a tile, e.g. {name}[{example}]",
            )
        dim = self.dims.get(name)
        if dim is not None:
            return DimSize(dim=dim, type=TileType(DType.I32), loc=node.loc)
        if name == "inf":
            return Constant(value=math.inf, type=TileType(DType.F32), weak=True, loc=node.loc)
        if name in DTYPES:
            raise TileError(
                f"'{name}' is a dtype, not a value",
                node.loc,
                hint=f"convert a value with x.to({name})",
            )
        if name in BUILTIN_NAMES:
            raise TileError(f"'{name}' is a function, not a value", node.loc, hint="call it")
        if name in self.kernel_defs:
            raise TileError(f"'{name}' is a kernel, not a value", node.loc)
        if name in self.left_why:
            message, hint = self.left_why[name]
            raise TileError(message, node.loc, hint=hint)
        if name in self.left_scope:
            loop_line = self.left_scope[name].line
            raise TileError(
                f"'{name}' is only defined inside the loop on line {loop_line}",
                node.loc,
                hint="names assigned in a loop are local to it; assign it before the loop "
                "to carry its value out",
            )
        raise TileError(
            f"unknown name '{name}'", node.loc, hint=_did_you_mean(name, self._visible_names())
        )

    def _is_known_name(self, name: str) -> bool:
        return (
            name in self.params
            or name in self.loop_vars
            or name in self.range_vars
            or self._binding(name)[0] is not None
            or name in DTYPES
            or name in BUILTIN_NAMES
        )

    def _visible_names(self) -> list[str]:
        names = [*self.params, *self.dims, *self.loop_vars, *self.range_vars, "inf"]
        for scope in self.scopes:
            names.extend(scope)
        return names

    def _bin_op(self, node: ast.BinOp) -> Expr:
        if node.op == "@":
            return self._dot(self._expr(node.left), self._expr(node.right), node.loc)
        return self._operator(node.op, self._expr(node.left), self._expr(node.right), node.loc)

    def _compare(self, node: ast.Compare) -> Expr:
        return self._operator(node.op, self._expr(node.left), self._expr(node.right), node.loc)

    def _operator(self, op_text: str, lhs: Expr, rhs: Expr, loc: Location) -> Expr:
        """The binary operator `op_text` ('+', '<', '@', ...) on checked operands."""
        if op_text == "@":
            return self._dot(lhs, rhs, loc)
        return self._binary(_OPERATORS[op_text], lhs, rhs, loc, f"'{op_text}'")

    def _binary(self, op: str, lhs: Expr, rhs: Expr, loc: Location, what: str) -> Expr:
        _refuse_f8(lhs.type.dtype, what, loc)
        _refuse_f8(rhs.type.dtype, what, loc)
        dtype = _promote(lhs, rhs)
        if op in ("div", "pow") and not dtype.is_float:
            dtype = DType.F32
        elif op in ("add", "sub", "mul", "floordiv", "mod", "maximum", "minimum"):
            if dtype is DType.I1:
                raise TileError(
                    f"{what} needs numbers, not i1 values",
                    loc,
                    hint="convert with .to(i32), or use '|', '&', '^' for logic",
                )
        elif op in ("and", "or", "xor") and dtype.is_float:
            raise TileError(
                f"{what} needs integer or i1 operands, not {dtype}",
                loc,
                hint="compare first to make i1 values: (a > 0) & (b > 0)",
            )
        elif op in ("shl", "shr") and not dtype.is_int:
            raise TileError(f"{what} needs integer operands, not {dtype}", loc)
        shape = _broadcast_shapes(lhs.type.shape, rhs.type.shape)
        if shape is None:
            raise TileError(
                f"cannot broadcast {lhs.type} and {rhs.type} in {what}",
                loc,
                hint="sizes must match or be 1, comparing shapes from the right",
            )
        result_dtype = DType.I1 if op in COMPARISONS else dtype
        if isinstance(lhs, Constant) and isinstance(rhs, Constant) and lhs.weak and rhs.weak:
            return _fold_binary(op, lhs, rhs, result_dtype, loc)
        lhs = _broadcast_to(self._convert(lhs, dtype, loc), shape)
        rhs = _broadcast_to(self._convert(rhs, dtype, loc), shape)
        return Binary(op=op, lhs=lhs, rhs=rhs, type=TileType(result_dtype, shape), loc=loc)

    def _convert(self, value: Expr, dtype: DType, loc: Location) -> Expr:
        """`value` as `dtype`: a constant is converted in place; anything else gets a Cast."""
        if isinstance(value, Constant) and (value.weak or value.type.dtype is not dtype):
            # Once it meets a typed operand, a literal is a constant of that type.
            return Constant(
                value=_convert_constant(value.value, dtype, value.loc, explicit=False),
                type=value.type.with_dtype(dtype),
                loc=value.loc,
            )
        if value.type.dtype is dtype:
            return value
        return Cast(operand=value, type=value.type.with_dtype(dtype), loc=loc)

    def _unary_op(self, node: ast.UnaryOp) -> Expr:
        operand = self._expr(node.operand)
        dtype = operand.type.dtype
        _refuse_f8(dtype, f"unary '{node.op}'", node.loc)
        if node.op == "+":
            if dtype is DType.I1:
                raise TileError("unary '+' needs a number, not an i1 value", node.loc)
            return operand
        if node.op == "-":
            if dtype is DType.I1:
                raise TileError(
                    "unary '-' needs a number, not an i1 value",
                    node.loc,
                    hint="use '~' for logical not",
                )
            if isinstance(operand, Constant):
                return _checked_constant(-operand.value, operand, node.loc)
            return Unary(op="neg", operand=operand, type=operand.type, loc=node.loc)
        if dtype.is_float:
            raise TileError(f"'~' needs an integer or i1 operand, not {dtype}", node.loc)
        if isinstance(operand, Constant):
            folded = (not operand.value) if dtype is DType.I1 else ~int(operand.value)
            return _checked_constant(folded, operand, node.loc)
        return Unary(op="not", operand=operand, type=operand.type, loc=node.loc)

    def _attribute(self, node: ast.Attribute) -> Expr:
        if node.attr == "T":
            return self._transpose(self._expr(node.value), node.loc)
        if node.attr == "to":
            raise TileError("'.to' must be called", node.loc, hint="e.g. x.to(f32)")
        self._expr(node.value)
        hint = "tile values have: .to(dtype) and .T"
        if node.attr in ("shape", "dtype"):
            hint = "dimension names (M, N) are values; shapes and dtypes are fixed at compile time"
        raise TileError(f"tile values have no attribute '{node.attr}'", node.loc, hint=hint)

    def _transpose(self, operand: Expr, loc: Location) -> Expr:
        if operand.type.rank != 2:
            raise TileError(f"transpose needs a 2-D tile, not {operand.type}", loc)
        a, b = operand.type.shape
        return Transpose(
            operand=operand, permutation=(1, 0), type=operand.type.with_shape((b, a)), loc=loc
        )

    def _subscript(self, node: ast.Subscript) -> Expr:
        base = node.value
        if isinstance(base, ast.Name):
            param = self.params.get(base.id)
            if isinstance(param, TensorParam):
                access = self._access(param, node.indices, base.loc)
                return Load(access=access, type=access.type, loc=base.loc)
            if isinstance(param, ScalarParam):
                raise TileError(
                    f"scalar argument '{base.id}' cannot be indexed",
                    base.loc,
                    hint="a scalar has no elements to gather; index a tensor argument: "
                    "x[ids[t], :]",
                )
        value = self._expr(base)
        new_axes: list[int] = []
        kept = 0
        for position, index in enumerate(node.indices):
            if isinstance(index, ast.NoneLit):
                new_axes.append(position)
            elif isinstance(index, ast.Slice) and (
                index.lower is None and index.upper is None and index.step is None
            ):
                kept += 1
            else:
                raise TileError(
                    "a tile value can only be indexed with ':' and None",
                    _expr_loc(index),
                    hint="read parts of a tensor by indexing the tensor argument; "
                    "None adds an axis of size 1: x[:, None]",
                )
        if kept != value.type.rank:
            raise TileError(
                f"indexing a {value.type} value needs one ':' per axis ({value.type.rank}), "
                f"plus None for each new axis",
                node.loc,
            )
        if not new_axes:
            return value
        shape = list(value.type.shape)
        for axis in new_axes:
            shape.insert(axis, 1)
        return ExpandDims(
            operand=value,
            axes=tuple(new_axes),
            type=value.type.with_shape(tuple(shape)),
            loc=node.loc,
        )


# The rule for each kind of expression node, by the name of its method (`_call`, of
# `BuiltinChecks`, types calls of the builtins).
_EXPRESSIONS: dict[type, str] = {
    ast.IntLit: "_int_literal",
    ast.FloatLit: "_float_literal",
    ast.BoolLit: "_bool_literal",
    ast.Name: "_name",
    ast.BinOp: "_bin_op",
    ast.Compare: "_compare",
    ast.UnaryOp: "_unary_op",
    ast.BoolOp: "_bool_op",
    ast.Call: "_call",
    ast.Attribute: "_attribute",
    ast.Subscript: "_subscript",
}
