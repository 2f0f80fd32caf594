"""Which pipelined copies the TMA unit makes (`pipeline`'s option `tma`), and why not.

On sm_90a a stream whose buffer is a wgmma operand's -- rows of 128 bytes in the 128-byte
swizzle, which the TMA unit writes itself (`tilec.lowering.tma.box_plan`) -- can be filled by
one thread asking the TMA unit for the whole tile, instead of every thread issuing 16-byte
`cp.async` copies with their own addresses and bounds: the copies cost the block a few
instructions instead of a dozen a thread, keep no registers, and the unit zero-fills what lies
outside the tensor, so awkward extents cost nothing. A tensor map describes the argument
(`tilec.runtime.tensormap`), so the argument must keep its promises at every launch: its
address 16-byte aligned, its last stride 1, its other strides multiples of 16 bytes -- the
kernel's specialization says so, or the stream keeps cp.async (a launch with another layout
gets another specialization).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilec.dialects.builtin import FuncOp
from tilec.ir.core import BlockArgument, Value
from tilec.ir.types import SharedType
from tilec.lowering.abi import DIVISOR, argument_name, kernel_specialization
from tilec.lowering.layouts import element_bytes
from tilec.lowering.tma import box_plan

if TYPE_CHECKING:
    from tilec.passes.pipeline import _Stream

__all__ = [
    "TMA_ARCHES",
    "TMA_ELEMENTS",
    "planned_buffer",
    "stream_box",
    "tensor_map_blocker",
    "tma_blocker",
]

TMA_ARCHES = ("sm_90a",)
# Element types a tensor map describes here (CU_TENSOR_MAP_DATA_TYPE_*).
TMA_ELEMENTS = ("f8e4m3", "f8e5m2", "f16", "bf16", "f32", "i8", "i32")


def planned_buffer(stream: _Stream, stages: int) -> SharedType:
    """`stream`'s buffer as it will be with `stages` slots."""
    t = stream.alloc.result.type
    return SharedType((stages, *t.shape[1:]), t.element, t.layout)


def stream_box(stream: _Stream, stages: int) -> tuple[int, ...] | str:
    """The box of the tensor map that fills one slot of `stream`'s buffer, or why none."""
    plan = box_plan(planned_buffer(stream, stages))
    return plan if isinstance(plan, str) else plan[0]


# Rows whose stride is an odd multiple of 16 bytes start anywhere within a 128-byte line, so
# each 128-byte row of a box straddles two lines: the TMA unit's requests for the operand
# double. Measured on the H200 (2026-12-03, 128x256x64 wgmma tiles, cuBLAS in the same run;
# docs/benchmarks.md, "Warp specialization, and the rows that straddle lines"): b [K, N] at
# N = 3000 (6000-byte rows) took 1.22x cuBLAS's time, at N = 3008 / 3040 / 3056 (128-, 64-,
# 32-byte multiples) 1.08-1.10x; a at K = 1000 cost 2% with 128x256 tiles and 20% with
# 256x128 ones (the operand with more rows a step pays more).
STRADDLE_ALIGNMENT = 32


def straddling_rows(kernel: FuncOp, view: Value) -> str:
    """A note when the rows of the argument `view` whose tiles the TMA unit copies are known
    to be 16-byte aligned but not `STRADDLE_ALIGNMENT`-byte aligned ("" otherwise)."""
    if not (isinstance(view, BlockArgument) and view.owner is kernel.body.block):
        return ""
    name = argument_name(kernel, view.index)
    rank = view.type.rank
    if rank < 2:
        return ""
    stride = f"{name}.stride.{rank - 2}"
    multiple = kernel_specialization(kernel).multiple(stride)
    row = multiple * element_bytes(view.type.element)
    # The specialization records powers of two up to DIVISOR elements: a stride divisible by
    # DIVISOR may be aligned further (an 8-bit row of 4096), and is not known to straddle.
    if row % STRADDLE_ALIGNMENT == 0 or multiple >= DIVISOR:
        return ""
    return (
        f"{name}'s rows ({stride}) are known 16-byte aligned, not {STRADDLE_ALIGNMENT}-byte: "
        "each 128-byte box row straddles two 128-byte lines, about twice the TMA unit's "
        f"requests for {name} (rows padded to a multiple of {STRADDLE_ALIGNMENT} bytes avoid it)"
    )


def tma_blocker(kernel: FuncOp, stream: _Stream, stages: int) -> str:
    """Why `stream` cannot be copied by the TMA unit ("" when it can)."""
    load = stream.load
    if load.mask is not None:
        return "its load is masked (a copy by the TMA unit writes whole boxes)"
    why = tensor_map_blocker(kernel, load.view)
    if why:
        return why
    box = stream_box(stream, stages)
    if isinstance(box, str):
        return f"its buffer's slots are not what the TMA unit writes: {box}"
    return ""


def tensor_map_blocker(kernel: FuncOp, view: Value) -> str:
    """Why no tensor map can describe `view`, read by the kernel ("" when one can): it must be
    an argument of TMA elements and at most 5 dimensions, known 16-byte aligned, its last
    stride 1 and the others multiples of 16 bytes (the specialization's facts)."""
    if not (isinstance(view, BlockArgument) and view.owner is kernel.body.block):
        return "it reads a view the kernel computes, not an argument (a tensor map describes one)"
    name = argument_name(kernel, view.index)
    element = str(view.type.element)
    if element not in TMA_ELEMENTS:
        return f"{name}'s elements are {element}"
    rank = view.type.rank
    if rank > 5:
        return f"{name} has {rank} dimensions (a tensor map has at most 5)"
    spec = kernel_specialization(kernel)
    if name not in spec.aligned:
        return f"{name}'s address is not known to be 16-byte aligned"
    last = f"{name}.stride.{rank - 1}"
    if last not in spec.unit:
        return f"{name}'s last stride ({last}) is not known to be 1"
    size = element_bytes(view.type.element)
    for axis in range(rank - 1):
        stride = f"{name}.stride.{axis}"
        if (spec.multiple(stride) * size) % 16:
            return f"stride {axis} of {name} ({stride}) is not known to be a multiple of 16 bytes"
    return ""
