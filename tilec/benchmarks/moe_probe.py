"""Where the MoE grouped GEMM's time goes: `examples/moe_gemm.tile` against the same work as
one dense GEMM, one difference at a time, with cuBLAS in the same run.

    python -m tilec.benchmarks.moe_probe [--shape E,TOKENS,TOP,K,N] [--json OUT]

The suite's `moe_gemm` row runs at ~0.7 of a dense GEMM's TFLOP/s where the issue asks 0.8.
The kernel differs from a dense GEMM (`gemm_layouts.tile`'s `gemm_nt_bf16`, the same tiles)
in four ways, and each variant removes one:

* `as written`: the suite's routing (uneven counts, boundaries anywhere);
* `even`: every expert the same count, a multiple of 128 rows, so no row tile straddles two
  experts (no tile runs two K loops): what the boundaries cost;
* `even, no where`: the kernel's epilogue stores `acc` instead of `where(mine, acc, y)`,
  which reads y back (right only when no tile straddles, as with `even`): what the read of y
  costs;
* `dense tilec`: `gemm_nt_bf16` on x @ w[0].T: what the loop over experts, its scalar loads,
  the `if` and the pipeline restarted per expert cost;
* `dense cuBLAS`: `x @ w[0].T`, the ceiling the issue measures against; and the suite's
  peer, a loop of cuBLAS matmuls over the experts (on the suite's routing).

Each tilec variant is checked against torch before it is timed (`time_ms`: inputs rotated
past the L2 cache, median). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tilec.benchmarks.gpu import EXAMPLES, _sets, time_ms
from tilec.benchmarks.suite_compute import moe_routing

__all__ = ["main"]

ROW_TILE = 128  # the heuristic's row tile for this kernel (`ab --dry-run`)


def _no_where_source() -> str:
    """moe_gemm.tile with the epilogue storing the accumulator unconditionally."""
    text = (EXAMPLES / "moe_gemm.tile").read_text()
    old = "y[tm, tn] = where(mine[:, None], acc.to(bf16), y[tm, tn])"
    if old not in text:
        raise SystemExit("moe_probe: examples/moe_gemm.tile's epilogue changed; update the probe")
    return text.replace(old, "y[tm, tn] = acc.to(bf16)")


def _bounds(counts: list[int]) -> list[int]:
    bounds = [0]
    for count in counts:
        bounds.append(bounds[-1] + count)
    return bounds


def probe(shape: tuple[int, ...]) -> dict:
    import torch

    from tilec.jit import load_kernel

    experts, tokens, top_k, k, n = shape
    routed = moe_routing(tokens, experts, top_k)
    rows = sum(routed)
    per = rows // experts // ROW_TILE * ROW_TILE
    even = [per] * (experts - 1) + [rows - per * (experts - 1)]

    def make():
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(experts, n, k, device="cuda", dtype=torch.bfloat16) * 0.05
        return x, w

    sets = _sets(make, (rows + experts * n) * k * 2)
    y = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    moe = load_kernel(EXAMPLES / "moe_gemm.tile", "moe_gemm")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "moe_gemm_no_where.tile"
        path.write_text(_no_where_source())
        no_where = load_kernel(path, "moe_gemm")
    dense = load_kernel(EXAMPLES / "gemm_layouts.tile", "gemm_nt_bf16")
    x0, w0 = sets[0]

    def grouped_reference(bounds):
        out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
        for e in range(experts):
            lo, hi = bounds[e], bounds[e + 1]
            torch.matmul(x0[lo:hi], w0[e].T, out=out[lo:hi])
        return out

    row: dict = {"shape": ",".join(map(str, shape)), "routed": routed, "even": even}
    variants = [
        ("as written", moe, _bounds(routed)),
        ("even", moe, _bounds(even)),
        ("even, no where", no_where, _bounds(even)),
    ]
    for label, kernel, bounds in variants:
        offsets = torch.tensor(bounds, device="cuda", dtype=torch.int32)
        kernel(x0, w0, offsets, y)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, grouped_reference(bounds), rtol=2e-2, atol=0.5)
        row[label] = time_ms(lambda x, w, f=kernel, o=offsets: f(x, w, o, y), sets)
    dense(x0, w0[0], y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x0 @ w0[0].T, rtol=2e-2, atol=0.5)
    row["dense tilec"] = time_ms(lambda x, w: dense(x, w[0], y), sets)
    row["dense cuBLAS"] = time_ms(lambda x, w: x @ w[0].T, sets)
    bounds = _bounds(routed)

    def loop(x, w):
        out = torch.empty(rows, n, device=x.device, dtype=x.dtype)
        for e in range(experts):
            torch.matmul(x[bounds[e] : bounds[e + 1]], w[e].T, out=out[bounds[e] : bounds[e + 1]])
        return out

    row["cuBLAS loop"] = time_ms(loop, sets)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="E,TOKENS,TOP,K,N",
        help="repeatable; default the suite's 8,4096,2,4096,14336",
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] or [
        (8, 4096, 2, 4096, 14336)
    ]
    rows = []
    for shape in shapes:
        row = probe(shape)
        rows.append(row)
        base = row["dense cuBLAS"]
        print(f"moe {row['shape']}: routed {row['routed']}")
        for label in (
            "as written",
            "even",
            "even, no where",
            "dense tilec",
            "dense cuBLAS",
            "cuBLAS loop",
        ):
            print(
                f"  {label:16} {row[label] * 1e3:8.1f} us  {row[label] / base:6.3f} of dense cuBLAS"
            )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
