"""8-bit GEMMs nobody tuned, at odd shapes, against what a PyTorch user writes for them, in the
same run: kernels the 8-bit wgmma tiling was not fitted to.

    python -m tilec.benchmarks.eight_bit_probe [--json FILE]

Three kernels as a user would write them, weights stored [N, K] as nn.Linear keeps them:

* an fp8 linear layer with row-wise scales, a bias and a ReLU in the epilogue, f16 out (torch:
  `torch._scaled_mm` with the scales, then the bias and the ReLU), M = 777;
* an int8 linear layer whose K of 1000 bytes is no multiple of 16 (torch: `torch._int_mm` on
  the weight's column-major view, its fast layout, then the scales);
* an fp8 GEMM into f32 with M = 2000 (torch: `torch._scaled_mm` into f32, unit scales).

Each is checked against float64 torch (the largest error over the largest output) and timed
with the benchmark's clock (`time_ms`: median of CUDA-event runs, inputs rotated past the L2
cache); torch's expression eagerly and through `torch.compile`, in the same run. One table:
microseconds, and tilec's time over the faster torch's. Needs a GPU; under a minute on an H200.
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
def fp8_linear_relu(x: f8e4m3[M, K], w: f8e4m3[N, K], xs: f32[M], ws: f32[N], bias: f32[N],
                    y: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += x[tm, tk] @ w[tn, tk].T
        y[tm, tn] = maximum(acc * xs[tm][:, None] * ws[tn][None, :] + bias[tn][None, :], 0.0)


def int8_linear(x: i8[M, K], w: i8[N, K], xs: f32[M], ws: f32[N], y: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], i32)
        for tk in tiles(K):
            acc += x[tm, tk] @ w[tn, tk].T
        y[tm, tn] = acc.to(f32) * xs[tm][:, None] * ws[tn][None, :]


def fp8_f32(x: f8e4m3[M, K], w: f8e4m3[N, K], y: f32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += x[tm, tk] @ w[tn, tk].T
        y[tm, tn] = acc
"""


def _cases() -> list[tuple[str, str, tuple, Any, Any, Any]]:
    """(label, kernel, size, make inputs, torch expression, float64 reference)."""
    import torch

    e4m3 = torch.float8_e4m3fn

    def f8(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda").to(e4m3)

    def i8(*shape: int) -> Any:
        return torch.randint(-128, 128, shape, device="cuda", dtype=torch.int8)

    def scales(n: int) -> Any:
        return torch.rand(n, device="cuda") + 0.5

    def fp8_linear_relu(m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        def make() -> tuple:
            return f8(m, k), f8(n, k), scales(m), scales(n), torch.randn(n, device="cuda")

        def expression(x, w, xs, ws, bias):
            y = torch._scaled_mm(
                x, w.t(), scale_a=xs[:, None], scale_b=ws[None, :], out_dtype=torch.bfloat16
            )
            return torch.relu(y.float() + bias).half()

        def reference(x, w, xs, ws, bias):
            y = (x.double() @ w.double().T) * xs.double()[:, None] * ws.double()[None, :]
            return torch.relu(y + bias.double())

        return make, expression, reference

    def int8_linear(m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        def make() -> tuple:
            return i8(m, k), i8(n, k), scales(m) * 1e-3, scales(n) * 1e-3

        def expression(x, w, xs, ws):
            return (torch._int_mm(x, w.t()).float() * xs[:, None] * ws[None, :]).half()

        def reference(x, w, xs, ws):
            y = x.double() @ w.double().T
            return y * xs.double()[:, None] * ws.double()[None, :]

        return make, expression, reference

    def fp8_f32(m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        one = torch.ones((), device="cuda")

        def make() -> tuple:
            return f8(m, k), f8(n, k)

        def expression(x, w):
            return torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)

        def reference(x, w):
            return x.double() @ w.double().T

        return make, expression, reference

    return [
        ("fp8 linear+bias+relu", "fp8_linear_relu", (777, 4096, 1024), *fp8_linear_relu(777, 4096, 1024)),
        ("int8 linear K=1000", "int8_linear", (3000, 4096, 1000), *int8_linear(3000, 4096, 1000)),
        ("fp8 -> f32", "fp8_f32", (2000, 2048, 4096), *fp8_f32(2000, 2048, 4096)),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.eight_bit_probe")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    import torch

    from tilec.benchmarks.gpu import _sets, time_ms
    from tilec.jit import load_kernel

    if not torch.cuda.is_available():
        print("eight_bit_probe: no CUDA GPU", file=sys.stderr)
        return 1
    source = Path(tempfile.mkdtemp()) / "eight_bit_probe.tile"
    source.write_text(KERNELS)
    rows, failed = [], False
    print(f"{'kernel':22s} {'size':>16s} {'tilec':>8s} {'torch':>8s} {'compile':>8s} "
          f"{'error':>9s} {'tilec/torch':>11s}  instruction")  # fmt: skip
    for label, name, size, make, expression, reference in _cases():
        sets = _sets(lambda make=make: make(), sum(t.numel() * t.element_size() for t in make()))
        inputs = sets[0]
        expected = reference(*inputs)
        out = torch.full(
            expected.shape, float("nan"), device="cuda", dtype=expression(*inputs).dtype
        )
        kernel = load_kernel(source, name)
        kernel(*inputs, out)
        error = float((out.double() - expected).abs().max() / expected.abs().max())
        ok = error < 1e-2
        failed |= not ok
        ptx = kernel.compile_for(*inputs, out).ptx
        instruction = next(
            (
                i
                for i in ("k32.f32.e4m3.e4m3", "k32.s32.s8.s8", "k16.f32.f16.f16", "m16n8k32")
                if i in ptx
            ),
            "?",
        )

        def run(*x: Any, kernel: Any = kernel, out: Any = out) -> None:
            kernel(*x, out)

        row: dict[str, Any] = {"kernel": label, "size": "x".join(map(str, size)), "error": error}
        row["tilec"] = time_ms(run, sets) * 1e3
        row["torch"] = time_ms(expression, sets) * 1e3
        try:
            compiled = torch.compile(expression, fullgraph=True, dynamic=False)
            compiled(*inputs)
            row["compile"] = time_ms(compiled, sets) * 1e3
        except Exception as e:  # the row says so; eager torch is still a peer
            row["compile"] = float("nan")
            row["compile_error"] = f"{type(e).__name__}: {str(e)[:120]}"
        best = min(t for t in (row["torch"], row["compile"]) if t == t)
        row["ratio"] = row["tilec"] / best
        row["instruction"] = instruction
        row["ok"] = ok
        rows.append(row)
        print(f"{label:22s} {row['size']:>16s} {row['tilec']:8.1f} {row['torch']:8.1f} "
              f"{row['compile']:8.1f} {error:9.2e} {row['ratio']:11.2f}  {instruction}"
              f"{'' if ok else '  WRONG'}", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
