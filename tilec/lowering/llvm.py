"""Lowering of specialized, laid-out tile IR to LLVM IR for NVPTX: each kernel becomes one
function written for one thread of a block.

What it assumes (what `specialize` and `assign-layouts` leave): static tile shapes, a
`#blocked` layout on every tile, `tilec.num_warps` and `tilec.tile_sizes` on each kernel; the
tile operands of an elementwise op (`arith`, `math`, `tile.select`, `tile.cast`) are in its
result's layout, and a dot's accumulator is in its result's layout. Every other op accepts any
layouts: remaps (`tile.convert_layout`, `tile.broadcast`, `tile.expand_dims`, `tile.reshape`,
`tile.transpose`) are register copies when each thread already holds what it needs and go
through shared memory otherwise (`tilec.lowering.exchange` decides).

How values are held:
* a scalar is one LLVM value, computed by every thread alike (so it is uniform in the block);
  `index` is `i64`, `i1` is `i1` (a byte in memory);
* a tile is the Python list of the thread's slots (`tilec.lowering.layouts`);
* a tensor view is its pointer, extents and strides (kernel parameters: `tilec.lowering.abi`).

How ops become per-thread code:
* `tile.load`/`tile.store`: one predicated `ld.global`/`st.global` (inline PTX) per element,
  the predicate being "inside every extent" (an unsigned compare, so a negative index is out)
  and the mask; masked-off loads give `padding`. A replicated tile is stored only by the
  threads that hold no copies.
* reductions: within the thread, then `shfl.sync.bfly` across lanes, then across warps through
  shared memory; dots: both operands staged row-major in shared memory, then a loop over K
  of FMAs into the thread's accumulator elements (tensor cores come with Stage E).
* `scf.for` is a loop whose carried values are phis (one per slot); `scf.if` branches and
  merges with phis. Barriers only ever appear under uniform control flow: conditions and trip
  counts are scalars, which every thread computes alike.
* math functions: `tilec.lowering.mathlib` (its docstring states their precision).

Line info (`line_info=True`, the default): the module carries LLVM debug metadata that only
asks for line tables (`emissionKind: DebugDirectivesOnly`, as Triton does: `.file`/`.loc`
directives in the PTX, no DWARF sections): a `DISubprogram` per kernel at its `def`, and on
every instruction the `DILocation` of the op it was lowered from (hoisted per-thread
constants carry the op that first needed them). Files are named as the ops' locations name
them, i.e. as the user gave the path. `llvm_line_locations` reads the locations back from
the text.

Shared memory is one dynamic `extern .shared` array per module (`SHARED_SYMBOL`). An op that
exchanges through scratch (a remap, a cross-warp reduction, an FMA dot) writes its bytes,
waits at a barrier, and reads them back; the launch needs the largest single use
(`KernelABI.shared_bytes`). No barrier follows the reads: the lowering remembers which scratch
bytes were read since the last barrier (`unfenced_reads`) and puts one before the next write
that overlaps them (a later op's scratch, any `tile.store_shared` or `tile.async_copy`, the
next iteration of a loop), so the kernel's last exchange ends without one.

f64 transcendental functions (`exp`, `log`, `tanh`, ...) are not lowered yet: they are an
error at their source location, with a hint to compute them in f32. Any other op without a
lowering stops compilation with an internal error naming the op.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from tilec.diagnostics import InternalCompilerError, Location, TileError
from tilec.dialects import arith, scf
from tilec.dialects import gather as G
from tilec.dialects import math as mathd
from tilec.dialects import random as R
from tilec.dialects import shared as S
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.ir.attributes import FloatAttr
from tilec.ir.core import Block, Operation, Value
from tilec.ir.printer import print_op
from tilec.ir.types import (
    SCALAR_TYPES,
    FloatType,
    IndexType,
    IntegerType,
    TensorType,
    TileType,
    Type,
)
from tilec.lowering import atomic as atomic_lowering
from tilec.lowering import (
    gather,
    mathlib,
    memory,
    random,
    scan,
    shared_memory,
    split,
    tensorcore,
    wgmma,
)
from tilec.lowering.abi import (
    ALIGNMENT,
    Specialization,
    kernel_abi,
    kernel_specialization,
    set_kernel_specialization,
)
from tilec.lowering.elementwise import FLOAT_BINARY, INT_BINARY, ElementwiseLowering
from tilec.lowering.exchange import (
    REMAP_OPS,
    SCRATCH_ALIGNMENT,
    dot_b_offset,
    op_scratch_bytes,
    reduce_plan,
    remap_scratch_coefficients,
    remap_scratch_strides,
    remap_source_slots,
    thread_map,
)
from tilec.lowering.layouts import WARP_SIZE, DimMap, ThreadMap, row_major_strides
from tilec.lowering.llvm_types import (
    constant,
    llvm_type,
    memory_type,
)
from tilec.passmanager import save_crash_ir

__all__ = [
    "ARCHES",
    "DATA_LAYOUT",
    "SHARED_SYMBOL",
    "TRIPLE",
    "NotLowered",
    "llvm_line_locations",
    "lower_to_llvm",
]

ARCHES = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
SHARED_SYMBOL = "tilec_shared"

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)


class NotLowered(NotImplementedError):
    """An op (or a use of one) the lowering does not handle yet."""

    def __init__(self, op: Operation, what: str = "is not lowered to LLVM yet"):
        where = f" at {op.loc}" if op.loc.known else ""
        super().__init__(f"'{op.name}'{where} {what}")


@dataclass
class View:
    """A lowered tensor view: its pointer, extents and strides (i64, in elements)."""

    pointer: ir.Value
    extents: list[ir.Value]
    strides: list[ir.Value]


def lower_to_llvm(
    module: ModuleOp,
    arch: str,
    specializations: Mapping[str, Specialization] | None = None,
    *,
    line_info: bool = True,
) -> ir.Module:
    """An LLVM module with one kernel function per `func` of `module` (specialized and laid
    out), for NVPTX architecture `arch` (one of `ARCHES`). The code assumes the facts about the
    arguments that each kernel's IR records (`tilec.aligned`, `tilec.unit`, `tilec.divisible`:
    `tilec.lowering.abi.kernel_specialization`, written by the `assume` pass): pointers marked
    `align 16`, unit strides folded to the constant 1, `llvm.assume` that extents and strides
    divide by 16. `specializations` (by kernel name) must agree with those; a kernel whose IR
    records none takes the one given (it is recorded on the kernel). With `line_info`, each
    instruction carries the source location of its op (the module docstring says how). An op
    that cannot be lowered raises `InternalCompilerError` naming it, with the IR saved."""
    if arch not in ARCHES:
        raise TileError(f"unknown architecture '{arch}'", hint="one of " + ", ".join(ARCHES))
    llmod = ir.Module(name=module.loc.file or "tilec")
    llmod.triple = TRIPLE
    llmod.data_layout = DATA_LAYOUT
    debug_info = _DebugInfo(llmod, module.loc.file) if line_info else None
    atomic_lowering.check_arch(module, arch)
    for func in module.functions:
        try:
            specialization = _specialization(func, (specializations or {}).get(func.sym_name))
            _KernelLowering(func, llmod, specialization, debug_info).lower()
        except TileError:
            raise
        except Exception as e:
            path = save_crash_ir("lower-to-llvm", print_op(module, print_locations=True), None)
            raise InternalCompilerError("lower-to-llvm", e, path) from e
    return llmod


class _DebugInfo:
    """The module's line-table metadata: one compile unit, a file per source file, a
    subprogram per kernel, and a location per distinct (scope, line, column)."""

    def __init__(self, llmod: ir.Module, filename: str):
        self.module = llmod
        self._files: dict[str, ir.DIValue] = {}
        self.unit = llmod.add_debug_info(
            "DICompileUnit",
            {
                "language": ir.DIToken("DW_LANG_C"),
                "file": self.file(filename or "<unknown>"),
                "producer": "tilec",
                "isOptimized": True,
                "runtimeVersion": 0,
                "emissionKind": ir.DIToken("DebugDirectivesOnly"),
            },
            is_distinct=True,
        )
        llmod.add_named_metadata("llvm.dbg.cu", self.unit)
        for flag, value in (("Dwarf Version", 4), ("Debug Info Version", 3)):
            llmod.add_named_metadata("llvm.module.flags", [I32(2), flag, I32(value)])
        self._no_types = llmod.add_debug_info("DISubroutineType", {"types": llmod.add_metadata([])})
        self._locations: dict[tuple[int, str, int, int], ir.DIValue] = {}

    def file(self, name: str) -> ir.DIValue:
        found = self._files.get(name)
        if found is None:
            found = self.module.add_debug_info("DIFile", {"filename": name, "directory": ""})
            self._files[name] = found
        return found

    def subprogram(self, fn: ir.Function, loc: Location) -> ir.DIValue:
        """The kernel's subprogram (at its `def`), attached to `fn`."""
        file = self.file(loc.file or "<unknown>")
        line = max(loc.line, 0)
        sp = self.module.add_debug_info(
            "DISubprogram",
            {
                "name": fn.name,
                "linkageName": fn.name,
                "scope": file,
                "file": file,
                "line": line,
                "type": self._no_types,
                "scopeLine": line,
                "unit": self.unit,
                "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            },
            is_distinct=True,
        )
        fn.set_metadata("dbg", sp)
        return sp

    def location(self, subprogram: ir.DIValue, sp_file: str, loc: Location) -> ir.DIValue | None:
        """The `DILocation` of `loc` in `subprogram` (whose file is `sp_file`); a location in
        another file is scoped by a `DILexicalBlockFile` naming it. None: `loc` is unknown."""
        if not loc.known:
            return None
        key = (id(subprogram), loc.file, loc.line, loc.col)
        found = self._locations.get(key)
        if found is None:
            scope = subprogram
            if loc.file != sp_file:
                scope = self.module.add_debug_info(
                    "DILexicalBlockFile",
                    {"scope": subprogram, "file": self.file(loc.file), "discriminator": 0},
                )
            found = self.module.add_debug_info(
                "DILocation", {"line": loc.line, "column": loc.col, "scope": scope}
            )
            self._locations[key] = found
        return found


_METADATA_NODE = re.compile(r"^!(\d+) = (?:distinct )?!(DI\w+)\((.*)\)\s*$")
_METADATA_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|[^,]+)')
_DEBUG_REFERENCE = re.compile(r"!dbg !(\d+)")


def llvm_line_locations(text: str) -> tuple[Location | None, ...]:
    """Per line of LLVM IR `text`, the source location its `!dbg` attachment names (a
    kernel's `define` line: its `def`), None for lines without one."""
    nodes: dict[str, tuple[str, dict[str, str]]] = {}
    lines = text.splitlines()
    for line in lines:
        if line.startswith("!") and (m := _METADATA_NODE.match(line)):
            fields = {k: v.strip() for k, v in _METADATA_FIELD.findall(m.group(3))}
            nodes[m.group(1)] = (m.group(2), fields)

    def file_of(ref: str) -> str:
        kind, fields = nodes.get(ref.lstrip("!"), ("", {}))
        if kind == "DIFile":
            return _unescape(fields.get("filename", '""')[1:-1])
        return file_of(fields["file"]) if "file" in fields else ""

    found: dict[str, Location | None] = {}

    def location(ref: str) -> Location | None:
        if ref not in found:
            kind, fields = nodes.get(ref, ("", {}))
            if kind == "DILocation":
                scope = fields.get("scope", "")
                found[ref] = Location(
                    file_of(scope), int(fields.get("line", 0)), int(fields.get("column", 0))
                )
            elif kind == "DISubprogram":
                found[ref] = Location(file_of(fields.get("file", "")), int(fields["line"]), 1)
            else:
                found[ref] = None
        return found[ref]

    return tuple(
        location(m.group(1)) if "!dbg" in line and (m := _DEBUG_REFERENCE.search(line)) else None
        for line in lines
    )


def _unescape(text: str) -> str:
    """An LLVM string's contents (`\\XX` escapes hex bytes of UTF-8) as text."""
    if "\\" not in text:
        return text
    data = re.sub(rb"\\([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), text.encode())
    return data.decode("utf-8", "replace")


def _specialization(func: FuncOp, given: Specialization | None) -> Specialization:
    """The facts `func` is lowered with: its IR's, which `given` (if any) must match."""
    recorded = kernel_specialization(func)
    if given is None or given == recorded:
        return recorded
    if recorded:
        raise ValueError(
            f"kernel '{func.sym_name}' is compiled for {given.to_json()} but its IR records "
            f"{recorded.to_json()} (the assume pass)"
        )
    set_kernel_specialization(func, given)
    return given


class _KernelLowering(ElementwiseLowering):
    """Lowers one kernel. `self.b` inserts at the current point; `self.prologue` inserts at the
    end of the entry block, where per-thread constants (thread coordinates) are computed once
    so that every later block may use them."""

    def __init__(
        self,
        func: FuncOp,
        llmod: ir.Module,
        specialization: Specialization,
        debug_info: _DebugInfo | None = None,
    ):
        self.func = func
        self.module = llmod
        self.specialization = specialization
        self.abi = kernel_abi(func)
        types = [_parameter_type(p.kind, p.dtype) for p in self.abi.parameters]
        self.fn = ir.Function(llmod, ir.FunctionType(ir.VoidType(), types), func.sym_name)
        self.fn.calling_convention = "ptx_kernel"
        self.debug_info = debug_info
        if debug_info is not None:
            self.subprogram = debug_info.subprogram(self.fn, func.loc)
            self.subprogram_file = func.loc.file or "<unknown>"
        for arg, p in zip(self.fn.args, self.abi.parameters):
            arg.name = p.name
            if p.name in specialization.aligned:
                arg.attributes.align = ALIGNMENT
        # Every launch uses exactly this many threads; ptxas may plan registers for it.
        llmod.add_named_metadata(
            "nvvm.annotations",
            [self.fn, ir.MetaDataString(llmod, "reqntidx"), ir.Constant(I32, self.abi.num_threads)],
        )
        # The occupancy a pass asked for (`tilec.min_blocks_per_sm`): ptxas then keeps each
        # thread to the registers that let that many blocks share an SM.
        min_blocks = func.attributes.get("tilec.min_blocks_per_sm")
        if min_blocks is not None:
            llmod.add_named_metadata(
                "nvvm.annotations",
                [
                    self.fn,
                    ir.MetaDataString(llmod, "minctasm"),
                    ir.Constant(I32, int(min_blocks.value)),
                ],
            )
        entry = self.fn.append_basic_block("entry")
        body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(entry)
        tid = self._sreg("tid.x")
        self.lane = self.b.and_(tid, ir.Constant(I32, 31))
        self.warp = self.b.lshr(tid, ir.Constant(I32, 5))
        self.num_warps = self.abi.num_threads // WARP_SIZE
        self.buffer_offsets = shared_memory.buffer_offsets(func)
        # Each op's scratch starts after the buffers live at it (shared_memory.scratch_bases).
        self.scratch_bases = shared_memory.scratch_bases(func)
        self.scratch_fences = shared_memory.scratch_fences(func, self.scratch_bases)
        self.scratch_base = 0
        # Scratch byte ranges read since the last barrier: a write over them waits for one.
        self.unfenced_reads: list[tuple[int, int]] = []
        self.scratch = None
        self.wgmma = wgmma.uses_wgmma(func)  # barriers then fence the async proxy
        if self.abi.shared_bytes:
            self.scratch = _shared_array(llmod)
            if self.wgmma:  # wgmma's 128-byte swizzle repeats every 1 KiB
                self.scratch.align = max(self.scratch.align, wgmma.SWIZZLE_ATOM)
        self.prologue = ir.IRBuilder(entry)
        self.prologue.position_before(self.b.branch(body))
        self.b.position_at_end(body)
        self.values: dict[Value, Any] = {}
        self._bases: dict[tuple[DimMap, ...], list[ir.Value]] = {}
        self._owners: dict[tuple[DimMap, ...], ir.Value | None] = {}
        self._bind_arguments()

    def _sreg(self, name: str) -> ir.Value:
        return mathlib.call_intrinsic(self.b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def _bind_arguments(self) -> None:
        args = iter(self.fn.args)
        for arg in self.func.arguments:
            t = arg.type
            if isinstance(t, TensorType):
                pointer = next(args)
                extents = [self._integer_parameter(next(args)) for _ in range(t.rank)]
                strides = [self._integer_parameter(next(args)) for _ in range(t.rank)]
                self.values[arg] = View(pointer, extents, strides)
            elif isinstance(t, TileType):
                raise ValueError(f"kernel argument of tile type {t}: kernels take tensors")
            else:
                value = next(args)
                if t == IntegerType(1):  # passed as a byte
                    value = self.b.icmp_unsigned("!=", value, ir.Constant(I8, 0))
                self.values[arg] = value

    def _integer_parameter(self, value: ir.Argument) -> ir.Value:
        """An extent or stride, with what the specialization promises about it: a unit stride
        is the constant 1 (its multiplications fold away), a known multiple (of `DIVISOR`, or
        of a smaller power of two: `Specialization.multiple`) is told to LLVM through
        `llvm.assume`. The launcher refuses arguments that break either."""
        if value.name in self.specialization.unit:
            return ir.Constant(I64, 1)
        m = self.specialization.multiple(value.name)
        if m > 1:
            remainder = self.b.urem(value, ir.Constant(I64, m))
            holds = self.b.icmp_unsigned("==", remainder, ir.Constant(I64, 0))
            mathlib.call_intrinsic(self.b, "llvm.assume", ir.VoidType(), [holds])
        return value

    # -- the walk -------------------------------------------------------------------------------

    def lower(self) -> None:
        self.block(self.func.body.block)

    def block(self, block: Block) -> list[Any] | None:
        """Lower the ops of `block`; the lowered values it yields (None: it ends otherwise)."""
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                return [self.values[v] for v in op.operands]
            if isinstance(op, ReturnOp):
                self.b.ret_void()
                return None
            self.op(op)
        return None

    def op(self, op: Operation) -> None:
        self.scratch_base = self.scratch_bases.get(op, 0)
        method = LOWERINGS.get(type(op))
        if method is None:
            raise NotLowered(op)
        if self.debug_info is not None:
            # The op's instructions (and the constants it hoists) carry its location; an op
            # with regions gets it back for what follows them (loop increments, merges).
            outer = self.b.debug_metadata
            here = self.debug_info.location(self.subprogram, self.subprogram_file, op.loc)
            self.b.debug_metadata = self.prologue.debug_metadata = here or outer
        if op in self.scratch_fences or (
            self.unfenced_reads and isinstance(op, (S.StoreSharedOp, S.AsyncCopyOp))
        ):
            self.barrier()
        results = method(self, op)
        if self.debug_info is not None:
            self.b.debug_metadata = self.prologue.debug_metadata = outer
        if results is not None:
            for r, v in zip(op.results, results):
                self.values[r] = v

    # -- thread coordinates ---------------------------------------------------------------------

    def bases(self, m: ThreadMap) -> list[ir.Value]:
        """Per dimension, the thread's first index (i32), computed in the entry block."""
        key = tuple(m.dims)
        found = self._bases.get(key)
        if found is None:
            p = self.prologue
            found = []
            for d in m.dims:
                found.append(p.and_(self._position(d), ir.Constant(I32, d.size - 1)))
            self._bases[key] = found
        return found

    def _position(self, d: DimMap) -> ir.Value:
        p = self.prologue
        terms: list[ir.Value] = []
        for value, shift, mask, mul in (
            (self.lane, d.lane_shift, d.lane_mask, d.lane_mul),
            (self.warp, d.warp_shift, d.warp_mask, d.warp_mul),
        ):
            if mask == 0:
                continue
            field = p.and_(p.lshr(value, ir.Constant(I32, shift)), ir.Constant(I32, mask))
            terms.append(p.mul(field, ir.Constant(I32, mul)))
        if not terms:
            return ir.Constant(I32, 0)
        return terms[0] if len(terms) == 1 else p.add(terms[0], terms[1])

    def unique_owner(self, m: ThreadMap) -> ir.Value | None:
        """True in the threads that hold no replicated copies (None: no thread holds any)."""
        key = m.owner_dims  # a slice's replicas too: one of its copies is the owner
        if key not in self._owners:
            p = self.prologue
            owner: ir.Value | None = None
            for d in key:
                if d.wraps:
                    inside = p.icmp_unsigned("<", self._position(d), ir.Constant(I32, d.size))
                    owner = inside if owner is None else p.and_(owner, inside)
            self._owners[key] = owner
        return self._owners[key]

    def dim_indices(self, m: ThreadMap) -> list[list[ir.Value]]:
        """Per dimension, the index (i32) of each of the thread's positions."""
        return [
            [self.b.add(base, ir.Constant(I32, off)) if off else base for off in d.offsets]
            for base, d in zip(self.bases(m), m.dims)
        ]

    def flat_indices(self, m: ThreadMap, coefficients: tuple[int, ...]) -> list[ir.Value]:
        """Per slot, `sum(index[d] * coefficients[d])` (i32)."""
        b = self.b
        start: ir.Value = ir.Constant(I32, 0)
        for base, c in zip(self.bases(m), coefficients):
            if c:
                term = b.mul(base, ir.Constant(I32, c)) if c != 1 else base
                start = term if isinstance(start, ir.Constant) else b.add(start, term)
        flats = []
        for slot in range(m.num_slots):
            k = m.slot_multi_index(slot)
            offset = sum(d.offsets[kd] * c for d, kd, c in zip(m.dims, k, coefficients))
            flats.append(b.add(start, ir.Constant(I32, offset)) if offset else start)
        return flats

    # -- shared scratch -------------------------------------------------------------------------

    def barrier(self) -> None:
        mathlib.call_intrinsic(self.b, "llvm.nvvm.barrier0", ir.VoidType(), [])
        self.unfenced_reads = []

    def _scratch_range(self, op: Operation) -> tuple[int, int]:
        return self.scratch_base, self.scratch_base + op_scratch_bytes(op)

    def before_scratch_write(self, op: Operation) -> None:
        """A barrier when `op`'s scratch overlaps bytes some thread may still be reading."""
        start, end = self._scratch_range(op)
        if any(s < end and start < e for s, e in self.unfenced_reads):
            self.barrier()

    def after_scratch_read(self, op: Operation) -> None:
        """`op` has read its scratch back: the next write over it needs a barrier first."""
        self.unfenced_reads.append(self._scratch_range(op))

    def scratch_pointer(self, t: Type, index: ir.Value, byte_offset: int = 0) -> ir.Value:
        assert self.scratch is not None, "shared scratch used but not sized"
        base = self.scratch
        byte_offset += self.scratch_base
        if byte_offset:
            base = self.b.gep(base, [ir.Constant(I32, byte_offset)], source_etype=I8)
        return self.b.gep(base, [index], source_etype=memory_type(t))

    def scratch_store(self, t: Type, index: ir.Value, value: ir.Value, byte_offset: int = 0):
        if t == IntegerType(1):
            value = self.b.zext(value, I8)
        self.b.store(value, self.scratch_pointer(t, index, byte_offset))

    def scratch_load(self, t: Type, index: ir.Value, byte_offset: int = 0) -> ir.Value:
        v = self.b.load(self.scratch_pointer(t, index, byte_offset), typ=memory_type(t))
        return self.b.trunc(v, I1) if t == IntegerType(1) else v

    memory_type = staticmethod(memory_type)

    def shared_store(self, t: Type, byte_offset: ir.Value, value: ir.Value) -> None:
        """Store `value` at `byte_offset` (i32) bytes into the shared array."""
        if t == IntegerType(1):
            value = self.b.zext(value, I8)
        pointer = self.b.gep(self.scratch, [byte_offset], source_etype=I8)
        self.b.store(value, pointer)

    def shared_load(self, t: Type, byte_offset: ir.Value) -> ir.Value:
        pointer = self.b.gep(self.scratch, [byte_offset], source_etype=I8)
        v = self.b.load(pointer, typ=memory_type(t))
        return self.b.trunc(v, I1) if t == IntegerType(1) else v

    def guarded_load(self, t: Type, pointer: ir.Value, predicate: ir.Value) -> ir.Value:
        """A global load where `predicate` holds, else zero."""
        return self._global_load(t, pointer, predicate, constant(t, 0))

    def when(self, predicate: ir.Value | None, emit) -> None:
        """Run `emit()` only in threads where `predicate` holds (always when None)."""
        if predicate is None:
            emit()
            return
        with self.b.if_then(predicate):
            emit()

    def write_tile(
        self,
        t: TileType,
        values: list[ir.Value],
        byte_offset: int = 0,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        """Store a tile into the scratch at `strides` (default row-major), each element by its
        unique owner."""
        m = thread_map(t)
        flats = self.flat_indices(m, strides or row_major_strides(t.shape))

        def emit() -> None:
            for flat, v in zip(flats, values):
                self.scratch_store(t.element, flat, v, byte_offset)

        self.when(self.unique_owner(m), emit)

    # -- operands -------------------------------------------------------------------------------

    def operand_slots(self, v: Value, n: int) -> list[ir.Value]:
        """A tile operand's slots, or a scalar operand repeated `n` times."""
        lowered = self.values[v]
        return lowered if isinstance(lowered, list) else [lowered] * n

    def elementwise(self, op: Operation, fn) -> list[Any]:
        """Apply `fn` slot by slot (scalars: once)."""
        return self.elementwise_of(op, fn, list(op.operands))

    def elementwise_of(self, op: Operation, fn, operands: list[Value]) -> list[Any]:
        """Apply `fn` slot by slot to `operands` (values laid out as `op`'s result)."""
        t = op.results[0].type
        if not isinstance(t, TileType):
            return [fn(*(self.values[v] for v in operands))]
        n = thread_map(t).num_slots
        columns = [self.operand_slots(v, n) for v in operands]
        return [[fn(*args) for args in zip(*columns)]]

    # -- tile: where, what ----------------------------------------------------------------------

    def program_id(self, op: Operation) -> list[Any]:
        return [self.b.zext(self._sreg("ctaid." + "xyz"[op.axis]), I64)]

    def num_programs(self, op: Operation) -> list[Any]:
        return [self.b.zext(self._sreg("nctaid." + "xyz"[op.axis]), I64)]

    def dim(self, op: Operation) -> list[Any]:
        return [self.values[op.view].extents[op.axis]]

    def symbol(self, op: Operation) -> list[Any]:
        raise NotLowered(op, f"'{op.symbol}' has no size: run the 'specialize' pass first")

    def full(self, op: Operation) -> list[Any]:
        t = op.result.type
        attr = op.attributes["value"]
        value = attr.value if isinstance(attr, FloatAttr) else int(attr.value)
        return [[constant(t.element, value)] * thread_map(t).num_slots]

    def splat(self, op: Operation) -> list[Any]:
        return [[self.values[op.input]] * thread_map(op.result.type).num_slots]

    def iota(self, op: Operation) -> list[Any]:
        t = op.result.type
        (indices,) = self.dim_indices(thread_map(t))
        return [[self.resize_int(i, llvm_type(t.element), signed=True) for i in indices]]

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
        bits = 8 if t.element == IntegerType(1) else _bits(t.element)
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
            value = b.load(pointer, typ=memory_type(t), align=max(_bits(t) // 8, 1))
            return (
                b.icmp_unsigned("!=", value, ir.Constant(I8, 0)) if t == IntegerType(1) else value
            )
        letter, ptx_type, reg = _register_kind(t)
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
        width = _bits(t)
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
        letter, ptx_type, reg = _register_kind(element)
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
                self.b.store(v, p, align=max(_bits(element) // 8, 1))
            else:
                self.b.call(asm, [p, self._to_bits(v, reg, element), q])
        return None

    def _vector_store(self, t: TileType, v: int, pointers, predicates, values) -> None:
        """One `st.global.v*` per run of `v` slots, like `_vector_load`."""
        m = thread_map(t)
        bits = 8 if t.element == IntegerType(1) else _bits(t.element)
        access = memory.VectorAccess(v, bits)
        register = ir.IntType(bits)
        for s in memory.vector_slots(m.counts, m.dims[-1].offsets, v):
            run = [self._to_bits(x, register, t.element) for x in values[s : s + v]]
            memory.global_store_vector(self.b, access, pointers[s], predicates[s], run)

    # -- tile: moving elements between threads --------------------------------------------------

    def remap(self, op: Operation) -> list[Any]:
        if tensorcore.is_register_fragment_conversion(op):
            return tensorcore.lower_register_fragments(self, op)
        src_t, dst_t = op.operands[0].type, op.results[0].type
        values = self.values[op.operands[0]]
        slots = remap_source_slots(op)
        if slots is not None:
            return [[values[s] for s in slots]]
        self.before_scratch_write(op)
        self.write_tile(src_t, values, strides=remap_scratch_strides(op))
        self.barrier()
        flats = self.flat_indices(thread_map(dst_t), remap_scratch_coefficients(op))
        result = [self.scratch_load(dst_t.element, f) for f in flats]
        self.after_scratch_read(op)
        return [result]

    def _combine(self, kind: str, t: Type, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if isinstance(t, FloatType):
            if kind == "sum":
                return b.fadd(x, y)
            if kind == "prod":
                return b.fmul(x, y)
            return self._float_intrinsic("maximum" if kind == "max" else "minimum", x, y)
        if kind == "sum":
            return b.add(x, y)
        if kind == "prod":
            return b.mul(x, y)
        return b.select(b.icmp_signed(">" if kind == "max" else "<", x, y), x, y)

    def shuffle_xor(self, v: ir.Value, lane_mask: int) -> ir.Value:
        """The value `v` of lane `lane ^ lane_mask` (every lane of the warp takes part)."""
        b = self.b
        args = [ir.Constant(I32, -1), None, ir.Constant(I32, lane_mask), ir.Constant(I32, 31)]
        if v.type == F32:
            args[1] = v
            return mathlib.call_intrinsic(b, "llvm.nvvm.shfl.sync.bfly.f32", F32, args)
        return mathlib.warp_shuffle(b, v, "bfly", lane_mask)

    def reduce(self, op: Operation) -> list[Any]:
        src_t: TileType = op.input.type
        t = src_t.element
        kind = op.kind
        m = thread_map(src_t)
        plan = reduce_plan(op)
        values = self.values[op.input]
        natural = m.without_dim(plan.axis)
        # 1. within the thread, 2. across lanes
        partials = []
        for slot in range(natural.num_slots):
            k = list(natural.slot_multi_index(slot))
            row = []
            for ka in range(m.counts[plan.axis]):
                full = (*k[: plan.axis], ka, *k[plan.axis :])
                row.append(values[sum(i * s for i, s in zip(full, m.slot_strides))])
            # Pairwise: a chain of n dependent combines would wait out each one's latency
            # (attention's row max: 32 in a row); a tree has log2(n) levels of independent
            # ones. Sums are then rounded in numpy's pairwise order, not left to right.
            while len(row) > 1:
                pairs = [self._combine(kind, t, x, y) for x, y in zip(row[::2], row[1::2])]
                row = pairs + row[len(pairs) * 2 :]
            acc = row[0]
            for lane_mask in plan.lane_bits:
                acc = self._combine(kind, t, acc, self.shuffle_xor(acc, lane_mask))
            partials.append(acc)
        result_t = op.result.type
        if plan.result_slots is not None:
            if isinstance(result_t, TileType):
                return [[partials[s] for s in plan.result_slots]]
            return [partials[0]]
        # 3. across warps (and into the result's layout) through shared memory
        d = m.dims[plan.axis]
        p = self.prologue
        size = math.prod(result_t.shape) if isinstance(result_t, TileType) else 1
        warp_row = p.and_(
            p.lshr(self.warp, ir.Constant(I32, d.warp_shift)), ir.Constant(I32, d.warp_mask)
        )
        lane_field = p.and_(
            p.lshr(self.lane, ir.Constant(I32, d.lane_shift)), ir.Constant(I32, d.lane_mask)
        )
        writer = p.and_(
            p.icmp_unsigned("==", lane_field, ir.Constant(I32, 0)),
            p.icmp_unsigned("<", warp_row, ir.Constant(I32, plan.warps)),
        )
        other_owner = self.unique_owner(natural)
        if other_owner is not None:
            writer = p.and_(writer, other_owner)
        row_start = p.mul(warp_row, ir.Constant(I32, size))
        flats = (
            self.flat_indices(natural, row_major_strides(result_t.shape))
            if isinstance(result_t, TileType)
            else [ir.Constant(I32, 0)]
        )

        def emit() -> None:
            for flat, v in zip(flats, partials):
                self.scratch_store(t, self.b.add(row_start, flat), v)

        self.before_scratch_write(op)
        self.when(writer, emit)
        self.barrier()
        if isinstance(result_t, TileType):
            reads = self.flat_indices(thread_map(result_t), row_major_strides(result_t.shape))
        else:
            reads = [ir.Constant(I32, 0)]
        results = []
        for flat in reads:
            acc = self.scratch_load(t, flat)
            for w in range(1, plan.warps):
                other = self.scratch_load(t, self.b.add(flat, ir.Constant(I32, w * size)))
                acc = self._combine(kind, t, acc, other)
            results.append(acc)
        self.after_scratch_read(op)
        return [results] if isinstance(result_t, TileType) else [results[0]]

    def dot(self, op: Operation) -> list[Any]:
        if wgmma.is_wgmma_dot(op):
            return wgmma.lower_wgmma_dot(self, op)
        if tensorcore.is_tensor_core_dot(op):
            return tensorcore.lower_mma_dot(self, op)
        b = self.b
        a_t, b_t, acc_t = op.a.type, op.b.type, op.result.type
        inner, cols = b_t.shape
        b_offset = dot_b_offset(op)
        self.before_scratch_write(op)
        self.write_tile(a_t, self.values[op.a])
        self.write_tile(b_t, self.values[op.b], b_offset)
        self.barrier()
        m = thread_map(acc_t)
        row_index, col_index = self.dim_indices(m)
        row_start = [b.mul(r, ir.Constant(I32, inner)) for r in row_index]
        acc_in = self.values[op.acc]
        # for k in 0..inner: acc[r, c] += a[row r, k] * b[k, col c]
        before = b.block
        header = self.fn.append_basic_block("dot.k")
        after = self.fn.append_basic_block("dot.done")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(I32)
        k.add_incoming(ir.Constant(I32, 0), before)
        accs = []
        for v in acc_in:
            phi = b.phi(v.type)
            phi.add_incoming(v, before)
            accs.append(phi)
        a_vals = [
            self._widen(self.scratch_load(a_t.element, b.add(r, k)), a_t.element, acc_t.element)
            for r in row_start
        ]
        k_row = b.mul(k, ir.Constant(I32, cols))
        b_vals = [
            self._widen(
                self.scratch_load(b_t.element, b.add(k_row, c), b_offset),
                b_t.element,
                acc_t.element,
            )
            for c in col_index
        ]
        new = []
        for slot, acc in enumerate(accs):
            r, c = m.slot_multi_index(slot)
            x, y = a_vals[r], b_vals[c]
            if isinstance(acc_t.element, FloatType):
                new.append(self._float_intrinsic("fma", x, y, acc))
            else:
                new.append(b.add(acc, b.mul(x, y)))
        next_k = b.add(k, ir.Constant(I32, 1))
        latch = b.block
        k.add_incoming(next_k, latch)
        for phi, v in zip(accs, new):
            phi.add_incoming(v, latch)
        b.cbranch(b.icmp_unsigned("<", next_k, ir.Constant(I32, inner)), header, after)
        b.position_at_end(after)
        self.after_scratch_read(op)
        return [new]

    def _widen(self, x: ir.Value, src: Type, dst: Type) -> ir.Value:
        if isinstance(src, FloatType):
            return self.convert_float(x, src, dst)  # type: ignore[arg-type]
        return self.resize_int(x, llvm_type(dst), signed=True)

    # -- scf ------------------------------------------------------------------------------------

    def for_op(self, op: scf.ForOp) -> list[Any]:
        """A bottom-tested loop behind a guard: `loop.body` runs while the induction variable
        is below the bound, `loop.exit` is reached only from the last iteration and
        `loop.end` joins it with the guard's path (the loop ran zero times). Work that must
        finish before the loop's results are read, and that a zero-trip path must not reach,
        goes in `loop.exit` (`wgmma.drain_loop`): e.g. the wait for wgmmas still in
        flight, since ptxas serializes every wgmma whose accumulators some path defines
        before that wait."""
        b = self.b
        lower, upper, step = (self.values[v] for v in (op.lower, op.upper, op.step))
        inits = [self.values[v] for v in op.inits]
        before = b.block
        body = self.fn.append_basic_block("loop.body")
        exit_ = self.fn.append_basic_block("loop.exit")
        end = self.fn.append_basic_block("loop.end")
        b.cbranch(b.icmp_signed("<", lower, upper), body, end)
        b.position_at_end(body)
        iv = b.phi(lower.type)
        iv.add_incoming(lower, before)
        carried = [_phis(b, init, before) for init in inits]
        self.values[op.induction_var] = iv
        for arg, phis in zip(op.iter_args, carried):
            self.values[arg] = phis
        entering = list(self.unfenced_reads)
        yielded = self.block(op.body.block)
        assert yielded is not None
        yielded = wgmma.finish_iteration(self, op, list(yielded))
        if self.unfenced_reads:  # read at the end of one iteration, written in the next
            self.barrier()
        # After the loop: what was unfenced before it (it may run zero times).
        self.unfenced_reads = entering
        latch = b.block
        following = b.add(iv, step)
        iv.add_incoming(following, latch)
        for phis, value in zip(carried, yielded):
            _add_incoming(phis, value, latch)
        b.cbranch(b.icmp_signed("<", following, upper), body, exit_)
        b.position_at_end(exit_)
        results = wgmma.drain_loop(self, op, list(yielded))
        last = b.block
        b.branch(end)
        b.position_at_end(end)
        merged = [_phis(b, init, before) for init in inits]
        for phis, value in zip(merged, results):
            _add_incoming(phis, value, last)
        return merged

    def if_op(self, op: scf.IfOp) -> list[Any]:
        b = self.b
        then_bb = self.fn.append_basic_block("if.then")
        else_bb = self.fn.append_basic_block("if.else") if not op.otherwise.empty else None
        merge = self.fn.append_basic_block("if.end")
        b.cbranch(self.values[op.condition], then_bb, else_bb or merge)
        arms = []
        entering = list(self.unfenced_reads)
        unfenced = list(entering) if else_bb is None else []
        for region, bb in ((op.then, then_bb), (op.otherwise, else_bb)):
            if bb is None:
                continue
            b.position_at_end(bb)
            self.unfenced_reads = list(entering)
            yielded = self.block(region.block) or []
            unfenced += self.unfenced_reads
            arms.append((yielded, b.block))
            b.branch(merge)
        self.unfenced_reads = unfenced  # what either arm may leave unfenced
        b.position_at_end(merge)
        results = []
        for i in range(len(op.results)):
            first = arms[0][0][i]
            if isinstance(first, list):
                phis = [b.phi(v.type) for v in first]
                for yielded, block in arms:
                    for phi, v in zip(phis, yielded[i]):
                        phi.add_incoming(v, block)
                results.append(phis)
            else:
                phi = b.phi(first.type)
                for yielded, block in arms:
                    phi.add_incoming(yielded[i], block)
                results.append(phi)
        return results


def _phis(b: ir.IRBuilder, init: Any, before: ir.Block) -> Any:
    if isinstance(init, list):
        return [_phis(b, v, before) for v in init]
    phi = b.phi(init.type)
    phi.add_incoming(init, before)
    return phi


def _add_incoming(phis: Any, value: Any, block: ir.Block) -> None:
    if isinstance(phis, list):
        for p, v in zip(phis, value):
            p.add_incoming(v, block)
    else:
        phis.add_incoming(value, block)


def _register_kind(t: Type) -> tuple[str, str, ir.IntType]:
    """How an element of `t` travels through inline PTX: the register constraint letter, the
    ld/st type, and the integer type of the register (bytes ride in 16-bit registers)."""
    bits = 8 if t == IntegerType(1) else _bits(t)
    return {8: ("h", "u8", I16), 16: ("h", "b16", I16), 32: ("r", "b32", I32)}.get(
        bits, ("l", "b64", I64)
    )


def _bits(t: Type) -> int:
    return 64 if isinstance(t, IndexType) else t.width  # type: ignore[attr-defined]


def _parameter_type(kind: str, dtype: str) -> ir.Type:
    if kind in ("pointer", "workspace", "counters"):
        return GLOBAL_PTR
    if kind in ("extent", "stride"):
        return I64
    if dtype == "i1":
        return I8
    return llvm_type(SCALAR_TYPES[dtype])


def _shared_array(llmod: ir.Module) -> ir.GlobalVariable:
    found = llmod.globals.get(SHARED_SYMBOL)
    if found is None:
        found = ir.GlobalVariable(llmod, ir.ArrayType(I8, 0), SHARED_SYMBOL, addrspace=3)
        found.linkage = "external"
        found.align = SCRATCH_ALIGNMENT
        # llvmlite types globals with typed pointers; the rest of the module uses opaque ones.
        found.type = SHARED_PTR
    return found


LOWERINGS: dict[type, Any] = {
    arith.ConstantOp: _KernelLowering.constant_op,
    **{cls: _KernelLowering.float_binary for cls in FLOAT_BINARY},
    **{cls: _KernelLowering.int_binary for cls in INT_BINARY},
    arith.MaximumFOp: _KernelLowering.min_max_float,
    arith.MinimumFOp: _KernelLowering.min_max_float,
    arith.MaxSIOp: _KernelLowering.min_max_int,
    arith.MinSIOp: _KernelLowering.min_max_int,
    arith.CeilDivSIOp: _KernelLowering.ceildiv,
    arith.DivSIOp: _KernelLowering.divsi,
    arith.RemSIOp: _KernelLowering.remsi,
    arith.ShLIOp: _KernelLowering.shli,
    arith.ShRSIOp: _KernelLowering.shrsi,
    arith.NegFOp: _KernelLowering.negf,
    arith.CmpFOp: _KernelLowering.cmpf,
    arith.CmpIOp: _KernelLowering.cmpi,
    arith.ExtFOp: _KernelLowering.arith_cast,
    arith.TruncFOp: _KernelLowering.arith_cast,
    arith.SIToFPOp: _KernelLowering.arith_cast,
    arith.FPToSIOp: _KernelLowering.arith_cast,
    arith.ExtSIOp: _KernelLowering.arith_cast,
    arith.TruncIOp: _KernelLowering.arith_cast,
    arith.IndexCastOp: _KernelLowering.arith_cast,
    **{
        cls: _KernelLowering.math_op
        for cls in (
            mathd.ExpOp,
            mathd.Exp2Op,
            mathd.LogOp,
            mathd.Log2Op,
            mathd.SqrtOp,
            mathd.RsqrtOp,
            mathd.SinOp,
            mathd.CosOp,
            mathd.TanhOp,
            mathd.ErfOp,
            mathd.AbsFOp,
            mathd.FloorOp,
            mathd.CeilOp,
            mathd.FmaOp,
            mathd.PowFOp,
        )
    },
    T.ProgramIdOp: _KernelLowering.program_id,
    T.NumProgramsOp: _KernelLowering.num_programs,
    T.DimOp: _KernelLowering.dim,
    T.SymbolOp: _KernelLowering.symbol,
    T.LoadOp: _KernelLowering.load,
    T.StoreOp: _KernelLowering.store,
    T.DotOp: _KernelLowering.dot,
    T.ReduceOp: _KernelLowering.reduce,
    T.FullOp: _KernelLowering.full,
    T.IotaOp: _KernelLowering.iota,
    T.SplatOp: _KernelLowering.splat,
    T.CastOp: _KernelLowering.cast,
    T.SelectOp: _KernelLowering.select,
    **{cls: _KernelLowering.remap for cls in REMAP_OPS},
    S.AllocSharedOp: shared_memory.lower_alloc_shared,
    S.AsyncCopyOp: shared_memory.lower_async_copy,
    S.AsyncCommitOp: shared_memory.lower_async_commit,
    S.AsyncWaitOp: shared_memory.lower_async_wait,
    S.BarrierOp: wgmma.lower_barrier,
    S.LoadSharedOp: tensorcore.lower_load_shared,
    S.StoreSharedOp: shared_memory.lower_store_shared,
    G.GatherOp: gather.lower_gather,
    G.ScatterOp: gather.lower_scatter,
    W.WorkspaceStoreOp: split.lower_workspace_store,
    W.WorkspaceLoadOp: split.lower_workspace_load,
    W.LastArrivalOp: split.lower_last_arrival,
    R.PhiloxOp: random.lower_philox,
    **atomic_lowering.LOWERINGS,
    scf.ForOp: _KernelLowering.for_op,
    scf.IfOp: _KernelLowering.if_op,
    **scan.LOWERINGS,  # tile.scan, tile.arg_reduce, tile.topk
}
