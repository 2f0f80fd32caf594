"""Launching a kernel in the interpreter: checking the arguments, binding every symbol of the
kernel's types to a number, and choosing the grid.

    launch = prepare_launch(module, "matmul", [a, b, c], tile_sizes={"M": 64})
    launch.symbols      # {"M": 1000, "K": 333, "N": 777, "BM": 64, "BN": 16, "BK": 16}
    launch.grid         # (16, 49)
    launch.run()        # writes c in place

**Arguments.** Tensors are numpy arrays (bf16 as `ml_dtypes.bfloat16`), CPU torch tensors,
or objects that numpy can take through DLPack or `__array__`; they are used in place, so the
kernel's stores land in the caller's memory, as on the GPU. Scalars are Python or numpy
numbers, converted (rounded, for floats) to the parameter's dtype. Each tensor must have the
parameter's dtype and rank exactly, fixed extents must match, and dimensions with the same name
must agree.

**Symbols.** A tensor extent (`M` in `!tile.tensor<MxKxf16>`) is bound from the arguments. A
tile size (`BM` in `tile<BMxBKxf16>` or `tile.symbol "BM"`) is, in order of precedence:

1. fixed by the kernel — pinned by its author (`tilec.pinned_tiles`) or chosen by the
   `specialize` pass (`tilec.tile_sizes`) —, which a request must not contradict (and which
   must cover a dimension used whole);
2. given by the caller in `tile_sizes`, keyed by the symbol (`"BM"`) or by its dimension
   (`"M"`, meaning `BM`);
3. for a dimension used whole (`tilec.whole_dims`; its tile size is `B` + its name, as the
   frontend names them), the smallest power of two that covers its extent (a given size must
   cover it too);
4. otherwise `DEFAULT_TILE_SIZE` (16): small enough that modest sizes span several tiles, so
   that edges and loops are exercised.

IR after tiling has constants where the symbols were, and needs none of this.

**Grid.** `tilec.grid = [["M", "BM"], ...]` gives axis k cdiv(extent(M), BM) programs (an
integer in place of "BM" is a fixed tile size). IR without the attribute needs `grid=`. A
kernel that `split-reduction` split (`tilec.split`) has one more axis, the split axis, of
`split` programs: the kernel's pin (`split=N`), else `split=` here, else `DEFAULT_SPLIT` (3).

**Flattened kernels.** A kernel `flatten` ran as one dimension (`tilec.flattened = [F, D1,
.., Dk]`) takes its source's tensors of rank k, each viewed as its elements in order
(C-contiguous arrays only: a strided one is refused), or tensors of one dimension F.

**Overflow.** A kernel that converts `index` values to a narrower integer type (the frontend
computes element offsets and masks in i32) is refused when an extent plus its tile size does
not fit that type: the GPU would compute wrapped offsets, that is wrong results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import arith
from tilec.dialects import tile as tile_ops
from tilec.dialects.atomic import ATOMIC_OPS
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE, FuncOp, ModuleOp
from tilec.dialects.gather import ScatterOp
from tilec.interp.atomic import block_seed, uses_atomics
from tilec.interp.cluster import cluster_dims
from tilec.interp.errors import InterpreterError, LaunchError
from tilec.interp.numerics import dtype_of, round_from_f64
from tilec.interp.split import DEFAULT_SPLIT, SplitState
from tilec.ir.core import BlockArgument, Operation
from tilec.ir.types import (
    Dim,
    FloatType,
    IndexType,
    IntegerType,
    ShapedType,
    TensorType,
    Type,
    element_type,
)

if TYPE_CHECKING:
    from tilec.interp.machine import Trace

__all__ = [
    "DEFAULT_TILE_SIZE",
    "Launch",
    "TensorView",
    "bind_sizes",
    "describe_parameter",
    "find_kernel",
    "prepare_launch",
    "run_kernel",
    "written_parameters",
]

DEFAULT_TILE_SIZE = 16


class TensorView:
    """A tensor argument as the kernel sees it: the caller's array, used in place.

    Every global-memory access of the interpreter goes through `read` and `write`, so checks
    on memory traffic (races between blocks, copies in flight) have one place to hook in.
    """

    __slots__ = ("array", "name")

    def __init__(self, name: str, array: np.ndarray):
        self.name = name
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def read(self, box: tuple[slice, ...]) -> np.ndarray:
        """The elements in `box` (a tuple of in-bounds slices)."""
        return self.array[box]

    def write(self, box: tuple[slice, ...], values: np.ndarray, mask: np.ndarray | None) -> None:
        """Write `values` into `box`, only where `mask` is true (everywhere without one)."""
        if mask is None:
            self.array[box] = values
        else:
            region = self.array[box]
            region[mask] = values[mask]

    def read_elements(self, coordinates: tuple[np.ndarray, ...]) -> np.ndarray:
        """The elements at `coordinates` (one in-bounds integer array per dimension): a
        gather's."""
        return self.array[coordinates]

    def write_elements(self, coordinates: tuple[np.ndarray, ...], values: np.ndarray) -> None:
        """Write `values` at `coordinates` (in-bounds, one array per dimension): a scatter's."""
        self.array[coordinates] = values

    def __repr__(self) -> str:
        return f"<tensor {self.name} {self.array.dtype}{list(self.array.shape)}>"


class Launch:
    """One launch of one kernel: its converted arguments, every symbol bound to a number, and
    the grid. `run()` executes it (and may be called again: it reruns on the same memory)."""

    def __init__(
        self,
        func: FuncOp,
        arguments: list[Any],
        symbols: dict[str, int],
        tile_sizes: dict[str, tuple[int, str]],
        grid: tuple[int, ...],
        seed: int | None = None,
        grid_axes: tuple[str, ...] = (),
    ):
        self.func = func
        self.arguments = arguments
        self.symbols = symbols
        self.tile_sizes = tile_sizes  # symbol -> (size, where it came from)
        self.grid = grid
        # The dimension the first axes of the grid tile (`tilec.grid`; none for a grid given).
        self.grid_axes = grid_axes
        # Caches shared by all blocks: resolved types, and per-op constants (immutable arrays).
        self.shapes: dict[Type, tuple[int | None, ...]] = {}
        self.result_checks: dict[Any, Any] = {}  # by result value: BlockState._checked
        self.op_cache: dict[Operation, Any] = {}
        # The workspace and ticket counters of a split kernel (tilec.interp.split).
        self.split_state = SplitState()
        # Blocks of a kernel with atomics run in an order shuffled by this seed
        # (tilec.interp.atomic); None: the grid's order.
        self.block_seed = block_seed(seed) if uses_atomics(func) else None

    @property
    def kernel(self) -> str:
        return self.func.sym_name

    def shape(self, t: Type) -> tuple[int | None, ...]:
        """The concrete shape of type `t` (`()` for a scalar); `?` dimensions stay None."""
        shape = self.shapes.get(t)
        if shape is None:
            dims = t.shape if isinstance(t, ShapedType) else ()
            shape = tuple(d if isinstance(d, int) or d is None else self.symbols[d] for d in dims)
            self.shapes[t] = shape
        return shape

    def run(self, trace: Trace | None = None) -> None:
        """Execute every block of the grid, one after the other.

        `trace(op, state, result)` is called after each op (for debugging and for comparing
        two runs op by op).
        """
        from tilec.interp.machine import execute

        self.split_state = SplitState()
        execute(self, trace)
        left = self.split_state.unreset()
        if left is not None:
            counter, value, op = left
            raise InterpreterError(
                f"'{op.name}' left counter {counter} at {value} after the launch: the next "
                "launch would find it taken",
                op.loc,
            )

    def describe(self) -> str:
        """One line: the sizes, the tile sizes (and where they came from) and the grid."""
        extents = [f"{k}={v}" for k, v in self.symbols.items() if k not in self.tile_sizes]
        tiles = [f"{k}={v} ({origin})" for k, (v, origin) in self.tile_sizes.items()]
        grid = "x".join(map(str, self.grid)) or "1"
        blocks = math.prod(self.grid)
        parts = [", ".join(extents) or "no sizes", "tiles " + (", ".join(tiles) or "none")]
        order = "" if self.block_seed is None else f", shuffled (block seed {self.block_seed})"
        return f"{self.kernel}: " + "; ".join(parts) + f"; grid {grid} = {blocks} blocks{order}"


# ---------------------------------------------------------------------------------------------
# Finding the kernel


def find_kernel(program: Any, kernel: str | None = None) -> FuncOp:
    """The func named `kernel` in `program` (a `CompiledProgram`, a module or a func); the
    only one when `kernel` is None."""
    if isinstance(program, FuncOp):
        if kernel is not None and program.sym_name != kernel:
            raise LaunchError(f"the kernel is '{program.sym_name}', not '{kernel}'", program.loc)
        return program
    module = getattr(program, "module", program)
    if not isinstance(module, ModuleOp):
        raise TypeError(f"expected a module, a func or a compiled program, got {type(program)}")
    functions = module.functions
    names = ", ".join(f.sym_name for f in functions) or "none"
    if kernel is None:
        if len(functions) != 1:
            raise LaunchError(
                f"the module has {len(functions)} kernels; name the one to run",
                module.loc,
                hint=f"kernels: {names}",
            )
        return functions[0]
    func = module.lookup(kernel)
    if func is None:
        raise LaunchError(f"no kernel named '{kernel}'", module.loc, hint=f"kernels: {names}")
    return func


# ---------------------------------------------------------------------------------------------
# Parameters


def parameter_name(arg: BlockArgument) -> str:
    return arg.name_hint or f"#{arg.index}"


def _type_text(t: Type) -> str:
    """A parameter type as the tile language writes it: `f16[M, K]`, or `f32`."""
    if isinstance(t, TensorType):
        dims = ", ".join("?" if d is None else str(d) for d in t.shape)
        return f"{t.element}[{dims}]"
    return str(t)


def describe_parameter(arg: BlockArgument) -> str:
    """`a: f16[M, K]`."""
    return f"{parameter_name(arg)}: {_type_text(arg.type)}"


def written_parameters(func: FuncOp) -> set[BlockArgument]:
    """The tensor parameters the kernel stores into."""
    params = set(func.arguments)
    return {
        op.view
        for op in func.walk()
        if isinstance(op, (tile_ops.StoreOp, ScatterOp, *ATOMIC_OPS))
        and isinstance(op.view, BlockArgument)
        if op.view in params
    }


def _numpy_name(dtype: np.dtype) -> str:
    return "bfloat16" if dtype.name == "bfloat16" else str(dtype)


def _as_array(value: Any) -> tuple[np.ndarray | None, bool]:
    """(array sharing `value`'s memory, True) where possible; (a copy, False) for objects that
    only offer `__array__`; (None, False) for anything else."""
    if isinstance(value, np.ndarray):
        return value, True
    if type(value).__module__.startswith("torch") and hasattr(value, "device"):
        return _torch_array(value), True
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value), True
        except (BufferError, TypeError, RuntimeError):
            pass
    if hasattr(value, "__array__"):
        return np.asarray(value), False
    return None, False


def _torch_array(tensor: Any) -> np.ndarray:
    import torch  # only reached with a torch tensor in hand, so torch is installed

    if tensor.device.type != "cpu":
        raise _ArgumentProblem(
            f"a torch tensor on {tensor.device}: the interpreter runs on the CPU",
            hint="pass tensor.cpu() (and copy the result back), or run on the GPU",
        )
    tensor = tensor.detach()
    # numpy has no bfloat16 or f8; the same bits, viewed as ml_dtypes' types, share memory.
    for name, (bits, element) in _ML_DTYPES_OF_TORCH.items():
        if tensor.dtype == getattr(torch, name, None):
            bits_array = _shared_array(tensor.view(getattr(torch, bits)))
            return bits_array.view(dtype_of(FloatType(element)))
    return _shared_array(tensor)


def _shared_array(tensor: Any) -> np.ndarray:
    """A numpy array over `tensor`'s memory. Through DLPack first: `Tensor.numpy()` marks the
    storage as never resizable again, and FSDP2 frees gathered parameters by resizing theirs
    to nothing (examples/torch/train_ddp.py --fsdp runs the interpreter under it)."""
    try:
        return np.from_dlpack(tensor)
    except (BufferError, TypeError, RuntimeError):  # an older numpy, a conjugate view
        return tensor.numpy()


# torch dtypes numpy lacks: the integer dtype of their bits, and the element type.
_ML_DTYPES_OF_TORCH = {
    "bfloat16": ("int16", "bf16"),
    "float8_e4m3fn": ("uint8", "f8e4m3"),
    "float8_e5m2": ("uint8", "f8e5m2"),
}


class _ArgumentProblem(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


def _tensor_argument(
    arg: BlockArgument, value: Any, written: bool, flattened: tuple[str, ...] = ()
) -> np.ndarray:
    t: TensorType = arg.type
    expected_dtype = dtype_of(t)
    array, shares_memory = _as_array(value)
    if array is None:
        raise _ArgumentProblem(
            f"expected a tensor, got {type(value).__name__}",
            hint="pass a numpy array, a CPU torch tensor, or an object numpy can convert",
        )
    if flattened and array.ndim == len(flattened) - 1 != t.rank:
        # A kernel `flatten` ran as one dimension takes its source's tensors, each viewed as
        # its elements in order: only a dense (C-contiguous) array is that view.
        if not array.flags.c_contiguous:
            raise _ArgumentProblem(
                f"the kernel runs as one dimension {flattened[0]} of "
                f"[{', '.join(flattened[1:])}] (flatten), which needs a row-major array with "
                f"no gaps; got strides {tuple(array.strides)}",
                hint="pass a contiguous array (np.ascontiguousarray), or compile the kernel "
                "without assuming dense tensors",
            )
        array = array.reshape(-1)
    if array.dtype != expected_dtype:
        raise _ArgumentProblem(
            f"expected dtype {t.element}, got {_numpy_name(array.dtype)}",
            hint=f"convert it, e.g. x.astype({_numpy_constructor(t.element)})",
        )
    if array.ndim != t.rank:
        raise _ArgumentProblem(
            f"expected {t.rank} dimension(s) [{', '.join(map(_dim_text, t.shape))}], "
            f"got {array.ndim} (shape {tuple(array.shape)})"
        )
    for axis, (d, n) in enumerate(zip(t.shape, array.shape)):
        if isinstance(d, int) and d != n:
            raise _ArgumentProblem(
                f"dimension {axis} must be {d}, got {n} (shape {tuple(array.shape)})"
            )
    if written:
        if not shares_memory:
            raise _ArgumentProblem(
                f"the kernel writes it, but a {type(value).__name__} cannot be written in place",
                hint="pass a numpy array or a CPU torch tensor",
            )
        if not array.flags.writeable:
            raise _ArgumentProblem("the kernel writes it, but the array is read-only")
    return array


def _numpy_constructor(element: Type) -> str:
    dtype = dtype_of(element)
    if dtype.kind not in "biuf":  # bf16 and f8: ml_dtypes' types
        return f"ml_dtypes.{dtype.name}"
    return f"numpy.{dtype.name}"


def _dim_text(d: Dim) -> str:
    return "?" if d is None else str(d)


def _scalar_argument(arg: BlockArgument, value: Any) -> Any:
    t = arg.type
    dtype = dtype_of(t)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    elif (
        hasattr(value, "item")
        and getattr(value, "ndim", 0) == 0
        and not isinstance(value, np.generic)
    ):
        value = value.item()  # a 0-d torch tensor, say
    is_bool = isinstance(value, (bool, np.bool_))
    is_int = isinstance(value, (int, np.integer)) and not is_bool
    is_float = isinstance(value, (float, np.floating))
    if isinstance(t, FloatType):
        if not (is_int or is_float):
            raise _ArgumentProblem(f"expected a number for {t}, got {_value_text(value)}")
        return round_from_f64(float(value), dtype)[()]
    if isinstance(t, IntegerType) and t.width == 1:
        if is_bool or (is_int and int(value) in (0, 1)):
            return np.bool_(bool(value))
        raise _ArgumentProblem(f"expected a bool for i1, got {_value_text(value)}")
    if not (is_int or is_bool):
        raise _ArgumentProblem(f"expected an integer for {t}, got {_value_text(value)}")
    info = np.iinfo(dtype)
    if not info.min <= int(value) <= info.max:
        raise _ArgumentProblem(f"{int(value)} does not fit {t} ({info.min} to {info.max})")
    return dtype.type(int(value))


def _value_text(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) < 40 else text[:37] + '...'}"


def _signature(func: FuncOp) -> str:
    return ", ".join(describe_parameter(a) for a in func.arguments)


def _order_arguments(func: FuncOp, args: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    params = func.arguments
    kernel = func.sym_name
    if isinstance(args, Mapping):
        names = [parameter_name(a) for a in params]
        unknown = [k for k in args if k not in names]
        if unknown:
            raise LaunchError(
                f"kernel '{kernel}' has no parameter '{unknown[0]}'",
                func.loc,
                hint=f"its parameters: {_signature(func)}",
            )
        missing = [n for n in names if n not in args]
        if missing:
            raise LaunchError(
                f"kernel '{kernel}' needs an argument for '{missing[0]}'",
                func.loc,
                hint=f"its parameters: {_signature(func)}",
            )
        return [args[n] for n in names]
    args = list(args)
    if len(args) != len(params):
        raise LaunchError(
            f"kernel '{kernel}' takes {len(params)} argument(s), got {len(args)}",
            func.loc,
            hint=f"its parameters: {_signature(func)}",
        )
    return args


def _convert_arguments(func: FuncOp, values: list[Any]) -> list[Any]:
    written = written_parameters(func)
    flat = func.attributes.get("tilec.flattened")
    flattened = tuple(str(d) for d in flat.value) if flat is not None else ()
    converted: list[Any] = []
    for arg, value in zip(func.arguments, values):
        try:
            if isinstance(arg.type, TensorType):
                array = _tensor_argument(arg, value, arg in written, flattened)
                converted.append(TensorView(parameter_name(arg), array))
            else:
                converted.append(_scalar_argument(arg, value))
        except _ArgumentProblem as problem:
            raise LaunchError(
                f"argument '{parameter_name(arg)}' of kernel '{func.sym_name}' "
                f"({describe_parameter(arg)}): {problem.message}",
                func.loc,
                hint=problem.hint,
            ) from None
    return converted


# ---------------------------------------------------------------------------------------------
# Symbols


def _bind_extents(func: FuncOp, shapes: list[tuple[int, ...] | None]) -> dict[str, int]:
    extents: dict[str, int] = {}
    first_seen: dict[str, tuple[str, int]] = {}
    for arg, shape in zip(func.arguments, shapes):
        if shape is None:
            continue
        for axis, (d, n) in enumerate(zip(arg.type.shape, shape)):
            if not isinstance(d, str):
                continue
            if d in extents and extents[d] != n:
                other, other_axis = first_seen[d]
                raise LaunchError(
                    f"dimension {d} is {extents[d]} in '{other}' (axis {other_axis}) but {n} in "
                    f"'{parameter_name(arg)}' (axis {axis}) of kernel '{func.sym_name}'",
                    func.loc,
                    hint="dimensions with the same name must have the same extent",
                )
            extents[d] = n
            first_seen.setdefault(d, (parameter_name(arg), axis))
    return extents


def tile_symbols(func: FuncOp) -> list[str]:
    """Every symbol in the kernel's tile and buffer types and `tile.symbol` ops, in order of
    first appearance (tensor extents included, if a tile type uses one)."""
    seen: dict[str, None] = {}

    def note(t: Type) -> None:
        if isinstance(t, ShapedType) and not isinstance(t, TensorType):
            for d in t.shape:
                if isinstance(d, str):
                    seen.setdefault(d)

    for op in func.walk():
        if isinstance(op, tile_ops.SymbolOp):
            seen.setdefault(op.symbol)
        for r in op.results:
            note(r.type)
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    note(a.type)
    return list(seen)


def _attribute_pairs(func: FuncOp, name: str) -> list[tuple[Any, ...]]:
    attr = func.attributes.get(name)
    return [tuple(entry) for entry in attr.value] if attr is not None else []


def _bind_tile_sizes(
    func: FuncOp, extents: dict[str, int], requested: Mapping[str, int] | None
) -> dict[str, tuple[int, str]]:
    kernel = func.sym_name
    # Sizes the IR fixes: pinned by the author, or chosen by `specialize` (which has already
    # rewritten the tile types with them, so its sizes appear nowhere else).
    fixed = {str(s): (int(n), "pinned") for s, n in _attribute_pairs(func, "tilec.pinned_tiles")}
    fixed.update(
        (str(s), (int(n), "specialized")) for s, n in _attribute_pairs(func, "tilec.tile_sizes")
    )
    grid_tiles = [tile for _, tile in _attribute_pairs(func, "tilec.grid") if isinstance(tile, str)]
    candidates = dict.fromkeys([*tile_symbols(func), *grid_tiles, *fixed])
    needed = [s for s in candidates if s not in extents]
    whole_attr = func.attributes.get("tilec.whole_dims")
    whole = {f"B{d}": d for d in (whole_attr.value if whole_attr is not None else ())}
    given: dict[str, int] = {}
    for key, size in (requested or {}).items():
        symbol = _tile_symbol_for(key, needed)
        if symbol is None:
            raise LaunchError(
                f"kernel '{kernel}' has no tile size '{key}'",
                func.loc,
                hint="its tile sizes: " + (", ".join(needed) or "none"),
            )
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise LaunchError(
                f"tile size {symbol} must be a positive integer, got {size!r}", func.loc
            )
        if symbol in fixed and fixed[symbol][0] != size:
            raise LaunchError(
                f"tile size {symbol} is {fixed[symbol][1]} to {fixed[symbol][0]} in kernel "
                f"'{kernel}'; {size} was asked for",
                func.loc,
            )
        given[symbol] = int(size)
    sizes: dict[str, tuple[int, str]] = {}
    for symbol in needed:
        if symbol in fixed:
            sizes[symbol] = fixed[symbol]
            dim = whole.get(symbol)
            if dim in extents and extents[dim] > fixed[symbol][0]:
                raise LaunchError(
                    f"dimension {dim}={extents[dim]} is larger than its tile {symbol}="
                    f"{fixed[symbol][0]}, and kernel '{kernel}' uses {dim} whole",
                    func.loc,
                    hint="compile the kernel for a larger extent of "
                    f"{dim} (tilec.max_extent = {fixed[symbol][0]})",
                )
        elif symbol in whole and whole[symbol] in extents:
            extent = extents[whole[symbol]]
            if symbol in given:
                if given[symbol] < extent:
                    raise LaunchError(
                        f"tile size {symbol}={given[symbol]} does not cover dimension "
                        f"{whole[symbol]}={extent}, which kernel '{kernel}' uses whole",
                        func.loc,
                        hint="leave it out: a whole dimension's tile is sized to cover it",
                    )
                sizes[symbol] = (given[symbol], "given")
            else:
                sizes[symbol] = (1 << max(extent - 1, 0).bit_length(), f"covers {whole[symbol]}")
        elif symbol in given:
            sizes[symbol] = (given[symbol], "given")
        else:
            sizes[symbol] = (DEFAULT_TILE_SIZE, "default")
    return sizes


def _tile_symbol_for(key: str, needed: list[str]) -> str | None:
    """The tile-size symbol that `key` names: the symbol itself, or its dimension."""
    if key in needed:
        return key
    for candidate in (f"B{key.upper()}", key.upper()):
        if candidate in needed:
            return candidate
    return None


def split_count(func: FuncOp, requested: int | None) -> int | None:
    """The split axis's programs for `func` (None when it has no split axis): its pin, else
    `requested`, else `DEFAULT_SPLIT`."""
    plan = dict(_attribute_pairs(func, "tilec.split"))
    if not plan:
        return None
    pinned = plan.get("pinned")
    if pinned:
        return int(pinned)
    # A multi-pass kernel needs a block a pass (passes/split_passes.py).
    passes = len(plan.get("passes") or ())
    if requested is None:
        return max(DEFAULT_SPLIT, passes)
    if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or requested < 1:
        raise LaunchError(f"split must be a positive integer, got {requested!r}", func.loc)
    if 1 < requested < passes:
        raise LaunchError(
            f"split={requested} cannot run kernel '{func.sym_name}': its {passes} passes need a "
            "block each (1 runs them in one block)",
            func.loc,
        )
    return int(requested)


# Blocks the interpreter launches for a persistent kernel (`tilec.persistent`): few, so that
# each walks several tiles, and 3, so that with most tile counts some walk one tile more.
PERSISTENT_BLOCKS = 3


def _grid(
    func: FuncOp,
    symbols: dict[str, int],
    requested: Sequence[int] | None,
    split: int | None = None,
) -> tuple[int, ...]:
    if requested is not None:
        grid = tuple(int(n) for n in requested)
        if not 1 <= len(grid) <= 3 or any(n < 0 for n in grid):
            raise LaunchError(f"grid must be 1 to 3 non-negative sizes, got {grid}", func.loc)
        return grid
    axes = _attribute_pairs(func, "tilec.grid")
    if "tilec.grid" not in func.attributes:  # an empty grid (every axis a loop) is one block
        raise LaunchError(
            f"kernel '{func.sym_name}' has no 'tilec.grid' attribute",
            func.loc,
            hint="pass the grid explicitly (grid=(n0, n1, ...))",
        )
    grid = []
    for dim, tile in axes:
        if dim not in symbols:
            raise LaunchError(
                f"grid dimension {dim} of kernel '{func.sym_name}' is not the extent of any "
                "tensor argument",
                func.loc,
            )
        size = tile if isinstance(tile, int) else symbols[tile]
        grid.append(-(-symbols[dim] // size))
    for axis, c in enumerate(cluster_dims(func) or ()):  # whole clusters (interp.cluster)
        grid[axis] = -(-grid[axis] // c) * c
    if PERSISTENT_ATTRIBUTE in func.attributes:  # blocks walk the tiles (pipeline_persistent)
        tiles = math.prod(grid)
        c = (cluster_dims(func) or (1,))[0]  # whole clusters, as many as hold the blocks
        return (min(tiles, -(-PERSISTENT_BLOCKS // c) * c),) if tiles else (0,)
    splits = split_count(func, split)
    return tuple(grid) if splits is None else (*grid, splits)


def _narrowest_index_conversion(func: FuncOp) -> int | None:
    """The smallest integer width that the kernel converts `index` values to, if any."""
    widths = [
        element_type(op.result.type).width
        for op in func.walk()
        if isinstance(op, arith.IndexCastOp) and isinstance(element_type(op.input.type), IndexType)
    ]
    return min(widths) if widths else None


def _check_overflow(
    func: FuncOp, shapes: list[tuple[int, ...] | None], tiles: dict[str, tuple[int, str]]
) -> None:
    width = _narrowest_index_conversion(func)
    if width is None or width >= 64:
        return
    limit = (1 << (width - 1)) - 1
    largest_tile = max((size for size, _ in tiles.values()), default=1)
    for arg, shape in zip(func.arguments, shapes):
        if shape is None:
            continue
        for axis, (d, n) in enumerate(zip(arg.type.shape, shape)):
            tile = tiles.get(f"B{d}", (largest_tile, ""))[0] if isinstance(d, str) else 0
            if n + tile > limit:
                name = f"dimension {d}" if isinstance(d, str) else f"axis {axis}"
                raise LaunchError(
                    f"{name} of '{parameter_name(arg)}' is {n}: too large for kernel "
                    f"'{func.sym_name}', which computes element offsets in i{width} (at most "
                    f"{limit}, and a tile of {tile} may reach past the extent)",
                    func.loc,
                    hint="split the tensor, or launch on smaller views of it",
                )


def bind_sizes(
    func: FuncOp,
    shapes: list[tuple[int, ...] | None],
    tile_sizes: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], dict[str, tuple[int, str]]]:
    """Bind the symbols of `func` for tensor arguments of `shapes` (None for scalars): every
    symbol's value, and each tile size with where it came from. Raises `LaunchError` for
    disagreeing extents, bad tile sizes, and sizes that overflow the kernel's integer types."""
    extents = _bind_extents(func, shapes)
    tiles = _bind_tile_sizes(func, extents, tile_sizes)
    _check_overflow(func, shapes, tiles)
    return {**extents, **{s: size for s, (size, _) in tiles.items()}}, tiles


# ---------------------------------------------------------------------------------------------
# Entry points


def prepare_launch(
    program: Any,
    kernel: str | None,
    args: Sequence[Any] | Mapping[str, Any],
    *,
    tile_sizes: Mapping[str, int] | None = None,
    grid: Sequence[int] | None = None,
    split: int | None = None,
    block_seed: int | None = None,
) -> Launch:
    """Check `args` against kernel `kernel` of `program` (a `CompiledProgram`, module or func),
    bind its symbols and choose its grid (`split`: the split axis's programs, for a kernel
    that has one and does not pin them; `block_seed`: the seed of the shuffled block order of a
    kernel with atomics, `tilec.interp.atomic`). Raises `LaunchError` for bad arguments."""
    func = find_kernel(program, kernel)
    arguments = _convert_arguments(func, _order_arguments(func, args))
    shapes = [a.shape if isinstance(a, TensorView) else None for a in arguments]
    symbols, tiles = bind_sizes(func, shapes, tile_sizes)
    axes = (
        () if grid is not None else tuple(str(d) for d, _ in _attribute_pairs(func, "tilec.grid"))
    )
    return Launch(
        func, arguments, symbols, tiles, _grid(func, symbols, grid, split), block_seed, axes
    )


def run_kernel(
    program: Any,
    kernel: str | None,
    args: Sequence[Any] | Mapping[str, Any],
    *,
    tile_sizes: Mapping[str, int] | None = None,
    grid: Sequence[int] | None = None,
    split: int | None = None,
    block_seed: int | None = None,
) -> None:
    """Run kernel `kernel` of `program` in the interpreter on `args`, writing its outputs into
    them in place, as the GPU would. See `prepare_launch` for the arguments."""
    prepare_launch(
        program, kernel, args, tile_sizes=tile_sizes, grid=grid, split=split, block_seed=block_seed
    ).run()
