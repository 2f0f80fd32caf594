"""The `tilec` command line.

    tilec opt FILE.tir -p PIPELINE [-o OUT]    run passes over IR text (tilec's mlir-opt)
    tilec compile FILE.tile [-k KERNEL]        PTX (or tile IR, LLVM IR, a cubin) of a .tile
                                               file; --explain: what the passes decided
    tilec run FILE.tile -k KERNEL --sizes M=1000,N=777
                                               the kernel in the interpreter, on random
                                               inputs, checked against its numpy reference
    tilec passes                               every pass with its summary and options
    tilec explore FILE.tile [-k KERNEL] [-o OUT.html]
                                               an HTML page to step through the passes
    tilec --version

User errors print `file:line:col: error: ...` with the source line and a caret and exit 1;
internal compiler errors name the pass, save the IR, and exit 2. No output file is written
unless everything succeeded.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from collections.abc import Sequence

import tilec
from tilec.diagnostics import InternalCompilerError, TileError
from tilec.passmanager import Instrumentation

SPLIT_MARKER = "// -----"


def _add_instrumentation_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("instrumentation")
    g.add_argument(
        "--print-ir-after-all",
        action="store_true",
        help="print the IR after every pass (to stderr)",
    )
    g.add_argument(
        "--print-ir-before",
        metavar="PASS",
        action="append",
        default=[],
        help="print the IR before PASS (repeatable; comma-separated lists allowed)",
    )
    g.add_argument(
        "--print-ir-after",
        metavar="PASS",
        action="append",
        default=[],
        help="print the IR after PASS (repeatable)",
    )
    g.add_argument("--stop-after", metavar="PASS", help="stop the pipeline after PASS")
    g.add_argument(
        "--dump-dir",
        metavar="DIR",
        help="write every step to DIR as numbered files: the IR before the first pass and "
        "after each pass (NN-PASS.tir); for compile also the source, LLVM IR, PTX, ptxas's "
        "report and remarks.json (docs/debugging.md)",
    )
    g.add_argument(
        "--verify-each",
        dest="verify_each",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify the IR after each pass (default: on)",
    )
    g.add_argument(
        "--timing", action="store_true", help="report the wall time of each pass (to stderr)"
    )
    g.add_argument(
        "--print-remarks",
        action="store_true",
        help="print each pass's remarks (its decisions and reasons) as comments above the ops they concern",
    )
    g.add_argument("--print-locations", action="store_true", help="print loc(...) on every op")
    g.add_argument(
        "--print-local-scope",
        action="store_true",
        help="print layout attributes in full where they are used, not as #aliases",
    )


def add_arch_flag(parser: argparse.ArgumentParser) -> None:
    """`--arch` (`tilec compile` and `tilec explore`): one of the architectures the lowering
    supports."""
    from tilec.lowering import llvm

    parser.add_argument(
        "--arch",
        choices=llvm.ARCHES,
        help="GPU architecture to compile for (default: the GPU present, else sm_90a)",
    )


def add_pinning_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that pin what the passes decide (`tilec compile` and `tilec explore`)."""
    parser.add_argument(
        "--tile",
        metavar="DIM=SIZE,...",
        help="pin tile sizes, e.g. --tile M=128,N=64 (as @kernel(tile={...}) does)",
    )
    parser.add_argument("--warps", type=int, help="pin the number of warps per block")
    parser.add_argument("--stages", type=int, help="pin the number of pipeline stages")
    parser.add_argument(
        "--dtype",
        metavar="PARAM=DTYPE,...",
        help="bind dtype parameters, e.g. --dtype T=f16 (a kernel declaring "
        '@kernel(dtypes={"T": [...]}); default: the first dtype it lists)',
    )
    parser.add_argument(
        "--disable",
        metavar="PASS,...",
        action="append",
        default=[],
        help="turn optimisation passes off (repeatable): tiling (heuristic sizes, no tensor "
        "cores, launch block order), mask-bounds (loops stop before fully masked tiles), "
        "smem-placement, pipeline, vectorize; e.g. "
        "--disable pipeline,vectorize",
    )
    parser.add_argument(
        "--pass-option",
        metavar="PASS.OPTION=VALUE",
        action="append",
        default=[],
        help="set an option of a pass of the pipeline (repeatable; `tilec passes` lists "
        "them), e.g. --pass-option pipeline.num_stages=2 --pass-option vectorize.max_bytes=8",
    )
    parser.add_argument(
        "--assume",
        metavar="FACT,...",
        default="none",
        help="what every launch's arguments will satisfy, for the code to use (the 'assume' "
        "pass): aligned = pointers 16-byte aligned, unit = last strides 1, divisible = "
        "extents and other strides multiples of 16, positive = every float scalar finite and "
        "above zero, positive=NAME = scalar NAME so, dense = every tensor row-major with no "
        "gaps; e.g. --assume aligned,unit,divisible,dense "
        "(what @tilec.jit finds for contiguous tensors), --assume positive=scale (what it "
        "finds for a positive scale). Default none: the code is right for any arguments",
    )


def _split_names(values: list[str]) -> set[str]:
    return {name for v in values for name in v.split(",") if name}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilec", description="tilec: a tile compiler for NVIDIA GPUs."
    )
    parser.add_argument("--version", action="version", version=f"tilec {tilec.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    opt = sub.add_parser(
        "opt",
        help="run a pass pipeline over an IR file (.tir)",
        description="Parse IR text, verify it, run a pass pipeline, print the result.",
    )
    opt.add_argument("file", help="IR file to read ('-' for stdin)")
    opt.add_argument(
        "-p",
        "--pipeline",
        "--passes",
        dest="pipeline",
        default="",
        help="pass pipeline, e.g. 'canonicalize,cse,dce'",
    )
    opt.add_argument("-o", "--output", help="write the result here instead of stdout")
    opt.add_argument(
        "--split-input-file",
        action="store_true",
        help=f"treat each chunk between '{SPLIT_MARKER}' lines as a separate module",
    )
    opt.add_argument("--generic", action="store_true", help="print every op in the generic form")
    _add_instrumentation_flags(opt)

    comp = sub.add_parser(
        "compile",
        help="compile a .tile file",
        description="Compile the kernels of a .tile file and print the chosen stage.",
    )
    comp.add_argument("file", help=".tile file to compile ('-' for stdin)")
    comp.add_argument(
        "--emit",
        choices=["tir", "llvm", "ptx", "cubin"],
        default="ptx",
        help="what to write: tir = tile IR (after -p, default no passes); llvm = LLVM IR; "
        "ptx (default); cubin (needs ptxas and -o). llvm/ptx/cubin run the default pipeline "
        "unless -p is given",
    )
    add_arch_flag(comp)
    comp.add_argument(
        "-k", "--kernel", action="append", default=[], help="compile only this kernel (repeatable)"
    )
    comp.add_argument("-o", "--output", help="write the result here instead of stdout")
    comp.add_argument(
        "-p",
        "--pipeline",
        default=None,
        help="passes to run on the tile IR, e.g. 'canonicalize,cse,dce' (default: none for "
        "--emit tir, else the default pipeline)",
    )
    add_pinning_flags(comp)
    comp.add_argument(
        "--explain",
        action="store_true",
        help="print, per kernel, what the passes decided and why (tile sizes, grid, warps, "
        "layouts, shared buffers, stages, vector widths; registers and spills from ptxas) "
        "instead of the output; with -o the output still goes to the file",
    )
    comp.add_argument(
        "--no-line-info",
        dest="line_info",
        action="store_false",
        help="leave out the .file/.loc directives that tie the PTX to the source lines "
        "(for profilers' source views)",
    )
    _add_instrumentation_flags(comp)

    run = sub.add_parser(
        "run",
        help="run a kernel in the interpreter on random inputs, checked against its reference",
        description=(
            "Run a kernel of a .tile (or .tir) file in the reference interpreter on random inputs and "
            "compare what it writes with the example's numpy reference (foo_reference.py "
            "beside foo.tile, or --reference). Exit 0 when it matches or there is no "
            "reference, 1 when it does not or the input is wrong."
        ),
    )
    run.add_argument("file", help=".tile file, or a .tir file of IR at any level before lowering")
    run.add_argument("-k", "--kernel", help="the kernel to run (needed when the file has several)")
    run.add_argument(
        "-p",
        "--pipeline",
        default="",
        help="passes to run before interpreting, e.g. 'canonicalize,cse' (default: none)",
    )
    run.add_argument(
        "--sizes",
        metavar="DIM=N,...",
        default="",
        help="the extent of every dimension, e.g. --sizes M=1000,N=777,K=333",
    )
    run.add_argument(
        "--tile",
        metavar="DIM=SIZE,...",
        help="tile sizes, e.g. --tile M=64,N=64 (default: pinned ones, else 16; whole "
        "dimensions are covered)",
    )
    run.add_argument(
        "--dtype",
        metavar="PARAM=DTYPE,...",
        help="bind dtype parameters, e.g. --dtype T=f32 (default: the first dtype each lists)",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument(
        "--scalar",
        metavar="NAME=VALUE,...",
        help="values of scalar parameters, e.g. --scalar eps=1e-5 (default: the reference's "
        "SCALARS, else random)",
    )
    run.add_argument("--reference", metavar="FILE.py", help="the numpy reference to check against")
    run.add_argument("--rtol", type=float, help="relative tolerance for float outputs")

    sub.add_parser("passes", help="list every pass with its summary and options")
    explore = sub.add_parser(
        "explore",
        help="write an HTML page that steps through the compilation of a .tile file",
        description="Compile a .tile file and write one self-contained HTML page: the "
        "IR after each pass with its diff and remarks, the source beside it, pictures of "
        "layouts and swizzles, the PTX with registers and shared memory (docs/explore.md).",
    )
    from tilec.explore.cli import add_arguments as add_explore_arguments

    add_explore_arguments(explore)
    bench = sub.add_parser(
        "bench",
        help="race tilec's kernels on the GPU against the best peer of each",
        description="Run the benchmark suite on the GPU (tilec.benchmarks.suite): every "
        "workload against its best peer (cuBLAS, SDPA, torch.compile, eager torch, autotuned "
        "Triton) and the ceilings of the same run, with a progress bar; prints one table, "
        "the geometric mean of tilec/best peer and the worst workloads.",
    )
    from tilec.benchmarks.gpu import add_arguments as add_bench_arguments

    add_bench_arguments(bench)
    tune = sub.add_parser(
        "tune",
        help="search a kernel's decisions on the GPU, with the benchmark's clock",
        description="Tune a kernel at given sizes: from the heuristics' choice, search the "
        "decisions the passes expose as pins (tile sizes, warps, stages, block order, "
        "tensor-core path, split, occupancy), checking each candidate's output before timing "
        "it with the clock `tilec bench` uses; print the candidates, the winner, the "
        "heuristic's regret, and cache the winner (docs/tuning.md).",
    )
    from tilec.tune.cli import add_arguments as add_tune_arguments

    add_tune_arguments(tune)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser `main` reads its arguments with, built once a process (7 ms: the mutation
    check calls `main` thousands of times in one process); parsing leaves it as it was."""
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "opt":
            return _opt(args)
        if args.command == "compile":
            return _compile(args)
        if args.command == "run":
            return _run(args)
        if args.command == "passes":
            return _passes()
        if args.command == "explore":
            from tilec.explore.cli import run as explore

            return explore(args)
        if args.command == "bench":
            from tilec.benchmarks.gpu import run_command

            return run_command(args, progress=True)  # a bar on a terminal, else lines
        if args.command == "tune":
            from tilec.tune.cli import run as tune

            return tune(args)
    except TileError as e:
        print(e.render(), file=sys.stderr)
        return 1
    except InternalCompilerError as e:
        print(str(e), file=sys.stderr)
        return 2
    except OSError as e:
        # The file system refused something the user asked for (a --dump-dir that cannot be
        # made, a full disk): the user's problem to fix, not a compiler bug.
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


def read_input(path: str) -> tuple[str, str]:
    """The text of `path` ('-': stdin) and the name its diagnostics use."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    from tilec.frontend.source import decode_source

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TileError(f"cannot read '{path}': {e.strerror}") from None
    return decode_source(data, path), path


def _chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """(chunk text, line offset) pairs."""
    if not split:
        return [(text, 0)]
    chunks: list[tuple[str, int]] = []
    current: list[str] = []
    start_line = 0
    for number, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append(("\n".join(current), start_line))
            current, start_line = [], number + 1
        else:
            current.append(line)
    chunks.append(("\n".join(current), start_line))
    return chunks


def _opt(args: argparse.Namespace) -> int:
    from tilec.ir.parser import parse_module
    from tilec.ir.printer import print_op
    from tilec.ir.verifier import verify
    from tilec.passmanager import PassManager

    text, filename = read_input(args.file)
    instrumentation = _instrumentation(args)
    outputs: list[str] = []
    failed = False
    for chunk, line_offset in _chunks(text, args.split_input_file):
        try:
            module = parse_module(chunk, filename, line_offset=line_offset)
            verify(module)
            pm = PassManager.from_text(args.pipeline, instrumentation)
            pm.run(module)
        except TileError as e:
            if not args.split_input_file:
                raise
            print(e.render(), file=sys.stderr)
            failed = True
            continue
        if args.timing:
            sys.stderr.write(pm.timing_report())
        outputs.append(
            print_op(
                module,
                print_locations=args.print_locations,
                generic=args.generic,
                remarks=pm.context.remark_lookup() if args.print_remarks else None,
                local_scope=args.print_local_scope,
            )
        )
    result = f"{SPLIT_MARKER}\n".join(outputs)
    if not (failed and args.output):
        write_output(result, args.output)
    return 1 if failed else 0


def _instrumentation(args: argparse.Namespace) -> Instrumentation:
    return Instrumentation(
        print_ir_after_all=args.print_ir_after_all,
        print_ir_before=_split_names(args.print_ir_before),
        print_ir_after=_split_names(args.print_ir_after),
        stop_after=args.stop_after,
        dump_dir=args.dump_dir,
        verify_each=args.verify_each,
        timing=args.timing,
        print_remarks=args.print_remarks,
        print_locations=args.print_locations,
    )


def pinned_options(args: argparse.Namespace) -> dict[str, object]:
    """The pins of --tile/--warps/--stages as `tilec.compile`'s `options`."""
    options: dict[str, object] = {}
    if args.tile:
        tile: dict[str, int] = {}
        for item in args.tile.split(","):
            name, eq, size = item.partition("=")
            if not eq or not size.strip().isdigit():
                raise TileError(
                    f"--tile: expected DIM=SIZE, got '{item}'", hint="e.g. --tile M=128,N=64"
                )
            tile[name.strip()] = int(size)
        options["tile"] = tile
    if args.warps is not None:
        options["warps"] = args.warps
    if args.stages is not None:
        options["stages"] = args.stages
    if getattr(args, "dtype", None):
        options["dtypes"] = dtype_bindings(args.dtype)
    return options


def dtype_bindings(text: str) -> dict[str, str]:
    """`--dtype T=bf16,I=i32` as the `dtypes` option."""
    dtypes: dict[str, str] = {}
    for item in text.split(","):
        name, eq, dtype = (part.strip() for part in item.partition("="))
        if not eq or not name or not dtype:
            raise TileError(
                f"--dtype: expected PARAM=DTYPE, got '{item}'", hint="e.g. --dtype T=bf16"
            )
        dtypes[name] = dtype
    return dtypes


def _with_assumptions(pipeline: str | None, assume: str, emit: str) -> str | None:
    """`pipeline` (None: the default for `emit`) started by the `assume` pass for `--assume`:
    blanket facts (`aligned,unit,divisible`), and `positive=NAME` items naming float scalars."""
    from tilec.compiler import DEFAULT_PIPELINE
    from tilec.lowering.abi import ASSUMPTIONS

    facts, positive = [], []
    for item in (f.strip() for f in assume.split(",")):
        fact, eq, name = (part.strip() for part in item.partition("="))
        if not item or item == "none":
            continue
        if eq and fact == "positive" and name:
            positive.append(name)
        elif eq or fact not in ASSUMPTIONS:
            raise TileError(
                f"--assume: unknown fact '{item}'",
                hint="facts: " + ", ".join(ASSUMPTIONS) + ", or positive=NAME for one scalar",
            )
        else:
            facts.append(fact)
    if not facts and not positive:
        return pipeline
    if pipeline is None:
        pipeline = DEFAULT_PIPELINE if emit != "tir" else ""
    rest = f",{pipeline}" if pipeline else ""
    options = ([f'all="{",".join(facts)}"'] if facts else []) + (
        [f'positive="{",".join(positive)}"'] if positive else []
    )
    return f"assume{{{' '.join(options)}}}{rest}"


def _pass_options(items: list[str]) -> dict[str, dict[str, str]]:
    """`--pass-option pipeline.num_stages=2 ...` as {"pipeline": {"num_stages": "2"}}."""
    options: dict[str, dict[str, str]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        pass_name, dot, option_name = key.strip().rpartition(".")
        if not eq or not dot or not pass_name or not option_name or not value.strip():
            raise TileError(
                f"--pass-option: expected PASS.OPTION=VALUE, got '{item}'",
                hint="e.g. --pass-option pipeline.num_stages=2",
            )
        options.setdefault(pass_name, {})[option_name] = value.strip()
    return options


def compile_pipeline(args: argparse.Namespace) -> str | None:
    """The passes `tilec compile` runs: -p, else the default pipeline when lowering or when
    --explain, --disable or --pass-option ask about its passes, else none (None: the
    default of the target); with --disable and --pass-option applied, after `assume`."""
    from tilec.compiler import DEFAULT_PIPELINE, build_pipeline

    disable = [name for v in args.disable for name in v.split(",") if name.strip()]
    options = _pass_options(args.pass_option)
    pipeline = args.pipeline
    if pipeline is None and (args.emit != "tir" or args.explain or disable or options):
        pipeline = DEFAULT_PIPELINE
    if disable or options:
        pipeline = build_pipeline(pipeline, disable=[d.strip() for d in disable], options=options)
    return _with_assumptions(pipeline, args.assume, args.emit)


def _compile(args: argparse.Namespace) -> int:
    from tilec.compiler import compile_source
    from tilec.ir.printer import print_op

    if args.emit == "cubin" and not args.output:
        raise TileError("--emit cubin writes a binary file: give it with -o FILE")
    text, filename = read_input(args.file)
    compiled = compile_source(
        text,
        filename,
        kernels=args.kernel or None,
        options=pinned_options(args) or None,
        pipeline=compile_pipeline(args),
        instrumentation=_instrumentation(args),
        target=args.emit,
        arch=args.arch,
        line_info=args.line_info,
    )
    manager = compiled.pass_manager
    if args.timing and manager is not None:
        sys.stderr.write(manager.timing_report())
    # The furthest stage reached (--stop-after may end the compilation early).
    result: str | bytes
    if args.emit == "cubin" and compiled.cubin is not None:
        result = compiled.cubin
    elif args.emit in ("ptx", "cubin") and compiled.ptx is not None:
        result = compiled.ptx
    elif args.emit != "tir" and compiled.llvm is not None:
        result = compiled.llvm
    else:
        result = print_op(
            compiled.module,
            print_locations=args.print_locations,
            remarks=manager.context.remark_lookup()
            if args.print_remarks and manager is not None
            else None,
            local_scope=args.print_local_scope,
        )
    if not args.explain:
        write_output(result, args.output)
        return 0
    explanation = compiled.explain()  # before writing: ptxas may reject the PTX
    if args.output:
        write_output(result, args.output)
    sys.stdout.write(explanation)
    return 0


def _assignments(text: str | None, option: str, example: str) -> dict[str, str]:
    """`A=1,B=2` as {"A": "1", "B": "2"}."""
    result: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise TileError(f"{option}: expected NAME=VALUE, got '{item}'", hint=f"e.g. {example}")
        result[name.strip()] = value.strip()
    return result


def _integers(text: str | None, option: str, example: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for name, value in _assignments(text, option, example).items():
        try:
            result[name] = int(value, 0)
        except ValueError:
            raise TileError(
                f"{option}: {name}={value} is not an integer", hint=f"e.g. {example}"
            ) from None
    return result


def _scalar_values(text: str | None) -> dict[str, int | float]:
    values: dict[str, int | float] = {}
    for name, value in _assignments(text, "--scalar", "--scalar eps=1e-5").items():
        try:
            values[name] = int(value, 0)
        except ValueError:
            try:
                values[name] = float(value)
            except ValueError:
                raise TileError(f"--scalar: {name}={value} is not a number") from None
    return values


def _run(args: argparse.Namespace) -> int:
    from tilec.compiler import compile_program
    from tilec.frontend import analyze, parse_source
    from tilec.interp.runner import check_kernel, load_reference, reference_path

    text, filename = read_input(args.file)
    if filename.endswith(".tir"):
        # IR of any level before lowering (e.g. a hand-pipelined kernel) runs as it is.
        from tilec.ir.parser import parse_module
        from tilec.ir.verifier import verify
        from tilec.passmanager import PassManager

        compiled = parse_module(text, filename)
        verify(compiled)
        PassManager.from_text(args.pipeline).run(compiled)
        kernels = [f.sym_name for f in compiled.functions]
        if args.kernel is not None and args.kernel not in kernels:
            raise TileError(
                f"no kernel named '{args.kernel}' in {filename}",
                hint="kernels in this file: " + (", ".join(kernels) or "none"),
            )
        kernels = [args.kernel] if args.kernel else kernels
    else:
        options = {"dtypes": dtype_bindings(args.dtype)} if args.dtype else None
        program = analyze(parse_source(text, filename), options)
        compiled = compile_program(
            program, kernels=[args.kernel] if args.kernel else None, pipeline=args.pipeline
        )
        kernels = compiled.kernels
    if len(kernels) != 1:
        raise TileError(
            f"{filename} has {len(kernels)} kernels; choose one with -k",
            hint="kernels: " + ", ".join(kernels),
        )
    sizes = _integers(args.sizes, "--sizes", "--sizes M=1000,N=777")
    tiles = _integers(args.tile, "--tile", "--tile M=64,N=64")
    if args.reference is not None:
        reference = load_reference(args.reference)
    elif os.path.isfile(reference_path(filename)):
        reference = load_reference(reference_path(filename))
    else:
        reference = None
    report = check_kernel(
        compiled,
        kernels[0],
        sizes,
        tile_sizes=tiles or None,
        seed=args.seed,
        scalars=_scalar_values(args.scalar),
        reference=reference,
        rtol=args.rtol,
    )
    if reference is None:
        report.note = f"no reference ({reference_path(filename)} does not exist)"
    print(report.render())
    return 0 if report.passed else 1


def write_output(text: str | bytes, path: str | None) -> None:
    """Write `text` (or binary data) to `path` atomically (never a half-written file), or to
    stdout."""
    if not path:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tilec-", dir=directory)
    except OSError as e:
        raise TileError(f"cannot write '{path}': {e.strerror}") from None
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would have created it
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise TileError(f"cannot write '{path}': {e.strerror}") from None
        raise


def _passes() -> int:
    from tilec.passmanager import registered_passes

    passes = registered_passes()
    if not passes:
        print("no passes are registered")
    for cls in passes.values():
        print(cls.describe())
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
