"""Reductions written with atomics, at odd shapes, against torch: the kernels that
`accumulate-atomics` and `privatize-atomics` were not fitted to, each also as written (both
passes disabled).

    python -m tilec.benchmarks.atomic_probe [--json FILE]

Six kernels, each at sizes nobody tuned for: column sums into `out[tn]` (f32, and i32
counts), the i32 maximum of each row into `top[tm]` (the grid's second axis feeds the
atomics), the sum of squares of a vector into one element, and histograms (counts, and f32
weights: `privatize-atomics`), 5000 bins among them (more than `max_bins`: left as written). Each is compiled as
`@tilec.jit` compiles it, run from an initial `out` so that an atomic that adds twice shows,
checked against torch in f64, and timed with the benchmark's clock (`time_ms`: median of
CUDA-event runs, inputs rotated past the L2 cache); torch's reduction and `torch.compile` of
it are timed with the same function in the same run. One table: microseconds, and tilec's
time over the best peer's. Needs a GPU; about a minute on an H200.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["KERNELS", "main"]

KERNELS = """
def col_sum_atomic(x: f32[M, N], out: f32[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0))


def col_count(x: i32[M, N], out: i32[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0))


def row_top(x: i32[M, N], out: i32[M]):
    for tm, tn in tiles(M, N):
        atomic_max(out[tm], max(x[tm, tn], axis=1))


def total(x: f32[N], out: f32[1]):
    for tn in tiles(N):
        atomic_add(out[0], sum(x[tn] * x[tn]))


def histogram(values: i32[N], counts: i32[B]):
    for tn in tiles(N):
        atomic_add(counts[values[tn]], 1)


def weighted(bins: i32[N], w: f32[N], sums: f32[B]):
    for tn in tiles(N):
        atomic_add(sums[bins[tn]], w[tn])
"""


def _cases() -> list[tuple[str, str, tuple, Callable, Callable, Callable]]:
    """(label, kernel, size, make inputs, initial out, reference) per row."""
    import torch

    def rand(shape: tuple) -> Any:
        return torch.rand(shape, device="cuda")

    def ints(shape: tuple, high: int) -> Any:
        return torch.randint(-high, high, shape, device="cuda", dtype=torch.int32)

    cases = []
    for m, n in [(262144, 512), (100003, 300), (65536, 128), (5000, 37)]:
        cases.append(
            ("column sums f32", "col_sum_atomic", (m, n), lambda s=(m, n): rand(s),
             lambda x: torch.full((x.shape[1],), 0.5, device="cuda"),
             lambda x: x.sum(0))
        )  # fmt: skip
    cases.append(
        ("column counts i32", "col_count", (131071, 129), lambda: ints((131071, 129), 100),
         lambda x: torch.full((x.shape[1],), 3, device="cuda", dtype=torch.int32),
         lambda x: x.sum(0, dtype=torch.int32))
    )  # fmt: skip
    for m, n in [(4099, 50001), (333, 1000003)]:
        cases.append(
            ("row maxima i32", "row_top", (m, n), lambda s=(m, n): ints(s, 10**9),
             lambda x: torch.full((x.shape[0],), -(2**31), device="cuda", dtype=torch.int32),
             lambda x: x.amax(1))
        )  # fmt: skip
    for n in [2**27 + 3, 1000003]:
        cases.append(
            ("sum of squares f32", "total", (n,), lambda n=n: torch.randn(n, device="cuda"),
             lambda x: torch.zeros(1, device="cuda"),
             lambda x: (x * x).sum())
        )  # fmt: skip
    for n, bins in [(2**26, 256), (10**7 + 7, 1000), (3 * 10**6, 5000)]:
        cases.append(
            ("histogram i32", "histogram", (n, bins),
             lambda n=n, b=bins: torch.randint(0, b, (n,), device="cuda", dtype=torch.int32),
             lambda x, b=bins: torch.zeros(b, device="cuda", dtype=torch.int32),
             lambda x, b=bins: torch.bincount(x, minlength=b).int())
        )  # fmt: skip
    n, bins = 2**24 + 1, 100
    cases.append(
        ("weighted histogram", "weighted", (n, bins),
         lambda: (torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32),
                  torch.rand(n, device="cuda")),
         lambda x: torch.zeros(bins, device="cuda"),
         lambda x: torch.bincount(x[0], weights=x[1], minlength=bins).float())
    )  # fmt: skip
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.atomic_probe")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    import torch

    from tilec.benchmarks.gpu import _sets, time_ms
    from tilec.jit import load_kernel

    if not torch.cuda.is_available():
        print("atomic_probe: no CUDA GPU", file=sys.stderr)
        return 1
    source = Path(tempfile.mkdtemp()) / "atomic_probe.tile"
    source.write_text(KERNELS)
    rows, failed = [], False
    print(f"{'kernel':20s} {'size':>16s} {'tilec':>9s} {'as written':>11s} {'torch':>9s} "
          f"{'compile':>9s} {'ratio':>6s}")  # fmt: skip
    for label, name, size, make, initial, reference in _cases():
        sets = _sets(lambda make=make: (make(),), 4 * _elements(size))
        row: dict[str, Any] = {"kernel": label, "size": "x".join(map(str, size))}
        written = ("privatize-atomics", "accumulate-atomics")
        for key, disable in (("tilec", ()), ("as_written", written)):
            kernel = load_kernel(source, name, disable=disable)
            x = sets[0][0]
            inputs = x if isinstance(x, tuple) else (x,)
            start = initial(x)
            out = start.clone()
            kernel(*inputs, out)
            expected = _expected(name, reference, x, start)
            ok = _matches(out, expected)
            failed |= not ok

            def run(x: Any, kernel: Any = kernel, start: Any = start, out: Any = out) -> None:
                out.copy_(start)
                kernel(*(x if isinstance(x, tuple) else (x,)), out)

            row[key] = time_ms(run, sets) * 1e3
            row[key + "_ok"] = ok
        compiled = torch.compile(reference)
        row["torch"] = time_ms(reference, sets) * 1e3
        row["compile"] = time_ms(compiled, sets) * 1e3
        row["ratio"] = row["tilec"] / min(row["torch"], row["compile"])
        rows.append(row)
        marks = "" if row["tilec_ok"] and row["as_written_ok"] else "  WRONG"
        print(f"{label:20s} {row['size']:>16s} {row['tilec']:9.1f} {row['as_written']:11.1f} "
              f"{row['torch']:9.1f} {row['compile']:9.1f} {row['ratio']:6.2f}{marks}",
              flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))
    return 1 if failed else 0


def _expected(name: str, reference: Callable, x: Any, start: Any) -> Any:
    """The reference result from `start`, in f64 (or i64)."""
    import torch

    if name in ("histogram", "weighted"):
        return reference(x).double() + start.double()
    wide = reference(x.double() if x.is_floating_point() else x.long())
    return torch.maximum(wide, start.long()) if name == "row_top" else wide + start


def _elements(size: tuple) -> int:
    n = 1
    for d in size:
        n *= d
    return n


def _matches(got: Any, expected: Any) -> bool:
    if not got.is_floating_point():
        return bool((got.long() == expected.long()).all())
    scale = float(expected.abs().max()) or 1.0
    return bool(((got.double() - expected).abs() <= 1e-4 * scale + 1e-3).all())


if __name__ == "__main__":
    sys.exit(main())
