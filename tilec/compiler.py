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

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tilec.diagnostics import InternalCompilerError, Location, TileError
from tilec.dialects.builtin import ModuleOp
from tilec.frontend import analyze, parse_file, parse_source
from tilec.frontend.irgen import generate_ir
from tilec.frontend.sema import Program
from tilec.frontend.syntax import FunctionDef, Module
from tilec.ir.printer import print_op
from tilec.ir.verifier import VerifyError, verify
from tilec.passmanager import Instrumentation, PassManager, Remark, save_crash_ir

__all__ = [
    "DEFAULT_PIPELINE",
    "CompiledProgram",
    "Stage",
    "compile",
    "compile_module",
    "compile_program",
]

# The passes every kernel goes through after the frontend. Every pass in it is checked by
# translation validation (tests/unit/test_translation_validation.py) on every example.
DEFAULT_PIPELINE = "canonicalize,cse,dce"


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

    @property
    def kernels(self) -> list[str]:
        return [f.sym_name for f in self.module.functions]

    @property
    def tir(self) -> str:
        """The final IR as text."""
        return print_op(self.module)

    def __str__(self) -> str:
        return self.tir


def compile(
    source_or_path: str | os.PathLike[str],
    *,
    kernels: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    pipeline: str = "",
    instrumentation: Instrumentation | None = None,
) -> CompiledProgram:
    """Compile a `.tile` file (a path) or tile source text (a string holding a `def`).

    `kernels` picks kernels by name (default: all; the IR lists them in that order); only
    those are analysed and compiled. `options` pins decisions for each of them
    (`{"tile": {"M": 128}, "warps": 4, "stages": 3}`), over what `@kernel(...)` in the source
    says. Raises `TileError` for any mistake in the input.
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
    )


def compile_module(
    module: Module,
    *,
    kernels: Sequence[str] | None = None,
    options: Mapping[str, object] | None = None,
    pipeline: str = "",
    instrumentation: Instrumentation | None = None,
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
        program, kernels=kernels, pipeline=pipeline, instrumentation=instrumentation
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
    pipeline: str = "",
    instrumentation: Instrumentation | None = None,
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
    result = CompiledProgram(module, program, [Stage("frontend", print_op(module))])
    if pipeline:
        manager = PassManager.from_text(pipeline, instrumentation)
        seen = 0

        def record(p, module) -> None:
            nonlocal seen
            new = tuple(manager.context.remarks[seen:])
            seen = len(manager.context.remarks)
            result.stages.append(Stage(p.name, print_op(module), new))

        manager.run(module, after_each=record)
        result.remarks = list(manager.context.remarks)
        result.pass_manager = manager
    return result


def _looks_like_path(s: str | os.PathLike[str]) -> bool:
    text = str(s)
    return "\n" not in text and (text.endswith(".tile") or os.path.isfile(text))
