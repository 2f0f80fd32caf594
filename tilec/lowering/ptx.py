"""PTX from tile IR: LLVM's NVPTX backend (through llvmlite) optimizes and assembles the module
that `tilec.lowering.llvm` builds.

The target machine is `sm_80` ... `sm_90a` with PTX ISA 8.0 (needs a CUDA 12.0 or newer
driver); the optimizer is LLVM's `O3` pipeline, which keeps the debug locations that line info
puts on instructions, so the PTX carries `.file`/`.loc` directives (`ptx_line_locations` reads
them back).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tilec.diagnostics import Location, TileError
from tilec.dialects.builtin import ModuleOp
from tilec.lowering.abi import Specialization
from tilec.lowering.llvm import ARCHES, DATA_LAYOUT, TRIPLE, lower_to_llvm

if TYPE_CHECKING:  # LLVM's library loads when PTX is first made, not with the compiler (80 ms)
    import llvmlite.binding as llvm

__all__ = [
    "PTX_VERSION",
    "compile_to_ptx",
    "default_arch",
    "optimize",
    "ptx_line_locations",
    "target_machine",
]

# 8.1: vector `red` (`red.global.add.v4.f32`, `.noftz.v8.bf16`) for atomics on sm_90.
PTX_VERSION = "ptx81"


@functools.cache
def target_machine(arch: str) -> llvm.TargetMachine:
    """LLVM's NVPTX target machine for `arch` (one of `ARCHES`)."""
    import llvmlite.binding as llvm

    if arch not in ARCHES:
        raise TileError(f"unknown architecture '{arch}'", hint="one of " + ", ".join(ARCHES))
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    machine = target.create_target_machine(cpu=arch, features=f"+{PTX_VERSION}", opt=3)
    assert str(machine.target_data) == DATA_LAYOUT, "LLVM's NVPTX data layout changed"
    return machine


def optimize(text: str, arch: str) -> llvm.ModuleRef:
    """Parse, verify and optimize (O3) LLVM IR text for `arch`."""
    import llvmlite.binding as llvm

    module = llvm.parse_assembly(text)
    module.verify()
    machine = target_machine(arch)
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return module


def compile_to_ptx(
    module: ModuleOp,
    arch: str,
    specializations: Mapping[str, Specialization] | None = None,
    *,
    line_info: bool = True,
) -> str:
    """PTX text for every kernel of `module` (specialized and laid out) on `arch`;
    `specializations` by kernel name, as `lower_to_llvm` takes them; `line_info`: `.loc`
    directives pointing at the source lines."""
    llvm_module = lower_to_llvm(module, arch, specializations, line_info=line_info)
    return target_machine(arch).emit_assembly(optimize(str(llvm_module), arch))


_FILE_DIRECTIVE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_LOC_DIRECTIVE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")


def ptx_line_locations(ptx: str) -> tuple[Location | None, ...]:
    """Per line of `ptx`, the source location of the `.loc` directive in force there (from
    that line to the next `.loc` or the end of the function), None outside any."""
    lines = ptx.splitlines()
    files = {}
    for line in lines:
        if ".file" in line and (m := _FILE_DIRECTIVE.match(line)):
            files[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\\\", "\\")
    result: list[Location | None] = []
    current: Location | None = None
    for line in lines:
        if ".loc" in line and (m := _LOC_DIRECTIVE.match(line)):
            current = Location(files.get(m.group(1), ""), int(m.group(2)), int(m.group(3)))
        elif line.startswith("}"):
            current = None
        result.append(current)
    return tuple(result)


# Compute capability -> the architecture tilec compiles for (`tilec.lowering.ARCHES`): sm_90
# parts get sm_90a, whose PTX may use Hopper-only instructions (wgmma); a newer GPU gets sm_90
# PTX, which its driver compiles forward. One table for `default_arch` (no driver loaded) and
# the runtime's `device_arch`.
ARCH_BY_CAPABILITY = {
    (8, 0): "sm_80",
    (8, 6): "sm_86",
    (8, 7): "sm_86",
    (8, 9): "sm_89",
    (9, 0): "sm_90a",
}
FALLBACK_ARCH = "sm_90a"  # when no GPU says otherwise


def arch_for_capability(capability: tuple[int, int]) -> str | None:
    """The architecture to compile for on a GPU of `capability` (None: older than sm_80)."""
    if capability in ARCH_BY_CAPABILITY:
        return ARCH_BY_CAPABILITY[capability]
    return "sm_90" if capability > (9, 0) else None


@functools.cache
def default_arch() -> str:
    """The architecture of the first GPU (per `nvidia-smi`), else `FALLBACK_ARCH`."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return FALLBACK_ARCH
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return FALLBACK_ARCH
    first = out.strip().splitlines()[0].strip() if out.strip() else ""
    try:
        major, minor = (int(x) for x in first.split("."))
    except ValueError:
        return FALLBACK_ARCH
    return arch_for_capability((major, minor)) or FALLBACK_ARCH
