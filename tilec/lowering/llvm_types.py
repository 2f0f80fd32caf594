"""LLVM types and constants for tile IR types (llvmlite has no `bfloat`: `BFloatType`; f8
values are their bits in an `i8`, since LLVM's NVPTX backend has no f8 type)."""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from tilec.ir.types import FloatType, IndexType, IntegerType, Type

__all__ = [
    "BF16",
    "F32",
    "GLOBAL_PTR",
    "I1",
    "I8",
    "I16",
    "I32",
    "I64",
    "SHARED_PTR",
    "BFloatType",
    "bfloat16_bits",
    "bit_width",
    "constant",
    "float8_bits",
    "llvm_type",
    "memory_type",
    "register_kind",
]

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)


class BFloatType(ir.Type):
    """LLVM's `bfloat` (llvmlite has no bfloat type)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash(BFloatType)

    def format_constant(self, value: float) -> str:
        return f"0xR{bfloat16_bits(value):04X}"


BF16 = BFloatType()


def bfloat16_bits(value: float) -> int:
    """The bfloat16 nearest to `value` (rounded once, ties to even), as its 16 bits."""
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    if math.isnan(value):
        return 0x7FC0
    a = abs(value)
    if a == 0:
        return sign
    if math.isinf(a):
        return sign | 0x7F80
    m, e = math.frexp(a)  # a = m * 2^e, 0.5 <= m < 1
    if e - 1 < -126:  # below the smallest normal: multiples of 2^-133
        return sign | round(a * 2.0**133)  # 128 (the smallest normal) encodes itself
    q = round(m * 256)  # 8 significant bits, ties to even
    if q == 256:
        q, e = 128, e + 1
    biased = e - 1 + 127
    if biased >= 255:
        return sign | 0x7F80
    return sign | (biased << 7) | (q - 128)


def float8_bits(t: FloatType, value: float) -> int:
    """The bits of the f8 of `t` nearest to `value`, saturating as `cvt.rn.satfinite` does
    (beyond the largest finite value, and for inf, the largest of the sign)."""
    import ml_dtypes
    import numpy as np

    dtype, largest = {
        "f8e4m3": (ml_dtypes.float8_e4m3fn, 448.0),
        "f8e5m2": (ml_dtypes.float8_e5m2, 57344.0),
    }[t.name]
    saturated = np.clip(np.float32(value), -largest, largest)
    return int(np.asarray(saturated).astype(dtype).view(np.uint8))


def llvm_type(t: Type) -> ir.Type:
    """The register type of scalar type `t` (`index` is `i64`)."""
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width)
    if isinstance(t, FloatType):
        if t.is_f8:
            return I8
        return {"f16": ir.HalfType(), "bf16": BF16, "f32": F32, "f64": ir.DoubleType()}[t.name]
    raise TypeError(f"no LLVM type for {t}")


def memory_type(t: Type) -> ir.Type:
    """The type of an element in memory: `i1` is a byte."""
    return I8 if t == IntegerType(1) else llvm_type(t)


def constant(t: Type, value: Any) -> ir.Constant:
    lt = llvm_type(t)
    if isinstance(t, FloatType) and t.is_f8:
        return ir.Constant(lt, float8_bits(t, float(value)))
    if isinstance(t, FloatType):
        return ir.Constant(lt, float(value))
    return ir.Constant(lt, int(value))


def register_kind(t: Type) -> tuple[str, str, ir.IntType]:
    """How an element of `t` travels through inline PTX: the register constraint letter, the
    ld/st type, and the integer type of the register (bytes ride in 16-bit registers)."""
    bits = 8 if t == IntegerType(1) else bit_width(t)
    return {8: ("h", "u8", I16), 16: ("h", "b16", I16), 32: ("r", "b32", I32)}.get(
        bits, ("l", "b64", I64)
    )


def bit_width(t: Type) -> int:
    """The bits of a scalar of `t` (`index` is 64)."""
    return 64 if isinstance(t, IndexType) else t.width  # type: ignore[attr-defined]
