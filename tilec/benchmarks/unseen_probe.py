"""Kernels nobody here tuned, against what a user has: `torch.compile` and eager torch.

    python -m tilec.benchmarks.unseen_probe [--only l2norm,col_cumsum] [--json OUT]
        [--shape 30000,300 ...] [--config 'NAME={"tile.M": 256}' ...] [--compile-only]

The kernels of `unseen.tile` (beside this file) are of classes the suite's heuristics were not
written for -- a residual add fused with RMSNorm, an L2 normalisation of rows of odd widths, a
cumulative sum down columns, a two-pass log-softmax over a vocabulary of 50257, SiLU-and-multiply
on 3-D tiles, a masked mean over a sequence, a matrix-vector product, a maximum over a
sequence, a DiT's scale-and-shift modulation -- each at shapes no power of two divides. Each is
checked against torch first, then timed in interleaved rounds with its peers (the suite's clock,
`tilec.benchmarks.gpu.time_ms`, inputs rotated past the L2 cache), beside a 1 GiB copy of the
same run. One table: milliseconds, tilec over the best peer (a time ratio: above 1, tilec is
slower), tilec's bandwidth as a fraction of the copy's; with `--config`, tilec under each
configuration (the tuner's names, as `tilec.benchmarks.ab` takes them) over its heuristics'
time, each checked first; `--shape` times the `--only` kernels at other shapes. Needs a GPU,
but for `--compile-only`: each case (and configuration) compiled on the CPU as the jit would
compile it for its shape, with its decisions, ptxas's registers and spills, its shuffles and its
global accesses by width -- what can be read of a kernel before it is timed.

The cases are `CASES`: (name, kernel, shape, make, bytes moved, torch's expression, check).
`tests/unit/test_unseen_probe.py` runs every kernel in the interpreter against the same
expressions on small shapes, so the probe's kernels stay correct without a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CASES", "KERNELS", "Case", "compiled", "main"]

KERNELS = Path(__file__).resolve().parent / "unseen.tile"
ROUNDS = 3


@dataclass(frozen=True)
class Case:
    """One kernel at one shape: `inputs(shape, new)` makes its arguments with `new(shape,
    dtype, kind)` (kind "randn", "mask" or "empty"), in the kernel's order, outputs last;
    `outputs` how many of them are; `scalars` the trailing scalars of the call; `torch(*ins)`
    the expression a user would write (its results in the outputs' order); `moved` the bytes
    the kernel must read and write."""

    kernel: str
    shape: tuple[int, ...]
    inputs: Callable[[tuple, Callable], list]
    outputs: int
    torch: Callable[..., Any]
    moved: Callable[[tuple], int]
    scalars: tuple = ()
    rtol: float = 1e-2
    atol: float = 1e-2


def _add_rmsnorm(x: Any, r: Any, w: Any) -> tuple:
    t = x.float() + r.float()
    return t.to(x.dtype), (t * (t * t).mean(1, keepdim=True).add(1e-6).rsqrt() * w.float()).to(
        x.dtype
    )


def _l2norm(x: Any) -> Any:
    return x * ((x * x).sum(1, keepdim=True) + 1e-12).rsqrt()


def _col_cumsum(x: Any) -> Any:
    return x.cumsum(0)


def _log_softmax(x: Any) -> Any:
    return x.float().log_softmax(1).to(x.dtype)


def _silu_mul(a: Any, b: Any) -> Any:
    af = a.float()
    return (af * af.sigmoid() * b.float()).to(a.dtype)


def _masked_mean(x: Any, m: Any) -> Any:
    return (x * m[:, :, None]).sum(1) / m.sum(1, keepdim=True)


def _alike(dtype: str, ins: int, outs: int) -> Callable[[tuple, Callable], list]:
    """Inputs of `ins` random tensors of the kernel's shape, then `outs` outputs of it."""
    return lambda shape, new: (
        [new(shape, dtype, "randn") for _ in range(ins)]
        + [new(shape, dtype, "empty") for _ in range(outs)]
    )


def _add_rmsnorm_inputs(shape: tuple, new: Callable) -> list:
    x, r, s, y = _alike("bf16", 2, 2)(shape, new)
    return [x, r, new(shape[1:], "bf16", "randn"), s, y]


def _masked_mean_inputs(shape: tuple, new: Callable) -> list:
    return [
        new(shape, "f32", "randn"),
        new(shape[:2], "f32", "mask"),
        new((shape[0], shape[2]), "f32", "empty"),
    ]


def _gemv(x: Any, v: Any) -> Any:
    return (x.float() @ v.float()).to(x.dtype)


def _gemv_inputs(shape: tuple, new: Callable) -> list:
    return [
        new(shape, "f16", "randn"),
        new(shape[1:], "f16", "randn"),
        new(shape[:1], "f16", "empty"),
    ]


def _seq_max(x: Any) -> Any:
    return x.amax(1)


def _seq_max_inputs(shape: tuple, new: Callable) -> list:
    return [new(shape, "f32", "randn"), new((shape[0], shape[2]), "f32", "empty")]


def _modulate(x: Any, scale: Any, shift: Any) -> Any:
    return (x.float() * (1 + scale.float()[:, None, :]) + shift.float()[:, None, :]).to(x.dtype)


def _modulate_inputs(shape: tuple, new: Callable) -> list:
    rows = (shape[0], shape[2])
    return [
        new(shape, "bf16", "randn"),
        new(rows, "bf16", "randn"),
        new(rows, "bf16", "randn"),
        new(shape, "bf16", "empty"),
    ]


def _col_softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x, 0)


def _center_seq(x: Any) -> Any:
    return x - x.mean(1, keepdim=True)


def _col_norm(x: Any) -> tuple:
    mu = x.mean(0)
    r = ((x * x).mean(0) - mu * mu + 1e-5).rsqrt()
    return (x - mu) * r, mu, r


def _col_norm_inputs(shape: tuple, new: Callable) -> list:
    x, y = _alike("f32", 1, 1)(shape, new)
    return [x, y, new(shape[1:], "f32", "empty"), new(shape[1:], "f32", "empty")]


def _layernorm3(x: Any, w: Any, b: Any) -> Any:
    import torch

    return torch.nn.functional.layer_norm(x, x.shape[1:], w, b, 1e-5)


def _layernorm3_inputs(shape: tuple, new: Callable) -> list:
    x, y = _alike("f32", 1, 1)(shape, new)
    return [x, new(shape[1:], "f32", "randn"), new(shape[1:], "f32", "randn"), y]


def _tanh_gelu(x: Any) -> Any:
    import torch

    return torch.nn.functional.gelu(x, approximate="tanh")


def _axpby(x: Any, y: Any) -> Any:
    return 0.75 * x - 1.5 * y


def _cast_scale(x: Any) -> Any:
    import torch

    return (x.float() * 0.125).to(torch.float16)


def _cast_scale_inputs(shape: tuple, new: Callable) -> list:
    return [new(shape, "bf16", "randn"), new(shape, "f16", "empty")]


def _axpy_1d(x: Any, y: Any) -> Any:
    return (-2.0 * x.float() + y.float()).to(x.dtype)


def _bytes(tensors: int, size: int) -> Callable[[tuple], int]:
    """The bytes moved: `tensors` tensors of the kernel's shape, of `size`-byte elements."""
    return lambda shape: tensors * size * math.prod(shape)


# (kernel, shapes, inputs, outputs, torch's expression, bytes moved, options of `Case`)
_TABLE: list[tuple] = [
    ("add_rmsnorm", ((4096, 4096), (3000, 5120), (2048, 4000)), _add_rmsnorm_inputs, 2,
     _add_rmsnorm, _bytes(4, 2), {"scalars": (1e-6,), "rtol": 2e-2, "atol": 3e-2}),
    ("l2norm", ((8192, 777), (2000, 10000)), _alike("f32", 1, 1), 1, _l2norm, _bytes(2, 4),
     {"rtol": 1e-4, "atol": 1e-5}),
    ("col_cumsum", ((8192, 1000), (100000, 64)), _alike("f32", 1, 1), 1, _col_cumsum,
     _bytes(2, 4), {"rtol": 1e-3, "atol": 1e-2}),
    ("log_softmax", ((2048, 50257), (4096, 32000)), _alike("f16", 1, 1), 1, _log_softmax,
     _bytes(2, 2), {"atol": 2e-2}),
    ("silu_mul_3d", ((8, 1000, 1000), (32, 513, 768)), _alike("f16", 2, 1), 1, _silu_mul,
     _bytes(3, 2), {}),
    ("masked_mean", ((16, 1000, 768), (64, 333, 1024)), _masked_mean_inputs, 1, _masked_mean,
     _bytes(1, 4), {"rtol": 1e-3, "atol": 1e-4}),
    # the thirteenth session's: a matrix-vector product (a decode step's linear), the maximum
    # over a sequence, a DiT's adaptive-norm modulation (per-sample scale and shift rows)
    ("gemv", ((8192, 4097), (11008, 4096), (50000, 1000)), _gemv_inputs, 1, _gemv,
     lambda s: 2 * (s[0] * s[1] + s[0] + s[1]), {"rtol": 2e-2, "atol": 5e-2}),
    ("seq_max", ((16, 1000, 768), (4, 30011, 1000)), _seq_max_inputs, 1, _seq_max,
     lambda s: 4 * (s[0] * s[1] * s[2] + s[0] * s[2]), {"rtol": 0, "atol": 0}),
    ("modulate", ((8, 1024, 1152), (4, 4097, 3072)), _modulate_inputs, 1, _modulate,
     lambda s: 2 * (2 * s[0] * s[1] * s[2] + 2 * s[0] * s[2]), {"rtol": 2e-2, "atol": 2e-2}),
    # the fifteenth session's: a reduction over a long axis, then a loop applying it
    ("col_softmax", ((50000, 64), (4096, 1000)), _alike("f32", 1, 1), 1, _col_softmax,
     _bytes(2, 4), {"rtol": 1e-4, "atol": 1e-6}),
    ("center_seq", ((4, 8000, 100), (16, 1000, 768)), _alike("f32", 1, 1), 1, _center_seq,
     _bytes(2, 4), {"rtol": 1e-4, "atol": 1e-4}),
    ("col_norm", ((100000, 128), (30000, 300)), _col_norm_inputs, 3, _col_norm,
     _bytes(2, 4), {"rtol": 1e-3, "atol": 1e-3}),
    ("layernorm3", ((16, 500000), (4096, 8192)), _layernorm3_inputs, 1, _layernorm3,
     _bytes(2, 4), {"rtol": 1e-3, "atol": 1e-3}),
    ("tanh_gelu", ((8192, 8192), (3000, 7001)), _alike("bf16", 1, 1), 1, _tanh_gelu,
     _bytes(2, 2), {"rtol": 2e-2, "atol": 2e-2}),
    # the sixteenth session's: element-wise kernels `flatten` runs as one dimension, and a 1-D
    # one whose length no vector divides (its last run checked at run time)
    ("axpby", ((5003, 3001), (4096, 4096)), _alike("f32", 2, 1), 1, _axpby, _bytes(3, 4),
     {"scalars": (0.75, -1.5), "rtol": 1e-5, "atol": 1e-5}),
    ("cast_scale", ((7, 999, 1001), (64, 511, 130)), _cast_scale_inputs, 1, _cast_scale,
     _bytes(2, 2), {"scalars": (0.125,), "rtol": 1e-3, "atol": 1e-3}),
    ("axpy_1d", ((50_000_017,), (1_000_003,)), _alike("bf16", 2, 1), 1, _axpy_1d,
     _bytes(3, 2), {"scalars": (-2.0,), "rtol": 2e-2, "atol": 2e-2}),
]  # fmt: skip

CASES: list[Case] = [
    Case(kernel, shape, inputs, outputs, expression, moved, **options)
    for kernel, shapes, inputs, outputs, expression, moved, options in _TABLE
    for shape in shapes
]


def _torch_dtype(dtype: str) -> Any:
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]


def _torch_new(shape: tuple, dtype: str, kind: str) -> Any:
    import torch

    dt = _torch_dtype(dtype)
    if kind == "randn":
        return torch.randn(*shape, device="cuda", dtype=dt)
    if kind == "mask":  # about 70% ones, at least one a row
        mask = (torch.rand(*shape, device="cuda") > 0.3).to(dt)
        mask[..., 0] = 1
        return mask
    return torch.empty(*shape, device="cuda", dtype=dt)


PEERS = ("torch.compile", "torch eager")


def _call(kernel: Any, scalars: tuple, *tensors: Any) -> Any:
    return kernel(*tensors, *scalars)


def _measure(case: Case, copy_gbs: float, configs: dict[str, dict] | None = None) -> dict:
    """`case` timed against its peers in interleaved rounds, and under each of `configs`
    (name: a configuration of the tuner's names) beside the heuristics' own choice."""
    import torch

    from tilec.benchmarks.gpu import _sets, time_ms
    from tilec.jit import load_kernel
    from tilec.tune.space import split_config

    kernels = {"tilec": load_kernel(KERNELS, case.kernel)}
    for name, config in (configs or {}).items():
        options, pass_options = split_config(config)
        kernels[f"tilec {name}"] = load_kernel(
            KERNELS, case.kernel, **options, pass_options=pass_options
        )
    ins = len(case.inputs(case.shape, lambda *a: None)) - case.outputs
    compiled = torch.compile(case.torch)
    sets = _sets(lambda: case.inputs(case.shape, _torch_new), case.moved(case.shape))
    runs = {name: functools.partial(_call, k, case.scalars) for name, k in kernels.items()}
    runs["torch.compile"] = lambda *a: compiled(*a[:ins])
    runs["torch eager"] = lambda *a: case.torch(*a[:ins])
    first = sets[0]
    expected = case.torch(*first[:ins])
    expected = expected if isinstance(expected, tuple) else (expected,)
    right = {}
    for name, run in runs.items():  # each tilec kernel's outputs checked (the peers' are torch's)
        run(*first)
        torch.cuda.synchronize()
        right[name] = all(
            torch.allclose(got.float(), want.float(), rtol=case.rtol, atol=case.atol)
            for got, want in zip(first[ins:], expected)
        )
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            times[name].append(time_ms(run, sets))
    ms = {name: statistics.median(v) for name, v in times.items()}
    peer = min((ms[name], name) for name in PEERS)
    return {
        "kernel": case.kernel,
        "shape": list(case.shape),
        "ok": all(right[name] for name in kernels),
        "right": {name: right[name] for name in kernels},
        "ms": ms,
        "best_peer": peer[1],
        "ratio": ms["tilec"] / peer[0],
        "configs": {name: ms[f"tilec {name}"] / ms["tilec"] for name in configs or {}},
        "copy_fraction": case.moved(case.shape) / (ms["tilec"] * 1e-3) / 1e9 / copy_gbs,
    }


def _meta_new(shape: tuple, dtype: str, kind: str) -> Any:
    import torch

    return torch.empty(*shape, device="meta", dtype=_torch_dtype(dtype))


GLOBAL_ACCESS = re.compile(r"\b(ld|st)\.global(?:\.[a-z]+)*?(\.v[248])?\.[bfus](\d+)")


def compiled(case: Case, config: dict | None = None) -> dict[str, Any]:
    """`case` compiled on the CPU as `@tilec.jit` would compile it for its shape (arguments
    described by meta tensors: shapes, strides, dtypes, 16-byte aligned): the decisions, the
    PTX's global accesses by width (e.g. "ld.v4.32": 16 bytes), its shuffles and lines, and
    ptxas's registers and spilled bytes where ptxas is found."""
    from tilec.benchmarks.regret_replay import _described
    from tilec.jit import load_kernel
    from tilec.lowering.ptxas import PtxasError, assemble
    from tilec.tune.api import problem_for_call
    from tilec.tune.worker import build_candidate

    function = load_kernel(KERNELS, case.kernel)
    arguments = [*case.inputs(case.shape, _meta_new), *case.scalars]
    problem = problem_for_call(function, [_described(v) for v in arguments], arch="sm_90a")
    build = build_candidate(problem, dict(config or {}))
    ptx = build.ptx or ""
    accesses: dict[str, int] = {}
    for m in GLOBAL_ACCESS.finditer(ptx):
        key = f"{m.group(1)}{m.group(2) or ''}.{m.group(3)}"
        accesses[key] = accesses.get(key, 0) + 1
    row: dict[str, Any] = {
        "kernel": case.kernel,
        "shape": list(case.shape),
        "status": build.status,
        "reason": build.reason,
        "decisions": build.decisions,
        "accesses": accesses,
        "shuffles": ptx.count("shfl.sync"),
        "ptx_lines": ptx.count("\n"),
    }
    try:
        (resources,) = assemble(ptx, "sm_90a").values()
    except (PtxasError, ValueError):
        return row
    row["registers"] = resources.registers
    row["spilled_bytes"] = resources.spill_stores + resources.spill_loads
    return row


def _config(text: str) -> tuple[str, dict]:
    """`NAME=JSON` of `--config`: the name runs to the `=` before the JSON's `{` (so a name may
    hold one: `BM=128={"tile.M": 128}`)."""
    brace = text.find("{")
    cut = text.rfind("=", 0, brace) if brace > 0 else text.find("=")
    if cut <= 0:
        raise ValueError(f"{text!r} is not NAME=JSON")
    try:
        return text[:cut], json.loads(text[cut + 1 :])
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None


def _print_compiled(row: dict[str, Any]) -> None:
    shape = "x".join(map(str, row["shape"]))
    decided = ", ".join(f"{k}={v}" for k, v in row["decisions"].items())
    registers = (
        f"{row['registers']} registers, {row['spilled_bytes']} bytes spilled"
        if "registers" in row
        else "no ptxas"
    )
    accesses = " ".join(f"{k}:{n}" for k, n in sorted(row["accesses"].items()))
    print(
        f"{row['kernel']:12} {shape:>16} {row['config']}: {row['status']} {row['reason']}".rstrip()
    )
    print(f"    {decided}")
    print(f"    {registers}; {row['shuffles']} shuffles, {row['ptx_lines']} PTX lines; {accesses}")


def _copy_gbs() -> float:
    import torch

    from tilec.benchmarks.gpu import time_ms

    n = 1 << 28  # f32: 1 GiB read and 1 GiB written
    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    ms = statistics.median(
        time_ms(lambda s, d: d.copy_(s), [(src, dst), (dst, src)]) for _ in range(ROUNDS)
    )
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.unseen_probe")
    parser.add_argument("--only", help="comma-separated kernel names")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="D,D,...",
        help="time the --only kernels at this shape instead of their table's (repeatable)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="also time tilec under this configuration of the tuner's names, e.g. "
        "'BM=256={\"tile.M\": 256}' (repeatable; printed as its time over the heuristics')",
    )
    parser.add_argument(
        "--compile-only",
        action="store_true",
        help="no GPU: compile each case as the jit would and print its decisions, registers, "
        "shuffles and global accesses by width",
    )
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    cases = [c for c in CASES if wanted is None or c.kernel in wanted]
    if not cases:
        print(f"no case of {sorted(wanted or ())}; kernels: {sorted({c.kernel for c in CASES})}")
        return 1
    try:
        configs = dict(_config(c) for c in args.config)
        shapes = [tuple(int(d) for d in s.split(",")) for s in args.shape]
    except ValueError as e:
        parser.error(f"--config NAME=JSON, --shape D,D,...: {e}")
    if shapes:
        if wanted is None:
            parser.error("--shape needs --only: the shape is one kernel's")
        first = {c.kernel: c for c in cases}
        bad = [s for c in first.values() for s in shapes if len(s) != len(c.shape)]
        if bad:
            parser.error(f"--shape {bad[0]}: the kernels' shapes have other ranks")
        cases = [dataclasses.replace(c, shape=s) for c in first.values() for s in shapes]
    if args.compile_only:
        rows = []
        for case in cases:
            for name, config in [("heuristics", {}), *configs.items()]:
                rows.append({**compiled(case, config), "config": name})
                _print_compiled(rows[-1])
        if args.json:
            args.json.write_text(json.dumps({"compiled": rows}, indent=1, default=str) + "\n")
        return 0 if all(r["status"] == "built" and not r["reason"] for r in rows) else 1
    copy = _copy_gbs()
    print(f"copy {copy:.0f} GB/s (1 GiB, this run)")
    print(
        f"{'kernel':12} {'shape':>16} {'tilec':>8} {'compile':>8} {'eager':>8} {'t/best':>7} {'copy':>6}"
    )
    rows = []
    for case in cases:
        row = _measure(case, copy, configs)
        rows.append(row)
        ms = row["ms"]
        wrong = [n for n, right in row["right"].items() if not right]
        print(
            f"{case.kernel:12} {'x'.join(map(str, case.shape)):>16} {ms['tilec']:8.4f} "
            f"{ms['torch.compile']:8.4f} {ms['torch eager']:8.4f} {row['ratio']:7.3f} "
            f"{100 * row['copy_fraction']:5.1f}%"
            + "".join(f"  {n}: {r:.3f}" for n, r in row["configs"].items())
            + (f"  WRONG: {', '.join(wrong)}" if wrong else ""),
            flush=True,
        )
    ratios = [r["ratio"] for r in rows if r["ok"]]
    if ratios:
        mean = statistics.geometric_mean(ratios)
        worst = max(rows, key=lambda r: r["ratio"] if r["ok"] else 0)
        print(
            f"geomean tilec/best peer {mean:.3f} over {len(ratios)} rows (above 1 tilec is "
            f"slower); worst {worst['kernel']} {'x'.join(map(str, worst['shape']))} "
            f"{worst['ratio']:.3f}; ms: medians of {ROUNDS} interleaved rounds"
        )
    if args.json:
        args.json.write_text(json.dumps({"copy_gbs": copy, "rows": rows}, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
