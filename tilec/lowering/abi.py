"""The kernel ABI: the parameters a compiled kernel takes and how it must be launched.

`docs/abi.md` is the reference; in short, for a specialized, laid-out kernel:

* **Parameters**, in the order of the kernel's arguments. A tensor argument `x` of rank r is
  `x` (a global pointer, `.u64` in PTX: the address of element [0, ..., 0]), then its r extents
  `x.extent.0 ...`, then its r strides `x.stride.0 ...`, all `i64`, strides counted in
  elements. A scalar argument is passed by value in its own type (`i1` as an `i8` 0 or 1;
  `f16`/`bf16` as 2 bytes).
* **Grid**: axis k of the kernel's `tilec.grid` is CUDA grid dimension x, y, z for k = 0, 1, 2,
  with `ceil(extent / tile)` blocks (`GridAxis`).
* **Block**: `32 * num_warps` threads along x (the PTX says `.reqntid`).
* **Shared memory**: `shared_bytes` of dynamic shared memory per block (the kernel declares
  an `extern .shared` array); above 48 KiB the launcher must first raise
  `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.

What the launcher must check (the kernel trusts all of it): extents equal the tensors' shapes,
every tensor dimension with one name has one extent, fixed extents match, each extent is below
2**31 (masks compare indices as `i32`), whole dimensions are at most `max_extents`, pointers
are aligned to their element size, and the grid fits CUDA's limits (y, z < 65536).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec.dialects.builtin import FuncOp
from tilec.ir.types import TensorType, Type
from tilec.lowering.exchange import kernel_scratch_bytes
from tilec.lowering.layouts import WARP_SIZE

__all__ = ["GridAxis", "KernelABI", "Parameter", "kernel_abi", "module_abi"]


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter. `kind`: "pointer" (dtype: the element type), "extent" or
    "stride" (dtype "i64", of dimension `axis`), or "scalar" (dtype: its type)."""

    name: str
    kind: str
    argument: str
    dtype: str
    axis: int | None = None


@dataclass(frozen=True)
class GridAxis:
    """One grid axis: `ceil(extent of dim / tile)` blocks (`tile` 1: one block per index)."""

    dim: str
    tile: int


@dataclass(frozen=True)
class KernelABI:
    """Everything a launcher needs to call one kernel."""

    name: str
    parameters: tuple[Parameter, ...]
    grid: tuple[GridAxis, ...]
    num_warps: int
    shared_bytes: int
    tile_sizes: dict[str, int] = field(default_factory=dict)
    max_extents: dict[str, int] = field(default_factory=dict)

    @property
    def num_threads(self) -> int:
        return WARP_SIZE * self.num_warps

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.num_threads, 1, 1)


def _pairs(kernel: FuncOp, attr: str) -> dict[str, int]:
    a = kernel.attributes.get(attr)
    return {str(k): int(v) for k, v in a.value} if a is not None else {}


def argument_name(kernel: FuncOp, index: int) -> str:
    arg = kernel.arguments[index]
    return arg.name_hint or f"arg{index}"


def kernel_parameters(kernel: FuncOp) -> tuple[Parameter, ...]:
    params: list[Parameter] = []
    for i, arg in enumerate(kernel.arguments):
        name = argument_name(kernel, i)
        t: Type = arg.type
        if isinstance(t, TensorType):
            params.append(Parameter(name, "pointer", name, str(t.element)))
            for axis in range(t.rank):
                params.append(Parameter(f"{name}.extent.{axis}", "extent", name, "i64", axis))
            for axis in range(t.rank):
                params.append(Parameter(f"{name}.stride.{axis}", "stride", name, "i64", axis))
        else:
            params.append(Parameter(name, "scalar", name, str(t)))
    return tuple(params)


def kernel_abi(kernel: FuncOp) -> KernelABI:
    """The ABI of one specialized, laid-out kernel."""
    tile_sizes = _pairs(kernel, "tilec.tile_sizes")
    grid_attr = kernel.attributes.get("tilec.grid")
    grid = []
    for dim, symbol in grid_attr.value if grid_attr is not None else ():
        if symbol not in tile_sizes:
            raise ValueError(
                f"kernel '{kernel.sym_name}': grid symbol {symbol} has no size (run specialize)"
            )
        grid.append(GridAxis(str(dim), tile_sizes[symbol]))
    warps = kernel.attributes.get("tilec.num_warps")
    if warps is None:
        raise ValueError(f"kernel '{kernel.sym_name}' has no tilec.num_warps (run assign-layouts)")
    return KernelABI(
        kernel.sym_name,
        kernel_parameters(kernel),
        tuple(grid),
        warps.value,
        kernel_scratch_bytes(kernel),
        tile_sizes,
        _pairs(kernel, "tilec.max_extent"),
    )


def module_abi(module) -> dict[str, KernelABI]:
    """`kernel_abi` of every kernel of a module, by name."""
    return {f.sym_name: kernel_abi(f) for f in module.functions}
