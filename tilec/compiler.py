"""`tilec.compile`: a tile program (a `.tile` file, or source text) → tile IR and its stages.

    program = tilec.compile("examples/matmul.tile")
    print(program.tir)                      # the tile IR of every kernel, as text
    program.module                          # the IR itself (a builtin.module)
    program.kernels                         # ["matmul", "matmul_pinned"]
    program.stages                          # [Stage("frontend", text, remarks), ...]

A pipeline (`pipeline="canonicalize,cse"`) runs passes after the frontend; each pass adds a
stage with the IR after it and the remarks it made. Lowering to PTX comes with Stage D.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tilec.diagnostics import InternalCompilerError, Location, TileError
from tilec.dialects.builtin import ModuleOp
from tilec.frontend import analyze, parse_file, parse_source
from tilec.frontend.irgen import generate_ir
from tilec.frontend.sema import Program
from tilec.frontend.syntax import FunctionDef, Module
from tilec.ir.printer import print_op
from tilec.ir.verifier import VerifyError, verify
from tilec.lowering import lower_to_llvm
from tilec.lowering.ptx import default_arch, optimize, target_machine
from tilec.lowering.ptxas import KernelResources, PtxasError, assemble_cubin
from tilec.passmanager import (
    Instrumentation,
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
]

# The passes every kernel goes through after the frontend. Every pass in it is checked by
# translation validation (tests/unit/test_translation_validation.py) on every example.
DEFAULT_PIPELINE = (
    "canonicalize,cse,tiling,assign-layouts,smem-placement,pipeline,vectorize,canonicalize,cse,dce"
)

# The optimisation passes of the default pipeline that `build_pipeline` (`tilec compile
# --disable`, `@tilec.jit(disable=...)`) can turn off, and what each becomes when off: the
# options it then runs with, or None when it is left out. `tiling` binds the tile sizes that
# the lowering needs, so it stays, with `specialize`'s heuristic sizes (no tensor cores) and
# blocks in launch order; `vectorize` stays to say, per access, that it is not vectorized.
OPTIONAL_PASSES: dict[str, dict[str, object] | None] = {
    "tiling": {"mma": False, "group_m": 1},
    "smem-placement": None,
    "pipeline": None,
    "vectorize": {"enable": False},
}

# What a compilation can produce; after the passes, the steps that produce each.
TARGETS = ("tir", "llvm", "ptx", "cubin")
LOWERING_STEPS = ("lower-to-llvm", "ptx", "cubin")


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


@dataclass(frozen=True)
class Stage:
    """The IR after one step of compilation (the frontend, then each pass)."""

    name: str
    ir: str
    remarks: tuple[Remark, ...] = ()


@dataclass
class CompiledProgram:
    """What `compile` produced: the IR, and every stage on the way to it."""

    module: ModuleOp
    program: Program
    stages: list[Stage] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)
    pass_manager: PassManager | None = None  # the one that ran the pipeline (timings)
    # Filled by lowering (`target` llvm, ptx or cubin):
    arch: str | None = None
    llvm: str | None = None  # LLVM IR as tilec emits it (before LLVM's optimizer)
    ptx: str | None = None
    cubin: bytes | None = None
    resources: dict[str, KernelResources] | None = None  # ptxas's report, per kernel

    @property
    def kernels(self) -> list[str]:
        return [f.sym_name for f in self.module.functions]

    @property
    def tir(self) -> str:
        """The final IR as text."""
        return print_op(self.module)

    def explain(self, ptxas: bool = True) -> str:
        """Per kernel, what the passes decided and why: tile sizes, grid, warps, layouts,
        shared buffers, stages, vector widths, and (with `ptxas`, when the program was
        lowered and ptxas is installed) registers and spills (`tilec.explain`)."""
        from tilec.explain import explain

        return explain(self, ptxas)

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
) -> CompiledProgram:
    """Compile a `.tile` file (a path) or tile source text (a string holding a `def`).

    `kernels` picks kernels by name (default: all; the IR lists them in that order); only
    those are analysed and compiled. `options` pins decisions for each of them
    (`{"tile": {"M": 128}, "warps": 4, "stages": 3}`), over what `@kernel(...)` in the source
    says. Raises `TileError` for any mistake in the input.

    `target` says how far to go: "tir" (the tile IR after `pipeline`, default none), or
    "llvm", "ptx", "cubin" (after `pipeline`, default `DEFAULT_PIPELINE`, the kernels are
    lowered for `arch`, default the GPU present else sm_90a; "cubin" needs ptxas). The result
    keeps every stage: `.stages`, `.llvm`, `.ptx`, `.cubin`, `.resources`.
    """
    if isinstance(source_or_path, os.PathLike) or _looks_like_path(source_or_path):
        module_ast = parse_file(source_or_path)
    else:
        module_ast = parse_source(str(source_or_path), "<string>")
    return compile_module(
        module_ast,
        kernels=kernels,
        options=options,
        pipeline=pipeline,
        instrumentation=instrumentation,
        target=target,
        arch=arch,
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
) -> CompiledProgram:
    """Analysis, IR generation and passes for a parsed module (what `compile` and
    `tilec compile` share).

    With `kernels`, the other kernels are left out before analysis: `options` pin the chosen
    kernels only, so `-k attention --tile M=64` works in a file whose other kernels have no M.
    """
    if kernels:
        module = _select_kernels(module, kernels)
    program = analyze(module, options)
    return compile_program(
        program,
        kernels=kernels,
        pipeline=pipeline,
        instrumentation=instrumentation,
        target=target,
        arch=arch,
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
) -> CompiledProgram:
    """IR generation and passes for an analysed program (the part `compile` shares with jit)."""
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
        dump_dir = instrumentation.dump_dir if instrumentation is not None else None
        path = save_crash_ir("irgen", print_op(module, print_locations=True), dump_dir)
        raise InternalCompilerError(
            "irgen", RuntimeError(f"IR generation produced invalid IR: {e.render()}"), path
        ) from e
    if target not in TARGETS:
        raise TileError(f"unknown target '{target}'", hint="targets: " + ", ".join(TARGETS))
    lowering = target != "tir"
    if pipeline is None:
        pipeline = DEFAULT_PIPELINE if lowering else ""
    result = CompiledProgram(module, program, [Stage("frontend", print_op(module))])
    steps = LOWERING_STEPS[: TARGETS.index(target)]  # tir: none; llvm: lower-to-llvm; ...
    manager = PassManager.from_text(pipeline, instrumentation, steps)
    result.pass_manager = manager
    if pipeline:
        seen = 0

        def record(p, module) -> None:
            nonlocal seen
            new = tuple(manager.context.remarks[seen:])
            seen = len(manager.context.remarks)
            result.stages.append(Stage(p.name, print_op(module), new))

        manager.run(module, after_each=record)
        result.remarks = list(manager.context.remarks)
    if lowering and not manager.stopped:
        _lower(result, manager, target, arch or default_arch())
    return result


def _lower(result: CompiledProgram, manager: PassManager, target: str, arch: str) -> None:
    """LLVM IR, PTX and (for "cubin") the cubin of the compiled module, each a stage that the
    instrumentation prints, dumps and may stop after."""
    instr = manager.instr
    result.arch = arch

    def step(name: str, text: str, suffix: str) -> bool:
        result.stages.append(Stage(name, text))
        if instr.print_ir_after_all or name in instr.print_ir_after:
            manager.print_text(f"IR Dump After {name}", text)
        manager.dump_text(name, text, suffix)
        return instr.stop_after == name

    unready = [
        f.sym_name
        for f in result.module.functions
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
        llvm_module = lower_to_llvm(result.module, arch)
    except (TileError, InternalCompilerError):
        raise
    except Exception as e:
        path = save_crash_ir(
            "lower-to-llvm", print_op(result.module, print_locations=True), instr.dump_dir
        )
        raise InternalCompilerError("lower-to-llvm", e, path) from e
    result.llvm = str(llvm_module)
    if step("lower-to-llvm", result.llvm, ".ll") or target == "llvm":
        return
    result.ptx = target_machine(arch).emit_assembly(optimize(result.llvm, arch))
    if step("ptx", result.ptx, ".ptx") or target != "cubin":
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
    step("cubin", report + "\n", ".ptxas.txt")


def _looks_like_path(s: str | os.PathLike[str]) -> bool:
    text = str(s)
    return "\n" not in text and (text.endswith(".tile") or os.path.isfile(text))
