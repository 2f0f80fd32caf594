"""Vector global accesses end to end: the `assume` pass records a specialization in the IR,
`vectorize` sets `vector`, the lowering emits one `ld.global.v*`/`st.global.v*` per run (PTX
that ptxas accepts), the interpreter ignores the attribute, and the jit and `tilec compile
--assume` put the facts into the IR before the pipeline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.interp import TensorView, prepare_launch
from tilec.ir import parse_module, verify
from tilec.lowering import Specialization, compile_to_ptx
from tilec.lowering.abi import assumed_specialization, kernel_specialization
from tilec.lowering.memory import VectorAccess
from tilec.lowering.ptxas import assemble
from tilec.passmanager import PassManager
from tilec.runtime import DeviceTensor

ROOT = Path(__file__).resolve().parents[2]
ASSUME_ALL = 'assume{all="aligned,unit,divisible"}'

COPY = """
#b = #blocked<size_per_thread = [1, SPT], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>
func @copy(%x: !tile.tensor<MxNxT>, %y: !tile.tensor<MxNxT>) attributes {tilec.num_warps = 4} {
  %c0 = arith.constant 0 : index
  %BM = arith.constant 16 : index
  %p = tile.program_id 0
  %row = arith.muli %p, %BM : index
  %v = tile.load %x[%row, %c0] {padding = PAD} : !tile.tensor<MxNxT> -> tile<16xWIDTHxT, #b>
  tile.store %y[%row, %c0], %v : !tile.tensor<MxNxT>, tile<16xWIDTHxT, #b>
  return
}
"""


def _copy(element: str, per_thread: int, pipeline: str = f"{ASSUME_ALL},vectorize"):
    padding = {"i1": "true", "i8": "3", "i16": "3", "i32": "3", "i64": "3"}.get(element, "1.0")
    text = (
        COPY.replace("SPT", str(per_thread))
        .replace("WIDTH", str(8 * per_thread))
        .replace("PAD", padding)
        .replace("xT", "x" + element)
    )
    module = parse_module(text)
    verify(module)
    return PassManager.from_text(pipeline).run(module)


# (element, elements per thread) -> the PTX of one vector access
CASES = {
    ("f32", 4): "v4.b32",
    ("f32", 2): "v2.b32",
    ("f16", 8): "v4.b32",
    ("bf16", 8): "v4.b32",
    ("f16", 2): "b32",
    ("i8", 16): "v4.b32",
    ("i8", 2): "b16",
    ("i1", 8): "v2.b32",
    ("f64", 2): "v2.b64",
    ("i64", 2): "v2.b64",
}


@pytest.mark.parametrize(("element", "per_thread"), list(CASES), ids=lambda c: str(c))
def test_vector_loads_and_stores_reach_the_ptx_and_assemble(element, per_thread):
    module = _copy(element, per_thread)
    load = next(op for op in module.walk() if op.name == "tile.load")
    assert load.attributes["vector"].value == per_thread
    ptx = compile_to_ptx(module, "sm_80")
    suffix = CASES[(element, per_thread)]
    loads = re.findall(r"ld\.global\.(\S+) ", ptx)
    stores = re.findall(r"st\.global\.(\S+) ", ptx)
    # 16 x (8 * per_thread) elements over 128 threads: 1 run per thread, of per_thread.
    assert loads == [suffix] and stores == [suffix], (loads, stores)
    assemble(ptx, "sm_80")


def test_without_facts_every_element_is_its_own_access():
    module = _copy("f32", 4, "vectorize")
    ptx = compile_to_ptx(module, "sm_90a")
    assert "ld.global.v" not in ptx and "st.global.v" not in ptx
    assert len(re.findall(r"ld\.global\.b32", ptx)) == 4


def test_the_lowering_reads_the_facts_of_the_ir():
    module = _copy("f32", 4)
    kernel = module.functions[0]
    facts = kernel_specialization(kernel)
    assert facts == assumed_specialization(kernel, ["aligned", "unit", "divisible"])
    assert "align 16" in str(tilec.lowering.lower_to_llvm(module, "sm_90a"))
    compile_to_ptx(module, "sm_90a", {"copy": facts})  # the same facts: fine
    with pytest.raises(tilec.diagnostics.InternalCompilerError, match="its IR records"):
        compile_to_ptx(module, "sm_90a", {"copy": Specialization(aligned=frozenset({"x"}))})


def test_vector_accesses_pack_registers():
    assert (VectorAccess(8, 16).count, VectorAccess(8, 16).width) == (4, 32)
    assert VectorAccess(2, 64).suffix == ".v2.b64"
    assert VectorAccess(2, 8).suffix == ".b16"
    with pytest.raises(ValueError):
        VectorAccess(8, 32)  # 32 bytes


@pytest.mark.parametrize("example", ["vector_add", "softmax", "layernorm", "matmul"])
def test_the_interpreter_ignores_vector(example):
    """Translation validation for the pass: it only adds attributes."""
    program = tilec.compile(str(ROOT / "examples" / f"{example}.tile"))
    base = "canonicalize,cse,specialize,assign-layouts"
    before = PassManager.from_text(base).run(program.module)
    name = before.functions[0].sym_name
    rng = np.random.default_rng(0)
    outputs = []
    for pipeline in (None, f"{ASSUME_ALL},vectorize"):
        module = before if pipeline is None else PassManager.from_text(pipeline).run(before)
        rng = np.random.default_rng(0)
        args = _arguments(module.functions[0], rng)
        launch = prepare_launch(module, name, args)
        launch.run()
        outputs.append([v.array for v in launch.arguments if isinstance(v, TensorView)])
    for a, b in zip(*outputs):
        np.testing.assert_array_equal(a, b)


def _arguments(func, rng):
    from tilec.ir.types import TensorType

    sizes: dict[str, int] = {}
    args = []
    for arg in func.arguments:
        t = arg.type
        if isinstance(t, TensorType):
            shape = [sizes.setdefault(d, 48) if isinstance(d, str) else d for d in t.shape]
            dtype = {"f16": np.float16, "f32": np.float32}[str(t.element)]
            args.append(rng.standard_normal(shape).astype(dtype))
        else:
            args.append(np.float32(1e-5))
    return args


def test_jit_puts_the_specialization_into_the_ir(monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    kernel = tilec.load_kernel(ROOT / "examples" / "softmax.tile", "softmax")
    x = DeviceTensor(1 << 20, (64, 320), (320, 1), "f32", 0)
    compiled = kernel.compile_for(x, x, arch="sm_90a")
    assert compiled.pipeline.startswith('assume{aligned="x,y" unit="x.stride.1,y.stride.1" ')
    assert compiled.specialization.aligned == {"x", "y"}
    program = kernel._compile(compiled.pipeline)
    assert kernel_specialization(program.module.functions[0]) == compiled.specialization


def test_cli_assume_option(tmp_path):
    tilec_cli = [sys.executable, "-m", "tilec.cli"]
    source = str(ROOT / "examples" / "vector_add.tile")
    pipeline = "canonicalize,cse,specialize,assign-layouts,vectorize"
    args = [*tilec_cli, "compile", source, "--emit", "tir", "-p", pipeline, "--print-remarks"]
    plain = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assumed = subprocess.run(
        [*args, "--assume", "aligned,unit,divisible"], capture_output=True, text=True, check=True
    ).stdout
    assert "tilec.aligned" not in plain and "x not known to be 16-byte aligned" in plain
    assert 'tilec.aligned = ["out", "x", "y"]' in assumed
    bad = subprocess.run([*args, "--assume", "fast"], capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown fact 'fast'" in bad.stderr


def test_multiples_below_16_give_16_byte_vectors():
    """A row stride of 1000 f16 (2000 bytes) is a whole number of 16-byte vectors: the jit
    records it as a multiple of 8 (`multiples`), and the copies of a matmul whose K is 1000
    move 16 bytes each; with only "divisible" facts they would move 2."""
    from tilec.jit import _specialization  # noqa: F401 - the jit's own rule, used below
    from tilec.lowering.abi import Specialization, recorded_multiple

    assert recorded_multiple("stride", 0, 2, 1000, 2) == 8
    assert recorded_multiple("extent", 1, 2, 1000, 2) == 8
    assert recorded_multiple("extent", 0, 2, 1000, 2) == 1  # rows: only whether of 16
    # f32: one 16-byte vector is 4 elements, so 900 and 1000 are the same (4), 1024 is 16
    assert recorded_multiple("stride", 0, 2, 1000, 4) == recorded_multiple("stride", 0, 2, 900, 4)
    assert recorded_multiple("stride", 0, 2, 1024, 4) == 16
    facts = Specialization.of_values(
        {"a", "b", "c"},
        {"a.stride.1", "b.stride.1", "c.stride.1"},
        {"a.stride.0": 8, "b.stride.0": 8, "c.stride.0": 8, "a.extent.1": 8, "c.extent.1": 8},
    )
    from tilec.passes.assume import assume_pass_text

    text = assume_pass_text(facts)
    assert 'multiples="a.extent.1=8,a.stride.0=8,b.stride.0=8,c.extent.1=8,c.stride.0=8"' in text
    compiled = tilec.compile(
        str(ROOT / "examples" / "matmul.tile"),
        kernels=["matmul"],
        pipeline=f"{text},{tilec.compiler.DEFAULT_PIPELINE}",
        target="tir",
        arch="sm_90a",
    )
    tir = compiled.tir
    assert 'tilec.multiples = [["a.extent.1", 8]' in tir
    copies = re.findall(r"tile\.async_copy [^\n]*\{vector = (\d+)\}", tir)
    assert copies and set(copies) == {"8"}, copies
    loose = tilec.compile(
        str(ROOT / "examples" / "matmul.tile"),
        kernels=["matmul"],
        pipeline=f'assume{{aligned="a,b,c" unit="a.stride.1,b.stride.1,c.stride.1"}},'
        f"{tilec.compiler.DEFAULT_PIPELINE}",
        target="tir",
        arch="sm_90a",
    ).tir
    assert "vector = 8" not in loose


def test_assume_rejects_a_malformed_multiple():
    module = parse_module(
        COPY.replace("SPT", "1").replace("WIDTH", "8").replace("PAD", "1.0").replace("xT", "xf32")
    )
    for bad, message in (("x.stride.0", "name=m pairs"), ("x.stride.0=3", "2, 4 or 8")):
        with pytest.raises(tilec.TileError, match=message):
            PassManager.from_text(f'assume{{multiples="{bad}"}}').run(module)


def test_a_row_broadcast_over_a_tiles_rows_moves_in_vectors():
    """bias_gelu in 4 x 1024 tiles: the bias row b[tn] is laid out as a slice of the tile's
    layout (each thread holds its 8 columns, replicated over the rows' warps); its load takes
    16-byte accesses like the tile's own, not one per element."""
    from tilec.compiler import DEFAULT_PIPELINE

    passes = DEFAULT_PIPELINE.replace("tiling,", 'tiling{tiles="BM=4,BN=1024"},')
    program = tilec.compile(
        str(Path(__file__).resolve().parents[2] / "examples" / "bias_gelu.tile"),
        kernels=["bias_gelu"],
        target="ptx",
        arch="sm_90a",
        pipeline='assume{all="aligned,unit,divisible"},' + passes,
    )
    loads = [op for op in program.module.walk() if op.name == "tile.load"]
    bias = [op for op in loads if op.results[0].type.rank == 1]
    assert len(bias) == 1 and "#slice" in str(bias[0].results[0].type)
    assert all(op.attributes["vector"].value == 8 for op in loads)
    assert program.ptx.count("ld.global") == program.ptx.count("ld.global.v4")
