"""Train the LLaMA-style decoder of examples/torch/model.py with every op a tilec operator, and
the same model in eager PyTorch beside it: the same init, the same synthetic data, the same
optimizer, the losses compared step for step; then tokens/s of tilec, eager PyTorch and
`torch.compile` of the pure-PyTorch model, and the graph breaks `torch._dynamo.explain` finds
in the tilec model (what `torch.compile(fullgraph=True)` would refuse).

    python -m examples.torch.train --steps 3 --device cpu          # tiny, in the interpreter
    python -m examples.torch.train --steps 200 --device cuda        # H200 size, f32
    python -m examples.torch.train --steps 200 --device cuda --dtype bf16

`--dtype` is the parameters' and activations' dtype (the optimizer steps the parameters in
it, as pure-bf16 training does). In f32 on the CPU the losses agree to f32 rounding; on the
GPU the kernels and cuBLAS/SDPA order their sums differently (and torch may use TF32 if
allowed: it is switched off here), so they agree to a looser tolerance that grows with the
steps; in bf16 to bf16's (each side rounds its activations and gradients, and the embedding's
gradient sums repeated ids by bf16 atomic adds in tilec, in f32 in torch).
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import torch

from examples.torch import ops, reference
from examples.torch.model import Config, Decoder

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

CONFIGS = {
    # A few seconds a step in the reference interpreter.
    "tiny": Config(vocab=32, dim=16, layers=1, heads=2, hidden=24, seq=8, batch=1),
    # For the GPU test: a few hundred steps in seconds.
    "small": Config(vocab=1024, dim=256, layers=2, heads=4, hidden=688, seq=128, batch=4),
    # A few million parameters: large enough to time on an H200, small enough for a test. A
    # step is a few hundred small kernels: it measures the host's work per op as much as them.
    "h200": Config(vocab=4096, dim=512, layers=4, heads=8, hidden=1376, seq=256, batch=8),
    # ~0.4 B parameters, 4096 tokens a step: the GPU's work, not the host's, sets the pace.
    "h200-large": Config(vocab=32000, dim=2048, layers=4, heads=16, hidden=5632, seq=1024, batch=4),
}


def synthetic_batch(config: Config, step: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens whose next token is a fixed function of the current one, so the loss falls."""
    generator = torch.Generator().manual_seed(1000 + step)
    ids = torch.randint(0, config.vocab, (config.batch, config.seq), generator=generator)
    targets = (ids * 7 + 3) % config.vocab
    return ids.to(device, torch.int32), targets.to(device, torch.int32)


def train(
    model: Decoder, loss_of: Callable, steps: int, device: str, lr: float
) -> tuple[list[float], float]:
    """The loss of each step and the seconds the steps took (after the first)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=False)
    losses: list[float] = []
    start = 0.0
    for step in range(steps):
        if step == 1:  # the first step compiles
            _synchronize(device)
            start = time.perf_counter()
        ids, targets = synthetic_batch(model.config, step, device)
        loss = loss_of(model, ids, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    _synchronize(device)
    return losses, (time.perf_counter() - start if steps > 1 else float("nan"))


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def profile_steps(name: str, model: Decoder, loss_of: Callable, steps: int, lr: float) -> dict:
    """Where a step's time goes: the GPU's busy time against the wall time of `steps` steps
    (a step whose GPU time is far below its wall time waits on the host's launches), and the
    ten kernels taking the most GPU time, printed and returned."""
    from torch.profiler import ProfilerActivity, profile

    train(model, loss_of, 2, "cuda", lr)  # warm: compiled, allocated
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        train(model, loss_of, steps, "cuda", lr)
        wall = time.perf_counter() - start
    kernels = [
        e for e in prof.key_averages() if e.device_time_total > 0 and e.device_type.name == "CUDA"
    ]
    kernels.sort(key=lambda e: -e.device_time_total)
    busy = sum(e.device_time_total for e in kernels) / 1e3 / steps  # ms a step
    top = [
        {"kernel": e.key[:70], "calls": e.count // steps, "ms": e.device_time_total / 1e3 / steps}
        for e in kernels[:10]
    ]
    print(f"profile {name}: {wall / steps * 1e3:.2f} ms a step (wall), GPU busy {busy:.2f} ms")
    for row in top:
        print(f"  {row['ms']:8.3f} ms {row['calls']:4d}x  {row['kernel']}")
    return {"wall_ms": wall / steps * 1e3, "gpu_ms": busy, "top": top}


def tilec_loss(model, ids, targets):
    return model.loss(ops, ids, targets)


def torch_loss(model, ids, targets):
    return model.loss(reference, ids, targets)


def graph_breaks(model: Decoder, device: str) -> int:
    """The graph breaks Dynamo finds in the tilec model's loss and backward-free forward."""
    ids, targets = synthetic_batch(model.config, 0, device)
    explained = torch._dynamo.explain(tilec_loss)(model, ids, targets)
    for reason in explained.break_reasons:
        print(f"  graph break: {reason.reason}")
    return explained.graph_break_count


def _compile_options(args: argparse.Namespace, on_cuda: bool) -> dict:
    """torch.compile's backend (Inductor on CUDA, aot_eager on the CPU) and mode."""
    if not on_cuda:
        return {"backend": "aot_eager"}
    return {"backend": "inductor", "mode": args.compile_mode}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--config",
        choices=sorted(CONFIGS),
        default=None,
        help="model size (default: tiny on the CPU, h200 on CUDA)",
    )
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument(
        "--dtype",
        choices=sorted(DTYPES),
        default="f32",
        help="the parameters' and activations' dtype (default f32)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time torch.compile of the PyTorch model (default: on CUDA)",
    )
    parser.add_argument("--json", help="write the result (losses, tokens/s) here too")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after training, profile N more steps of the tilec and the eager model (CUDA): "
        "GPU time per step against wall time, and the kernels that take the most",
    )
    parser.add_argument(
        "--compile-tilec",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time torch.compile of the tilec model: its ops in one graph, the glue "
        "fused by Inductor (default: on CUDA)",
    )
    parser.add_argument(
        "--compile-mode",
        choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs"),
        default="default",
        help="torch.compile's mode for both compiled runs (reduce-overhead: CUDA graphs, "
        "which take the host's launches out of the step)",
    )
    parser.add_argument(
        "--explain",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count the tilec model's graph breaks with torch._dynamo.explain",
    )
    args = parser.parse_args(argv)
    on_cuda = args.device.startswith("cuda")
    config = CONFIGS[args.config or ("h200" if on_cuda else "tiny")]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    torch.manual_seed(args.seed)
    model = Decoder(config).to(args.device, DTYPES[args.dtype])
    eager = copy.deepcopy(model)
    init = copy.deepcopy(model)  # the compiled runs start from the same weights
    tokens = config.batch * config.seq * max(args.steps - 1, 1)

    tilec_losses, tilec_seconds = train(model, tilec_loss, args.steps, args.device, args.lr)
    eager_losses, eager_seconds = train(eager, torch_loss, args.steps, args.device, args.lr)
    print(f"{'step':>4} {'tilec':>12} {'eager':>12} {'difference':>11}")
    for step, (a, b) in enumerate(zip(tilec_losses, eager_losses)):
        print(f"{step:>4} {a:>12.6f} {b:>12.6f} {abs(a - b):>11.2e}")
    worst = max(abs(a - b) for a, b in zip(tilec_losses, eager_losses))
    result = {
        "dtype": args.dtype,
        "compile_mode": args.compile_mode,
        "config": args.config or ("h200" if on_cuda else "tiny"),
        "tilec_losses": tilec_losses,
        "eager_losses": eager_losses,
        "largest_difference": worst,
        "tokens_per_second": {
            "tilec": tokens / tilec_seconds,
            "eager": tokens / eager_seconds,
        },
    }
    if args.compile if args.compile is not None else on_cuda:
        compiled_model = copy.deepcopy(init)
        compiled = torch.compile(torch_loss, **_compile_options(args, on_cuda))
        _, seconds = train(compiled_model, compiled, args.steps, args.device, args.lr)
        result["tokens_per_second"]["torch.compile"] = tokens / seconds
    if args.compile_tilec if args.compile_tilec is not None else on_cuda:
        compiled_model = copy.deepcopy(init)
        compiled = torch.compile(tilec_loss, fullgraph=True, **_compile_options(args, on_cuda))
        losses, seconds = train(compiled_model, compiled, args.steps, args.device, args.lr)
        result["tokens_per_second"]["tilec + torch.compile"] = tokens / seconds
        result["tilec_compiled_losses"] = losses
    print(f"largest loss difference: {worst:.3e}")
    for name, rate in result["tokens_per_second"].items():
        print(f"tokens/s {name:>14}: {rate:,.0f}")
    if args.profile and on_cuda:
        result["profile"] = {
            "tilec": profile_steps("tilec", model, tilec_loss, args.profile, args.lr),
            "eager": profile_steps("eager", eager, torch_loss, args.profile, args.lr),
        }
    if args.explain:
        result["graph_breaks"] = graph_breaks(model, args.device)
        print(
            f"graph breaks of the tilec model under torch._dynamo.explain: {result['graph_breaks']}"
        )
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
