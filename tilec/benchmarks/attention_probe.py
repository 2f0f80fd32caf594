"""Probe attention configurations on a GPU: `examples/attention.tile` under pinned tile sizes,
warps and stages, each checked against SDPA and timed against it in the same run.

    python -m tilec.benchmarks.attention_probe                       # default + a sweep
    python -m tilec.benchmarks.attention_probe --config 64,64,4,2 --shape 4,16,4096,128
    python -m tilec.benchmarks.attention_probe --kernel attention_causal --json out.json

A configuration is `BM,BN,WARPS,STAGES` (`default`: what the passes choose). Use it to
compare configurations and to test the tiling model's choice against its neighbours; the
figures that go in docs/benchmarks.md come from `python -m tilec.gpucheck`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "attention.tile"
DEFAULT_CONFIGS = ["default", "64,64,4,2", "64,32,4,2", "128,64,8,2", "128,32,8,2", "64,128,4,2"]
DEFAULT_SHAPES = ["4,16,4096,128", "4,16,4096,64", "1,8,1537,128"]


# The query and key dimensions of each kernel of the example.
_DIMENSIONS = {"attention_causal": ("S", "T")}


def _config_options(kernel: str, config: str) -> dict:
    if config == "default":
        return {}
    bm, bn, warps, stages = (int(x) for x in config.split(","))
    m, n = _DIMENSIONS.get(kernel, ("M", "N"))
    return {"tile": {"B": 1, "H": 1, m: bm, n: bn}, "warps": warps, "stages": stages}


def probe(kernel: str, config: str, shape: str, repeat: int) -> dict:
    import torch
    import torch.nn.functional as F

    from tilec.benchmarks.gpu import time_ms
    from tilec.jit import load_kernel

    batch, heads, length, d = (int(x) for x in shape.split(","))
    causal = kernel == "attention_causal"
    scale = d**-0.5
    options = _config_options(kernel, config)
    row = {"kernel": kernel, "config": config, "shape": shape}
    q, k, v = (
        torch.randn(batch, heads, length, d, device="cuda", dtype=torch.float16) for _ in range(3)
    )
    o = torch.empty_like(q)
    try:
        f = load_kernel(EXAMPLE, kernel, **options)
        f(q, k, v, o, scale)
        torch.cuda.synchronize()
    except Exception as e:  # the row says why
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return row
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    row["max_error"] = float((o.float() - expected.float()).abs().max())
    row["correct"] = row["max_error"] < 2e-2
    sets = [(q, k, v)]
    tilec_ms = min(time_ms(lambda q, k, v: f(q, k, v, o, scale), sets) for _ in range(repeat))
    sdpa_ms = min(
        time_ms(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
            sets,
        )
        for _ in range(repeat)
    )
    flops = 4 * batch * heads * length * length * d // (2 if causal else 1)
    row.update(
        tilec_ms=tilec_ms,
        sdpa_ms=sdpa_ms,
        tilec_tflops=flops / tilec_ms / 1e9,
        sdpa_tflops=flops / sdpa_ms / 1e9,
        ratio=tilec_ms / sdpa_ms,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", help="attention, attention_causal, ...")
    parser.add_argument("--config", action="append", help="BM,BN,WARPS,STAGES or default")
    parser.add_argument("--shape", action="append", help="B,H,S,D")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for kernel in args.kernel or ["attention"]:
        for shape in args.shape or DEFAULT_SHAPES:
            for config in args.config or DEFAULT_CONFIGS:
                row = probe(kernel, config, shape, args.repeat)
                rows.append(row)
                if "error" in row:
                    text = row["error"]
                else:
                    text = (
                        f"{row['tilec_tflops']:7.1f} TFLOP/s vs SDPA {row['sdpa_tflops']:7.1f}"
                        f"  time ratio {row['ratio']:5.2f}  err {row['max_error']:.1e}"
                    )
                print(f"{kernel:18} {shape:16} {config:12} {text}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
