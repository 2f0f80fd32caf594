"""Row-wise kernels (softmax, layernorm) under several block shapes, against torch and Triton.

    python -m tilec.benchmarks.rowwise_probe [--only softmax|layernorm]

For each size of the GPU benchmark (`tilec.benchmarks.gpu`), tilec's kernel is swept as a
tuner search (`tilec.tune.api.sweep_runner`) over the default choices and each configuration
below (pass options of `tiling` and `assign-layouts`): compiled as `@tilec.jit` compiles it,
checked against torch, and timed with the benchmark's clock (`time_ms`: median of CUDA-event
runs, inputs rotated past the L2 cache); the peers are timed with the same function. One
table: milliseconds, GB/s, the percentage of a device-to-device copy measured in the same
run, and the time over Triton's. Needs a GPU; about a minute on an H200.

Configurations: "default" (what the pipeline chooses), "c2b80c4" (two rows per block on a warp
per 1024 elements: the choice before one-row blocks), and one row per block on 4, 8 and 16
warps (those that give each thread 16-byte runs and at most 64 elements). For softmax also
"e / sum": the example with a division per element (correctly rounded) instead of its product
with the row's reciprocal, at the default choices.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from tilec.benchmarks.gpu import (
    EXAMPLES,
    _close,
    _sets,
    load_triton_references,
    time_ms,
)

__all__ = ["main"]

SOFTMAX_SIZES = [(8192, 4096), (4096, 16384), (32768, 1024)]
LAYERNORM_SIZES = [(8192, 8192), (8192, 1024)]


def configurations(n: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Pass options by name, for rows of `n` elements."""
    configs: dict[str, dict[str, dict[str, Any]]] = {"default": {}}
    if n >= 4096:  # what c2b80c4 chose: 2 rows, a warp per 1024 elements (4 to 16)
        old_warps = min(max(2 * n // 1024, 4), 16)
        configs[f"c2b80c4: 2 rows, {old_warps} warps"] = {
            "tiling": {"tiles": "BM=2"},
            "assign-layouts": {"num_warps": old_warps},
        }
    for warps in (4, 8, 16, 32):
        if n // (32 * warps) <= 64 and n >= 32 * warps * 4:  # no spills, 16-byte runs
            configs[f"1 row, {warps} warps"] = {
                "tiling": {"tiles": "BM=1"},
                "assign-layouts": {"num_warps": warps},
            }
    if n <= 1024:  # the tiling's 4 rows of 1024, on each warp count
        for warps in (4, 8, 16):
            configs[f"4 rows, {warps} warps"] = {
                "tiling": {"tiles": "BM=4"},
                "assign-layouts": {"num_warps": warps},
            }
    return configs


TRITON_WARPS = (8, 16)  # besides Triton's default, 4


def _tilec_rows(
    workload: str,
    size: str,
    configs: dict[str, dict[str, dict[str, Any]]],
    make: Callable[[Any], Callable[..., Any]],
    check: Callable[[Any], bool],
    sets: list,
    moved: int,
) -> list[tuple]:
    """tilec's rows: `examples/WORKLOAD.tile` under each configuration (pass options), as a
    tuner sweep (`tilec.tune.api.sweep_runner`: parallel compiles, each checked, then timed
    with `time_ms` on `sets`); a wrong configuration is reported and not timed."""
    from tilec.jit import load_kernel
    from tilec.tune.api import sweep_runner

    decisions = {
        label: {f"{p}.{o}": v for p, values in options.items() for o, v in values.items()}
        for label, options in configs.items()
    }
    function = load_kernel(EXAMPLES / f"{workload}.tile", workload)
    result = sweep_runner(function, make, sets, list(decisions.values()), right=check)
    rows = []
    for label, config in decisions.items():
        ms, why = result.outcome(config)
        if ms is None:
            rows.append((workload, size, label, None, None, why))
            continue
        rows.append((workload, size, label, ms, moved / ms / 1e6, ""))
    return rows


RECIPROCAL = "e * (1.0 / sum(e, axis=1, keepdims=True))"


def _divided_softmax() -> Any:
    """examples/softmax.tile with `e / sum(...)`: one correctly rounded division per element."""
    import tempfile
    from pathlib import Path

    from tilec.jit import load_kernel

    source = (EXAMPLES / "softmax.tile").read_text()
    if RECIPROCAL not in source:
        raise RuntimeError(f"examples/softmax.tile no longer has {RECIPROCAL!r}")
    path = Path(tempfile.mkdtemp(prefix="tilec-rowwise-")) / "softmax.tile"
    path.write_text(source.replace(RECIPROCAL, "e / sum(e, axis=1, keepdims=True)"))
    return load_kernel(path, "softmax")


def _row(workload: str, size: str, config: str, run: Callable[..., Any], check, sets, moved):
    try:
        correct = check(run(*sets[0]))
        ms = time_ms(run, sets)
    except Exception as e:  # one failing configuration does not hide the others
        return (workload, size, config, None, None, f"failed: {str(e).splitlines()[0][:60]}")
    return (workload, size, config, ms, moved / ms / 1e6, "" if correct else "WRONG")


def softmax_rows(m: int, n: int, triton: Any) -> list[tuple]:
    import torch

    sets = _sets(lambda: (torch.randn(m, n, device="cuda") * 4,), m * n * 4)
    (x,) = sets[0]
    expected = torch.softmax(x.double(), dim=1).float()
    y = torch.empty(m, n, device="cuda")
    size, moved = f"{m}x{n} f32", 2 * m * n * 4

    def check(got: Any) -> bool:
        return _close(y if got is None else got, expected, 1e-5)

    def make(kernel: Any) -> Callable[..., Any]:
        return lambda a: kernel(a, y)

    rows = _tilec_rows("softmax", size, configurations(n), make, check, sets, moved)
    divided = _divided_softmax()
    run = lambda a: divided(a, y)  # noqa: E731
    rows.append(_row("softmax", size, "e / sum", run, check, sets, moved))
    rows.append(
        _row("softmax", size, "torch", lambda a: torch.softmax(a, dim=1), check, sets, moved)
    )
    if triton is not None:
        rows.append(_row("softmax", size, "triton", triton.softmax, check, sets, moved))
        for warps in TRITON_WARPS:
            run = lambda a, warps=warps: triton.softmax(a, num_warps=warps)  # noqa: E731
            rows.append(_row("softmax", size, f"triton, {warps} warps", run, check, sets, moved))
    return rows


def layernorm_rows(m: int, n: int, triton: Any) -> list[tuple]:
    import torch

    eps = 1e-5
    w = torch.randn(n, device="cuda").half()
    b = torch.randn(n, device="cuda").half()
    sets = _sets(lambda: (torch.randn(m, n, device="cuda").half(),), m * n * 2)
    (x,) = sets[0]
    expected = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
    expected = expected.half()
    y = torch.empty(m, n, device="cuda", dtype=torch.float16)
    size, moved = f"{m}x{n} f16", 2 * m * n * 2 + 2 * n * 2

    def check(got: Any) -> bool:
        return _close(y if got is None else got, expected, 4e-3)

    def make(kernel: Any) -> Callable[..., Any]:
        return lambda a: kernel(a, w, b, y, eps)

    rows = _tilec_rows("layernorm", size, configurations(n), make, check, sets, moved)

    def reference(a: Any) -> Any:
        return torch.nn.functional.layer_norm(a, (n,), w, b, eps)

    rows.append(_row("layernorm", size, "torch", reference, check, sets, moved))
    if triton is not None:
        run = lambda a: triton.layernorm(a, w, b, eps)  # noqa: E731
        rows.append(_row("layernorm", size, "triton", run, check, sets, moved))
        for warps in TRITON_WARPS:
            run = lambda a, warps=warps: triton.layernorm(a, w, b, eps, num_warps=warps)  # noqa: E731
            config = f"triton, {warps} warps"
            rows.append(_row("layernorm", size, config, run, check, sets, moved))
    return rows


def other_rows(workload: str, triton: Any) -> list[tuple]:
    """Kernels whose automatic warps the occupancy model sets too: the default, and each of
    4, 8 and 16 warps."""
    import torch

    if workload == "row_sum":
        m, n = 8192, 4096
        sets = _sets(lambda: (torch.randn(m, n, device="cuda"),), m * n * 4)
        out = torch.empty(m, device="cuda")
        size, moved = f"{m}x{n} f32", m * n * 4 + m * 4
        expected = sets[0][0].double().sum(1).float()
        rtol = 1e-5
    else:
        m = n = 8192
        sets = _sets(lambda: (torch.randn(m, n, device="cuda"),), m * n * 4)
        out = torch.empty(n, m, device="cuda")
        size, moved = f"{m}x{n} f32", 2 * m * n * 4
        expected = sets[0][0].T.contiguous()
        rtol = 0.0

    def check(got: Any) -> bool:
        return _close(out if got is None else got, expected, rtol)

    configs: dict[str, dict[str, dict[str, Any]]] = {"default": {}}
    for warps in (4, 8, 16):
        configs[f"{warps} warps"] = {"assign-layouts": {"num_warps": warps}}

    def make(kernel: Any) -> Callable[..., Any]:
        return lambda a: kernel(a, out)

    rows = _tilec_rows(workload, size, configs, make, check, sets, moved)
    if workload == "row_sum":
        rows.append(_row(workload, size, "torch", lambda a: a.sum(1), check, sets, moved))
    else:
        reference = lambda a: out.copy_(a.T)  # noqa: E731
        rows.append(_row(workload, size, "torch", reference, check, sets, moved))
    return rows


def copy_rate() -> float:
    """GB/s of a 1 GiB device-to-device copy (read + write counted), the ceiling."""
    import torch

    n = 1 << 28
    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    ms = time_ms(lambda s, d: d.copy_(s), [(src, dst), (dst, src)])
    return 2 * n * 4 / ms / 1e6


def render(rows: list[tuple], ceiling: float) -> str:
    triton = {(w, s): ms for w, s, c, ms, _, _ in rows if c == "triton" and ms}
    lines = [
        f"copy ceiling: {ceiling:.0f} GB/s",
        f"{'workload':<10} {'size':<16} {'configuration':<26} {'ms':>8} {'GB/s':>7} "
        f"{'% copy':>7} {'/ Triton':>8}  note",
    ]
    for workload, size, config, ms, rate, note in rows:
        if ms is None:
            lines.append(f"{workload:<10} {size:<16} {config:<26} {'-':>8}  {note}")
            continue
        over = ms / triton[(workload, size)] if (workload, size) in triton else float("nan")
        lines.append(
            f"{workload:<10} {size:<16} {config:<26} {ms:>8.4f} {rate:>7.0f} "
            f"{100 * rate / ceiling:>6.1f}% {over:>8.2f}  {note}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=("softmax", "layernorm", "row_sum", "transpose"), default=None
    )
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("rowwise_probe: no CUDA device", file=sys.stderr)
        return 1
    triton = load_triton_references()
    ceiling = copy_rate()
    rows: list[tuple] = []
    if args.only in (None, "softmax"):
        for m, n in SOFTMAX_SIZES:
            rows += softmax_rows(m, n, triton)
    if args.only in (None, "layernorm"):
        for m, n in LAYERNORM_SIZES:
            rows += layernorm_rows(m, n, triton)
    for workload in ("row_sum", "transpose"):
        if args.only in (None, workload):
            rows += other_rows(workload, triton)
    print(render(rows, ceiling))
    return 0


if __name__ == "__main__":
    sys.exit(main())
