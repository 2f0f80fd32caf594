"""`tilec compile` as a user runs it (a subprocess): errors with carets and exit codes, no
traceback, output files written whole or not at all, dumps and printing around passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tilec
from tilec.compiler import DEFAULT_PIPELINE

TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")
ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""

BAD = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpah
"""

SYNTAX = """\
def scale(x: f32[N], y: f32[N], alpha: f32)
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TILEC, *args], input=stdin, capture_output=True, text=True, check=False, cwd=cwd
    )


def compile_tir(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`tilec compile ... --emit tir`: most tests here are about the tile-IR stage."""
    return run("compile", *args, "--emit", "tir", cwd=cwd, stdin=stdin)


def test_compile_prints_the_tile_ir(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run("compile", "k.tile", "--emit", "tir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == tilec.compile(GOOD).tir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tile"]


def test_emit_defaults_to_ptx(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run("compile", "k.tile", "--arch", "sm_80", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # The same PTX as from Python, but for the file name that line info gives.
    from_text = tilec.compile(GOOD, target="ptx", arch="sm_80").ptx
    assert result.stdout == from_text.replace('.file\t1 "<string>"', '.file\t1 "k.tile"')
    assert ".target sm_80" in result.stdout and ".visible .entry scale(" in result.stdout


def test_emit_llvm_and_cubin(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    llvm = run("compile", "k.tile", "--emit", "llvm", cwd=tmp_path)
    assert llvm.returncode == 0, llvm.stderr
    assert 'target triple = "nvptx64-nvidia-cuda"' in llvm.stdout
    assert run("compile", "k.tile", "--emit", "cubin", cwd=tmp_path).returncode == 1  # needs -o
    cubin = run("compile", "k.tile", "--emit", "cubin", "-o", "k.cubin", cwd=tmp_path)
    assert cubin.returncode == 0, cubin.stderr
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


def test_dump_dir_holds_every_step_through_ptx(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run("compile", "k.tile", "--dump-dir", "dump", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names[:2] == ["00-source.tile", "01-frontend.tir"]
    n = len(DEFAULT_PIPELINE.split(",")) + 2  # the source and its IR, then one file per pass
    assert names[n : n + 2] == [f"{n:02d}-lower-to-llvm.ll", f"{n + 1:02d}-ptx.ptx"]
    assert names[-1] == "remarks.json"
    assert (tmp_path / "dump" / f"{n + 1:02d}-ptx.ptx").read_text() == result.stdout


def test_lowering_without_specialize_is_a_user_error(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run("compile", "k.tile", "-p", "canonicalize,cse", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: lowering needs specialized, laid-out kernels; scale is not\n"
        "hint: the pipeline must run 'specialize' and 'assign-layouts'"
    )
    assert "Traceback" not in result.stderr


def test_stop_after_a_pass_prints_its_ir(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run("compile", "k.tile", "--stop-after", "tiling", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("module {") and "tilec.tile_sizes" in result.stdout


def test_a_wrong_program_is_located_with_a_caret_and_writes_nothing(tmp_path):
    (tmp_path / "bad.tile").write_text(BAD)
    result = compile_tir("bad.tile", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.split("\n") == [
        "bad.tile:3:25: error: unknown name 'alpah'",
        "        y[tn] = x[tn] * alpah",
        "                        ^",
        "hint: did you mean 'alpha'?",
        "",
    ]
    assert result.stdout == ""
    # Neither the output file nor a temporary file next to it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tile"]


def test_a_syntax_error_is_worded_for_people(tmp_path):
    (tmp_path / "syntax.tile").write_text(SYNTAX)
    result = compile_tir("syntax.tile", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.split("\n")[:3] == [
        "syntax.tile:1:44: error: expected ':' after function signature",
        "def scale(x: f32[N], y: f32[N], alpha: f32)",
        " " * 43 + "^",
    ]
    assert "Traceback" not in result.stderr


def test_a_failed_compile_keeps_an_existing_output_file(tmp_path):
    (tmp_path / "bad.tile").write_text(BAD)
    (tmp_path / "out.tir").write_text("previous result\n")
    result = compile_tir("bad.tile", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 1
    assert (tmp_path / "out.tir").read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tile", "out.tir"]


def test_output_file_is_written_whole_on_success(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    (tmp_path / "out.tir").write_text("previous result\n")
    result = compile_tir("k.tile", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert (tmp_path / "out.tir").read_text() == tilec.compile(GOOD).tir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tile", "out.tir"]


def test_an_output_file_that_cannot_be_written_is_a_user_error(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = compile_tir("k.tile", "-o", "missing/out.tir", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "error: cannot write 'missing/out.tir': No such file or directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tile"]


def test_a_dump_dir_that_cannot_be_made_is_a_user_error(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    (tmp_path / "taken").write_text("a file, not a directory")
    result = compile_tir("k.tile", "-p", "cse", "--dump-dir", "taken/dumps", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: taken/dumps: ")
    assert "Traceback" not in result.stderr


def test_missing_and_undecodable_files_are_user_errors(tmp_path):
    result = compile_tir("absent.tile", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read 'absent.tile'")
    (tmp_path / "latin1.tile").write_bytes(b"# caf\xe9\n" + GOOD.encode())
    result = compile_tir("latin1.tile", cwd=tmp_path)
    assert result.returncode == 1
    assert "is not UTF-8 text" in result.stderr
    assert "Traceback" not in result.stderr


def test_stdin_is_read_for_dash(tmp_path):
    result = compile_tir("-", cwd=tmp_path, stdin=GOOD)
    assert result.returncode == 0, result.stderr
    assert result.stdout == tilec.compile(GOOD).tir
    result = compile_tir("-", cwd=tmp_path, stdin=BAD)
    assert result.returncode == 1
    assert result.stderr.startswith("<stdin>:3:25: error: unknown name 'alpah'\n")


def test_dump_dir_holds_the_frontend_ir_and_each_pass(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = compile_tir("k.tile", "-p", "canonicalize,cse", "--dump-dir", "dumps", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dumps = tmp_path / "dumps"
    assert sorted(p.name for p in dumps.iterdir()) == [
        "00-source.tile",
        "01-frontend.tir",
        "02-canonicalize.tir",
        "03-cse.tir",
        "remarks.json",
    ]
    assert (dumps / "00-source.tile").read_text() == GOOD
    assert (dumps / "01-frontend.tir").read_text() == tilec.compile(GOOD).tir
    assert (dumps / "03-cse.tir").read_text() == result.stdout


def test_print_ir_after_all_shows_each_pass_on_stderr(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    pipeline = "canonicalize,cse,specialize,assign-layouts,dce"
    result = run("compile", "k.tile", "-p", pipeline, "--print-ir-after-all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    headers = [line for line in result.stderr.split("\n") if line.startswith("// -----//")]
    assert headers == [
        "// -----// IR Dump After canonicalize //----- //",
        "// -----// IR Dump After cse //----- //",
        "// -----// IR Dump After specialize //----- //",
        "// -----// IR Dump After assign-layouts //----- //",
        "// -----// IR Dump After dce //----- //",
        "// -----// IR Dump After lower-to-llvm //----- //",
        "// -----// IR Dump After ptx //----- //",
    ]
    # The last dump is the result printed on stdout.
    assert result.stderr.endswith(result.stdout)


def test_stop_after_and_timing(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = run(
        "compile",
        "k.tile",
        "-p",
        "canonicalize,cse",
        "--stop-after",
        "canonicalize",
        "--timing",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Pass execution timing report" in result.stderr
    assert "canonicalize" in result.stderr and "  cse" not in result.stderr


def test_a_bad_pipeline_is_a_user_error(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = compile_tir("k.tile", "-p", "canonicalise", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("<pipeline>:1:1: error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tile"]


def test_print_locations_name_the_source_file(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    result = compile_tir("k.tile", "--print-locations", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert 'tile.store %y[%tn], %3 : !tile.tensor<Nxf32>, tile<BNxf32> loc("k.tile":3:9)' in (
        result.stdout
    )


CRASHING_PASS = (Path(__file__).parent / "crashing_pass.py").read_text()


def test_a_crash_in_a_pass_is_an_internal_compiler_error(tmp_path):
    (tmp_path / "k.tile").write_text(GOOD)
    (tmp_path / "crash.py").write_text(CRASHING_PASS)
    command = [sys.executable, "crash.py", "compile", "k.tile", "-p", "canonicalize,crash"]
    result = subprocess.run(
        [*command, "-o", "out.tir", "--dump-dir", "dumps"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("internal compiler error in pass 'crash': KeyError: ")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.tir").exists()
    (saved,) = (tmp_path / "dumps").glob("tilec-crash-crash-*.tir")
    assert saved.name in result.stderr
    assert "func @scale" in saved.read_text()


def test_examples_compile_from_the_command_line(tmp_path):
    for path in sorted((ROOT / "examples").glob("*.tile")):
        result = compile_tir(str(path), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == tilec.compile(path).tir
    assert list(tmp_path.iterdir()) == []


# -- --explain, --disable, --pass-option and pins that cannot work ------------------------------

MATMUL = str(ROOT / "examples" / "matmul.tile")
MATMUL_DEF = "examples/matmul.tile:3:1: error: kernel 'matmul'"


def test_explain_prints_the_decisions_instead_of_the_ptx(tmp_path):
    result = run("compile", MATMUL, "-k", "matmul", "--explain", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("kernel matmul  (")
    for label in ("grid", "tiles", "warps", "layouts", "shared", "stages", "vectors", "ptxas"):
        assert f"\n  {label} " in result.stdout
    assert ".entry" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_explain_with_output_writes_the_ptx_too(tmp_path):
    result = run(
        "compile", MATMUL, "-k", "matmul", "--assume", "aligned,unit,divisible",
        "--arch", "sm_90a", "--explain", "-o", "m.ptx", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "BM=128 BN=256 BK=64" in result.stdout and "wgmma" in result.stdout
    assert ".entry matmul" in (tmp_path / "m.ptx").read_text()


def test_disable_and_pass_options_change_the_pipeline(tmp_path):
    result = run(
        "compile", MATMUL, "-k", "matmul", "--emit", "tir", "--disable", "pipeline",
        "--disable", "tiling,vectorize", "--pass-option", "tiling.max_extent=512",
        "--print-ir-after-all", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    headers = [ln for ln in result.stderr.splitlines() if ln.startswith("// -----// IR Dump")]
    assert [h.split()[5] for h in headers] == [
        "canonicalize", "cse", "flatten", "privatize-atomics", "accumulate-atomics",
        "transpose-dot", "tiling", "canonicalize",
        "split-reduction", "mask-bounds", "defer-reduction", "align-rows", "walk-tiles", "hoist-loads", "assign-layouts",
        "smem-placement", "vectorize", "fold-padding", "hoist-scale", "canonicalize", "cse", "dce",
        "precision", "skip-unit-factor",
    ]  # fmt: skip
    assert "#mma" not in result.stdout and "tile.async_copy" not in result.stdout
    assert "vector =" not in result.stdout


def test_pass_option_pins_the_stages(tmp_path):
    result = run(
        "compile", MATMUL, "-k", "matmul", "--explain", "--pass-option", "pipeline.num_stages=2",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    stages = [ln for ln in result.stdout.splitlines() if ln.startswith("  stages")]
    assert stages[0].split()[1] == "2"
    assert "option num_stages" in result.stdout


def test_warps_pin_reaches_the_kernel(tmp_path):
    result = run(
        "compile", MATMUL, "-k", "matmul", "--assume", "aligned,unit,divisible",
        "--warps", "8", "--arch", "sm_80", "--explain", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "  warps       8: 2x4 warp tiles of 64x32" in result.stdout


def bad(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """A compile that must fail as a user error: exit 1, no traceback, no output file."""
    result = run("compile", *args, "-o", "out.ptx", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.ptx").exists()
    return result


def test_pinned_tile_that_is_not_a_whole_mma_shape(tmp_path):
    result = bad(tmp_path, MATMUL, "-k", "matmul", "--tile", "M=8")
    assert MATMUL_DEF + ": the pinned sizes cannot use mma.sync m16n8k16" in result.stderr
    assert "BM=8 (pinned by the kernel) is not a multiple of 16" in result.stderr


def test_pinned_warps_that_do_not_tile_the_block(tmp_path):
    result = bad(tmp_path, MATMUL, "-k", "matmul", "--tile", "M=16,N=16", "--warps", "8")
    assert MATMUL_DEF + ": warps=8 (pinned by the kernel) do not tile" in result.stderr
    assert "1 or 2 warps would" in result.stderr


def test_pinned_stages_that_overflow_shared_memory(tmp_path):
    result = bad(tmp_path, MATMUL, "-k", "matmul", "--tile", "M=128,N=128,K=64", "--stages", "8")
    assert MATMUL_DEF + ": the pinned sizes cannot use mma.sync" in result.stderr
    assert "over the limit of 227 KiB (option shared_limit)" in result.stderr


def test_stages_option_that_overflows_shared_memory(tmp_path):
    result = bad(
        tmp_path, MATMUL, "-k", "matmul", "--tile", "M=128,N=128,K=64",
        "--pass-option", "pipeline.num_stages=8",
    )  # fmt: skip
    assert "examples/matmul.tile:3:1: error: kernel 'matmul' needs 262144 bytes" in result.stderr
    assert "option shared_limit of pipeline" in result.stderr
    assert "8 are set by the option num_stages of pipeline" in result.stderr


def test_bad_controls_are_user_errors(tmp_path):
    cases = {
        ("--disable", "cse"): "error: cannot disable 'cse': it is not one of the optimisation",
        ("--disable", "tilling"): "error: cannot disable 'tilling': there is no pass 'tilling'",
        ("--pass-option", "vectorize.max_bytes=big"): (
            "error: pass option vectorize.max_bytes: must be an integer, got 'big'"
        ),
        ("--pass-option", "vectorize.width=8"): "error: pass 'vectorize' has no option 'width'",
        ("--pass-option", "stages=8"): "error: --pass-option: expected PASS.OPTION=VALUE",
        ("-p", "canonicalize", "--disable", "pipeline"): (
            "error: cannot disable 'pipeline': it is not in the pipeline"
        ),
    }
    for args, message in cases.items():
        result = bad(tmp_path, MATMUL, "-k", "matmul", *args)
        assert result.stderr.startswith(message), (args, result.stderr)


def test_passes_lists_the_options_of_the_optimisation_passes(tmp_path):
    result = run("passes", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for line in (
        "    option num_warps: int = 0  -- ",
        "    option mma: bool = true  -- ",
        "    option num_stages: int = 0  -- ",
        "    option shared_limit: int = 232448  -- ",
        "    option max_bytes: int = 16  -- ",
        "    option enable: bool = true  -- ",
    ):
        assert line in result.stdout
    for name in ("tiling", "smem-placement", "pipeline", "vectorize"):
        assert f"\n{name}: " in result.stdout
