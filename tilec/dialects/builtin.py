"""The `builtin` dialect: the module and kernel functions.

module {
  func @vector_add(%x: !tile.tensor<Nxf32>, %y: !tile.tensor<Nxf32>) {
    ...
    return
  }
}
"""

from __future__ import annotations

from tilec.ir.attributes import StringAttr, SymbolRefAttr
from tilec.ir.core import (
    Attr,
    IsolatedFromAbove,
    Operation,
    RegionDef,
    Terminator,
    register_op,
)

# A kernel with this (unit) attribute runs persistent blocks (`pipeline`'s option
# `persistent`, passes/pipeline_persistent.py): `tilec.grid` still names the output tiles, but
# the launch has fewer blocks along x (the runtime: the blocks the GPU holds at once; the
# interpreter: a few), each walking the tiles `program_id(0)`, `+ num_programs(0)`, ...
PERSISTENT_ATTRIBUTE = "tilec.persistent"
# A kernel with this attribute ("shared") reads a wgmma dot's A that is loaded before the dot's
# loop (attention's q) by descriptor from its buffer every step, instead of holding it in
# registers (`tiling`'s option `staged_a`; smem-placement stages it so).
STAGED_A_ATTRIBUTE = "tilec.staged_a"

# A kernel with this attribute (`[c0, c1, ...]`, blocks a cluster along each grid axis) runs
# in thread-block clusters (`pipeline`'s option `cluster`, passes/pipeline_cluster.py): the
# launch rounds each grid axis up to a multiple of its c (the blocks past the tiles compute
# nothing but still take part in the cluster's copies), and the blocks of one cluster share
# operand tiles (`tile.tma_copy {multicast}`) and each other's mbarriers.
CLUSTER_ATTRIBUTE = "tilec.cluster"

# A kernel with this attribute was tiled for a producer warpgroup (`tiling`'s option
# `producer`): pipeline's options warp_specialize and pingpong, left at their default, follow.
PRODUCER_ATTRIBUTE = "tilec.producer_warpgroup"

# A GEMM whose tiles `tiling`'s SM model found faster walked (`wgmma_model.walk_clocks`): one
# block an SM with a producer warpgroup walks the output tiles. pipeline's option persistent,
# left at its default, follows (as warp_specialize follows `PRODUCER_ATTRIBUTE`, set with it).
WALK_ATTRIBUTE = "tilec.persistent_walk"


@register_op
class ModuleOp(Operation):
    name = "builtin.module"
    summary = "The top-level container of kernels."
    body = RegionDef()
    traits = (IsolatedFromAbove,)

    def print_custom(self, p) -> None:
        p.attr_dict(self.attributes, keyword=True)
        p.region(self.body, print_entry_args=False)

    @classmethod
    def parse_custom(cls, p) -> Operation:
        attrs = p.parse_attr_dict() if p.optional("attributes") else {}
        return cls([], [], attrs, [p.parse_region()])

    @property
    def functions(self) -> list[FuncOp]:
        return [op for op in self.body.block.ops if isinstance(op, FuncOp)]

    def lookup(self, name: str) -> FuncOp | None:
        return next((f for f in self.functions if f.sym_name == name), None)

    def verify_(self) -> None:
        if len(self.body.blocks) != 1 or self.body.block.args:
            raise self.error("body must be one block without arguments")
        seen: set[str] = set()
        for op in self.body.block.ops:
            if not isinstance(op, FuncOp):
                raise op.error("is not allowed at module level; only 'func' is")
            if op.sym_name in seen:
                raise op.error(f"redefines kernel '@{op.sym_name}'")
            seen.add(op.sym_name)


@register_op
class FuncOp(Operation):
    name = "builtin.func"
    summary = "A kernel: its arguments are tensor views and scalars; it returns nothing."
    sym_name = Attr(StringAttr)
    body = RegionDef()
    traits = (IsolatedFromAbove,)

    @property
    def arguments(self):
        return self.body.blocks[0].args

    def print_custom(self, p) -> None:
        p.attribute(SymbolRefAttr(self.sym_name))
        p.block_args(self.body.blocks[0])
        p.attr_dict(self.attributes, elided=("sym_name",), keyword=True)
        p.region(self.body, print_entry_args=False)

    @classmethod
    def parse_custom(cls, p) -> Operation:
        name = p.parse_symbol_name()
        p.expect("(", "to open the argument list")
        args = p.comma_list(p.parse_new_value_typed_pair, close=")")
        p.expect(")")
        attrs = p.parse_attr_dict() if p.optional("attributes") else {}
        if "sym_name" in attrs:
            raise p.error("'sym_name' is written as '@name', not as an attribute")
        attrs = {"sym_name": StringAttr(name), **attrs}
        region = p.parse_region([(n, t, at) for (n, t), at in args])
        return cls([], [], attrs, [region])

    def verify_(self) -> None:
        if len(self.body.blocks) != 1:
            raise self.error("body must be a single block")
        term = self.body.block.terminator
        if not isinstance(term, ReturnOp):
            raise self.error("body must end with 'return'")


@register_op
class ReturnOp(Operation):
    name = "builtin.return"
    summary = "Ends a kernel."
    traits = (Terminator,)
    assembly_format = "attr-dict"

    def verify_(self) -> None:
        if not isinstance(self.parent_op, FuncOp):
            raise self.error("must be inside a 'func'")
