"""One candidate compiled: what the tuner's worker processes run (CPU work, no GPU).

`build_candidate(problem, config)` compiles the kernel of `problem` with `config`'s pins and
pass options exactly as `@tilec.jit` would for the problem's specialization
(`JitFunction.plan_specialized`), in two steps that fail differently:

1. the frontend and the passes (tile IR only): a located `TileError` here is the passes' own
   legality check refusing the candidate — pins the tiling cannot honour, shared memory past
   the limit, tiles that do not divide into warps — and the candidate is *pruned* with that
   reason, before any PTX is made;
2. the lowering to PTX (llvmlite's NVPTX backend): an error here is a *failed* compile.

A built candidate carries its PTX, ABI and specialization (the parent launches it through
`JitFunction.adopt`, without compiling again), the tile IR after the passes (the CPU clock runs
it in the interpreter), and what each decision became (`space.read_back`). Its PTX also goes
into the kernel cache, as the jit's own compile would put it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tilec.diagnostics import InternalCompilerError, TileError
from tilec.tune.space import Config, read_back, split_config

__all__ = ["Build", "Problem", "build_candidate", "make_function"]


@dataclass(frozen=True)
class Problem:
    """A kernel at one specialization: what every candidate compiles for (plain data, so that
    it travels to worker processes)."""

    text: str  # the source the kernel is parsed from
    filename: str
    kernel: str
    extents: Mapping[str, int]  # every dimension's extent
    arch: str
    specialization: Mapping[str, Any]  # `Specialization.to_json()` of the arguments
    line_offset: int = 0
    col_offset: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)  # the author's jit options
    pass_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    disable: tuple[str, ...] = ()


@dataclass
class Build:
    """What compiling one candidate gave. `status`: "built", "pruned" (a pass refused it;
    `reason` says why) or "failed" (the lowering, or the worker, failed)."""

    config: dict[str, Any]
    status: str
    reason: str = ""
    decisions: dict[str, Any] = field(default_factory=dict)
    ptx: str = ""
    abi: Any = None  # KernelABI.to_json()
    pipeline: str = ""
    ir: str = ""  # the tile IR after the passes
    compile_s: float = 0.0

    @property
    def code(self) -> str:
        """A digest of the PTX and the ABI: two builds with the same code are the same kernel
        launched the same way (a pinned split changes only the ABI's split count, not the
        PTX: digesting the PTX alone timed every `split` candidate as the heuristic's)."""
        if not self.ptx:
            return ""
        text = self.ptx + "\n" + json.dumps(self.abi, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_function(problem: Problem, config: Config) -> Any:
    """The `JitFunction` of `problem`'s kernel with `config` over the author's options."""
    from tilec.frontend.source import Source
    from tilec.jit import JitFunction

    pins, pass_options = split_config(config)
    options = {**problem.options}
    if "tile" in pins:
        options["tile"] = {**options.get("tile", {}), **pins.pop("tile")}
    options.update(pins)
    merged = {name: dict(values) for name, values in problem.pass_options.items()}
    for name, values in pass_options.items():
        merged.setdefault(name, {}).update(values)
    options["pass_options"] = merged
    options["disable"] = problem.disable
    source = Source(problem.text, problem.filename, problem.line_offset, problem.col_offset)
    return JitFunction(None, options, source=source, name=problem.kernel)


def _reason(error: TileError) -> str:
    """The first line of a located error, without the `file:line:col: error:` prefix (the
    table names the kernel), and its hint."""
    text = error.message
    if error.hint:
        text += f" ({error.hint})"
    return " ".join(text.split())


def build_candidate(problem: Problem, config: Config) -> Build:
    """Compile `config` for `problem` (module docstring). Never raises for a bad candidate."""
    import time

    from tilec import kernel_cache
    from tilec.ir.printer import print_op
    from tilec.lowering import Specialization, compile_to_ptx, module_abi
    from tilec.lowering.abi import compiled_specialization

    start = time.perf_counter()
    result = Build(dict(config), "failed")
    specialization = Specialization.from_json(problem.specialization)
    try:
        function = make_function(problem, config)
        pipeline, key = function.plan_specialized(specialization, problem.extents, problem.arch)
        program = function._compile(pipeline)
    except TileError as e:
        result.status, result.reason = "pruned", _reason(e)
        result.compile_s = time.perf_counter() - start
        return result
    except InternalCompilerError as e:
        result.reason = str(e).splitlines()[0]
        result.compile_s = time.perf_counter() - start
        return result
    kernel = program.module.functions[0]
    specialization = compiled_specialization(kernel, specialization)
    result.decisions = read_back(kernel)
    result.pipeline = pipeline
    result.ir = print_op(program.module)
    try:
        result.ptx = compile_to_ptx(
            program.module,
            problem.arch,
            {kernel.sym_name: specialization},
            line_info=function.line_info,
        )
    except TileError as e:
        result.reason = "lowering: " + _reason(e)
    except Exception as e:  # an internal compiler error: recorded, the search goes on
        result.reason = f"lowering: {type(e).__name__}: {str(e).strip()[:200]}"
    else:
        abi = module_abi(program.module)[kernel.sym_name]
        result.abi = abi.to_json()
        result.status = "built"
        kernel_cache.store(
            key,
            {"ptx": result.ptx, "abi": result.abi, "specialization": specialization.to_json()},
        )
    result.compile_s = time.perf_counter() - start
    return result


def config_key(config: Config) -> str:
    """A config as canonical JSON (for sets and the cache)."""
    return json.dumps(dict(config), sort_keys=True)
