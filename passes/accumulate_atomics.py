"""The `accumulate-atomics` pass: a grid axis whose blocks only combine results through atomics
becomes a loop, so that its updates are summed in registers and issued once.

Column sums written as `for tm, tn in tiles(M, N): atomic_add(out[tn], sum(x[tm, tn],
axis=0))` launch one block per tile of rows, and every one of them adds its BN partial sums
into `out`: an element of `out` receives ceil(M / BM) atomic updates, which its L2 slice
applies one after another. Measured on the H200 (2026-12-02, docs/benchmarks.md): 262144 x
512 f32 took 1.52 ms this way, 5.8 ns per update of each element, where reading the matrix
takes 0.13 ms. The blocks along M differ only in the rows they read; what they write is the
same region, combined by an associative, commutative ⊕. So that axis may be walked by a loop
instead, carrying the ⊕ of the values the atomics would add, with one atomic after it:

    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        atomic_add(out[tn], acc)

which is the column sum of examples/col_sum.tile with an atomic epilogue. `tiling` then gives
the loop its rows per iteration, and `split-reduction` splits the loop across blocks where the
other axes leave SMs idle, its partials combined by the atomic itself (no workspace): the
parallelism comes back, S blocks per output tile instead of ceil(M / BM), chosen at launch.

Recognises a kernel whose effects are all relaxed atomics in the grid body whose old values
nothing reads, with no dots (split-K is not modelled yet): `tile.atomic_rmw` ops of kind add
(any element) or max/min of integers (float max/min are totalOrder in memory, IEEE in
registers: not the same ⊕), and any `tile.atomic_scatter` (a gathered region, which stays in
the loop as written: what privatize-atomics leaves of a histogram for the values its bins do
not hold); and a grid axis whose program id is used only as its tile offset (`program_id *
B<D>`), on which no `tile.atomic_rmw`'s offsets or mask depend. The first such axis (in grid
order) becomes the loop from 0 to the dimension's extent, stepping by its tile symbol, around
the ops that depend on it and the scatters; each `tile.atomic_rmw` then combines the loop's
result of its value (from ⊕'s identity). Grid axes after it are renumbered. Runs before
`tiling`.

Exact for integer sums, max and min; reorders float sums (as the blocks' atomics already do,
in whatever order they run): checked with a tolerance. Options: `enable` (false: leave every
kernel alone; `--disable accumulate-atomics` does the same). Remarks: per kernel, the axis
turned into a loop and the atomics it accumulates, or why none was.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith, scf
from tilec.dialects import tile as T
from tilec.dialects.atomic import AtomicRMWOp, AtomicScatterOp
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.dialects.gather import GatherOp
from tilec.ir.attributes import IntegerAttr, to_attribute
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, OpResult, Pure, Region, Value
from tilec.ir.types import FloatType, IntegerType, TensorType, index
from tilec.passes.specialize import attribute_pairs
from tilec.passes.split_reduction import COMBINES, Combine, identity_attr
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["AccumulateAtomics", "atomic_combine"]

# Ops that have no Pure trait but write nothing: reads, and the structure around them.
_READS = (T.LoadOp, GatherOp, scf.ForOp, scf.IfOp, scf.YieldOp, ReturnOp)


@register_pass
class AccumulateAtomics(Pass):
    """Turns a grid axis that only feeds atomics into a loop that accumulates their values.

    See the module docstring for what is recognised and why. Runs before `tiling`.
    """

    name = "accumulate-atomics"
    summary = "Walk a grid axis whose blocks only combine atomically with a loop instead"
    exact = False  # float sums are added in another order

    @dataclass
    class Options:
        enable: bool = option(
            True, "turn a grid axis that only feeds atomics into a loop (false: leave kernels)"
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            if not any(isinstance(op, AtomicRMWOp) for op in kernel.walk()):
                continue
            if not self.options.enable:
                ctx.remark(kernel, "atomics left as written: option enable=false")
                continue
            try:
                plan = _plan(kernel)
            except _Kept as why:
                ctx.remark(kernel, f"atomics left as written: {why}")
                continue
            _rewrite(kernel, plan)
            names = ", ".join(f"{a.view_name} by {c.name}" for a, c in plan.atomics)
            ctx.remark(
                kernel,
                f"grid axis {plan.axis} ({plan.dim}) becomes a loop stepping by {plan.symbol}: its "
                f"blocks only combined their values into the same regions with atomics ({names}), "
                f"each element updated ceil({plan.dim}/{plan.symbol}) times; now each update is "
                "accumulated in registers and issued once after the loop (split-reduction may "
                "split the loop across blocks again, each adding its partial)",
            )


def atomic_combine(op: AtomicRMWOp) -> Combine | None:
    """The register ⊕ that matches atomic `op`'s: add of any element, max/min of integers
    (float max/min in memory are totalOrder, which `arith.maximumf` is not); None else."""
    element = op.value.type.element
    if op.kind == "add":
        return COMBINES[arith.AddFOp if isinstance(element, FloatType) else arith.AddIOp]
    if isinstance(element, IntegerType):
        return COMBINES[arith.MaxSIOp if op.kind == "max" else arith.MinSIOp]
    return None


class _Kept(Exception):
    """Why a kernel is left alone (the remark's text)."""


@dataclass
class _Atomic:
    op: AtomicRMWOp

    @property
    def view_name(self) -> str:
        return getattr(self.op.view, "name_hint", None) or "a tensor"


@dataclass
class _Plan:
    axis: int
    dim: str
    symbol: str
    offset: OpResult  # program_id * B<D>
    atomics: list[tuple[_Atomic, Combine]]
    extent: tuple[Value, int]  # a tensor argument with dimension `dim`, and its axis
    scattered: list[AtomicScatterOp]  # atomics on gathered regions: run in the loop, as written


def _plan(kernel: FuncOp) -> _Plan:
    body = kernel.body.block
    atomics: list[tuple[_Atomic, Combine]] = []
    scattered: list[AtomicScatterOp] = []
    for op in kernel.walk():
        if op is kernel or op.has_trait(Pure) or isinstance(op, _READS):
            continue
        if not isinstance(op, (AtomicRMWOp, AtomicScatterOp)):
            raise _Kept(f"the kernel has another effect ({op.name})")
        if op.parent is not body:
            raise _Kept("an atomic inside a loop or a branch")
        if op.sem not in (None, "relaxed"):
            raise _Kept(f"an atomic with memory order {op.sem} orders other accesses")
        if op.result.uses:
            raise _Kept("an atomic's old values are read")
        if isinstance(op, AtomicScatterOp):
            scattered.append(op)  # its region is gathered: it stays in the loop, as it is
            continue
        combine = atomic_combine(op)
        if combine is None:
            raise _Kept(
                f"atomic {op.kind} of {op.value.type.element}: totalOrder in memory, not the "
                "⊕ of registers"
            )
        atomics.append((_Atomic(op), combine))
    if not atomics:
        raise _Kept("no atomic combines into a region that is not gathered")
    if any(isinstance(op, T.DotOp) for op in kernel.walk()):
        raise _Kept("the kernel has a dot (a split-K GEMM is not modelled yet)")
    grid = attribute_pairs(kernel, "tilec.grid")
    reasons = []
    for axis, (dim, symbol) in enumerate(grid):
        offset = _axis_offset(kernel, axis, symbol)
        if offset is None:
            reasons.append(f"{dim}: its program id is used other than as the tile offset")
            continue
        depends = _dependents(offset)
        bad = [
            a
            for a, _ in atomics
            if any(v in depends for v in [*a.op.offsets, *([a.op.mask] if a.op.mask else [])])
        ]
        if bad:
            reasons.append(f"{dim}: the atomics' regions depend on it")
            continue
        extent = _extent(kernel, str(dim))
        if extent is None:
            reasons.append(f"{dim}: no tensor argument has it")  # the frontend never does this
            continue
        return _Plan(axis, str(dim), str(symbol), offset, atomics, extent, scattered)
    raise _Kept("; ".join(reasons) if reasons else "no grid axis")


def _axis_offset(kernel: FuncOp, axis: int, symbol: object) -> OpResult | None:
    """The one `program_id(axis) * symbol` of the kernel, when the program id has no other
    use (and no `num_programs(axis)` exists)."""
    ids = [op for op in kernel.walk() if isinstance(op, T.ProgramIdOp) and op.axis == axis]
    if any(isinstance(op, T.NumProgramsOp) and op.axis == axis for op in kernel.walk()):
        return None
    if len(ids) != 1 or not isinstance(symbol, str):
        return None
    uses = ids[0].result.uses
    if len(uses) != 1 or not isinstance(uses[0], arith.MulIOp):
        return None
    mul = uses[0]
    other = mul.operands[1] if mul.operands[0] is ids[0].result else mul.operands[0]
    if not (
        isinstance(other, OpResult)
        and isinstance(other.op, T.SymbolOp)
        and other.op.symbol == symbol
    ):
        return None
    if mul.parent is not kernel.body.block:
        return None
    return mul.result


def _dependents(v: Value) -> set[Value]:
    """Every value computed (transitively) from `v`, including results of ops whose nested
    regions read it."""
    found: set[Value] = {v}
    stack = [v]
    while stack:
        x = stack.pop()
        for user in list(x.uses):
            top = user
            for r in _enclosing_results(top):
                if r not in found:
                    found.add(r)
                    stack.append(r)
    return found


def _enclosing_results(op: Operation) -> list[Value]:
    """The results of `op` and of every op enclosing it."""
    results: list[Value] = []
    current: Operation | None = op
    while current is not None and not isinstance(current, FuncOp):
        results.extend(current.results)
        current = current.parent_op
    return results


def _top_level(op: Operation, body: Block) -> Operation:
    while op.parent is not body:
        parent = op.parent_op
        assert parent is not None
        op = parent
    return op


def _rewrite(kernel: FuncOp, plan: _Plan) -> None:
    body = kernel.body.block
    offset = plan.offset
    program_id = offset.op.operands[0]
    if not (isinstance(program_id, OpResult) and isinstance(program_id.op, T.ProgramIdOp)):
        program_id = offset.op.operands[1]
    depends = _dependents(offset)
    atomics = [a.op for a, _ in plan.atomics]
    moved: list[Operation] = []
    for op in list(body.ops):
        if op is offset.op or op in atomics or isinstance(op, ReturnOp):
            continue
        if (
            op in plan.scattered
            or any(r in depends for r in op.results)
            or any(v in depends for inner in op.walk() for v in inner.operands)
        ):
            moved.append(op)
    ret = body.terminator
    assert ret is not None
    b = Builder.before_op(ret)
    zero = b.create(arith.ConstantOp, value=0, result_types=[index]).result
    view, axis = plan.extent
    upper = b.create(T.DimOp, view=view, axis=axis).result
    step = offset.op.operands[1] if offset.op.operands[0] is program_id else offset.op.operands[0]
    inits = [
        b.create(
            T.FullOp, value=identity_attr(c, a.op.value.type), result_types=[a.op.value.type]
        ).result
        for a, c in plan.atomics
    ]
    loop_block = Block([index, *(a.op.value.type for a, _ in plan.atomics)])
    loop = b.create(
        scf.ForOp, lower=zero, upper=upper, step=step, inits=inits, body=Region([loop_block])
    )
    loop.induction_var.name_hint = offset.name_hint or "t" + plan.dim.lower()
    for (a, _), arg in zip(plan.atomics, loop.iter_args):
        arg.name_hint = f"{a.view_name}_update"
    for op in moved:
        op.detach()
        loop_block.append(op)
    offset.replace_all_uses_with(loop.induction_var)
    offset.op.erase()
    program_id.op.erase()
    inner = Builder.at_end(loop_block, loc=kernel.loc)
    updated = [
        inner.create(c.op, lhs=acc, rhs=a.op.value).result
        for (a, c), acc in zip(plan.atomics, loop.iter_args)
    ]
    inner.create(scf.YieldOp, values=updated)
    previous: Operation = loop
    for (a, _), result in zip(plan.atomics, loop.results):
        a.op.set_operand(a.op.operands.index(a.op.value), result)
        a.op.move_after(previous)
        previous = a.op
    for op in kernel.walk():
        if isinstance(op, (T.ProgramIdOp, T.NumProgramsOp)) and op.axis > plan.axis:
            op.attributes["axis"] = IntegerAttr(op.axis - 1)
    grid = attribute_pairs(kernel, "tilec.grid")
    del grid[plan.axis]
    kernel.attributes["tilec.grid"] = to_attribute([list(p) for p in grid])


def _extent(kernel: FuncOp, dim: str) -> tuple[Value, int] | None:
    """The first tensor argument that has dimension `dim`, and its axis."""
    for arg in kernel.body.block.args:
        t = arg.type
        if isinstance(t, TensorType):
            for axis, d in enumerate(t.shape):
                if d == dim:
                    return arg, axis
    return None
