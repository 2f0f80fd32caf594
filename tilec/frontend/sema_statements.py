"""The body: the grid loop and sequential `tiles()` loops (their variables, carried names,
scopes), statements (assignments, stores) and tensor accesses (per dimension a tile, the whole
dimension or a scalar index, and the masks that follow).

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    AccessIndex,
    Assign,
    Carried,
    Constant,
    Dimension,
    DType,
    Effect,
    Expr,
    GridLoop,
    IndexKind,
    Load,
    LoopIndex,
    LoopVar,
    ScalarParam,
    SeqLoop,
    Stmt,
    Store,
    TensorAccess,
    TensorParam,
    TileType,
)
from tilec.frontend.sema_atomics import is_atomic_call
from tilec.frontend.sema_common import (
    _MAX_GRID_AXES,
    _Binding,
    _broadcast_shapes,
    _broadcast_to,
    _did_you_mean,
    _expr_loc,
    _is_ellipsis,
    _is_weak,
    _LoopFrame,
    _nested_function,
    _shape_text,
    _unsupported,
)
from tilec.frontend.sema_gather import check_index_tile, gathered_shape


class StatementChecks:
    """The body: the checker's methods for them."""

    # ---------------------------------------------------------------- body structure

    def _split_body(self) -> tuple[str | None, ast.For]:
        body = list(self.definition.body)
        doc = None
        if body and isinstance(body[0], ast.ExprStmt) and isinstance(body[0].value, ast.StrLit):
            doc = body.pop(0).value.value
        grid: ast.For | None = None
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                raise _nested_function(stmt)
            if isinstance(stmt, ast.For) and grid is None:
                grid = stmt
                continue
            if isinstance(stmt, ast.Pass) or _is_ellipsis(stmt):
                continue
            raise TileError(
                "statements outside the grid loop are not supported",
                stmt.loc,
                hint="a kernel's body is one 'for ... in tiles(...):' loop; put this inside it"
                if grid is None
                else "a kernel has one grid loop; nest further tiles() loops inside it",
            )
        if grid is None:
            raise TileError(
                f"kernel '{self.definition.name}' has no grid loop",
                self.definition.name_loc,
                hint="its body must be a loop over tiles, e.g. 'for tm in tiles(M):'",
            )
        return doc, grid

    def _grid_loop(self, node: ast.For) -> GridLoop:
        self.scopes.append({})
        loop_vars = self._loop_header(node, grid=True)
        body = self._block(node.body)
        self._leave_loop(loop_vars, node.loc)
        return GridLoop(vars=tuple(loop_vars), body=tuple(body), loc=node.loc)

    def _seq_loop(self, node: ast.For) -> SeqLoop:
        self.scopes.append({})
        frame = _LoopFrame()
        self.frames.append(frame)
        loop_vars = self._loop_header(node, grid=False)
        body: tuple[Stmt, ...] = tuple(self._block(node.body))
        self.frames.pop()
        self._leave_loop(loop_vars, node.loc)
        carried = tuple(Carried(name, t) for name, t in frame.carried.items())
        # `for tk, tn in tiles(K, N)` is a nest of loops; each level carries the same names.
        loop: SeqLoop | None = None
        for var in reversed(loop_vars):
            loop = SeqLoop(
                var=var, body=body if loop is None else (loop,), carried=carried, loc=node.loc
            )
        assert loop is not None
        return loop

    def _leave_loop(self, loop_vars: list[LoopVar], loc: Location) -> None:
        scope = self.scopes.pop()
        for name in scope:
            self.left_scope[name] = loc
        for var in loop_vars:
            del self.loop_vars[var.name]
            del self.tiled_by[var.dim.name]
            self.left_scope[var.name] = loc

    def _loop_header(self, node: ast.For, grid: bool) -> list[LoopVar]:
        call = node.iter
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "tiles"
        ):
            callee = (
                call.func.id
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                else None
            )
            if callee == "range":
                raise TileError(
                    "the grid loop must run over tiles(...), not range()",
                    _expr_loc(call),
                    hint="the grid is 'for tm in tiles(M):'; a range() loop runs inside it",
                )
            raise TileError(
                "a for-loop must run over tiles(...)",
                _expr_loc(call),
                hint="e.g. 'for tm, tn in tiles(M, N):'",
            )
        if not call.args:
            raise TileError(
                "tiles() needs at least one dimension", call.loc, hint="e.g. tiles(M, N)"
            )
        dims: list[Dimension] = []
        for arg in call.args:
            dim = self._tiles_argument(arg)
            if dim in dims:
                raise TileError(f"dimension {dim} appears twice in tiles()", _expr_loc(arg))
            dims.append(dim)
        for keyword in call.keywords:
            if keyword.name != "tile":
                raise TileError(
                    f"tiles() has no argument '{keyword.name}'",
                    keyword.loc,
                    hint="tiles(dims..., tile={dim: size}) pins tile sizes",
                )
            for dim_name, size, key_loc in self._tile_dict(keyword.value, tuple(dims)):
                self._pin(
                    dim_name,
                    size,
                    key_loc,
                    "a dimension has one tile size per kernel",
                )
        if grid and len(dims) > _MAX_GRID_AXES:
            raise TileError(
                f"the grid has at most {_MAX_GRID_AXES} axes; this tiles() call has {len(dims)}",
                _expr_loc(call.args[_MAX_GRID_AXES]),
                hint="loop over the remaining dimensions with a tiles() loop inside the grid",
            )
        if len(node.targets) != len(dims):
            plural = "s" if len(node.targets) != 1 else ""
            raise TileError(
                f"tiles({', '.join(str(d) for d in dims)}) gives {len(dims)} tile "
                f"{'index' if len(dims) == 1 else 'indices'}, but {len(node.targets)} loop "
                f"variable{plural} {'is' if len(node.targets) == 1 else 'are'} given",
                node.targets[0].loc,
                hint="give one loop variable per dimension: "
                f"'for {', '.join('t' + str(d).lower() for d in dims)} in tiles(...)'",
            )
        loop_vars: list[LoopVar] = []
        for axis, (target, dim) in enumerate(zip(node.targets, dims)):
            self._check_loop_var_name(target)
            if dim.name in self.tiled_by:
                other = self.tiled_by[dim.name]
                raise TileError(
                    f"dimension {dim} is already tiled by '{other.name}'",
                    target.loc,
                    hint="a dimension is tiled by one loop at a time; tile it in sibling "
                    "loops, or give the second use its own dimension name",
                    notes=((f"'{other.name}' is defined here", other.loc),),
                )
            var = LoopVar(
                name=target.id,
                dim=dim,
                element=dim.pinned == 1,
                grid_axis=axis if grid else None,
                loc=target.loc,
            )
            self.loop_vars[var.name] = var
            self.tiled_by[dim.name] = var
            self.tiled_at.setdefault(dim.name, target.loc)
            loop_vars.append(var)
        return loop_vars

    def _tiles_argument(self, arg: ast.Expr) -> Dimension:
        if isinstance(arg, ast.Name):
            dim = self.dims.get(arg.id)
            if dim is not None:
                if dim.name in self.whole_at:
                    raise TileError(
                        f"dimension {dim} cannot be tiled: it is used whole in this kernel",
                        arg.loc,
                        hint="a dimension is either tiled by tiles() or used whole (':')",
                        notes=(("used whole here", self.whole_at[dim.name]),),
                    )
                return dim
            known = ", ".join(str(d) for d in self.dims_by_name.values()) or "none"
            if self._is_known_name(arg.id):
                raise TileError(
                    f"'{arg.id}' is not a dimension",
                    arg.loc,
                    hint=f"tiles() takes dimension names from the argument types: {known}",
                )
            raise TileError(
                f"unknown dimension '{arg.id}'",
                arg.loc,
                hint=_did_you_mean(arg.id, self.dims) or f"the dimensions are: {known}",
            )
        raise TileError(
            "tiles() takes dimension names",
            _expr_loc(arg),
            hint="name the dimension in an argument's type (x: f32[N]) and write tiles(N)",
        )

    def _check_loop_var_name(self, target: ast.Name) -> None:
        name = target.id
        self._check_free_name(name, target.loc, "a loop variable")
        if name in self.params:
            raise TileError(f"loop variable '{name}' hides the argument '{name}'", target.loc)
        if name in self.dims:
            raise TileError(f"loop variable '{name}' hides the dimension '{name}'", target.loc)
        if name in self.loop_vars or name in self.range_vars:
            other = self.loop_vars.get(name) or self.range_vars[name]
            raise TileError(
                f"'{name}' is already a loop variable",
                target.loc,
                notes=((f"'{name}' is defined here", other.loc),),
            )
        if self._binding(name)[0] is not None:
            raise TileError(
                f"loop variable '{name}' hides the local name '{name}'",
                target.loc,
                hint="choose another name for the loop variable",
            )

    # ---------------------------------------------------------------- statements

    def _block(self, stmts: tuple[ast.Stmt, ...]) -> list[Stmt]:
        out: list[Stmt] = []
        for stmt in stmts:
            checked = self._stmt(stmt)
            if checked is not None:
                out.append(checked)
        return out

    def _stmt(self, stmt: ast.Stmt) -> Stmt | None:
        if isinstance(stmt, ast.Assign):
            return self._assign(stmt.target, stmt.value, None, stmt.loc)
        if isinstance(stmt, ast.AugAssign):
            return self._assign(stmt.target, stmt.value, stmt.op, stmt.loc)
        if isinstance(stmt, ast.For):
            call = stmt.iter
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "range"
            ):
                return self._range_loop(stmt)
            return self._seq_loop(stmt)
        if isinstance(stmt, ast.If):
            return self._if(stmt)
        if isinstance(stmt, ast.Pass) or _is_ellipsis(stmt):
            return None
        if isinstance(stmt, ast.ExprStmt):
            value = stmt.value
            if isinstance(value, ast.StrLit):
                raise TileError(
                    "a string here has no effect", stmt.loc, hint="write a '#' comment instead"
                )
            if is_atomic_call(value):  # kept for its effect; the old values are dropped
                return Effect(value=self._expr(value), loc=stmt.loc)
            self._expr(value)
            hint = "assign it to a name, or store it: out[t] = value"
            if isinstance(value, ast.Compare) and value.op == "==":
                hint = "did you mean '=' (a store or an assignment)?"
            raise TileError("the value of this expression is unused", stmt.loc, hint=hint)
        if isinstance(stmt, ast.FunctionDef):
            raise _nested_function(stmt)
        raise AssertionError(f"unknown statement {stmt!r}")  # pragma: no cover

    def _assign(
        self, target: ast.Expr, value_node: ast.Expr, op: str | None, loc: Location
    ) -> Stmt:
        if isinstance(target, ast.Name):
            self._check_assignable(target)
            value = self._expr(value_node)
            if op is not None:
                current = self._name(target)
                value = self._operator(op, current, value, loc)
                if value.type != current.type:
                    raise TileError(
                        f"'{target.id} {op}= ...' would change '{target.id}' from "
                        f"{current.type} to {value.type}",
                        loc,
                        hint=f"write '{target.id} = {target.id} {op} ...' for a new value of "
                        f"the new type, or convert the right side with .to({current.type.dtype})",
                    )
            return self._bind(target, value)
        if isinstance(target, ast.Subscript):
            access = self._store_target(target)
            value = self._expr(value_node)
            if op is not None:
                current = Load(access=access, type=access.type, loc=access.loc)
                value = self._operator(op, current, value, loc)
            value = self._convert_for_store(value, access)
            return Store(access=access, value=value, loc=_expr_loc(target))
        if isinstance(target, ast.TupleExpr):
            raise _unsupported(
                "unpacking assignment (a, b = ...) is",
                target.loc,
                "assign one name per statement",
            )
        if isinstance(target, ast.Attribute):
            raise TileError("cannot assign to an attribute", target.loc)
        raise TileError("cannot assign to this expression", _expr_loc(target))

    def _check_assignable(self, target: ast.Name) -> None:
        name = target.id
        param = self.params.get(name)
        if isinstance(param, ScalarParam):
            raise TileError(
                f"cannot assign to scalar argument '{name}'",
                target.loc,
                hint="arguments are read-only; assign the new value to another name",
            )
        if isinstance(param, TensorParam):
            raise TileError(
                f"cannot rebind tensor argument '{name}'",
                target.loc,
                hint=f"to write into the tensor, store to a region: {name}[...] = value",
            )
        if name in self.dims:
            raise TileError(f"cannot assign to dimension '{name}'", target.loc)
        if name in self.loop_vars:
            raise TileError(f"cannot assign to loop variable '{name}'", target.loc)
        if name in self.range_vars:
            raise TileError(
                f"cannot assign to loop variable '{name}'",
                target.loc,
                hint="range() gives it the next value each iteration; assign to another name",
            )
        self._check_free_name(name, target.loc, "a local value")

    def _bind(self, target: ast.Name, value: Expr) -> Assign:
        name = target.id
        binding, depth = self._binding(name)
        current = len(self.scopes) - 1
        if binding is not None and depth < current:
            construct = self.frames[depth].construct
            value = self._convert_for_carried(name, binding, value, target.loc, construct)
            for frame in self.frames[depth:]:
                frame.carried.setdefault(name, binding.type)
        else:
            constant = None
            if (
                isinstance(value, Constant)
                and value.weak
                and self.assignment_counts.get(name, 0) == 1
            ):
                constant = value
            self.scopes[-1][name] = _Binding(value.type, target.loc, constant)
        self.left_scope.pop(name, None)
        self.left_why.pop(name, None)
        return Assign(name=name, value=value, loc=target.loc)

    def _binding(self, name: str) -> tuple[_Binding | None, int]:
        for depth in range(len(self.scopes) - 1, -1, -1):
            binding = self.scopes[depth].get(name)
            if binding is not None:
                return binding, depth
        return None, -1

    def _convert_for_carried(
        self, name: str, binding: _Binding, value: Expr, loc: Location, construct: str = "loop"
    ) -> Expr:
        wanted = binding.type
        if value.type == wanted:
            return value
        shape_ok = _broadcast_shapes(value.type.shape, wanted.shape) == wanted.shape
        dtype_ok = value.type.dtype is wanted.dtype or _is_weak(value)
        if shape_ok and dtype_ok:
            value = self._convert(value, wanted.dtype, loc)
            return _broadcast_to(value, wanted.shape)
        raise TileError(
            f"'{name}' changes type in the {construct}: it is {wanted} before the "
            f"{construct}, and this assigns {value.type}",
            loc,
            hint=f"a value carried {'around a loop' if construct == 'loop' else 'out of an if'} "
            "keeps its type; convert with "
            f".to({wanted.dtype}) or start it with that type",
            notes=((f"'{name}' is first assigned here", binding.loc),),
        )

    def _store_target(self, target: ast.Subscript) -> TensorAccess:
        base = target.value
        if isinstance(base, ast.Name):
            param = self.params.get(base.id)
            if isinstance(param, TensorParam):
                return self._access(param, target.indices, base.loc)
            if isinstance(param, ScalarParam):
                raise TileError(
                    f"cannot assign to scalar argument '{base.id}'",
                    base.loc,
                    hint="arguments are read-only",
                )
        raise TileError(
            "only tensor arguments can be written with [...]",
            _expr_loc(base),
            hint="assign a whole value to a name instead: x = value",
        )

    def _convert_for_store(self, value: Expr, access: TensorAccess) -> Expr:
        wanted = access.type
        if _broadcast_shapes(value.type.shape, wanted.shape) != wanted.shape:
            raise TileError(
                f"cannot store a value of type {value.type} into "
                f"{access.tensor.name}[...], a region of shape {_shape_text(wanted.shape)}",
                value.loc,
                hint="shapes must be equal, or broadcast to the region's shape",
            )
        source, target = value.type.dtype, wanted.dtype
        if (
            source is not target
            and not _is_weak(value)
            and source.kind != target.kind
            and source is not DType.I1
        ):
            raise TileError(
                f"cannot store {source} values into '{access.tensor.name}' ({target}) implicitly",
                value.loc,
                hint=f"convert explicitly with .to({target})",
            )
        value = self._convert(value, target, value.loc)
        return _broadcast_to(value, wanted.shape)

    # ---------------------------------------------------------------- tensor accesses

    def _access(
        self, tensor: TensorParam, indices: tuple[ast.Expr | ast.Slice, ...], loc: Location
    ) -> TensorAccess:
        if len(indices) != tensor.rank:
            where = _expr_loc(indices[tensor.rank]) if len(indices) > tensor.rank else loc
            plural = "s" if tensor.rank != 1 else ""
            raise TileError(
                f"'{tensor.name}' has {tensor.rank} dimension{plural} ({tensor}), "
                f"but {len(indices)} {'index is' if len(indices) == 1 else 'indices are'} given",
                where,
                hint="give one index per dimension: a tile variable, ':' or an integer",
            )
        checked: list[AccessIndex] = []
        for position, (index, dim) in enumerate(zip(indices, tensor.dims)):
            checked.append(self._access_index(tensor, position, index, dim))
        shape = gathered_shape(tensor, checked, loc)
        for index in checked:
            if index.kind is IndexKind.GATHER:
                index.extent = self._extent(index.size)
        return TensorAccess(
            tensor=tensor,
            indices=tuple(checked),
            type=TileType(tensor.dtype, shape),
            loc=loc,
        )

    def _access_index(
        self,
        tensor: TensorParam,
        position: int,
        index: ast.Expr | ast.Slice,
        dim: Dimension | int,
    ) -> AccessIndex:
        loc = _expr_loc(index)
        if isinstance(index, ast.Slice):
            if index.lower is not None or index.upper is not None or index.step is not None:
                raise _unsupported(
                    "slices with bounds or steps are",
                    loc,
                    "take part of a dimension with a tile variable from tiles(), or the "
                    "whole dimension with ':'",
                )
            if isinstance(dim, int):
                return AccessIndex(kind=IndexKind.WHOLE, dim=dim, size=dim, loc=loc)
            self._use_whole(dim, loc)
            return AccessIndex(
                kind=IndexKind.WHOLE, dim=dim, size=dim.tile_symbol, masked=True, loc=loc
            )
        if isinstance(index, ast.Name) and index.id in self.loop_vars:
            var = self.loop_vars[index.id]
            if var.dim is not dim:
                if isinstance(dim, int):
                    hint = (
                        f"this dimension has the fixed size {dim}: index it with ':' or an integer"
                    )
                else:
                    hint = f"index dimension {dim} with a loop variable of tiles({dim}), or ':'"
                raise TileError(
                    f"loop variable '{var.name}' runs over {var.dim}, but dimension "
                    f"{position} of '{tensor.name}' is {dim}",
                    loc,
                    hint=hint,
                )
            if var.element:
                value = LoopIndex(var=var, type=TileType(DType.I32), loc=loc)
                return AccessIndex(kind=IndexKind.SCALAR, dim=dim, var=var, value=value, loc=loc)
            return AccessIndex(
                kind=IndexKind.TILE,
                dim=dim,
                var=var,
                size=var.size_symbol,
                masked=True,
                loc=loc,
            )
        if isinstance(index, ast.NoneLit):
            raise TileError(
                "None (a new axis) cannot index a tensor",
                loc,
                hint="add the axis to the loaded tile instead: x[t][:, None]",
            )
        if isinstance(index, ast.EllipsisLit):
            raise _unsupported("'...' in an index is", loc, "give one index per dimension")
        value = self._expr(index)
        if not value.type.is_scalar:
            return check_index_tile(tensor, position, value, dim, loc)
        if not value.type.dtype.is_int:
            raise TileError(
                f"an index must be a loop variable, ':', an integer scalar or an integer tile, "
                f"not {value.type}",
                loc,
            )
        if isinstance(value, Constant):
            if value.value < 0:
                raise TileError(
                    "negative indices are not supported",
                    loc,
                    hint="index from the start of the dimension",
                )
            if isinstance(dim, int) and value.value >= dim:
                raise TileError(
                    f"index {value.value} is out of bounds for dimension {position} of "
                    f"'{tensor.name}', of size {dim}",
                    loc,
                )
            if value.weak:
                value = Constant(
                    value=value.value, type=value.type, loc=value.loc
                )  # strong now: it is an index
        return AccessIndex(kind=IndexKind.SCALAR, dim=dim, value=value, loc=loc)

    def _use_whole(self, dim: Dimension, loc: Location) -> None:
        if dim.name in self.tiled_at:
            raise TileError(
                f"dimension {dim} cannot be used whole: it is tiled by a tiles() loop",
                loc,
                hint=f"index it with the loop variable of tiles({dim}) instead of ':'",
                notes=(("tiled here", self.tiled_at[dim.name]),),
            )
        self.whole_at.setdefault(dim.name, loc)
