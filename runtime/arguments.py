"""Kernel arguments: what the caller passes, as the kernel's parameters need it, checked.

Tensors may be

* torch CUDA tensors (the fast path: pointer, shape and strides are read off the tensor);
* objects with `__cuda_array_interface__` (CuPy, Numba) or a CUDA `__dlpack__` (JAX, ...);
* numpy arrays (bf16 as `ml_dtypes.bfloat16`): copied to the GPU before the launch and, when
  the kernel writes them, back afterwards (`Launcher.launch` does the copies);
* `DeviceTensor`s: GPU memory described by hand (an address, shape, strides, dtype, device).

A tensor on the CPU that is not a numpy array (a CPU torch tensor) is refused: copying it
silently would hide where the time goes. Scalars are Python, numpy or 0-d torch numbers,
converted to the parameter's type: floats rounded to nearest, integers range-checked.

`ArgumentChecker` applies the checks of `docs/abi.md` that need nothing but the parameters
(dtype, rank, fixed extents, one extent per dimension name, extents below 2**31, pointers
aligned to their element, one device for all), with the interpreter's wording: the parameter,
what it expected, what it got. Nothing here knows the IR: the parameters are the ABI's.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilec.diagnostics import UNKNOWN_LOC, Location, TileError

__all__ = [
    "ELEMENT_BYTES",
    "POSITIVE_RANGE",
    "ArgumentChecker",
    "Arguments",
    "DeviceTensor",
    "LaunchError",
    "flat_view",
    "is_dense",
    "is_positive",
    "scalar_converter",
    "signature_text",
]

MAX_EXTENT = 2**31 - 1  # masks compare element indices as i32

ELEMENT_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4}
ELEMENT_BYTES.update({"f64": 8, "f8e4m3": 1, "f8e5m2": 1})

# How each scalar type is packed into the parameter buffer (`struct` codes, little-endian).
SCALAR_CODES = {"i1": "B", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "index": "q"}
SCALAR_CODES.update({"f16": "e", "bf16": "H", "f32": "f", "f64": "d"})

_NUMPY_NAMES = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "bfloat16": "bf16",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "bool": "i1",
}
_TYPESTR = {"f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "i2": "i16", "i4": "i32"}
_TYPESTR.update({"i8": "i64", "b1": "i1"})
# DLPack type codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
_DLPACK = {(2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16", (6, 8): "i1"}
_DLPACK.update({(0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64"})
_KDL_CPU, _KDL_CUDA = 1, 2


class LaunchError(TileError):
    """The arguments of a launch do not fit the kernel; nothing was launched."""


class _Problem(Exception):
    """What is wrong with one argument (turned into a `LaunchError` naming it)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class DeviceTensor:
    """A tensor argument as the kernel sees it: an address on GPU `device`, shape, strides in
    elements and dtype. `host` is the numpy array when the caller passed one (`pointer` is
    then filled in at launch, with a contiguous copy on the GPU); `keep` holds whatever must
    live until the launch is queued (a DLPack capsule)."""

    __slots__ = ("device", "dtype", "host", "keep", "pointer", "shape", "strides")

    def __init__(
        self,
        pointer: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: str,
        device: int,
        host: np.ndarray | None = None,
        keep: Any = None,
    ):
        self.pointer = pointer
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.host = host
        self.keep = keep

    def __repr__(self) -> str:
        where = "host" if self.host is not None else f"cuda:{self.device}"
        return f"<{self.dtype}{list(self.shape)} strides {list(self.strides)} on {where}>"


def is_dense(tensor: DeviceTensor) -> bool:
    """Whether `tensor` is row-major with no gaps: element (i, j, ..) at the offset a
    contiguous tensor of its shape gives it (strides of dimensions of one element are free).
    What a kernel `flatten` ran as one dimension needs of its tensors."""
    expected = 1
    for n, stride in zip(reversed(tensor.shape), reversed(tensor.strides)):
        if n > 1 and stride != expected:
            return False
        expected *= n
    return True


def flat_view(tensor: DeviceTensor) -> DeviceTensor:
    """A dense `tensor` as one dimension of its elements (the same memory, stride 1): how a
    kernel `flatten` ran as one dimension sees it (`is_dense` must hold)."""
    n = 1
    for d in tensor.shape:
        n *= d
    return DeviceTensor(
        tensor.pointer, (n,), (1,), tensor.dtype, tensor.device, tensor.host, tensor.keep
    )


class Arguments:
    """Converted, checked arguments: `values` in argument order (a `DeviceTensor` or a
    scalar ready to pack), the extent of every named dimension, the GPU they live on (None
    when only numpy arrays were given), and the stream the caller's framework is using."""

    __slots__ = ("device", "extents", "framework_stream", "host_tensors", "values")

    def __init__(self, values, extents, device, framework_stream, host_tensors):
        self.values: list[Any] = values
        self.extents: dict[str, int] = extents
        self.device: int | None = device
        self.framework_stream = framework_stream  # a function of the device ordinal, or None
        self.host_tensors: list[DeviceTensor] = host_tensors


def signature_text(parameters: Sequence[Any]) -> str:
    """`a: f16[M, K], eps: f32` from the ABI's parameters."""
    return ", ".join(_argument_text(parameters, name) for name in _argument_names(parameters))


def _argument_names(parameters: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(p.argument for p in parameters))


def _argument_text(parameters: Sequence[Any], argument: str) -> str:
    own = [p for p in parameters if p.argument == argument]
    if own[0].kind == "scalar":
        return f"{argument}: {own[0].dtype}"
    dims = ", ".join("?" if p.dim is None else str(p.dim) for p in own if p.kind == "extent")
    return f"{argument}: {own[0].dtype}[{dims}]"


class ArgumentChecker:
    """Checks and converts the arguments of launches of one kernel (`convert`); made once per
    kernel, so that each launch only walks a list."""

    __slots__ = ("_fixed", "_named", "arguments", "kernel", "loc", "signature")

    def __init__(self, kernel: str, parameters: Sequence[Any], loc: Location = UNKNOWN_LOC):
        self.kernel = kernel
        self.loc = loc
        self.signature = signature_text(parameters)
        self.arguments: list[tuple[str, str, str, tuple]] = []  # name, kind, dtype, dims
        for name in _argument_names(parameters):
            own = [p for p in parameters if p.argument == name]
            dims = tuple(p.dim for p in own if p.kind == "extent")
            self.arguments.append((name, own[0].kind, own[0].dtype, dims))
        # Per argument, what each launch checks: named dimensions (axis, name), fixed ones.
        self._named = [
            tuple((axis, d) for axis, d in enumerate(dims) if isinstance(d, str))
            for _name, _kind, _dtype, dims in self.arguments
        ]
        self._fixed = [
            tuple((axis, d) for axis, d in enumerate(dims) if isinstance(d, int))
            for _name, _kind, _dtype, dims in self.arguments
        ]

    def convert(self, values: Sequence[Any]) -> Arguments:
        """Check `values` (one per kernel argument, in order) and convert them. Raises
        `LaunchError` naming the first argument that does not fit."""
        if len(values) != len(self.arguments):
            raise LaunchError(
                f"kernel '{self.kernel}' takes {len(self.arguments)} argument(s), got "
                f"{len(values)}",
                self.loc,
                hint=f"its parameters: {self.signature}",
            )
        converted: list[Any] = []
        extents: dict[str, int] = {}
        device: int | None = None
        device_from = ""
        stream = None
        host: list[DeviceTensor] = []
        for index, value in enumerate(values):
            name, kind, dtype, dims = self.arguments[index]
            try:
                if kind == "scalar":
                    converted.append(_scalar(dtype, value))
                    continue
                if type(value) in _TORCH_TENSOR[0]:  # the common case, first
                    tensor, framework = _torch_tensor(value), _torch_stream
                else:
                    tensor, framework = _tensor(value)
                shape = tensor.shape
                # The cheap tests first; `_check_tensor` says what is wrong.
                if (
                    tensor.dtype != dtype
                    or len(shape) != len(dims)
                    or tensor.pointer % ELEMENT_BYTES[dtype]
                    or (shape and max(shape) > MAX_EXTENT)
                ):
                    _check_tensor(tensor, dtype, dims)
                for axis, d in self._fixed[index]:
                    if shape[axis] != d:
                        _check_tensor(tensor, dtype, dims)
            except _Problem as problem:
                raise _error(self, name, problem) from None
            for axis, d in self._named[index]:
                if extents.setdefault(d, shape[axis]) != shape[axis]:
                    self._disagree(d, extents[d], name, axis, shape[axis])
            if tensor.host is not None:
                host.append(tensor)
            else:
                if device is None:
                    device, device_from = tensor.device, name
                elif tensor.device != device:
                    problem = _Problem(
                        f"it is on GPU {tensor.device}, but '{device_from}' is on GPU {device}",
                        hint="all tensors of one launch must be on one GPU",
                    )
                    raise _error(self, name, problem)
                if stream is None:
                    stream = framework
            converted.append(tensor)
        return Arguments(converted, extents, device, stream, host)

    def _disagree(self, dim: str, seen: int, name: str, axis: int, extent: int) -> None:
        for i, (other, _kind, _dtype, _dims) in enumerate(self.arguments):
            for other_axis, d in self._named[i]:
                if d == dim:
                    raise LaunchError(
                        f"dimension {dim} is {seen} in '{other}' (axis {other_axis}) but "
                        f"{extent} in '{name}' (axis {axis}) of kernel '{self.kernel}'",
                        self.loc,
                        hint="dimensions with the same name must have the same extent",
                    )


def _error(checker: ArgumentChecker, name: str, problem: _Problem) -> LaunchError:
    text = next(
        f"{n}: {dt}" if k == "scalar" else f"{n}: {dt}[{', '.join(_dim(d) for d in dims)}]"
        for n, k, dt, dims in checker.arguments
        if n == name
    )
    return LaunchError(
        f"argument '{name}' of kernel '{checker.kernel}' ({text}): {problem.message}",
        checker.loc,
        hint=problem.hint,
    )


def _dim(d: Any) -> str:
    return "?" if d is None else str(d)


def _check_tensor(tensor: DeviceTensor, dtype: str, dims: tuple) -> None:
    if tensor.dtype != dtype:
        raise _Problem(
            f"expected dtype {dtype}, got {tensor.dtype}",
            hint=_convert_hint(dtype, numpy=tensor.host is not None),
        )
    if len(tensor.shape) != len(dims):
        raise _Problem(
            f"expected {len(dims)} dimension(s) [{', '.join(_dim(d) for d in dims)}], "
            f"got {len(tensor.shape)} (shape {tensor.shape})"
        )
    for axis, (d, n) in enumerate(zip(dims, tensor.shape)):
        if isinstance(d, int) and d != n:
            raise _Problem(f"dimension {axis} must be {d}, got {n} (shape {tensor.shape})")
        if n > MAX_EXTENT:
            raise _Problem(
                f"dimension {axis} is {n}: extents must be below 2**31 (the kernel compares "
                "element indices as i32)",
                hint="split the tensor, or launch on smaller views of it",
            )
    if tensor.pointer % ELEMENT_BYTES[dtype]:
        raise _Problem(
            f"its address {tensor.pointer:#x} is not a multiple of its element size "
            f"({ELEMENT_BYTES[dtype]} bytes)"
        )


def _convert_hint(dtype: str, numpy: bool) -> str:
    if numpy:
        module = "ml_dtypes" if dtype in ("bf16", "f8e4m3", "f8e5m2") else "numpy"
        target = f"{module}.{_NUMPY_OF[dtype]}"
        return f"convert it, e.g. x.astype({target})"
    return f"convert it, e.g. x.to(torch.{_TORCH_OF[dtype]})"


_NUMPY_OF = {tilec: numpy for numpy, tilec in _NUMPY_NAMES.items()}
_NUMPY_OF["i1"] = "bool_"
_TORCH_OF = {**_NUMPY_OF, "i1": "bool"}


# ---------------------------------------------------------------------------------------------
# Tensors


def _tensor(value: Any) -> tuple[DeviceTensor, Any]:
    """The tensor `value` describes, and a function giving its framework's current stream on
    a device (None when the framework has none)."""
    module = type(value).__module__
    if module.startswith("torch"):
        return _torch_tensor(value), _torch_stream
    if isinstance(value, np.ndarray):
        return _numpy_tensor(value), None
    if type(value) is DeviceTensor:  # GPU memory described by hand
        return _no_negative_strides(value), None
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        tensor = _no_negative_strides(_interface_tensor(interface, value))
        return tensor, (_cupy_stream if module.startswith("cupy") else None)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return _no_negative_strides(_dlpack_tensor(value)), None
    raise _Problem(
        f"expected a tensor, got {type(value).__name__}",
        hint="pass a torch CUDA tensor, a CuPy array, a DLPack tensor or a numpy array",
    )


def tensor_dtype(value: Any) -> str | None:
    """The tile dtype name of the tensor `value` (torch, numpy, CuPy, DLPack, `DeviceTensor`),
    or None when it is not a tensor: what binds a generic kernel's dtype parameters."""
    dtype = getattr(value, "dtype", None)
    if dtype is None and not hasattr(value, "__dlpack__"):
        return None
    if isinstance(value, np.ndarray):
        return _NUMPY_NAMES.get(value.dtype.name, value.dtype.name)
    if type(value).__module__.startswith("torch"):
        return _torch_dtype(value)
    try:
        return _tensor(value)[0].dtype
    except _Problem:
        return None


def _no_negative_strides(tensor: DeviceTensor) -> DeviceTensor:
    if any(s < 0 for s in tensor.strides):
        raise _Problem(
            f"its strides {tensor.strides} are negative; tilec kernels take strides >= 0"
        )
    return tensor


_TORCH_DTYPES: dict[Any, str] = {}
# The plain torch tensor types once torch has been seen (never imported here: tilec does not
# need torch): torch.Tensor and a module's weight, nn.Parameter (a subclass that adds no
# behaviour to its data, shape or strides).
_TORCH_TENSOR: list[Any] = [()]


def _torch_dtype(t: Any) -> str:
    """The tile dtype name of torch tensor `t` (torch's own name for one tilec lacks)."""
    if not _TORCH_DTYPES:
        import torch

        for name, dt in [
            ("f16", torch.float16),
            ("bf16", torch.bfloat16),
            ("f32", torch.float32),
            ("f64", torch.float64),
            ("i1", torch.bool),
            ("i8", torch.int8),
            ("i16", torch.int16),
            ("i32", torch.int32),
            ("i64", torch.int64),
            # f8 from torch 2.1 on
            ("f8e4m3", getattr(torch, "float8_e4m3fn", None)),
            ("f8e5m2", getattr(torch, "float8_e5m2", None)),
        ]:
            if dt is not None:
                _TORCH_DTYPES[dt] = name
        _TORCH_TENSOR[0] = (torch.Tensor, torch.nn.Parameter)
    return _TORCH_DTYPES.get(t.dtype) or str(t.dtype).removeprefix("torch.")


def _torch_tensor(t: Any) -> DeviceTensor:
    dtype = _torch_dtype(t)
    device = t.get_device()
    if device < 0:
        raise _Problem(
            f"a torch tensor on {t.device}: a GPU kernel needs it on the GPU",
            hint="pass tensor.cuda(), or a numpy array (copied to the GPU and back); to run "
            "on the CPU, use tilec's interpreter: TILEC_INTERPRET=1",
        )
    return DeviceTensor(t.data_ptr(), tuple(t.shape), t.stride(), dtype, device)


def _numpy_tensor(a: np.ndarray) -> DeviceTensor:
    dtype = _NUMPY_NAMES.get(a.dtype.name, a.dtype.name)
    # The kernel runs on a contiguous copy: these are that copy's strides.
    strides, step = [], 1
    for n in reversed(a.shape):
        strides.append(step)
        step *= n
    return DeviceTensor(0, tuple(a.shape), tuple(reversed(strides)), dtype, -1, host=a)


def _interface_tensor(interface: dict, value: Any) -> DeviceTensor:
    typestr = interface["typestr"]
    dtype = _TYPESTR.get(typestr[1:], typestr) if typestr[0] in "<|" else typestr
    shape = tuple(int(n) for n in interface["shape"])
    size = ELEMENT_BYTES.get(dtype, 1)
    pointer = int(interface["data"][0])
    if interface.get("strides") is None:
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        element_strides = tuple(reversed(strides))
    else:
        if any(s % size for s in interface["strides"]):
            raise _Problem(f"its strides {interface['strides']} are not whole elements")
        element_strides = tuple(int(s) // size for s in interface["strides"])
    return DeviceTensor(pointer, shape, element_strides, dtype, _pointer_device(pointer))


def _pointer_device(pointer: int) -> int:
    """The GPU that owns `pointer` (objects with `__cuda_array_interface__` do not say)."""
    if pointer == 0:
        return 0  # an empty array: any device will do
    from tilec.runtime.device import check, cuda_modules

    _, driver = cuda_modules()
    attribute = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    err, ordinal = driver.cuPointerGetAttribute(attribute, pointer)
    if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
        raise _Problem(f"its address {pointer:#x} is not GPU memory")
    check(driver, err, "cuPointerGetAttribute")
    return int(ordinal)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_tensor(value: Any) -> DeviceTensor:
    device_type, device_id = value.__dlpack_device__()
    if device_type == _KDL_CPU:
        return _numpy_tensor(np.from_dlpack(value))
    if device_type != _KDL_CUDA:
        raise _Problem(f"a DLPack tensor on device type {device_type}, not a CUDA GPU")
    # The capsule is not consumed: when it is collected, it frees the view it describes.
    capsule = value.__dlpack__()
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    key = (tensor.dtype.code, tensor.dtype.bits)
    dtype = _DLPACK.get(key, f"DLPack type {key}") if tensor.dtype.lanes == 1 else "vector"
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[i] for i in range(tensor.ndim))
    else:
        step, rev = 1, []
        for n in reversed(shape):
            rev.append(step)
            step *= n
        strides = tuple(reversed(rev))
    pointer = (tensor.data or 0) + tensor.byte_offset
    return DeviceTensor(pointer, shape, strides, dtype, device_id, keep=capsule)


def _torch_stream(device: int) -> int:
    """torch's current stream on `device`, looked up on every launch: the caller may have
    switched streams, or be capturing a graph, since the last one."""
    raw = _RAW_STREAM[0]
    if raw is None:
        import torch

        # The raw handle, without making a torch.cuda.Stream object (a few µs a launch).
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:
            return torch.cuda.current_stream(device).cuda_stream
        _RAW_STREAM[0] = raw
    return raw(device)


_RAW_STREAM: list[Any] = [None]  # torch._C._cuda_getCurrentRawStream, once found


def _cupy_stream(device: int) -> int:
    import cupy

    return cupy.cuda.get_current_stream().ptr


# ---------------------------------------------------------------------------------------------
# Scalars


def _scalar(dtype: str, value: Any) -> Any:
    """`value` as the parameter of type `dtype` is packed (`SCALAR_CODES`)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    elif hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()  # a 0-d torch tensor, a numpy scalar
    is_bool = isinstance(value, (bool, np.bool_))
    is_int = isinstance(value, (int, np.integer)) and not is_bool
    is_float = isinstance(value, (float, np.floating))
    if dtype in ("f16", "bf16", "f32", "f64"):
        if not (is_int or is_float):
            raise _Problem(f"expected a number for {dtype}, got {_value_text(value)}")
        if dtype == "bf16":
            return _bfloat16_bits(float(value))
        if dtype == "f16":
            return float(np.float16(value))  # struct's "e" overflows where numpy gives inf
        if dtype == "f32":
            return _f32(float(value))
        return float(value)
    if dtype == "i1":
        if is_bool or (is_int and int(value) in (0, 1)):
            return int(bool(value))
        raise _Problem(f"expected a bool for i1, got {_value_text(value)}")
    if not (is_int or is_bool):
        raise _Problem(f"expected an integer for {dtype}, got {_value_text(value)}")
    bits = 64 if dtype == "index" else int(dtype[1:])
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not low <= int(value) <= high:
        raise _Problem(f"{int(value)} does not fit {dtype} ({low} to {high})")
    return int(value)


# The numbers that become a finite value above zero in each float type, an open interval
# (v, w) of what a Python number may be: rounding to nearest even takes anything at or below
# half the least subnormal to 0 and anything at or past the midpoint between the largest
# finite value and the next power of two to infinity (or an error). NaN is in no interval. A
# kernel compiled for a `positive` scalar (`Specialization.positive`) takes only these.
POSITIVE_RANGE = {
    "f16": (2.0**-25, 65520.0),
    "bf16": (2.0**-134, 2.0**128 - 2.0**119),
    "f32": (2.0**-150, 2.0**128 - 2.0**103),
    "f64": (0.0, math.inf),
}
_BF16_INF_BITS = 0x7F80


def is_positive(dtype: str, value: Any) -> bool:
    """Whether scalar `value`, as `_scalar` converts it for a parameter of type `dtype` (a
    float; for bf16, its bits), is finite and above zero in that type."""
    if dtype == "bf16":
        return 0 < value < _BF16_INF_BITS
    low, high = POSITIVE_RANGE[dtype]
    return low < value < high


# The least magnitude an f32 rounds to infinity at (the midpoint between its largest finite
# value and 2^128): struct's "f" raises OverflowError from there on; C, numpy and torch round.
_F32_OVERFLOW = 2.0**128 - 2.0**103


def _f32(value: float) -> float:
    """`value` as an f32 parameter takes it: round to nearest, infinity past the largest
    finite f32 (a Python float of 1e39 is inf, as `(float)1e39` is in C)."""
    if -_F32_OVERFLOW < value < _F32_OVERFLOW or value != value:
        return value
    return math.copysign(math.inf, value)


def scalar_converter(dtype: str, kind: type) -> Any:
    """What a launch must do to a Python scalar of type `kind` (exactly) for a parameter of
    type `dtype`: None when it is packed as it is (a float for f64: what `_scalar` gives),
    else a function that converts it or raises `_Problem`, with `_scalar`'s checks."""
    if kind is float and dtype == "f64":
        return None
    if kind is float and dtype == "f32":
        return _f32
    if kind is int and dtype in ("i8", "i16", "i32", "i64", "index"):
        bits = 64 if dtype == "index" else int(dtype[1:])
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

        def in_range(value: int) -> int:
            if low <= value <= high:
                return value
            return _scalar(dtype, value)  # raises, with the message

        return in_range
    return lambda value: _scalar(dtype, value)


def _bfloat16_bits(x: float) -> int:
    """The bits of the bf16 nearest to `x` (numpy has no bf16; ml_dtypes does)."""
    import ml_dtypes

    return int(np.array(x, dtype=np.float64).astype(ml_dtypes.bfloat16).view(np.uint16))


def _value_text(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) < 40 else text[:37] + '...'}"
