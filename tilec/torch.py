"""tilec kernels as PyTorch operators: `tilec.torch.op("mylib::rmsnorm", kernel)`.

    rmsnorm = tilec.torch.op("mylib::rmsnorm", tilec.load_kernel("examples/rmsnorm.tile"))
    y = rmsnorm(x, w, eps=1e-6)              # y: allocated and returned

Everything the operator needs comes from the kernel's signature and body (docs/torch.md):

* **Roles.** A tensor the kernel only reads is an input; one it only writes is an *output*,
  allocated by the operator and returned (a tuple when there are several); one it reads and
  writes is *mutated* in place (`mutates_args`). Scalars are `float`, `int` or `bool`
  arguments.
* **Output shapes and dtypes.** Each output's dimensions are named in its type (`y: bf16[M, N]`);
  a name that an input's type also has takes that input's extent, any other one is a keyword
  argument of the operator named by the dimension (`N=4096`). The dtype is the kernel's; for a
  kernel with dtype parameters (`@kernel(dtypes={"T": [bf16, f32]})`, `y: T[M, N]`), the dtype
  of the first input the parameter types, and one operator serves every dtype it may take.
* **Registration.** An operator of torch's dispatcher (`torch.library.Library.define`: what
  `torch.library.custom_op` makes, without its layers) with that schema, whose fake (meta) kernel
  allocates the same outputs, so `torch.compile(fullgraph=True)` traces it without a graph
  break; CUDA tensors run the compiled kernel (`@tilec.jit`'s specialization and caches), CPU
  tensors the reference interpreter -- so the same operator runs in CI and
  `torch.library.opcheck` checks it there.
* **Autograd.** `op.register_autograd(backward, setup_context=...)` is
  `torch.library.register_autograd` of the operator; the backward may call other tilec ops.
  An eager call that autograd records (a plain tensor that requires grad, nothing but the
  operator taking part) runs the same two functions as a `torch.autograd.Function` of its
  own (`_recorded`) rather than through the dispatcher's autograd kernel, whose layers
  (schema checks, defaults filled, a redispatch) cost a training step's hundreds of calls
  ~3x the host time of the launch itself (docs/torch.md, host overhead).
* **A direct call under `torch.compile`.** A `@tilec.jit` kernel called inside a compiled
  function (`kernel(x, y)`, `y` written in place) becomes one call of the operator
  `tilec::launch` in the graph (`tilec.torch_trace.traced_call`): the tensors the kernel
  writes are its mutated arguments, the others and the scalars plain ones; no graph break, no
  registration by hand.
* **Bad input.** Tensors whose extents disagree with the signature (two inputs' `M`), the wrong
  dtype, a missing extent, tensors on different devices: `OpError` (a `RuntimeError`) with the
  kernel's located message, raised by the fake kernel as well, so `torch.compile` reports it
  when it traces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tilec.diagnostics import TileError
from tilec.ir.types import TensorType

__all__ = ["OpError", "TilecOp", "op"]

# The torch dtype of each tile element type.
_TORCH_DTYPES = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "i1": torch.bool,
}
# f8 from torch 2.1 on
for _name, _torch_name in (("f8e4m3", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2")):
    if hasattr(torch, _torch_name):
        _TORCH_DTYPES[_name] = getattr(torch, _torch_name)


# Dispatch below the Autograd key (what an autograd kernel does once it has recorded nothing).
_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd
_CONTIGUOUS = torch.contiguous_format
# Tensor types a call may take without the dispatcher: a module's weights (`nn.Parameter`, a
# subclass whose torch functions are torch's own) count as plain tensors.
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_PROFILER = torch.autograd.profiler


def _dispatcher_needed() -> bool:
    """Whether a call must go through torch's dispatcher because something other than the
    operator's own kernel would take part: `torch.compile` tracing, functorch transforms
    (vmap, grad), a TorchDispatchMode or TorchFunctionMode (FakeTensorMode, FlopCounter, ...),
    or the profiler recording ops. Functions missing from an older torch count as yes."""
    C = torch._C
    try:
        return bool(
            torch.compiler.is_compiling()
            or C._are_functorch_transforms_active()
            or C._len_torch_dispatch_stack()
            or C._is_torch_function_mode_enabled()
            or _PROFILER._is_profiler_enabled
        )
    except AttributeError:
        return True


class OpError(RuntimeError):
    """Arguments a tilec operator cannot take; the message is the kernel's, located."""


def _recorded(op: TilecOp) -> type[torch.autograd.Function]:
    """The `torch.autograd.Function` an eager call of `op` that autograd records runs: the
    operator's kernel, then its `setup_context` and `backward` as `register_autograd` took
    them (the functions the dispatcher's autograd kernel calls), without the dispatcher
    between. One class an operator, so `ctx.needs_input_grad` indexes the operator's own
    arguments, as under the dispatcher."""

    class Recorded(torch.autograd.Function):
        # The forward takes ctx and sets it up itself: a separate `setup_context` would make
        # `apply` bind the arguments through `inspect.signature`, ~20 µs a call.
        @staticmethod
        def forward(ctx: Any, *values: Any) -> Any:
            output = op._run(*values)
            op._setup_of(ctx, values, output)
            return output

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return op._backward_of(ctx, *grads)

    Recorded.__name__ = Recorded.__qualname__ = f"Recorded[{op.name}]"
    return Recorded


@dataclass(frozen=True)
class _Param:
    name: str
    role: str  # "input", "output", "mutated" (tensors) or "scalar"
    dtype: str  # the tile element type (tensors) or the scalar's type
    dims: tuple[str | int | None, ...] = ()  # tensors: each dimension's name or fixed size
    var: str | None = None  # tensors typed by a dtype parameter: its name (`dtype` is its default)


def _roles(kernel: Any) -> list[_Param]:
    """Each parameter of the kernel's frontend IR with its role: what the body loads from and
    stores into (a store of a tensor it also loads from mutates it)."""
    from tilec.dialects import gather as G
    from tilec.dialects import shared
    from tilec.dialects import tile as T
    from tilec.dialects.atomic import ATOMIC_OPS
    from tilec.interp.launch import parameter_name

    func = kernel.ir.functions[0]
    block = func.body.block
    read, written = set(), set()
    for o in func.walk():
        if isinstance(o, (T.LoadOp, G.GatherOp, shared.AsyncCopyOp)) and o.view in block.args:
            read.add(o.view.index)
        elif isinstance(o, (T.StoreOp, G.ScatterOp)) and o.view in block.args:
            written.add(o.view.index)
        elif isinstance(o, ATOMIC_OPS) and o.view in block.args:  # reads and writes
            read.add(o.view.index)
            written.add(o.view.index)
    params = []
    for arg in block.args:
        name = parameter_name(arg)
        t = arg.type
        if isinstance(t, TensorType):
            i = arg.index
            role = (
                "mutated" if i in read and i in written else "output" if i in written else "input"
            )
            params.append(_Param(name, role, str(t.element), tuple(t.shape)))
        else:
            params.append(_Param(name, "scalar", str(t)))
    return params


def _scalar_schema(dtype: str) -> str:
    if dtype == "i1":
        return "bool"
    return "int" if dtype.startswith(("i", "u")) else "float"


class TilecOp:
    """A tilec kernel registered as the PyTorch operator `name` (`op`). Call it with the
    kernel's inputs, mutated tensors and scalars in the kernel's order (keywords allowed), and
    the extents of output dimensions no input has, by name; it returns the outputs."""

    def __init__(self, name: str, kernel: Any):
        self.name = name
        self.kernel = kernel
        self.params = _roles(kernel)
        generic = kernel.generic
        if generic is not None:  # a dtype parameter's tensors take the dtype of a call's
            typed_by = {i: p.name for p in generic.open() for i in p.tensors}
            self.params = [
                dataclasses.replace(p, var=typed_by.get(i)) for i, p in enumerate(self.params)
            ]
        tensors_in = [p for p in self.params if p.role in ("input", "mutated")]
        known = {d for p in tensors_in for d in p.dims if isinstance(d, str)}
        self.outputs = [p for p in self.params if p.role == "output"]
        self.extra_dims = sorted(
            {d for p in self.outputs for d in p.dims if isinstance(d, str) and d not in known}
        )
        unknown = [p for p in self.outputs if any(d is None for d in p.dims)]
        if unknown:
            raise OpError(
                self._located(
                    f"output '{unknown[0].name}' has a dimension of unknown extent ('?'): "
                    "an operator cannot allocate it",
                    "name the dimension in the kernel's signature",
                )
            )
        self.arguments = [p for p in self.params if p.role != "output"]
        self._names = [p.name for p in self.arguments] + self.extra_dims
        self._plan = self._allocation_plan()
        self._first_tensor = next(
            (i for i, p in enumerate(self.arguments) if p.role != "scalar"), None
        )
        self.schema = self._schema()
        # Defined on torch's dispatcher with `torch.library.Library` rather than `custom_op`:
        # the same schema, fake kernel and autograd, without custom_op's own layers around
        # them (~3 µs a call; docs/torch.md, host overhead).
        namespace, _, short = name.partition("::")
        self._library = torch.library.Library(namespace, "FRAGMENT")
        self._library.define(short + self.schema, tags=(torch.Tag.pt2_compliant_tag,))
        self._library.impl(short, self._run, "CompositeExplicitAutograd")
        torch.library.register_fake(name, self._fake, lib=self._library)
        self._op = getattr(getattr(torch.ops, namespace), short).default
        # One autograd kernel from the start, calling what `register_autograd` sets later:
        # until then a backward through the operator is an error, never a silent None.
        # (An operator that mutates a tensor has none: torch takes autograd formulas for
        # functional operators only.)
        self._backward: Callable[..., Any] | None = None
        self._setup_context: Callable[..., Any] | None = None
        self.mutated = [p.name for p in self.params if p.role == "mutated"]
        # What a recorded eager call runs once a backward is registered (`_recorded`); until
        # then the dispatcher, whose autograd kernel raises the operator's error at backward.
        self._recorded: type[torch.autograd.Function] | None = None
        if not self.mutated:
            torch.library.register_autograd(
                name, self._backward_of, setup_context=self._setup_of, lib=self._library
            )

    # -- the schema and the arguments ----------------------------------------------------------

    def _schema(self) -> str:
        args = []
        for p in self.arguments:
            if p.role == "scalar":
                args.append(f"{_scalar_schema(p.dtype)} {p.name}")
            elif p.role == "mutated":
                args.append(f"Tensor(a{len(args)}!) {p.name}")
            else:
                args.append(f"Tensor {p.name}")
        args += [f"SymInt {d}" for d in self.extra_dims]
        returns = {0: "()", 1: "Tensor"}.get(
            len(self.outputs), "(" + ", ".join("Tensor" for _ in self.outputs) + ")"
        )
        return f"({', '.join(args)}) -> {returns}"

    def _located(self, message: str, hint: str | None = None) -> str:
        return TileError(message, self.kernel.loc, hint=hint).render().rstrip()

    def _extents(
        self, values: list[Any], extra: list[Any]
    ) -> tuple[dict[str, Any], Any, dict[str, torch.dtype]]:
        """Each named dimension's extent from the tensors (checked: one extent per name, the
        kernel's dtypes, one device) and the extra extents given; the tensors' device; and the
        dtype each dtype parameter takes (that of the first tensor it types)."""
        extents: dict[str, Any] = dict(zip(self.extra_dims, extra))
        seen: dict[str, str] = {}
        device = None
        bound: dict[str, torch.dtype] = {}
        for p, v in zip(self.arguments, values):
            if p.role == "scalar":
                continue
            if not isinstance(v, torch.Tensor):
                raise OpError(self._located(f"argument '{p.name}' must be a tensor, got {v!r}"))
            if p.var is not None and p.var not in bound:
                allowed = next(q.allowed for q in self.kernel.generic.open() if q.name == p.var)
                if not any(v.dtype == _TORCH_DTYPES[d] for d in allowed):
                    raise OpError(
                        self._located(
                            f"argument '{p.name}' ({p.name}: {p.var}[...]) must be a tensor of "
                            f"{' or '.join(allowed)} (what {p.var} may be), got {v.dtype}"
                        )
                    )
                bound[p.var] = v.dtype
            want = bound[p.var] if p.var is not None else _TORCH_DTYPES[p.dtype]
            if v.dtype != want:
                raise OpError(
                    self._located(
                        f"argument '{p.name}' ({p.name}: {p.var or p.dtype}[...]) must be a {want} "
                        f"tensor, got {v.dtype}",
                        f"convert it with .to({want})",
                    )
                )
            if v.dim() != len(p.dims):
                raise OpError(
                    self._located(
                        f"argument '{p.name}' has {v.dim()} dimensions, the kernel's type "
                        f"has {len(p.dims)}"
                    )
                )
            if device is None:
                device = v.device
            elif v.device != device:
                raise OpError(
                    self._located(
                        f"argument '{p.name}' is on {v.device}, an earlier one on {device}"
                    )
                )
            for axis, d in enumerate(p.dims):
                size = v.shape[axis]
                if isinstance(d, int):
                    if size != d:
                        raise OpError(
                            self._located(
                                f"dimension {axis} of '{p.name}' is fixed to {d} by the "
                                f"kernel's type, got {size}"
                            )
                        )
                elif isinstance(d, str):
                    if d in extents and extents[d] != size:
                        where = seen.get(d, "the extents given")
                        raise OpError(
                            self._located(
                                f"dimension {d} is {extents[d]} in {where} but {size} in "
                                f"'{p.name}' (dimension {axis})"
                            )
                        )
                    extents[d] = size
                    seen.setdefault(d, f"'{p.name}'")
        return extents, device if device is not None else torch.device("cpu"), bound

    def _allocate(self, values: list[Any], extra: list[Any]) -> tuple[list[torch.Tensor], Any]:
        extents, device, bound = self._extents(values, extra)
        return [
            torch.empty(
                [d if isinstance(d, int) else extents[d] for d in p.dims],
                # A dtype parameter no input types: its default.
                dtype=bound.get(p.var) or _TORCH_DTYPES[p.dtype],
                device=device,
            )
            for p in self.outputs
        ], device

    def _allocation_plan(self) -> list[tuple[Any, list[Any], int | None]]:
        """Per output, where its dtype and extents come from, for `_run`'s unchecked way:
        the dtype (a torch dtype, or the position of the argument whose dtype it takes), per
        dimension `(argument, axis)`, `(position,)` of an extent given by name, or the fixed
        extent; and the argument it is shaped like (every extent of that argument in order,
        its dtype) when there is one, else None -- `torch.empty_like` allocates such an
        output in half the host time of `torch.empty`."""
        first: dict[str, tuple[int, int]] = {}
        bound: dict[str, int] = {}
        for i, p in enumerate(self.arguments):
            if p.role == "scalar":
                continue
            for axis, d in enumerate(p.dims):
                if isinstance(d, str):
                    first.setdefault(d, (i, axis))
            if p.var is not None:
                bound.setdefault(p.var, i)
        n = len(self.arguments)
        plan = []
        for p in self.outputs:
            dtype = bound[p.var] if p.var in bound else _TORCH_DTYPES[p.dtype]
            dims = [
                d
                if isinstance(d, int)
                else first[d]
                if d in first
                else (n + self.extra_dims.index(d),)
                for d in p.dims
            ]
            like = None
            sources = {d[0] for d in dims if type(d) is tuple and len(d) == 2}
            if len(sources) == 1:
                i = sources.pop()
                q = self.arguments[i]
                same_dtype = dtype == i or (q.var is None and _TORCH_DTYPES.get(q.dtype) is dtype)
                if same_dtype and dims == [(i, axis) for axis in range(len(q.dims))]:
                    like = i
            plan.append((dtype, dims, like))
        return plan

    def _allocate_unchecked(self, args: tuple) -> list[torch.Tensor]:
        """`_allocate` by `_plan`, on the first tensor's device, checking nothing: the launch
        checks extents, dtypes and devices, and `_run` asks `_extents` for the operator's own
        message when it finds a problem."""
        outputs = []
        device = None
        for dtype, dims, like in self._plan:
            if like is not None:
                outputs.append(torch.empty_like(args[like], memory_format=_CONTIGUOUS))
                continue
            if device is None:
                device = args[self._first_tensor].device
            shape = [
                d if type(d) is int else args[d[0]] if len(d) == 1 else args[d[0]].shape[d[1]]
                for d in dims
            ]
            if type(dtype) is int:
                dtype = args[dtype].dtype
            outputs.append(torch.empty(shape, dtype=dtype, device=device))
        return outputs

    def _split(self, args: tuple) -> tuple[list[Any], list[Any]]:
        n = len(self.arguments)
        return list(args[:n]), list(args[n:])

    def _ordered(self, args: tuple, outputs: list[torch.Tensor]) -> list[Any]:
        """The kernel's arguments in its order: the operator's, with the outputs between."""
        ordered, given, made = [], iter(args), iter(outputs)
        for p in self.params:
            ordered.append(next(made) if p.role == "output" else next(given))
        return ordered

    # -- the implementations ---------------------------------------------------------------------

    def _run(self, *args: Any) -> Any:
        first = self._first_tensor
        if first is None or self._interpreted(args[first]):
            # CPU tensors run in the interpreter: every check first, in the operator's words.
            values, extra = self._split(args)
            outputs, _ = self._allocate(values, extra)
            ordered = self._ordered(args, outputs)
            from tilec.interp import run_kernel

            try:
                run_kernel(self.kernel.instance_for(ordered).compiled, None, ordered)
            except TileError as e:
                raise OpError(e.render().rstrip()) from None
            return self._returned(outputs)
        # The outputs allocated without the operator's checks (the launch checks the same
        # things); where either finds a problem, `_extents` reports it in the operator's words.
        try:
            outputs = self._allocate_unchecked(args)
        except Exception:  # a tensor of too few dimensions, not a tensor
            values, extra = self._split(args)
            outputs, _ = self._allocate(values, extra)
        try:
            self.kernel(*self._ordered(args, outputs))
        except TileError as e:
            values, extra = self._split(args)
            self._allocate(values, extra)  # raises the operator's message where it sees one
            raise OpError(e.render().rstrip()) from None
        return self._returned(outputs)

    @staticmethod
    def _interpreted(tensor: Any) -> bool:
        """Whether the call runs in the interpreter (its first tensor on the CPU, or not a
        tensor: the checks then say what is wrong) rather than compiled."""
        return not isinstance(tensor, torch.Tensor) or tensor.is_cpu

    def _fake(self, *args: Any) -> Any:
        values, extra = self._split(args)
        return self._returned(self._allocate(values, extra)[0])

    def _returned(self, outputs: list[torch.Tensor]) -> Any:
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # -- the operator ----------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names = self._names
        if not kwargs and len(args) == len(names):
            return self._dispatch(args)
        if len(args) > len(names):
            raise OpError(
                self._located(
                    f"{self.name} takes {len(names)} arguments ({', '.join(names)}), "
                    f"got {len(args)}"
                )
            )
        by_name = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise OpError(
                    self._located(
                        f"{self.name} has no argument '{key}'",
                        f"its arguments: {', '.join(names)}",
                    )
                )
            if key in by_name:
                raise OpError(self._located(f"{self.name} got two values for '{key}'"))
            by_name[key] = value
        missing = [n for n in names if n not in by_name]
        if missing:
            extents = [n for n in missing if n in self.extra_dims]
            hint = (
                f"pass the extent of {', '.join(extents)} by name, e.g. {extents[0]}=128: no "
                "input has that dimension"
                if extents
                else None
            )
            raise OpError(self._located(f"{self.name} is missing {', '.join(missing)}", hint))
        return self._dispatch(tuple(by_name[n] for n in names))

    def _dispatch(self, values: tuple) -> Any:
        """The operator on `values`. Through torch's dispatcher where anything besides the
        kernel takes part (`_dispatcher_needed`, a tensor subclass other than `nn.Parameter`);
        else straight to the kernel (`_run`, what the dispatcher would call), which saves the
        dispatcher's ~3 µs a call -- the eager call of plain tensors, the common one -- or,
        where autograd records a tensor that requires grad, through the operator's own
        autograd.Function (`_recorded`). Below the autograd kernel when it would record
        nothing."""
        grad = torch.is_grad_enabled()
        records = subclass = False
        for v in values:
            if isinstance(v, torch.Tensor):
                subclass = subclass or type(v) not in _PLAIN
                records = records or (grad and v.requires_grad)
        if not (records or subclass or _dispatcher_needed()):
            return self._run(*values)
        if records and self._recorded is not None and not (subclass or _dispatcher_needed()):
            return self._recorded.apply(*values)
        if records or torch.compiler.is_compiling():
            return self._op(*values)
        with _BELOW_AUTOGRAD():
            return self._op(*values)

    @property
    def custom_op(self) -> Any:
        """The registered operator, a `torch._ops.OpOverload` (what `opcheck` takes)."""
        return self._op

    def register_autograd(
        self, backward: Callable[..., Any], *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """The operator's backward, as `torch.library.register_autograd` takes it."""
        if self.mutated:
            raise OpError(
                self._located(
                    f"{self.name} writes into '{self.mutated[0]}' in place: torch takes "
                    "backward formulas for operators that mutate nothing",
                    "make the kernel write a new output instead",
                )
            )
        self._backward, self._setup_context = backward, setup_context
        self._recorded = _recorded(self)

    def _setup_of(self, ctx: Any, inputs: tuple, output: Any) -> None:
        if self._setup_context is not None:
            self._setup_context(ctx, inputs, output)

    def _backward_of(self, ctx: Any, *grads: Any) -> Any:
        if self._backward is None:
            raise OpError(
                self._located(
                    f"{self.name} has no backward: a gradient cannot flow through it",
                    "register one with op.register_autograd(backward, setup_context=...)",
                )
            )
        return self._backward(ctx, *grads)

    def __repr__(self) -> str:
        return f"<tilec op {self.name}{self.schema}>"


def op(name: str, kernel: Any) -> TilecOp:
    """Register `kernel` (a `@tilec.jit` function or `tilec.load_kernel`'s) as the PyTorch
    operator `name` ("namespace::name"); see the module docstring."""
    return TilecOp(name, kernel)
