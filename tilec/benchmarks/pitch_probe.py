"""GEMMs whose operands' rows are not 16 bytes apart, with and without pitched copies.

    python -m tilec.benchmarks.pitch_probe [--layouts nn,nt,tn,tt] [--json OUT]

The measurements behind `tilec.runtime.pitched` (docs/runtime.md): `gemm_layouts.tile` in each
operand layout at shapes whose M, N or K is not a multiple of 8 (and one whose every stride is
aligned, for reference), timed three ways in interleaved rounds -- tilec as a call runs it
(operands copied into pitched buffers where the rule says, the copies counted), tilec with
`pitch_operands=False` (the element-copy path), and cuBLAS (`torch.matmul` on the same views)
-- plus the decode shape where the rule leaves the weight alone. One table: milliseconds, each
over cuBLAS's, and which arguments were copied. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from tilec.benchmarks.gpu import _sets, time_ms

__all__ = ["main"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHAPES = [(1001, 3001, 1999), (4000, 3000, 1000), (2047, 2049, 4095), (4096, 4096, 4095)]
DECODE = ("nt", (16, 11007, 4095))  # 16 tokens against a weight it reads once: not copied
ROUNDS = 3


def _case(layout: str, shape: tuple[int, int, int]) -> dict[str, Any]:
    import torch

    from tilec.jit import load_kernel

    m, n, k = shape
    name = f"gemm_{layout}"
    pitched = load_kernel(EXAMPLES / "gemm_layouts.tile", name)
    plain = load_kernel(EXAMPLES / "gemm_layouts.tile", name, pitch_operands=False)

    def make():
        a = torch.randn(*((m, k) if layout[0] == "n" else (k, m)), device="cuda").half()
        b = torch.randn(*((k, n) if layout[1] == "n" else (n, k)), device="cuda").half()
        return a, b, torch.empty(m, n, device="cuda", dtype=torch.float16)

    def views(a: Any, b: Any) -> tuple[Any, Any]:
        return (a if layout[0] == "n" else a.t()), (b if layout[1] == "n" else b.t())

    sets = _sets(make, 2 * (m * k + k * n + m * n))
    implementations = {
        "tilec": lambda a, b, c: pitched(a, b, c),
        "element copies": lambda a, b, c: plain(a, b, c),
        "cuBLAS": lambda a, b, c: torch.matmul(*views(a, b), out=c),
    }
    a, b, c = sets[0]
    expected = views(a, b)[0].float() @ views(a, b)[1].float()
    correct = {}
    for label, run in implementations.items():
        c.fill_(float("nan"))
        run(a, b, c)
        torch.cuda.synchronize()
        correct[label] = bool(torch.allclose(c.float(), expected, rtol=2e-2, atol=0.5))
    times: dict[str, list[float]] = {label: [] for label in implementations}
    for _ in range(ROUNDS):
        for label, run in implementations.items():
            times[label].append(time_ms(run, sets))
    ms = {label: statistics.median(v) for label, v in times.items()}
    return {
        "layout": layout,
        "shape": list(shape),
        "ms": ms,
        "correct": correct,
        "pitched": sorted(pitched.pitched_copies),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.pitch_probe")
    parser.add_argument("--layouts", default="nn,nt,tn,tt", help="comma-separated layouts")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    cases = [(layout, s) for layout in args.layouts.split(",") for s in SHAPES]
    if DECODE[0] in args.layouts.split(","):
        cases.append(DECODE)
    rows = []
    print(
        f"{'layout':6} {'M×N×K':>16} {'tilec':>8} {'elements':>8} {'cuBLAS':>8} "
        f"{'t/cuBLAS':>8} {'e/cuBLAS':>8}  copied"
    )
    for layout, shape in cases:
        row = _case(layout, shape)
        rows.append(row)
        ms = row["ms"]
        wrong = [k for k, ok in row["correct"].items() if not ok]
        print(
            f"{layout:6} {'×'.join(map(str, shape)):>16} {ms['tilec']:8.4f} "
            f"{ms['element copies']:8.4f} {ms['cuBLAS']:8.4f} "
            f"{ms['tilec'] / ms['cuBLAS']:8.3f} {ms['element copies'] / ms['cuBLAS']:8.3f}  "
            f"{','.join(row['pitched']) or '-'}"
            + (f"  WRONG: {', '.join(wrong)}" if wrong else ""),
            flush=True,
        )
    print(
        "ms: medians of 3 interleaved rounds; t/cuBLAS, e/cuBLAS: tilec's time (pitched, "
        "element copies) over cuBLAS's, above 1 tilec is slower"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(all(r["correct"].values()) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
