"""Probe attention configurations on a GPU: `examples/attention.tile` under pinned tile sizes,
warps and stages, as one tuner sweep per shape (`tilec.tune.api.sweep_runner`: candidates
compiled in parallel, each checked against SDPA before it is timed, all timed with the
benchmark's clock `time_ms`), and SDPA timed with the same function in the same run.

    python -m tilec.benchmarks.attention_probe                       # default + a sweep
    python -m tilec.benchmarks.attention_probe --config 64,64,4,2 --shape 4,16,4096,128
    python -m tilec.benchmarks.attention_probe --kernel attention_causal --json out.json

A configuration is `BM,BN,WARPS,STAGES` (`default`: what the passes choose), with `+ws` for a
producer warpgroup (pipeline's option `warp_specialize = 1`) and `+ss` for q read by
descriptor from shared memory every step (tiling's option `staged_a = shared`), `+pp` for two
consumer warpgroups taking turns (pipeline's option `pingpong = 1`, with `+ws` and 8 warps),
`+np` for blocks not tiled for a producer warpgroup (tiling's option `producer = 0`: the
default before 2026-12-05), `+pr` for blocks tiled for one wherever the chain can be (option
`producer = 1`, what the model chose at d128 before it counted the key tiles a block walks):
`default+np`, `default+pr`, `128,128,8,2+ws+ss+pp`. Use it to
compare configurations and to test the tiling model's choice against its neighbours; the
figures that go in docs/benchmarks.md come from `python -m tilec.gpucheck`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "attention.tile"
DEFAULT_CONFIGS = [
    "default",
    "default+np",
    "128,128,8,2+ws+ss+pp",
    "128,128,8,3+ws+ss+pp",
    "128,128,8,2+ws+ss",
    "64,64,4,3+np",
    "64,128,4,3+ss+np",
    "128,64,8,3+ws+ss+pp",
]
DEFAULT_SHAPES = ["4,16,4096,128", "4,16,4096,64", "1,8,1537,128"]
TOLERANCE = 2e-2  # the largest error against SDPA (f16 outputs) a configuration may have

# A configuration's suffixes: a producer warpgroup, q read by descriptor every step.
_FLAGS: dict[str, dict[str, Any]] = {
    "ws": {"pipeline.warp_specialize": 1},
    "ss": {"tiling.staged_a": "shared"},
    "pp": {"pipeline.pingpong": 1},
    "np": {"tiling.producer": 0},
    "pr": {"tiling.producer": 1},
}

# The query and key dimensions of each kernel of the example.
_DIMENSIONS = {"attention_causal": ("S", "T")}


def decisions(kernel: str, config: str) -> dict[str, Any]:
    """The tuner's config (its decision names) for `BM,BN,WARPS,STAGES[+ws][+ss][+pp][+np]`
    (`default`: {})."""
    config, *extras = config.split("+")
    flags: dict[str, Any] = {}
    for extra in extras:
        if extra not in _FLAGS:
            raise ValueError(
                f"a configuration's suffixes are +ws, +ss, +pp and +np, not '+{extra}'"
            )
        flags.update(_FLAGS[extra])
    if config == "default":
        return flags
    bm, bn, warps, stages = (int(x) for x in config.split(","))
    m, n = _DIMENSIONS.get(kernel, ("M", "N"))
    tiles = {"tile.B": 1, "tile.H": 1, f"tile.{m}": bm, f"tile.{n}": bn}
    return {**tiles, "warps": warps, "stages": stages, **flags}


def probe(kernel: str, configs: list[str], shape: str, rounds: int) -> list[dict]:
    """One row per configuration of `kernel` at `shape` (`B,H,S,D`)."""
    import torch
    import torch.nn.functional as F

    from tilec.benchmarks.gpu import time_ms
    from tilec.jit import load_kernel
    from tilec.tune.api import sweep_runner

    batch, heads, length, d = (int(x) for x in shape.split(","))
    causal = kernel == "attention_causal"
    scale = d**-0.5
    q, k, v = (
        torch.randn(batch, heads, length, d, device="cuda", dtype=torch.float16) for _ in range(3)
    )
    o = torch.empty_like(q)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    errors: list[float] = []

    def right(got: Any) -> bool:
        errors.append(float((got.float() - expected.float()).abs().max()))
        return errors[-1] < TOLERANCE

    def make(function: Any) -> Any:
        def run(q: Any, k: Any, v: Any) -> Any:
            function(q, k, v, o, scale)
            return o

        return run

    sets = [(q, k, v)]
    wanted = {config: decisions(kernel, config) for config in configs}
    function = load_kernel(EXAMPLE, kernel)
    result = sweep_runner(
        function, make, sets, [c for c in wanted.values() if c], right=right, rounds=rounds
    )
    sdpa_ms = min(
        time_ms(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
            sets,
        )
        for _ in range(rounds)
    )
    flops = 4 * batch * heads * length * length * d // (2 if causal else 1)
    rows = []
    for label, config in wanted.items():
        row: dict[str, Any] = {"kernel": kernel, "config": label, "shape": shape}
        ms, why = result.outcome(config, width=300)
        if ms is None:
            row["error"] = why
        else:
            row.update(
                tilec_ms=ms,
                sdpa_ms=sdpa_ms,
                tilec_tflops=flops / ms / 1e9,
                sdpa_tflops=flops / sdpa_ms / 1e9,
                ratio=ms / sdpa_ms,
            )
        rows.append(row)
    if errors:
        rows[0]["largest_error"] = max(errors)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", help="attention, attention_causal, ...")
    parser.add_argument(
        "--config", action="append", help="BM,BN,WARPS,STAGES or default, with +ws, +ss, +pp"
    )
    parser.add_argument("--shape", action="append", help="B,H,S,D")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for kernel in args.kernel or ["attention"]:
        for shape in args.shape or DEFAULT_SHAPES:
            for row in probe(kernel, args.config or DEFAULT_CONFIGS, shape, args.rounds):
                rows.append(row)
                if "error" in row:
                    text = row["error"]
                else:
                    text = (
                        f"{row['tilec_tflops']:7.1f} TFLOP/s vs SDPA {row['sdpa_tflops']:7.1f}"
                        f"  time ratio {row['ratio']:5.2f}"
                    )
                print(f"{kernel:18} {shape:16} {row['config']:22} {text}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
