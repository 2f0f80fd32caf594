"""Builtin calls: their arguments and typing rules -- math functions, `maximum`/`minimum`/`where`,
reductions, `dot`, `zeros`/`full`/`arange`/`offsets`, `transpose` (the rules of `rand`/`randn`/
`randint` are in `tilec.frontend.sema_random`, of atomics in `sema_atomics`, of scans in
`sema_scan`). Each rule is declared, with its IR, in the registry `tilec.frontend.builtins`;
`tilec.frontend.sema_calls` dispatches calls to them.

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    DTYPES,
    KIND_ORDER,
    AxisExtent,
    Binary,
    Cast,
    Constant,
    Dim,
    Dimension,
    Dot,
    DType,
    Expr,
    Iota,
    LoopIndex,
    Math,
    Reduce,
    Select,
    TileType,
)
from tilec.frontend.sema_common import (
    _DTYPE_LIST,
    _broadcast_shapes,
    _broadcast_to,
    _checked_constant,
    _convert_constant,
    _expr_loc,
    _fold_math,
    _full,
    _is_weak,
    _literal_int,
    _promote,
)


class BuiltinChecks:
    """Builtin calls: the checker's methods for them."""

    # ---------------------------------------------------------------- calls

    def _arguments(
        self,
        node: ast.Call,
        name: str,
        positional: tuple[str, ...],
        keyword_only: tuple[str, ...] = (),
        required: int | None = None,
        extra_hint: str | None = None,
    ) -> dict[str, ast.Expr]:
        """Match the call's arguments to parameter names, with errors located on arguments."""
        required = len(positional) if required is None else required
        signature = ", ".join([*positional, *(f"{k}=..." for k in keyword_only)])
        bound: dict[str, ast.Expr] = {}
        if len(node.args) > len(positional):
            extra = node.args[len(positional)]
            count = len(positional)
            raise TileError(
                f"{name}() takes {count} positional argument{'s' if count != 1 else ''}, "
                f"but {len(node.args)} were given",
                _expr_loc(extra),
                hint=extra_hint or f"{name}({signature})",
            )
        for param_name, arg in zip(positional, node.args):
            bound[param_name] = arg
        for keyword in node.keywords:
            if keyword.name not in positional and keyword.name not in keyword_only:
                raise TileError(
                    f"{name}() has no argument '{keyword.name}'",
                    keyword.loc,
                    hint=f"{name}({signature})",
                )
            if keyword.name in bound:
                raise TileError(f"{name}() got two values for '{keyword.name}'", keyword.loc)
            bound[keyword.name] = keyword.value
        for param_name in positional[:required]:
            if param_name not in bound:
                raise TileError(
                    f"{name}() needs the argument '{param_name}'",
                    node.loc,
                    hint=f"{name}({signature})",
                )
        return bound

    def _to_call(self, node: ast.Call, func: ast.Attribute) -> Expr:
        args = self._arguments(node, "to", ("dtype",))
        dtype = self._dtype_argument(args["dtype"])
        operand = self._expr(func.value)
        if operand.type.dtype is dtype:
            return operand
        if isinstance(operand, Constant):
            return Constant(
                value=_convert_constant(operand.value, dtype, func.loc, True, runs=True),
                type=operand.type.with_dtype(dtype),
                loc=func.loc,
            )
        return Cast(operand=operand, type=operand.type.with_dtype(dtype), loc=func.loc)

    def _dtype_argument(self, node: ast.Expr) -> DType:
        if isinstance(node, ast.Name) and node.id in DTYPES:
            return DTYPES[node.id]
        raise TileError("expected a dtype", _expr_loc(node), hint=f"dtypes are: {_DTYPE_LIST}")

    def _math_call(self, node: ast.Call) -> Expr:
        name = node.func.id  # type: ignore[union-attr]
        args = self._arguments(node, name, ("x",))
        operand = self._expr(args["x"])
        dtype = operand.type.dtype
        if name == "abs" and dtype is DType.I1:
            raise TileError("abs() needs a number, not an i1 value", node.loc)
        if _is_weak(operand):
            assert isinstance(operand, Constant)
            if name == "abs":
                return _checked_constant(abs(operand.value), operand, node.loc)
            value = _fold_math(name, operand.value)
            return Constant(value=value, type=TileType(DType.F32), weak=True, loc=node.loc)
        if name != "abs" and not dtype.is_float:
            operand = self._convert(operand, DType.F32, node.loc)
        return Math(fn=name, operand=operand, type=operand.type, loc=node.loc)

    def _min_max_call(self, node: ast.Call) -> Expr:
        name = node.func.id  # type: ignore[union-attr]
        args = self._arguments(node, name, ("a", "b"))
        return self._binary(
            name, self._expr(args["a"]), self._expr(args["b"]), node.loc, f"{name}()"
        )

    def _where_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "where", ("cond", "x", "y"))
        cond = self._expr(args["cond"])
        on_true = self._expr(args["x"])
        on_false = self._expr(args["y"])
        if cond.type.dtype is not DType.I1:
            raise TileError(
                f"where() needs an i1 condition, not {cond.type.dtype}",
                cond.loc,
                hint="compare to make a condition, e.g. where(x > 0, x, 0.0)",
            )
        dtype = _promote(on_true, on_false)
        shape = _broadcast_shapes(cond.type.shape, on_true.type.shape)
        shape = _broadcast_shapes(shape, on_false.type.shape) if shape is not None else None
        if shape is None:
            raise TileError(
                f"cannot broadcast {cond.type}, {on_true.type} and {on_false.type} in where()",
                node.loc,
                hint="sizes must match or be 1, comparing shapes from the right",
            )
        return Select(
            cond=_broadcast_to(cond, shape),
            on_true=_broadcast_to(self._convert(on_true, dtype, node.loc), shape),
            on_false=_broadcast_to(self._convert(on_false, dtype, node.loc), shape),
            type=TileType(dtype, shape),
            loc=node.loc,
        )

    def _reduce_call(self, node: ast.Call) -> Expr:
        kind = node.func.id  # type: ignore[union-attr]
        hint = None
        if kind in ("max", "min") and len(node.args) == 2:
            hint = (
                f"{kind}() reduces one tile; for the element-wise {kind}imum of two values "
                f"use {kind}imum(a, b)"
            )
        elif len(node.args) > 1:
            hint = f"pass the axis by name: {kind}(x, axis=...)"
        args = self._arguments(node, kind, ("x",), ("axis", "keepdims"), extra_hint=hint)
        operand = self._expr(args["x"])
        rank = operand.type.rank
        if rank == 0:
            raise TileError(f"{kind}() needs a tile, not the scalar {operand.type}", operand.loc)
        axis_node = args.get("axis")
        if axis_node is None or isinstance(axis_node, ast.NoneLit):
            axes = tuple(range(rank))
        else:
            axis = _literal_int(axis_node)
            if axis is None:
                raise TileError("axis must be an integer constant (or None)", _expr_loc(axis_node))
            if not -rank <= axis < rank:
                raise TileError(
                    f"axis {axis} is out of range for the {rank}-D tile {operand.type}",
                    _expr_loc(axis_node),
                    hint="axes count from 0; -1 is the last",
                )
            axes = (axis % rank,)
        keepdims = False
        keep_node = args.get("keepdims")
        if keep_node is not None:
            if not isinstance(keep_node, ast.BoolLit):
                raise TileError("keepdims must be True or False", _expr_loc(keep_node))
            keepdims = keep_node.value
        dtype = operand.type.dtype
        if kind == "sum" and not dtype.is_float and dtype.bits < 32:
            dtype = DType.I32  # summing narrow integers (or i1 flags) would overflow
        elif kind == "mean" and not dtype.is_float:
            dtype = DType.F32
        operand = self._convert(operand, dtype, node.loc)
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(operand.type.shape))
        else:
            shape = tuple(d for i, d in enumerate(operand.type.shape) if i not in axes)
        extents = tuple(self._extent(operand.type.shape[a]) for a in axes)
        return Reduce(
            kind=kind,
            operand=operand,
            axes=axes,
            keepdims=keepdims,
            extents=extents,
            type=TileType(dtype, shape),
            loc=node.loc,
        )

    def _extent(self, size: Dim) -> AxisExtent | None:
        if isinstance(size, int):
            return None
        dim = self.dims_by_name[size[1:]]
        return AxisExtent(dim=dim, var=self.tiled_by.get(dim.name))

    def _dot_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "dot", ("a", "b"))
        return self._dot(self._expr(args["a"]), self._expr(args["b"]), node.loc)

    def _dot(self, lhs: Expr, rhs: Expr, loc: Location) -> Expr:
        for side, operand in (("left", lhs), ("right", rhs)):
            if operand.type.rank != 2:
                hint = (
                    "add an axis with x[None, :] or x[:, None]" if operand.type.rank == 1 else None
                )
                raise TileError(
                    f"'@' needs 2-D tiles; the {side} operand is {operand.type}", loc, hint=hint
                )
        if lhs.type.dtype is not rhs.type.dtype:
            raise TileError(
                f"'@' operands must have the same dtype, not {lhs.type.dtype} and {rhs.type.dtype}",
                loc,
                hint=f"convert one side, e.g. .to({lhs.type.dtype})",
            )
        dtype = lhs.type.dtype
        result = _DOT_RESULTS.get(dtype)
        if result is None:
            raise TileError(
                f"'@' does not support {dtype} tiles",
                loc,
                hint="'@' takes f8e4m3, f8e5m2, f16, bf16, f32, f64 or i8 tiles",
            )
        (m, k), (k2, n) = lhs.type.shape, rhs.type.shape
        if k != k2:
            raise TileError(
                f"'@' inner sizes do not match: {lhs.type} @ {rhs.type}",
                loc,
                hint="the left tile's columns must match the right tile's rows; "
                "transpose with .T if needed",
            )
        return Dot(
            lhs=lhs,
            rhs=rhs,
            contraction=self._extent(k),
            type=TileType(result, (m, n)),
            loc=loc,
        )

    def _shape_argument(self, node: ast.Expr) -> tuple[Dim, ...]:
        if not isinstance(node, (ast.ListExpr, ast.TupleExpr)):
            raise TileError(
                "a shape is a list of sizes", _expr_loc(node), hint="e.g. [tm, tn] or [tm, 1]"
            )
        shape: list[Dim] = []
        for entry in node.elts:
            if isinstance(entry, ast.IntLit):
                if entry.value <= 0:
                    raise TileError("a tile size must be positive", entry.loc)
                shape.append(entry.value)
                continue
            if isinstance(entry, ast.Name):
                var = self.loop_vars.get(entry.id)
                if var is not None:
                    if var.element:
                        raise TileError(
                            f"'{entry.id}' runs over {var.dim} one element at a time; "
                            "it has no size in a tile",
                            entry.loc,
                            hint="use 1 for an axis of one element",
                        )
                    shape.append(var.size_symbol)
                    continue
                dim = self.dims.get(entry.id)
                if dim is not None:
                    shape.append(self._whole_dim_size(dim, entry.loc))
                    continue
            raise TileError(
                "a shape entry is a loop variable, a dimension name or a positive integer",
                _expr_loc(entry),
            )
        return tuple(shape)

    def _whole_dim_size(self, dim: Dimension, loc: Location) -> Dim:
        """The tile size of a whole dimension named in a shape (marks the dimension whole)."""
        self._use_whole(dim, loc)
        return dim.tile_symbol

    def _zeros_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "zeros", ("shape", "dtype"), required=1)
        shape = self._shape_argument(args["shape"])
        dtype = self._dtype_argument(args["dtype"]) if "dtype" in args else DType.F32
        zero = Constant(
            value=_convert_constant(0, dtype, node.loc, False), type=TileType(dtype), loc=node.loc
        )
        return _full(zero, shape, node.loc)

    def _full_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "full", ("shape", "value", "dtype"), required=2)
        shape = self._shape_argument(args["shape"])
        value = self._expr(args["value"])
        if not value.type.is_scalar:
            raise TileError(
                f"full() fills with a scalar, not a tile ({value.type})",
                value.loc,
                hint="broadcast a tile with arithmetic instead, e.g. zeros([...]) + x",
            )
        dtype = self._dtype_argument(args["dtype"]) if "dtype" in args else value.type.dtype
        if _is_weak(value) and KIND_ORDER[value.type.dtype.kind] > KIND_ORDER[dtype.kind]:
            raise TileError(
                f"cannot fill a tile of {dtype} with {value.value}",  # type: ignore[union-attr]
                value.loc,
            )
        if isinstance(value, Constant):
            value = Constant(
                value=_convert_constant(value.value, dtype, value.loc, explicit=True),
                type=TileType(dtype),
                loc=value.loc,
            )
        elif value.type.dtype is not dtype:
            value = Cast(operand=value, type=TileType(dtype), loc=value.loc)
        return _full(value, shape, node.loc)

    def _arange_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "arange", ("n",))
        n = args["n"]
        if not isinstance(n, ast.IntLit) or n.value <= 0:
            raise TileError(
                "arange() needs a positive integer constant",
                _expr_loc(n),
                hint="for the indices of a tile's elements, use offsets(t)",
            )
        return Iota(type=TileType(DType.I32, (n.value,)), loc=node.loc)

    def _offsets_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "offsets", ("t",))
        arg = args["t"]
        if isinstance(arg, ast.Name):
            var = self.loop_vars.get(arg.id)
            if var is not None:
                if var.element:
                    raise TileError(
                        f"'{arg.id}' is a single index: use it directly",
                        arg.loc,
                        hint=f"offsets() is for tiles; '{arg.id}' itself is the index",
                    )
                shape = (var.size_symbol,)
                start = LoopIndex(var=var, type=TileType(DType.I32), loc=arg.loc)
                iota = Iota(type=TileType(DType.I32, shape), loc=node.loc)
                return Binary(
                    op="add",
                    lhs=_broadcast_to(start, shape),
                    rhs=iota,
                    type=TileType(DType.I32, shape),
                    loc=node.loc,
                )
            dim = self.dims.get(arg.id)
            if dim is not None:
                shape = (self._whole_dim_size(dim, arg.loc),)
                return Iota(type=TileType(DType.I32, shape), loc=node.loc)
        raise TileError(
            "offsets() takes a loop variable or a dimension name",
            _expr_loc(arg),
            hint="e.g. offsets(tm)",
        )

    def _tile_bound_call(self, node: ast.Call) -> Expr:
        name = node.func.id
        args = self._arguments(node, name, ("t",))
        arg = args["t"]
        var = self.loop_vars.get(arg.id) if isinstance(arg, ast.Name) else None
        if var is None or var.element:
            raise TileError(
                f"{name}() takes the variable of a tiles() loop",
                _expr_loc(arg),
                hint="e.g. tile_start(tm); an element variable is its own index",
            )
        # Where the tile starts, or just past its last lane: the same for the whole block, so
        # it may bound a range() loop or decide an if (offsets(t) is a tile, and a reduction
        # of it is not uniform).
        return LoopIndex(var=var, type=TileType(DType.I32), end=name == "tile_end", loc=node.loc)

    def _transpose_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "transpose", ("x",))
        return self._transpose(self._expr(args["x"]), node.loc)


_DOT_RESULTS = {  # f8 products are exact in f32, as f16's are
    DType.F8E4M3: DType.F32,
    DType.F8E5M2: DType.F32,
    DType.F16: DType.F32,
    DType.BF16: DType.F32,
    DType.F32: DType.F32,
    DType.F64: DType.F64,
    DType.I8: DType.I32,
}
