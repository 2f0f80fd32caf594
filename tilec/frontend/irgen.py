"""IR generation: the checked tile program (`sema.Program`) → tile-level IR (a `builtin.module`).

Each kernel becomes a `func` whose arguments are `!tile.tensor<...>` views and scalars. What the
IR says, and why:

* **The grid.** Grid loop variable `tm` of dimension `M` becomes
  `%tm = arith.muli (tile.program_id k), (tile.symbol "BM")`: the element offset of this
  block's tile. An element variable (tile size pinned to 1) is the program id itself. The func
  records the grid as `tilec.grid = [["M", "BM"], ...]`: axis k has cdiv(M, BM) programs.
* **Symbols and extents** (`tile.symbol "BM"`, `tile.dim %a, 0`) are made once, at the start of
  the kernel, so loops and masks share them.
* **Sequential loops** are `scf.for %tk = 0 to K step BK` whose `iter_args` are the names the
  loop reassigns; `range()` loops and `if` statements are `scf.for`/`scf.if` too
  (`tilec.frontend.irgen_control`).
* **Accesses.** `a[tm, tk]` is `tile.load %a[%tm, %tk]`, which masks lanes outside the tensor by
  itself (they read as 0). A scalar index loads a size-1 dimension, then `tile.reshape` drops it;
  when every index is a scalar, the one-element tile is reduced to a scalar (the dialect has no
  extract op).
* **Padding lanes** of a tile that reaches past its dimension's extent never reach a result:
  reductions replace them with the reduction's identity (`mean` divides by the number of real
  lanes) and dot operands that are not loads are zeroed along the contraction.
* **i1 is ordered False < True**, as in Python, while the IR reads i1 as signed (true is -1):
  comparisons of i1 values use unsigned predicates, and max/min of i1 (any/all) reduce 0/1
  integers.
* **Constants** take the element type they meet; a finite float constant beyond that type's
  range is ±inf, as the conversion would give at run time.
* **Pinned options** become func attributes: `tilec.pinned_tiles = [["BM", 128], ...]`,
  `tilec.num_warps`, `tilec.num_stages`, `tilec.pinned_split`; dimensions used whole are
  `tilec.whole_dims` (their tile size must cover the extent).

Every op carries the source location of the construct it came from.
"""

from __future__ import annotations

import math as math_module
from collections.abc import Callable

import numpy as np

from tilec.diagnostics import Location, TileError
from tilec.dialects import arith, math, scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ModuleOp, ReturnOp
from tilec.frontend import sema
from tilec.frontend.builtins import GENERATORS
from tilec.frontend.checked import Effect, If, RangeIndex, RangeLoop
from tilec.frontend.irgen_builtins import dot_expr
from tilec.frontend.irgen_control import if_statement, range_loop
from tilec.frontend.irgen_gather import gather, is_gathered, scatter
from tilec.ir.attributes import ArrayAttr, BoolAttr, FloatAttr, IntegerAttr, StringAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, Region, Value
from tilec.ir.folding import numpy_dtype
from tilec.ir.types import (
    SCALAR_TYPES,
    FloatType,
    TensorType,
    TileType,
    Type,
    element_type,
    i1,
    i32,
    index,
)

__all__ = ["generate_ir", "ir_type"]


def generate_ir(program: sema.Program, kernels: list[str] | None = None) -> ModuleOp:
    """A module with one `func` per kernel of `program` (or only those named in `kernels`)."""
    module_block = Block()
    chosen = program.kernels if kernels is None else [program.kernel(n) for n in kernels]
    for kernel in chosen:
        module_block.append(_KernelGenerator(kernel).generate())
    first = chosen[0].loc if chosen else Location(program.filename, 1, 1)
    return ModuleOp.make(body=Region([module_block]), loc=Location(first.file, 1, 1))


def ir_type(t: sema.TileType) -> Type:
    """The IR type of a value of checked type `t`: a scalar, or a tile."""
    scalar = SCALAR_TYPES[str(t.dtype)]
    return TileType(tuple(t.shape), scalar) if t.shape else scalar


_CMPF = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_CMPI = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_CMPI_BOOL = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
_FLOAT_BINARY = {
    "add": arith.AddFOp,
    "sub": arith.SubFOp,
    "mul": arith.MulFOp,
    "div": arith.DivFOp,
    "maximum": arith.MaximumFOp,
    "minimum": arith.MinimumFOp,
    "pow": math.PowFOp,
}
_INT_BINARY = {
    "add": arith.AddIOp,
    "sub": arith.SubIOp,
    "mul": arith.MulIOp,
    "maximum": arith.MaxSIOp,
    "minimum": arith.MinSIOp,
    "and": arith.AndIOp,
    "or": arith.OrIOp,
    "xor": arith.XOrIOp,
    "shl": arith.ShLIOp,
    "shr": arith.ShRSIOp,
}


class _KernelGenerator:
    ir_type = staticmethod(ir_type)

    def __init__(self, kernel: sema.Kernel):
        self.kernel = kernel
        self.entry = Block()
        self.b = Builder.at_end(self.entry, kernel.loc)
        self.params: dict[str, Value] = {}
        self.offsets: dict[int, Value] = {}  # id(LoopVar) -> index value of its tile start
        self._entry_values: dict[tuple, Value] = {}
        self._prologue_size = 0
        # id(Philox) -> its tile.philox (`irgen_builtins.philox_expr`)
        self.philox_words: dict[int, Value] = {}

    # -- the kernel -----------------------------------------------------------------------

    def generate(self) -> FuncOp:
        k = self.kernel
        for p in k.params:
            if isinstance(p, sema.TensorParam):
                dims = tuple(d if isinstance(d, int) else d.name for d in p.dims)
                t: Type = TensorType(dims, SCALAR_TYPES[str(p.dtype)])
            else:
                t = SCALAR_TYPES[str(p.dtype)]
            self.params[p.name] = self.entry.add_arg(t, p.name)
        env: dict[str, Value] = {}
        grid = k.grid
        with self.b.located(grid.loc):
            for axis, var in enumerate(grid.vars):
                pid = self.b.create(T.ProgramIdOp, axis=axis, loc=var.loc).result
                if var.element:
                    offset = pid
                else:
                    size = self.symbol(var.dim.tile_symbol)
                    offset = self.b.create(arith.MulIOp, lhs=pid, rhs=size, loc=var.loc).result
                offset.name_hint = var.name
                self.offsets[id(var)] = offset
        self.statements(grid.body, env)
        self.b.create(ReturnOp, loc=grid.loc)
        attributes = {"sym_name": StringAttr(k.name)}
        attributes["tilec.grid"] = ArrayAttr(
            tuple(
                ArrayAttr((StringAttr(v.dim.name), StringAttr(v.dim.tile_symbol)))
                for v in grid.vars
            )
        )
        pins = [(d.tile_symbol, d.pinned) for d in k.dims if d.pinned is not None]
        if pins:
            attributes["tilec.pinned_tiles"] = ArrayAttr(
                tuple(ArrayAttr((StringAttr(s), IntegerAttr(n))) for s, n in pins)
            )
        whole = [d.name for d in k.dims if d.whole]
        if whole:
            attributes["tilec.whole_dims"] = ArrayAttr(tuple(StringAttr(n) for n in whole))
        if k.options.warps is not None:
            attributes["tilec.num_warps"] = IntegerAttr(k.options.warps)
        if k.options.stages is not None:
            attributes["tilec.num_stages"] = IntegerAttr(k.options.stages)
        if k.options.split is not None:
            attributes["tilec.pinned_split"] = IntegerAttr(k.options.split)
        return FuncOp([], [], attributes, [Region([self.entry])], k.loc)

    # -- values made once at the start of the kernel --------------------------------------

    def _at_entry(self, key: tuple, make: Callable[[], Operation], hint: str | None) -> Value:
        value = self._entry_values.get(key)
        if value is None:
            op = make()
            self.entry.insert(self._prologue_size, op)
            self._prologue_size += 1
            value = op.results[0]
            value.name_hint = hint
            self._entry_values[key] = value
        return value

    def symbol(self, name: str) -> Value:
        """The index value of tile-size symbol `name`."""
        return self._at_entry(
            ("symbol", name), lambda: T.SymbolOp.make(symbol=name, loc=self.kernel.loc), name
        )

    def extent(self, dim: sema.Dimension) -> Value:
        """The runtime extent of `dim`, from the first tensor argument that has it."""
        for p in self.kernel.params:
            if isinstance(p, sema.TensorParam):
                for axis, d in enumerate(p.dims):
                    if d is dim:
                        view = self.params[p.name]
                        return self._at_entry(
                            ("dim", dim.name),
                            lambda v=view, a=axis: T.DimOp.make(view=v, axis=a, loc=dim.loc),
                            dim.name,
                        )
        raise AssertionError(f"dimension {dim.name} belongs to no tensor argument")

    def index_constant(self, value: int) -> Value:
        return self._at_entry(
            ("index", value),
            lambda: arith.ConstantOp.make(value=value, result_types=[index], loc=self.kernel.loc),
            f"c{value}",
        )

    def constant(self, value: bool | int | float, t: Type) -> Value:
        """A scalar constant (`arith.constant`) or a constant tile (`tile.full`) of type `t`."""
        e = element_type(t)
        if e == i1:
            attr = BoolAttr(bool(value))
        elif isinstance(e, FloatType):
            attr = FloatAttr(_in_float_range(float(value), t))
        else:
            attr = IntegerAttr(int(value))
        if isinstance(t, TileType):
            return self.b.create(T.FullOp, value=attr, result_types=[t]).result
        return self.b.create(arith.ConstantOp, value=attr, result_types=[t]).result

    # -- statements -----------------------------------------------------------------------

    def statements(self, body: tuple[sema.Stmt, ...], env: dict[str, Value]) -> None:
        for stmt in body:
            try:
                self.statement(stmt, env)
            except RecursionError:
                # IR generation recurses a few frames deeper per operator than analysis does,
                # so an expression that analysis just accepted can still be too deep here.
                raise TileError(
                    "expression is too deeply nested",
                    stmt.loc,
                    hint="split it into several assignments",
                ) from None

    def statement(self, stmt: sema.Stmt, env: dict[str, Value]) -> None:
        with self.b.located(stmt.loc):
            if isinstance(stmt, sema.Assign):
                value = self.expr(stmt.value, env)
                if value.name_hint is None and not isinstance(stmt.value, sema.VarRef):
                    value.name_hint = stmt.name
                env[stmt.name] = value
            elif isinstance(stmt, sema.Store):
                self.store(stmt, env)
            elif isinstance(stmt, sema.SeqLoop):
                self.loop(stmt, env)
            elif isinstance(stmt, RangeLoop):
                range_loop(self, stmt, env)
            elif isinstance(stmt, If):
                if_statement(self, stmt, env)
            elif isinstance(stmt, Effect):
                self.expr(stmt.value, env)  # the old values stay unused: `red`, not `atom`
            else:
                raise AssertionError(f"unexpected statement {type(stmt).__name__}")

    def loop(self, stmt: sema.SeqLoop, env: dict[str, Value]) -> None:
        var = stmt.var
        lower = self.index_constant(0)
        upper = self.extent(var.dim)
        step = self.index_constant(1) if var.element else self.symbol(var.dim.tile_symbol)
        carried = [c.name for c in stmt.carried]
        inits = [env[name] for name in carried]
        body = Block([index, *(v.type for v in inits)])
        body.args[0].name_hint = var.name
        for arg, name in zip(body.args[1:], carried):
            arg.name_hint = name
        loop = self.b.create(
            scf.ForOp, lower=lower, upper=upper, step=step, inits=inits, body=Region([body])
        )
        inner_env = dict(env)
        inner_env.update(zip(carried, body.args[1:]))
        self.offsets[id(var)] = body.args[0]
        saved = (self.b.block, self.b.anchor)
        self.b.block, self.b.anchor = body, None
        self.statements(stmt.body, inner_env)
        self.b.create(scf.YieldOp, values=[inner_env[name] for name in carried])
        self.b.block, self.b.anchor = saved
        for name, result in zip(carried, loop.results):
            result.name_hint = name
            env[name] = result

    def store(self, stmt: sema.Store, env: dict[str, Value]) -> None:
        value = self.expr(stmt.value, env)
        view, offsets, full_shape = self.access(stmt.access, env)
        vt = value.type
        if not isinstance(vt, TileType):
            value = self.b.create(
                T.SplatOp, input=value, result_types=[TileType(full_shape, vt)]
            ).result
        elif vt.shape != full_shape:
            value = self.b.create(
                T.ReshapeOp, input=value, result_types=[TileType(full_shape, vt.element)]
            ).result
        if is_gathered(stmt.access):
            scatter(self, stmt.access, env, view, offsets, value)
            return
        self.b.create(T.StoreOp, view=view, offsets=offsets, value=value)

    def access(
        self, access: sema.TensorAccess, env: dict[str, Value]
    ) -> tuple[Value, list[Value], tuple]:
        """The view, the offset per dimension, and the tile shape at the view's full rank."""
        view = self.params[access.tensor.name]
        offsets: list[Value] = []
        shape: list = []
        for idx in access.indices:
            if idx.kind is sema.IndexKind.TILE:
                assert idx.var is not None
                offsets.append(self.offsets[id(idx.var)])
                shape.append(idx.size)
            elif idx.kind in (sema.IndexKind.WHOLE, sema.IndexKind.GATHER):
                # A gathered dimension's elements are its indices (tilec.frontend.irgen_gather).
                offsets.append(self.index_constant(0))
                shape.append(idx.size)
            elif isinstance(idx.value, RangeIndex) or (
                isinstance(idx.value, sema.LoopIndex) and not idx.value.end
            ):
                # An element variable is already an index: no round trip through i32.
                offsets.append(self.offsets[id(idx.value.var)])
                shape.append(1)
            elif isinstance(idx.value, sema.Constant):
                offsets.append(self.index_constant(int(idx.value.value)))
                shape.append(1)
            else:
                assert idx.value is not None
                offsets.append(self.as_index(self.expr(idx.value, env)))
                shape.append(1)
        return view, offsets, tuple(shape)

    # -- expressions ----------------------------------------------------------------------

    def expr(self, e: sema.Expr, env: dict[str, Value]) -> Value:
        with self.b.located(e.loc):
            return self._expr(e, env)

    def _expr(self, e: sema.Expr, env: dict[str, Value]) -> Value:
        # What builtin calls build is generated as the registry of builtins says; the rest
        # (literals, names, accesses, operators, conversions) is the language's own, here.
        generate = GENERATORS.get(type(e))
        if generate is not None:
            return generate(self, e, env)
        t = ir_type(e.type)
        b = self.b
        if isinstance(e, sema.Constant):
            return self.constant(e.value, t)
        if isinstance(e, sema.VarRef):
            return env[e.name]
        if isinstance(e, sema.ParamRef):
            return self.params[e.param.name]
        if isinstance(e, sema.DimSize):
            return self.index_to(self.extent(e.dim), t)
        if isinstance(e, sema.LoopIndex) and e.end:
            size = self.symbol(e.var.size_symbol)
            end = self.b.create(arith.AddIOp, lhs=self.offsets[id(e.var)], rhs=size).result
            return self.index_to(end, t)
        if isinstance(e, (sema.LoopIndex, RangeIndex)):
            return self.index_to(self.offsets[id(e.var)], t)
        if isinstance(e, sema.Load):
            view, offsets, full_shape = self.access(e.access, env)
            if is_gathered(e.access):
                loaded = gather(self, e.access, env, view, offsets, full_shape, element_type(t))
            else:
                loaded = b.create(
                    T.LoadOp,
                    view=view,
                    offsets=offsets,
                    result_types=[TileType(full_shape, element_type(t))],
                ).result
            if not e.type.shape:
                return self.extract_scalar(loaded)
            if full_shape != tuple(e.type.shape):
                loaded = b.create(T.ReshapeOp, input=loaded, result_types=[t]).result
            return loaded
        if isinstance(e, sema.Full):
            if isinstance(e.value, sema.Constant):
                return self.constant(e.value.value, t)
            return b.create(T.SplatOp, input=self.expr(e.value, env), result_types=[t]).result
        if isinstance(e, sema.Binary):
            return self.binary(e, env)
        if isinstance(e, sema.Unary):
            x = self.expr(e.operand, env)
            if e.op == "neg":
                if isinstance(element_type(t), FloatType):
                    return b.create(arith.NegFOp, operand=x).result
                return b.create(arith.SubIOp, lhs=self.constant(0, t), rhs=x).result
            ones = True if element_type(t) == i1 else -1
            return b.create(arith.XOrIOp, lhs=x, rhs=self.constant(ones, t)).result
        if isinstance(e, sema.Cast):
            return self.cast(self.expr(e.operand, env), t)
        if isinstance(e, sema.Broadcast):
            if isinstance(e.operand, sema.Constant):  # a literal met a tile: a constant tile
                return self.constant(e.operand.value, t)
            return self.broadcast(self.expr(e.operand, env), t)
        if isinstance(e, sema.ExpandDims):
            x = self.expr(e.operand, env)
            if not isinstance(x.type, TileType):  # `s[None]`: expand_dims takes tiles only
                return b.create(T.SplatOp, input=x, result_types=[t]).result
            for axis in sorted(e.axes):
                x = b.create(T.ExpandDimsOp, input=x, axis=axis).result
            return x
        raise AssertionError(f"unexpected expression {type(e).__name__}")

    def binary(self, e: sema.Binary, env: dict[str, Value]) -> Value:
        if e.op == "add" and (isinstance(e.rhs, sema.Dot) or isinstance(e.lhs, sema.Dot)):
            # `acc + a @ b` (and `acc += a @ b`) accumulates into acc: one tile.dot, as the
            # language defines it (a dot's summation order is unspecified anyway).
            dot, acc = (e.rhs, e.lhs) if isinstance(e.rhs, sema.Dot) else (e.lhs, e.rhs)
            return dot_expr(self, dot, env, self.expr(acc, env))
        lhs = self.expr(e.lhs, env)
        rhs = self.expr(e.rhs, env)
        is_float = isinstance(element_type(lhs.type), FloatType)
        b = self.b
        if e.op in sema.COMPARISONS:
            if is_float:
                return b.create(arith.CmpFOp, predicate=_CMPF[e.op], lhs=lhs, rhs=rhs).result
            # The IR reads i1 as signed (true is -1); the language orders False < True.
            predicates = _CMPI_BOOL if element_type(lhs.type) == i1 else _CMPI
            return b.create(arith.CmpIOp, predicate=predicates[e.op], lhs=lhs, rhs=rhs).result
        table = _FLOAT_BINARY if is_float else _INT_BINARY
        op = table.get(e.op)
        if op is not None:
            return b.create(op, lhs=lhs, rhs=rhs).result
        if e.op == "floordiv":
            if is_float:
                q = b.create(arith.DivFOp, lhs=lhs, rhs=rhs).result
                return b.create(math.FloorOp, operand=q).result
            return self.floor_divide(lhs, rhs)
        if e.op == "mod":
            if is_float:
                q = b.create(arith.DivFOp, lhs=lhs, rhs=rhs).result
                q = b.create(math.FloorOp, operand=q).result
                p = b.create(arith.MulFOp, lhs=q, rhs=rhs).result
                return b.create(arith.SubFOp, lhs=lhs, rhs=p).result
            return self.floor_modulo(lhs, rhs)
        raise AssertionError(f"no lowering for {e.op} on {lhs.type}")

    def _sign_differs_and_nonzero(self, remainder: Value, divisor: Value) -> Value:
        """Python's floor adjustment: a nonzero remainder whose sign differs from the divisor's."""
        b, t = self.b, remainder.type
        zero = self.constant(0, t)
        nonzero = b.create(arith.CmpIOp, predicate="ne", lhs=remainder, rhs=zero).result
        r_neg = b.create(arith.CmpIOp, predicate="slt", lhs=remainder, rhs=zero).result
        d_neg = b.create(arith.CmpIOp, predicate="slt", lhs=divisor, rhs=zero).result
        differ = b.create(arith.XOrIOp, lhs=r_neg, rhs=d_neg).result
        return b.create(arith.AndIOp, lhs=nonzero, rhs=differ).result

    def _choose(self, cond: Value, on_true: Value, on_false: Value) -> Value:
        return self.b.create(
            T.SelectOp, condition=cond, true_value=on_true, false_value=on_false
        ).result

    def floor_divide(self, lhs: Value, rhs: Value) -> Value:
        b = self.b
        q = b.create(arith.DivSIOp, lhs=lhs, rhs=rhs).result
        r = b.create(arith.RemSIOp, lhs=lhs, rhs=rhs).result
        adjust = self._sign_differs_and_nonzero(r, rhs)
        # x // 0 is -1 for every x (x % 0 is x): no floor adjustment for a zero divisor.
        divisor = b.create(arith.CmpIOp, predicate="ne", lhs=rhs, rhs=self.constant(0, rhs.type))
        adjust = b.create(arith.AndIOp, lhs=adjust, rhs=divisor.result).result
        q_minus_1 = b.create(arith.SubIOp, lhs=q, rhs=self.constant(1, q.type)).result
        return self._choose(adjust, q_minus_1, q)

    def floor_modulo(self, lhs: Value, rhs: Value) -> Value:
        b = self.b
        r = b.create(arith.RemSIOp, lhs=lhs, rhs=rhs).result
        adjust = self._sign_differs_and_nonzero(r, rhs)
        r_plus = b.create(arith.AddIOp, lhs=r, rhs=rhs).result
        return self._choose(adjust, r_plus, r)

    # -- conversions and shapes -----------------------------------------------------------

    def cast(self, x: Value, t: Type) -> Value:
        if x.type == t:
            return x
        return self.b.create(T.CastOp, input=x, result_types=[t]).result

    def extract_scalar(self, x: Value) -> Value:
        """The one element of a tile whose dimensions are all 1, as a scalar.

        The tile dialect has no extract op; reducing a one-element tile along its only axis
        gives exactly that element (max: no identity enters, -0.0 and NaN come through).
        """
        t = x.type
        assert isinstance(t, TileType) and all(d == 1 for d in t.shape)
        if t.rank != 1:
            x = self.b.create(T.ReshapeOp, input=x, result_types=[TileType((1,), t.element)])
            x = x.result
        return self.b.create(T.ReduceOp, kind="max", input=x, axis=0).result

    def as_index(self, x: Value) -> Value:
        if x.type == index:
            return x
        return self.b.create(arith.IndexCastOp, input=x, result_types=[index]).result

    def index_to(self, x: Value, t: Type) -> Value:
        return (
            x if t == index else self.b.create(arith.IndexCastOp, input=x, result_types=[t]).result
        )

    def broadcast(self, x: Value, t: Type) -> Value:
        """numpy's broadcast_to(x, t.shape): a scalar is splat; leading axes are added."""
        if x.type == t:
            return x
        if not isinstance(x.type, TileType):
            return self.b.create(T.SplatOp, input=x, result_types=[t]).result
        assert isinstance(t, TileType)
        while x.type.rank < t.rank:
            x = self.b.create(T.ExpandDimsOp, input=x, axis=0).result
        if x.type.shape != t.shape:
            x = self.b.create(T.BroadcastOp, input=x, result_types=[t]).result
        return x

    # -- padding lanes --------------------------------------------------------------------

    def lane_mask(self, extent: sema.AxisExtent, axis: int, shape: tuple) -> Value:
        """i1 tile of `shape`: true where lane `i` of `axis` is inside the dimension."""
        b = self.b
        size = shape[axis]
        lanes = b.create(T.IotaOp, result_types=[TileType((size,), i32)]).result
        limit = self.extent(extent.dim)
        if extent.var is not None:
            limit = b.create(arith.SubIOp, lhs=limit, rhs=self.offsets[id(extent.var)]).result
        limit32 = b.create(arith.IndexCastOp, input=limit, result_types=[i32]).result
        limits = b.create(T.SplatOp, input=limit32, result_types=[lanes.type]).result
        mask = b.create(arith.CmpIOp, predicate="slt", lhs=lanes, rhs=limits).result
        for other in range(len(shape)):
            if other != axis:
                mask = b.create(T.ExpandDimsOp, input=mask, axis=other).result
        full = TileType(tuple(shape), i1)
        return self.broadcast(mask, full)

    def mask_padding(
        self, x: Value, axis: int, extent: sema.AxisExtent, fill: bool | int | float
    ) -> Value:
        mask = self.lane_mask(extent, axis, x.type.shape)
        filler = self.constant(fill, x.type)
        return self.b.create(T.SelectOp, condition=mask, true_value=x, false_value=filler).result

    def real_lanes(self, size, extent: sema.AxisExtent | None) -> Value:
        """Number of real lanes on an axis of tile size `size` (an index value)."""
        b = self.b
        width = self.index_constant(size) if isinstance(size, int) else self.symbol(size)
        if extent is None:
            return width
        limit = self.extent(extent.dim)
        if extent.var is not None:
            limit = b.create(arith.SubIOp, lhs=limit, rhs=self.offsets[id(extent.var)]).result
        return b.create(arith.MinSIOp, lhs=limit, rhs=width).result


def _in_float_range(value: float, t: Type) -> float:
    """`value` as a constant of float type `t`: a finite value beyond the type's range is
    ±inf, as converting it at run time would give (`x_f16 * 1e5` multiplies by inf). The IR
    refuses a finite constant that would overflow, so the frontend writes the inf itself."""
    dtype = numpy_dtype(t)
    if dtype is None or not math_module.isfinite(value):
        return value
    with np.errstate(over="ignore"):
        rounded = float(dtype.type(value))
    return rounded if math_module.isinf(rounded) else value
