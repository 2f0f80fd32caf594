"""The benchmark suite's framework: a workload, its cases and implementations, the context
that builds tilec's kernel and the peers, and the selection of workloads by name. The
workloads themselves are in `suite_compute` and `suite_memory`, listed in `suite`."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEVICE", "EXAMPLES", "Case", "Context", "Implementation", "Workload", "select"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEVICE = "cuda"  # where the inputs live (the CPU tests build small cases on "cpu")


@dataclass
class Implementation:
    """One way to do a case's work. `run(*inputs)` returns the result, or writes it where
    `output()` reads it. `run` None: not available here, `missing` says why."""

    name: str
    run: Callable[..., Any] | None
    output: Callable[[], Any] | None = None
    role: str = "peer"  # "tilec", "peer", "ceiling", "info" (shown beside the row, unchecked)
    missing: str = ""
    eager: bool = False  # eager torch: the target of the small sizes


@dataclass
class Case:
    """One workload at one size, ready to check and time."""

    implementations: list[Implementation]
    sets: list[Sequence[Any]]
    # None: outputs are not checked; a function (output, rtol) -> bool: whether an output is
    # right where peers need not agree element by element (random numbers from other streams)
    expected: Any
    amount: float  # bytes moved (unit GB/s) or operations (TFLOP/s, TOPS)
    unit: str
    rtol: float = 2e-3


@dataclass
class Context:
    """What a builder needs from the machine: input sets sized past the L2 cache, the Triton
    references (None, and why not), and the GPU's torch."""

    sets: Callable[[Callable[[], Sequence[Any]], int], list[Sequence[Any]]]
    triton: Any = None
    triton_missing: str = "Triton is not installed"
    examples: Path = EXAMPLES

    def tilec(
        self, file: str, kernel: str, make: Callable[[Any], Callable[..., Any]], output: Any
    ) -> Implementation:
        """tilec's kernel `kernel` of `examples/FILE`; `make(kernel)` is its runner. A file
        that is missing or does not compile gives an implementation that failed, saying why."""
        from tilec.jit import load_kernel

        path = self.examples / file
        if not path.is_file():
            return Implementation("tilec", None, role="tilec", missing=f"examples/{file} absent")
        try:
            loaded = load_kernel(path, kernel)
        except Exception as e:  # a TileError, or an internal one: the row shows it
            text = e.render() if hasattr(e, "render") else f"{type(e).__name__}: {e}"
            return Implementation("tilec", None, role="tilec", missing=text.strip()[:400])
        return Implementation("tilec", make(loaded), output, role="tilec")

    def triton_peer(self, name: str, make: Callable[[Any], Callable[..., Any]]) -> Implementation:
        if self.triton is None:
            return Implementation(name, None, missing=self.triton_missing)
        return Implementation(name, make(self.triton))

    def compiled(self, function: Callable[..., Any], inputs: Sequence[Any]) -> Implementation:
        """`torch.compile(function, fullgraph=True, dynamic=False)`, compiled and run once on
        `inputs` here, before anything is timed."""
        import torch

        try:
            import torch._dynamo

            for knob in ("cache_size_limit", "recompile_limit"):  # the name moved in 2.6
                if hasattr(torch._dynamo.config, knob):
                    setattr(
                        torch._dynamo.config, knob, max(64, getattr(torch._dynamo.config, knob))
                    )
            compiled = torch.compile(function, fullgraph=True, dynamic=False)
            compiled(*inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as e:
            reason = f"torch.compile failed: {type(e).__name__}: {str(e).strip()[:200]}"
            return Implementation("torch.compile", None, missing=reason)
        return Implementation("torch.compile", compiled)


@dataclass(frozen=True)
class Workload:
    """A kernel of the suite: its sizes (`small`: the few-MiB size of a memory-bound kernel;
    `quick`: what `--quick` runs instead of all) and the builder of its cases."""

    name: str
    kind: str  # "compute" or "memory"
    build: Callable[[tuple, Context], Case]
    label: Callable[[tuple], str]
    sizes: tuple[tuple, ...]
    quick: tuple[tuple, ...]
    small: tuple[tuple, ...] = field(default=())
    ceiling: str = "copy"  # the roofline: "copy" bandwidth, or cuBLAS's "f16", "bf16", "int8"


def select(patterns: str | Sequence[str] | None, names: Sequence[str]) -> list[str]:
    """The names that any of the comma-separated `patterns` picks: an fnmatch pattern when it
    has `*?[`, else a substring; case-insensitive. Raises ValueError for a pattern that picks
    nothing (a typo should not run an empty suite)."""
    if patterns is None:
        return list(names)
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    wanted = [p.strip().lower() for p in patterns if p.strip()]
    if not wanted:
        return list(names)
    chosen = []
    for pattern in wanted:
        glob = any(c in pattern for c in "*?[")
        hits = [
            n
            for n in names
            if (fnmatch.fnmatchcase(n.lower(), pattern) if glob else pattern in n.lower())
        ]
        if not hits:
            raise ValueError(f"'{pattern}' matches no workload (workloads: {', '.join(names)})")
        chosen += hits
    return [n for n in names if n in chosen]


# ---------------------------------------------------------------------------------------------
# Helpers


def _dtype(name: str) -> Any:
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[name]


def _randn(shape: Sequence[int], dtype: str, scale: float = 1.0) -> Any:
    import torch

    return (torch.randn(*shape, device=DEVICE) * scale).to(_dtype(dtype))


def _eager(name: str, run: Callable[..., Any]) -> Implementation:
    return Implementation(name, run, eager=True)


def _elements(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _x(size: Sequence[Any]) -> str:
    return "x".join(str(s) for s in size)
