"""The lowering of global memory accesses, `tile.load` and `tile.store`: one predicated
`ld.global`/`st.global` (inline PTX) per element, the predicate being "inside every extent" (a
32-bit compare per dimension: at a constant offset the element's constant position against
the access's own `limit`, a register, computed at each access rather than shared between
accesses: `limit`; elsewhere `inside`) and the mask; masked-off loads give `padding`. A
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
    I32,
    I64,
    bit_width,
    constant,
    llvm_type,
    memory_type,
    register_kind,
)

__all__ = ["GlobalMemoryLowering", "View"]


@dataclass
class _Run:
    """A run of consecutive elements of a `checked` access (`_checked_runs`)."""

    pointer: ir.Value  # its first element
    first: ir.Value  # the first element's index along the last dimension (i64)
    ok: Any  # inside every other dimension (and owned): an i1, or None for always
    extent: Any  # the last dimension's extent where it is checked, else None
    masks: Any  # the elements' mask values, or None
    inside: Any  # every element inside and unmasked (None: always)
    whole: ir.Value  # moves in one access (inside and aligned) or not at all (all outside)


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

    def inside(self, offset: ir.Value, i: ir.Value, extent: ir.Value) -> ir.Value:
        """Whether `0 <= offset + i < extent`, for an element `i` (i32, in `[0, 2**20)`: a
        position in a tile) of an access at `offset` (i64), compared in 32 bits: every extent
        is below 2**31 (the launcher checks it: docs/abi.md): `trunc(offset) + i < extent`,
        unsigned, where `offset` lies in `[-2**31, 2**31)` (out of it, `offset + i` is
        outside any extent): a wrapped sum is at least 2**31 unsigned, so outside too. (At a
        constant offset `_access` compares with the access's `limit` instead.)"""
        b = self.b
        extent = b.trunc(extent, I32)
        within = b.icmp_unsigned("<", b.add(b.trunc(offset, I32), i), extent)
        small = b.icmp_unsigned(
            "<", b.add(offset, ir.Constant(I64, 2**31)), ir.Constant(I64, 2**32)
        )
        return b.and_(small, within)

    def limit(self, offset: ir.Value, base: ir.Value, extent: ir.Value) -> ir.Value | None:
        """For an access at a constant `offset` c (below 2**30), `extent - c - base` (i32):
        the thread's element `base + k` is inside exactly when `k < limit`, one compare with
        the constant k per element (no overflow: extents are below 2**31 and `base` below
        2**20). None at other offsets (`inside` then).

        The value goes through an opaque `mov` of the access's own, so that LLVM cannot
        merge the compares of two accesses (a load's and a later store's of the same
        columns) into one predicate: a thread holds 16 to 64 columns of a row, and the
        predicates that live from the load to the store outnumber sm_90's 7 predicate
        registers, so ptxas packs them into the bits of a register and unpacks them at each
        use (2-4 instructions a column, where a compare at the access costs one). Odd-width
        softmax: 583 to 542 SASS instructions (docs/benchmarks.md)."""
        if not isinstance(offset, ir.Constant) or not 0 <= offset.constant < 2**30:
            return None
        b = self.b
        value = b.sub(b.trunc(extent, I32), base)
        if offset.constant:
            value = b.sub(value, ir.Constant(I32, offset.constant))
        mov = ir.InlineAsm(ir.FunctionType(I32, [I32]), "mov.b32 $0, $1;", "=r,r", side_effect=True)
        return b.call(mov, [value])

    # -- tile: memory ---------------------------------------------------------------------------

    def _view_offsets(self, op: Operation, t: TileType) -> tuple[View, list[ir.Value], list[bool]]:
        """An access's lowered view, its offsets, and per dimension whether bounds are checked
        there (not promised by `in_bounds`)."""
        promised = op.attributes.get("in_bounds")
        checked = [not x for x in promised.value] if promised is not None else [True] * t.rank
        return self.values[op.view], [self.values[v] for v in op.offsets], checked

    def _access(self, op: Operation, t: TileType) -> tuple[list[ir.Value], list[Any]]:
        """Per slot of a load or store of `t`: the element pointer and the in-bounds predicate
        (None where the op's `in_bounds` promises every dimension and there is no mask)."""
        b = self.b
        view, offsets, checked = self._view_offsets(op, t)
        m = thread_map(t)
        addresses, inside = [], []
        for d, (base, indices) in enumerate(zip(self.bases(m), self.dim_indices(m))):
            adds, oks = [], []
            limit = self.limit(offsets[d], base, view.extents[d]) if checked[d] else None
            # A bound on the extent (a whole dimension's `tilec.max_extent`): a slot whose
            # column is at or past it for every thread is outside for every extent.
            bound = self.extent_bounds.get(id(view.extents[d])) if limit is not None else None
            for i, k in zip(indices, m.dims[d].offsets):
                index = b.add(offsets[d], b.sext(i, I64))
                if bound is not None and offsets[d].constant + k >= bound:
                    oks.append(NEVER)
                elif limit is not None:
                    oks.append(b.icmp_signed(">", limit, ir.Constant(I32, k)))
                else:
                    oks.append(self.inside(offsets[d], i, view.extents[d]) if checked[d] else None)
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
                ok = q if ok is None else ok if q is None else _both(b, ok, q)
            if masks is not None:
                ok = masks[slot] if ok is None else _both(b, ok, masks[slot])
            pointers.append(b.gep(view.pointer, [offset], source_etype=element))
            predicates.append(ok)
        return pointers, predicates

    def load(self, op: Operation) -> list[Any]:
        t = op.result.type
        padding_attr = op.attributes.get("padding")
        padding = 0 if padding_attr is None else padding_attr.value
        if isinstance(padding, bool):
            padding = int(padding)
        other = constant(t.element, padding)
        vector = op.attributes.get("vector")
        if vector is not None and vector.value > 1 and "checked" in op.attributes:
            return [self._checked_load(op, t, vector.value, other)]
        pointers, predicates = self._access(op, t)
        vector = op.attributes.get("vector")
        if vector is not None and vector.value > 1:
            return [self._vector_load(t, vector.value, pointers, predicates, other)]
        return [[self._global_load(t.element, p, q, other) for p, q in zip(pointers, predicates)]]

    def _checked_runs(self, op: Operation, t: TileType, v: int, owner) -> list[_Run]:
        """The thread's runs of `v` consecutive slots of a `checked` access (unit last
        stride: vectorize asks for it), each with what decides whether it moves whole."""
        b = self.b
        view, offsets, checked = self._view_offsets(op, t)
        m = thread_map(t)
        last = t.rank - 1
        indices = self.dim_indices(m)
        masks = self.values[op.mask] if op.mask is not None else None
        element = memory_type(t.element)
        run_bytes = v * max(bit_width(t.element) // 8, 1)
        runs = []
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            k = m.slot_multi_index(s)
            offset, ok = None, owner
            for d in range(last):
                index = b.add(offsets[d], b.sext(indices[d][k[d]], I64))
                term = b.mul(index, view.strides[d])
                offset = term if offset is None else b.add(offset, term)
                if checked[d]:
                    q = b.icmp_unsigned("<", index, view.extents[d])
                    ok = q if ok is None else b.and_(ok, q)
            first = b.add(offsets[last], b.sext(indices[last][k[last]], I64))
            term = b.mul(first, view.strides[last])
            offset = term if offset is None else b.add(offset, term)
            pointer = b.gep(view.pointer, [offset], source_etype=element)
            low = b.and_(b.ptrtoint(pointer, I64), ir.Constant(I64, run_bytes - 1))
            aligned = b.icmp_unsigned("==", low, ir.Constant(I64, 0))
            inside, outside = ok, None if ok is None else b.not_(ok)
            extent = view.extents[last] if checked[last] else None
            if extent is not None:  # signed: a run may start before the view
                end = b.add(first, ir.Constant(I64, v - 1))
                zero = ir.Constant(I64, 0)
                within = b.and_(b.icmp_signed(">=", first, zero), b.icmp_signed("<", end, extent))
                beyond = b.or_(b.icmp_signed("<", end, zero), b.icmp_signed(">=", first, extent))
                inside = within if inside is None else b.and_(inside, within)
                outside = beyond if outside is None else b.or_(outside, beyond)
            run_masks = masks[s : s + v] if masks is not None else None
            for q in run_masks or ():
                inside = q if inside is None else b.and_(inside, q)
            whole = aligned if inside is None else b.and_(aligned, inside)
            if outside is not None:
                whole = b.or_(whole, outside)
            runs.append(_Run(pointer, first, ok, extent, run_masks, inside, whole))
        return runs

    def _all_whole(self, runs: list[_Run]) -> ir.Value:
        """Whether every run of the thread moves whole or not at all."""
        fast = runs[0].whole
        for run in runs[1:]:
            fast = self.b.and_(fast, run.whole)
        return fast

    def _run_element(self, run: _Run, k: int, element: Type) -> tuple[ir.Value, Any]:
        """Element `k` of `run`: its pointer and predicate (None: always), built where the
        builder stands (the run's element-by-element branch)."""
        b = self.b
        pointer = run.pointer
        if k:
            pointer = b.gep(pointer, [ir.Constant(I64, k)], source_etype=memory_type(element))
        ok = run.ok
        if run.extent is not None:  # 0 <= first + k < extent, without forming first + k
            remaining = b.sub(run.extent, run.first)
            q = b.and_(
                b.icmp_signed(">=", run.first, ir.Constant(I64, -k)),
                b.icmp_signed(">", remaining, ir.Constant(I64, k)),
            )
            ok = q if ok is None else b.and_(ok, q)
        if run.masks is not None:
            ok = run.masks[k] if ok is None else b.and_(ok, run.masks[k])
        return pointer, ok

    def _checked_load(self, op: Operation, t: TileType, v: int, other) -> list[ir.Value]:
        """Per run of `v` slots (a `checked` access): one vector load where the run is whole,
        else one predicated load per element."""
        b = self.b
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        other_bits = [self._to_bits(other, ir.IntType(bits), t.element)] * v
        runs = self._checked_runs(op, t, v, None)
        fast_values, slow_values = [], []
        with b.if_else(self._all_whole(runs)) as (fast, slow):
            with fast:
                for run in runs:
                    loaded = memory.global_load_vector(
                        b, access, run.pointer, run.inside, other_bits
                    )
                    fast_values += [self._from_bits(x, t.element) for x in loaded]
                fast_block = b.block
            with slow:
                for run in runs:
                    for k in range(v):
                        pointer, ok = self._run_element(run, k, t.element)
                        slow_values.append(self._global_load(t.element, pointer, ok, other))
                slow_block = b.block
        values = []
        for x, y in zip(fast_values, slow_values):
            phi = b.phi(x.type)
            phi.add_incoming(x, fast_block)
            phi.add_incoming(y, slow_block)
            values.append(phi)
        return values

    def _vector_load(self, t: TileType, v: int, pointers, predicates, other) -> list[ir.Value]:
        """One `ld.global.v*` per run of `v` slots (`tilec.lowering.memory`): the run's first
        pointer and predicate stand for all (the vectorize pass proved that they may)."""
        m = thread_map(t)
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        other_bits = [self._to_bits(other, ir.IntType(bits), t.element)] * v
        values = []
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            if predicates[s] is NEVER:  # a run past a whole dimension's bound: the padding
                values += [other] * v
                continue
            loaded = memory.global_load_vector(
                self.b, access, pointers[s], predicates[s], other_bits
            )
            values += [self._from_bits(x, t.element) for x in loaded]
        return values

    def _global_load(self, t: Type, pointer: ir.Value, predicate, other: ir.Constant):
        b = self.b
        if predicate is NEVER:  # outside whatever the extent: the padding, no load
            return other
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
        owner = self.unique_owner(thread_map(t))
        vector = op.attributes.get("vector")
        if vector is not None and vector.value > 1 and "checked" in op.attributes:
            self._checked_store(op, t, vector.value, owner, self.values[op.value])
            return None
        pointers, predicates = self._access(op, t)
        if owner is not None:
            predicates = [owner if p is None else _both(self.b, p, owner) for p in predicates]
        element = t.element
        if vector is not None and vector.value > 1:
            self._vector_store(t, vector.value, pointers, predicates, self.values[op.value])
            return None
        for p, v, q in zip(pointers, self.values[op.value], predicates):
            self._scalar_store(element, p, v, q)
        return None

    def _scalar_store(self, element: Type, p: ir.Value, v: ir.Value, q) -> None:
        """One element stored at `p` where `q` holds (None: always, a plain store)."""
        if q is NEVER:  # outside whatever the extent
            return
        if q is None:  # always in bounds, one owner: a plain store
            if element == IntegerType(1):
                v = self.b.zext(v, I8)
            self.b.store(v, p, align=max(bit_width(element) // 8, 1))
            return
        letter, ptx_type, reg = register_kind(element)
        asm = ir.InlineAsm(
            ir.FunctionType(ir.VoidType(), [GLOBAL_PTR, reg, I1]),
            f"@$2 st.global.{ptx_type} [$0], $1;",
            f"l,{letter},b",
            side_effect=True,
        )
        self.b.call(asm, [p, self._to_bits(v, reg, element), q])

    def _checked_store(self, op: Operation, t: TileType, v: int, owner, values) -> None:
        """Per run of `v` slots (a `checked` access): one vector store where the run is whole,
        else one predicated store per element."""
        b = self.b
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        register = ir.IntType(bits)
        runs = self._checked_runs(op, t, v, owner)
        with b.if_else(self._all_whole(runs)) as (fast, slow):
            with fast:
                for s, run in enumerate(runs):
                    run_bits = [
                        self._to_bits(x, register, t.element) for x in values[s * v : (s + 1) * v]
                    ]
                    memory.global_store_vector(b, access, run.pointer, run.inside, run_bits)
            with slow:
                for s, run in enumerate(runs):
                    for k, x in enumerate(values[s * v : (s + 1) * v]):
                        pointer, ok = self._run_element(run, k, t.element)
                        self._scalar_store(t.element, pointer, x, ok)

    def _vector_store(self, t: TileType, v: int, pointers, predicates, values) -> None:
        """One `st.global.v*` per run of `v` slots, like `_vector_load`."""
        m = thread_map(t)
        bits = 8 if t.element == IntegerType(1) else bit_width(t.element)
        access = memory.VectorAccess(v, bits)
        register = ir.IntType(bits)
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            if predicates[s] is NEVER:  # a run past a whole dimension's bound
                continue
            run = [self._to_bits(x, register, t.element) for x in values[s : s + v]]
            memory.global_store_vector(self.b, access, pointers[s], predicates[s], run)


# The predicate of a slot outside the view whatever its extent (`_access`: past a whole
# dimension's bound): its load is the padding, its store nothing.
NEVER = ir.Constant(I1, 0)


def _both(b: ir.IRBuilder, p: ir.Value, q: ir.Value) -> ir.Value:
    """`p and q`, NEVER where either is."""
    return NEVER if p is NEVER or q is NEVER else b.and_(p, q)
