"""`tilec compile --explain`: what the passes decided for each kernel, and why, in a few lines.

Everything is read back from the compiled program, never decided again: the kernel's
attributes (`tilec.tile_sizes`, `tilec.grid`, `tilec.num_warps`, `tilec.group_m`,
`tilec.shared_bytes`), the layouts on its tile values, its `tile.alloc_shared` buffers (type,
offset, swizzle; their slots are the pipeline's stages), the `vector` widths on its global
accesses, the remarks the passes made (the reasons), and `ptxas`'s report on the PTX
(registers, spills) when ptxas is installed.

    kernel matmul  (examples/matmul.tile:3)
      grid      M/128 x N/128 blocks, grouped 8 along M for L2 reuse
      tiles     BM=128 BN=128 BK=32
      warps     4: 2x2 warp tiles of 64x64, mma.sync m16n8k16
      ...
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tilec.diagnostics import format_bytes
from tilec.dialects import gather as G
from tilec.dialects import scf, shared, tma
from tilec.dialects import tile as T
from tilec.dialects.arith_folding import int_constant
from tilec.dialects.builtin import FuncOp
from tilec.dialects.random import PhiloxOp
from tilec.dialects.tile import MmaLayout, SharedLayout
from tilec.ir.core import Operation, Value
from tilec.ir.types import TileType
from tilec.lowering.layouts import element_bytes
from tilec.lowering.ptx import FALLBACK_ARCH
from tilec.lowering.ptxas import KernelResources, PtxasError, assemble, find_ptxas
from tilec.passmanager import Remark

if TYPE_CHECKING:
    from tilec.compiler import CompiledProgram

__all__ = ["explain"]

LABEL_WIDTH = 10
WRAP = 100
INDENT = "  "
REASON_INDENT = INDENT + " " * LABEL_WIDTH + "  "


def explain(compiled: CompiledProgram, ptxas: bool = True) -> str:
    """The explanation of every kernel of `compiled`, as text. With `ptxas`, PTX that has not
    been through ptxas yet is assembled for its report (`compiled.resources` keeps it)."""
    passes_run = [s.name for s in compiled.stages[1:]]
    report = _ptxas_report(compiled) if ptxas else "not asked for"
    sections = []
    for kernel in compiled.module.functions:
        remarks = [r for r in compiled.remarks if r.op is not None]
        sections.append(_Kernel(kernel, remarks, passes_run, compiled, report).text())
    return "\n".join(sections)


def _ptxas_report(compiled: CompiledProgram) -> str | None:
    """None when `compiled.resources` holds ptxas's report; else why there is none."""
    if compiled.resources is not None:
        return None
    if compiled.ptx is None:
        return "no PTX (compiled only to tile IR): registers and spills unknown"
    if find_ptxas() is None:
        return (
            "ptxas not found: registers and spills unknown "
            "(put the CUDA toolkit on PATH, or pip install nvidia-cuda-nvcc)"
        )
    try:
        compiled.resources = assemble(compiled.ptx, compiled.arch or FALLBACK_ARCH)
    except PtxasError as e:
        return str(e).splitlines()[0]
    return None


def _pairs(kernel: FuncOp, name: str) -> list[tuple]:
    a = kernel.attributes.get(name)
    return [tuple(p) for p in a.value] if a is not None else []


def _int_attr(op: Operation, name: str) -> int | None:
    a = op.attributes.get(name)
    return a.value if a is not None else None


class _Kernel:
    def __init__(
        self,
        kernel: FuncOp,
        remarks: list[Remark],
        passes_run: Sequence[str],
        compiled: CompiledProgram,
        ptxas_problem: str | None,
    ):
        self.kernel = kernel
        self.ops = list(kernel.walk())
        ids = {id(op) for op in self.ops}
        self.remarks = [r for r in remarks if id(r.op) in ids]
        self.passes_run = passes_run
        self.compiled = compiled
        self.ptxas_problem = ptxas_problem
        self.sizes = {str(k): int(v) for k, v in _pairs(kernel, "tilec.tile_sizes")}
        self.names = {id(arg): arg.name_hint or f"arg{i}" for i, arg in enumerate(kernel.arguments)}
        self.lines: list[str] = []

    # -- helpers --------------------------------------------------------------------------------

    def said(self, op: Operation, pass_name: str | None = None, prefix: str = "") -> list[str]:
        """The remarks on `op` (of `pass_name`, starting with `prefix`), in order."""
        return [
            r.message
            for r in self.remarks
            if r.op is op
            and (pass_name is None or r.pass_name == pass_name)
            and r.message.startswith(prefix)
        ]

    def line(self, label: str, text: str, reasons: Sequence[str] = ()) -> None:
        first = f"{INDENT}{label:<{LABEL_WIDTH}}  "
        self.lines += textwrap.wrap(
            text, WRAP, initial_indent=first, subsequent_indent=REASON_INDENT
        ) or [first.rstrip()]
        for reason in dict.fromkeys(reasons):
            self.lines += textwrap.wrap(
                reason,
                WRAP,
                initial_indent=REASON_INDENT + "- ",
                subsequent_indent=REASON_INDENT + "  ",
            )

    def name_of(self, v: Value) -> str:
        if id(v) in self.names:
            return self.names[id(v)]
        return v.name_hint or "?"

    def ran(self, pass_name: str) -> bool:
        return pass_name in self.passes_run

    # -- the sections -------------------------------------------------------------------------

    def text(self) -> str:
        k = self.kernel
        where = f"{k.loc.file}:{k.loc.line}" if k.loc.known else "unknown location"
        self.lines.append(f"kernel {k.sym_name}  ({where})")
        self.grid()
        self.split()
        self.masks()
        self.tiles()
        self.warps()
        self.layouts()
        self.shared_memory()
        self.stages()
        self.issue()
        self.vectors()
        self.scale()
        self.precision()
        self.rescale()
        self.ptxas()
        self.tuned()
        return "\n".join(self.lines) + "\n"

    def tuned(self) -> None:
        """What `tilec tune` measured for this kernel (its cache entries): the candidates,
        the winner, the heuristic's choice and its regret."""
        if self.compiled.source is None:
            return
        from tilec.tune.cache import entries_for
        from tilec.tune.report import explain_section

        entries = entries_for(self.compiled.source, self.kernel.sym_name)
        self.lines += [INDENT + line for line in explain_section(entries)]

    def grid(self) -> None:
        grid = _pairs(self.kernel, "tilec.grid")
        if not grid:
            self.line("grid", "one block")
            return
        parts = []
        for dim, symbol in grid:
            size = self.sizes.get(str(symbol)) if isinstance(symbol, str) else symbol
            parts.append(f"{dim}/{size if size is not None else symbol}")
        text = " x ".join(parts) + " blocks (rounded up)"
        group = _int_attr(self.kernel, "tilec.group_m")
        if group is not None:
            text += f", grouped {group} along {grid[0][0]} for L2 reuse"
        persistent = self.said(self.kernel, "pipeline", "persistent blocks")
        if persistent:
            text = text.replace(" blocks (rounded up)", " tiles (rounded up), persistent blocks")
        cluster = self.said(self.kernel, "pipeline", "clusters of")
        cluster += self.said(self.kernel, "pipeline", "no clusters")
        if "tilec.cluster" in self.kernel.attributes:
            dims = [int(e.value) for e in self.kernel.attributes["tilec.cluster"].elements]
            text += f", in clusters of {'x'.join(map(str, dims))}"
        # Whether the kernel runs over its tensors' elements as one dimension (flatten).
        reasons = self.said(self.kernel, "flatten")
        reasons += self.said(self.kernel, "tiling", "block order")
        reasons += persistent or self.said(self.kernel, "pipeline", "not persistent")
        self.line("grid", text, reasons + cluster)

    def split(self) -> None:
        """The split axis (split-reduction): the loop split and how S is chosen, or why not."""
        if not self.ran("split-reduction"):
            return
        plan = dict(_pairs(self.kernel, "tilec.split"))
        if not plan:
            why = self.said(self.kernel, "split-reduction", "not split")
            self.line("split", why[0] if why else "not split")
            return
        axis = len(_pairs(self.kernel, "tilec.grid"))
        count = f"S = {plan['pinned']} (pinned)" if plan["pinned"] else "S chosen at launch"
        loops = [op for op in self.ops if self.said(op, "split-reduction", "split the loop")]
        reasons = [m for op in loops for m in self.said(op, "split-reduction")][1:]
        self.line(
            "split",
            f"loop over {plan['dim']} (step {plan['step']}) across blocks: grid axis {axis} "
            f"({'xyz'[axis]}), {count}",
            reasons,
        )

    def masks(self) -> None:
        """Loops mask-bounds shortened (or left whole, and why): only kernels with such masks."""
        if not self.ran("mask-bounds"):
            return
        # (A split scan's two loops say the same: one line.)
        said = list(dict.fromkeys(m for op in self.ops for m in self.said(op, "mask-bounds")))
        if said:
            self.line("masks", said[0], said[1:])

    def tiles(self) -> None:
        if not self.sizes:
            self.line("tiles", "not chosen (the pipeline runs neither tiling nor specialize)")
            return
        text = " ".join(f"{k}={v}" for k, v in self.sizes.items())
        reasons = [
            m.removeprefix("tile sizes: ") for m in self.said(self.kernel, prefix="tile sizes:")
        ]
        self.line("tiles", text, reasons)

    def warps(self) -> None:
        warps = _int_attr(self.kernel, "tilec.num_warps")
        if warps is None:
            self.line("warps", "not chosen (the pipeline runs no assign-layouts)")
            return
        dots = [op for op in self.ops if isinstance(op, T.DotOp)]
        mma = [d for d in dots if isinstance(d.result.type.layout, MmaLayout)]
        text = str(warps)
        reasons: list[str] = []
        if mma:
            layout = mma[0].result.type.layout
            wm, wn = layout.warps_per_cta
            m, n = mma[0].result.type.shape
            if layout.version == 3:
                groups = wm // 4
                text += f": {groups} warpgroup{'s' if groups > 1 else ''} of 64x{n}, wgmma m64n{n}k{layout.instr_shape[2]}"
                reasons += [m_ for m_ in self.said(self.kernel, "tiling") if "wgmma" in m_]
                reasons += [
                    m_
                    for m_ in self.said(self.kernel, "tiling")
                    if "producer warpgroup" in m_ or m_.startswith("staged A")
                ]
            else:
                shape = "m16n8k32 (s8)" if tuple(layout.instr_shape)[2] == 32 else "m16n8k16"
                text += f": {wm}x{wn} warp tiles of {m // wm}x{n // wn}, mma.sync {shape}"
                reasons += [
                    m_ for m_ in self.said(self.kernel, "tiling") if "accumulator registers" in m_
                ]
        if len(mma) < len(dots):
            text += f"; {len(dots) - len(mma)} tile.dot on the FMA path"
            for d in dots:
                reasons += self.said(d, "tiling", "FMA path")
            reasons += self.said(self.kernel, "tiling", "FMA path")
        if not mma:
            reasons += [
                _first_clause(m_)
                for m_ in self.said(self.kernel, "assign-layouts")
                if "warps" in _first_clause(m_)
            ]
        self.line("warps", text, reasons)

    def layouts(self) -> None:
        by_layout: dict[str, list[str]] = {}
        unnamed: dict[str, int] = {}

        def note(v: Value) -> None:
            t = v.type
            if not isinstance(t, TileType) or t.layout is None:
                return
            key = str(t.layout)
            names = by_layout.setdefault(key, [])
            if v.name_hint and v.name_hint not in names:
                names.append(v.name_hint)
            elif not v.name_hint:
                unnamed[key] = unnamed.get(key, 0) + 1

        for op in self.ops:
            for r in op.results:
                note(r)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        note(arg)
        if not by_layout:
            self.line("layouts", "none (the pipeline runs no assign-layouts)")
            return
        first = True
        for layout, names in by_layout.items():
            shown = ", ".join(names[:6]) + (f" (+{len(names) - 6})" if len(names) > 6 else "")
            others = unnamed.get(layout, 0)
            if others:
                more = f"{others} unnamed value{'s' if others > 1 else ''}"
                shown = f"{shown} and {more}" if shown else more
            self.line("layouts" if first else "", f"{layout}: {shown}")
            first = False
        conversions = [op for op in self.ops if isinstance(op, T.ConvertLayoutOp)]
        if conversions:
            why = [m for c in conversions for m in self.said(c, "assign-layouts")]
            count = len(conversions)
            self.line("", f"{count} layout conversion{'s' if count > 1 else ''}", why)

    def buffers(self) -> list[shared.AllocSharedOp]:
        return [op for op in self.ops if isinstance(op, shared.AllocSharedOp)]

    def shared_memory(self) -> None:
        buffers = self.buffers()
        if not buffers:
            self.line(
                "shared",
                "no buffers"
                + ("" if self.ran("smem-placement") else " (smem-placement did not run)"),
            )
            return
        first = True
        # The stages' mbarriers after the buffers they guard.
        buffers.sort(key=lambda a: tma.is_barrier_buffer(a.result.type))
        for alloc in buffers:
            t = alloc.result.type
            size = element_bytes(t.element)
            for d in t.shape:
                size *= d
            shape = "x".join(map(str, t.shape)) + f"x{t.element}"
            offset = _int_attr(alloc, "offset")
            text = f"%{alloc.result.name_hint or 'buffer'} {shape}  {format_bytes(size)}"
            text += f" @{offset}" if offset is not None else " (no offset yet)"
            layout = t.layout
            if tma.is_barrier_buffer(t):
                text += f"  {t.shape[0]} mbarriers (one a stage)"
            elif isinstance(layout, SharedLayout) and layout.max_phase > 1:
                text += (
                    f"  swizzle vec={layout.vec} per_phase={layout.per_phase} "
                    f"max_phase={layout.max_phase}"
                )
            else:
                text += "  no swizzle"
            why = [m.split(": ", 1)[-1] for m in self.said(alloc, "smem-placement", "operand")]
            self.line("shared" if first else "", text, why)
            first = False
        total = _int_attr(self.kernel, "tilec.shared_bytes")
        summary = [m.split("; ", 1)[-1] for m in self.said(self.kernel, prefix="shared memory:")][
            -1:
        ]
        if total is not None:
            self.line("", f"total {format_bytes(total)} of buffers (tilec.shared_bytes)", summary)

    def stages(self) -> None:
        # A buffer copied into one constant slot (attention's q, copied by a producer once a
        # tile) is staged, not streamed through the stages.
        streamed = [
            alloc
            for alloc in self.buffers()
            if any(
                isinstance(u, (shared.AsyncCopyOp, tma.TmaCopyOp)) and int_constant(u.slot) is None
                for u in alloc.result.uses
            )
            and not tma.is_barrier_buffer(alloc.result.type)
        ]
        if not self.ran("pipeline"):
            self.line("stages", "1 (pipeline did not run)")
            return
        chosen = self.said(self.kernel, "pipeline")
        chosen = [m for m in chosen if "stage" in m.split(":")[0]]
        if streamed:
            counts = sorted({a.result.type.shape[0] for a in streamed})
            names = ", ".join(f"%{a.result.name_hint}" for a in streamed)
            by_tma = any(isinstance(u, tma.TmaCopyOp) for a in streamed for u in a.result.uses)
            how = "the TMA unit" if by_tma else "cp.async"
            specialized = self.said(self.kernel, "pipeline", "warp-specialized")
            who = ", by a producer warpgroup" if specialized else ""
            text = f"{'/'.join(map(str, counts))} ({names} filled by {how}{who})"
            loops = [op for op in self.ops if isinstance(op, scf.ForOp)]
            flight = [
                m
                for loop in loops
                for m in self.said(loop, "pipeline")
                if "flight" in m or m.startswith(("copies by", "performance:"))
            ]
            warps = (
                specialized
                + self.said(self.kernel, "pipeline", "not warp-specialized")
                + self.said(self.kernel, "pipeline", "pingpong")
                + self.said(self.kernel, "pipeline", "no pingpong")
            )
            self.line("stages", text, [m.split(": ", 1)[-1] for m in chosen] + flight + warps)
            return
        why = chosen + [
            m for op in self.ops if isinstance(op, shared.StoreSharedOp) for m in self.said(op)
        ]
        if any(m.startswith("2 stages in registers") for m in chosen):
            self.line("stages", "2 in registers (loads issued one iteration ahead)", why)
            return
        text = "1" + ("" if why else " (no loop streams a tile into shared memory)")
        self.line("stages", text, why)

    def vectors(self) -> None:
        kinds = (T.LoadOp, T.StoreOp, G.GatherOp, G.ScatterOp, shared.AsyncCopyOp, tma.TmaCopyOp)
        accesses = [op for op in self.ops if isinstance(op, kinds)]
        if not accesses:
            self.line("vectors", "no global loads or stores")
            return
        groups: dict[str, tuple[int, list[str]]] = {}
        for op in accesses:
            view = self.name_of(op.view)
            size = element_bytes(op.view.type.element)
            width = (_int_attr(op, "vector") or 1) * size
            if isinstance(op, tma.TmaCopyOp):
                box = "x".join(map(str, op.box_shape))
                key = f"TMA {view} -> %{op.buffer.name_hint or 'buffer'}: boxes of {box}"
                count, reasons = groups.get(key, (0, []))
                groups[key] = (count + 1, reasons)
                continue
            if isinstance(op, shared.AsyncCopyOp):
                what = f"cp.async {view} -> %{op.buffer.name_hint or 'buffer'}"
            elif isinstance(op, (G.GatherOp, G.ScatterOp)):
                what = f"{op.name.removeprefix('tile.')} {view}"
            else:
                what = f"{'load' if isinstance(op, T.LoadOp) else 'store'} {view}"
            key = f"{what}: {width} B"
            why = [
                "not " + m.split(", not ", 1)[1].replace(":", " B:", 1)
                for m in self.said(op, "vectorize")
                if ", not " in m
            ]
            why += [m for m in self.said(op, "vectorize") if "not vectorized" in m]
            count, reasons = groups.get(key, (0, []))
            groups[key] = (count + 1, reasons + [w for w in why if w not in reasons])
        first = True
        for key, (count, reasons) in groups.items():
            text = key + (f" (x{count})" if count > 1 else "")
            if not self.ran("vectorize"):
                reasons = [*reasons, "vectorize did not run"]
            self.line("vectors" if first else "", text, reasons)
            first = False
        said = dict.fromkeys(  # how many elements share a Philox run, once per decision
            m for op in self.ops if isinstance(op, PhiloxOp) for m in self.said(op, "vectorize")
        )
        for m in said:
            text, _, why = m.removeprefix("philox: ").partition(": ")
            self.line("", "random: " + text, [why] if why else [])

    def issue(self) -> None:
        """The loads `hoist-loads` issued before the reductions written before them (only if
        any)."""
        if not self.ran("hoist-loads"):
            return
        moved = [op for op in self.ops if self.said(op, "hoist-loads")]
        if not moved:
            return
        reasons = [m for op in moved for m in self.said(op, "hoist-loads")]
        n = len(moved)
        self.line(
            "loads",
            f"{n} load{'s' if n > 1 else ''} issued before the reductions written before "
            f"{'them' if n > 1 else 'it'}",
            reasons,
        )

    def scale(self) -> None:
        """The max/min reductions `hoist-scale` made read the raw values (only if any)."""
        if not self.ran("hoist-scale"):
            return
        made = [op for op in self.ops if self.said(op, "hoist-scale")]
        if not made:
            return
        n = len(made)
        kinds = "/".join(sorted({op.kind for op in made}))
        reasons = [m for op in made for m in self.said(op, "hoist-scale")]
        self.line(
            "scale",
            f"{n} {kinds} reduction{'s' if n > 1 else ''} of the raw values, the factor applied "
            "to the result",
            reasons,
        )

    def precision(self) -> None:
        """The divisions and exps made approximate (precision), and why they could be."""
        if not self.ran("precision"):
            return
        made = [op for op in self.ops if self.said(op, "precision")]
        if not made:
            self.line("precision", "exact: no f32 division or exp reaches memory only as f16/bf16")
            return
        counts: dict[str, int] = {}
        for op in made:
            what = "division" if op.name == "arith.divf" else "exp"
            counts[what] = counts.get(what, 0) + 1
        text = ", ".join(f"{n} {what}{'s' if n > 1 else ''}" for what, n in counts.items())
        reasons = [m for op in made for m in self.said(op, "precision")]
        self.line("precision", f"{text} on the approximate instructions (f32)", reasons)

    def rescale(self) -> None:
        """The multiplies `skip-unit-factor` marked to skip where their factor is exactly 1,
        and those it left (only if any)."""
        if not self.ran("skip-unit-factor"):
            return
        said = [op for op in self.ops if self.said(op, "skip-unit-factor")]
        if not said:
            return
        marked = [op for op in said if "tilec.skip_unit_factor" in op.attributes]
        n = len(marked)
        text = f"{n} multipl{'ies' if n != 1 else 'y'} skipped in warps whose factors are all 1"
        if len(said) > n:
            text += f", {len(said) - n} kept"
        reasons = list(dict.fromkeys(m for op in said for m in self.said(op, "skip-unit-factor")))
        self.line("rescale", text, reasons)

    def ptxas(self) -> None:
        # What the PTX stage found would make nvJitLink serialize wgmma (ptxas cannot say).
        serialized = [f"performance loss: {m}" for m in self.said(self.kernel, "ptx")]
        if self.ptxas_problem is not None:
            self.line("ptxas", self.ptxas_problem, serialized)
            return
        resources: KernelResources | None = (self.compiled.resources or {}).get(
            self.kernel.sym_name
        )
        if resources is None:
            self.line("ptxas", "no report for this kernel", serialized)
            return
        from tilec.lowering.shared_memory import shared_bytes

        spilled = resources.spill_stores + resources.spill_loads
        text = (
            f"{self.compiled.arch}: {resources.registers} registers, "
            + (
                f"SPILLS {resources.spill_stores} B stored / {resources.spill_loads} B loaded"
                if spilled
                else "0 spills"
            )
            + f", {resources.stack_frame} B stack, {shared_bytes(self.kernel)} B dynamic shared"
        )
        if resources.static_shared:
            text += f" + {resources.static_shared} B static"
        self.line(
            "ptxas",
            text,
            [f"performance loss {warning}" for warning in resources.performance_warnings]
            + serialized,
        )


def _first_clause(remark: str) -> str:
    """A remark up to its first ';' outside parentheses ("16 warps (...; ...); 15 tile values
    laid out" -> "16 warps (...; ...)")."""
    depth = 0
    for i, c in enumerate(remark):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == ";" and depth == 0:
            return remark[:i]
    return remark
