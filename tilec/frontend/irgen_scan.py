"""IR generation for scans and arg-reductions (`sema.Scan`, `ArgReduce`, `TopK`): part of
`tilec.frontend.irgen`, which calls `scan_expr` for those nodes.

Padding lanes trail the real lanes of an axis, so a scan needs nothing for them. An
arg-reduction or a topk would see them, so they are replaced first by the value that loses to
every real lane: -inf (or the integer minimum) for `argmax` and `topk`, +inf (or the maximum)
for `argmin`. A padding lane can then only tie with a real lane, and ties go to the lower
position, which is the real one."""

from __future__ import annotations

from typing import Any

from tilec.dialects import scan as scan_ops
from tilec.dialects import tile as T
from tilec.frontend.checked import ArgReduce, Expr, Scan, TopK
from tilec.ir.core import Value
from tilec.ir.types import FloatType, TileType, element_type, i32

__all__ = ["scan_expr"]


def _losing_value(kind: str, t: Any) -> int | float:
    """The value every real lane beats (or ties, and then wins by position)."""
    e = element_type(t)
    if isinstance(e, FloatType):
        return float("-inf") if kind == "max" else float("inf")
    low, high = -(1 << (e.width - 1)), (1 << (e.width - 1)) - 1
    return low if kind == "max" else high


def scan_expr(gen: Any, e: Expr, env: dict[str, Value]) -> Value:
    """The IR of a scan, arg-reduction or topk; `gen` is the `irgen` function generator."""
    b = gen.b
    x = gen.expr(e.operand, env)  # type: ignore[attr-defined]
    if isinstance(e, Scan):
        return b.create(scan_ops.ScanOp, kind=e.kind, input=x, axis=e.axis).result
    if isinstance(e, ArgReduce):
        if e.extent is not None:
            x = gen.mask_padding(x, e.axis, e.extent, _losing_value(e.kind, x.type))
        found = b.create(scan_ops.ArgReduceOp, kind=e.kind, input=x, axis=e.axis).result
        if not e.keepdims:
            return found
        if not isinstance(found.type, TileType):  # a 1-D input: the scalar becomes [1]
            return b.create(T.SplatOp, input=found, result_types=[TileType((1,), i32)]).result
        return b.create(T.ExpandDimsOp, input=found, axis=e.axis).result
    assert isinstance(e, TopK)
    if e.extent is not None:
        x = gen.mask_padding(x, e.axis, e.extent, _losing_value("max", x.type))
    op = b.create(scan_ops.TopKOp, input=x, k=e.k, axis=e.axis)
    return op.indices if e.indices else op.values
