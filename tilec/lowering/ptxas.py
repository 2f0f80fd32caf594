"""NVIDIA's `ptxas`: finding it, assembling PTX with it, and reading what it reports.

`ptxas` turns PTX into machine code and, with `-v`, reports each kernel's registers, spills,
stack frame, static shared memory and barriers. tilec uses it to check its PTX without a GPU.
It is found on `PATH`, else inside the `nvidia-cuda-nvcc` wheel (`pip install
nvidia-cuda-nvcc`; the `test` extra installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace

__all__ = ["KernelResources", "PtxasError", "assemble", "find_ptxas", "wgmma_serializers"]

WHEEL = "nvidia-cuda-nvcc"


class PtxasError(RuntimeError):
    """ptxas is missing, or rejected the PTX (the message holds its diagnostics)."""


def find_ptxas() -> str | None:
    """The path of a `ptxas` executable: on PATH, else in the `nvidia-cuda-nvcc` wheel."""
    found = shutil.which("ptxas")
    if found:
        return found
    # Imported here: importlib.metadata costs every `tilec compile` ~8 ms, and only a run that
    # assembles (or dumps next to ptxas's report) gets this far.
    from importlib import metadata

    try:
        files = metadata.distribution(WHEEL).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "ptxas" and f.parent.name == "bin":
            path = str(f.locate())
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (`-v`)."""

    name: str
    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    stack_frame: int  # bytes
    static_shared: int  # bytes (tilec's scratch is dynamic shared memory, not counted here)
    barriers: int
    # ptxas's "Potential Performance Loss" notes for this kernel, e.g. "C7515: wgmma.mma_async
    # instructions are serialized due to ...": code that assembles but runs slower than written.
    performance_warnings: tuple[str, ...] = ()

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_LOSS = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*) in the function '([^']+)'")


def assemble(ptx: str, arch: str, ptxas: str | None = None) -> dict[str, KernelResources]:
    """Assemble `ptx` for `arch` (e.g. "sm_90a"); the resources of each kernel, by name.
    Raises `PtxasError` when ptxas is not found or fails."""
    return assemble_cubin(ptx, arch, ptxas)[1]


def assemble_cubin(
    ptx: str, arch: str, ptxas: str | None = None
) -> tuple[bytes, dict[str, KernelResources]]:
    """Assemble `ptx` for `arch`: the cubin, and the resources of each kernel by name."""
    exe = ptxas or find_ptxas()
    if exe is None:
        raise PtxasError(
            "ptxas not found on PATH nor in the nvidia-cuda-nvcc wheel",
        )
    with tempfile.TemporaryDirectory(prefix="tilec-ptxas-") as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w", encoding="utf-8") as f:
            f.write(ptx)
        cubin_path = os.path.join(tmp, "kernel.cubin")
        result = subprocess.run(
            [exe, f"-arch={arch}", "-v", source, "-o", cubin_path],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise PtxasError(f"ptxas -arch={arch} failed:\n{result.stderr.strip()}")
        with open(cubin_path, "rb") as f:
            cubin = f.read()
    return cubin, _parse_report(result.stdout + result.stderr)


def _parse_report(text: str) -> dict[str, KernelResources]:
    kernels: dict[str, KernelResources] = {}
    losses: dict[str, list[str]] = {}
    name: str | None = None
    frame = (0, 0, 0)
    for line in text.splitlines():
        if m := _LOSS.search(line):
            losses.setdefault(m.group(3), []).append(f"{m.group(1)}: {m.group(2)}")
        elif m := _ENTRY.search(line):
            name, frame = m.group(1), (0, 0, 0)
        elif (m := _FRAME.search(line)) and name is not None:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and name is not None:
            rest = m.group(2)
            shared = re.search(r"(\d+) bytes smem", rest)
            barriers = re.search(r"used (\d+) barriers", rest)
            kernels[name] = KernelResources(
                name,
                int(m.group(1)),
                frame[1],
                frame[2],
                frame[0],
                int(shared.group(1)) if shared else 0,
                int(barriers.group(1)) if barriers else 0,
            )
            name = None
    return {
        n: replace(r, performance_warnings=tuple(losses.get(n, ()))) for n, r in kernels.items()
    }


# A 64-bit integer division or remainder: in SASS a call to a subroutine.
_WIDE_DIVISION = re.compile(r"^\s*(?:@!?%p\d+\s+)?((?:div|rem)\.[su]64)\b", re.MULTILINE)
_PTX_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(")


def wgmma_serializers(ptx: str) -> dict[str, list[str]]:
    """Per kernel of `ptx` that issues wgmma, what in its PTX makes nvJitLink -- which
    cuda.core, and so tilec's runtime, compiles PTX with -- serialize every wgmma ("wgmma.mma_async
    instructions are serialized due to the presence of Extern calls"): 64-bit integer
    divisions and remainders (subroutine calls in SASS) and calls. Standalone ptxas of the same
    release keeps the groups in flight, so its report does not show it (found on the H200,
    2026-12-03: a persistent GEMM ran 1.17-1.45x slower)."""
    found: dict[str, list[str]] = {}
    starts = [(m.start(), m.group(1)) for m in _PTX_ENTRY.finditer(ptx)]
    for i, (start, name) in enumerate(starts):
        body = ptx[start : starts[i + 1][0] if i + 1 < len(starts) else len(ptx)]
        if "wgmma.mma_async" not in body:
            continue
        reasons = []
        wide = sorted(set(_WIDE_DIVISION.findall(body)))
        if wide:
            reasons.append(
                f"{', '.join(wide)} in the PTX (a 64-bit division by a run-time value is a "
                "subroutine call in SASS; dividing values below 2**31 in i32 avoids it)"
            )
        if re.search(r"^\s*call(?:\.uni)?\b", body, re.MULTILINE):
            reasons.append("a function call in the PTX")
        if reasons:
            found[name] = reasons
    return found
