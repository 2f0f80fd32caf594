"""`tilec.compile`: a tile program (a `.tile` file, or source text) → tile IR and its stages.

    program = tilec.compile("examples/matmul.tile")
    print(program.tir)                      # the tile IR of every kernel, as text
    program.module                          # the IR itself (a builtin.module)
    program.kernels                         # ["matmul", "matmul_pinned"]
    program.stages                          # [Stage("frontend", text, remarks), ...]

A pipeline (`pipeline="canonicalize,cse"`) runs passes after the frontend; each pass adds a
stage with the IR after it and the remarks it made, each IR line tied to its source location
and remarks. `target="llvm"|"ptx"|"cubin"` lowers too (LLVM IR, PTX with line info, ptxas's
report: stages as well). `keep_going=True` returns what succeeded when a step fails, and an
`Instrumentation(dump_dir=...)` writes every stage to files (docs/debugging.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tilec.diagnostics import InternalCompilerError, Location, TileError
from tilec.dialects.builtin import ModuleOp
from tilec.frontend import analyze, parse_source
from tilec.frontend.irgen import generate_ir
from tilec.frontend.sema import Program
from tilec.frontend.source import Source, read_tile_file
from tilec.frontend.syntax import FunctionDef, Module
from tilec.ir.core import Operation
from tilec.ir.printer import print_op, print_op_lines
from tilec.ir.verifier import VerifyError, verify
from tilec.lowering import lower_to_llvm
from tilec.lowering.llvm import llvm_line_locations
from tilec.lowering.ptx import default_arch, optimize, ptx_line_locations, target_machine
from tilec.lowering.ptxas import (
    KernelResources,
    PtxasError,
    assemble_cubin,
    find_ptxas,
    wgmma_serializers,
)
from tilec.passmanager import (
    Instrumentation,
    Pass,
    PassManager,
    Remark,
    _convert_option,
    _type_name,
    parse_pipeline,
    registered_passes,
    save_crash_ir,
)

__all__ = [
    "DEFAULT_PIPELINE",
    "OPTIONAL_PASSES",
    "TARGETS",
    "CompiledProgram",
    "Stage",
    "build_pipeline",
    "compile",
    "compile_module",
    "compile_program",
    "compile_source",
    "tile_ir_stage",
]

# The passes every kernel goes through after the frontend. Every pass in it is checked by
# translation validation (tests/unit/test_translation_validation.py) on every example.
DEFAULT_PIPELINE = (
    "canonicalize,cse,flatten,privatize-atomics,accumulate-atomics,transpose-dot,tiling,canonicalize,"
    "split-reduction,"
    "mask-bounds,defer-reduction,align-rows,walk-tiles,hoist-loads,assign-layouts,"
    "smem-placement,pipeline,vectorize,fold-padding,hoist-scale,canonicalize,cse,dce,precision,"
    "skip-unit-factor"
)

# The optimisation passes of the default pipeline that `build_pipeline` (`tilec compile
# --disable`, `@tilec.jit(disable=...)`) can turn off, and what each becomes when off: the
# options it then runs with, or None when it is left out. `tiling` binds the tile sizes that
# the lowering needs, so it stays, with `specialize`'s heuristic sizes (no tensor cores) and
# blocks in launch order; `vectorize` stays to say, per access, that it is not vectorized.
OPTIONAL_PASSES: dict[str, dict[str, object] | None] = {
    "flatten": None,
    "privatize-atomics": None,
    "accumulate-atomics": None,
    "transpose-dot": None,
    "tiling": {"mma": False, "group_m": 1},
    "mask-bounds": None,
    "split-reduction": None,
    "defer-reduction": None,
    "align-rows": None,
    "walk-tiles": None,
    "hoist-loads": None,
    "smem-placement": None,
    "pipeline": None,
    "vectorize": {"enable": False},
    "fold-padding": None,
    "hoist-scale": None,
    "precision": {"enable": False},
    "skip-unit-factor": None,
}

# Options of other passes that follow from turning a pass off: `tiling` ranks wgmma tiles with
# the K loop split only where `split-reduction` will split it.
DISABLED_ALSO: dict[str, dict[str, dict[str, object]]] = {
    "split-reduction": {"tiling": {"split": False}},
}

# What a compilation can produce; after the passes, the steps that produce each.
TARGETS = ("tir", "llvm", "ptx", "cubin")
LOWERING_STEPS = ("lower-to-llvm", "ptx", "cubin")


def target_pipeline(pipeline: str, arch: str) -> str:
    """`pipeline` with `arch` given to every pass that decides by the target (tiling: wgmma on
    sm_90a) and does not name one already: what `compile` and `@tilec.jit` run when they
    lower for `arch` (the text is the jit's cache key)."""
    passes = []
    for p in parse_pipeline(pipeline):
        options = p.options
        if hasattr(options, "arch") and not options.arch:
            options = dataclasses.replace(options, arch=arch)
        passes.append(_pass_text(p.name, options))
    return ",".join(passes)


def build_pipeline(
    pipeline: str | None = None,
    *,
    disable: Iterable[str] = (),
    options: Mapping[str, Mapping[str, object]] | None = None,
) -> str:
    """The pipeline text for `pipeline` (None: `DEFAULT_PIPELINE`) with the passes named in
    `disable` turned off (`OPTIONAL_PASSES` says how) and `options` set:
    `{"vectorize": {"max_bytes": 8}, "pipeline": {"num_stages": 2}}` (values as Python values
    or as pipeline text, `"8"`). What `tilec compile --disable/--pass-option` and
    `@tilec.jit(disable=..., pass_options=...)` both use; the result is what enters the kernel
    cache key. Raises `TileError` naming the pass or option that cannot be applied."""
    base = DEFAULT_PIPELINE if pipeline is None else pipeline
    passes = parse_pipeline(base)
    present = [p.name for p in passes]
    hint_present = "passes of this pipeline: " + (", ".join(present) or "none")
    disabled = list(dict.fromkeys(disable))
    for name in disabled:
        if name not in OPTIONAL_PASSES:
            why = (
                "it is not one of the optimisation passes"
                if name in registered_passes()
                else f"there is no pass '{name}'"
            )
            raise TileError(
                f"cannot disable '{name}': {why}",
                hint="passes that can be disabled: " + ", ".join(OPTIONAL_PASSES),
            )
        if name not in present:
            raise TileError(
                f"cannot disable '{name}': it is not in the pipeline", hint=hint_present
            )
    values_by_pass: dict[str, dict[str, object]] = {}
    registry = registered_passes()
    for name, values in (options or {}).items():
        cls = registry.get(name)
        if cls is None:
            raise TileError(
                f"pass option for '{name}': there is no pass '{name}'",
                hint="passes: " + ", ".join(registry),
            )
        if name not in present:
            raise TileError(
                f"pass option for '{name}': the pass is not in the pipeline", hint=hint_present
            )
        fields = {f.name: f for f in dataclasses.fields(cls.Options)}
        listing = ", ".join(f"{k} ({_type_name(cls, f)})" for k, f in fields.items()) or "none"
        converted: dict[str, object] = {}
        for key, value in values.items():
            f = fields.get(key)
            if f is None:
                raise TileError(
                    f"pass '{name}' has no option '{key}'", hint=f"options of '{name}': {listing}"
                )
            raw = ("true" if value else "false") if isinstance(value, bool) else str(value)

            def error(message: str, name: str = name, key: str = key) -> TileError:
                return TileError(f"pass option {name}.{key}: " + message.split("' ", 1)[-1])

            converted[key] = _convert_option(cls, f, raw, error)
        values_by_pass[name] = converted
    result = []
    for p in passes:
        options_now = dataclasses.replace(p.options, **values_by_pass.get(p.name, {}))
        for name in disabled:
            options_now = dataclasses.replace(
                options_now, **DISABLED_ALSO.get(name, {}).get(p.name, {})
            )
        if p.name in disabled:
            off = OPTIONAL_PASSES[p.name]
            if off is None:
                continue
            options_now = dataclasses.replace(options_now, **off)
        result.append(_pass_text(p.name, options_now))
    return ",".join(result)


def _pass_text(name: str, options: object) -> str:
    """`name{option=value ...}` with the options that differ from their defaults; string
    values holding separators or '=' are quoted (`tiling{extents="N=1024"}`)."""
    changed = []
    for f in dataclasses.fields(options):  # type: ignore[arg-type]
        value = getattr(options, f.name)
        if value == f.default:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str) and (not value or any(c in value for c in ' ,{}="')):
            text = f'"{value}"'
        else:
            text = str(value)
        changed.append(f"{f.name}={text}")
    return name + ("{" + " ".join(changed) + "}" if changed else "")


class Stage:
    """The output of one step of compilation: the tile IR after the frontend and after each
    pass, then the LLVM IR ("lower-to-llvm"), the PTX ("ptx") and ptxas's report ("cubin").

    What ties the text to the source and to the decisions:
    * `locations`: per line of `ir` (`ir.splitlines()`), the source location of what that
      line comes from, None where none is known. Tile IR: the op printed on the line (for a
      closing brace or block label, the op whose region it is; None for `#alias` lines).
      LLVM IR: the instruction's `!dbg` location; PTX: the `.loc` in force. Empty for
      ptxas's report, and for LLVM IR and PTX compiled with `line_info=False`.
    * `remark_lines`: per remark in `remarks` (the ones this pass made), the index of the
      line of `ir` where the op it concerns is printed; None when that op is not in this IR
      (a remark on the module as a whole, or on an op the pass erased).

    A tile IR stage holds a copy of the module (`tile_ir_stage`) and prints it when `ir`,
    `locations` or `remark_lines` is first read: a compilation that never looks at its
    stages (`@tilec.jit`, `tilec compile` without `--dump-dir`) prints none of them.
    """

    __slots__ = ("_ir", "_locations", "_remark_lines", "_snapshot", "name", "remarks")

    def __init__(
        self,
        name: str,
        ir: str | None = None,
        remarks: Sequence[Remark] = (),
        locations: Sequence[Location | None] = (),
        remark_lines: Sequence[int | None] = (),
        *,
        snapshot: tuple[Operation, Sequence[Operation | None]] | None = None,
    ):
        if (ir is None) == (snapshot is None):
            raise ValueError("a stage has its text or a snapshot of its module, not both")
        self.name = name
        self.remarks = tuple(remarks)
        self._ir = ir
        self._locations = tuple(locations)
        self._remark_lines = tuple(remark_lines)
        self._snapshot = snapshot  # (module copy, the op of each remark in it), until printed

    def _print(self) -> None:
        module, remark_ops = self._snapshot  # type: ignore[misc]
        text, line_ops = print_op_lines(module)
        self._locations = tuple(
            op.loc if op is not None and op.loc.known else None for op in line_ops
        )
        first_line: dict[int, int] = {}
        for index, op in enumerate(line_ops):
            if op is not None:
                first_line.setdefault(id(op), index)
        self._remark_lines = tuple(
            first_line.get(id(op)) if op is not None else None for op in remark_ops
        )
        self._ir, self._snapshot = text, None

    @property
    def ir(self) -> str:
        if self._snapshot is not None:
            self._print()
        return self._ir  # type: ignore[return-value]

    @property
    def locations(self) -> tuple[Location | None, ...]:
        if self._snapshot is not None:
            self._print()
        return self._locations

    @property
    def remark_lines(self) -> tuple[int | None, ...]:
        if self._snapshot is not None:
            self._print()
        return self._remark_lines

    def remarks_on_line(self, line: int) -> list[Remark]:
        """The remarks of this stage on the op printed on line `line` (0-based) of `ir`."""
        return [r for r, at in zip(self.remarks, self.remark_lines) if at == line]

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, {len(self.remarks)} remark(s))"


def tile_ir_stage(
    name: str,
    module: Operation,
    remarks: Sequence[Remark] = (),
    snapshot: Operation | None = None,
) -> Stage:
    """The stage of `module`'s IR: its text, per-line locations and where each of `remarks`
    (made on ops of `module`) is printed, all printed when first read. `snapshot`: a copy of
    `module` as it is now (`Operation.clone`), which the stage keeps instead of making one."""
    copy = module.clone() if snapshot is None else snapshot
    remark_ops: list[Operation | None] = [None] * len(remarks)
    if any(r.op is not None for r in remarks):
        # a copy walks in its original's order: each remark's op is the copy's op at its place
        place = {id(op): i for i, op in enumerate(module.walk())}
        ops = list(copy.walk())
        for k, r in enumerate(remarks):
            at = place.get(id(r.op)) if r.op is not None else None
            remark_ops[k] = ops[at] if at is not None else None
    return Stage(name, remarks=remarks, snapshot=(copy, remark_ops))


@dataclass
class CompiledProgram:
    """What `compile` produced: the IR, and every stage on the way to it.

    With `keep_going=True` a compilation that fails still returns one: `error` holds the
    `TileError` or `InternalCompilerError`, `failed_stage` names the step that raised it
    ("frontend" for parsing, analysis and IR generation; a pass name; "lower-to-llvm",
    "ptx", "cubin"), and `stages` holds every step that succeeded. When the frontend fails
    there is no IR: `module` and `program` are None and `stages` is empty.
    """

    module: ModuleOp | None
    program: Program | None
    stages: list[Stage] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)
    pass_manager: PassManager | None = None  # the one that ran the pipeline (timings)
    # The source text that locations index into, and its name as locations give it. The
    # text is None when not given (`compile_module`/`compile_program` without `source`, as
    # `@tilec.jit` compiles).
    source: str | None = None
    filename: str | None = None
    # Filled by lowering (`target` llvm, ptx or cubin):
    arch: str | None = None
    llvm: str | None = None  # LLVM IR as tilec emits it (before LLVM's optimizer)
    ptx: str | None = None
    cubin: bytes | None = None
    resources: dict[str, KernelResources] | None = None  # ptxas's report, per kernel
    # With `keep_going`: what stopped the compilation, and in which step.
    error: TileError | InternalCompilerError | None = None
    failed_stage: str | None = None

    @property
    def kernels(self) -> list[str]:
        return [f.sym_name for f in self.module.functions] if self.module is not None else []

    @property
    def tir(self) -> str:
        """The final IR as text ("" when the frontend failed)."""
        return print_op(self.module) if self.module is not None else ""

    def explain(self, ptxas: bool = True) -> str:
        """Per kernel, what the passes decided and why: tile sizes, grid, warps, layouts,
        shared buffers, stages, vector widths, and (with `ptxas`, when the program was
        lowered and ptxas is installed) registers and spills (`tilec.explain`). After a
        `keep_going` compilation whose frontend failed there is nothing to explain: raises
        its error."""
        if self.module is None:
            assert self.error is not None
            raise self.error
        from tilec.explain import explain

        return explain(self, ptxas)

    def remarks_json(self) -> list[dict[str, object]]:
        """Every remark, in the order made, as `remarks.json` in a dump directory holds
        them: `Remark.to_json()` plus the stage it belongs to (`stage`, `stage_index` into
        `stages`) and the line (`ir_line`, 1-based; null when the op is not printed) of that
        stage's IR where the op it concerns is printed."""
        entries = []
        for index, stage in enumerate(self.stages):
            for remark, line in zip(stage.remarks, stage.remark_lines):
                entry = remark.to_json()
                entry["stage"] = stage.name
                entry["stage_index"] = index
                entry["ir_line"] = line + 1 if line is not None else None
                entries.append(entry)
        return entries

    def __str__(self) -> str:
        return self.tir


def compile(
    source_or_path: str | os.PathLike[str],
    *,
    kernels: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    pipeline: str | None = None,
    instrumentation: Instrumentation | None = None,
    target: str = "tir",
    arch: str | None = None,
    line_info: bool = True,
    keep_going: bool = False,
) -> CompiledProgram:
    """Compile a `.tile` file (a path) or tile source text (a string holding a `def`).

    `kernels` picks kernels by name (default: all; the IR lists them in that order); only
    those are analysed and compiled. `options` pins decisions for each of them
    (`{"tile": {"M": 128}, "warps": 4, "stages": 3}`), over what `@kernel(...)` in the source
    says. Raises `TileError` for any mistake in the input.

    `target` says how far to go: "tir" (the tile IR after `pipeline`, default none), or
    "llvm", "ptx", "cubin" (after `pipeline`, default `DEFAULT_PIPELINE`, the kernels are
    lowered for `arch`, default the GPU present else sm_90a; "cubin" needs ptxas). The result
    keeps every stage: `.stages`, `.llvm`, `.ptx`, `.cubin`, `.resources`, and the source
    (`.source`, `.filename`). `line_info` (default on) puts `.file`/`.loc` lines in the PTX
    that point at the source lines, for profilers' source views.

    `keep_going=True`: a `TileError` or internal compiler error in the source (frontend,
    passes, lowering) does not raise; the result says what and where (`.error`,
    `.failed_stage`) and holds every stage that succeeded. Mistakes in the arguments
    (`target`, `pipeline` text, an unreadable path) still raise.

    With `instrumentation.dump_dir`, the directory receives the whole dump set, numbered in
    order: the source, the tile IR, the IR after each pass, LLVM IR, PTX, ptxas's report
    (with ptxas installed) and `remarks.json` (docs/debugging.md). A failed compilation keeps
    what was written up to the failure, and `remarks.json` of the remarks made until then.
    """
    if isinstance(source_or_path, os.PathLike) or _looks_like_path(source_or_path):
        source = read_tile_file(source_or_path)
    else:
        source = Source(str(source_or_path), "<string>")
    return compile_source(
        source.text,
        source.filename,
        kernels=kernels,
        options=options,
        pipeline=pipeline,
        instrumentation=instrumentation,
        target=target,
        arch=arch,
        line_info=line_info,
        keep_going=keep_going,
    )


def compile_source(
    text: str,
    filename: str = "<string>",
    *,
    kernels: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    pipeline: str | None = None,
    instrumentation: Instrumentation | None = None,
    target: str = "tir",
    arch: str | None = None,
    line_info: bool = True,
    keep_going: bool = False,
) -> CompiledProgram:
    """`compile` for source text that is the contents of `filename` (what `tilec compile`
    and `tilec explore` read, stdin too): errors and locations name `filename`."""
    try:
        module_ast = parse_source(text, filename)
    except TileError as e:
        if not keep_going:
            raise
        return _frontend_failure(e, text, filename)
    return compile_module(
        module_ast,
        kernels=kernels,
        options=options,
        pipeline=pipeline,
        instrumentation=instrumentation,
        target=target,
        arch=arch,
        line_info=line_info,
        keep_going=keep_going,
        source=text,
    )


def _frontend_failure(error: TileError, source: str | None, filename: str) -> CompiledProgram:
    return CompiledProgram(
        None, None, source=source, filename=filename, error=error, failed_stage="frontend"
    )


def compile_module(
    module: Module,
    *,
    kernels: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    pipeline: str | None = None,
    instrumentation: Instrumentation | None = None,
    target: str = "tir",
    arch: str | None = None,
    line_info: bool = True,
    keep_going: bool = False,
    source: str | None = None,
) -> CompiledProgram:
    """Analysis, IR generation and passes for a parsed module (what `compile` and
    `tilec compile` share); `source` is the text of `module.filename`, kept on the result.

    With `kernels`, the other kernels are left out before analysis: `options` pin the chosen
    kernels only, so `-k attention --tile M=64` works in a file whose other kernels have no M.
    """
    try:
        if kernels:
            module = _select_kernels(module, kernels)
        program = analyze(module, options)
    except TileError as e:
        if not keep_going:
            raise
        return _frontend_failure(e, source, module.filename)
    return compile_program(
        program,
        kernels=kernels,
        pipeline=pipeline,
        instrumentation=instrumentation,
        target=target,
        arch=arch,
        line_info=line_info,
        keep_going=keep_going,
        source=source,
    )


def _select_kernels(module: Module, kernels: Sequence[str]) -> Module:
    defined = [s.name for s in module.body if isinstance(s, FunctionDef)]
    for name in kernels:
        if name not in defined:
            raise TileError(
                f"no kernel named '{name}'",
                Location(module.filename, 0, 0),
                hint="the kernels in this file are: " + (", ".join(defined) or "none"),
            )
    # Top-level statements other than kernels stay, so that they are still reported.
    body = tuple(s for s in module.body if not isinstance(s, FunctionDef) or s.name in kernels)
    return Module(body, module.filename)


def compile_program(
    program: Program,
    *,
    kernels: Sequence[str] | None = None,
    pipeline: str | None = None,
    instrumentation: Instrumentation | None = None,
    target: str = "tir",
    arch: str | None = None,
    line_info: bool = True,
    keep_going: bool = False,
    source: str | None = None,
) -> CompiledProgram:
    """IR generation and passes for an analysed program (the part `compile` shares with jit)."""
    if target not in TARGETS:
        raise TileError(f"unknown target '{target}'", hint="targets: " + ", ".join(TARGETS))
    lowering = target != "tir"
    if pipeline is None:
        pipeline = DEFAULT_PIPELINE if lowering else ""
    arch = (arch or default_arch()) if lowering else arch
    # The steps after the passes; with a dump directory, PTX goes through ptxas for its
    # report whenever ptxas is installed.
    dump_dir = instrumentation.dump_dir if instrumentation is not None else None
    steps = LOWERING_STEPS[: TARGETS.index(target)]  # tir: none; llvm: lower-to-llvm; ...
    if target == "ptx" and dump_dir is not None and find_ptxas() is not None:
        steps = LOWERING_STEPS
    if steps and pipeline:
        pipeline = target_pipeline(pipeline, arch)
    manager = PassManager.from_text(pipeline, instrumentation, steps)
    result = CompiledProgram(None, program, source=source, filename=program.filename)
    result.pass_manager = manager
    if source is not None:
        manager.dump_text("source", source, _source_suffix(program.filename))
    try:
        _compile_stages(result, manager, kernels, steps, arch, line_info)
    except (TileError, InternalCompilerError) as e:
        if not keep_going:
            raise
        result.error = e
        step_names = ["frontend", *(p.name for p in manager.passes), *steps]
        result.failed_stage = step_names[len(result.stages)]
    finally:
        result.remarks = list(manager.context.remarks)
        if dump_dir is not None:
            _dump_remarks(result, dump_dir)
    return result


def _compile_stages(
    result: CompiledProgram,
    manager: PassManager,
    kernels: Sequence[str] | None,
    steps: Sequence[str],
    arch: str | None,
    line_info: bool,
) -> None:
    """The frontend's IR, the passes and the lowering `steps`, each adding its stage to
    `result` as it succeeds."""
    program = result.program
    assert program is not None
    instrumentation = manager.instr
    names = [k.name for k in program.kernels]
    if kernels:
        kernels = list(dict.fromkeys(kernels))  # `-k k -k k` asks for one kernel, once
    for name in kernels or ():
        if name not in names:
            raise TileError(
                f"no kernel named '{name}'",
                Location(program.filename, 0, 0),
                hint="the kernels in this file are: " + (", ".join(names) or "none"),
            )
    try:
        module = generate_ir(program, list(kernels) if kernels else None)
    except TileError:
        raise
    except Exception as e:
        raise InternalCompilerError("irgen", e, None) from e
    try:
        verify(module)
    except VerifyError as e:
        path = save_crash_ir(
            "irgen", print_op(module, print_locations=True), instrumentation.dump_dir
        )
        raise InternalCompilerError(
            "irgen", RuntimeError(f"IR generation produced invalid IR: {e.render()}"), path
        ) from e
    result.module = module
    result.stages.append(tile_ir_stage("frontend", module))
    seen = 0

    def record(p: Pass, module: Operation, snapshot: Operation) -> None:
        nonlocal seen
        new = manager.context.remarks[seen:]
        seen = len(manager.context.remarks)
        result.stages.append(tile_ir_stage(p.name, module, new, snapshot))

    manager.run(module, after_each=record, input_name="frontend")
    if steps and not manager.stopped:
        assert arch is not None
        _lower(result, manager, steps, arch, line_info)


def _source_suffix(filename: str) -> str:
    suffix = os.path.splitext(filename)[1]
    return suffix if suffix in (".tile", ".py") else ".tile"


def _dump_remarks(result: CompiledProgram, dump_dir: str) -> None:
    os.makedirs(dump_dir, exist_ok=True)
    with open(os.path.join(dump_dir, "remarks.json"), "w", encoding="utf-8") as f:
        json.dump(result.remarks_json(), f, indent=1)
        f.write("\n")


def _lower(
    result: CompiledProgram, manager: PassManager, steps: Sequence[str], arch: str, line_info: bool
) -> None:
    """LLVM IR, PTX and (for "cubin" in `steps`) the cubin of the compiled module, each a
    stage that the instrumentation prints, dumps and may stop after."""
    instr = manager.instr
    result.arch = arch
    module = result.module
    assert module is not None

    def step(stage: Stage, suffix: str) -> bool:
        result.stages.append(stage)
        name, text = stage.name, stage.ir
        if instr.print_ir_after_all or name in instr.print_ir_after:
            manager.print_text(f"IR Dump After {name}", text)
        manager.dump_text(name, text, suffix)
        return instr.stop_after == name

    unready = [
        f.sym_name
        for f in module.functions
        if "tilec.tile_sizes" not in f.attributes or "tilec.num_warps" not in f.attributes
    ]
    if unready:
        raise TileError(
            f"lowering needs specialized, laid-out kernels; {', '.join(unready)} "
            f"{'is' if len(unready) == 1 else 'are'} not",
            hint="the pipeline must run 'specialize' and 'assign-layouts' "
            f"(the default one does: {DEFAULT_PIPELINE})",
        )
    try:
        llvm_module = lower_to_llvm(module, arch, line_info=line_info)
    except (TileError, InternalCompilerError):
        raise
    except Exception as e:
        path = save_crash_ir(
            "lower-to-llvm", print_op(module, print_locations=True), instr.dump_dir
        )
        raise InternalCompilerError("lower-to-llvm", e, path) from e
    result.llvm = str(llvm_module)
    llvm_stage = Stage(
        "lower-to-llvm",
        result.llvm,
        locations=llvm_line_locations(result.llvm) if line_info else (),
    )
    if step(llvm_stage, ".ll") or "ptx" not in steps:
        return
    try:
        result.ptx = target_machine(arch).emit_assembly(optimize(result.llvm, arch))
    except Exception as e:
        path = save_crash_ir("ptx", result.llvm, instr.dump_dir, suffix=".ll")
        raise InternalCompilerError("ptx", e, path) from e
    hazards = wgmma_serializers(result.ptx)
    made = len(manager.context.remarks)
    manager.context.current_pass = "ptx"
    for func in module.functions:
        for reason in hazards.get(func.sym_name, ()):
            manager.context.remark(
                func, f"wgmma serialized by nvJitLink (the runtime's PTX compiler): {reason}"
            )
    ptx_stage = Stage(
        "ptx",
        result.ptx,
        tuple(manager.context.remarks[made:]),
        locations=ptx_line_locations(result.ptx) if line_info else (),
        remark_lines=tuple(None for _ in manager.context.remarks[made:]),
    )
    if step(ptx_stage, ".ptx") or "cubin" not in steps:
        return
    try:
        result.cubin, result.resources = assemble_cubin(result.ptx, arch)
    except PtxasError as e:
        raise TileError(
            str(e), hint="install the CUDA toolkit or the nvidia-cuda-nvcc wheel"
        ) from e
    report = "\n".join(
        f"{r.name}: {r.registers} registers, {r.spill_stores} bytes spill stores, "
        f"{r.spill_loads} bytes spill loads, {r.stack_frame} bytes stack frame"
        for r in result.resources.values()
    )
    step(Stage("cubin", report + "\n"), ".ptxas.txt")


def _looks_like_path(s: str | os.PathLike[str]) -> bool:
    text = str(s)
    return "\n" not in text and (text.endswith(".tile") or os.path.isfile(text))
