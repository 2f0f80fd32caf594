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
* **Clusters** (`tilec.cluster`): `cluster` blocks a cluster along x, y, z (the PTX says
  `.reqnctapercluster`); each grid axis is rounded up to a multiple of it.
* **Shared memory**: `shared_bytes` of dynamic shared memory per block (the kernel declares
  an `extern .shared` array); above 48 KiB the launcher must first raise
  `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.

What the launcher must check (the kernel trusts all of it): extents equal the tensors' shapes,
every tensor dimension with one name has one extent, fixed extents match, each extent is below
2**31 (masks compare indices as `i32`), whole dimensions are at most `max_extents`, pointers
are aligned to their element size, the grid fits CUDA's limits (y, z < 65536), and the
arguments keep the promises of the `Specialization` the kernel was compiled for.

`KernelABI` and `Specialization` are plain data (`to_json`/`from_json`), so that a compiled
kernel can be cached on disk and launched by `tilec.runtime`, which knows nothing of the IR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tilec.dialects import tile as T
from tilec.dialects.atomic import ATOMIC_OPS
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE, FuncOp
from tilec.dialects.gather import ScatterOp
from tilec.ir.attributes import ArrayAttr, IntegerAttr, StringAttr
from tilec.ir.core import BlockArgument
from tilec.ir.types import TensorType, Type
from tilec.lowering.cluster import kernel_cluster
from tilec.lowering.layouts import WARP_SIZE
from tilec.lowering.shared_memory import shared_bytes
from tilec.lowering.tma import tensormap_boxes, tensormap_parameter_name

__all__ = [
    "ALIGNMENT",
    "ASSUMPTIONS",
    "DIVISOR",
    "FLOAT_SCALARS",
    "SPECIALIZATION_ATTRIBUTES",
    "GridAxis",
    "KernelABI",
    "Parameter",
    "Specialization",
    "SplitAxis",
    "assumed_specialization",
    "kernel_abi",
    "kernel_parameters",
    "kernel_specialization",
    "known_multiple",
    "module_abi",
    "recorded_multiple",
    "set_kernel_specialization",
    "split_axis",
]

# What `Specialization` records, as Triton does: 16-byte alignment (the widest vector access)
# and divisibility by 16 (whole vectors, no remainder).
ALIGNMENT = 16
DIVISOR = 16
# The hidden parameters of a split kernel (kinds "workspace" and "counters").
WORKSPACE_PARAMETER = "tilec.workspace"
COUNTERS_PARAMETER = "tilec.counters"


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter. `kind`: "pointer" (dtype: the element type), "extent" or
    "stride" (dtype "i64", of dimension `axis`), or "scalar" (dtype: its type). For an extent,
    `dim` is the dimension's name (`"M"`), its fixed size (`4` in `f32[M, 4]`), or None (`?`).
    Hidden ones: "workspace" and "counters" (a split kernel's), and "tensormap": the 128-byte
    TMA descriptor of tensor `argument` (dtype: its element type) with box `box`, passed by
    value (`__grid_constant__`; `tilec.lowering.tma`)."""

    name: str
    kind: str
    argument: str
    dtype: str
    axis: int | None = None
    dim: str | int | None = None
    box: tuple[int, ...] | None = None  # a "tensormap": its box, elements per dimension
    fold: int = 0  # a "tensormap" of a tile's rows folded into 5 dimensions: those rows

    def __post_init__(self) -> None:
        if self.box is not None:  # from JSON: a list
            object.__setattr__(self, "box", tuple(int(b) for b in self.box))


def known_multiple(value: int) -> int:
    """The largest power of two up to `DIVISOR` that divides `value` (0: `DIVISOR`): what a
    specialization records of an extent or stride."""
    if value == 0:
        return DIVISOR
    return min(DIVISOR, value & -value)


def recorded_multiple(kind: str, axis: int, rank: int, value: int, element_bytes: int) -> int:
    """What a specialization records of extent or stride `value` (of dimension `axis` of a
    rank-`rank` tensor of `element_bytes`-byte elements): its `known_multiple` if that is
    `DIVISOR`; else, for a stride or the last extent, that multiple up to the elements of
    one 16-byte vector (what a vector along the last dimension needs, and no more); for any
    other extent nothing -- so that 40 and 44 rows, or rows of 900 and 1000 f32, share a
    kernel."""
    m = known_multiple(value)
    if m == DIVISOR:
        return m
    if kind == "extent" and axis != rank - 1:
        return 1
    return min(m, max(1, ALIGNMENT // element_bytes))


@dataclass(frozen=True)
class Specialization:
    """What a kernel was compiled assuming about its arguments, by parameter name: pointers
    aligned to `ALIGNMENT` bytes (`aligned`), strides equal to 1 (`unit`), extents and strides
    that are multiples of `DIVISOR` (`divisible`), and of smaller powers of two (`multiples`:
    (name, 2, 4 or 8) -- a row of 1000 f16 is 2000 bytes, a whole number of 16-byte vectors
    though not of 16 elements), and float scalars that are `positive`: finite and above zero
    (not 0, -0.0, NaN or an infinity, as the parameter's type holds the value), which lets
    `hoist-scale` take `max(x * c)` as `max(x) * c`, and tensors (pointer names) that are
    `dense`: row-major with no gaps, which lets `flatten` run an element-wise kernel over them
    as one dimension. The lowering folds these into the code (a unit stride becomes the
    constant 1); a launch whose arguments break one is refused."""

    aligned: frozenset[str] = frozenset()
    unit: frozenset[str] = frozenset()
    divisible: frozenset[str] = frozenset()
    multiples: frozenset[tuple[str, int]] = frozenset()
    positive: frozenset[str] = frozenset()
    dense: frozenset[str] = frozenset()

    def multiple(self, name: str) -> int:
        """The power of two the extent or stride `name` is known to be a multiple of."""
        if name in self.divisible:
            return DIVISOR
        return dict(self.multiples).get(name, 1)

    def to_json(self) -> dict[str, list[Any]]:
        facts: dict[str, list[Any]] = {
            k: sorted(getattr(self, k)) for k in ("aligned", "unit", "divisible")
        }
        facts["multiples"] = [[n, m] for n, m in sorted(self.multiples)]
        if self.positive:  # absent when empty: the keys of kernels without it stay as they were
            facts["positive"] = sorted(self.positive)
        if self.dense:  # the same
            facts["dense"] = sorted(self.dense)
        return facts

    def __bool__(self) -> bool:
        return bool(
            self.aligned or self.unit or self.divisible or self.multiples or self.positive
        ) or bool(self.dense)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Specialization:
        facts = {k: frozenset(data.get(k, ())) for k in ("aligned", "unit", "divisible")}
        multiples = frozenset((str(n), int(m)) for n, m in data.get("multiples", ()))
        positive = frozenset(map(str, data.get("positive", ())))
        dense = frozenset(map(str, data.get("dense", ())))
        return cls(**facts, multiples=multiples, positive=positive, dense=dense)

    @classmethod
    def of_values(
        cls,
        aligned: Iterable[str],
        unit: Iterable[str],
        multiples_of: Mapping[str, int],
        positive: Iterable[str] = (),
        dense: Iterable[str] = (),
    ) -> Specialization:
        """The facts of pointers `aligned`, unit strides `unit`, the other extents and
        strides known to be multiples of `multiples_of[name]` (`recorded_multiple`), the
        float scalars `positive`, and the tensors `dense`."""
        divisible, multiples = set(), set()
        for name, m in multiples_of.items():
            if m == DIVISOR:
                divisible.add(name)
            elif m > 1:
                multiples.add((name, m))
        return cls(
            frozenset(aligned),
            frozenset(unit),
            frozenset(divisible),
            frozenset(multiples),
            frozenset(positive),
            frozenset(dense),
        )


# The kernel attributes that carry a `Specialization` in the IR, by field: `tilec.aligned =
# ["x", "y"]`, `tilec.unit = ["x.stride.1"]`, `tilec.divisible = ["x.extent.0"]`,
# `tilec.positive = ["scale"]` (sorted parameter names), `tilec.multiples = [["x.stride.0",
# 8]]` (an absent attribute is an empty set). Passes (vectorize, hoist-scale) and the lowering
# read these, and nothing else, so both act on the same facts.
SPECIALIZATION_ATTRIBUTES = {
    "aligned": "tilec.aligned",
    "unit": "tilec.unit",
    "divisible": "tilec.divisible",
    "multiples": "tilec.multiples",
    "positive": "tilec.positive",
    "dense": "tilec.dense",
}
# The scalar types a `positive` fact may name.
FLOAT_SCALARS = ("f16", "bf16", "f32", "f64")


def kernel_specialization(kernel: FuncOp) -> Specialization:
    """What `kernel` was compiled assuming about its arguments (its `tilec.aligned`,
    `tilec.unit`, `tilec.divisible`, `tilec.multiples` and `tilec.positive` attributes)."""
    facts: dict[str, frozenset[Any]] = {}
    for field_name, attr in SPECIALIZATION_ATTRIBUTES.items():
        found = kernel.attributes.get(attr)
        if field_name == "multiples":
            pairs = found.elements if found else ()
            facts[field_name] = frozenset(
                (str(p.elements[0].value), int(p.elements[1].value)) for p in pairs
            )
        else:
            facts[field_name] = frozenset(map(str, found.value)) if found else frozenset()
    return Specialization(**facts)


def compiled_specialization(kernel: FuncOp, given: Specialization) -> Specialization:
    """The facts a compiled kernel's parameters carry: `given` (the call's), or, where
    `flatten` ran the kernel as one dimension, those of its views as the pass rewrote them in
    the IR (`tilec.flattened`). What the lowering and the launcher are handed."""
    return kernel_specialization(kernel) if "tilec.flattened" in kernel.attributes else given


def set_kernel_specialization(kernel: FuncOp, specialization: Specialization) -> None:
    """Record `specialization` on `kernel` (replacing what it said). A name that is not a
    parameter of the right kind (a pointer for `aligned`, a stride for `unit`, an extent or a
    stride for `divisible`, a float scalar for `positive`) is a ValueError."""
    params = kernel_parameters(kernel)
    kinds = {p.name: p.kind for p in params}
    kinds.update(
        {p.name: "float scalar" for p in params if p.kind == "scalar" and p.dtype in FLOAT_SCALARS}
    )
    numbers = ("extent", "stride")
    allowed = {"aligned": ("pointer",), "unit": ("stride",), "divisible": numbers}
    allowed["multiples"] = numbers
    allowed["positive"] = ("float scalar",)
    allowed["dense"] = ("pointer",)
    for field_name, attr in SPECIALIZATION_ATTRIBUTES.items():
        entries = sorted(getattr(specialization, field_name))
        for entry in entries:
            name = entry[0] if field_name == "multiples" else entry
            if kinds.get(name) not in allowed[field_name]:
                raise ValueError(
                    f"kernel '{kernel.sym_name}' has no {' or '.join(allowed[field_name])} "
                    f"parameter '{name}' (for '{field_name}')"
                )
            if field_name == "multiples" and entry[1] not in (2, 4, 8):
                raise ValueError(
                    f"'{name}' is said to be a multiple of {entry[1]}: multiples are 2, 4 or 8 "
                    f"(of {DIVISOR}: 'divisible')"
                )
        if not entries:
            kernel.attributes.pop(attr, None)
        elif field_name == "multiples":
            kernel.attributes[attr] = ArrayAttr(
                tuple(ArrayAttr((StringAttr(n), IntegerAttr(m))) for n, m in entries)
            )
        else:
            kernel.attributes[attr] = ArrayAttr(tuple(StringAttr(n) for n in entries))


ASSUMPTIONS = ("aligned", "unit", "divisible", "positive", "dense")


def assumed_specialization(kernel: FuncOp, assumptions: Iterable[str]) -> Specialization:
    """The specialization that blanket `assumptions` (a subset of `ASSUMPTIONS`) make for
    every argument of `kernel`, as Triton assumes for its defaults: `aligned` -- every pointer
    is 16-byte aligned; `unit` -- every tensor's last stride is 1; `divisible` -- every extent,
    and every stride that `unit` does not make 1, is a multiple of 16; `positive` -- every
    float scalar is finite and above zero; `dense` -- every tensor is row-major with no gaps
    (element (i, j) of an [M, N] tensor at i * N + j)."""
    assumptions = set(assumptions)
    unknown = assumptions - set(ASSUMPTIONS)
    if unknown:
        raise ValueError(f"unknown assumption(s) {', '.join(sorted(unknown))}")
    params = kernel_parameters(kernel)
    ranks = {p.argument: p.axis + 1 for p in params if p.kind == "stride"}
    aligned = {p.name for p in params if p.kind == "pointer"} if "aligned" in assumptions else ()
    unit = set()
    if "unit" in assumptions:
        unit = {p.name for p in params if p.kind == "stride" and p.axis == ranks[p.argument] - 1}
    divisible = set()
    if "divisible" in assumptions:
        divisible = {p.name for p in params if p.kind in ("extent", "stride")} - unit
    positive = ()
    if "positive" in assumptions:
        positive = {p.name for p in params if p.kind == "scalar" and p.dtype in FLOAT_SCALARS}
    dense = {p.name for p in params if p.kind == "pointer"} if "dense" in assumptions else ()
    return Specialization(
        frozenset(aligned),
        frozenset(unit),
        frozenset(divisible),
        positive=frozenset(positive),
        dense=frozenset(dense),
    )


@dataclass(frozen=True)
class GridAxis:
    """One grid axis: `ceil(extent of dim / tile)` blocks (`tile` 1: one block per index)."""

    dim: str
    tile: int


@dataclass(frozen=True)
class SplitAxis:
    """The split axis of a kernel that `split-reduction` split: grid axis `len(grid)`, whose
    count S the launcher chooses (`pinned`: fixed; 0: chosen). The loop it splits runs over
    dimension `dim` (a name, or a fixed extent) by `step`, `ceil(extent / step)` iterations
    that each load `trip_bytes`; a workspace slot, one per (block of the other axes, split),
    is `slot_bytes`; the combine reads `rows` slots a round. `atomic`: the kernel's atomics
    combine the partials instead, each split block adding its own (no workspace). `scan`: the
    loop stores as it goes (a split scan, `passes/split_scan.py`): each block waits for the
    partials of the chunks before its own, through S flags per block of the other axes in the
    counters besides its two counters (docs/abi.md). `passes` (non-empty): a multi-pass kernel
    (`passes/split_passes.py`: reductions over one extent, then a loop that applies them), the
    bytes an iteration of each pass moves; its S >= len(passes) blocks (or 1) run one pass each
    by ticket, about S / len(passes) a pass, each pass's after the one before; counters as a
    scan's."""

    dim: str | int
    step: int
    slot_bytes: int
    trip_bytes: int
    rows: int
    pinned: int = 0
    atomic: int = 0  # 1: the epilogue's atomics combine the partials (no workspace)
    # A split GEMM (the loop accumulates a dot): its BM x BN tile and operand bytes, which the
    # launcher's model of it needs (`tilec.passes.wgmma_model.best_split`); 0 otherwise.
    dot_bm: int = 0
    dot_bn: int = 0
    dot_bytes: int = 0
    dot_dims: str = ""  # the grid's dimensions, "M,N": A and B hold (M + N) x K elements
    scan: int = 0  # 1: a split scan (its chunks run twice; counters 2 + S per other block)
    passes: tuple[int, ...] = ()  # a split multi-pass kernel: each pass's bytes an iteration

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))  # (JSON and attributes: lists)

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "passes": list(self.passes)}


def split_axis(kernel: FuncOp) -> SplitAxis | None:
    """The kernel's split axis (`tilec.split`), None when it has none."""
    attr = kernel.attributes.get("tilec.split")
    if attr is None:
        return None
    return SplitAxis(**{str(k): v for k, v in attr.value})


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
    written: frozenset[str] = frozenset()  # the tensor arguments the kernel stores into
    split: SplitAxis | None = None  # the split axis, and the hidden parameters with it
    # Persistent blocks (`tilec.persistent`): `grid` names the output tiles; the launch has
    # min(tiles, the blocks the GPU holds at once) blocks along x, each walking tiles.
    persistent: bool = False
    # Warp specialization (`tilec.producer_warps`): warps beyond `num_warps` (the computing
    # warps, whose layouts the kernel's are) that issue the TMA copies; the block has both.
    producer_warps: int = 0
    # Thread-block clusters (`tilec.cluster`): blocks a cluster along grid x, y, z. The PTX
    # requires this shape (`.reqnctapercluster`), so the launch rounds each grid axis up to a
    # multiple of it (docs/abi.md); (1, 1, 1): no clusters.
    cluster: tuple[int, int, int] = (1, 1, 1)
    # A kernel `flatten` ran as one dimension (`tilec.flattened`): (F, D1, .., Dk), its
    # tensors' one dimension and the dimensions of the tensors it is launched on, each
    # viewed as its elements in order (the launcher makes the views); (): not flattened.
    flattened: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # From JSON: lists.
        object.__setattr__(self, "cluster", tuple(int(c) for c in self.cluster))
        object.__setattr__(self, "flattened", tuple(str(d) for d in self.flattened))

    @property
    def clustered(self) -> bool:
        return self.cluster != (1, 1, 1)

    @property
    def num_threads(self) -> int:
        return WARP_SIZE * (self.num_warps + self.producer_warps)

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.num_threads, 1, 1)

    def to_json(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "parameters": [vars(p) for p in self.parameters],
            "grid": [[g.dim, g.tile] for g in self.grid],
            "num_warps": self.num_warps,
            "shared_bytes": self.shared_bytes,
            "tile_sizes": self.tile_sizes,
            "max_extents": self.max_extents,
            "written": sorted(self.written),
            "split": self.split.to_json() if self.split is not None else None,
            "persistent": self.persistent,
            "producer_warps": self.producer_warps,
        }
        if self.clustered:  # absent without clusters: those kernels' JSON stays as it was
            data["cluster"] = list(self.cluster)
        if self.flattened:  # the same
            data["flattened"] = list(self.flattened)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelABI:
        return cls(
            data["name"],
            tuple(Parameter(**p) for p in data["parameters"]),
            tuple(GridAxis(d, t) for d, t in data["grid"]),
            data["num_warps"],
            data["shared_bytes"],
            dict(data["tile_sizes"]),
            dict(data["max_extents"]),
            frozenset(data["written"]),
            SplitAxis(**data["split"]) if data.get("split") else None,
            bool(data.get("persistent", False)),
            int(data.get("producer_warps", 0)),
            tuple(data.get("cluster", (1, 1, 1))),
            tuple(data.get("flattened", ())),
        )


def _pairs(kernel: FuncOp, attr: str) -> dict[str, int]:
    a = kernel.attributes.get(attr)
    return {str(k): int(v) for k, v in a.value} if a is not None else {}


def argument_name(kernel: FuncOp, index: int) -> str:
    arg = kernel.arguments[index]
    return arg.name_hint or f"arg{index}"


def kernel_parameters(kernel: FuncOp) -> tuple[Parameter, ...]:
    """The parameters of `kernel`, in order (they need no pass: the frontend's IR has them)."""
    params: list[Parameter] = []
    for i, arg in enumerate(kernel.arguments):
        name = argument_name(kernel, i)
        t: Type = arg.type
        if isinstance(t, TensorType):
            params.append(Parameter(name, "pointer", name, str(t.element)))
            for axis, dim in enumerate(t.shape):
                params.append(Parameter(f"{name}.extent.{axis}", "extent", name, "i64", axis, dim))
            for axis in range(t.rank):
                params.append(Parameter(f"{name}.stride.{axis}", "stride", name, "i64", axis))
        else:
            params.append(Parameter(name, "scalar", name, str(t)))
    if "tilec.split" in kernel.attributes:
        # Hidden, after every argument's: what the split blocks share (docs/abi.md).
        params.append(Parameter(WORKSPACE_PARAMETER, "workspace", "", "u8"))
        params.append(Parameter(COUNTERS_PARAMETER, "counters", "", "u32"))
    for view, box, fold in tensormap_boxes(kernel):
        # Hidden, last: the tensor maps of the TMA copies (one per argument and box).
        if not (isinstance(view, BlockArgument) and view.owner is kernel.body.block):
            raise ValueError("tile.tma_copy reads a view that is not a kernel argument")
        name = argument_name(kernel, view.index)
        params.append(
            Parameter(
                tensormap_parameter_name(name, box, fold),
                "tensormap",
                name,
                str(view.type.element),
                box=box,
                fold=fold,
            )
        )
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
        shared_bytes(kernel),
        tile_sizes,
        _pairs(kernel, "tilec.max_extent"),
        frozenset(
            argument_name(kernel, op.view.index)
            for op in kernel.walk()
            if isinstance(op, (T.StoreOp, ScatterOp, *ATOMIC_OPS))
            and isinstance(op.view, BlockArgument)
            and op.view.owner is kernel.body.block
        ),
        split_axis(kernel),
        PERSISTENT_ATTRIBUTE in kernel.attributes,
        int(kernel.attributes["tilec.producer_warps"].value)
        if "tilec.producer_warps" in kernel.attributes
        else 0,
        kernel_cluster(kernel),
        tuple(str(d) for d in kernel.attributes["tilec.flattened"].value)
        if "tilec.flattened" in kernel.attributes
        else (),
    )


def module_abi(module) -> dict[str, KernelABI]:
    """`kernel_abi` of every kernel of a module, by name."""
    return {f.sym_name: kernel_abi(f) for f in module.functions}
