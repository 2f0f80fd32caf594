"""The rewrites `tiling` makes once it has decided (passes/tiling.py says what and why): the
`#mma` layout on a tensor-core accumulator's whole chain, the grouped block order of a 2-D dot
grid, and exact extents fixed in the tensor types. They change the IR only as told; nothing
here chooses."""

from __future__ import annotations

from tilec.dialects import arith, scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.dialects.tile import MmaLayout
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import TensorType, TileType, i32, index
from tilec.ir.verifier import VerifyError, verify_op_structure
from tilec.passmanager import PassContext

__all__ = ["fix_extents", "grouped_program_ids", "set_accumulator_layout"]


def fix_extents(kernel: FuncOp, fixed: dict[str, int], ctx: PassContext) -> None:
    """Make the dimensions of `fixed` static in the kernel's tensor types: `tile.dim` of them
    folds to a constant, and with it the padding masks of a dimension that fills its tile
    (the ABI then has the extent as a fixed one, which every launch must match)."""
    done = []
    for arg in kernel.arguments:
        t = arg.type
        if isinstance(t, TensorType) and any(d in fixed for d in t.shape):
            arg.type = TensorType(tuple(fixed.get(d, d) for d in t.shape), t.element)
            done.append(arg.name_hint or "?")
    if done:
        sizes = ", ".join(f"{d}={n}" for d, n in fixed.items())
        ctx.remark(
            kernel,
            f"extents {sizes} are exact (option exact): fixed in the types of "
            f"{', '.join(done)}, so their masks fold",
        )


def set_accumulator_layout(dot: T.DotOp, layout: MmaLayout) -> None:
    """`layout` on the dot's result and on the chain that carries it: the `tile.full` that
    starts it, and the `scf.for` iter_args, results and inits that carry it round loops.

    The IR must verify before `assign-layouts` runs, so where the chain meets an op outside it
    that needs its operands' types to agree (`arith.addf`, ..., and the `scf.yield` of an
    `scf.if`, whose results stay without a layout), an explicit
    `tile.convert_layout` to no layout yet comes first; a start that is not a `tile.full` (the
    dot's accumulator computed by other ops, a loop's initial value) is converted to `#mma`."""
    chain: list[Value] = []
    seen: set[int] = set()
    starts: list[tuple[Operation, int]] = []  # (op, operand) where the chain begins
    inner: set[tuple[int, int]] = set()  # (id(op), operand) uses that belong to the chain

    def lay(v: Value) -> None:
        if id(v) in seen or not isinstance(v.type, TileType):
            return
        seen.add(id(v))
        chain.append(v)
        for user in list(v.uses):
            loop = user.parent_op
            if isinstance(user, scf.YieldOp) and isinstance(loop, scf.ForOp):
                for i, yielded in enumerate(user.operands):
                    if yielded is v:
                        carried(loop, i)
        if isinstance(v, BlockArgument):
            loop = v.block.parent_op
            if isinstance(loop, scf.ForOp) and v.index >= 1:
                carried(loop, v.index - 1)

    def carried(loop: scf.ForOp, i: int) -> None:
        inner.add((id(loop.yield_op), i))
        inner.add((id(loop), 3 + i))
        starts.append((loop, 3 + i))
        lay(loop.iter_args[i])
        lay(loop.results[i])
        lay(loop.yield_op.operands[i])

    inner.add((id(dot), 2))
    starts.append((dot, 2))
    lay(dot.result)
    for v in chain:
        t = v.type
        if t.layout is None:
            v.type = TileType(t.shape, t.element, layout)
    for user, operand in starts:
        _start_chain(user, operand, layout)
    for v in chain:
        for user in list(dict.fromkeys(v.uses)):
            uses = [i for i, x in enumerate(user.operands) if x is v]
            if all((id(user), i) in inner for i in uses):
                continue
            # An scf.if's yield verifies by itself, but the `if`'s results keep their types:
            # a value it yields leaves the chain through a conversion.
            leaves_if = isinstance(user, scf.YieldOp) and isinstance(user.parent_op, scf.IfOp)
            if not leaves_if and _verifies(user):
                continue
            t = v.type
            conversion = Builder.before_op(user).create(
                T.ConvertLayoutOp, input=v, result_types=[TileType(t.shape, t.element, None)]
            )
            for i in uses:
                if (id(user), i) not in inner:
                    user.set_operand(i, conversion.result)


def _verifies(op: Operation) -> bool:
    """Whether `op` itself (not what it nests) verifies."""
    try:
        verify_op_structure(op)
        for trait in op.traits:
            trait.verify(op)
        op.verify_()
    except VerifyError:
        return False
    return True


def _start_chain(user: Operation, operand: int, layout: MmaLayout) -> None:
    """Give operand `operand` of `user` (where an accumulator chain starts) `layout`: a
    `tile.full` gets it (cloned when other ops use it too: they keep theirs), anything else is
    converted."""
    v = user.operands[operand]
    t = v.type
    if not isinstance(t, TileType) or t.layout == layout:
        return
    if isinstance(v, OpResult) and isinstance(v.op, T.FullOp) and t.layout is None:
        if len(v.uses) > 1:
            clone = v.op.clone()
            v.op.parent.insert(v.op.parent.ops.index(v.op) + 1, clone)
            user.set_operand(operand, clone.result)
            v = clone.result
        v.type = TileType(t.shape, t.element, layout)
        return
    conversion = Builder.before_op(user).create(
        T.ConvertLayoutOp, input=v, result_types=[TileType(t.shape, t.element, layout)]
    )
    user.set_operand(operand, conversion.result)


def block_divmod(b: Builder, lhs: Value, rhs: Value, *, quotient: bool = True) -> Value:
    """`lhs // rhs` (or `lhs % rhs`) of block indices and block counts, computed in i32.

    Both are below 2**31: extents are (runtime/arguments.py), so are tile counts, and the
    runtime refuses a launch whose linear block or tile index would not be. The width matters
    on sm_90a: a 64-bit division by a value known only at run time is a subroutine call in
    SASS, and nvJitLink (what cuda.core compiles PTX with) then serializes every `wgmma` of
    the kernel ("wgmma.mma_async instructions are serialized due to the presence of Extern
    calls"): each group waited for right after its issue, a third of the main loop's speed
    lost."""
    narrow = [b.create(arith.IndexCastOp, input=v, result_types=[i32]).result for v in (lhs, rhs)]
    cls = arith.DivSIOp if quotient else arith.RemSIOp
    result = b.create(cls, lhs=narrow[0], rhs=narrow[1]).result
    return b.create(arith.IndexCastOp, input=result, result_types=[index]).result


def grouped_program_ids(kernel: FuncOp, g: int) -> tuple[Value, Value]:
    """Block coordinates (axis 0, axis 1) in grouped order, computed at the top of the kernel.

    Launch order numbers blocks `pid = x + y * nx` (axis 0 fastest). Blocks are taken in groups
    of `g` rows of axis 0 times all of axis 1; within a group, axis 0 is fastest. The last group
    may have fewer rows (`rows = min(nx - first, g)`), which keeps the map a bijection."""
    b = Builder.at_start(kernel.body.block, kernel.loc)

    def op(cls, **fields) -> Value:
        return b.create(cls, **fields).result

    x = op(T.ProgramIdOp, axis=0)
    y = op(T.ProgramIdOp, axis=1)
    nx = op(T.NumProgramsOp, axis=0)
    ny = op(T.NumProgramsOp, axis=1)
    c_g = b.create(arith.ConstantOp, value=g, result_types=[index]).result
    pid = op(arith.AddIOp, lhs=x, rhs=op(arith.MulIOp, lhs=y, rhs=nx))
    group_size = op(arith.MulIOp, lhs=ny, rhs=c_g)
    group = block_divmod(b, pid, group_size)
    first = op(arith.MulIOp, lhs=group, rhs=c_g)
    rows = op(arith.MinSIOp, lhs=op(arith.SubIOp, lhs=nx, rhs=first), rhs=c_g)
    in_group = block_divmod(b, pid, group_size, quotient=False)
    pid_m = op(arith.AddIOp, lhs=first, rhs=block_divmod(b, in_group, rows, quotient=False))
    pid_n = block_divmod(b, in_group, rows)
    pid_m.name_hint, pid_n.name_hint = "pid_m", "pid_n"
    return pid_m, pid_n
