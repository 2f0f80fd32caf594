"""PTX from tile IR: LLVM's NVPTX backend (through llvmlite) optimizes and assembles the module
that `tilec.lowering.llvm` builds.

The target machine is `sm_80` ... `sm_90a` with PTX ISA 8.0 (needs a CUDA 12.0 or newer
driver); the optimizer is LLVM's `O3` pipeline.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from tilec.diagnostics import TileError
from tilec.dialects.builtin import ModuleOp
from tilec.lowering.llvm import ARCHES, DATA_LAYOUT, TRIPLE, lower_to_llvm

__all__ = ["PTX_VERSION", "compile_to_ptx", "optimize", "target_machine"]

PTX_VERSION = "ptx80"


@functools.cache
def target_machine(arch: str) -> llvm.TargetMachine:
    """LLVM's NVPTX target machine for `arch` (one of `ARCHES`)."""
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
    module = llvm.parse_assembly(text)
    module.verify()
    machine = target_machine(arch)
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return module


def compile_to_ptx(module: ModuleOp, arch: str) -> str:
    """PTX text for every kernel of `module` (specialized and laid out) on `arch`."""
    llvm_module = lower_to_llvm(module, arch)
    return target_machine(arch).emit_assembly(optimize(str(llvm_module), arch))
