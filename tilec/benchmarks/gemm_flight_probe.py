"""Probe the GEMM schedule's decisions on a GPU: tile shape, wgmma groups in flight, block
order, persistent blocks, warp specialization and clusters, as tuner sweeps.

    python -m tilec.benchmarks.gemm_flight_probe                           # the default sweep
    python -m tilec.benchmarks.gemm_flight_probe --shape 3000x5000x2000 --layout nt
    python -m tilec.benchmarks.gemm_flight_probe --configs schedule [--json OUT]

The last is what `persistent_probe` ran (every variant, every case); spelled out, and with
fewer configurations (its `--variants default,warp_specialize,cluster`):

    python -m tilec.benchmarks.gemm_flight_probe --configs schedule \
        --shape 4000x3000x1000 --shape 4096x4096x4096 --shape 8192x8192x8192 \
        --shape nt:4000x3000x1000 --shape 2048x2048x2048 --shape 3000x5000x2000 \
        --shape bmm:8x1024x1024x1024 --shape bmm:64x256x256x64
    python -m tilec.benchmarks.gemm_flight_probe --configs schedule \
        --config pipeline.warp_specialize=1 --config pipeline.cluster=2

A shape is `MxNxK`, run in each `--layout` (`nn`, the default: `examples/matmul.tile`; `nt`,
`tn`, `tt`: `examples/gemm_layouts.tile`, "t" an operand stored transposed), or names its
kernel: `nt:MxNxK` (that layout alone) or `bmm:ZxMxNxK` (`examples/bmm.tile`: a [Z, M, K]
times b [Z, K, N] into c [Z, M, N], f16, against `torch.bmm`, cuBLAS's batched GEMM).

`--configs` names the configurations swept, each set with its own shapes when no `--shape`
is given: `flight` (the default, `CONFIGS` at `DEFAULT_SHAPES`: BN = 128 or 256, BM = 256,
with and without `pipeline.dots_in_flight`; the probe behind `passes/wgmma_model.py`'s
figures, docs/benchmarks.md, "wgmma groups in flight") or `schedule` (`SCHEDULE_CONFIGS` at
`SCHEDULE_SHAPES`: the launch order, persistent blocks, a producer warpgroup, both, 256x128
tiles and clusters of two blocks sharing b, on six GEMMs and two bmms: what
`persistent_probe` timed before the tuner did). `--config tiling.group_m=1,...` (repeatable,
`tilec tune --sweep`'s names; `heuristic` is the heuristic's own) times those instead of the
set's, after the heuristic's: `--configs schedule --config heuristic` times the heuristic's
kernel alone at the schedule's shapes (against cuBLAS, as every sweep).

The heuristic's choice and each configuration are timed as one tuner sweep
(`tilec.tune.api.sweep_runner`: `tilec.benchmarks.gpu.time_ms`, inputs rotated past the L2
cache, each candidate checked against torch's product first), cuBLAS on the same views in the
same process. One line per candidate: its fraction of cuBLAS's speed and of the heuristic's
(above 1 is faster), its time, what it pinned and what it compiled to; a configuration the
passes refuse (cluster on a kernel that cannot be warp-specialized, persistent blocks whose
epilogue would cost a stage) is printed `pruned` with the pass's reason, one that compiles to
the heuristic's code `duplicate`. `--json` writes the rows (after each shape). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tilec.benchmarks.gpu import EXAMPLES, _close, _sets, time_ms

__all__ = ["CONFIGS", "CONFIG_SETS", "SCHEDULE_CONFIGS", "main", "parse_shape", "plan"]

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
DEFAULT_SHAPES = ("4096x4096x4096", "3000x5000x2000", "1536x6144x768")
# How the blocks of a GEMM are scheduled. Each is required where set (1, not the options' -1
# "where allowed"), so a kernel that cannot take it is reported pruned with the reason.
SCHEDULE_CONFIGS: list[dict] = [
    {},  # one block a tile, in tiling's grouped block order
    {"tiling.group_m": 1},  # the launch order (a bmm's 3-D grid keeps it anyway)
    {"pipeline.persistent": 1},  # persistent blocks (passes/pipeline_persistent.py)
    # a producer warpgroup issues the copies (passes/pipeline_warp_specialize.py)
    {"pipeline.warp_specialize": 1},
    {"pipeline.warp_specialize": 1, "pipeline.persistent": 1},
    {"tile.M": 256, "tile.N": 128, "tile.K": 64},  # 256x128 tiles (16 warps), not 128x256
    # two blocks of neighbouring row tiles share b's tile by TMA multicast
    # (passes/pipeline_cluster.py; implies warp specialization)
    {"pipeline.cluster": 2},
    # and persistent: cuBLAS's schedule for 4000x3000x1000 (warp-specialized, persistent, 2x1)
    {"pipeline.cluster": 2, "pipeline.persistent": 1},
]
SCHEDULE_SHAPES = (
    "4000x3000x1000",
    "4096x4096x4096",
    "8192x8192x8192",
    "nt:4000x3000x1000",
    "2048x2048x2048",
    "3000x5000x2000",
    "bmm:8x1024x1024x1024",
    "bmm:64x256x256x64",
)
# --configs NAME: (the configurations, the shapes without --shape)
CONFIG_SETS: dict[str, tuple[list[dict], tuple[str, ...]]] = {
    "flight": (CONFIGS, DEFAULT_SHAPES),
    "schedule": (SCHEDULE_CONFIGS, SCHEDULE_SHAPES),
}
EPILOGUE_CONFIGS: list[dict] = [
    {},
    {"tile.N": 256, "warps": 8},
    {"tile.N": 128, "warps": 8, "assign-layouts.min_blocks_per_sm": 2},
    {"tile.N": 128, "warps": 8, "pipeline.dots_in_flight": 1},
]
LAYOUTS = ("nn", "nt", "tn", "tt")
# What each printed line shows the candidate compiled to (and every decision a config names).
SHOWN_DECISIONS = ("path", "tile.M", "tile.N", "warps", "stages", "pipeline.dots_in_flight")


def parse_shape(text: str) -> tuple[str | None, tuple[int, ...]]:
    """`MxNxK` as `(None, (M, N, K))` (run in each `--layout`), `nt:MxNxK` as `("nt", ...)`,
    `bmm:ZxMxNxK` as `("bmm", (Z, M, N, K))`. A ValueError says what is wrong."""
    kernel, _, dims = text.lower().rpartition(":")
    if kernel and kernel not in (*LAYOUTS, "bmm"):
        raise ValueError(f"--shape: unknown kernel {kernel!r} (one of {', '.join(LAYOUTS)}, bmm)")
    want = 4 if kernel == "bmm" else 3
    try:
        shape = tuple(int(x) for x in dims.split("x"))
    except ValueError:
        shape = ()
    if len(shape) != want or min(shape) < 1:
        form = "bmm:ZxMxNxK" if kernel == "bmm" else "MxNxK or LAYOUT:MxNxK"
        raise ValueError(f"--shape takes {form}, got {text!r}")
    return kernel or None, shape


def sweep(
    shape: tuple[int, ...], layout: str, configs: list[dict], epilogue: bool = False
) -> list[dict]:
    """Time `configs` of the `layout` GEMM at `shape` (M, N, K; Z, M, N, K for `bmm`) against
    cuBLAS; the rows, printed. `epilogue`: `examples/matmul_bias_gelu.tile` (nn only)
    against cuBLAS's product alone, so the ratio shows what the fused bias and GELU cost."""
    import torch

    from tilec.jit import load_kernel
    from tilec.tune.api import sweep_runner

    def randn(*dims: int) -> Any:
        return torch.randn(*dims, device="cuda").half()

    if layout == "bmm":
        z, m, n, k = shape
        path, name = EXAMPLES / "bmm.tile", "bmm"

        def make():
            return randn(z, m, k), randn(z, k, n)

        def product(x, y):
            return torch.bmm(x, y)

        out_shape, per_set = (z, m, n), 2 * z * (m * k + k * n)
    else:
        z, (m, n, k) = 1, shape
        path, name = EXAMPLES / "matmul.tile", "matmul"
        if layout != "nn":
            path, name = EXAMPLES / "gemm_layouts.tile", f"gemm_{layout}"
        if epilogue:
            path, name, layout = EXAMPLES / "matmul_bias_gelu.tile", "matmul_bias_gelu", "nn"

        def make():
            a = randn(*((k, m) if layout[0] == "t" else (m, k)))
            b = randn(*((n, k) if layout[1] == "t" else (k, n)))
            return a, b

        def product(x, y):
            return torch.matmul(x.T if layout[0] == "t" else x, y.T if layout[1] == "t" else y)

        out_shape, per_set = (m, n), 2 * (m * k + k * n)
    bias = torch.randn(n, device="cuda").half()
    sets = _sets(make, per_set)
    c = torch.empty(*out_shape, device="cuda", dtype=torch.half)
    expected = product(*sets[0])
    if epilogue:
        expected = torch.nn.functional.gelu(expected.float() + bias.float()).half()
    cublas = time_ms(product, sets)
    result = sweep_runner(
        load_kernel(path, name),
        (lambda kernel: lambda x, y: kernel(x, y, bias, c))
        if epilogue
        else (lambda kernel: lambda x, y: kernel(x, y, c)),
        sets,
        configs,
        right=lambda got: _close(got, expected, 2e-3),
        output=lambda: c,
        rounds=2,
    )
    flops = 2 * z * m * n * k
    label = f"{'bias+gelu' if epilogue else layout} {'x'.join(map(str, shape))}"
    print(f"{label}: cuBLAS {cublas * 1e3:.1f} us ({flops / cublas / 1e9:.0f} TFLOP/s)", flush=True)
    heuristic = result.heuristic.ms
    shown = list(SHOWN_DECISIONS)
    shown += sorted({key for config in configs for key in config} - set(shown))
    rows = []
    for config in configs:
        candidate = result.candidate_for(config)
        what = config or "heuristic"
        if candidate is None or not candidate.timed:
            status = candidate.status if candidate is not None else "not run"
            reason = candidate.reason if candidate is not None else ""
            print(f"    {status:>8}  {what}  {reason[:120]}", flush=True)
            rows.append({"shape": label, "config": config, "status": status, "reason": reason})
            continue
        decisions = {key: candidate.decisions.get(key) for key in shown}
        same = f"  ({candidate.reason})" if candidate.status == "duplicate" else ""
        print(
            f"    {cublas / candidate.ms:.3f} of cuBLAS  {heuristic / candidate.ms:.3f} of the"
            f" heuristic  {candidate.ms * 1e3:8.1f} us  {what}  -> {decisions}{same}",
            flush=True,
        )
        rows.append(
            {
                "shape": label,
                "config": config,
                "status": candidate.status,
                "decisions": decisions,
                "ms": candidate.ms,
                "spread": candidate.spread,
                "heuristic_ms": heuristic,
                "cublas_ms": cublas,
            }
        )
    return rows


def plan(
    argv: list[str] | None = None,
) -> tuple[argparse.Namespace, list[tuple[str, tuple[int, ...]]], list[dict]]:
    """The parsed arguments, the `(layout, shape)` cases in order (`layout` `bmm` for a
    batched one) and the configurations they sweep; a usage error exits."""
    from tilec.benchmarks.ab import parse_config
    from tilec.diagnostics import TileError

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        action="append",
        help="MxNxK, LAYOUT:MxNxK or bmm:ZxMxNxK (repeatable; default: the --configs set's)",
    )
    parser.add_argument(
        "--layout", choices=LAYOUTS, action="append", help="of each MxNxK shape (default nn)"
    )
    parser.add_argument(
        "--configs",
        choices=tuple(CONFIG_SETS),
        default="flight",
        help="the configurations (and, without --shape, the shapes) swept; default flight",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        help="DECISION=VALUE[,...] or heuristic: time this configuration instead of the "
        "set's (repeatable)",
    )
    parser.add_argument(
        "--epilogue", action="store_true", help="also sweep matmul_bias_gelu at each MxNxK"
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    configs, default_shapes = CONFIG_SETS[args.configs]
    if args.config:
        try:
            given = [{} if t.strip() == "heuristic" else parse_config(t) for t in args.config]
        except TileError as e:
            parser.error(e.message)
        configs = list({json.dumps(c, sort_keys=True): c for c in [{}, *given]}.values())
    shapes = []
    for text in args.shape or default_shapes:
        try:
            shapes.append(parse_shape(text))
        except ValueError as e:
            parser.error(str(e))
    # Each layout in turn over the shapes that name none; a shape that names its kernel once.
    cases: list[tuple[str, tuple[int, ...]]] = []
    for turn, layout in enumerate(args.layout or ["nn"]):
        for kernel, shape in shapes:
            if kernel is None or turn == 0:
                case = (kernel or layout, shape)
                if case not in cases:
                    cases.append(case)
    return args, cases, configs


def main(argv: list[str] | None = None) -> int:
    args, cases, configs = plan(argv)
    import torch

    if not torch.cuda.is_available():
        print("gemm_flight_probe: no CUDA device", file=sys.stderr)
        return 1
    runs = [(shape, layout, configs, False) for layout, shape in cases]
    if args.epilogue:
        for shape in dict.fromkeys(shape for layout, shape in cases if layout != "bmm"):
            runs.append((shape, "nn", EPILOGUE_CONFIGS, True))
    rows: list[dict] = []
    for shape, layout, swept, epilogue in runs:
        rows += sweep(shape, layout, swept, epilogue)
        if args.json:  # after each sweep: a run cut short keeps what it timed
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
