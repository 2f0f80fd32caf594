"""`tilec run`: a kernel of a `.tile` file on random inputs, in the interpreter, checked
against the example's numpy reference.

**References.** The reference of `examples/foo.tile` is `examples/foo_reference.py` (or any
file given with `--reference`): a Python module with one function per kernel, named like the
kernel, taking the kernel's arguments (numpy arrays, and numpy scalars for scalar parameters)
and returning the expected contents of the tensors the kernel writes — one array when it writes
one tensor, else a tuple in parameter order or a dict by parameter name. It gets copies of the
arguments as they were before the kernel ran. The module may also define

* `SCALARS = {"kernel": {"eps": 1e-5}}` — values for scalar parameters (instead of random
  ones) where the kernel needs meaningful ones;
* `TOLERANCES = {"kernel": 4e-3}` — a relative tolerance where the default (below) is too
  tight for a reason the module states;
* `GPU_TOLERANCES = {"kernel": 2e-3}` — the same for the kernel's run on the GPU only (the
  example runner of `tilec.gpucheck`), where the hardware computes less exactly than the
  interpreter (fp8 tensor cores accumulate in fewer bits than f32), so the interpreter stays
  held to the default.

**Inputs** are random, from `--seed`: floats uniform in [-1, 1) rounded to their dtype,
integers in [-8, 8), i1 either value. Tensors the kernel writes get random contents too, which
stay where it does not write.

**Tolerances.** Integer and bool outputs must match exactly. A float output passes when
|got - expected| <= rtol * (|expected| + max |expected|) everywhere, NaN matching NaN: the
first term allows a last-bit difference element by element, the second the error of sums and
dots, which grows with the size of the data rather than of each element. The default rtol is
a few units in the last place of the output dtype (`DEFAULT_RTOL`), since references compute
in f64 and round once while kernels round after every op in their own dtypes.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from tilec.diagnostics import TileError, relative_name
from tilec.dialects.builtin import FuncOp
from tilec.interp.gather import index_bounds
from tilec.interp.launch import (
    Launch,
    TensorView,
    _attribute_pairs,
    bind_sizes,
    describe_parameter,
    find_kernel,
    parameter_name,
    prepare_launch,
    tile_symbols,
    written_parameters,
)
from tilec.interp.numerics import dtype_of, is_float_dtype, round_from_f64
from tilec.ir.types import FloatType, TensorType

__all__ = [
    "DEFAULT_RTOL",
    "OutputCheck",
    "RunReport",
    "check_kernel",
    "load_reference",
    "random_arguments",
    "reference_path",
    "run_on_copies",
]

# Relative tolerance by output dtype, with the reason the report prints.
DEFAULT_RTOL: dict[str, tuple[float, str]] = {
    "f8e4m3": (2.5e-1, "2 ulp of f8e4m3"),
    "f8e5m2": (5e-1, "2 ulp of f8e5m2"),
    "f16": (2e-3, "2 ulp of f16"),
    "bf16": (1.6e-2, "2 ulp of bf16"),
    "f32": (1e-5, "about 80 ulp of f32, for sums rounded in another order"),
    "f64": (1e-12, "about 4500 ulp of f64, for sums rounded in another order"),
}

# Inputs this large are a typo, not a test: refuse them before allocating.
MAX_INPUT_BYTES = 4 << 30


@dataclass
class OutputCheck:
    """How one output tensor compares with the reference."""

    name: str
    parameter: str  # `c: f16[M, N]`
    passed: bool
    max_abs_error: float
    max_rel_error: float
    rtol: float
    tolerance_reason: str
    worst: str = ""  # where the largest error is, and the two values there

    def render(self) -> str:
        if self.rtol == 0:
            tolerance = "exact match required"
        else:
            tolerance = f"rtol {self.rtol:g}: {self.tolerance_reason}"
        verdict = "ok" if self.passed else "FAILED"
        line = (
            f"  {self.parameter}: max abs error {self.max_abs_error:.3g}, "
            f"max rel error {self.max_rel_error:.3g} ({tolerance}) ... {verdict}"
        )
        return line if self.passed or not self.worst else f"{line}\n    worst: {self.worst}"


@dataclass
class RunReport:
    """What `check_kernel` did and found."""

    launch: Launch
    seed: int
    seconds: float
    scalars: dict[str, Any]
    reference: str | None  # the reference file, when a reference function was found
    note: str = ""  # why nothing was checked, when nothing was
    checks: list[OutputCheck] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def render(self) -> str:
        lines = [self.launch.describe()]
        inputs = f"random inputs (seed {self.seed})"
        if self.scalars:
            inputs += "; " + ", ".join(f"{k}={v}" for k, v in self.scalars.items())
        lines.append(inputs)
        lines.append(f"interpreted in {self.seconds:.3f} s")
        lines.extend(c.render() for c in self.checks)
        if self.unchecked:
            lines.append(
                "  not checked (the reference does not return them): " + ", ".join(self.unchecked)
            )
        if self.reference is None:
            lines.append(f"NOT CHECKED: {self.note}")
        elif self.passed:
            lines.append(f"PASS: {len(self.checks)} output(s) match {self.reference}")
        else:
            failed = ", ".join(c.name for c in self.checks if not c.passed)
            lines.append(f"FAIL: {failed} differ(s) from {self.reference}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# References


def reference_path(tile_path: str | os.PathLike[str]) -> str:
    """Where the reference of a `.tile` file lives: `foo.tile` → `foo_reference.py` beside it."""
    root, _ = os.path.splitext(os.fspath(tile_path))
    return root + "_reference.py"


def load_reference(path: str | os.PathLike[str]) -> ModuleType:
    """Import a reference module from its path."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TileError(f"no reference file '{path}'")
    name = "tilec_reference_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise TileError(
            f"the reference file '{path}' failed to load: {type(e).__name__}: {e}"
        ) from e
    return module


# ---------------------------------------------------------------------------------------------
# Inputs


def _random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if is_float_dtype(dtype):
        return round_from_f64(rng.uniform(-1.0, 1.0, size=shape), dtype)
    return rng.integers(-8, 8, size=shape).astype(dtype)


def _kernel_dimensions(func: FuncOp) -> dict[str, list[str]]:
    """Each dimension name of the kernel's tensors, with the parameters that use it."""
    dims: dict[str, list[str]] = {}
    for arg in func.arguments:
        if isinstance(arg.type, TensorType):
            for d in arg.type.shape:
                if isinstance(d, str):
                    users = dims.setdefault(d, [])
                    if describe_parameter(arg) not in users:
                        users.append(describe_parameter(arg))
    return dims


def _tensor_shapes(func: FuncOp, sizes: Mapping[str, int]) -> list[tuple[int, ...] | None]:
    dims = _kernel_dimensions(func)
    known = ", ".join(dims) or "none"
    given: dict[str, int] = {}
    for name, value in sizes.items():
        key = name.upper()
        if key not in dims:
            raise TileError(
                f"kernel '{func.sym_name}' has no dimension '{name}'",
                func.loc,
                hint=f"its dimensions: {known}",
            )
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise TileError(f"size {name}={value!r} must be a non-negative integer", func.loc)
        given[key] = int(value)
    missing = [d for d in dims if d not in given]
    if missing:
        d = missing[0]
        raise TileError(
            f"no size for dimension {d} of kernel '{func.sym_name}' (used by {', '.join(dims[d])})",
            func.loc,
            hint="give every dimension a size: --sizes " + ",".join(f"{n}=..." for n in dims),
        )
    shapes: list[tuple[int, ...] | None] = []
    for arg in func.arguments:
        t = arg.type
        if isinstance(t, TensorType):
            if None in t.shape:
                raise TileError(
                    f"parameter {describe_parameter(arg)} has an unnamed dimension ('?'), "
                    "which random inputs cannot size",
                    func.loc,
                )
            shapes.append(tuple(d if isinstance(d, int) else given[d] for d in t.shape))
        else:
            shapes.append(None)
    return shapes


def check_sizes(
    func: FuncOp, sizes: Mapping[str, int], tile_sizes: Mapping[str, int] | None = None
) -> list[Any]:
    """The shape of each argument of `func` (None for a scalar) at dimensions `sizes`, checked
    against the kernel (every dimension given, no other; overflow; `tile_sizes`), with
    located errors; nothing is allocated."""
    shapes = _tensor_shapes(func, sizes)
    bind_sizes(func, shapes, tile_sizes)
    return shapes


def random_arguments(
    func: FuncOp,
    sizes: Mapping[str, int],
    *,
    seed: int = 0,
    scalars: Mapping[str, Any] | None = None,
    tile_sizes: Mapping[str, int] | None = None,
) -> list[Any]:
    """Random arguments for `func` with dimensions of `sizes` (by dimension name). Checks the
    sizes against the kernel (and `tile_sizes`) before allocating anything."""
    shapes = check_sizes(func, sizes, tile_sizes)
    total = sum(
        math.prod(shape) * dtype_of(arg.type).itemsize
        for arg, shape in zip(func.arguments, shapes)
        if shape is not None
    )
    if total > MAX_INPUT_BYTES:
        raise TileError(
            f"the arguments of kernel '{func.sym_name}' would take {total / 2**30:.1f} GiB "
            f"(at most {MAX_INPUT_BYTES >> 30} GiB)",
            func.loc,
            hint="choose smaller sizes",
        )
    scalars = dict(scalars or {})
    names = {parameter_name(a) for a in func.arguments if not isinstance(a.type, TensorType)}
    for name in scalars:
        if name not in names:
            raise TileError(
                f"kernel '{func.sym_name}' has no scalar parameter '{name}'",
                func.loc,
                hint="its scalar parameters: " + (", ".join(sorted(names)) or "none"),
            )
    rng = np.random.default_rng(seed)
    arguments: list[Any] = []
    in_range = index_bounds(func, shapes)  # tensors of gather indices: valid ones
    for i, (arg, shape) in enumerate(zip(func.arguments, shapes)):
        dtype = dtype_of(arg.type)
        if shape is not None and in_range.get(i, 0) > 0:
            arguments.append(rng.integers(0, in_range[i], size=shape).astype(dtype))
        elif shape is not None:
            arguments.append(_random_values(rng, shape, dtype))
        elif parameter_name(arg) in scalars:
            arguments.append(scalars[parameter_name(arg)])
        else:
            arguments.append(_random_values(rng, (), dtype)[()])
    return arguments


# ---------------------------------------------------------------------------------------------
# Comparing


def _expected_outputs(
    func: FuncOp, result: Any, written: list[str], reference: str
) -> dict[str, np.ndarray]:
    kernel = func.sym_name
    if isinstance(result, Mapping):
        tensors = {parameter_name(a) for a in func.arguments if isinstance(a.type, TensorType)}
        for name in result:
            if name not in tensors:
                raise TileError(
                    f"the reference of '{kernel}' in {reference} returns '{name}', which is not "
                    "a tensor parameter of the kernel"
                )
        return {name: np.asarray(value) for name, value in result.items()}
    if isinstance(result, (tuple, list)):
        if len(result) != len(written):
            raise TileError(
                f"the reference of '{kernel}' in {reference} returns {len(result)} value(s); "
                f"the kernel writes {len(written)} tensor(s) ({', '.join(written)})"
            )
        return {name: np.asarray(value) for name, value in zip(written, result)}
    if len(written) != 1:
        raise TileError(
            f"the reference of '{kernel}' in {reference} returns one array, but the kernel "
            f"writes {len(written)} tensors ({', '.join(written) or 'none'})",
            hint="return a dict by parameter name",
        )
    return {written[0]: np.asarray(result)}


def _compare(
    name: str, parameter: str, got: np.ndarray, expected: np.ndarray, rtol: float, reason: str
) -> OutputCheck:
    if expected.shape != got.shape:
        return OutputCheck(
            name,
            parameter,
            False,
            math.inf,
            math.inf,
            rtol,
            reason,
            f"the reference has shape {expected.shape}, the output {got.shape}",
        )
    if got.dtype.kind in "biu":
        got_wide, expected_wide = got.astype(np.int64), expected.astype(np.int64)
        error = np.abs(got_wide - expected_wide).astype(np.float64)
        reference_magnitude = np.abs(expected_wide).astype(np.float64)
        rtol, reason, bad = 0.0, "integers", error != 0
    else:
        got_wide, expected_wide = got.astype(np.float64), expected.astype(np.float64)
        both_nan = np.isnan(got_wide) & np.isnan(expected_wide)
        same_inf = np.isinf(got_wide) & (got_wide == expected_wide)
        with np.errstate(invalid="ignore"):
            error = np.where(both_nan | same_inf, 0.0, np.abs(got_wide - expected_wide))
        error = np.where(np.isnan(error), np.inf, error)  # NaN on one side only
        reference_magnitude = np.abs(np.where(np.isfinite(expected_wide), expected_wide, 0.0))
        scale = float(reference_magnitude.max()) if reference_magnitude.size else 0.0
        bad = error > rtol * (reference_magnitude + scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(reference_magnitude > 0, error / reference_magnitude, 0.0)
    max_abs = float(error.max()) if error.size else 0.0
    max_rel = float(relative.max()) if relative.size else 0.0
    worst = ""
    if np.any(bad):
        # The worst failing element, relative to what it was allowed.
        index = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), error.shape)
        worst = (
            f"at {list(map(int, index))}: got {got[index]!r}, expected {expected[index]!r}"
            f" ({int(np.count_nonzero(bad))} of {error.size} elements out of tolerance)"
        )
    return OutputCheck(name, parameter, not np.any(bad), max_abs, max_rel, rtol, reason, worst)


# ---------------------------------------------------------------------------------------------
# The whole check


def reference_tolerance(module: Any, kernel: str, gpu: bool = False) -> float | None:
    """The relative tolerance a reference module sets for `kernel` (None: the default):
    `GPU_TOLERANCES` first for a run on the GPU, then `TOLERANCES` (module docstring)."""
    if gpu:
        tolerance = getattr(module, "GPU_TOLERANCES", {}).get(kernel)
        if tolerance is not None:
            return tolerance
    return getattr(module, "TOLERANCES", {}).get(kernel)


def check_kernel(
    program: Any,
    kernel: str | None,
    sizes: Mapping[str, int],
    *,
    tile_sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    scalars: Mapping[str, Any] | None = None,
    reference: ModuleType | str | None = None,
    rtol: float | None = None,
) -> RunReport:
    """Run `kernel` of `program` on random inputs of `sizes` and compare the tensors it writes
    with `reference` (a module, or the path of one; None: run without checking)."""
    func = find_kernel(program, kernel)
    name = func.sym_name
    module = load_reference(reference) if isinstance(reference, str) else reference
    reference_file = getattr(module, "__file__", None)
    reference_name = (
        relative_name(reference_file) if reference_file else getattr(module, "__name__", "?")
    )
    reference_fn = getattr(module, name, None) if module is not None else None
    chosen_scalars = {**getattr(module, "SCALARS", {}).get(name, {}), **(scalars or {})}
    args = random_arguments(func, sizes, seed=seed, scalars=chosen_scalars, tile_sizes=tile_sizes)
    launch = prepare_launch(func, None, args, tile_sizes=tile_sizes)
    # What the reference gets: the inputs before the kernel ran, scalars as the kernel sees
    # them (rounded to their dtype).
    before = [np.copy(v.array) if isinstance(v, TensorView) else v for v in launch.arguments]
    start = time.perf_counter()
    launch.run()
    seconds = time.perf_counter() - start
    shown_scalars = {
        parameter_name(a): v
        for a, v in zip(func.arguments, launch.arguments)
        if not isinstance(v, TensorView)
    }
    report = RunReport(launch, seed, seconds, shown_scalars, None)
    if module is None:
        report.note = "no reference was given"
        return report
    if not callable(reference_fn):
        report.note = f"{reference_name} has no function '{name}'"
        return report
    report.reference = reference_name
    try:
        result = reference_fn(*before)
    except Exception as e:
        raise TileError(
            f"the reference '{name}' in {reference_name} raised {type(e).__name__}: {e}"
        ) from e
    written_args = [a for a in func.arguments if a in written_parameters(func)]
    written = [parameter_name(a) for a in written_args]
    expected = _expected_outputs(func, result, written, reference_name)
    tolerance_override = reference_tolerance(module, name)
    for arg, value in zip(func.arguments, launch.arguments):
        arg_name = parameter_name(arg)
        if not isinstance(value, TensorView):
            continue
        if arg_name not in expected:
            if arg_name in written:
                report.unchecked.append(arg_name)
            continue
        element = arg.type.element
        if not isinstance(element, FloatType):
            tolerance, reason = 0.0, "integers"  # `_compare` requires them to match exactly
        elif rtol is not None:
            tolerance, reason = rtol, "given with --rtol"
        elif tolerance_override is not None:
            tolerance, reason = float(tolerance_override), f"set by {reference_name}"
        else:
            tolerance, reason = DEFAULT_RTOL[element.name]
        report.checks.append(
            _compare(
                arg_name,
                describe_parameter(arg),
                value.array,
                expected[arg_name],
                tolerance,
                reason,
            )
        )
    return report


def run_on_copies(
    program: Any, kernel: str, inputs: Sequence[Any], tile_sizes: Mapping[str, int] | None
) -> tuple[list[np.ndarray], dict[str, int]]:
    """Run `kernel` on copies of `inputs` at `tile_sizes` (those of its symbols: a size for a
    symbol it has not -- one a later pass renamed, as `flatten` tiles one dimension where
    there were two -- is left out): its tensor arguments afterwards, in their callers'
    shapes, and the tile sizes it ran with. What translation validation compares, before and
    after a pass."""
    func = find_kernel(program, kernel)
    grid = [str(s) for _, s in _attribute_pairs(func, "tilec.grid")]
    known = {*tile_symbols(func), *grid}
    sizes = None
    if tile_sizes is not None:
        sizes = {s: n for s, n in tile_sizes.items() if s in known}
    args = [np.copy(a) if isinstance(a, np.ndarray) else a for a in inputs]
    launch = prepare_launch(program, kernel, args, tile_sizes=sizes)
    launch.run()
    # The copies themselves: the interpreter wrote into them (a flattened kernel through
    # one-dimensional views of them).
    outputs = [a for a, v in zip(args, launch.arguments) if isinstance(v, TensorView)]
    return outputs, {s: size for s, (size, _) in launch.tile_sizes.items()}
