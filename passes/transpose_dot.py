"""The `transpose-dot` pass: a matmul whose operands are both stored transposed,
`a[tk, tm].T @ b[tn, tk].T` (A stored [K, M], B stored [N, K]), is computed transposed,
`(b[tn, tk] @ a[tk, tm]).T`, so that on sm_90a both operands reach `wgmma` from shared
memory.

C = A.T B.T is (B A).T: with the operands swapped, B stored [N, K] is a K-major A and A
stored [K, M] an N-major B, both read by wgmma's descriptors, and the accumulator is
transposed once, after the loop. (Written when wgmma read an A stored [K, M] only through
registers, `ldmatrix.trans` every step: 1.13-1.17x cuBLAS's time at 4096³ on the H200. Since
wgmma reads such an A M-major by its descriptor too (`tiling_operands.m_major_a`, a
natural-rows accumulator), the unswapped product is native as well; measured against the
swap on the H100 (docs/benchmarks.md, eleventh session) it took 0.93-0.98 of its time at
4096³ but 1.08-1.33x at 2047x2049x4095 and 1001x3001x1999 with pitched operands, and 2.6x at
1000x3000x1999 on element copies -- not a clean win, so the swap stays the default.) The pass
swaps them and carries the accumulator transposed:

    %acc = tile.full 0.0 : tile<BMxBNxf32>                %acc = tile.full 0.0 : tile<BNxBMxf32>
    %r = scf.for ... iter_args(%c = %acc) {               %r = scf.for ... iter_args(%c = %acc) {
      %at = tile.transpose %a_tile  (BK x BM -> BM x BK)     %d = tile.dot %b_tile, %a_tile, %c
      %bt = tile.transpose %b_tile  (BN x BK -> BK x BN)     scf.yield %d
      %d = tile.dot %at, %bt, %c                          }
      scf.yield %d                                        %rt = tile.transpose %r (-> BM x BN)
    }

Recognises a `tile.dot` in an `scf.for` body whose operands are each a `tile.transpose`
(perm [1, 0]) of a `tile.load` in the same body, used only by the dot, of f16 or bf16 (8-bit
operands gain nothing: wgmma reads those K-major only, and the swap leaves one M-major), and
whose accumulator is a loop-carried value used only by the dot, its result only by the
`scf.yield` (a GEMM's chain). The initial value is transposed before the loop (a `tile.full`
is rebuilt in the new shape), the loop's result after it -- after its conversion, when the
result's one use narrows it (the f16 store of an f32 accumulator: the transpose, which goes
through shared memory, then moves half the bytes). Only where it pays: option `arch`
sm_90a (mma.sync reads a transposed A by `ldmatrix.trans` as cheaply); `enable` false turns
it off. Runs before `tiling`, which then tiles the swapped dot (its M is the output's N).

Reorders nothing within a dot's sums as the language defines them (the order of a dot's
additions is unspecified), but the interpreter's BLAS may round the transposed product
differently: declared inexact, held to translation validation's tolerance. Remarks: per dot,
swapped or why not (for a dot with a transposed operand on sm_90a).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import ArrayAttr, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import FloatType, TileType
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["TransposeDot"]

_SWAPPED_ELEMENTS = ("f16", "bf16")


@register_pass
class TransposeDot(Pass):
    """Computes `x.T @ y.T` as `(y @ x).T` where both operands are stored transposed.

    See the module docstring for what is recognised and why. Runs before `tiling`.
    """

    name = "transpose-dot"
    summary = "Compute a.T @ b.T as (b @ a).T, both operands then as wgmma reads them"
    exact = False  # the interpreter's BLAS may round the transposed product differently

    @dataclass
    class Options:
        arch: str = option(
            "", "target architecture: the swap is made for sm_90a's wgmma ('' or other: off)"
        )
        enable: bool = option(True, "swap the operands of a.T @ b.T (false: leave every dot)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.arch != "sm_90a":
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            for dot in [op for op in kernel.walk() if isinstance(op, T.DotOp)]:
                if not (_transposed_load(dot.a, dot) or _transposed_load(dot.b, dot)):
                    continue
                why = _blocker(dot)
                if why is None and not self.options.enable:
                    why = "option enable=false"
                if why is not None:
                    ctx.remark(dot, f"operands kept as written: {why}")
                    continue
                _swap(dot)
                ctx.remark(
                    dot,
                    "a.T @ b.T computed as (b @ a).T: A stored [K, M] and B stored [N, K] become "
                    "the K-major A and N-major B wgmma reads from shared memory (an A stored "
                    "[K, M] would go through registers); the accumulator is carried transposed "
                    "and transposed back after the loop",
                )


def _transposed_load(v: Value, dot: Operation) -> T.LoadOp | None:
    """The `tile.load` in the dot's loop body that `v` is the [1, 0] transpose of, used only by
    `dot`; else None."""
    if not (isinstance(v, OpResult) and isinstance(v.op, T.TransposeOp)):
        return None
    transpose = v.op
    if tuple(transpose.perm) != (1, 0) or list(v.uses) != [dot]:
        return None
    source = transpose.input
    if not (isinstance(source, OpResult) and isinstance(source.op, T.LoadOp)):
        return None
    if source.op.parent is not dot.parent or list(source.uses) != [transpose]:
        return None
    return source.op


def _blocker(dot: T.DotOp) -> str | None:
    """Why `dot` is not swapped (None: it is)."""
    if not (_transposed_load(dot.a, dot) and _transposed_load(dot.b, dot)):
        return "only one operand is stored transposed (a swap would transpose the other)"
    element = str(dot.a.type.element)
    if element not in _SWAPPED_ELEMENTS:
        return f"{element} operands: wgmma reads 8-bit operands K-major only, swapped or not"
    loop = dot.parent_op
    if not isinstance(loop, scf.ForOp):
        return "the dot is not in a loop that carries its accumulator"
    acc = dot.acc
    if not (isinstance(acc, BlockArgument) and acc.owner is loop.body.block and acc.index > 0):
        return "its accumulator is not a value the loop carries"
    j = acc.index - 1
    if list(acc.uses) != [dot] or list(dot.result.uses) != [loop.yield_op]:
        return "the accumulator is read by other ops than the dot"
    if loop.yield_op.operands[j] is not dot.result:
        return "the loop does not carry the dot's result to its next iteration"
    return None


def _swap(dot: T.DotOp) -> None:
    loop = dot.parent_op
    j = dot.acc.index - 1
    a_tile = dot.a.op.input  # [K, M], as stored
    b_tile = dot.b.op.input  # [N, K]
    transposes = [dot.a.op, dot.b.op]
    acc_t = dot.acc.type
    swapped_t = TileType((acc_t.shape[1], acc_t.shape[0]), acc_t.element, acc_t.layout)
    # Before the loop: the initial accumulator, transposed (a constant is rebuilt).
    init = loop.inits[j]
    before = Builder.before_op(loop)
    if isinstance(init, OpResult) and isinstance(init.op, T.FullOp):
        full = init.op.clone()
        full.results[0].type = swapped_t
        before.insert(full)
        new_init = full.results[0]
    else:
        new_init = before.create(
            T.TransposeOp, input=init, perm=_PERM, result_types=[swapped_t]
        ).result
    loop.set_operand(3 + j, new_init)
    # The loop carries the transposed accumulator; the dot takes the operands as stored.
    dot.acc.type = swapped_t
    dot.set_operand(0, b_tile)
    dot.set_operand(1, a_tile)
    dot.result.type = swapped_t
    for t in transposes:
        t.erase()
    result = loop.results[j]
    users = list(result.uses)
    result.type = swapped_t
    after = Builder.after_op(loop)
    narrowing = _narrowing_cast(users)
    if narrowing is not None:
        # Converted first, the transpose moves the narrow values: half the bytes of an f32
        # accumulator through shared memory when the result is stored as f16.
        narrow = narrowing.result.type
        cast = after.create(
            T.CastOp,
            input=result,
            result_types=[TileType(swapped_t.shape, narrow.element, swapped_t.layout)],
        )
        back = Builder.after_op(cast).create(
            T.TransposeOp, input=cast.result, perm=_PERM, result_types=[narrow]
        )
        narrowing.result.replace_all_uses_with(back.result)
        narrowing.erase()
        return
    back = after.create(T.TransposeOp, input=result, perm=_PERM, result_types=[acc_t])
    for user in users:
        for i, operand in enumerate(user.operands):
            if operand is result:
                user.set_operand(i, back.result)


def _narrowing_cast(users: list[Operation]) -> T.CastOp | None:
    """The one user of a swapped loop's result when it is a cast to a narrower float (the
    store's conversion), else None."""
    if len(users) != 1 or not isinstance(users[0], T.CastOp):
        return None
    cast = users[0]
    source, target = cast.input.type.element, cast.result.type.element
    if not (isinstance(source, FloatType) and isinstance(target, FloatType)):
        return None
    return cast if target.width < source.width else None


_PERM = ArrayAttr((IntegerAttr(1), IntegerAttr(0)))
