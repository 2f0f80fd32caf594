"""A readable dump of a checked program (`tilec.frontend.checked`): for tests, debugging and
`--emit` dumps."""

from __future__ import annotations

from tilec.frontend.checked import (
    ArgReduce,
    Assign,
    Atomic,
    Binary,
    Broadcast,
    Cast,
    Constant,
    DimSize,
    Dot,
    Effect,
    ExpandDims,
    Expr,
    Full,
    If,
    IndexKind,
    Iota,
    Kernel,
    Load,
    LoopIndex,
    LoopVar,
    Math,
    ParamRef,
    Philox,
    Program,
    RangeIndex,
    RangeLoop,
    Reduce,
    Scan,
    Select,
    Stmt,
    Store,
    TensorAccess,
    TensorParam,
    TopK,
    Transpose,
    Unary,
    VarRef,
)

__all__ = ["format_expr", "format_kernel", "format_program"]


def format_program(program: Program) -> str:
    """The checked program as indented text (for tests, debugging and `--emit` dumps)."""
    return "\n".join(format_kernel(k) for k in program.kernels)


def format_kernel(kernel: Kernel) -> str:
    params = []
    for p in kernel.params:
        params.append(f"{p.name}: {p}" if isinstance(p, TensorParam) else f"{p.name}: {p.dtype}")
    lines = [f"kernel {kernel.name}({', '.join(params)})"]
    dims = []
    for d in kernel.dims:
        notes = [d.tile_symbol]
        if d.pinned is not None:
            notes.append(f"={d.pinned}")
        if d.whole:
            notes.append(" whole")
        dims.append(f"{d.name} ({''.join(notes)})")
    lines.append(f"  dims {', '.join(dims)}")
    options = kernel.options
    if options.warps is not None or options.stages is not None or options.split is not None:
        text = f"  options warps={options.warps} stages={options.stages}"
        lines.append(text + (f" split={options.split}" if options.split is not None else ""))
    grid = ", ".join(_format_var(v) for v in kernel.grid.vars)
    lines.append(f"  grid {grid}")
    _format_body(kernel.grid.body, 2, lines)
    return "\n".join(lines)


def _format_var(var: LoopVar) -> str:
    kind = "element" if var.element else var.size_symbol
    axis = f" axis {var.grid_axis}" if var.grid_axis is not None else ""
    return f"{var.name} in {var.dim.name}[{kind}]{axis}"


def _format_body(body: tuple[Stmt, ...], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    for stmt in body:
        if isinstance(stmt, Assign):
            lines.append(f"{pad}{stmt.name} = {format_expr(stmt.value)}")
        elif isinstance(stmt, Store):
            lines.append(f"{pad}store {_format_access(stmt.access)} = {format_expr(stmt.value)}")
        elif isinstance(stmt, Effect):
            lines.append(f"{pad}{format_expr(stmt.value)}")
        elif isinstance(stmt, RangeLoop):
            carried = ", ".join(f"{c.name}: {c.type}" for c in stmt.carried)
            bounds = f"{format_expr(stmt.start)}, {format_expr(stmt.stop)}, {stmt.step}"
            lines.append(
                f"{pad}for {stmt.var.name}:{stmt.var.dtype} in range({bounds})"
                + (f" carry {carried}" if carried else "")
            )
            _format_body(stmt.body, depth + 1, lines)
        elif isinstance(stmt, If):
            carried = ", ".join(f"{c.name}: {c.type}" for c in stmt.carried)
            lines.append(
                f"{pad}if {format_expr(stmt.cond)}" + (f" carry {carried}" if carried else "")
            )
            _format_body(stmt.then, depth + 1, lines)
            if stmt.otherwise:
                lines.append(f"{pad}else")
                _format_body(stmt.otherwise, depth + 1, lines)
        else:
            carried = ", ".join(f"{c.name}: {c.type}" for c in stmt.carried)
            lines.append(
                f"{pad}for {_format_var(stmt.var)}" + (f" carry {carried}" if carried else "")
            )
            _format_body(stmt.body, depth + 1, lines)


def _format_access(access: TensorAccess) -> str:
    parts = []
    for index in access.indices:
        if index.kind is IndexKind.TILE:
            parts.append(index.var.name)  # type: ignore[union-attr]
        elif index.kind is IndexKind.WHOLE:
            parts.append(":")
        else:
            parts.append(format_expr(index.value))  # type: ignore[arg-type]
    mask = " masked" if access.masked else ""
    return f"{access.tensor.name}[{', '.join(parts)}]{mask}"


def format_expr(expr: Expr) -> str:
    """`op:type(operands)`; leaves: `%name`, `$argument`, constants, `load a[...]`."""
    t = expr.type
    if isinstance(expr, Constant):
        return f"{expr.value!r}:{t}" + ("~" if expr.weak else "")
    if isinstance(expr, VarRef):
        return f"%{expr.name}:{t}"
    if isinstance(expr, ParamRef):
        return f"${expr.param.name}:{t}"
    if isinstance(expr, DimSize):
        return f"dim({expr.dim.name}):{t}"
    if isinstance(expr, LoopIndex):
        return f"index({expr.var.name}):{t}"
    if isinstance(expr, RangeIndex):
        return f"%{expr.var.name}:{t}"
    if isinstance(expr, Load):
        return f"load:{t} {_format_access(expr.access)}"
    if isinstance(expr, Iota):
        return f"iota:{t}"
    if isinstance(expr, Binary):
        return f"{expr.op}:{t}({format_expr(expr.lhs)}, {format_expr(expr.rhs)})"
    if isinstance(expr, Unary):
        return f"{expr.op}:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Math):
        return f"{expr.fn}:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Philox):
        operands = f"{format_expr(expr.seed)}, {format_expr(expr.offsets)}"
        return f"philox[xor {expr.xor}]:{t}({operands})"
    if isinstance(expr, Select):
        operands = (expr.cond, expr.on_true, expr.on_false)
        return f"where:{t}({', '.join(format_expr(e) for e in operands)})"
    if isinstance(expr, Reduce):
        keep = ", keepdims" if expr.keepdims else ""
        axes = ", ".join(map(str, expr.axes))
        return f"{expr.kind}[{axes}{keep}]:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Scan):
        return f"scan_{expr.kind}[{expr.axis}]:{t}({format_expr(expr.operand)})"
    if isinstance(expr, ArgReduce):
        keep = ", keepdims" if expr.keepdims else ""
        return f"arg{expr.kind}[{expr.axis}{keep}]:{t}({format_expr(expr.operand)})"
    if isinstance(expr, TopK):
        part = "topk_indices" if expr.indices else "topk"
        return f"{part}[k={expr.k}, {expr.axis}]:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Dot):
        return f"dot:{t}({format_expr(expr.lhs)}, {format_expr(expr.rhs)})"
    if isinstance(expr, Full):
        return f"full:{t}({format_expr(expr.value)})"
    if isinstance(expr, Cast):
        return f"cast:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Broadcast):
        return f"broadcast:{t}({format_expr(expr.operand)})"
    if isinstance(expr, ExpandDims):
        return f"expand_dims{list(expr.axes)}:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Transpose):
        return f"transpose:{t}({format_expr(expr.operand)})"
    if isinstance(expr, Atomic):
        operands = [e for e in (expr.compare, expr.value) if e is not None]
        extra = ([f"mask={format_expr(expr.mask)}"] if expr.mask is not None else []) + (
            [f"sem={expr.sem}"] if expr.sem != "relaxed" else []
        )
        args = ", ".join([_format_access(expr.access), *map(format_expr, operands), *extra])
        return f"atomic_{expr.kind}:{t}({args})"
    raise AssertionError(f"unknown checked expression {expr!r}")  # pragma: no cover
