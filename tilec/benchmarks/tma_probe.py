"""GEMMs nobody tuned, at odd shapes, with the TMA unit's copies and with cp.async, against
torch (cuBLAS, plus its bias add) in the same run: the kernels `pipeline`'s option `tma` was
not fitted to.

    python -m tilec.benchmarks.tma_probe [--json FILE]

Four kernels written as a user would: a linear layer `x @ w.T + bias` (bias in the
epilogue, w stored [N, K] as nn.Linear keeps it), a batched `q @ k.T` of attention scores, a
bf16 `a @ b` whose B rows (1500 elements, 3000 bytes) are not 16-byte multiples, and `a.T @ b`
(A read into registers) -- the last two keep cp.async, which the table says. Each compiled as `@tilec.jit` compiles it, once as
the heuristics choose (`tma` automatic) and once with `pipeline.tma = 0`; checked against
torch, timed with the benchmark's clock (`time_ms`: median of CUDA-event runs, inputs rotated
past the L2 cache), torch's expression (cuBLAS; the linear layer's bias is a second kernel)
timed the same way in the same run. One table: microseconds, and each tilec time over
torch's. Needs a GPU; under a minute on an H200.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["KERNELS", "main"]

KERNELS = """
def linear(x: f16[M, K], w: f16[N, K], bias: f16[N], y: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += x[tm, tk] @ w[tn, tk].T
        y[tm, tn] = acc + bias[tn].to(f32)[None, :]


def scores(q: f16[Z, M, D], k: f16[Z, N, D], s: f16[Z, M, N]):
    for z, tm, tn in tiles(Z, M, N, tile={Z: 1}):
        acc = zeros([tm, tn], f32)
        for td in tiles(D):
            acc += q[z, tm, td] @ k[z, tn, td].T
        s[z, tm, tn] = acc


def plain_bf16(a: bf16[M, K], b: bf16[K, N], c: bf16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


def at_b(a: f16[K, M], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tk, tm].T @ b[tk, tn]
        c[tm, tn] = acc
"""


def _cases() -> list[tuple[str, str, tuple, Any, Any]]:
    """(label, kernel, size, make inputs, torch reference)."""
    import torch

    def randn(*shape, dtype=torch.float16):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    def linear(m, n, k):
        return lambda: (randn(m, k), randn(n, k), randn(n)), lambda x, w, b: x @ w.T + b

    def scores(z, m, n, d):
        return lambda: (randn(z, m, d), randn(z, n, d)), lambda q, k: q @ k.transpose(1, 2)

    def plain(m, n, k):
        make = lambda: (randn(m, k, dtype=torch.bfloat16), randn(k, n, dtype=torch.bfloat16))  # noqa: E731
        return make, lambda a, b: a @ b

    def at_b(m, n, k):
        return lambda: (randn(k, m), randn(k, n)), lambda a, b: a.T @ b

    return [
        ("linear x@w.T+bias", "linear", (3000, 5120, 1536), *linear(3000, 5120, 1536)),
        ("linear x@w.T+bias", "linear", (777, 4096, 1000), *linear(777, 4096, 1000)),
        ("scores q@k.T", "scores", (24, 1000, 1000, 128), *scores(24, 1000, 1000, 128)),
        ("a@b bf16", "plain_bf16", (2500, 1500, 4000), *plain(2500, 1500, 4000)),
        ("a.T@b", "at_b", (3072, 2000, 2056), *at_b(3072, 2000, 2056)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.tma_probe")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    import torch

    from tilec.benchmarks.gpu import _sets, time_ms
    from tilec.jit import load_kernel

    if not torch.cuda.is_available():
        print("tma_probe: no CUDA GPU", file=sys.stderr)
        return 1
    source = Path(tempfile.mkdtemp()) / "tma_probe.tile"
    source.write_text(KERNELS)
    rows, failed = [], False
    print(f"{'kernel':20s} {'size':>20s} {'tma':>8s} {'cp.async':>9s} {'torch':>8s} "
          f"{'tma/torch':>10s} {'cp/torch':>9s}")  # fmt: skip
    for label, name, size, make, reference in _cases():
        sets = _sets(lambda make=make: make(), 4 * sum(t.numel() for t in make()))
        row: dict[str, Any] = {"kernel": label, "size": "x".join(map(str, size))}
        for key, tma in (("tma", -1), ("cp_async", 0)):
            kernel = load_kernel(source, name, pass_options={"pipeline": {"tma": tma}})
            inputs = sets[0]
            expected = reference(*inputs)
            out = torch.full_like(expected, float("nan"))
            kernel(*inputs, out)
            scale = float(expected.float().abs().max()) or 1.0
            ok = bool(((out.float() - expected.float()).abs() <= 2e-2 * scale).all())
            failed |= not ok
            ptx = kernel.compile_for(*inputs, out).ptx
            row[key + "_bulk"] = "cp.async.bulk.tensor" in ptx

            def run(*x: Any, kernel: Any = kernel, out: Any = out) -> None:
                kernel(*x, out)

            row[key] = time_ms(run, sets) * 1e3
            row[key + "_ok"] = ok
        row["torch"] = time_ms(reference, sets) * 1e3
        row["tma_ratio"] = row["tma"] / row["torch"]
        row["cp_async_ratio"] = row["cp_async"] / row["torch"]
        rows.append(row)
        marks = "" if row["tma_ok"] and row["cp_async_ok"] else "  WRONG"
        marks += "" if row["tma_bulk"] else "  (no TMA copies)"
        print(f"{label:20s} {row['size']:>20s} {row['tma']:8.1f} {row['cp_async']:9.1f} "
              f"{row['torch']:8.1f} {row['tma_ratio']:10.2f} {row['cp_async_ratio']:9.2f}"
              f"{marks}", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
