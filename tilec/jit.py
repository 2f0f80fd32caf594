"""`@tilec.jit`: a tile kernel written as a Python function, run on GPU tensors.

    from __future__ import annotations   # annotations such as f16[M, K] stay unevaluated
    import tilec

    @tilec.jit(tile={"M": 64})
    def scale(x: f32[M], y: f32[M], alpha: f32):
        for tm in tiles(M):
            y[tm] = x[tm] * alpha

    scale(x, y, 2.0)          # torch CUDA tensors (or CuPy, DLPack, numpy): runs on the GPU
    print(scale.tir)          # its tile IR

The function's source is read with `inspect`, its decorators dropped, and it is parsed with
the same grammar as `.tile` files; errors point at the lines of the `.py` file. Options pin
decisions like `@kernel(...)` does in a `.tile` file: `tile={"M": 128}`, `warps=4`,
`stages=3`; `disable=("pipeline",)` turns optimisation passes off and
`pass_options={"vectorize": {"max_bytes": 8}}` sets pass options, as `tilec compile --disable`
and `--pass-option` do (`tilec.compiler.build_pipeline`; the pipeline is in the cache key). `tilec.load_kernel("examples/softmax.tile", "softmax")` makes the same object from
a kernel of a `.tile` file. The PTX carries line info pointing at the `.py` (or `.tile`) lines,
for profilers' source views; `line_info=False` leaves it out (docs/debugging.md).

**On the GPU** a call checks the arguments (`tilec.runtime`), then looks up the compiled
kernel for their *specialization*: which pointers are 16-byte aligned, which strides are 1,
which extents and strides divide by 16 (as Triton does), and each dimension used whole
(`x[tm, :]`) rounded up to an eighth of the power of two that covers it (`tilec.jit_sizes.whole_bound`: the
tile is that power of two, the slots past the bound are dropped) — and every other
dimension's size class (the power of two that covers it, from 64 up to 16384: `tiling` bounds its free
tile sizes by it, so a column sum of 128 columns gets tiles of 128). The pinned options are
fixed per kernel. A new specialization is compiled (the default pipeline, `specialize` told the
whole extents, then PTX with the argument facts folded in: `tilec.lowering.Specialization`) for
the GPU's architecture, through the on-disk cache (`tilec.kernel_cache`: processes that share
it, such as the ranks of a job, compile each specialization once, under a lock, and each loads
it on its own device), and kept in memory, so a second call with arguments of the same kind
goes straight to the launch. It runs on torch's current stream when torch tensors are passed
(`stream=` picks another; the keyword is reserved).

**Autotuning** (`@tilec.jit(autotune=True)`, or `autotune=tilec.tune.Settings(...)` for the
search's budget): a specialization's first compile searches the decisions the passes expose as
pins, on copies of the call's arguments, with the benchmark's clock (`tilec.tune`,
docs/tuning.md); the winner is cached on disk, and later compiles — in any process — take its
pins and compile the winner only. `TILEC_AUTOTUNE=0` turns it off.

**In the interpreter** (`TILEC_INTERPRET=1` in the environment, or
`@tilec.jit(interpret=True)`) a call runs the kernel on the CPU on numpy arrays or CPU torch
tensors; tile sizes are the pinned ones, else the interpreter's defaults (`tilec.interp`). It
keeps nothing on disk: the tile IR it runs is made in memory, once per object.

**Under `torch.compile`** a call is traced as one `tilec::launch` operator (the tensors the
kernel writes are mutated in place; `tilec.torch_trace`), with no graph break: `fullgraph=True`
works.

Arguments go by position or by parameter name, either way. Mistakes (a CPU tensor, a wrong
dtype, rank or shape, no GPU) are `LaunchError`s pointing at the kernel's definition.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import os
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilec.compiler import CompiledProgram, build_pipeline, compile_module, target_pipeline
from tilec.frontend import parse_source
from tilec.frontend.source import Source, function_source, read_tile_file
from tilec.frontend.syntax import FunctionDef, Module
from tilec.jit_fast_path import _FAST_ENTRIES, _fast_path, _ThreadLaunches
from tilec.jit_sizes import fill_run, power_of_two, size_class, whole_bound
from tilec.jit_specialization import _all_dense, _assume_pass, _specialization
from tilec.runtime.arguments import _TORCH_TENSOR, is_positive

__all__ = ["CompiledKernel", "JitFunction", "jit", "load_kernel"]

_MODULES = sys.modules  # `__call__` looks torch up here: is torch.compile tracing the call?

INTERPRET_VARIABLE = "TILEC_INTERPRET"
CHECK_BOUNDS_VARIABLE = "TILEC_CHECK_BOUNDS"  # read when compiling: tilec.lowering.gather


@dataclass(frozen=True)
class CompiledKernel:
    """One specialization of a kernel, compiled: its PTX and what launching it needs."""

    name: str
    arch: str
    ptx: str
    abi: Any  # tilec.lowering.KernelABI
    specialization: Any  # tilec.lowering.Specialization
    pipeline: str
    key: Any  # tilec.kernel_cache.KernelCacheKey
    from_disk: bool  # found in the on-disk cache rather than compiled


class JitFunction:
    """A tile kernel defined in Python (or taken from a `.tile` file). Its compiled forms
    are attributes; calling it runs it."""

    def __init__(
        self,
        fn: Callable[..., Any] | None,
        options: Mapping[str, Any],
        *,
        source: Source | None = None,
        name: str | None = None,
    ):
        self.fn = fn
        options = dict(options)
        self._given = dict(options)  # what `instance` makes a binding's function from
        # Not a compile option: how calls run.
        self.interpret = bool(options.pop("interpret", False))
        # Not a kernel pin: whether the PTX carries .loc lines (it enters the cache key).
        self.line_info = bool(options.pop("line_info", True))
        # Not a kernel pin: whether a call copies a product's operand whose rows are not 16
        # bytes apart into one whose are (`tilec.runtime.pitched`); what it copied and why.
        self.pitch_operands = bool(options.pop("pitch_operands", True))
        self.pitched_copies: dict[str, str] = {}
        # Not a kernel pin: tune each specialization at its first call (True, or the
        # `tilec.tune.Settings` to tune with), then take the cached winner's pins.
        self.autotune: Any = options.pop("autotune", False)
        self.tuned: dict[str, Any] | None = None  # the tuner's entry, once asked
        # Not kernel pins but pipeline controls (`build_pipeline`), checked now.
        disable = options.pop("disable", ())
        self.disable: tuple[str, ...] = (disable,) if isinstance(disable, str) else tuple(disable)
        self.pass_options: dict[str, dict[str, Any]] = {
            name: dict(values) for name, values in dict(options.pop("pass_options", {})).items()
        }
        build_pipeline(disable=self.disable, options=self.pass_options)
        self.options = options
        self._source = source
        self.name = name or getattr(fn, "__name__", "")
        if fn is not None:
            functools.update_wrapper(self, fn)
        self._launchers: dict[tuple, Any] = {}
        # A generic kernel's functions, one a binding of its dtype parameters (`instance`).
        self._instances: dict[tuple[str, ...], JitFunction] = {}
        self._by_dtype: dict[tuple, JitFunction] = {}  # `_instance_of_call`'s memory
        # Kernels compiled elsewhere for this object's options (the tuner's worker processes),
        # by the digest of their cache key: `compile_specialized` takes them as they are.
        self._adopted: dict[str, CompiledKernel] = {}
        # `__call__`'s fast path: per thread, the signature of a call's arguments -> the
        # function that launches their specialization (`Launcher.fast_launch`, whose buffers
        # one thread at a time may use); and the function that looks the signature up and
        # calls it (`_fast_call`), made on the first remembered call.
        self._fast = _ThreadLaunches()
        self._fast_call: Callable[[tuple, Any], bool] | None = None
        self._signature: Callable[[tuple], tuple] | None = None
        self.compilations = 0  # specializations compiled or loaded from disk by this object
        # What a call traced by torch.compile names this kernel by (`tilec.torch_trace`): an
        # int Dynamo takes as a constant, where the object itself it may not.
        self._trace_key = next(_TRACE_KEYS)
        _TRACED_FUNCTIONS[self._trace_key] = self

    # -- the source and its IR ------------------------------------------------------------------

    @functools.cached_property
    def source(self) -> Source:
        """The text the kernel is parsed from (with its place in its file)."""
        if self._source is None:
            self._source = function_source(self.fn)
        return self._source

    def _module(self) -> Module:
        s = self.source
        return parse_source(s.text, s.filename, s.line_offset, s.col_offset, register=False)

    def _compile(self, pipeline: str) -> CompiledProgram:
        kernels = None if self.fn is not None else [self.name]  # a file may hold several
        return compile_module(
            self._module(), kernels=kernels, options=self.options or None, pipeline=pipeline
        )

    @functools.cached_property
    def compiled(self) -> CompiledProgram:
        """The frontend's tile IR (what the interpreter runs)."""
        return self._compile("")

    @property
    def ir(self):
        """The tile IR (a `builtin.module` holding this kernel)."""
        return self.compiled.module

    @property
    def tir(self) -> str:
        """The tile IR as text."""
        return self.compiled.tir

    @functools.cached_property
    def _kernel(self):
        return self.compiled.module.functions[0]

    @functools.cached_property
    def _checker(self):
        from tilec.lowering.abi import kernel_parameters
        from tilec.runtime import ArgumentChecker

        return ArgumentChecker(self._kernel.sym_name, kernel_parameters(self._kernel), self.loc)

    @property
    def loc(self):
        return self._kernel.loc

    @functools.cached_property
    def _whole_dims(self) -> tuple[str, ...]:
        attr = self._kernel.attributes.get("tilec.whole_dims")
        return tuple(str(d) for d in attr.value) if attr is not None else ()

    @functools.cached_property
    def _row_dims(self) -> tuple[str, ...]:
        """The dimensions that end a tensor parameter's shape (its contiguous axis) and are
        not used whole: those whose tiles' fill (`fill_run`) the specialization records -- in
        a kernel without dots, the only kind whose tiles `tiling` shapes by it
        (`passes/tile_shapes.py`)."""
        if any(op.name == "tile.dot" for op in self._kernel.walk()):
            return ()
        last = {
            str(dims[-1])
            for _name, kind, _dtype, dims in self._checker.arguments
            if kind != "scalar" and dims
        }
        return tuple(sorted(d for d in last if d not in self._whole_dims))

    @functools.cached_property
    def _row_bytes(self) -> dict[str, int]:
        """Each row dimension's narrowest element, in bytes, of the tensors it ends: the
        shortest run `fill_run` considers is one line of those."""
        from tilec.runtime.arguments import ELEMENT_BYTES

        narrowest: dict[str, int] = {}
        for _name, kind, dtype, dims in self._checker.arguments:
            if kind != "scalar" and dims and str(dims[-1]) in self._row_dims:
                d = str(dims[-1])
                width = ELEMENT_BYTES.get(str(dtype), 1)
                narrowest[d] = min(narrowest.get(d, width), width)
        return narrowest

    @functools.cached_property
    def _flat(self) -> Any:
        """`passes/flatten.py`'s plan when the kernel can run as one dimension over dense
        tensors (and `flatten` is on), else None: then the key records whether the tensors
        are dense, and the specialization says so where they are."""
        from tilec.passes.flatten import flattening

        if "flatten" in self.disable:
            return None
        if str(self.pass_options.get("flatten", {}).get("enable", True)).lower() == "false":
            return None
        plan = flattening(self._kernel)
        return None if isinstance(plan, str) else plan

    def _runs_flat(self, arguments: Any) -> bool:
        """Whether `flatten` may run this call as one dimension: every tensor dense, and the
        product of the grid's extents an extent the kernel's 32-bit bounds compare (a larger
        one keeps the kernel's own grid)."""
        from tilec.runtime.arguments import MAX_EXTENT

        product = math.prod(arguments.extents[d] for d in self._flat.dims)
        return product <= MAX_EXTENT and _all_dense(arguments.values)

    def _fill(self, dim: str, n: int) -> int | None:
        return fill_run(n, self._row_bytes.get(dim, 1))

    @functools.cached_property
    def _sign_scalars(self) -> tuple[tuple[int, str, str], ...]:
        """(argument index, name, dtype) of each float scalar whose sign the specialization
        records (`Specialization.positive`): those `hoist-scale` could use
        (`scalars_worth_a_sign`), so that no other scalar's sign compiles a second kernel."""
        from tilec.passes.hoist_scale import scalars_worth_a_sign

        names = scalars_worth_a_sign(self._kernel)
        return tuple(
            (i, name, dtype)
            for i, (name, kind, dtype, _dims) in enumerate(self._checker.arguments)
            if kind == "scalar" and name in names
        )

    @functools.cached_property
    def _has_scatter(self) -> bool:
        """Whether the kernel scatters atomically (privatize-atomics wants the extents)."""
        from tilec.dialects.atomic import AtomicScatterOp

        return any(isinstance(op, AtomicScatterOp) for op in self._kernel.walk())

    # -- dtype parameters (tilec.frontend.generics) ----------------------------------------------

    @functools.cached_property
    def generic(self) -> Any:
        """The kernel's `GenericSignature` when a call's tensors bind some of its dtype
        parameters (`@kernel(dtypes=...)` listing more than one dtype), else None."""
        from tilec.frontend.generics import generic_signature

        definitions = [s for s in self._module().body if isinstance(s, FunctionDef)]
        mine = [d for d in definitions if self.fn is not None or d.name == self.name]
        if not mine:
            return None  # a missing kernel is reported by `compiled`
        signature = generic_signature(mine[0], self.options)
        if self.fn is not None:  # the options declare a Python function's parameters
            from tilec.diagnostics import TileError

            declared = {p.name for p in signature.parameters}
            for name in self.options.get("dtypes") or {}:
                if name not in declared:
                    raise TileError(
                        f"dtype parameter '{name}' is the dtype of no argument of '{self.name}'",
                        mine[0].name_loc,
                        hint=f"type a tensor argument '{name}[...]', or drop '{name}' from dtypes",
                    )
        return signature if signature.open() else None

    def instance(self, **dtypes: str) -> JitFunction:
        """This kernel with dtype parameters bound (`instance(T="bf16")`): a `JitFunction`
        of its own (its compilations and caches), made once per binding."""
        key = tuple(sorted(dtypes.items()))
        function = self._instances.get(key)
        if function is None:
            declared = dict(self._given.get("dtypes") or {})
            options = {**self._given, "dtypes": {**declared, **dtypes}}
            function = JitFunction(self.fn, options, source=self._source, name=self.name)
            function.tuned = self.tuned
            function.pitched_copies = self.pitched_copies  # one record for every binding
            self._instances[key] = function
        return function

    def instance_for(
        self, values: Sequence[Any], kwargs: Mapping[str, Any] | None = None
    ) -> JitFunction:
        """The function a call with these arguments runs: this one, or for a generic kernel
        its instance binding each open dtype parameter to the dtype of the first tensor
        argument it types."""
        generic = self.generic
        if generic is None:
            return self
        from tilec.diagnostics import TileError
        from tilec.runtime.arguments import tensor_dtype

        binding = {}
        for parameter in generic.open():
            position = parameter.tensors[0]
            name = generic.arguments[position]
            value = values[position] if position < len(values) else (kwargs or {}).get(name)
            dtype = tensor_dtype(value)
            if dtype not in parameter.allowed:
                raise TileError(
                    f"argument '{name}' is typed {parameter.name}[...], which may be "
                    f"{', '.join(parameter.allowed)}; got "
                    + (f"a tensor of {dtype}" if dtype else f"{type(value).__name__}"),
                    parameter.loc,
                    hint=f"convert '{name}' to one of {', '.join(parameter.allowed)}",
                )
            binding[parameter.name] = dtype
        return self.instance(**binding)

    @functools.cached_property
    def _binding_positions(self) -> tuple[int, ...]:
        return tuple(p.tensors[0] for p in self.generic.open())

    def _instance_of_call(self, args: tuple, kwargs: Mapping[str, Any]) -> JitFunction:
        """`instance_for(args, kwargs)`, remembered by the binding tensors' dtype objects (a
        call's hot path: one tuple and one dict lookup)."""
        try:
            key = tuple(args[i].dtype for i in self._binding_positions)
        except (IndexError, AttributeError):  # by keyword, or not tensors: the full way
            return self.instance_for(args, kwargs)
        function = self._by_dtype.get(key)
        if function is None:
            function = self._by_dtype[key] = self.instance_for(args, kwargs)
        return function

    # -- calling --------------------------------------------------------------------------------

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        """Run the kernel on `args`: on the GPU, or in the interpreter (module docstring)."""
        torch_module = _MODULES.get("torch")
        if torch_module is not None and torch_module.compiler.is_dynamo_compiling():
            # torch.compile traces this call: it becomes one op of the graph (tilec.torch).
            from tilec.torch_trace import traced_call

            traced_call(self._trace_key, args, kwargs)
            return
        if self.generic is not None:  # one function a binding of its dtype parameters
            self._instance_of_call(args, kwargs)(*args, stream=stream, **kwargs)
            return
        if self.interpret or _ENVIRONMENT.get(_INTERPRET_KEY) == _INTERPRET_ON:
            self._interpret(args, kwargs)
            return
        checking = _ENVIRONMENT.get(_CHECK_BOUNDS_KEY) not in _CHECK_BOUNDS_OFF
        if not kwargs and not checking:
            # The fast path: arguments exactly like those of an earlier call that passed
            # every check (`_remember`) need none of them again; see `_fast_path`.
            fast_call = self._fast_call
            if fast_call is not None and fast_call(args, stream):
                return
        values = self._order(args, kwargs) if kwargs else args
        arguments = self._checker.convert(values)
        pitched = bool(self._pitched) and self._pitch(arguments, stream)
        key = self._key(arguments)
        launcher = self._launchers.get(key)
        if launcher is None:
            launcher = self._launcher(key, arguments, values)
        launcher.launch(arguments, stream, matched=True)  # the key holds what it checks
        if not kwargs and not checking and not pitched:
            # (checked launches synchronize, pitched ones copy first: no fast path)
            self._remember(args, arguments, launcher)

    @functools.cached_property
    def _pitched(self) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """The arguments a call may copy into a buffer with 16-byte rows (`tilec.runtime.
        pitched`): matrices the kernel only reads, as operands of its products; none when
        `pitch_operands=False`, and none for an autotuned function, whose tuner times the
        candidates on copies of the call's own arguments."""
        from tilec.passes.tiling_operands import pitched_operands

        if not self.pitch_operands or self.autotune:
            return ()
        return pitched_operands(self._kernel)

    def _pitch(self, arguments: Any, stream: Any) -> bool:
        """`tilec.runtime.pitched.pitch_arguments` for this kernel's `_pitched` arguments,
        recorded in `pitched_copies` (shared with a generic kernel's bindings)."""
        from tilec.runtime.pitched import pitch_arguments

        names = [name for name, _kind, _dtype, _dims in self._checker.arguments]
        return pitch_arguments(arguments, self._pitched, stream, names, self.pitched_copies)

    def _remember(self, args: tuple, arguments: Any, launcher: Any) -> None:
        """Let later calls with arguments of `args`'s signature take the fast path: only when
        every tensor is a plain torch tensor (exactly `torch.Tensor` or `nn.Parameter`) and
        every scalar a Python `int`, `float` or `bool`, the cases whose signature determines
        every check."""
        from tilec.runtime.arguments import POSITIVE_RANGE, scalar_converter

        tensor_types = _TORCH_TENSOR[0]
        converters = {}
        for i, ((_name, kind, dtype, _dims), value) in enumerate(
            zip(self._checker.arguments, args)
        ):
            if kind == "scalar":
                if type(value) not in (int, float, bool):
                    return
                converters[i] = scalar_converter(dtype, type(value))
            elif type(value) not in tensor_types:
                return
        ordinal = arguments.device
        if ordinal is None or launcher._functions.get(ordinal) is None:
            return
        launch = launcher.fast_launch(
            arguments.values, converters, launcher.grid(arguments), ordinal
        )
        if self._fast_call is None:
            kinds = [kind for _name, kind, _dtype, _dims in self._checker.arguments]
            signs = {i: POSITIVE_RANGE[dtype] for i, _name, dtype in self._sign_scalars}
            self._fast_call, self._signature = _fast_path(kinds, self._fast, tensor_types, signs)
        launches = self._fast.launches
        if len(launches) >= _FAST_ENTRIES:
            launches.clear()  # many shapes: start again rather than grow without bound
        launches[self._signature(args)] = launch

    def _order(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        """Positional and keyword arguments in parameter order (the interpreter's checks)."""
        from tilec.interp.launch import _order_arguments, parameter_name

        names = [parameter_name(a) for a in self._kernel.arguments]
        if len(args) > len(names):
            return [*args, *kwargs.values()]  # the count is reported by the checker
        by_name = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in by_name:
                raise TypeError(f"{self.name}() got multiple values for argument '{name}'")
            by_name[name] = value
        return _order_arguments(self._kernel, by_name)

    def _interpret(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        from tilec.interp import run_kernel

        run_kernel(self._kernel, None, self._order(args, kwargs) if kwargs else list(args))

    def _key(self, arguments: Any) -> tuple:
        """The specialization of `arguments`: per tensor, one integer holding whether its
        address is 16-byte aligned, and per dimension whether its stride is 1 and what the
        specialization records of its stride and extent (`recorded_multiple`); per float
        scalar whose sign it records (`_sign_scalars`), whether it is positive; per whole
        dimension, the power of two that covers it; and the GPU."""
        from tilec.runtime import DeviceTensor

        # TILEC_CHECK_BOUNDS changes the code (tilec.lowering.gather): part of the key.
        parts: list[Any] = [arguments.device, _ENVIRONMENT.get(_CHECK_BOUNDS_KEY)]
        for v in arguments.values:
            if type(v) is DeviceTensor:
                bits = 1 if v.pointer & 15 == 0 else 0
                # `recorded_multiple`, inline (this is the launch's hot path): per stride 0
                # for unit, else 1..5 for a multiple of 1..16 (below 16, at most one 16-byte
                # vector's elements); per extent 1 or 5 (of 16 or not), the last one 1..5.
                cap = _VECTOR_ELEMENTS[v.dtype]
                for s in v.strides:
                    m = (s & -s) or 16
                    bits = bits * 8 + (0 if s == 1 else 5 if m >= 16 else min(m, cap).bit_length())
                for n in v.shape[:-1]:
                    bits = bits * 8 + (5 if n & 15 == 0 else 1)
                if v.shape:
                    m = (v.shape[-1] & -v.shape[-1]) or 16
                    bits = bits * 8 + (5 if m >= 16 else min(m, cap).bit_length())
                parts.append(bits)
        values = arguments.values
        for i, _name, dtype in self._sign_scalars:
            parts.append(is_positive(dtype, values[i]))
        extents = arguments.extents
        for dim in self._whole_dims:
            # The tile's size, and whether the extent fills it (its masks then fold away).
            tile = power_of_two(extents[dim])
            parts.append(whole_bound(extents[dim]) if extents[dim] != tile else -tile)
        for dim in sorted(extents):
            if dim not in self._whole_dims:
                parts.append(size_class(extents[dim]))
        for dim in self._row_dims:
            parts.append(self._fill(dim, extents[dim]) if dim in extents else None)
        if self._flat is not None:  # dense tensors run as one dimension: its size class too
            parts.append(self._runs_flat(arguments))
            parts.append(size_class(math.prod(extents[d] for d in self._flat.dims)))
        return tuple(parts)

    def _launcher(self, key: tuple, arguments: Any, values: Sequence[Any] = ()) -> Any:
        from tilec.lowering.gather import check_bounds_requested
        from tilec.runtime import Launcher, device_arch, get_device

        device = get_device(arguments.device)
        kernel = self._compile_for(arguments, device_arch(device), values)
        launcher = Launcher(
            kernel.ptx,
            kernel.abi,
            kernel.specialization,
            loc=self.loc,
            synchronize=check_bounds_requested(),
        )
        self._launchers[key] = launcher
        return launcher

    # -- compiling ------------------------------------------------------------------------------

    def compile_for(self, *args: Any, arch: str | None = None, **kwargs: Any) -> CompiledKernel:
        """Compile (or find in the disk cache) the specialization that `args` call for, without
        running it; numpy arrays stand for GPU tensors of their shape (contiguous, aligned).
        `arch` defaults to the GPU's, else sm_90a."""
        if self.generic is not None:
            return self.instance_for(args, kwargs).compile_for(*args, arch=arch, **kwargs)
        values = self._order(args, kwargs) if kwargs else args
        arguments = self._checker.convert(values)
        if arch is None:
            from tilec.lowering.ptx import default_arch

            arch = default_arch()
        return self._compile_for(arguments, arch, values)

    def _compile_for(self, arguments: Any, arch: str, values: Sequence[Any] = ()) -> CompiledKernel:

        specialization = self.specialization_of(arguments)
        extents = dict(arguments.extents)
        if self.autotune:
            from tilec.tune.api import autotuned_function

            # The winner's pins, cached or tuned now on copies of `values`: it compiles (or
            # is found in the kernel cache) like any kernel; nothing else is compiled again.
            tuned = autotuned_function(self, specialization, extents, arch, values)
            if tuned is not self:
                kernel = tuned.compile_specialized(specialization, extents, arch)
                self.compilations += 1
                return kernel
        return self.compile_specialized(specialization, extents, arch)

    def specialization_of(self, arguments: Any) -> Any:
        """What converted `arguments` promise (`tilec.lowering.Specialization`): the facts
        `_key` records -- alignment, unit strides, multiples, the signs of the scalars that
        `hoist-scale` could use, and, for a kernel `flatten` could run as one dimension,
        its tensors dense where they all are."""
        from tilec.lowering.abi import kernel_parameters

        signs = [name for _i, name, _dtype in self._sign_scalars]
        specialization = _specialization(kernel_parameters(self._kernel), arguments, signs)
        if self._flat is not None and self._runs_flat(arguments):
            specialization = dataclasses.replace(
                specialization, dense=frozenset(self._flat.tensors)
            )
        return specialization

    def plan_specialized(
        self, specialization: Any, extents: Mapping[str, int], arch: str
    ) -> tuple[str, Any]:
        """`(pipeline, key)`: the passes a specialization (`tilec.lowering.Specialization`)
        with these extents compiles through for `arch`, and its `KernelCacheKey`."""
        from tilec import kernel_cache
        from tilec.lowering.gather import check_bounds_requested

        given = dict(extents)
        # A whole dimension by its bound (`tilec.jit_sizes.whole_bound`): its tile is the power of two that
        # covers it, and the slots past it are padding the lowering drops.
        whole = {d: whole_bound(extents[d]) for d in self._whole_dims}
        # A whole dimension whose extent is exactly its tile is fixed in the kernel's types
        # (`tiling{exact=...}`): its padding masks fold away; the launch checks the extent.
        exact = [d for d in self._whole_dims if extents[d] == power_of_two(extents[d])]
        # Every other dimension by its size class: a bound on its tile (a column sum of 128
        # columns gets tiles of 128, not 4096), the same for every extent of the class.
        for d in sorted(extents):
            if d not in whole:
                whole[d] = size_class(extents[d])
        flat = self._flat
        if flat is not None and set(flat.tensors) <= specialization.dense:
            # `flatten` runs the kernel as one dimension: tiling sizes its tiles by it.
            whole[flat.flat_dim] = size_class(math.prod(given[d] for d in flat.dims))
        extents = whole
        pass_options = self.pass_options
        # The contiguous runs that fill the exact extents of the rows (`fill_run`).
        fills = {d: self._fill(d, n) for d, n in given.items() if d in self._row_dims}
        fills_text = ",".join(f"{d}={r}" for d, r in sorted(fills.items()) if r is not None)
        if extents and "extents" not in pass_options.get("tiling", {}):
            text = ",".join(f"{d}={n}" for d, n in extents.items())
            tiling = {**pass_options.get("tiling", {}), "extents": text}
            if fills_text and "fills" not in tiling:
                tiling["fills"] = fills_text
            if exact:
                tiling["exact"] = ",".join(exact)
            pass_options = {**pass_options, "tiling": tiling}
            if "pipeline" not in self.disable and "extents" not in pass_options.get("pipeline", {}):
                # A loop within one step of its extent runs once: no prefetch in registers.
                pipeline_options = {**pass_options.get("pipeline", {}), "extents": text}
                pass_options = {**pass_options, "pipeline": pipeline_options}
            if "extents" not in pass_options.get("assign-layouts", {}):
                # Fewer than 4 warps only where the grid fills the SMs (passes/occupancy.py).
                layouts = {**pass_options.get("assign-layouts", {}), "extents": text}
                pass_options = {**pass_options, "assign-layouts": layouts}
            if "split-reduction" not in self.disable and "extents" not in pass_options.get(
                "split-reduction", {}
            ):
                # A grid the extents show filling the GPU is not split (passes/split_reduction.py).
                split = {**pass_options.get("split-reduction", {}), "extents": text}
                pass_options = {**pass_options, "split-reduction": split}
            if self._has_scatter and "extents" not in pass_options.get("privatize-atomics", {}):
                # The bins a histogram counts in the block (passes/privatize_atomics.py).
                privatize = {**pass_options.get("privatize-atomics", {}), "extents": text}
                pass_options = {**pass_options, "privatize-atomics": privatize}
        # The target decides the tensor-core path (tiling: wgmma on sm_90a).
        pipeline = target_pipeline(build_pipeline(disable=self.disable, options=pass_options), arch)
        # The facts go into the IR first, for the passes (vectorize) and the lowering alike.
        pipeline = f"{_assume_pass(specialization)},{pipeline}"
        key = kernel_cache.KernelCacheKey(
            self.source.text,
            self.name,
            json.dumps(
                {
                    **self.options,
                    "line_info": self.line_info,
                    "check_bounds": check_bounds_requested(),
                },
                sort_keys=True,
                default=str,
            ),
            pipeline,
            json.dumps(specialization.to_json(), sort_keys=True),
            arch,
        )
        return pipeline, key

    def compile_specialized(
        self, specialization: Any, extents: Mapping[str, int], arch: str
    ) -> CompiledKernel:
        """The kernel compiled (or found in the disk cache, or handed to `adopt`) for a
        specialization with these extents, for `arch`."""
        from tilec import kernel_cache
        from tilec.lowering import Specialization, compile_to_ptx, module_abi
        from tilec.lowering.abi import KernelABI, compiled_specialization

        pipeline, key = self.plan_specialized(specialization, extents, arch)
        self.compilations += 1
        adopted = self._adopted.get(key.digest())
        if adopted is not None:
            return adopted

        def compile_entry() -> dict[str, Any]:
            program = self._compile(pipeline)
            name = program.kernels[0]
            facts = compiled_specialization(program.module.lookup(name), specialization)
            ptx = compile_to_ptx(program.module, arch, {name: facts}, line_info=self.line_info)
            abi = module_abi(program.module)[name]
            return {"ptx": ptx, "abi": abi.to_json(), "specialization": facts.to_json()}

        # Processes sharing the cache compile a specialization once (`load_or_compile`).
        entry, from_disk = kernel_cache.load_or_compile(key, compile_entry)
        return CompiledKernel(
            self.name,
            arch,
            entry["ptx"],
            KernelABI.from_json(entry["abi"]),
            Specialization.from_json(entry["specialization"]),
            pipeline,
            key,
            from_disk,
        )

    def adopt(self, kernel: CompiledKernel) -> None:
        """Use `kernel` (compiled in another process from this object's source and options)
        for the specialization its key names, instead of compiling it again."""
        self._adopted[kernel.key.digest()] = kernel

    def __repr__(self) -> str:
        if self.fn is not None:
            return f"<tilec.jit kernel {getattr(self.fn, '__qualname__', self.name)}>"
        return f"<tilec.jit kernel {self.name} of {self.source.filename}>"


def _environment_lookup() -> tuple[Mapping[Any, Any], Any, Any]:
    """`(mapping, key, value)`: `TILEC_INTERPRET=1` is in the environment now when
    `mapping.get(key) == value`. It is asked on every call, and `os.environ.get` costs half a
    microsecond when the variable is unset (it raises and catches a KeyError): where
    `os.environ` keeps its encoded copy in a dict (as CPython does), read that dict, which
    `os.environ[...] = ...` and `del` keep current."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    if isinstance(data, dict) and hasattr(environ, "encodekey"):
        try:
            return data, environ.encodekey(INTERPRET_VARIABLE), environ.encodevalue("1")
        except Exception:  # an unexpected os.environ: use the public way
            pass
    return environ, INTERPRET_VARIABLE, "1"


_ENVIRONMENT, _INTERPRET_KEY, _INTERPRET_ON = _environment_lookup()
# TILEC_CHECK_BOUNDS, read through the same mapping (its key encoded alike when it is
# os.environ's own dict): any value but these compiles the index checks.
if _ENVIRONMENT is os.environ:
    _CHECK_BOUNDS_KEY: Any = CHECK_BOUNDS_VARIABLE
    _CHECK_BOUNDS_OFF: tuple = (None, "", "0")
else:
    _CHECK_BOUNDS_KEY = os.environ.encodekey(CHECK_BOUNDS_VARIABLE)
    _CHECK_BOUNDS_OFF = (None, os.environ.encodevalue(""), os.environ.encodevalue("0"))


# Elements of one 16-byte vector, by dtype (`tilec.runtime.arguments.ELEMENT_BYTES`): the
# largest multiple below 16 a specialization records (`recorded_multiple`).
_VECTOR_ELEMENTS = {"i1": 16, "i8": 16, "i16": 8, "i32": 4, "i64": 2, "f16": 8, "bf16": 8}
_VECTOR_ELEMENTS.update({"f32": 4, "f64": 2, "f8e4m3": 16, "f8e5m2": 16})


_TRACE_KEYS = itertools.count()
_TRACED_FUNCTIONS: weakref.WeakValueDictionary[int, JitFunction] = weakref.WeakValueDictionary()


def traced_function(key: int) -> JitFunction:
    """The `JitFunction` whose `_trace_key` is `key`."""
    return _TRACED_FUNCTIONS[key]


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: `@tilec.jit` or `@tilec.jit(tile={...}, warps=..., stages=...,
    disable=(PASS, ...), pass_options={PASS: {OPTION: VALUE}}, line_info=..., interpret=...,
    autotune=..., pitch_operands=...)`."""
    if fn is not None:
        return JitFunction(fn, options)
    return lambda f: JitFunction(f, options)


def load_kernel(
    path: str | os.PathLike[str], kernel: str | None = None, **options: Any
) -> JitFunction:
    """Kernel `kernel` of the `.tile` file at `path` (the only one when None), as a
    `JitFunction`: callable on GPU tensors, with the same specialization and caches."""
    source = read_tile_file(path)
    module = parse_source(source.text, source.filename, register=False)
    names = [s.name for s in module.body if isinstance(s, FunctionDef)]
    if kernel is None:
        if len(names) != 1:
            from tilec.diagnostics import Location, TileError

            raise TileError(
                f"{source.filename} has {len(names)} kernels; name the one to load",
                Location(source.filename, 0, 0),
                hint="kernels: " + (", ".join(names) or "none"),
            )
        kernel = names[0]
    function = JitFunction(None, options, source=source, name=kernel)
    function.compiled  # noqa: B018 - reports a missing kernel or a bad program now
    return function
