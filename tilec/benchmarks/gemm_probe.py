"""Probe GEMM configurations on a GPU: the tensor-core lowering on hand-made pipelined IR.

    python -m tilec.benchmarks.gemm_probe                      # the default sweep, 4096^3
    python -m tilec.benchmarks.gemm_probe --size 8192 --config 128,128,32,2,2,4
    python -m tilec.benchmarks.gemm_probe --print 128,128,32,2,2,4   # the IR, no GPU needed

A configuration is `BM,BN,BK,W_m,W_n,STAGES[,MIN_BLOCKS_PER_SM]`: the IR is `tests/lit/lowering/mma_matmul.tir`
(what smem-placement, pipeline and vectorize leave for a matmul) rewritten for those tile
sizes, warps and stages, with the copies of step i + STAGES - 1 issued right after the
barrier, as the pipeline pass places them. Each configuration is checked against torch and
timed against cuBLAS on the same inputs every call (so both look faster than in
`tilec.benchmarks.gpu`, which rotates inputs): use it to compare configurations, and
`python -m tilec.gpucheck` for the figures that go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "tests" / "lit" / "lowering" / "mma_matmul.tir"
DEFAULT_CONFIGS = [
    (128, 128, 32, 2, 2, 4),
    (128, 128, 32, 2, 2, 3),
    (128, 128, 64, 2, 2, 2),
    (128, 256, 64, 2, 4, 3),
]


def _swizzle(row_bytes: int) -> str:
    per_phase = max(1, 128 // row_bytes)
    return (
        f"#shared<vec = 8, per_phase = {per_phase}, max_phase = {8 // per_phase}, order = [1, 0]>"
    )


def probe_ir(bm: int, bn: int, bk: int, wm: int, wn: int, stages: int, min_blocks: int = 0) -> str:
    """The template matmul for one configuration (see the module docstring); `min_blocks`
    (the optional seventh field) asks ptxas for that many blocks per SM."""
    text = TEMPLATE.read_text()
    text = text[text.index("#mma =") :]
    warps = wm * wn

    def alias(name: str, value: str) -> None:
        nonlocal text
        text = re.sub(rf"^#{name} = .*$", f"#{name} = {value}", text, count=1, flags=re.M)

    alias("mma", f"#mma<version = 2, warps_per_cta = [{wm}, {wn}], instr_shape = [16, 8, 16]>")
    alias("a_op", f"#dot_operand<index = 0, warps_per_cta = [{wm}, {wn}]>")
    alias("b_op", f"#dot_operand<index = 1, warps_per_cta = [{wm}, {wn}]>")
    alias("a_smem", _swizzle(bk * 2))
    alias("b_smem", _swizzle(bn * 2))
    alias(
        "store",
        "#blocked<size_per_thread = [1, 1], threads_per_warp = [1, 32], "
        f"warps_per_cta = [{warps}, 1], order = [1, 0]>",
    )
    occupancy = f", tilec.min_blocks_per_sm = {min_blocks}" if min_blocks else ""
    text = text.replace("tilec.num_warps = 4", f"tilec.num_warps = {warps}{occupancy}")
    text = text.replace(
        '["BM", 128], ["BN", 128], ["BK", 32]', f'["BM", {bm}], ["BN", {bn}], ["BK", {bk}]'
    )
    for name, value in (("BM", bm), ("BN", bn), ("BK", bk)):
        text = re.sub(rf"%{name} = arith.constant \d+", f"%{name} = arith.constant {value}", text)
    text = text.replace("3x128x32xf16", f"{stages}x{bm}x{bk}xf16")
    text = text.replace("3x32x128xf16", f"{stages}x{bk}x{bn}xf16")
    text = text.replace("tile<128x32xf16", f"tile<{bm}x{bk}xf16")
    text = text.replace("tile<32x128xf16", f"tile<{bk}x{bn}xf16")
    text = text.replace("128x128xf32", f"{bm}x{bn}xf32")
    text = text.replace("{offset = 24576}", f"{{offset = {stages * bm * bk * 2}}}")
    # The prologue: steps 0 .. stages-2, one commit group each.
    lines = text.split("\n")
    start = next(i for i, s in enumerate(lines) if s.startswith("  tile.async_copy %A[%row, %c0]"))
    end = next(i for i, s in enumerate(lines) if s.startswith("  %zero ="))
    prologue = [f"  %s{s} = arith.constant {s} : index" for s in range(stages + 1)]
    for s in range(stages - 1):
        k = f"%k{s}"
        prologue.append(f"  {k} = arith.muli %s{s}, %BK : index")
        a_buf = f"!smem<{stages}x{bm}x{bk}xf16, #a_smem>"
        b_buf = f"!smem<{stages}x{bk}x{bn}xf16, #b_smem>"
        prologue += [
            f"  tile.async_copy %A[%row, {k}], %a_buf[%s{s}] {{vector = 8}} : "
            f"!tile.tensor<MxKxf16>, {a_buf}",
            f"  tile.async_copy %B[{k}, %col], %b_buf[%s{s}] {{vector = 8}} : "
            f"!tile.tensor<KxNxf16>, {b_buf}",
            "  tile.async_commit",
        ]
    lines[start:end] = prologue
    # In the loop: wait for S - 2 groups, and issue the next copies right after the barrier.
    body = "\n".join(lines)
    body = body.replace("tile.async_wait 1", f"tile.async_wait {stages - 2}")
    body = body.replace("arith.addi %i, %c2", f"arith.addi %i, %s{stages - 1}")
    body = body.replace("arith.remsi %i, %c3", f"arith.remsi %i, %s{stages}")
    body = body.replace("arith.remsi %ahead, %c3", f"arith.remsi %ahead, %s{stages}")
    lines = body.split("\n")
    first = next(i for i, s in enumerate(lines) if "%ahead = arith.addi" in s)
    issue = lines[first : first + 6]
    del lines[first : first + 6]
    barrier = next(i for i, s in enumerate(lines) if s.strip() == "tile.barrier")
    lines[barrier + 1 : barrier + 1] = issue
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    parser.add_argument(
        "--config", action="append", help="BM,BN,BK,W_m,W_n,STAGES[,MIN_BLOCKS_PER_SM]"
    )
    parser.add_argument("--print", metavar="CONFIG", help="print the IR of one configuration")
    args = parser.parse_args(argv)
    if args.print:
        print(probe_ir(*(int(x) for x in args.print.split(","))))
        return 0
    configs = [tuple(int(x) for x in c.split(",")) for c in args.config or []] or DEFAULT_CONFIGS

    import torch

    from tilec.benchmarks.gpu import time_ms
    from tilec.ir import parse_module
    from tilec.lowering import Specialization, compile_to_ptx, module_abi
    from tilec.runtime import Launcher

    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float32)
    expected = a.float() @ b.float()
    flops = 2 * n**3
    cublas = time_ms(lambda: torch.matmul(a, b), [()])  # one input set: the same every call
    print(f"cuBLAS f16 {n}^3: {flops / cublas / 1e9:.0f} TFLOP/s")
    for config in configs:
        module = parse_module(probe_ir(*config))
        launch = Launcher(
            compile_to_ptx(module, "sm_90a"), module_abi(module)["matmul_mma"], Specialization()
        )
        c.zero_()
        ms = time_ms(lambda launch=launch: launch(a, b, c), [()])
        error = (c - expected).abs().max().item()
        print(
            f"{','.join(map(str, config)):>18}: {flops / ms / 1e9:6.0f} TFLOP/s, "
            f"{cublas / ms:.2f} of cuBLAS, max error {error:.3g}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
