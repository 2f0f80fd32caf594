"""Warp specialization (sm_90a): a producer warpgroup that only issues TMA copies, and consumer
warps that only compute, handing the stages to each other through mbarriers.

`pipeline` (its option `warp_specialize`, passes/pipeline_warp_specialize.py) rewrites a GEMM
loop whose copies the TMA unit makes into two regions that run at the same time:

    tile.mbarrier_init %full {arrivals = 1}                  // a stage landed
    tile.mbarrier_init %empty {arrivals = 1, warps = 8}      // a stage released
    tile.barrier
    tile.warp_specialize {producer_warps = 4, producer_registers = 40,
                          consumer_registers = 232} producer {
      scf.for %k = ... {                                    // step i, slot i % S
        tile.mbarrier_wait %empty[%slot], %phase_before     // its last readers released it
        tile.mbarrier_expect %full[%slot] {bytes = ...}
        tile.tma_copy %A[...], %a_smem[%slot], %full[%slot]
        ...
      }
      scf.yield
    } consumer {
      %acc = scf.for %k = ... {
        tile.mbarrier_wait %full[%slot], %phase              // step i landed
        ... tile.dot ...                                     // reads the slot
        tile.mbarrier_arrive %empty[%previous_slot], pred %p // step i-1's dot is done
      }
      (the epilogue)
      scf.yield
    }
    tile.barrier
    tile.mbarrier_inval %full
    tile.mbarrier_inval %empty

* The kernel's `tilec.num_warps` are the consumers' warps (every layout is theirs); the launch
  adds `producer_warps` more (`tilec.producer_warps` on the kernel), the last warps of the
  block. The regions run concurrently, one on each set of warps; values defined before the
  op are visible in both, and neither region defines values used after it.
* In a region, `tile.barrier` synchronizes that region's warps only (a named barrier); the
  block's barrier comes after the op.
* `producer_registers` / `consumer_registers`: what each side's threads keep
  (`setmaxnreg`): the producer gives up registers it does not need, the consumers take them for
  their accumulators (multiples of 8 in 24..256; the block's total must fit the SM's 64 Ki).
* A thread-issued op (`tile.tma_copy`, `tile.mbarrier_expect`) is issued by one thread of its
  region; `tile.mbarrier_arrive` is an arrival by each warp of its region, counted once
  (`tile.mbarrier_init`'s `warps` says how many warps make one arrival).

The interpreter runs the two regions as coroutines that hand over whenever one waits on an
mbarrier phase that has not completed (`tilec.interp.warp_specialize`): a wait that no
arrival of the other region can ever complete is a deadlock, reported at the wait, and a stage
written before its readers released it is a race.
"""

from __future__ import annotations

from tilec.ir.attributes import IntegerAttr
from tilec.ir.core import Attr, Operation, RegionDef, register_op

__all__ = [
    "FIRST_TURN_BARRIER",
    "PINGPONG_ATTRIBUTE",
    "WarpSpecializeOp",
    "enclosing_region",
    "is_producer_region",
]

# Consumer warpgroups that take turns (passes/pipeline_pingpong.py): a consumer loop with this
# attribute wraps its first wgmma in warpgroup g's named barrier FIRST_TURN_BARRIER + g.
PINGPONG_ATTRIBUTE = "tilec.pingpong"
FIRST_TURN_BARRIER = 2  # 0 is the block's barrier, 1 the consumers'


_REGISTER_RANGE = range(24, 257, 8)


@register_op
class WarpSpecializeOp(Operation):
    """Run `producer` on `producer_warps` warps of their own and `consumer` on the kernel's
    warps, concurrently; each region is one block without arguments ending in `scf.yield`."""

    name = "tile.warp_specialize"
    summary = "Run a producer region and a consumer region on separate warps, concurrently."
    producer = RegionDef()
    consumer = RegionDef()
    producer_warps = Attr(IntegerAttr, doc="warps of the producer (a whole warpgroup: 4)")
    producer_registers = Attr(IntegerAttr, doc="registers a producer thread keeps (setmaxnreg)")
    consumer_registers = Attr(IntegerAttr, doc="registers a consumer thread gets (setmaxnreg)")

    def print_custom(self, p) -> None:
        p.attr_dict(self.attributes)
        p.token("producer")
        p.region(self.producer)
        p.token("consumer")
        p.region(self.consumer)

    @classmethod
    def parse_custom(cls, p) -> Operation:
        attrs = p.parse_attr_dict()
        p.expect("producer", "before the producer's region")
        producer = p.parse_region()
        p.expect("consumer", "before the consumer's region")
        consumer = p.parse_region()
        return cls([], [], attrs, [producer, consumer])

    def verify_(self) -> None:
        from tilec.dialects.scf import YieldOp

        if self.producer_warps % 4 or self.producer_warps < 4:
            raise self.error(
                f"producer_warps must be whole warpgroups (a multiple of 4), got "
                f"{self.producer_warps}"
            )
        for what in ("producer_registers", "consumer_registers"):
            value = getattr(self, what)
            if value not in _REGISTER_RANGE:
                raise self.error(f"{what} must be a multiple of 8 in 24..256, got {value}")
        for label, region in (("producer", self.producer), ("consumer", self.consumer)):
            if len(region.blocks) != 1 or region.block.args:
                raise self.error(f"'{label}' region must be one block without arguments")
            term = region.block.terminator
            if not isinstance(term, YieldOp) or term.operands:
                raise self.error(f"'{label}' region must end with an 'scf.yield' of nothing")


def enclosing_region(op: Operation) -> tuple[WarpSpecializeOp, bool] | None:
    """The `tile.warp_specialize` that `op` is nested in, and whether in its producer region;
    None outside one."""
    child, parent = op, op.parent_op
    while parent is not None:
        if isinstance(parent, WarpSpecializeOp):
            return parent, child.parent is parent.producer.block
        child, parent = parent, parent.parent_op
    return None


def is_producer_region(op: Operation) -> bool:
    """Whether `op` runs on a producer's warps."""
    found = enclosing_region(op)
    return found is not None and found[1]
