"""Probe the block order of tilec's matmul: `tiling`'s option `group_m`, against cuBLAS.

    python -m tilec.benchmarks.block_order                    # 2048^3 .. 8192^3, f16 and bf16
    python -m tilec.benchmarks.block_order --size 4096 --dtype bf16 --groups 1,8
    python -m tilec.benchmarks.block_order --layout tn --size 4096      # a.T @ b

For each size and dtype, `examples/matmul.tile` (or `matmul_bf16.tile`) is swept over
`group_m` (1: launch order, blocks walking down M; g > 1: groups of g blocks down M, Triton's
GROUP_M) as a tuner search (`tilec.tune.api.sweep_runner`: the candidates compile in
parallel, each as `@tilec.jit` compiles it for these tensors, and are timed with
`tilec.benchmarks.gpu.time_ms`: the median of CUDA-event runs with the inputs rotated past the
L2 cache), cuBLAS measured in the same pass. `tilec tune` searches the same decision
(`tiling.group_m`) among the others. Each size is swept twice, to show the
run-to-run spread. One line per sweep: TFLOP/s and, in brackets, the fraction of cuBLAS. The
first launch of each kernel is checked against cuBLAS's product. `--layout nt|tn|tt` probes
`examples/gemm_layouts.tile`'s kernel of that operand layout instead (cuBLAS on the same
transposed views). Needs a GPU; about 20
seconds on an H200. `tiling` once chose the launch order for its wgmma tiling from this
probe; those runs timed the grouped kernels with every wgmma serialized by nvJitLink (their
64-bit block-index divisions), and with the divisions in i32 groups of 8 win, so both tilings
group 8 (docs/benchmarks.md, "Block indices in 32 bits").
"""

from __future__ import annotations

import argparse
import sys

from tilec.benchmarks.gpu import EXAMPLES, _close, _sets, time_ms

__all__ = ["main"]

SIZES = (2048, 4096, 8192)
GROUPS = (1, 2, 4, 8, 16, 32)


def sweep(n: int, dtype: str, groups: tuple[int, ...], layout: str = "nn") -> str:
    """One line: cuBLAS, then tilec for each `group_m`, at n^3 in `dtype`, operands stored
    in `layout` (`examples/gemm_layouts.tile`: "t" is an operand stored transposed)."""
    import torch

    from tilec.jit import load_kernel
    from tilec.tune.api import sweep_runner

    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    example = "matmul" if dtype == "f16" else "matmul_bf16"
    path, name = EXAMPLES / f"{example}.tile", example
    if layout != "nn":
        path = EXAMPLES / "gemm_layouts.tile"
        name = f"gemm_{layout}" + ("_bf16" if dtype == "bf16" else "")

    def views(x, z):
        return (x.T if layout[0] == "t" else x), (z.T if layout[1] == "t" else z)

    sets = _sets(
        lambda: (
            torch.randn(n, n, device="cuda").to(torch_dtype),
            torch.randn(n, n, device="cuda").to(torch_dtype),
        ),
        2 * n * n * 2,
    )
    c = torch.empty(n, n, device="cuda", dtype=torch_dtype)
    flops = 2 * n**3
    cublas = time_ms(lambda x, z: torch.matmul(*views(x, z)), sets)
    fields = [f"{dtype} {layout} {n}^3: cuBLAS {flops / cublas / 1e9:.0f}"]
    a, b = sets[0]
    expected = torch.matmul(*views(a, b))
    rtol = 2e-3 if dtype == "f16" else 1.6e-2
    configs = [{"tiling.group_m": g} for g in groups]
    result = sweep_runner(
        load_kernel(path, name),
        lambda kernel: lambda x, z: kernel(x, z, c),
        sets,
        configs,
        right=lambda got: _close(got, expected, rtol),
        output=lambda: c,
    )
    for g, config in zip(groups, configs):
        candidate = result.candidate_for(config)
        if candidate is None or not candidate.timed:
            status = "WRONG" if candidate is not None and candidate.status == "wrong" else ""
            fields.append(f"g{g} {status or (candidate.status if candidate else 'not run')}")
            continue
        ms = candidate.ms
        fields.append(f"g{g} {flops / ms / 1e9:.0f} ({cublas / ms:.3f})")
    return "  ".join(fields)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="M = N = K (repeatable)")
    parser.add_argument("--dtype", choices=("f16", "bf16"), action="append")
    parser.add_argument("--groups", default=",".join(map(str, GROUPS)), help="group_m values")
    parser.add_argument("--repeat", type=int, default=2, help="sweeps per size (default 2)")
    parser.add_argument(
        "--layout",
        choices=("nn", "nt", "tn", "tt"),
        action="append",
        help="operand layouts (repeatable; default nn)",
    )
    args = parser.parse_args(argv)
    try:
        groups = tuple(int(g) for g in args.groups.split(","))
    except ValueError:
        parser.error(f"--groups takes integers separated by commas, got {args.groups!r}")
    if any(g < 1 for g in groups):
        parser.error("--groups: every group_m is at least 1")
    import torch

    if not torch.cuda.is_available():
        print("block_order: no CUDA device", file=sys.stderr)
        return 1
    for layout in args.layout or ("nn",):
        for dtype in args.dtype or ("f16", "bf16"):
            for n in args.size or SIZES:
                for _ in range(args.repeat):
                    print(sweep(n, dtype, groups, layout), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
