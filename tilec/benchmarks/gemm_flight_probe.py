"""Probe the wgmma tiling's decisions on a GPU: tile shape and wgmma groups in flight.

    python -m tilec.benchmarks.gemm_flight_probe                           # the default sweep
    python -m tilec.benchmarks.gemm_flight_probe --shape 3000x5000x2000 --layout nt

For each operand layout (`nn`: `examples/matmul.tile`; `nt`, `tn`, `tt`:
`examples/gemm_layouts.tile`, "t" an operand stored transposed) and each M x N x K, the
heuristic's choice and the alternatives in `CONFIGS` (BN = 128 or 256, BM = 256, with and
without `pipeline.dots_in_flight`) are timed as one tuner sweep (`tilec.tune.api.sweep_runner`:
`tilec.benchmarks.gpu.time_ms`, inputs rotated past the L2 cache, each candidate checked
against torch's product first), cuBLAS on the same views in the same process. One line per
candidate: its fraction of cuBLAS (above 1 is faster) and time, and what it pinned. `--json`
writes the rows. This is the probe behind `passes/wgmma_model.py`'s figures
(docs/benchmarks.md, "wgmma groups in flight"). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

from tilec.benchmarks.gpu import EXAMPLES, _close, _sets, time_ms

__all__ = ["CONFIGS", "main"]

CONFIGS: list[dict] = [
    {},
    # Persistent blocks (passes/pipeline_persistent.py), which the default leaves off.
    {"pipeline.persistent": 1},
    {"tile.M": 256, "tile.N": 128, "warps": 16, "pipeline.persistent": 1},
    {"pipeline.dots_in_flight": 0},
    {"tile.N": 128, "warps": 8, "pipeline.dots_in_flight": 0},
    {"tile.N": 128, "warps": 8, "stages": 4, "pipeline.dots_in_flight": 1},
    {"tile.N": 256, "warps": 8, "pipeline.dots_in_flight": 1},
    {"tile.M": 256, "tile.N": 128, "warps": 16, "pipeline.dots_in_flight": 1},
    # One block an SM: on two, 64x256's 40 KiB stages fit only 2, too few to leave a group
    # in flight (the 6844750 and b17bb65 sweeps ran it so).
    {
        "tile.M": 64,
        "tile.N": 256,
        "warps": 4,
        "assign-layouts.min_blocks_per_sm": 1,
        "pipeline.dots_in_flight": 1,
    },
]
EPILOGUE_CONFIGS: list[dict] = [
    {},
    {"tile.N": 256, "warps": 8},
    {"tile.N": 128, "warps": 8, "assign-layouts.min_blocks_per_sm": 2},
    {"tile.N": 128, "warps": 8, "pipeline.dots_in_flight": 1},
]
DEFAULT_SHAPES = ("4096x4096x4096", "3000x5000x2000", "1536x6144x768")


def sweep(
    shape: tuple[int, int, int], layout: str, configs: list[dict], epilogue: bool = False
) -> list[dict]:
    """Time `configs` of the `layout` GEMM at `shape` against cuBLAS; the rows, printed.
    `epilogue`: `examples/matmul_bias_gelu.tile` (nn only) against cuBLAS's product alone,
    so the ratio shows what the fused bias and GELU cost."""
    import torch

    from tilec.jit import load_kernel
    from tilec.tune.api import sweep_runner

    m, n, k = shape
    path, name = EXAMPLES / "matmul.tile", "matmul"
    if layout != "nn":
        path, name = EXAMPLES / "gemm_layouts.tile", f"gemm_{layout}"
    if epilogue:
        path, name, layout = EXAMPLES / "matmul_bias_gelu.tile", "matmul_bias_gelu", "nn"
    bias = torch.randn(n, device="cuda").half()

    def make():
        a = torch.randn(*((k, m) if layout[0] == "t" else (m, k)), device="cuda").half()
        b = torch.randn(*((n, k) if layout[1] == "t" else (k, n)), device="cuda").half()
        return a, b

    def views(x, z):
        return (x.T if layout[0] == "t" else x), (z.T if layout[1] == "t" else z)

    sets = _sets(make, 2 * (m * k + k * n))
    c = torch.empty(m, n, device="cuda", dtype=torch.half)
    expected = torch.matmul(*views(*sets[0]))
    if epilogue:
        expected = torch.nn.functional.gelu(expected.float() + bias.float()).half()
    cublas = time_ms(lambda x, z: torch.matmul(*views(x, z)), sets)
    result = sweep_runner(
        load_kernel(path, name),
        (lambda kernel: lambda x, z: kernel(x, z, bias, c))
        if epilogue
        else (lambda kernel: lambda x, z: kernel(x, z, c)),
        sets,
        configs,
        right=lambda got: _close(got, expected, 2e-3),
        output=lambda: c,
        rounds=2,
    )
    flops = 2 * m * n * k
    label = f"{'bias+gelu' if epilogue else layout} {m}x{n}x{k}"
    print(f"{label}: cuBLAS {cublas * 1e3:.1f} us ({flops / cublas / 1e9:.0f} TFLOP/s)", flush=True)
    rows = []
    for config in configs:
        candidate = result.candidate_for(config)
        what = config or "heuristic"
        if candidate is None or not candidate.timed:
            status = candidate.status if candidate is not None else "not run"
            reason = candidate.reason if candidate is not None else ""
            print(f"    {status:>8}  {what}  {reason[:120]}", flush=True)
            continue
        decisions = {
            key: candidate.decisions.get(key)
            for key in ("path", "tile.M", "tile.N", "warps", "stages", "pipeline.dots_in_flight")
        }
        print(
            f"    {cublas / candidate.ms:.3f} of cuBLAS  {candidate.ms * 1e3:8.1f} us  {what}"
            f"  -> {decisions}",
            flush=True,
        )
        rows.append(
            {
                "shape": label,
                "config": config,
                "decisions": decisions,
                "ms": candidate.ms,
                "spread": candidate.spread,
                "cublas_ms": cublas,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", help="MxNxK (repeatable)")
    parser.add_argument(
        "--layout", choices=("nn", "nt", "tn", "tt"), action="append", help="default nn"
    )
    parser.add_argument(
        "--epilogue", action="store_true", help="also sweep matmul_bias_gelu at each shape"
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    shapes = []
    for text in args.shape or DEFAULT_SHAPES:
        try:
            m, n, k = (int(x) for x in text.lower().split("x"))
        except ValueError:
            parser.error(f"--shape takes MxNxK, got {text!r}")
        shapes.append((m, n, k))
    import torch

    if not torch.cuda.is_available():
        print("gemm_flight_probe: no CUDA device", file=sys.stderr)
        return 1
    rows = []
    for layout in args.layout or ("nn",):
        for shape in shapes:
            rows += sweep(shape, layout, CONFIGS)
    for shape in shapes if args.epilogue else ():
        rows += sweep(shape, "nn", EPILOGUE_CONFIGS, epilogue=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
