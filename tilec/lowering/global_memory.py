"""The lowering of global memory accesses, `tile.load` and `tile.store`: one predicated
`ld.global`/`st.global` (inline PTX) per element, the predicate being "inside every extent" (an
unsigned compare, so a negative index is out) and the mask; masked-off loads give `padding`. A
replicated tile is stored only by the threads that hold no copies. Runs of elements that the
`vectorize` pass proved aligned move in one vector access (`tilec.lowering.memory`); an
access every dimension of which is in bounds and unmasked is a plain LLVM load or store.

`GlobalMemoryLowering` is a part of the kernel lowering (`tilec.lowering.llvm._KernelLowering` inherits it):
its methods use the lowering's builder `self.b`, its lowered values `self.values` and its
helpers (thread coordinates, scratch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from tilec.ir.core import Operation
from tilec.ir.types import FloatType, IntegerType, TileType, Type
from tilec.lowering import memory
from tilec.lowering.exchange import thread_map
from tilec.lowering.llvm_types import (
    GLOBAL_PTR,
    I1,
    I8,
    I64,
    bit_width,
    constant,
    llvm_type,
    memory_type,
    register_kind,
)

__all__ = ["GlobalMemoryLowering", "View"]


@dataclass
class View:
    """A lowered tensor view: its pointer, extents and strides (i64, in elements)."""

    pointer: ir.Value
    extents: list[ir.Value]
    strides: list[ir.Value]


class GlobalMemoryLowering:
    """Loads and stores of global memory: the kernel lowering's methods for them."""

    def guarded_load(self, t: Type, pointer: ir.Value, predicate: ir.Value) -> ir.Value:
        """A global load where `predicate` holds, else zero."""
        return self._global_load(t, pointer, predicate, constant(t, 0))

    # -- tile: memory ---------------------------------------------------------------------------

    def _access(self, op: Operation, t: TileType) -> tuple[list[ir.Value], list[Any]]:
        """Per slot of a load or store of `t`: the element pointer and the in-bounds predicate
        (None where the op's `in_bounds` promises every dimension and there is no mask)."""
        b = self.b
        view: View = self.values[op.view]
        offsets = [self.values[v] for v in op.offsets]
        promised = op.attributes.get("in_bounds")
        checked = [not x for x in promised.value] if promised is not None else [True] * t.rank
        m = thread_map(t)
        addresses, inside = [], []
        for d, indices in enumerate(self.dim_indices(m)):
            adds, oks = [], []
            for i in indices:
                index = b.add(offsets[d], b.sext(i, I64))
                # Unsigned: an index below 0 is out of bounds too.
                oks.append(b.icmp_unsigned("<", index, view.extents[d]) if checked[d] else None)
                adds.append(b.mul(index, view.strides[d]))
            addresses.append(adds)
            inside.append(oks)
        pointers, predicates = [], []
        element = memory_type(t.element)
        masks = self.values[op.mask] if op.mask is not None else None
        for slot in range(m.num_slots):
            k = m.slot_multi_index(slot)
            offset, ok = addresses[0][k[0]], inside[0][k[0]]
            for d in range(1, len(k)):
                offset = b.add(offset, addresses[d][k[d]])
                q = inside[d][k[d]]
                ok = q if ok is None else ok if q is None else b.and_(ok, q)
            if masks is not None:
                ok = masks[slot] if ok is None else b.and_(ok, masks[slot])
            pointers.append(b.gep(view.pointer, [offset], source_etype=element))
            predicates.append(ok)
        return pointers, predicates

    def load(self, op: Operation) -> list[Any]:
        t = op.result.type
        pointers, predicates = self._access(op, t)
        padding_attr = op.attributes.get("padding")
        padding = 0 if padding_attr is None else padding_attr.value
        if isinstance(padding, bool):
            padding = int(padding)
        other = constant(t.element, padding)
        vector = op.attributes.get("vector")
        if vector is not None and vector.value > 1:
            return [self._vector_load(t, vector.value, pointers, predicates, other)]
        return [[self._global_load(t.element, p, q, other) for p, q in zip(pointers, predicates)]]

    def _vector_load(self, t: TileType, v: int, pointers, predicates, other) -> list[ir.Value]:
        """One `ld.global.v*` per run of `v` slots (`tilec.lowering.memory`): the run's first
        pointer and predicate stand for all (the vectorize pass proved that they may)."""
        m = thread_map(t)
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        other_bits = [self._to_bits(other, ir.IntType(bits), t.element)] * v
        values = []
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            loaded = memory.global_load_vector(
                self.b, access, pointers[s], predicates[s], other_bits
            )
            values += [self._from_bits(x, t.element) for x in loaded]
        return values

    def _global_load(self, t: Type, pointer: ir.Value, predicate, other: ir.Constant):
        b = self.b
        if predicate is None:  # always in bounds: a plain load LLVM may schedule and fold
            value = b.load(pointer, typ=memory_type(t), align=max(bit_width(t) // 8, 1))
            return (
                b.icmp_unsigned("!=", value, ir.Constant(I8, 0)) if t == IntegerType(1) else value
            )
        letter, ptx_type, reg = register_kind(t)
        raw_other = self._to_bits(other, reg, t)
        # The register starts as `other`, and the load overwrites it only where allowed.
        asm = ir.InlineAsm(
            ir.FunctionType(reg, [GLOBAL_PTR, I1, reg]),
            f"mov.b{reg.width} $0, $3;\n\t@$2 ld.global.{ptx_type} $0, [$1];",
            f"={letter},l,b,{letter}",
            side_effect=True,  # never moved across stores (a kernel may read what it wrote)
        )
        raw = b.call(asm, [pointer, predicate, raw_other])
        return self._from_bits(raw, t)

    def _to_bits(self, v: ir.Value, reg: ir.IntType, t: Type) -> ir.Value:
        b = self.b
        if t == IntegerType(1):
            return b.zext(v, reg)
        if isinstance(t, FloatType):
            v = b.bitcast(v, ir.IntType(t.width))
        return b.zext(v, reg) if v.type.width < reg.width else v

    def _from_bits(self, raw: ir.Value, t: Type) -> ir.Value:
        b = self.b
        if t == IntegerType(1):
            return b.icmp_unsigned("!=", raw, ir.Constant(raw.type, 0))
        width = bit_width(t)
        if raw.type.width > width:
            raw = b.trunc(raw, ir.IntType(width))
        return b.bitcast(raw, llvm_type(t)) if isinstance(t, FloatType) else raw

    def store(self, op: Operation) -> list[Any] | None:
        t = op.value.type
        pointers, predicates = self._access(op, t)
        owner = self.unique_owner(thread_map(t))
        if owner is not None:
            predicates = [owner if p is None else self.b.and_(p, owner) for p in predicates]
        element = t.element
        vector = op.attributes.get("vector")
        if vector is not None and vector.value > 1:
            self._vector_store(t, vector.value, pointers, predicates, self.values[op.value])
            return None
        letter, ptx_type, reg = register_kind(element)
        asm = ir.InlineAsm(
            ir.FunctionType(ir.VoidType(), [GLOBAL_PTR, reg, I1]),
            f"@$2 st.global.{ptx_type} [$0], $1;",
            f"l,{letter},b",
            side_effect=True,
        )
        for p, v, q in zip(pointers, self.values[op.value], predicates):
            if q is None:  # always in bounds, one owner: a plain store
                if element == IntegerType(1):
                    v = self.b.zext(v, I8)
                self.b.store(v, p, align=max(bit_width(element) // 8, 1))
            else:
                self.b.call(asm, [p, self._to_bits(v, reg, element), q])
        return None

    def _vector_store(self, t: TileType, v: int, pointers, predicates, values) -> None:
        """One `st.global.v*` per run of `v` slots, like `_vector_load`."""
        m = thread_map(t)
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        register = ir.IntType(bits)
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            run = [self._to_bits(x, register, t.element) for x in values[s : s + v]]
            memory.global_store_vector(self.b, access, pointers[s], predicates[s], run)
