"""Atomic builtins: `atomic_add`, `atomic_max`, `atomic_min` (region, value) and `atomic_cas`
(region, compare, value), with `mask=` and `sem=` by name -- their arguments and typing rules,
and the kernel-level rule that a tensor updated atomically is not also read or written plainly.

Each returns the region's elements as they were before the update (a tile of the region's
type); as a statement on its own the old values are dropped (`Effect`) and the lowering uses
`red` rather than `atom`. `value` and `compare` convert to the region's dtype and broadcast to
its shape as a stored value does. The region of `atomic_add`/`max`/`min` may be gathered by
one index tile (`counts[values[tn]]`, `grad_table[ids[tm], td]`; `sema_gather`'s rules): each
lane updates the element its index names, and lanes naming one element all count; the supported dtypes per kind are the IR's
(`tilec.dialects.atomic.RMW_ELEMENTS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from tilec.diagnostics import Location, TileError
from tilec.dialects.atomic import MEMORY_ORDERS, RMW_ELEMENTS
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    DTYPES,
    AccessIndex,
    Assign,
    Atomic,
    DType,
    Effect,
    Expr,
    GridLoop,
    If,
    IndexKind,
    Load,
    RangeLoop,
    SeqLoop,
    Store,
    TensorAccess,
    TensorParam,
)
from tilec.frontend.sema_common import _broadcast_shapes, _broadcast_to, _expr_loc, _shape_text

__all__ = ["ATOMIC_BUILTINS", "atomic_call", "check_atomic_races", "is_atomic_call"]

ATOMIC_BUILTINS = {
    "atomic_add": "add",
    "atomic_max": "max",
    "atomic_min": "min",
    "atomic_cas": "cas",
}

_SUPPORTED: dict[str, tuple[DType, ...]] = {
    kind: tuple(DTYPES[str(t)] for t in types) for kind, types in RMW_ELEMENTS.items()
}


def is_atomic_call(node: ast.Expr) -> bool:
    """Whether `node` is a call of an atomic builtin (a statement of its own is allowed)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ATOMIC_BUILTINS
    )


def atomic_call(checker: Any, node: ast.Call) -> Expr:
    """Check `atomic_*(region, ...)`; `checker` is the kernel checker (`_KernelChecker`)."""
    name = node.func.id  # type: ignore[union-attr]
    kind = ATOMIC_BUILTINS[name]
    values = ("compare", "value") if kind == "cas" else ("value",)
    args = checker._arguments(node, name, ("region", *values), ("mask", "sem"))
    access = _region(checker, name, args["region"])
    dtype = access.type.dtype
    if dtype not in _SUPPORTED[kind]:
        supported = ", ".join(d.value for d in _SUPPORTED[kind])
        raise TileError(
            f"{name}() does not support {dtype} tensors ('{access.tensor.name}' is {dtype})",
            access.loc,
            hint=f"{name}() takes {supported}"
            + ("; on sm_80, bf16 needs sm_90" if kind == "add" else ""),
        )
    converted = {}
    for argument in values:
        value = checker._expr(args[argument])
        shape = access.type.shape
        if _broadcast_shapes(value.type.shape, shape) != shape:
            raise TileError(
                f"the {argument} of {name}() is {value.type}, which does not broadcast to the "
                f"region {access.tensor.name}[...] of shape {_shape_text(shape)}",
                value.loc,
                hint="give one value per element of the region (or a scalar); reduce first, "
                "e.g. sum(x, axis=0)",
            )
        converted[argument] = checker._convert_for_store(value, access)
    mask = None
    if "mask" in args:
        mask = checker._expr(args["mask"])
        shape = access.type.shape
        if mask.type.dtype is not DType.I1 or _broadcast_shapes(mask.type.shape, shape) != shape:
            raise TileError(
                f"the mask of {name}() must be an i1 value that broadcasts to the region's "
                f"shape, not {mask.type}",
                mask.loc,
                hint="compare to make one, e.g. offsets(tn) < N",
            )
        mask = _broadcast_to(mask, shape)
    sem = "relaxed"
    if "sem" in args:
        sem = _memory_order(name, args["sem"])
    return Atomic(
        kind=kind,
        access=access,
        value=converted["value"],
        compare=converted.get("compare"),
        mask=mask,
        sem=sem,
        type=access.type,
        loc=node.loc,
    )


def _region(checker: Any, name: str, node: ast.Expr) -> TensorAccess:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        param = checker.params.get(node.value.id)
        if isinstance(param, TensorParam):
            access = checker._access(param, node.indices, node.value.loc)
            for index in access.indices:
                if index.kind is IndexKind.GATHER and name == "atomic_cas":
                    # tile.atomic_scatter has add, max and min only.
                    raise TileError(
                        f"{name}() does not take a gathered region (an index tile into "
                        f"'{param.name}')",
                        index.loc,
                        hint="atomic_add, atomic_max and atomic_min take one "
                        "(counts[values[tn]]); a compare-and-swap needs plain offsets",
                    )
            return access
    raise TileError(
        f"the first argument of {name}() must be a region of a tensor argument",
        _expr_loc(node),
        hint=f"e.g. {name}(out[tm, :], v): the elements it updates",
    )


def _memory_order(name: str, node: ast.Expr) -> str:
    if isinstance(node, ast.StrLit) and node.value in MEMORY_ORDERS:
        return node.value
    orders = ", ".join(f'"{o}"' for o in MEMORY_ORDERS)
    raise TileError(
        f"sem= of {name}() must be a memory order", _expr_loc(node), hint=f"one of {orders}"
    )


def check_atomic_races(grid: GridLoop) -> None:
    """A tensor that an atomic updates may not also be loaded or stored plainly in the kernel:
    other blocks update it at any time, so what a plain access sees or overwrites depends on
    the order blocks run in (a race). The error is at the plain access."""
    atomics: dict[str, Location] = {}
    plain: list[tuple[str, str, Location]] = []
    for node in _walk(grid.body):
        if isinstance(node, Atomic):
            atomics.setdefault(node.access.tensor.name, node.loc)
        elif isinstance(node, Load):
            plain.append((node.access.tensor.name, "reads", node.access.loc))
        elif isinstance(node, Store):
            plain.append((node.access.tensor.name, "writes", node.access.loc))
    for tensor, verb, loc in plain:
        if tensor in atomics:
            raise TileError(
                f"this {verb} '{tensor}', which an atomic of the same kernel updates: other "
                "blocks may update it at any time (a race)",
                loc,
                hint="use the old values the atomic returns; initialise the tensor before the "
                "launch",
                notes=(("updated atomically here", atomics[tensor]),),
            )


_NODES = (Expr, Assign, Store, Effect, SeqLoop, RangeLoop, If, TensorAccess, AccessIndex)
_NOT_CHILDREN = frozenset(["type", "loc", "tensor", "var", "dim", "carried"])


def _walk(node: Any) -> Iterator[Any]:
    """Every node of a checked statement list (statements, expressions, accesses)."""
    if isinstance(node, (tuple, list)):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, _NODES):
        yield node
        for f in fields(node):
            if f.name not in _NOT_CHILDREN:
                yield from _walk(getattr(node, f.name))
