"""`tilec explore FILE.tile [-k KERNEL] [-o report.html]`: the pass explorer's command.

It compiles with the default pipeline (and the same pins as `tilec compile`: --tile, --warps,
--stages, --assume, --disable, --pass-option, -p) to PTX, and through ptxas when it is
installed, and writes one self-contained HTML page (tilec.explore.report). A compilation
that fails in the frontend or any later step still gives a page, with every stage that
succeeded and the error at the one that failed (the error is printed too, exit 1); mistakes
on the command line (a kernel the file does not define, a malformed pin, an unreadable file)
are errors with exit 1, and then nothing is written.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_arguments", "default_output", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `explore` subcommand's arguments."""
    from tilec.cli import add_arch_flag, add_pinning_flags

    parser.add_argument("file", help=".tile file to explore ('-' for stdin)")
    parser.add_argument(
        "-k", "--kernel", action="append", default=[], help="explore only this kernel (repeatable)"
    )
    parser.add_argument(
        "-o",
        "--output",
        help="the HTML file to write (default: FILE with .html in place of .tile, in the "
        "current directory)",
    )
    add_arch_flag(parser)
    parser.add_argument(
        "-p",
        "--pipeline",
        default=None,
        help="passes to run on the tile IR (default: the default pipeline)",
    )
    add_pinning_flags(parser)


def default_output(path: str) -> str:
    """`matmul.html` for `examples/matmul.tile` (in the working directory)."""
    stem = os.path.splitext(os.path.basename(path))[0] if path != "-" else "stdin"
    return f"{stem}.html"


def run(args: argparse.Namespace) -> int:
    """Compile, build the page, write it, say where it went. Exit 0; 1 when the compilation
    failed (the page is written all the same, showing where) or the command line is wrong
    (nothing is written)."""
    from tilec.cli import compile_pipeline, pinned_options, read_input, write_output
    from tilec.compiler import CompiledProgram, _select_kernels, compile_module
    from tilec.diagnostics import TileError
    from tilec.explore.report import build_report
    from tilec.frontend import parse_source
    from tilec.lowering.ptxas import find_ptxas

    text, filename = read_input(args.file)
    # Pins and the pipeline are the command line's: a mistake there is an error, not a page.
    options = pinned_options(args) or None
    pipeline = compile_pipeline(argparse.Namespace(**vars(args), emit="ptx", explain=False))
    try:
        module = parse_source(text, filename)
    except TileError as e:
        compiled = CompiledProgram(
            None, None, source=text, filename=filename, error=e, failed_stage="frontend"
        )
    else:
        if args.kernel:
            _select_kernels(module, args.kernel)  # an unknown kernel: the list of kernels
        compiled = compile_module(
            module,
            kernels=args.kernel or None,
            options=options,
            pipeline=pipeline,
            target="cubin" if find_ptxas() is not None else "ptx",
            arch=args.arch,
            keep_going=True,
            source=text,
        )
    output = args.output or default_output(args.file)
    write_output(build_report(compiled), output)
    if compiled.error is not None:
        error = compiled.error
        print(error.render() if isinstance(error, TileError) else str(error), file=sys.stderr)
        print(f"{output}: the stages up to {compiled.failed_stage}, where the compilation failed")
        return 1
    print(f"{output}: {len(compiled.stages)} stages of {', '.join(compiled.kernels)}")
    return 0
