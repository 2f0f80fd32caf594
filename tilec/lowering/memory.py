"""Vector global loads and stores: one predicated `ld.global.v*`/`st.global.v*` (inline PTX)
for a run of `v` consecutive elements, as the `vector` attribute of `tile.load`/`tile.store`
allows (`passes/vectorize.py` proved the address aligned to `v * element bytes` and one
predicate right for the whole run).

The `v * bytes` (2 to 16) travel in `count` registers of `width` bits: 64-bit elements in
`.b64` registers, others packed little-endian into `.b32` registers (two f16 or bf16 per
register, four bytes), and a 2-byte pair of bytes in one `.b16` register. A pair of 16-bit
elements is packed as a `<2 x i16>` vector rather than by shifts and ors: LLVM then sees two
converted f32 as one `cvt.rn.f16x2.f32` (F2FP), and a pair converted together
(`ElementwiseLowering.narrow_pairs`) reaches the store as its one register, not unpacked and
packed again (a PRMT or a shift and an or per register).
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

I32 = ir.IntType(32)

__all__ = ["VectorAccess", "global_load_vector", "global_store_vector", "vector_slots"]


class VectorAccess:
    """How `v` elements of `element_bits` bits each move in one access."""

    def __init__(self, v: int, element_bits: int):
        total = v * element_bits
        if total > 128 or total % 16 or v & (v - 1):
            raise ValueError(f"no vector access of {v} x {element_bits} bits")
        self.v = v
        self.element_bits = element_bits
        self.bytes = total // 8
        self.width = 64 if element_bits == 64 else min(32, total)
        self.count = total // self.width  # 1, 2 or 4 registers
        self.per_register = self.width // element_bits
        self.letter = {16: "h", 32: "r", 64: "l"}[self.width]
        self.register = ir.IntType(self.width)

    @property
    def suffix(self) -> str:
        """The PTX vector and type suffix: `.v4.b32`, `.v2.b64`, `.b32`."""
        vector = f".v{self.count}" if self.count > 1 else ""
        return f"{vector}.b{self.width}"

    def registers(self, first: int) -> str:
        """The inline-asm operand list of the registers, numbered from `$first`."""
        names = ", ".join(f"${first + i}" for i in range(self.count))
        return "{" + names + "}" if self.count > 1 else names


def vector_slots(counts: Sequence[int], offsets: Sequence[int], v: int) -> range:
    """The first slot of each run of `v` slots that hold consecutive elements along the last
    dimension, for a thread map with slot `counts` per dimension whose last dimension holds
    `offsets`; a ValueError when the layout does not keep runs of v together."""
    n = len(offsets)
    if n % v or any(offsets[k + j] != offsets[k] + j for k in range(0, n, v) for j in range(v)):
        raise ValueError(f"vector {v}: the layout holds no runs of {v} consecutive elements")
    total = 1
    for c in counts:
        total *= c
    return range(0, total, v)


def _pack(b: ir.IRBuilder, access: VectorAccess, bits: Sequence[ir.Value]) -> list[ir.Value]:
    """Element bit patterns (each `iN`, N = element bits) -> the access's registers."""
    registers = []
    if access.element_bits == 16 and access.per_register == 2:  # the module docstring says why
        for r in range(access.count):
            pair = ir.Constant(ir.VectorType(ir.IntType(16), 2), ir.Undefined)
            for k in range(2):
                pair = b.insert_element(pair, bits[2 * r + k], ir.Constant(I32, k))
            registers.append(b.bitcast(pair, access.register))
        return registers
    for r in range(access.count):
        word: ir.Value | None = None
        for k in range(access.per_register):
            x = bits[r * access.per_register + k]
            if access.element_bits < access.width:
                x = b.zext(x, access.register)
            shift = k * access.element_bits
            if shift:
                x = b.shl(x, ir.Constant(access.register, shift))
            word = x if word is None else b.or_(word, x)
        registers.append(word)
    return registers


def _unpack(b: ir.IRBuilder, access: VectorAccess, registers: Sequence[ir.Value]) -> list[ir.Value]:
    """The access's registers -> element bit patterns (each `iN`)."""
    element = ir.IntType(access.element_bits)
    bits = []
    for word in registers:
        for k in range(access.per_register):
            shift = k * access.element_bits
            x = b.lshr(word, ir.Constant(access.register, shift)) if shift else word
            bits.append(b.trunc(x, element) if access.element_bits < access.width else x)
    return bits


def global_load_vector(
    b: ir.IRBuilder,
    access: VectorAccess,
    pointer: ir.Value,
    predicate: ir.Value,
    other_bits: Sequence[ir.Value],
) -> list[ir.Value]:
    """Load `access.v` elements from `pointer` where `predicate` holds; elsewhere the result
    is `other_bits` (the padding's bit patterns). Returns the elements' bit patterns. With no
    predicate (always in bounds) the load is LLVM's own, which it may schedule and whose
    address arithmetic it folds into the instruction."""
    n = access.count
    if predicate is None:
        vector = b.load(pointer, typ=ir.VectorType(access.register, n), align=access.bytes)
        return _unpack(
            b, access, [b.extract_element(vector, ir.Constant(I32, i)) for i in range(n)]
        )
    others = _pack(b, access, other_bits)
    moves = "\n\t".join(f"mov.b{access.width} ${i}, ${n + 2 + i};" for i in range(n))
    load = f"@${n + 1} ld.global{access.suffix} {access.registers(0)}, [${n}];"
    result_type = access.register if n == 1 else ir.LiteralStructType([access.register] * n)
    asm = ir.InlineAsm(
        ir.FunctionType(result_type, [pointer.type, ir.IntType(1)] + [access.register] * n),
        f"{moves}\n\t{load}",
        ",".join([f"={access.letter}"] * n + ["l", "b"] + [access.letter] * n),
        side_effect=True,  # never moved across stores (a kernel may read what it wrote)
    )
    raw = b.call(asm, [pointer, predicate, *others])
    registers = [raw] if n == 1 else [b.extract_value(raw, i) for i in range(n)]
    return _unpack(b, access, registers)


def global_store_vector(
    b: ir.IRBuilder,
    access: VectorAccess,
    pointer: ir.Value,
    predicate: ir.Value,
    bits: Sequence[ir.Value],
) -> None:
    """Store `access.v` elements (their bit patterns) at `pointer` where `predicate` holds
    (with no predicate: always, as LLVM's own store)."""
    n = access.count
    registers = _pack(b, access, bits)
    if predicate is None:
        vector = ir.Constant(ir.VectorType(access.register, n), ir.Undefined)
        for i, r in enumerate(registers):
            vector = b.insert_element(vector, r, ir.Constant(I32, i))
        b.store(vector, pointer, align=access.bytes)
        return
    asm = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [pointer.type] + [access.register] * n + [ir.IntType(1)]),
        f"@${n + 1} st.global{access.suffix} [$0], {access.registers(1)};",
        ",".join(["l"] + [access.letter] * n + ["b"]),
        side_effect=True,
    )
    b.call(asm, [pointer, *registers, predicate])
