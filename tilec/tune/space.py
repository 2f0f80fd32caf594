"""The tuner's search space: the decisions the passes let a kernel pin, and what each took.

A *decision* is one thing a pass decides and lets the author (or the tuner) pin:

| decision | pinned by | decided by |
| --- | --- | --- |
| `tile.D` (each tile symbol `BD` not used whole) | `@kernel(tile={"D": ...})` | tiling |
| `warps` | `@kernel(warps=...)` | tiling, assign-layouts |
| `stages` (kernels whose loops stream a tile through shared memory) | `@kernel(stages=...)` | pipeline |
| `split` (kernels `split-reduction` split) | `@kernel(split=...)` | split-reduction |
| `tiling.group_m` (dots over a 2-D grid) | pass option | tiling |
| `tiling.wgmma`, `tiling.mma` (f16/bf16 dots) | pass options | tiling |
| `tiling.m_major_a` (a wgmma matmul whose A is stored [K, M]: read M-major by its descriptor, or into registers every step) | pass option | tiling |
| `tiling.staged_a` (wgmma dots whose A is loaded before their loop: held in registers, or read from shared memory every step) | pass option | tiling |
| `tiling.producer` (loops of two wgmma dots, attention's: tiled for a producer warpgroup, or for the warps alone) | pass option | tiling |
| `assign-layouts.min_blocks_per_sm` (occupancy) | pass option | assign-layouts |
| `stages` 1 or 2 (kernels whose loops load tiles into registers that could be issued an iteration ahead: register prefetch) | `@kernel(stages=...)` | pipeline |
| `tiling.inner_first` (kernels without dots whose grid tiling put in memory's order: that order, or the declared one) | pass option | tiling |
| `flatten.enable` (element-wise kernels over dense tensors that flatten ran as one dimension: so, or over their own grid) | pass option | flatten |
| `walk-tiles.enable` (row kernels whose rows all read one tile, a norm's weight: blocks walk the rows, loading it once) | pass option | walk-tiles |
| `defer-reduction.enable` (loops whose reductions it deferred) | pass option | defer-reduction |
| `assign-layouts.scan_runs` (scans along rows whose operand holds short runs: converted to 16-byte runs a thread, or scanned where they are) | pass option | assign-layouts |
| `mask-bounds.middle` (loops whose masks show a middle range of tiles entirely: a sliding window's; that range run without them, or masked) | pass option | mask-bounds |
| `pipeline.dots_in_flight` (loops with a wgmma chain) | pass option | pipeline |
| `pipeline.tma` (streamed loops on sm_90a: copies by the TMA unit or by cp.async) | pass option | pipeline |
| `pipeline.persistent` (kernels whose main loop the TMA unit fills: persistent blocks or one a tile) | pass option | pipeline |
| `pipeline.warp_specialize` (the same kernels: a producer warpgroup issues the copies, or the computing warps do) | pass option | pipeline |
| `pipeline.cluster` (GEMMs whose loop the TMA unit fills: 2, two blocks of neighbouring row tiles share the other operand's tile by multicast, or 1) | pass option | pipeline |
| `pipeline.pingpong` (warp-specialized kernels of two or more consumer warpgroups whose loops have several wgmma dots: they take turns, or run free) | pass option | pipeline |
| `pipeline.staged_tma` (warp-specialized kernels with a tile staged before their loops, attention's q: the producer's TMA unit copies it, or the consumers stage it) | pass option | pipeline |

The values come from where the compiler declares them: warp counts and the stage range from
the frontend's checks of `@kernel(...)` (`tilec.frontend.sema_common`), tile sizes are the
powers of two the frontend accepts, bounded by the problem's extents, and the pass options from
the passes' `Options` (a decision whose option a pass does not declare is left out). Which
decisions a kernel has is read off the heuristic's own compilation of it (`applicable`): a
kernel without a sequential loop has no `stages`, one without a dot no `group_m`.

A *config* is a partial assignment of decisions (`{"warps": 8, "tile.M": 64}`): what is not
in it is left to the heuristics, so `{}` is the heuristic's choice. `split_config` turns one
into the jit's `options` (pins) and `pass_options`; `read_back` reads, from a compiled kernel,
what every decision actually became — the candidates table shows that, and two configs that
come to the same code are timed once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilec.dialects import scf, shared, tma
from tilec.dialects import tile as T
from tilec.dialects.builtin import (
    CLUSTER_ATTRIBUTE,
    PERSISTENT_ATTRIBUTE,
    PRODUCER_ATTRIBUTE,
    STAGED_A_ATTRIBUTE,
    FuncOp,
)
from tilec.dialects.tile import MmaLayout
from tilec.dialects.warp_specialize import PINGPONG_ATTRIBUTE, WarpSpecializeOp
from tilec.frontend.sema_common import _MAX_STAGES, _WARP_COUNTS
from tilec.ir.types import bf16, f16
from tilec.lowering.wgmma import chained_wgmma_slots, is_wgmma_dot
from tilec.passes.flatten import FLATTENED_ATTRIBUTE
from tilec.passes.mask_bounds import MIDDLE_ATTR
from tilec.passes.register_prefetch import REGISTER_PREFETCH_ATTRIBUTE
from tilec.passes.scan_layouts import SCAN_RUNS_ATTRIBUTE
from tilec.passes.specialize import attribute_pairs as _pairs
from tilec.passes.tiling_order import INNER_FIRST_ATTRIBUTE
from tilec.passes.walk_tiles import WALK_TILES_ATTRIBUTE
from tilec.passmanager import registered_passes

__all__ = [
    "Config",
    "Decision",
    "applicable",
    "config_text",
    "kernel_line",
    "read_back",
    "split_config",
]

Config = Mapping[str, Any]

# Kernel pins: the decision's name is the `@kernel(...)` option's.
PIN_DECISIONS = ("warps", "stages", "split")
# The largest tile size the tuner tries along one dimension, and the smallest: tiles past 256
# hold more than a block's registers for any dot, and the compiler never chooses 1 itself (a
# size of 1 changes what the loop variable means).
MAX_TILE = 256
MIN_TILE = 2
SPLIT_VALUES = (1, 2, 4, 8, 16, 32, 64)
GROUP_M_VALUES = (1, 2, 4, 8, 16)
MIN_BLOCKS_VALUES = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Decision:
    """One decision the tuner may set: its name, its values in order (neighbours are
    adjacent), and where its setting goes (`pin`: `@kernel(...)`; else `pass.option`)."""

    name: str
    values: tuple[Any, ...]
    pin: bool

    def nearest_first(self, current: Any) -> list[Any]:
        """The values other than `current`, the closest (in the order of `values`) first."""
        others = [v for v in self.values if v != current]
        if current not in self.values:
            return others
        at = self.values.index(current)
        return sorted(others, key=lambda v: (abs(self.values.index(v) - at), self.values.index(v)))


def _pass_option(name: str) -> dataclasses.Field | None:
    """The declared option `pass.option` (None when that pass declares no such option)."""
    pass_name, _, option_name = name.partition(".")
    cls = registered_passes().get(pass_name)
    if cls is None:
        return None
    return next((f for f in dataclasses.fields(cls.Options) if f.name == option_name), None)


def _option_decision(name: str, values: Sequence[Any]) -> Decision | None:
    field = _pass_option(name)
    if field is None:
        return None
    return Decision(name, tuple(values), pin=False)


def _powers_of_two(low: int, high: int) -> tuple[int, ...]:
    values, v = [], 1
    while v <= high:
        if v >= low:
            values.append(v)
        v *= 2
    return tuple(values)


def _power_of_two_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _f16_dots(kernel: FuncOp) -> list[T.DotOp]:
    return [
        op for op in kernel.walk() if isinstance(op, T.DotOp) and op.a.type.element in (f16, bf16)
    ]


def _streamed_buffers(kernel: FuncOp) -> list[shared.AllocSharedOp]:
    return [
        op
        for op in kernel.walk()
        if isinstance(op, shared.AllocSharedOp)
        and any(isinstance(u, _COPIES) for u in op.result.uses)
        and not tma.is_barrier_buffer(op.result.type)
    ]


_COPIES = (shared.AsyncCopyOp, tma.TmaCopyOp)  # what fills a streamed buffer


def _tile_dims(kernel: FuncOp) -> dict[str, int]:
    """The tile size chosen per dimension (symbol `BD` tiles dimension `D`)."""
    return {
        str(symbol)[1:]: int(size)
        for symbol, size in _pairs(kernel, "tilec.tile_sizes")
        if str(symbol).startswith("B")
    }


def _a_stored_transposed(dot: T.DotOp) -> bool:
    """Whether a compiled dot reads a 16-bit A stored [K, M] (`tile.load_shared {transposed}`
    of its buffer): where `tiling.m_major_a` decides how."""
    a = dot.a
    return (
        isinstance(getattr(a, "op", None), shared.LoadSharedOp)
        and "transposed" in a.op.attributes
        and a.type.element in (f16, bf16)
    )


def read_back(kernel: FuncOp) -> dict[str, Any]:
    """What each decision became in `kernel` (compiled through the passes): `tile.D` per
    tiled dimension, `warps`, `stages` (slots of the streamed buffers; 1 when none),
    `tiling.group_m` (1: launch order), `path` (`wgmma`, `mma` or `fma` for a kernel with
    dots, else absent), `tiling.m_major_a` where a wgmma dot's A is stored [K, M] (1: read by
    its descriptor), `tiling.staged_a` where a wgmma dot reads an A loaded before its loop, `tiling.producer`
    (1: tiled for a producer warpgroup) where a loop has two wgmma dots, `split` (`auto`: chosen at launch), the occupancy the kernel asks
    ptxas for (`assign-layouts.min_blocks_per_sm`, 0: none) and, where `defer-reduction`
    rewrote a loop, `defer-reduction.enable`; where a scan's operand could take 16-byte runs,
    `assign-layouts.scan_runs`; where `mask-bounds` split off the middle range
    of tiles a window shows entirely, `mask-bounds.middle`; where a pipelined loop carries a wgmma chain,
    `pipeline.dots_in_flight` (the groups it leaves in flight, 0 or 1); where loops stream,
    `pipeline.tma` (1: the TMA unit copies them); where those are, `pipeline.persistent` (1:
    persistent blocks walk the tiles) and `pipeline.warp_specialize` (1: a producer warpgroup
    issues the copies), and in such a GEMM `pipeline.cluster` (its blocks a cluster)."""
    decisions: dict[str, Any] = {
        f"tile.{d}": size for d, size in sorted(_tile_dims(kernel).items())
    }
    warps = kernel.attributes.get("tilec.num_warps")
    if warps is not None:
        decisions["warps"] = int(warps.value)
    buffers = _streamed_buffers(kernel)
    decisions["stages"] = max((b.result.type.shape[0] for b in buffers), default=1)
    prefetch = kernel.attributes.get(REGISTER_PREFETCH_ATTRIBUTE)
    if not buffers and prefetch is not None and prefetch.value:
        decisions["stages"] = 2  # a tile loaded one iteration ahead, in registers
    if INNER_FIRST_ATTRIBUTE in kernel.attributes:
        decisions["tiling.inner_first"] = True
    walk = kernel.attributes.get(WALK_TILES_ATTRIBUTE)
    if walk is not None:
        decisions["walk-tiles.enable"] = bool(walk.value)
    if FLATTENED_ATTRIBUTE in kernel.attributes:
        decisions["flatten.enable"] = True
    dots = [op for op in kernel.walk() if isinstance(op, T.DotOp)]
    if dots:
        layout = dots[0].result.type.layout
        if isinstance(layout, MmaLayout):
            decisions["path"] = "wgmma" if layout.version == 3 else "mma"
        else:
            decisions["path"] = "fma"
        group = kernel.attributes.get("tilec.group_m")
        decisions["tiling.group_m"] = int(group.value) if group is not None else 1
    if any(_a_stored_transposed(d) for d in dots) and decisions.get("path") == "wgmma":
        decisions["tiling.m_major_a"] = int(
            any(getattr(d.result.type.layout, "natural_rows", False) for d in dots)
        )
    if dots and _turn_candidate(kernel):
        decisions["tiling.producer"] = int(PRODUCER_ATTRIBUTE in kernel.attributes)
    if _staged_before_loop(kernel):
        staged = kernel.attributes.get(STAGED_A_ATTRIBUTE)
        decisions["tiling.staged_a"] = staged.value if staged is not None else "registers"
    if kernel.attributes.get("tilec.split") is not None:
        pinned = kernel.attributes.get("tilec.pinned_split")
        decisions["split"] = int(pinned.value) if pinned is not None else "auto"
    blocks = kernel.attributes.get("tilec.min_blocks_per_sm")
    decisions["assign-layouts.min_blocks_per_sm"] = int(blocks.value) if blocks is not None else 0
    if kernel.attributes.get("tilec.deferred_reductions") is not None:
        decisions["defer-reduction.enable"] = True
    scan_runs = kernel.attributes.get(SCAN_RUNS_ATTRIBUTE)
    if scan_runs is not None:
        decisions["assign-layouts.scan_runs"] = bool(scan_runs.value)
    if kernel.attributes.get(MIDDLE_ATTR) is not None:
        decisions["mask-bounds.middle"] = True
    if buffers:
        decisions["pipeline.tma"] = int(any(isinstance(op, tma.TmaCopyOp) for op in kernel.walk()))
        if decisions["pipeline.tma"]:
            decisions["pipeline.persistent"] = int(PERSISTENT_ATTRIBUTE in kernel.attributes)
            decisions["pipeline.warp_specialize"] = int(
                any(isinstance(op, WarpSpecializeOp) for op in kernel.walk())
            )
            if dots:
                cluster = kernel.attributes.get(CLUSTER_ATTRIBUTE)
                decisions["pipeline.cluster"] = (
                    math.prod(int(e.value) for e in cluster.elements) if cluster else 1
                )
            if _turn_candidate(kernel):
                decisions["pipeline.pingpong"] = int(
                    any(PINGPONG_ATTRIBUTE in op.attributes for op in kernel.walk())
                )
            staged = _staged_tile(kernel)
            if staged is not None:
                decisions["pipeline.staged_tma"] = int(staged)
    if any(_chained(op) for op in kernel.walk() if isinstance(op, scf.ForOp)):
        decisions["pipeline.dots_in_flight"] = max(
            scf.dots_in_flight(op) for op in kernel.walk() if isinstance(op, scf.ForOp)
        )
    return decisions


def _staged_tile(kernel: FuncOp) -> bool | None:
    """In a warp-specialized kernel, whether the tile staged before its loops (attention's q)
    is copied by the producer's TMA unit (True) or stored by the consumers (False); None when
    no tile is staged there (passes/pipeline_staged_tma.py)."""
    for region in (op for op in kernel.walk() if isinstance(op, WarpSpecializeOp)):
        if any(isinstance(op, tma.TmaCopyOp) for op in region.producer.block.ops):
            return True
        if any(isinstance(op, shared.StoreSharedOp) for op in region.consumer.block.ops):
            return False
    return None


def _turn_candidate(kernel: FuncOp) -> bool:
    """Whether `kernel` has a loop of two or more wgmma dots (attention's), whose consumer
    warpgroups could take turns once warp-specialized (passes/pipeline_pingpong.py)."""
    return any(
        isinstance(op, scf.ForOp) and sum(is_wgmma_dot(d) for d in op.body.block.ops) >= 2
        for op in kernel.walk()
    )


def _staged_before_loop(kernel: FuncOp) -> bool:
    """Whether a wgmma dot of `kernel` reads an A loaded from shared memory before its loop
    (attention's q): where `tiling.staged_a` decides how."""
    for op in kernel.walk():
        if not (isinstance(op, T.DotOp) and is_wgmma_dot(op)):
            continue
        a = op.a
        load = getattr(a, "op", None)
        if isinstance(load, shared.LoadSharedOp) and load.parent is not op.parent:
            return True
    return False


def _chained(loop: scf.ForOp) -> bool:
    """Whether `loop` carries a wgmma chain that `pipeline` could leave in flight."""
    streamed = any(isinstance(op, _COPIES) for op in loop.body.block.ops)
    return streamed and bool(chained_wgmma_slots(loop))


def applicable(
    heuristic: FuncOp,
    extents: Mapping[str, int],
    arch: str,
    *,
    fixed: Sequence[str] = (),
) -> list[Decision]:
    """The decisions the tuner searches for a kernel, read off the heuristic's compilation of
    it (`heuristic`) at the problem's `extents` for `arch`. `fixed` names decisions the
    author pinned (in the source or on the command line): those are not searched."""
    decisions: list[Decision] = []
    chosen = read_back(heuristic)
    for dim in sorted(_tile_dims(heuristic)):
        if f"tile.{dim}" in fixed:
            continue
        high = min(MAX_TILE, _power_of_two_at_least(extents.get(dim, MAX_TILE)))
        values = set(_powers_of_two(MIN_TILE, high)) | {chosen[f"tile.{dim}"]}
        if len(values) > 1:
            decisions.append(Decision(f"tile.{dim}", tuple(sorted(values)), pin=True))
    if "warps" not in fixed:
        decisions.append(Decision("warps", tuple(_WARP_COUNTS), pin=True))
    if "stages" not in fixed:
        if _streamed_buffers(heuristic):
            decisions.append(Decision("stages", tuple(range(1, _MAX_STAGES + 1)), pin=True))
        elif REGISTER_PREFETCH_ATTRIBUTE in heuristic.attributes or (
            WALK_TILES_ATTRIBUTE in heuristic.attributes
        ):
            # loads a loop (or the walk over rows walk-tiles would make) may issue an
            # iteration ahead: one stage in registers, or two
            decisions.append(Decision("stages", (1, 2), pin=True))
    if "split" in chosen and "split" not in fixed:
        decisions.append(Decision("split", SPLIT_VALUES, pin=True))
    dots = _f16_dots(heuristic)
    options: list[tuple[str, Sequence[Any]]] = []
    if dots and len(_pairs(heuristic, "tilec.grid")) >= 2:
        options.append(("tiling.group_m", GROUP_M_VALUES))
    if dots:
        if arch == "sm_90a":
            options.append(("tiling.wgmma", (True, False)))
        options.append(("tiling.mma", (True, False)))
    options.append(("assign-layouts.min_blocks_per_sm", MIN_BLOCKS_VALUES))
    if "walk-tiles.enable" in chosen:
        options.append(("walk-tiles.enable", (True, False)))
    if "flatten.enable" in chosen:  # one dimension of the elements, or the kernel's own grid
        options.append(("flatten.enable", (True, False)))
    if "tiling.inner_first" in chosen:  # the grid reordered along memory, or as declared
        options.append(("tiling.inner_first", (True, False)))
    if "defer-reduction.enable" in chosen:
        options.append(("defer-reduction.enable", (True, False)))
    if "assign-layouts.scan_runs" in chosen:
        options.append(("assign-layouts.scan_runs", (True, False)))
    if "mask-bounds.middle" in chosen:
        options.append(("mask-bounds.middle", (True, False)))
    if "tiling.staged_a" in chosen and arch == "sm_90a":
        options.append(("tiling.staged_a", ("registers", "shared")))
    if "tiling.m_major_a" in chosen and arch == "sm_90a":
        options.append(("tiling.m_major_a", (True, False)))
    if "tiling.producer" in chosen and arch == "sm_90a":
        # One move between the two tilings of a chain (each with its warps, tiles, where q is
        # read and the pipeline's choices following), which the other decisions reach only
        # together.
        options.append(("tiling.producer", (0, 1)))
    if "pipeline.dots_in_flight" in chosen and arch == "sm_90a":
        options.append(("pipeline.dots_in_flight", (0, 1)))
    if chosen.get("pipeline.tma") == 1 and arch == "sm_90a":  # where the unit copies them all
        options.append(("pipeline.tma", (0, 1)))
    # On by default only where pipeline clusters the kernel or tiling plans a walk over its
    # tiles (`wgmma_model.walk_clocks`): searched wherever the TMA unit fills the loops, as
    # the heuristic's kernel shows.
    if "pipeline.persistent" in chosen and arch == "sm_90a":
        options.append(("pipeline.persistent", (0, 1)))
    if "pipeline.warp_specialize" in chosen and arch == "sm_90a":
        options.append(("pipeline.warp_specialize", (0, 1)))
        if _turn_candidate(heuristic):
            options.append(("pipeline.pingpong", (0, 1)))
    if "pipeline.staged_tma" in chosen and arch == "sm_90a":
        options.append(("pipeline.staged_tma", (0, 1)))
    if "pipeline.cluster" in chosen and arch == "sm_90a":
        options.append(("pipeline.cluster", (1, 2)))  # two blocks share an operand (untimed)
    for name, values in options:
        if name in fixed:
            continue
        decision = _option_decision(name, values)
        if decision is not None:
            decisions.append(decision)
    return decisions


def current_value(decision: Decision, config: Config, built: Mapping[str, Any]) -> Any:
    """The value `decision` has in a candidate: its setting in `config`, else what the
    compiled candidate shows (`built`, `read_back`'s result), else the option's default."""
    if decision.name in config:
        return config[decision.name]
    if decision.name == "tiling.wgmma":
        return built.get("path") == "wgmma"
    if decision.name == "tiling.mma":
        return built.get("path") in ("mma", "wgmma")
    if decision.name in built:
        return built[decision.name]
    field = _pass_option(decision.name)
    return field.default if field is not None else None


def split_config(config: Config) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """`(options, pass_options)` for `tilec.jit` / `tilec.compile` from a config."""
    options: dict[str, Any] = {}
    pass_options: dict[str, dict[str, Any]] = {}
    for name, value in config.items():
        if name.startswith("tile."):
            options.setdefault("tile", {})[name[len("tile.") :]] = value
        elif name in PIN_DECISIONS:
            options[name] = value
        else:
            pass_name, _, option_name = name.partition(".")
            pass_options.setdefault(pass_name, {})[option_name] = value
    return options, pass_options


def config_text(config: Config) -> str:
    """A config in a few characters: `tile.M=64 warps=8` (`heuristic` for `{}`)."""
    if not config:
        return "heuristic"
    return " ".join(f"{k}={_value_text(v)}" for k, v in sorted(config.items()))


def _value_text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def kernel_line(config: Config) -> list[str]:
    """The lines that reproduce `config` without tuning: the `@kernel(...)` decorator for its
    pins, and the `--pass-option` flags (`@tilec.jit(pass_options=...)`) for the rest."""
    options, pass_options = split_config(config)
    parts = []
    if "tile" in options:
        tiles = ", ".join(f'"{d}": {s}' for d, s in sorted(options["tile"].items()))
        parts.append(f"tile={{{tiles}}}")
    parts += [f"{name}={options[name]}" for name in PIN_DECISIONS if name in options]
    lines = [f"@kernel({', '.join(parts)})"] if parts else []
    flags = [
        f"--pass-option {p}.{o}={_value_text(v)}"
        for p, values in sorted(pass_options.items())
        for o, v in sorted(values.items())
    ]
    if flags:
        lines.append("# and the pass options (tilec compile flags; @tilec.jit(pass_options=...)):")
        lines.append("# " + " ".join(flags))
    if not lines:
        lines.append("# the heuristics' own choice: nothing to pin")
    return lines
