"""Lowering of specialized, laid-out tile IR to LLVM IR and PTX, and the kernel ABI.

lower_to_llvm(module, "sm_90a")  -> llvmlite.ir.Module
compile_to_ptx(module, "sm_90a") -> str (PTX)
module_abi(module)               -> {kernel name: KernelABI}
"""

from tilec.lowering.abi import KernelABI, Specialization, kernel_abi, module_abi
from tilec.lowering.llvm import ARCHES, lower_to_llvm
from tilec.lowering.ptx import compile_to_ptx

__all__ = [
    "ARCHES",
    "KernelABI",
    "Specialization",
    "compile_to_ptx",
    "kernel_abi",
    "lower_to_llvm",
    "module_abi",
]
