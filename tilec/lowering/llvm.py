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

How ops become per-thread code, by concern (each a part `_KernelLowering` inherits, or a
module of functions that `LOWERINGS` names):
* element-wise `arith` and `math`: `tilec.lowering.elementwise` (math functions through
  `tilec.lowering.mathlib`, whose docstring states their precision);
* `tile.load`/`tile.store`: `tilec.lowering.global_memory` (predicated, vectorized where the
  `vectorize` pass allows: `tilec.lowering.memory`);
* reductions: `tilec.lowering.reduction`; dots: `tilec.lowering.fma_dot` (tensor cores:
  `tilec.lowering.tensorcore`, `tilec.lowering.wgmma`);
* `scf.for`/`scf.if`: `tilec.lowering.control_flow`;
* shared buffers and asynchronous copies, gathers, scans, atomics, random numbers, split-K:
  `shared_memory`, `gather`, `scan`, `atomic`, `random`, `split`;
* this module: the kernel's signature and thread coordinates, the shared scratch, remaps,
  the walk over the ops and `LOWERINGS`, the table of each op's lowering.

Line info (`line_info=True`, the default): `tilec.lowering.line_info` (`.file`/`.loc`
directives from LLVM debug metadata that asks only for line tables; `llvm_line_locations`
reads the locations back from the text).

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

from collections.abc import Mapping
from typing import Any

from llvmlite import ir

from tilec.diagnostics import InternalCompilerError, TileError
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
    IntegerType,
    TensorType,
    TileType,
    Type,
)
from tilec.lowering import atomic as atomic_lowering
from tilec.lowering import (
    cluster,
    gather,
    mathlib,
    random,
    scan,
    shared_memory,
    split,
    tensorcore,
    tma,
    warp_specialize,
    wgmma,
)
from tilec.lowering.abi import (
    ALIGNMENT,
    Specialization,
    argument_name,
    kernel_abi,
    kernel_specialization,
    set_kernel_specialization,
)
from tilec.lowering.control_flow import ControlFlowLowering
from tilec.lowering.elementwise import FLOAT_BINARY, INT_BINARY, ElementwiseLowering
from tilec.lowering.elementwise import check_arch as elementwise_check_arch
from tilec.lowering.exchange import (
    REMAP_OPS,
    SCRATCH_ALIGNMENT,
    chunk_slots,
    op_scratch_bytes,
    remap_chunks,
    remap_scratch_coefficients,
    remap_scratch_strides,
    remap_source_slots,
    thread_map,
)
from tilec.lowering.fma_dot import DotLowering
from tilec.lowering.global_memory import GlobalMemoryLowering, View
from tilec.lowering.layouts import DimMap, ThreadMap, row_major_strides
from tilec.lowering.line_info import DebugInfo, llvm_line_locations
from tilec.lowering.llvm_types import (
    GLOBAL_PTR,
    I1,
    I8,
    I32,
    I64,
    SHARED_PTR,
    constant,
    llvm_type,
    memory_type,
)
from tilec.lowering.reduction import ReductionLowering
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


class NotLowered(NotImplementedError):
    """An op (or a use of one) the lowering does not handle yet."""

    def __init__(self, op: Operation, what: str = "is not lowered to LLVM yet"):
        where = f" at {op.loc}" if op.loc.known else ""
        super().__init__(f"'{op.name}'{where} {what}")


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
    debug_info = DebugInfo(llmod, module.loc.file) if line_info else None
    atomic_lowering.check_arch(module, arch)
    elementwise_check_arch(module, arch)
    for func in module.functions:
        try:
            specialization = _specialization(func, (specializations or {}).get(func.sym_name))
            _KernelLowering(func, llmod, specialization, debug_info, arch).lower()
        except TileError:
            raise
        except Exception as e:
            path = save_crash_ir("lower-to-llvm", print_op(module, print_locations=True), None)
            raise InternalCompilerError("lower-to-llvm", e, path) from e
    return llmod


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


class _KernelLowering(
    ElementwiseLowering, GlobalMemoryLowering, ReductionLowering, DotLowering, ControlFlowLowering
):
    """Lowers one kernel. `self.b` inserts at the current point; `self.prologue` inserts at the
    end of the entry block, where per-thread constants (thread coordinates) are computed once
    so that every later block may use them."""

    def __init__(
        self,
        func: FuncOp,
        llmod: ir.Module,
        specialization: Specialization,
        debug_info: DebugInfo | None = None,
        arch: str = "sm_80",
    ):
        self.func = func
        self.arch = arch  # the target, for lowerings that differ by it (vector `red`)
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
        grid_constants = []
        for i, (arg, p) in enumerate(zip(self.fn.args, self.abi.parameters)):
            arg.name = p.name
            if p.name in specialization.aligned:
                arg.attributes.align = ALIGNMENT
            if p.kind == "tensormap":  # by value, read in place (`tilec.lowering.tma`)
                arg.attributes.add("byval")
                arg.attributes.align = tma.TENSORMAP_ALIGNMENT
                grid_constants.append(ir.Constant(I32, i + 1))
        if grid_constants:
            llmod.add_named_metadata(
                "nvvm.annotations",
                [
                    self.fn,
                    ir.MetaDataString(llmod, "grid_constant"),
                    llmod.add_metadata(grid_constants),
                ],
            )
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
        cluster.annotate_cluster(llmod, self.fn, self.abi.cluster)  # `.reqnctapercluster`
        entry = self.fn.append_basic_block("entry")
        body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(entry)
        tid = self._sreg("tid.x")
        self.lane = self.b.and_(tid, ir.Constant(I32, 31))
        self.warp = self.b.lshr(tid, ir.Constant(I32, 5))
        self.num_warps = self.abi.num_warps  # the computing warps (not a producer's)
        # The named barrier and threads `tile.barrier` synchronizes: the block's (bar.sync 0)
        # or, in a region of a tile.warp_specialize, that region's warps' only.
        self.barrier_scope: tuple[int, int] | None = None
        # In a producer region one warp runs: its thread-issued ops elect a lane in it (tma._predicated).
        self.elect_in_warp = False
        self._uniform_warp: ir.Value | None = None
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
        # Each tensor map's generic address (`cvta.param`), for `cp.async.bulk.tensor`.
        # Keyed as `tile.tma_copy` asks: (view, box, fold).
        self.tensormaps: dict[tuple[Value, tuple[int, ...], int], ir.Value] = {}
        views = {argument_name(func, i): a for i, a in enumerate(func.arguments)}
        for arg, p in zip(self.fn.args, self.abi.parameters):
            if p.kind == "tensormap":
                key = (views[p.argument], p.box, p.fold)
                self.tensormaps[key] = self.prologue.ptrtoint(arg, I64)

    def _sreg(self, name: str) -> ir.Value:
        return mathlib.call_intrinsic(self.b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])

    def uniform_warp(self) -> ir.Value:
        """The warp index as ptxas can see it is the same in every lane of a warp: `tid / 32`
        read from lane 0 by `shfl.sync`, once, in the entry block (where every lane is).
        Branches on it are uniform, and code under them runs from uniform registers: on
        `tid / 32` itself ptxas wraps each `cp.async.bulk.tensor` in a loop over the lanes
        (an ELECT / BRA.U.ANY loop in the SASS)."""
        if self._uniform_warp is None:
            shfl = ir.InlineAsm(
                ir.FunctionType(I32, [I32]),
                "shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;",
                "=r,r",
                side_effect=True,
            )
            self._uniform_warp = self.prologue.call(shfl, [self.warp])
        return self._uniform_warp

    def _bind_arguments(self) -> None:
        args = iter(self.fn.args)
        # A dimension name has one extent in every tensor (the launcher checks it: docs/abi.md):
        # its first tensor's parameter stands for all, so that the bounds checks of a load and
        # a store along the same dimension are the same compare (LLVM computes it once).
        named: dict[str, ir.Value] = {}
        # Per extent value (its id), the bound the launch holds it to (`global_memory._access`).
        self.extent_bounds: dict[int, int] = {}
        for arg in self.func.arguments:
            t = arg.type
            if isinstance(t, TensorType):
                pointer = next(args)
                extents = [self._integer_parameter(next(args)) for _ in range(t.rank)]
                for axis, dim in enumerate(t.shape):
                    if isinstance(dim, str):
                        extents[axis] = named.setdefault(dim, extents[axis])
                strides = [self._integer_parameter(next(args)) for _ in range(t.rank)]
                self.values[arg] = View(pointer, extents, strides)
            elif isinstance(t, TileType):
                raise ValueError(f"kernel argument of tile type {t}: kernels take tensors")
            else:
                value = next(args)
                if t == IntegerType(1):  # passed as a byte
                    value = self.b.icmp_unsigned("!=", value, ir.Constant(I8, 0))
                self.values[arg] = value
        # A whole dimension's bound (`tilec.max_extent`, which the launcher enforces): told to
        # LLVM, so that a tile's slots at or past it, padding whatever the extent, fold away.
        bounds = self.func.attributes.get("tilec.max_extent")
        for dim, bound in (tuple(p) for p in (bounds.value if bounds is not None else ())):
            extent = named.get(str(dim))
            if extent is not None and isinstance(extent, ir.Value):
                holds = self.b.icmp_unsigned("<=", extent, ir.Constant(I64, int(bound)))
                mathlib.call_intrinsic(self.b, "llvm.assume", ir.VoidType(), [holds])
                self.extent_bounds[id(extent)] = int(bound)

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
        if self.barrier_scope is None:
            mathlib.call_intrinsic(self.b, "llvm.nvvm.barrier0", ir.VoidType(), [])
        else:
            number, threads = self.barrier_scope
            shared_memory._asm(
                self, ir.VoidType(), [], f"bar.sync {number}, {threads};", "~{memory}"
            )
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
        chunks = remap_chunks(op)
        if chunks > 1:
            return [self.remap_in_chunks(op, values, chunks)]
        self.write_tile(src_t, values, strides=remap_scratch_strides(op))
        self.barrier()
        flats = self.flat_indices(thread_map(dst_t), remap_scratch_coefficients(op))
        result = [self.scratch_load(dst_t.element, f) for f in flats]
        self.after_scratch_read(op)
        return [result]

    def remap_in_chunks(self, op: Operation, values: list[ir.Value], chunks: int) -> list[Any]:
        """A layout conversion through the scratch of one piece of the tile's rows: per piece,
        its owners write their slots in it, a barrier, every thread reads its slots in it,
        and a barrier before the next piece reuses the bytes (`exchange.chunk_slots`: which
        slots are in which piece, the same in every thread)."""
        src_t, dst_t = op.operands[0].type, op.results[0].type
        src_m, dst_m = thread_map(src_t), thread_map(dst_t)
        strides = remap_scratch_strides(op)  # of one piece
        height = src_t.shape[0] // chunks
        src_flats = self.flat_indices(src_m, strides)
        dst_flats = self.flat_indices(dst_m, remap_scratch_coefficients(op))
        src_pieces, dst_pieces = chunk_slots(src_m, chunks), chunk_slots(dst_m, chunks)
        if src_pieces is None or dst_pieces is None:
            raise NotLowered(op, f"has chunks = {chunks}, which its layouts do not split into")
        result: list[Any] = [None] * len(dst_flats)
        owner = self.unique_owner(src_m)
        b = self.b
        for c in range(chunks):
            if c:
                self.barrier()  # every thread has read the previous piece
            shift = ir.Constant(I32, c * height * strides[0])

            def emit(c=c, shift=shift) -> None:
                for flat, v, piece in zip(src_flats, values, src_pieces):
                    if piece == c:
                        self.scratch_store(src_t.element, b.sub(flat, shift), v)

            self.when(owner, emit)
            self.barrier()
            for i, (flat, piece) in enumerate(zip(dst_flats, dst_pieces)):
                if piece == c:
                    result[i] = self.scratch_load(dst_t.element, b.sub(flat, shift))
        self.after_scratch_read(op)
        return result


def _parameter_type(kind: str, dtype: str) -> ir.Type:
    if kind == "tensormap":
        return ir.PointerType(ir.ArrayType(I8, tma.TENSORMAP_BYTES))  # byval: 128 bytes
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
    W.WorkspaceReadOp: split.lower_workspace_read,
    W.LastArrivalOp: split.lower_last_arrival,
    **split.LOWERINGS,  # a split scan's tickets and flags
    R.PhiloxOp: random.lower_philox,
    R.RandThresholdOp: random.lower_rand_threshold,
    **atomic_lowering.LOWERINGS,
    **tma.LOWERINGS,  # tile.tma_copy and the mbarrier ops
    **cluster.LOWERINGS,  # tile.cluster_barrier
    **warp_specialize.LOWERINGS,  # tile.warp_specialize, tile.mbarrier_arrive
    scf.ForOp: _KernelLowering.for_op,
    scf.IfOp: _KernelLowering.if_op,
    **scan.LOWERINGS,  # tile.scan, tile.arg_reduce, tile.topk
}
