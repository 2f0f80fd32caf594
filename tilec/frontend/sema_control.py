"""Scalar control flow: `for i in range(...)` loops, `if`/`elif`/`else` statements, and the
scalar conditions `and`, `or` and `not` (docs/language.md, "Scalar control flow").

Both constructs run for the whole block at once, so what decides them (a loop's bounds, a
condition) must be the same for every element the block holds: a *block-uniform* scalar.
This part checks their shapes and dtypes, scopes and the values that flow out of them;
whether a scalar is uniform is `tilec.frontend.sema_uniform`'s rule, checked over the whole
kernel once its body is typed.

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

from tilec.diagnostics import TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    Carried,
    Constant,
    DType,
    Expr,
    If,
    RangeLoop,
    RangeVar,
    Stmt,
    TileType,
    Unary,
)
from tilec.frontend.sema_common import _Binding, _checked_constant, _expr_loc, _LoopFrame

_ELEMENTWISE = {"and": "&", "or": "|", "not": "~"}


class ControlChecks:
    """Scalar control flow: the checker's methods for it."""

    # ---------------------------------------------------------------- range() loops

    def _range_loop(self, node: ast.For) -> RangeLoop:
        call = node.iter
        assert isinstance(call, ast.Call)
        if call.keywords:
            raise TileError(
                f"range() has no argument '{call.keywords[0].name}'",
                call.keywords[0].loc,
                hint="range(stop), range(start, stop) or range(start, stop, step)",
            )
        if not 1 <= len(call.args) <= 3:
            raise TileError(
                f"range() takes 1 to 3 arguments, not {len(call.args)}",
                call.loc,
                hint="range(stop), range(start, stop) or range(start, stop, step)",
            )
        if len(node.targets) != 1:
            raise TileError(
                f"range() gives one loop variable, but {len(node.targets)} are given",
                node.targets[0].loc,
                hint="write 'for i in range(n):'; nest loops for more variables",
            )
        bounds = [self._range_bound(arg) for arg in call.args[:2]]
        if len(bounds) == 1:
            start = Constant(value=0, type=TileType(DType.I32), weak=True, loc=call.loc)
            (stop,) = bounds
        else:
            start, stop = bounds
        step = self._range_step(call.args[2]) if len(call.args) == 3 else 1
        wide = any(b.type.dtype is DType.I64 and not _weak(b) for b in (start, stop))
        dtype = DType.I64 if wide else DType.I32
        start = self._convert(start, dtype, start.loc)
        stop = self._convert(stop, dtype, stop.loc)
        target = node.targets[0]
        self._check_loop_var_name(target)
        var = RangeVar(name=target.id, dtype=dtype, loc=target.loc)
        self.scopes.append({})
        frame = _LoopFrame()
        self.frames.append(frame)
        self.range_vars[var.name] = var
        body: tuple[Stmt, ...] = tuple(self._block(node.body))
        self.frames.pop()
        del self.range_vars[var.name]
        for name in self.scopes.pop():
            self.left_scope[name] = node.loc
        self.left_scope[var.name] = node.loc
        carried = tuple(Carried(name, t) for name, t in frame.carried.items())
        return RangeLoop(
            var=var,
            start=start,
            stop=stop,
            step=step,
            body=body,
            carried=carried,
            loc=node.loc,
        )

    def _range_bound(self, arg: ast.Expr) -> Expr:
        if isinstance(arg, ast.Name) and arg.id in self.loop_vars:
            var = self.loop_vars[arg.id]
            if not var.element:
                raise TileError(
                    f"range() of a tile: '{arg.id}' is a tile of {var.dim}, not a number",
                    arg.loc,
                    hint=f"loop over the tiles of a dimension with 'for t in tiles({var.dim}):'",
                )
        value = self._expr(arg)
        if not value.type.is_scalar:
            raise TileError(
                f"range() takes integer scalars, not a tile ({value.type})",
                _expr_loc(arg),
                hint="the whole block runs a range() loop the same number of times: its "
                "bounds must be block-uniform scalars; loop over tiles with tiles(N)",
            )
        if not value.type.dtype.is_int:
            raise TileError(
                f"range() takes integers, not {value.type.dtype}",
                _expr_loc(arg),
                hint="convert with .to(i32)",
            )
        return value

    def _range_step(self, arg: ast.Expr) -> int:
        value = self._expr(arg)
        if not (isinstance(value, Constant) and value.type.dtype.is_int):
            raise TileError(
                "the step of range() must be an integer constant",
                _expr_loc(arg),
                hint="the direction of a loop is fixed when it compiles; e.g. range(a, b, 2)",
            )
        if value.value == 0:
            raise TileError(
                "the step of range() must not be zero",
                _expr_loc(arg),
                hint="a positive step counts up, a negative one down",
            )
        return int(value.value)

    # ---------------------------------------------------------------- if statements

    def _if(self, node: ast.If) -> If:
        cond = self._expr(node.test)
        if not cond.type.is_scalar:
            raise TileError(
                f"the condition of an 'if' must be a scalar, not a tile ({cond.type})",
                _expr_loc(node.test),
                hint="an 'if' decides for the whole block; choose element by element with "
                "where(cond, a, b)",
            )
        if cond.type.dtype is not DType.I1:
            raise TileError(
                f"the condition of an 'if' must be i1 (a comparison), not {cond.type.dtype}",
                _expr_loc(node.test),
                hint="compare it, e.g. 'if n != 0:'",
            )
        then, then_frame, then_scope = self._branch(node.body)
        otherwise, else_frame, else_scope = self._branch(node.orelse)
        carried = dict(then_frame.carried)
        for name, t in else_frame.carried.items():
            carried.setdefault(name, t)
        for name, binding in then_scope.items():
            other = else_scope.get(name)
            if other is not None and other.type == binding.type:
                carried[name] = binding.type
                self.scopes[-1][name] = _Binding(binding.type, binding.loc)
                self.left_scope.pop(name, None)
                self.left_why.pop(name, None)
                continue
            if other is not None:
                why = (
                    f"'{name}' is {binding.type} after one branch of the 'if' on line "
                    f"{node.loc.line} and {other.type} after the other",
                    "give it one type in both branches (convert with .to(...)) to use it "
                    "after the 'if'",
                )
            else:
                why = (
                    f"'{name}' is not assigned on every path through the 'if' on line "
                    f"{node.loc.line}",
                    "assign it before the 'if', or in every branch, to use it after",
                )
            self.left_why[name] = why
        for name in else_scope:
            if name not in then_scope:
                self.left_why[name] = (
                    f"'{name}' is not assigned on every path through the 'if' on line "
                    f"{node.loc.line}",
                    "assign it before the 'if', or in every branch, to use it after",
                )
        return If(
            cond=cond,
            then=then,
            otherwise=otherwise,
            carried=tuple(Carried(name, t) for name, t in carried.items()),
            loc=node.loc,
        )

    def _branch(
        self, stmts: tuple[ast.Stmt, ...]
    ) -> tuple[tuple[Stmt, ...], _LoopFrame, dict[str, _Binding]]:
        self.scopes.append({})
        frame = _LoopFrame(construct="'if'")
        self.frames.append(frame)
        body = tuple(self._block(stmts))
        self.frames.pop()
        scope = self.scopes.pop()
        return body, frame, scope

    # ---------------------------------------------------------------- and, or, not

    def _bool_op(self, node: ast.BoolOp) -> Expr:
        operands = [self._expr(node.left)]
        if node.right is not None:
            operands.append(self._expr(node.right))
        for value in operands:
            if not value.type.is_scalar:
                raise TileError(
                    f"'{node.op}' takes scalar conditions, not a tile ({value.type})",
                    node.loc,
                    hint=f"use '{_ELEMENTWISE[node.op]}' for the element-wise {node.op} of "
                    "i1 tiles",
                )
            if value.type.dtype is not DType.I1:
                raise TileError(
                    f"'{node.op}' takes i1 values (comparisons), not {value.type.dtype}",
                    node.loc,
                    hint="compare first, e.g. 'n > 0'",
                )
        if node.op == "not":
            (value,) = operands
            if isinstance(value, Constant):
                return _checked_constant(not value.value, value, node.loc)
            return Unary(op="not", operand=value, type=value.type, loc=node.loc)
        return self._binary(node.op, operands[0], operands[1], node.loc, f"'{node.op}'")


def _weak(value: Expr) -> bool:
    return isinstance(value, Constant) and value.weak
