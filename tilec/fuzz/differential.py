"""The differential check: a generated program through every pass, in the interpreter, and as
PTX through ptxas.

For each program (`tilec.fuzz.generate`) the check

1. compiles it with the frontend (a rejection is a generator or frontend bug: the programs are
   well-typed);
2. for each architecture (sm_90a, sm_80), runs the pipeline a `@tilec.jit` call runs for
   contiguous tensors of the program's extents — `assume` with the facts such tensors give,
   then `DEFAULT_PIPELINE` with `tiling` told the whole dimensions' extents and the target —
   one pass at a time, keeping the IR after each, verifying it;
3. runs every kernel in the interpreter on the same random inputs after the frontend and after
   every pass, at the tile sizes the final IR fixes, and compares each run with the one before:
   bit for bit (NaN equal to NaN), since every pass of the pipeline is `exact`; the first pass
   after which an output changed is the one named. Half the programs (`every_stage`) compare
   the frontend's run with the last pass's first, and run the stages between only when those
   differ: each of the 2,000 kernels of a CI run is checked end to end, 1,000 pass by pass;
4. lowers the final IR of each architecture to PTX and has ptxas assemble it.

Kernels are checked in batches: one program of several kernels (names unique across them)
goes through the passes, the lowering and ptxas once, which costs about what one kernel does.
When anything fails in a batch, each of its kernels is checked alone, so that a finding names
one kernel.

A finding writes a directory: the program (`program.tile`), its extents and seed
(`case.json`), the IR before and after the pass that failed (`before.tir`, `after.tir`), and
`report.txt`. `python -m tilec.fuzz.differential --count N` runs the bulk check
(docs/testing.md); `--seed S --count 1` reproduces one batch.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilec.compiler import compile_source
from tilec.diagnostics import InternalCompilerError, TileError
from tilec.fuzz.findings import KNOWN_BUGS, Finding, KnownBug, ProgramResult, Summary, known_bug
from tilec.fuzz.generate import GeneratedProgram, sample_program
from tilec.fuzz.jit_pipeline import (
    PIPELINE_VARIANTS,
    SPLIT_PINNED,
    _small_tiles,
    _whole_dimensions,
    jit_pipeline,
    positive_scalars,
)
from tilec.fuzz.model import SM90_ONLY
from tilec.ir.printer import print_op
from tilec.ir.structure import structure
from tilec.ir.types import TensorType
from tilec.ir.verifier import VerifyError, verify
from tilec.passmanager import Pass, PassContext, parse_pipeline

__all__ = [
    "ARCHES",
    "KNOWN_BUGS",
    "Finding",
    "KnownBug",
    "ProgramResult",
    "Summary",
    "check_program",
    "every_stage",
    "jit_pipeline",
    "known_bug",
    "main",
    "run_fuzz",
]

ARCHES = ("sm_90a", "sm_80")


# ---------------------------------------------------------------------------------------------
# One program


# A pass that declares itself inexact (`Pass.exact = False`: it adds floats in another order,
# as split-reduction's partial sums or accumulate-atomics' sums of the blocks' atomic adds) is
# held to this tolerance, relative to the largest output, as translation validation holds it.
REORDER_RTOL = 1e-5


def _same(a: np.ndarray, b: np.ndarray, exact: bool = True) -> bool:
    if a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes():
        return True  # the common case, by a memcmp (NaNs and zeros alike by their bits)
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    if exact or np.array_equal(wide_a, wide_b, equal_nan=True):
        return bool(np.array_equal(wide_a, wide_b, equal_nan=True))
    if not np.array_equal(np.isnan(wide_a), np.isnan(wide_b)):
        return False
    finite = np.isfinite(wide_b)
    if not np.array_equal(wide_a[~finite], wide_b[~finite], equal_nan=True):
        return False
    scale = float(np.max(np.abs(wide_b[finite]), initial=0.0))
    difference = np.abs(wide_a[finite] - wide_b[finite])
    return bool(np.all(difference <= REORDER_RTOL * max(scale, 1.0)))


def _difference(a: np.ndarray, b: np.ndarray) -> str:
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        differs = ~((wide_a == wide_b) | (np.isnan(wide_a) & np.isnan(wide_b)))
    where = np.argwhere(differs)
    first = tuple(int(i) for i in where[0]) if len(where) else ()
    return (
        f"{len(where)} of {a.size} elements differ; first at {list(first)}: "
        f"{b[first]!r} before, {a[first]!r} after"
    )


def _kernel_extents(func: Any, extents: dict[str, int]) -> dict[str, int]:
    dims = {d for a in func.arguments if isinstance(a.type, TensorType) for d in a.type.shape}
    return {d: n for d, n in extents.items() if d in dims}


def _run(module: Any, name: str, inputs: list, tile_sizes: dict[str, int] | None):
    from tilec.interp.runner import run_on_copies

    return run_on_copies(module, name, inputs, tile_sizes)


def check_program(
    program: GeneratedProgram,
    *,
    arches: Sequence[str] = ARCHES,
    ptxas: bool = True,
    passes: Callable[[str, list[Pass]], list[Pass]] | None = None,
    out_dir: str | None = None,
    split: bool = True,
) -> ProgramResult:
    """Check `program` (see the module's docstring). `passes(arch, pipeline)` gives the passes
    to run instead of `jit_pipeline`'s `pipeline` (tests put a broken pass in it). `split`:
    when a batch has a finding, check each kernel alone and report those findings instead."""
    batched = split and len(program.kernels) > 1
    result = _check(program, arches, ptxas, passes, None if batched else out_dir)
    if batched and result.findings:
        result = ProgramResult(features=set(program.features))
        for i in range(len(program.kernels)):
            one = _check(program.single(i), arches, ptxas, passes, out_dir)
            result.kernels += one.kernels
            result.stages += one.stages
            result.ptxas_kernels += one.ptxas_kernels
            result.findings += one.findings
    return result


def _check(
    program: GeneratedProgram,
    arches: Sequence[str],
    ptxas: bool,
    passes: Callable[[str, list[Pass]], list[Pass]] | None,
    out_dir: str | None,
) -> ProgramResult:
    result = ProgramResult(features=set(program.features))
    filename = f"fuzz-{program.seed}.tile"

    def found(kind: str, stage: str, message: str, **details: Any) -> None:
        if kind == "rejected-by-pins":
            result.pin_rejections += 1
            return
        finding = Finding(kind, stage, message, program.seed, details.get("kernel"))
        finding.arch = details.get("arch")
        if out_dir is not None:
            finding.directory = _save(out_dir, program, finding, details)
        result.findings.append(finding)

    try:
        frontend = compile_source(program.source, filename).module
    except TileError as e:
        found("rejected", "frontend", e.render())
        return result
    except Exception:
        found("internal-error", "frontend", traceback.format_exc())
        return result
    assert frontend is not None
    result.kernels = len(program.kernels)
    funcs = {f.sym_name: f for f in frontend.functions}
    inputs = {}
    from tilec.interp.runner import random_arguments

    for name, func in funcs.items():
        inputs[name] = random_arguments(
            func, _kernel_extents(func, program.extents), seed=program.seed
        )
    from tilec.interp.launch import parameter_name

    # The float scalars this run passes positive where `@tilec.jit` keys their sign: the
    # pipeline is told so (`Specialization.positive`), as the jit would.
    positive = positive_scalars(
        frontend,
        {
            name: {parameter_name(a): v for a, v in zip(func.arguments, inputs[name])}
            for name, func in funcs.items()
        },
    )
    finals: dict[str, tuple] = {}
    seen: dict[tuple, list] = {}  # interpreter outputs by (kernel, IR, tile sizes): `_interpret`
    # f8 tiles: PTX converts them only on sm_90 and later, so kernels with f8 tensors are not
    # lowered for sm_80; the others of a batch are, as a batch of their own.
    sm90_only = _sm90_only_kernels(program)
    if sm90_only and "sm_80" in arches:
        rest = [i for i in range(len(program.kernels)) if i not in sm90_only]
        if rest:
            other = _check(_subset(program, rest), ["sm_80"], ptxas, passes, out_dir)
            result.stages += other.stages
            result.ptxas_kernels += other.ptxas_kernels
            result.findings += other.findings
            result.pin_rejections += other.pin_rejections
        arches = [a for a in arches if a != "sm_80"]
    every = every_stage(program.seed)
    # Stages are keyed by a number per distinct `structure` (hashed once, not at every lookup
    # of `seen` and every comparison: a type's hash walks its shape and layout).
    numbers: dict[tuple, int] = {}

    def key_of(module: Any) -> int:
        return numbers.setdefault(structure(module), len(numbers))

    run, rest = (program, frontend), (passes, found, positive, key_of)
    for arch in arches:
        stages = _run_passes(*run, arch, *rest, every)
        if stages is None:
            continue
        result.features |= _reached(stages[-1][1], arch)
        final = stages[-1][2]
        duplicate = final in finals.values()
        finals[arch] = final
        if not duplicate:  # sm_80 often takes the same decisions as sm_90a: run them once
            walk = None if every else functools.cache(lambda a=arch: _run_passes(*run, a, *rest))
            result.stages += _interpret(stages, funcs, inputs, arch, found, seen, walk)
        if ptxas:
            result.ptxas_kernels += _assemble(stages[-1][1], arch, len(funcs), found)
    return result


def every_stage(seed: int) -> bool:
    """Whether the program of `seed` runs in the interpreter after every pass, or only after
    the frontend and the last pass (and after every pass only when those two differ, to name
    the pass that changed the outputs). Half the programs, chosen by a multiplicative hash of
    the seed so that the choice does not follow the seed's residues mod 4 and 3, which pick
    the tile sizes and the pipeline's variant (`_run_passes`). Every program is checked from
    end to end; a pass whose mistake a later pass undoes is caught on the other half."""
    return ((seed * 2654435761) >> 16) & 1 == 0


def _reached(module: Any, arch: str) -> set[str]:
    """What the pipeline made of the program on `arch`, as coverage features: copies by the
    TMA unit, a warp-specialized loop, persistent blocks (the walk's `tilec.persistent`),
    atomic adds as vector `red`s (`vector` on an atomic), a split-K GEMM (a split kernel's
    partials read back by `tile.workspace_read`; without a dot, a split reduction of a 2-D
    carried tile), a split reduction (`tile.workspace_load`),
    one of sums rescaled by a running maximum (an exp in its combine's round), a split scan
    (`tile.split_ticket`), a load issued before the reductions that
    preceded it (`hoist-loads`' `tilec.hoisted_loads`), an element-wise kernel run as one
    dimension (`tilec.flattened`)."""
    from tilec.dialects import math as M
    from tilec.dialects import split as W
    from tilec.dialects.atomic import AtomicRMWOp, AtomicScatterOp
    from tilec.dialects.tma import TmaCopyOp
    from tilec.dialects.warp_specialize import WarpSpecializeOp

    reached = set()
    for op in module.walk():
        if isinstance(op, TmaCopyOp):
            reached.add(f"reached:tma:{arch}")
        elif isinstance(op, (AtomicRMWOp, AtomicScatterOp)) and "vector" in op.attributes:
            reached.add(f"reached:vector_red:{arch}")
        elif isinstance(op, WarpSpecializeOp):
            reached.add(f"reached:warp_specialize:{arch}")
        elif isinstance(op, W.WorkspaceReadOp):  # a slot a round: a dot's or a 2-D tile's
            kernel = op.parent_op
            while kernel is not None and kernel.name != "builtin.func":
                kernel = kernel.parent_op
            dots = kernel is not None and any(o.name == "tile.dot" for o in kernel.walk())
            reached.add(f"reached:{'split_k' if dots else 'split_tile'}:{arch}")
        elif isinstance(op, W.SplitTicketOp):  # chunks by ticket: a scan, or two passes
            kernel = op.parent_op
            while kernel is not None and kernel.name != "builtin.func":
                kernel = kernel.parent_op
            passes = kernel is not None and "passes" in str(kernel.attributes.get("tilec.split"))
            reached.add(f"reached:{'split_passes' if passes else 'split_scan'}:{arch}")
        elif isinstance(op, W.WorkspaceLoadOp):
            reached.add(f"reached:split:{arch}")
            if any(isinstance(o, M.ExpOp) for o in op.parent.ops):  # a rescaled sum's round
                reached.add(f"reached:split_online:{arch}")
        if "tilec.flattened" in getattr(op, "attributes", {}):
            reached.add(f"reached:flatten:{arch}")
        if "tilec.persistent" in getattr(op, "attributes", {}):
            reached.add(f"reached:persistent:{arch}")
        if "tilec.hoisted_loads" in getattr(op, "attributes", {}):
            reached.add(f"reached:hoisted_load:{arch}")
    return reached


def _sm90_only_kernels(program: GeneratedProgram) -> list[int]:
    """The kernels of `program` (indices) whose tensors have element types only sm_90 and
    later convert (`SM90_ONLY`); all of them when the per-kernel texts are not known."""
    texts = program.kernel_sources or [program.source] * len(program.kernels)
    return [i for i, text in enumerate(texts) if any(t in text for t in SM90_ONLY)]


def _subset(program: GeneratedProgram, indices: list[int]) -> GeneratedProgram:
    """The program of the kernels `indices` of `program` (same extents, seed and features)."""
    texts = [program.kernel_sources[i] for i in indices]
    return GeneratedProgram(
        "\n\n".join(texts),
        [program.kernels[i] for i in indices],
        dict(program.extents),
        program.seed,
        set(program.features),
        texts,
    )


PIN_ATTRIBUTES = ("tilec.pinned_tiles", "tilec.num_warps", "tilec.num_stages")


def _pins_to_blame(
    program: GeneratedProgram, frontend: Any, arch: str, small_tiles: bool = True
) -> bool:
    """Whether a pass refused the program only for its pins (`@kernel(tile=, warps=,
    stages=)`, or the check's own small tiles): without them the pipeline succeeds. A pin
    can make a tile no block holds (64x64 rows of 8 f64: 256 KiB); a located error is then
    the right answer, not a finding."""
    unpinned = frontend.clone()
    pinned = small_tiles and program.seed % 4 != 0  # `_run_passes` set the option tiles
    for f in unpinned.functions:
        for name in PIN_ATTRIBUTES:
            if name in f.attributes:
                del f.attributes[name]
                pinned = True
    if not pinned:
        return False
    pipeline = parse_pipeline(
        jit_pipeline(unpinned, program.extents, _whole_dimensions(unpinned), arch)
    )
    context = PassContext()
    try:
        for p in pipeline:
            context.current_pass = p.name
            p.run(unpinned, context)
    except Exception:
        return False
    return True


def _run_passes(
    program,
    frontend,
    arch,
    passes,
    found,
    positive: Sequence[str] = (),
    key_of: Callable[[Any], Any] = structure,
    every: bool = True,
) -> list[tuple[str, Any, Any, bool]] | None:
    """[(stage name, module after it, its key, its pass's `exact`)], frontend first; None
    when a pass failed. `positive`: the float scalars the run passes positive
    (`positive_scalars`); `key_of(module)`: a key equal for equal `structure`s. Without
    `every`, only the frontend's stage and the last pass's
    (`exact` when every pass is), the IR verified once at the end; a failure runs the
    passes again keeping every stage, to report it at its pass."""
    module = frontend.clone()
    tiles = _small_tiles(frontend) if program.seed % 4 else ""
    variant = {} if tiles else PIPELINE_VARIANTS[program.seed // 4 % len(PIPELINE_VARIANTS)]
    # Half the programs of small tiles (several iterations a loop) have every splittable loop
    # split 3 ways, GEMMs' K loops included (small tiles: tiling's model would not split them).
    split = SPLIT_PINNED if program.seed % 4 == 2 else 0
    whole = _whole_dimensions(frontend)
    pipeline = parse_pipeline(
        jit_pipeline(frontend, program.extents, whole, arch, tiles, variant, split, positive)
    )
    if passes is not None:
        pipeline = passes(arch, pipeline)
    context = PassContext()
    # Each stage's `structure` key tells a pass that changed nothing (same key: same results,
    # and nothing new to verify).
    # (stage, module, key, whether its pass keeps every bit: `Pass.exact`)
    stages: list[tuple[str, Any, Any, bool]] = [("frontend", frontend, key_of(frontend), True)]
    if not every:
        try:
            for p in pipeline:
                context.current_pass = p.name
                p.run(module, context)
            verify(module)
        except Exception:
            return _run_passes(program, frontend, arch, passes, found, positive, key_of)
        exact = all(p.exact for p in pipeline)
        return [*stages, (pipeline[-1].name, module, key_of(module), exact)]
    for p in pipeline:
        before = stages[-1][1]
        context.current_pass = p.name
        try:
            p.run(module, context)
            key = key_of(module)
            if key != stages[-1][2]:  # the same structure as the stage verified before it
                verify(module)
        except TileError as e:
            kind = "invalid-ir" if isinstance(e, VerifyError) else "rejected"
            if kind == "rejected" and passes is None and _pins_to_blame(program, frontend, arch):
                kind = "rejected-by-pins"
            found(kind, p.name, e.render(), arch=arch, before=before, after=module)
            return None
        except (InternalCompilerError, Exception):
            found("internal-error", p.name, traceback.format_exc(), arch=arch, before=before)
            return None
        # A pass that changed nothing leaves the stage before it: no copy to keep.
        kept = stages[-1][1] if key == stages[-1][2] else module.clone()
        stages.append((p.name, kept, key, p.exact))
    return stages


def _interpret(
    stages, funcs, inputs, arch, found, seen: dict | None = None, all_stages=None
) -> int:
    """Run each kernel of `funcs` in the interpreter after every stage that changed its IR,
    comparing each stage's outputs with the stage's before it; the interpreter runs made.
    With `all_stages`, `stages` are the frontend's and the last pass's only: their outputs
    are compared, and where they differ `all_stages()` (the passes run again, keeping every
    stage) gives the stages between, to name the pass.
    `seen`: outputs already computed for this program, by (kernel, `structure` key, tile
    sizes): the final stage's, run first for its tile sizes, is not run again when the loop
    reaches it, and a stage the other arch ran with the same IR at the same tile sizes is
    not either (rare: the archs mostly tile differently). The same IR run at the same tile
    sizes computes the same."""
    runs = 0
    seen = {} if seen is None else seen
    final = stages[-1][1]
    exact = all(stage[3] for stage in stages)
    for name in funcs:
        try:
            outputs, tile_sizes = _run(final, name, inputs[name], None)
            runs += 1
        except Exception as e:
            found("interpreter-error", stages[-1][0], _message(e), kernel=name, arch=arch)
            continue
        sizes = tuple(sorted(tile_sizes.items()))
        seen.setdefault((name, stages[-1][2], sizes), outputs)
        walked = stages
        if all_stages is not None:
            first = seen.get((name, stages[0][2], sizes))
            if first is None:
                try:
                    first, _ = _run(stages[0][1], name, inputs[name], tile_sizes)
                    runs += 1
                    seen[(name, stages[0][2], sizes)] = first
                except Exception:
                    first = None  # the walk below reports it at its stage
            if first is not None and all(_same(a, b, exact) for a, b in zip(outputs, first)):
                continue
            walked = all_stages()
            if walked is None:  # pragma: no cover - the passes ran once already
                continue
        previous = None
        for index, (stage, module, key, exact) in enumerate(walked):
            if index and key == walked[index - 1][2]:
                continue  # the pass changed nothing: same IR, same results
            outputs = seen.get((name, key, sizes))
            if outputs is None:
                try:
                    outputs, _ = _run(module, name, inputs[name], tile_sizes)
                except Exception as e:
                    found(
                        "interpreter-error",
                        stage,
                        _message(e),
                        kernel=name,
                        arch=arch,
                        before=walked[index - 1][1] if index else None,
                        after=module,
                    )
                    break
                runs += 1
                seen[(name, key, sizes)] = outputs
            if previous is not None:
                changed = [
                    i for i, (a, b) in enumerate(zip(outputs, previous)) if not _same(a, b, exact)
                ]
                if changed:
                    i = changed[0]
                    message = f"output {i} of {name}: " + _difference(outputs[i], previous[i])
                    found(
                        "mismatch",
                        stage,
                        message + f"\ntile sizes: {tile_sizes}",
                        kernel=name,
                        arch=arch,
                        before=walked[index - 1][1],
                        after=module,
                    )
                    break
            previous = outputs
    return runs


def _assemble(module, arch: str, kernels: int, found) -> int:
    from tilec.lowering import compile_to_ptx
    from tilec.lowering.ptxas import PtxasError, assemble

    try:
        ptx = compile_to_ptx(module, arch, line_info=False)
    except TileError as e:
        found("rejected", "lower-to-llvm", e.render(), arch=arch, before=module)
        return 0
    except Exception:
        found("internal-error", "lower-to-llvm", traceback.format_exc(), arch=arch, before=module)
        return 0
    try:
        assemble(ptx, arch)
    except PtxasError as e:
        found("ptxas", "ptxas", str(e), arch=arch, before=module, ptx=ptx)
        return 0
    return kernels


def _message(e: BaseException) -> str:
    if isinstance(e, TileError):
        return e.render()
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def _save(out_dir: str, program: GeneratedProgram, finding: Finding, details: dict) -> str:
    """Write the program, its case, the IR before and after and the report; the directory."""
    name = f"seed{program.seed}-{finding.kind}-{finding.stage}"
    if finding.kernel:
        name += f"-{finding.kernel}"
    if finding.arch:
        name += f"-{finding.arch}"
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "program.tile"), "w", encoding="utf-8") as f:
        f.write(program.source)
    case = {"seed": program.seed, "extents": program.extents, "kernels": program.kernels}
    with open(os.path.join(directory, "case.json"), "w", encoding="utf-8") as f:
        json.dump(case, f, indent=1)
    for key in ("before", "after"):
        module = details.get(key)
        if module is not None:
            with open(os.path.join(directory, f"{key}.tir"), "w", encoding="utf-8") as f:
                f.write(print_op(module))
    if details.get("ptx"):
        with open(os.path.join(directory, "kernel.ptx"), "w", encoding="utf-8") as f:
            f.write(details["ptx"])
    with open(os.path.join(directory, "report.txt"), "w", encoding="utf-8") as f:
        f.write(f"{finding.kind} after {finding.stage} ({finding.arch or 'any arch'})\n")
        f.write(finding.message.rstrip() + "\n")
    return directory


# ---------------------------------------------------------------------------------------------
# Bulk runs


def _check_seed(job: tuple) -> ProgramResult:
    seed, kernels, ptxas, out_dir = job
    start = _cpu_seconds()
    result = check_program(sample_program(seed, kernels), ptxas=ptxas, out_dir=out_dir)
    result.cpu_seconds = _cpu_seconds() - start
    return result


def _cpu_seconds() -> float:
    """This process's CPU time and that of its children that ended (ptxas)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _assembles(seed: int, every: int) -> bool:
    if not every:
        return False
    if seed % 4 == 0:  # tiling's own sizes (`_run_passes`)
        return seed % (4 * every) == 0
    return seed % every == 1 % every


def run_fuzz(
    count: int,
    *,
    seed: int = 0,
    batch: int = 8,
    workers: int = 1,
    seconds: float | None = None,
    ptxas_every: int = 1,
    out_dir: str | None = None,
    progress: Callable[[Summary], None] | None = None,
) -> Summary:
    """Check at least `count` generated kernels (programs of `batch` kernels, seeds `seed`,
    `seed + 1`, ...), on `workers` processes, stopping early after `seconds`. ptxas assembles
    every `ptxas_every`-th program (0: none)."""
    summary = Summary()
    start = time.perf_counter()
    programs = -(-count // batch)
    # ptxas: every `ptxas_every`-th program with small tiles, and one in 4 * ptxas_every of
    # those with tiling's own (larger, wgmma) sizes, whose PTX takes LLVM and ptxas ~3x longer.
    jobs = [(seed + i, batch, _assembles(seed + i, ptxas_every), out_dir) for i in range(programs)]

    def done(result: ProgramResult) -> bool:
        summary.add(result)
        summary.seconds = time.perf_counter() - start
        if progress is not None:
            progress(summary)
        return seconds is not None and summary.seconds > seconds

    if workers <= 1:
        for job in jobs:
            if done(_check_seed(job)):
                break
    else:
        import multiprocessing

        # spawn, not fork: a forked child of a process with threads (pytest with torch, LLVM)
        # can inherit a held lock and hang.
        context = multiprocessing.get_context("spawn")
        with context.Pool(workers) as pool:
            for result in pool.imap(_check_seed, jobs):
                if done(result):
                    pool.terminate()
                    break
    summary.seconds = time.perf_counter() - start
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="generated kernels to check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--batch", type=int, default=8, help="kernels per program")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument(
        "--ptxas-every", type=int, default=1, help="assemble every N-th program (0: none)"
    )
    parser.add_argument("--out", default="fuzz-findings", help="where findings are written")
    parser.add_argument("--show", action="store_true", help="print the program of --seed")
    parser.add_argument("--json", help="write the summary as JSON here")
    args = parser.parse_args(argv)
    if args.show:
        program = sample_program(args.seed, args.batch)
        print(f"# extents: {program.extents}, seed {program.seed}")
        print(program.source)
        return 0
    summary = run_fuzz(
        args.count,
        seed=args.seed,
        batch=args.batch,
        workers=args.workers,
        seconds=args.seconds,
        ptxas_every=args.ptxas_every,
        out_dir=args.out,
    )
    print(summary.render())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary.to_json(), f, indent=1)
    return 1 if summary.findings else 0


if __name__ == "__main__":
    sys.exit(main())
