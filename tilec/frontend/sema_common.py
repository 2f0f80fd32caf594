"""What every part of the tile checker (`tilec.frontend.sema`) shares: the Python functions the
language explains (its own builtins are `tilec.frontend.builtins`'), the option limits, the checker's scope
records, and the typing helpers (promotion, broadcasting, constant folding) its expression and
builtin rules use."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    DTYPES,
    INT_RANGES,
    KIND_ORDER,
    Broadcast,
    Constant,
    Dim,
    DType,
    Expr,
    Full,
    TileType,
    common_dtype,
)

OPTION_NAMES = ("tile", "warps", "stages", "split")
_WARP_COUNTS = (1, 2, 4, 8, 16, 32)
_MAX_STAGES = 8
_MAX_SPLIT = 65535  # the split axis is grid axis y or z, which CUDA limits to 65535 blocks
_MAX_GRID_AXES = 3


_PYTHON_FUNCTIONS = {
    "range": "range() is only the iterable of a loop: 'for i in range(n):'",
    "float": "convert with x.to(f32)",
    "int": "convert with x.to(i32)",
    "bool": "compare to make an i1 value, e.g. x != 0",
    "len": "a dimension's name is its extent: use N",
    "print": None,
    "pow": "use the '**' operator",
    "round": None,
    "isinstance": None,
    "type": None,
    "getattr": None,
    "setattr": None,
    "super": None,
    "open": None,
    "input": None,
    "enumerate": "loop over a dimension in tiles: 'for t in tiles(N):'",
    "zip": "loop over several dimensions at once: 'for tm, tn in tiles(M, N):'",
    "list": None,
    "tuple": None,
    "dict": None,
}
_DTYPE_LIST = ", ".join(DTYPES)
_OPERATORS = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "//": "floordiv",
    "%": "mod",
    "**": "pow",
    "&": "and",
    "|": "or",
    "^": "xor",
    "<<": "shl",
    ">>": "shr",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "==": "eq",
    "!=": "ne",
}


@dataclass(slots=True)
class _Binding:
    type: TileType
    loc: Location
    constant: Constant | None = None  # a weak literal bound once: uses see the literal


@dataclass(slots=True)
class _LoopFrame:
    """A construct whose body may reassign names from outside it: a loop (its carried
    values) or a branch of an `if` (the `if`'s results)."""

    carried: dict[str, TileType] = field(default_factory=dict)  # in order of first assignment
    construct: str = "loop"  # 'loop' or "'if'", as messages name it


@dataclass(slots=True)
class _Pin:
    size: int
    loc: Location


# ---------------------------------------------------------------------------- helpers


def _expr_loc(node: object) -> Location:
    return node.loc  # type: ignore[attr-defined]


def _is_ellipsis(stmt: ast.Stmt) -> bool:
    return isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.EllipsisLit)


def _is_weak(value: Expr) -> bool:
    return isinstance(value, Constant) and value.weak


def _unsupported(what: str, loc: Location, hint: str | None = None) -> TileError:
    return TileError(f"{what} not supported in tile kernels", loc, hint=hint)


def _refuse_f8(dtype: DType, what: str, loc: Location) -> None:
    """f8 values are only loaded, stored and converted: anything computed from one is an
    error that says to convert first."""
    if dtype.is_f8:
        raise TileError(
            f"{what} does not take {dtype} values",
            loc,
            hint="f8 tiles are only loaded, stored and converted: cast to f32 first, x.to(f32)",
        )


def _nested_function(stmt: ast.FunctionDef) -> TileError:
    return _unsupported(
        "nested functions are", stmt.loc, "define kernels at the top level of the file"
    )


def _did_you_mean(name: str, candidates) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None


def _shape_text(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _literal_int(node: ast.Expr) -> int | None:
    """The value of an integer literal, possibly negated; None for anything else."""
    if isinstance(node, ast.IntLit):
        return node.value
    if isinstance(node, ast.UnaryOp) and node.op == "-" and isinstance(node.operand, ast.IntLit):
        return -node.operand.value
    return None


# The largest tile size a pin may give: far more than a block holds, and small enough that
# sizes, offsets and the compiler's own arrays stay modest (a pin of 2**63 exhausted memory).
MAX_TILE_SIZE = 1 << 16


def _check_tile_size(size: int, loc: Location) -> None:
    if size < 1 or size & (size - 1):
        raise TileError(
            f"a tile size must be a power of two, not {size}",
            loc,
            hint="e.g. 16, 32, 64, 128; 1 iterates the dimension one element at a time",
        )
    if size > MAX_TILE_SIZE:
        raise TileError(
            f"a tile size must be at most {MAX_TILE_SIZE}, not {size}",
            loc,
            hint="e.g. 16, 32, 64, 128; a dimension used whole (':') needs no pin",
        )


def _check_count_option(name: str, value: int, loc: Location) -> int:
    if name == "warps" and value not in _WARP_COUNTS:
        raise TileError(
            f"warps must be one of {', '.join(map(str, _WARP_COUNTS))}, not {value}", loc
        )
    if name == "stages" and not 1 <= value <= _MAX_STAGES:
        raise TileError(f"stages must be between 1 and {_MAX_STAGES}, not {value}", loc)
    if name == "split" and not 1 <= value <= _MAX_SPLIT:
        raise TileError(
            f"split must be between 1 and {_MAX_SPLIT}, not {value}",
            loc,
            hint="split=1 leaves the kernel unsplit; without split= the launch chooses",
        )
    return value


def _count_assignments(stmts: tuple[ast.Stmt, ...], counts: dict[str, int]) -> None:
    for stmt in stmts:
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
            counts[stmt.target.id] = counts.get(stmt.target.id, 0) + 1
        elif isinstance(stmt, ast.For):
            _count_assignments(stmt.body, counts)
        elif isinstance(stmt, ast.If):
            _count_assignments(stmt.body, counts)
            _count_assignments(stmt.orelse, counts)


def _promote(a: Expr, b: Expr) -> DType:
    """The dtype of a binary operation's operands (see docs/language.md, "Promotion")."""
    a_weak, b_weak = _is_weak(a), _is_weak(b)
    if a_weak != b_weak:
        weak, strong = (a, b) if a_weak else (b, a)
        weak_kind, strong_kind = weak.type.dtype.kind, strong.type.dtype.kind
        if KIND_ORDER[weak_kind] <= KIND_ORDER[strong_kind]:
            return strong.type.dtype
        return weak.type.dtype
    return common_dtype(a.type.dtype, b.type.dtype)


def _broadcast_shapes(a: tuple[Dim, ...] | None, b: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    if a is None:
        return None
    if a == b:
        return a
    result: list[Dim] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(reversed(result))


def _broadcast_to(value: Expr, shape: tuple[Dim, ...]) -> Expr:
    if value.type.shape == shape:
        return value
    return Broadcast(operand=value, type=value.type.with_shape(shape), loc=value.loc)


def _full(value: Expr, shape: tuple[Dim, ...], loc: Location) -> Expr:
    if not shape:
        return value
    return Full(value=value, type=TileType(value.type.dtype, shape), loc=loc)


def _int_constant(value: int, loc: Location) -> Constant:
    low, high = INT_RANGES[DType.I64]
    if not low <= value <= high:
        raise TileError("integer constant does not fit in 64 bits", loc)
    low32, high32 = INT_RANGES[DType.I32]
    dtype = DType.I32 if low32 <= value <= high32 else DType.I64
    return Constant(value=value, type=TileType(dtype), weak=True, loc=loc)


def _checked_constant(value: bool | int | float, like: Constant, loc: Location) -> Constant:
    """A folded constant of `like`'s dtype and weakness, range-checked."""
    dtype = like.type.dtype
    if like.weak and dtype.is_int:
        return _int_constant(int(value), loc)
    if dtype.is_int:
        value = _convert_constant(value, dtype, loc, explicit=False)
    return Constant(value=value, type=like.type, weak=like.weak, loc=loc)


def _convert_constant(
    value: bool | int | float, dtype: DType, loc: Location, explicit: bool, runs: bool = False
) -> bool | int | float:
    """A constant as `dtype`. `runs`: folds `.to(dtype)`, which gives what the conversion
    gives at run time (floats truncate and saturate, NaN gives 0; integers wrap); otherwise
    a value the type cannot hold is an error, and so is a fraction unless `explicit`."""
    if dtype is DType.I1:
        return bool(value)
    if dtype.is_float:
        return float(value)
    low, high = INT_RANGES[dtype]
    if runs:
        if isinstance(value, float):
            return 0 if math.isnan(value) else math.trunc(max(low, min(high, value)))
        return (int(value) - low) % (high - low + 1) + low
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TileError(f"cannot convert {value} to {dtype}", loc)
        if not explicit and value != int(value):
            raise TileError(f"the constant {value} is not an integer ({dtype})", loc)
    value = int(value)
    if not low <= value <= high:
        raise TileError(f"the constant {value} does not fit in {dtype}", loc)
    return value


_MAX_SHIFT = 64


def _fold_binary(op: str, lhs: Constant, rhs: Constant, dtype: DType, loc: Location) -> Constant:
    """Evaluate an operator on two weak literals, with Python semantics and range checks."""
    a, b = lhs.value, rhs.value
    operand_dtype = _promote(lhs, rhs)
    if op in ("div", "pow") or operand_dtype.is_float:
        a, b = float(a), float(b)
    else:
        a, b = int(a), int(b)
    try:
        if op in ("shl", "shr") and (b < 0 or b >= _MAX_SHIFT):
            raise TileError(f"shift count {b} is out of range", loc)
        if op == "pow" and isinstance(a, float):
            result: bool | int | float = math.pow(a, b) if a or b >= 0 else math.inf
        else:
            result = _PYTHON_OPERATORS[op](a, b)
    except ZeroDivisionError:
        raise TileError("division by zero in a constant expression", loc) from None
    except OverflowError:
        result = math.inf
    except ValueError:  # e.g. a negative number to a fractional power
        result = math.nan
    if dtype is DType.I1:
        result = bool(result)
        return Constant(value=result, type=TileType(DType.I1), weak=True, loc=loc)
    if isinstance(result, float):
        return Constant(value=result, type=TileType(DType.F32), weak=True, loc=loc)
    return _int_constant(int(result), loc)


_PYTHON_OPERATORS: dict[str, Callable] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "maximum": max,
    "minimum": min,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


def _fold_math(fn: str, x: bool | int | float) -> float | int:
    x = float(x)
    try:
        if fn == "abs":
            return abs(x)
        if fn == "rsqrt":
            return 1.0 / math.sqrt(x) if x else math.inf
        if fn == "sigmoid":
            return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0
        if fn == "gelu":
            return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))
        if fn == "exp2":
            return 2.0**x
        if fn == "log" and x == 0:
            return -math.inf
        if fn == "log2" and x == 0:
            return -math.inf
        return float(getattr(math, fn)(x))
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan
