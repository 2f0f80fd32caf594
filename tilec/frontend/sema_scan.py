"""Builtin calls for scans and arg-reductions: `cumsum`, `cumprod`, `cummax`, `cummin`,
`argmax`, `argmin`, `topk`, `topk_indices` (docs/language.md, "Scans and arg-reductions").

Each rule takes the checker (`tilec.frontend.sema._KernelChecker`) and the call; they are
declared in the registry of builtins, `tilec.frontend.builtins`.

`topk` is two builtins, `topk(x, k, axis)` for the values and `topk_indices(x, k, axis)` for
their positions, because the language binds one name per assignment (tuple unpacking is not
supported, so that loop-carried values stay explicit): both calls become one `tile.topk`
after CSE when they take the same tile."""

from __future__ import annotations

from typing import Any

from tilec.diagnostics import TileError
from tilec.dialects.scan import MAX_TOPK
from tilec.frontend import syntax as ast
from tilec.frontend.checked import ArgReduce, DType, Expr, Scan, TileType, TopK
from tilec.frontend.sema_common import _expr_loc, _literal_int

__all__ = ["ARG_REDUCTIONS", "SCANS", "arg_reduce_call", "scan_call", "topk_call"]

SCANS = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}
ARG_REDUCTIONS = {"argmax": "max", "argmin": "min"}


def _tile_operand(checker: Any, node: ast.Expr, name: str) -> Expr:
    operand = checker._expr(node)
    if operand.type.rank == 0:
        raise TileError(f"{name}() needs a tile, not the scalar {operand.type}", operand.loc)
    return operand


def _axis(node: ast.Expr | None, operand: Expr, name: str, default: int | None = None) -> int:
    rank = operand.type.rank
    if node is None:
        assert default is not None
        return default % rank
    axis = _literal_int(node)
    if axis is None:
        raise TileError(
            f"{name}() needs the axis as an integer constant",
            _expr_loc(node),
            hint="e.g. axis=1, or axis=-1 for the last",
        )
    if not -rank <= axis < rank:
        raise TileError(
            f"axis {axis} is out of range for the {rank}-D tile {operand.type}",
            _expr_loc(node),
            hint="axes count from 0; -1 is the last",
        )
    return axis % rank


def _no_booleans(operand: Expr, name: str) -> None:
    if operand.type.dtype is DType.I1:
        raise TileError(
            f"{name}() needs numbers, not i1 values",
            operand.loc,
            hint="convert first, e.g. x.to(i32)",
        )


def scan_call(checker: Any, node: ast.Call) -> Expr:
    name = node.func.id  # type: ignore[union-attr]
    kind = SCANS[name]
    args = checker._arguments(node, name, ("x", "axis"))
    operand = _tile_operand(checker, args["x"], name)
    axis = _axis(args["axis"], operand, name)
    dtype = operand.type.dtype
    if kind in ("sum", "prod") and not dtype.is_float and dtype.bits < 32:
        dtype = DType.I32  # as sum(): narrow integers (and i1 flags) would overflow at once
    elif dtype is DType.I1:
        _no_booleans(operand, name)
    # f16/bf16 sums and products run in f32 (as sum() does) and round each element once.
    compute = DType.F32 if kind in ("sum", "prod") and dtype in (DType.F16, DType.BF16) else dtype
    operand = checker._convert(operand, compute, node.loc)
    scan = Scan(
        kind=kind, operand=operand, axis=axis, type=operand.type.with_dtype(compute), loc=node.loc
    )
    return checker._convert(scan, dtype, node.loc)


def arg_reduce_call(checker: Any, node: ast.Call) -> Expr:
    name = node.func.id  # type: ignore[union-attr]
    args = checker._arguments(node, name, ("x", "axis"), ("keepdims",))
    operand = _tile_operand(checker, args["x"], name)
    _no_booleans(operand, name)
    axis = _axis(args["axis"], operand, name)
    keepdims = False
    keep_node = args.get("keepdims")
    if keep_node is not None:
        if not isinstance(keep_node, ast.BoolLit):
            raise TileError("keepdims must be True or False", _expr_loc(keep_node))
        keepdims = keep_node.value
    shape = operand.type.shape
    shape = (*shape[:axis], 1, *shape[axis + 1 :]) if keepdims else shape[:axis] + shape[axis + 1 :]
    return ArgReduce(
        kind=ARG_REDUCTIONS[name],
        operand=operand,
        axis=axis,
        keepdims=keepdims,
        extent=checker._extent(operand.type.shape[axis]),
        type=TileType(DType.I32, shape),
        loc=node.loc,
    )


def topk_call(checker: Any, node: ast.Call) -> Expr:
    name = node.func.id  # type: ignore[union-attr]
    args = checker._arguments(node, name, ("x", "k", "axis"), required=2)
    operand = _tile_operand(checker, args["x"], name)
    _no_booleans(operand, name)
    axis = _axis(args.get("axis"), operand, name, default=-1)
    k_node = args["k"]
    k = _literal_int(k_node)
    if k is None or not 1 <= k <= MAX_TOPK or k & (k - 1):
        raise TileError(
            f"{name}() needs k as a power-of-two integer constant from 1 to {MAX_TOPK}",
            _expr_loc(k_node),
            hint="tiles have power-of-two sizes; take a larger k and ignore the extra entries",
        )
    size = operand.type.shape[axis]
    if isinstance(size, int) and k > size:
        raise TileError(
            f"{name}() of {k} elements, but axis {axis} of {operand.type} has only {size}",
            _expr_loc(k_node),
        )
    shape = operand.type.shape
    shape = (*shape[:axis], k, *shape[axis + 1 :])
    indices = name == "topk_indices"
    return TopK(
        operand=operand,
        k=k,
        axis=axis,
        indices=indices,
        extent=checker._extent(size),
        type=TileType(DType.I32 if indices else operand.type.dtype, shape),
        loc=node.loc,
    )
