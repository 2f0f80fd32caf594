"""Memory-bound kernels under many tile shapes and warp counts, against torch.compile and eager.

    python -m tilec.benchmarks.shape_probe [--only swiglu,rows] [--json OUT]

The measurements behind the tile-shape model of `tiling` for kernels without dots: for a
2-D element-wise kernel (SwiGLU), every (BM, BN) of 4096 and 8192 elements from 64 x 64 to
1 x 8192 on 4, 8 and 16 warps; for row kernels (softmax of f16 rows, RMSNorm, layernorm of
short rows, cross-entropy over a 32000 vocabulary), rows per block 1 to 8 on 4, 8 and 16
warps; each also with the pipeline's own choice ("default"). Every kernel is the one a user
writes (the source below), compiled as `@tilec.jit` compiles it with `tiling{tiles=...}` and
`assign-layouts{num_warps=...}` pinning the shape — one tuner sweep per size
(`tilec.tune.api.sweep_runner`: compiled in parallel, checked against torch, timed with the
benchmark's `time_ms`: median of CUDA-event runs, inputs rotated past the L2 cache). One table:
milliseconds, GB/s, the percentage of a device-to-device copy measured in the same run, and
the time over the faster of torch.compile and eager torch. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilec.benchmarks.gpu import _close, _sets, time_ms

__all__ = ["main"]

SOURCES = {
    "swiglu": """
def swiglu(a: bf16[M, N], b: bf16[M, N], y: bf16[M, N]):
    for tm, tn in tiles(M, N):
        x = a[tm, tn].to(f32)
        y[tm, tn] = x * sigmoid(x) * b[tm, tn].to(f32)
""",
    "softmax_f16": """
def softmax_f16(x: f16[M, N], y: f16[M, N]):
    for tm in tiles(M):
        row = x[tm, :].to(f32)
        e = exp(row - max(row, axis=1, keepdims=True))
        y[tm, :] = e / sum(e, axis=1, keepdims=True)
""",
    "rmsnorm": """
def rmsnorm(x: bf16[M, N], w: bf16[N], y: bf16[M, N], eps: f32):
    for tm in tiles(M):
        r = x[tm, :].to(f32)
        y[tm, :] = r * rsqrt(mean(r * r, axis=1, keepdims=True) + eps) * w[:].to(f32)
""",
    "layernorm": """
def layernorm(x: f16[M, N], w: f16[N], b: f16[N], y: f16[M, N], eps: f32):
    for tm in tiles(M):
        r = x[tm, :].to(f32)
        mu = mean(r, axis=1, keepdims=True)
        d = r - mu
        y[tm, :] = d * rsqrt(mean(d * d, axis=1, keepdims=True) + eps) * w[:] + b[:]
""",
    "cross_entropy": """
def cross_entropy(logits: f32[M, V], target: i32[M], loss: f32[M]):
    for tm in tiles(M):
        m_i = full([tm], -inf, f32)
        l_i = zeros([tm], f32)
        picked = zeros([tm], f32)
        t = target[tm]
        for tv in tiles(V):
            s = logits[tm, tv]
            m_new = maximum(m_i, max(s, axis=1))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new[:, None]), axis=1)
            picked += sum(where(offsets(tv)[None, :] == t[:, None], s, 0.0), axis=1)
            m_i = m_new
        loss[tm] = log(l_i) + m_i - picked
""",
    "vector_add": """
def vector_add(x: f32[N], y: f32[N], out: f32[N]):
    for tn in tiles(N):
        out[tn] = x[tn] + y[tn]
""",
}


def _kernel(name: str) -> Any:
    from tilec.jit import load_kernel

    path = Path(tempfile.mkdtemp(prefix="tilec-shape-")) / f"{name}.tile"
    path.write_text(SOURCES[name].lstrip())
    return load_kernel(path, name)


def _decisions(tiles: str, warps: int | None) -> dict[str, Any]:
    """The tuner's config for a tile shape (`tiling{tiles=...}`) and a warp count."""
    config: dict[str, Any] = {}
    if tiles:
        config["tiling.tiles"] = tiles
    if warps:
        config["assign-layouts.num_warps"] = warps
    return config


def _row(workload, size, config, run, check, sets, moved) -> dict[str, Any]:
    row = {"workload": workload, "size": size, "config": config}
    try:
        correct = check(run(*sets[0]))
        ms = time_ms(run, sets)
    except Exception as e:  # one failing configuration does not hide the others
        return {**row, "ms": None, "note": f"failed: {str(e).splitlines()[0][:80]}"}
    return {**row, "ms": ms, "gbs": moved / ms / 1e6, "note": "" if correct else "WRONG"}


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, dynamic=False)


def _sweep(name, size, configs, launch, sets, expected, moved, rtol, peers) -> list[dict]:
    """tilec's rows, one tuner sweep (`tilec.tune.api.sweep_runner`: parallel compiles, each
    candidate checked against `expected` before `time_ms` times it), then the peers'."""
    from tilec.tune.api import sweep_runner

    def check(got: Any) -> bool:
        return _close(got, expected, rtol)

    wanted = {label: _decisions(*choice) for label, choice in configs.items()}
    result = sweep_runner(
        _kernel(name), launch, sets, [c for c in wanted.values() if c], right=check
    )
    rows = []
    for label, config in wanted.items():
        row = {"workload": name, "size": size, "config": label}
        ms, why = result.outcome(config, width=80)
        if ms is None:
            rows.append({**row, "ms": None, "note": why})
            continue
        rows.append({**row, "ms": ms, "gbs": moved / ms / 1e6, "note": ""})
    for peer, run in peers.items():
        rows.append(_row(name, size, peer, run, check, sets, moved))
    return rows


def swiglu_rows(m: int, n: int) -> list[dict]:
    import torch

    sets = _sets(
        lambda: (torch.randn(m, n, device="cuda").bfloat16(), torch.randn(m, n, device="cuda").bfloat16()),
        2 * m * n * 2,
    )  # fmt: skip
    a, b = sets[0]
    expected = (torch.nn.functional.silu(a.float()) * b.float()).bfloat16()
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    configs: dict[str, tuple[str, int | None]] = {"default": ("", None)}
    for elements in (4096, 8192, 16384):
        bm = 64 if elements == 4096 else 128
        while bm >= 1:
            bn = elements // bm
            if bn <= n:
                for warps in (4, 8, 16):
                    if elements // (32 * warps) >= 8:  # 16-byte runs for every thread
                        configs[f"{bm}x{bn} {warps}w"] = (f"BM={bm},BN={bn}", warps)
            bm //= 2

    def silu_mul(a: Any, b: Any) -> Any:
        return torch.nn.functional.silu(a) * b

    compiled = _compiled(silu_mul)
    peers = {"torch.compile": compiled, "eager": silu_mul}

    def launch(kernel):
        return lambda a, b: (kernel(a, b, y), y)[1]

    return _sweep("swiglu", f"{m}x{n} bf16", configs, launch, sets, expected, 3 * m * n * 2,
                  1.6e-2, peers)  # fmt: skip


def _row_configs(n: int, rows: tuple[int, ...]) -> dict[str, tuple[str, int | None]]:
    configs: dict[str, tuple[str, int | None]] = {"default": ("", None)}
    for bm in rows:
        for warps in (4, 8, 16):
            per_thread = bm * n // (32 * warps)
            if 8 <= per_thread <= 64:
                configs[f"{bm} rows {warps}w"] = (f"BM={bm}", warps)
    return configs


def softmax_f16_rows(m: int, n: int) -> list[dict]:
    import torch

    sets = _sets(lambda: ((torch.randn(m, n, device="cuda") * 4).half(),), m * n * 2)
    (x,) = sets[0]
    expected = torch.softmax(x.double(), dim=1).half()
    y = torch.empty(m, n, device="cuda", dtype=torch.float16)

    def reference(a: Any) -> Any:
        return torch.softmax(a.float(), dim=1).half()

    peers = {"torch.compile": _compiled(reference), "eager": lambda a: torch.softmax(a, dim=1)}
    return _sweep("softmax_f16", f"{m}x{n} f16", _row_configs(n, (1, 2, 4, 8)),
                  lambda k: lambda a: (k(a, y), y)[1], sets, expected, 2 * m * n * 2, 4e-3, peers)  # fmt: skip


def rmsnorm_rows(m: int, n: int) -> list[dict]:
    import torch

    eps = 1e-6
    w = torch.randn(n, device="cuda").bfloat16()
    sets = _sets(lambda: (torch.randn(m, n, device="cuda").bfloat16(),), m * n * 2)
    (x,) = sets[0]

    def reference(a: Any) -> Any:
        r = a.float()
        return (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * w.float()).bfloat16()

    expected = reference(x)
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    peers = {"torch.compile": _compiled(reference), "eager": reference}
    return _sweep("rmsnorm", f"{m}x{n} bf16", _row_configs(n, (1, 2, 4, 8)),
                  lambda k: lambda a: (k(a, w, y, eps), y)[1], sets, expected,
                  2 * m * n * 2, 1.6e-2, peers)  # fmt: skip


def layernorm_rows(m: int, n: int) -> list[dict]:
    import torch

    eps = 1e-5
    w = torch.randn(n, device="cuda").half()
    b = torch.randn(n, device="cuda").half()
    sets = _sets(lambda: (torch.randn(m, n, device="cuda").half(),), m * n * 2)
    (x,) = sets[0]

    def reference(a: Any) -> Any:
        return torch.nn.functional.layer_norm(a, (n,), w, b, eps)

    expected = reference(x)
    y = torch.empty(m, n, device="cuda", dtype=torch.float16)
    peers = {"torch.compile": _compiled(reference), "eager": reference}
    return _sweep("layernorm", f"{m}x{n} f16", _row_configs(n, (1, 2, 4, 8, 16)),
                  lambda k: lambda a: (k(a, w, b, y, eps), y)[1], sets, expected,
                  2 * m * n * 2, 4e-3, peers)  # fmt: skip


def cross_entropy_rows(m: int, v: int) -> list[dict]:
    import torch

    sets = _sets(
        lambda: (torch.randn(m, v, device="cuda") * 3, torch.randint(0, v, (m,), device="cuda", dtype=torch.int32)),
        m * v * 4,
    )  # fmt: skip
    x, t = sets[0]

    def reference(a: Any, t: Any) -> Any:
        return torch.nn.functional.cross_entropy(a, t.long(), reduction="none")

    expected = reference(x.double(), t).float()
    loss = torch.empty(m, device="cuda")
    configs: dict[str, tuple[str, int | None]] = {"default": ("", None)}
    for bm in (1, 2, 4, 8, 16):
        for bv in (512, 1024, 2048, 4096):
            for warps in (4, 8, 16):
                per_thread = bm * bv // (32 * warps)
                if 4 <= per_thread <= 64:
                    configs[f"{bm}x{bv} {warps}w"] = (f"BM={bm},BV={bv}", warps)
    peers = {"torch.compile": _compiled(reference), "eager": reference}
    return _sweep("cross_entropy", f"{m}x{v} f32", configs,
                  lambda k: lambda a, t: (k(a, t, loss), loss)[1], sets, expected,
                  m * v * 4 + m * 8, 1e-4, peers)  # fmt: skip


def copy_row() -> dict[str, Any]:
    import torch

    n = 1 << 28
    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    ms = time_ms(lambda s, d: d.copy_(s), [(src, dst), (dst, src)])
    return {"workload": "copy", "size": "1 GiB", "config": "torch", "ms": ms,
            "gbs": 2 * n * 4 / ms / 1e6, "note": ""}  # fmt: skip


PROBES: dict[str, Callable[[], list[dict]]] = {
    "swiglu": lambda: swiglu_rows(8192, 8192),
    "rows": lambda: (
        softmax_f16_rows(8192, 3077)
        + softmax_f16_rows(8192, 4096)
        + rmsnorm_rows(8192, 4096)
        + layernorm_rows(8192, 1024)
        + layernorm_rows(16384, 512)
    ),
    "cross_entropy": lambda: cross_entropy_rows(4096, 32000),
}


def table(rows: list[dict], ceiling: float) -> str:
    lines = [f"device copy: {ceiling:.0f} GB/s"]
    best: dict[tuple, float] = {}
    for r in rows:
        if r["config"] in ("torch.compile", "eager") and r.get("ms"):
            key = (r["workload"], r["size"])
            best[key] = min(best.get(key, float("inf")), r["ms"])
    lines.append(f"{'workload':<14} {'size':<18} {'config':<22} {'ms':>8} {'GB/s':>7} "
                 f"{'% copy':>7} {'/peer':>6}")  # fmt: skip
    for r in rows:
        if not r.get("ms"):
            lines.append(f"{r['workload']:<14} {r['size']:<18} {r['config']:<22} {r['note']}")
            continue
        peer = best.get((r["workload"], r["size"]), float("nan"))
        lines.append(
            f"{r['workload']:<14} {r['size']:<18} {r['config']:<22} {r['ms']:8.4f} "
            f"{r['gbs']:7.0f} {100 * r['gbs'] / ceiling:6.1f}% {r['ms'] / peer:6.3f} {r['note']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated: " + ", ".join(PROBES))
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(PROBES)
    copy = copy_row()
    rows = [copy]
    for name in chosen:
        rows += PROBES[name]()
        print(table(rows[1:], copy["gbs"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
