"""Split-K GEMMs against their peers and against every split count, on one GPU in one run.

    python -m tilec.benchmarks.split_k_probe [--only nn,nt] [--json OUT]

For GEMMs whose output tiles leave SMs idle and whose K is long (the shapes nobody tuned the
model on, in several layouts and dtypes), times: tilec as `@tilec.jit` compiles it (tiling's
SM model chooses the tile and whether to split, the launch chooses S), tilec with the split
off (`tiling{split=false}`: the tiles the model chose before split-K existed), tilec with S
pinned at 1, 2, 3, 4, 6, 8 and 12 (`split-reduction{split=S}`, the model's tiles) --
the model's regret is the launch's choice over the fastest pinned S --, cuBLAS through
torch, and Triton's tutorial matmul autotuned (f16 and bf16). Each result is checked against
a float64 product before it is timed; times are `tilec.benchmarks.gpu.time_ms` (medians of
CUDA-event runs, inputs rotated past the L2 cache). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tilec.benchmarks.gpu import _close, _sets, time_ms

__all__ = ["main"]

SOURCE = """
def mm_nn(a: {t}[M, K], b: {t}[K, N], c: {t}[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


def mm_nt(a: {t}[M, K], b: {t}[N, K], c: {t}[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = acc


def mm_tn(a: {t}[K, M], b: {t}[K, N], c: {t}[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tk, tm].T @ b[tk, tn]
        c[tm, tn] = acc


def mm_nt_bias_relu(a: {t}[M, K], b: {t}[N, K], bias: f32[N], c: {t}[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = maximum(acc + bias[tn][None, :], 0.0)
"""

# (kernel, dtype, M, N, K): few output tiles, long K; odd extents where the layout allows.
SHAPES = [
    ("nn", "f16", 1024, 1024, 16384),
    ("nn", "f16", 1000, 904, 9992),
    ("nn", "f16", 256, 512, 65536),
    ("nt", "f16", 768, 1024, 12288),
    ("nt", "bf16", 1000, 1000, 10000),
    ("nt", "bf16", 64, 4096, 14336),
    ("tn", "f16", 512, 512, 32768),
    ("nt_bias_relu", "f16", 600, 1100, 10000),
    ("nn", "f16", 2048, 2048, 8192),
    ("nt", "f16", 4096, 4096, 4096),  # the tiles fill the GPU: not split
]
PINNED = (1, 2, 3, 4, 6, 8, 12)


def _case(kernel: str, dtype: str, m: int, n: int, k: int) -> tuple[list, Any, Any, Any]:
    import torch

    t = torch.float16 if dtype == "f16" else torch.bfloat16

    def make() -> list:
        a = torch.randn((k, m) if kernel == "tn" else (m, k), device="cuda", dtype=t)
        b = torch.randn((n, k) if kernel.startswith("nt") else (k, n), device="cuda", dtype=t)
        extra = [torch.randn(n, device="cuda")] if kernel == "nt_bias_relu" else []
        return [a, b, *extra]

    sets = _sets(make, (m + n) * k * 2)
    a, b, *extra = sets[0]
    av = a.double().T if kernel == "tn" else a.double()
    bv = b.double().T if kernel.startswith("nt") else b.double()
    expected = av @ bv
    if extra:
        expected = (expected + extra[0].double()).clamp_min(0)
    c = torch.empty(m, n, device="cuda", dtype=t)

    def torch_op(a: Any, b: Any, *extra: Any) -> Any:
        x = (a.T if kernel == "tn" else a) @ (b.T if kernel.startswith("nt") else b)
        return torch.relu(x + extra[0]) if extra else x

    return sets, expected.to(t), c, torch_op


def _triton(kernel: str) -> Any:
    from tilec.benchmarks.gpu import load_triton_references

    module = load_triton_references()
    if module is None or kernel == "nt_bias_relu":
        return None
    return lambda a, b: module.matmul(
        a.T if kernel == "tn" else a, b.T if kernel.startswith("nt") else b
    )


def main(argv: list[str] | None = None) -> int:
    import torch

    from tilec.jit import load_kernel

    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.split_k_probe")
    parser.add_argument("--only", default="", help="comma-separated kernels (nn, nt, ...)")
    parser.add_argument(
        "--rows", default="", help="row numbers of SHAPES to run, e.g. 0-4 or 1,3 (all)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results here as JSON")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for dtype in ("f16", "bf16"):
            files[dtype] = Path(tmp) / f"split_k_{dtype}.tile"
            files[dtype].write_text(SOURCE.replace("{t}", dtype))
        for number, (kernel, dtype, m, n, k) in enumerate(SHAPES):
            if (only and kernel not in only) or not _wanted(number, args.rows):
                continue
            sets, expected, c, torch_op = _case(kernel, dtype, m, n, k)
            label = f"{kernel} {dtype} {m}x{n}x{k}"
            variants: dict[str, Any] = {
                "tilec": load_kernel(files[dtype], f"mm_{kernel}"),
                "tilec unsplit tiles": load_kernel(
                    files[dtype], f"mm_{kernel}", pass_options={"tiling": {"split": False}}
                ),
            }
            for s in PINNED:
                variants[f"S={s}"] = load_kernel(
                    files[dtype], f"mm_{kernel}", pass_options={"split-reduction": {"split": s}}
                )
            times: dict[str, float | str] = {}
            for name, fn in variants.items():
                try:
                    fn(*sets[0], c)
                    torch.cuda.synchronize()
                    if not _close(c, expected, 1.6e-2 if dtype == "bf16" else 2e-3):
                        times[name] = "wrong result"
                        continue
                    times[name] = time_ms(lambda *x, fn=fn, c=c: fn(*x, c), sets)
                except Exception as e:  # a variant that does not compile is reported, not fatal
                    times[name] = f"{type(e).__name__}: {str(e)[:120]}"
            for name, fn in (("cuBLAS", torch_op), ("triton (autotuned)", _triton(kernel))):
                if fn is None:
                    continue
                out = fn(*sets[0])
                torch.cuda.synchronize()
                if not _close(out, expected, 1.6e-2 if dtype == "bf16" else 2e-3):
                    times[name] = "wrong result"
                    continue
                times[name] = time_ms(fn, sets)
            split = _launch_split(variants["tilec"], [*sets[0], c])
            pinned = {s: times[f"S={s}"] for s in PINNED if isinstance(times[f"S={s}"], float)}
            best_s = min(pinned, key=pinned.get) if pinned else None
            row = {"shape": label, "times_ms": times, "launch_split": split, "best_pinned": best_s}
            rows.append(row)
            _print_row(row, 2 * m * n * k)
            sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    return 0


def _wanted(number: int, rows: str) -> bool:
    if not rows:
        return True
    for part in rows.split(","):
        lo, _, hi = part.partition("-")
        if int(lo) <= number <= int(hi or lo):
            return True
    return False


def _launch_split(kernel: Any, args: list) -> int:
    """The S the launcher chooses for these arguments (1: no split axis)."""
    import torch

    arguments = kernel._checker.convert(args)
    launcher = kernel._launchers.get(kernel._key(arguments))
    if launcher is None or launcher.split is None:
        return 1
    grid = launcher.grid(arguments)
    stream = torch.cuda.current_stream().cuda_stream
    full, _ = launcher.split_launch(grid, arguments.extents, args[0].get_device(), stream)
    return full[launcher._split_axis]


def _print_row(row: dict, flops: int) -> None:
    times = row["times_ms"]
    peers = [times.get(p) for p in ("cuBLAS", "triton (autotuned)")]
    best = min((t for t in peers if isinstance(t, float)), default=None)
    ours = times.get("tilec")
    ratio = f"{ours / best:.3f}" if isinstance(ours, float) and best else "-"
    unsplit = times.get("tilec unsplit tiles")
    pinned = "  ".join(
        f"{k}:{v:.4f}" if isinstance(v, float) else f"{k}:{v}"
        for k, v in times.items()
        if k.startswith("S=")
    )
    tflops = f"{flops / ours / 1e9:.0f} TFLOP/s" if isinstance(ours, float) else ""
    print(
        f"{row['shape']}: tilec {ours} ms ({tflops}, S={row['launch_split']}), unsplit tiles "
        f"{unsplit}, cuBLAS {times.get('cuBLAS')}, triton {times.get('triton (autotuned)')}; "
        f"tilec/best peer {ratio}; best pinned S={row['best_pinned']}\n    {pinned}"
    )


if __name__ == "__main__":
    sys.exit(main())
