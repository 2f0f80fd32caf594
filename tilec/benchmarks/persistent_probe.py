"""Persistent blocks against a block a tile (`pipeline`'s option `persistent`,
passes/pipeline_persistent.py) on GEMMs a user writes, with cuBLAS in the same run.

    python -m tilec.benchmarks.persistent_probe [--json OUT] [--only 'gemm_nn 4000,bmm']
    python -m tilec.benchmarks.persistent_probe --shape 4096x3072x1024 --shape nt:4000x3000x1000

For each kernel and shape: tilec's time in each of `VARIANTS` (the default: one block a tile
in the grouped block order; the launch order; persistent blocks; a producer warpgroup;
256x128 tiles; clusters of two blocks sharing b),
each checked against
torch first, and torch's (`matmul` / `bmm`) on the same inputs; times from
`tilec.benchmarks.gpu.time_ms` (inputs rotated past the L2 cache, median). One line each:
every variant's time, its ratio to the default's, and to cuBLAS's. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

from tilec.benchmarks.gpu import EXAMPLES, _sets, time_ms
from tilec.diagnostics import TileError

__all__ = ["CASES", "main"]

# (example, kernel, shape): matmul is M x N x K; bmm is Z x M x N x K.
CASES = [
    ("gemm_layouts.tile", "gemm_nn", (4000, 3000, 1000)),
    ("gemm_layouts.tile", "gemm_nn", (4096, 4096, 4096)),
    ("gemm_layouts.tile", "gemm_nn", (8192, 8192, 8192)),
    ("gemm_layouts.tile", "gemm_nt", (4000, 3000, 1000)),
    ("gemm_layouts.tile", "gemm_nn", (2048, 2048, 2048)),
    ("gemm_layouts.tile", "gemm_nn", (3000, 5000, 2000)),
    ("bmm.tile", "bmm", (8, 1024, 1024, 1024)),
    ("bmm.tile", "bmm", (64, 256, 256, 64)),
]


def _inputs(kernel: str, shape: tuple) -> tuple:
    import torch

    def make():
        if kernel == "bmm":
            z, m, n, k = shape
            a = torch.randn(z, m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(z, k, n, device="cuda", dtype=torch.float16)
            return a, b
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        if kernel == "gemm_nt":
            b = b.t().contiguous()
        return a, b

    a, b = make()
    per_set = (a.numel() + b.numel()) * 2
    return _sets(make, per_set)


def _reference(kernel: str):
    if kernel == "gemm_nt":
        return lambda a, b: a @ b.t()
    return lambda a, b: a @ b


# What each variant pins: nothing (one block a tile, in tiling's grouped block order), the
# launch order (group_m = 1), persistent blocks wherever the kernel allows, and warp
# specialization (a producer warpgroup, passes/pipeline_warp_specialize.py).
VARIANTS = {
    "default": {},
    "launch_order": {"tiling": {"group_m": 1}},
    "persistent": {"pipeline": {"persistent": -1}},
    "warp_specialize": {"pipeline": {"warp_specialize": -1}},
    "ws_persistent": {"pipeline": {"warp_specialize": -1, "persistent": -1}},
    "tall": {"tiling": {"tiles": "BM=256,BN=128,BK=64"}},  # 256x128 tiles, not 128x256
    # two blocks of neighbouring row tiles share b's tile by multicast (pipeline_cluster.py)
    "cluster": {"pipeline": {"cluster": 2}},
}


def case(example: str, kernel: str, shape: tuple, variants: list[str]) -> dict:
    import torch

    from tilec.jit import load_kernel

    sets = _inputs(kernel, shape)
    reference = _reference(kernel)
    out = torch.empty_like(reference(*sets[0]))
    row = {"kernel": kernel, "shape": "x".join(map(str, shape))}
    for label in variants:
        if label == "launch_order" and kernel == "bmm":
            continue  # a 3-D grid keeps the launch order anyway
        try:
            fn = load_kernel(EXAMPLES / example, kernel, pass_options=VARIANTS[label])
            fn(*sets[0], out)
        except TileError as e:  # a variant the kernel refuses (its reason, no time)
            row[label] = None
            row[f"{label}_refused"] = e.message
            continue
        torch.cuda.synchronize()
        expected = reference(*sets[0])
        torch.testing.assert_close(out, expected, rtol=2e-2, atol=0.5)
        row[label] = time_ms(lambda a, b, fn=fn: fn(a, b, out), sets)
    row["torch"] = time_ms(reference, sets)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the rows here (after each row)")
    parser.add_argument(
        "--only", default="", help="comma-separated substrings of 'kernel MxNxK' to run"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}"
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="[nt:]MxNxK",
        help="time these GEMMs instead of the list (repeatable; nt: b stored [N, K])",
    )
    args = parser.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w]
    variants = [v for v in args.variants.split(",") if v]
    rows = []
    cases = CASES
    if args.shape:
        cases = []
        for text in args.shape:
            layout, _, dims = text.rpartition(":")
            shape = tuple(int(d) for d in dims.split("x"))
            cases.append(("gemm_layouts.tile", f"gemm_{layout or 'nn'}", shape))
    for example, kernel, shape in cases:
        name = f"{kernel} {'x'.join(map(str, shape))}"
        if wanted and not any(w in name for w in wanted):
            continue
        row = case(example, kernel, shape, variants)
        rows.append(row)
        base = row.get("default")
        cells = []
        for label in variants:
            if row.get(label, 0) is None:
                cells.append(f"{label} refused")
            elif label in row:
                vs = f" ({row[label] / base:.3f})" if base and label != "default" else ""
                cells.append(
                    f"{label} {row[label] * 1e3:7.1f} us{vs} /torch {row[label] / row['torch']:.3f}"
                )
        print(
            f"{row['kernel']:8} {row['shape']:20} torch {row['torch'] * 1e3:7.1f} us  "
            + "  ".join(cells),
            flush=True,
        )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
