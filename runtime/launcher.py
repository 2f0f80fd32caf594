"""Launching one compiled kernel: PTX in, a checked launch on the caller's stream out.

    launcher = Launcher(ptx, abi, specialization)    # abi: a tilec.lowering.KernelABI
    launcher(x, y, out)                                # torch / CuPy / DLPack / numpy arrays
    launcher(x, y, out, stream=s)                      # any stream object, or a handle

**Loading.** On the first launch on a GPU the PTX becomes a cubin through `cuda.core.Program`
(the driver's or nvJitLink's PTX compiler) and is cached on disk by cuda.core's own
`FileStreamProgramCache` under tilec's cache directory (`TILEC_CACHE_DIR`), keyed by the PTX,
the architecture and the compiler's version: a second process loads it without compiling. The
kernel's dynamic shared memory and registers are checked against the device here, with a clear
message when they do not fit.

**Launching.** The arguments are checked (`tilec.runtime.arguments`, then here: whole
dimensions within `max_extents`, the promises of the `Specialization`, the grid's limits)
before anything is queued, so a refused launch writes nothing. The parameters are packed into
one buffer made when the launcher is (`struct.pack_into`, no allocation) and handed to
`cuLaunchKernel` as the array of pointers it takes: converting arguments one by one through
`cuda.core.launch` costs more than the whole launch may (10 µs). `fast_launch` writes a launch
out for one signature of arguments (`@tilec.jit`'s repeated calls): its own parameter storage
with the extents and strides written once, no lock, the stream as a `CUstream` made once.
The stream is, in order: the `stream` argument; torch's current stream when torch tensors
are passed (CuPy's for CuPy arrays); the legacy default stream. With device arrays only, a
launch neither allocates nor synchronises, so it can be captured into a CUDA graph.

**Clusters.** A kernel that runs in thread-block clusters (`KernelABI.cluster`) names its
cluster shape in its PTX (`.explicitcluster`, `.reqnctapercluster`), as CUDA C++'s
`__cluster_dims__` does; the driver then launches it in clusters of that shape through the
plain `cuLaunchKernel`, as `<<<grid, block>>>` launches such a kernel, provided each grid axis
is a multiple of the cluster's (`grid` rounds it up; a persistent grid is whole clusters of
the blocks the GPU holds). So every launch path stays the one
above: `cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` would only be needed to
choose the shape at launch time, which a tilec kernel never does. A persistent kernel may be
clustered along x only (its blocks walk the tiles in pairs of neighbours, x fastest).

**numpy arrays** are copied to the GPU (stream-ordered allocations), the kernel runs, the ones
it writes are copied back, and the call waits for the stream: simple and slow, and refused
inside graph capture.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tilec.diagnostics import UNKNOWN_LOC, Location
from tilec.runtime.arguments import (
    MAX_EXTENT,
    SCALAR_CODES,
    ArgumentChecker,
    Arguments,
    DeviceTensor,
    LaunchError,
    flat_view,
    is_dense,
    is_positive,
)
from tilec.runtime.device import (
    GPUError,
    check,
    cuda_modules,
    device_arch,
    dram_bytes_per_clock,
    get_device,
)
from tilec.runtime.split import split_grid
from tilec.runtime.tensormap import TENSORMAP_BYTES, TensorMapEncoder

__all__ = ["Launcher", "stream_handle"]

# CUDA's limits on the grid (x, y, z) and the dynamic shared memory a kernel gets unasked.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
# The blocks of a launch in all: the grouped block order and persistent blocks divide a
# block's (or tile's) linear index in i32 (`tilec.passes.tiling_rewrites.block_divmod`).
MAX_BLOCKS = 2**31 - 1
DEFAULT_SHARED_LIMIT = 48 * 1024
_STREAMS_KEPT = 64  # `CUstream`s a launcher keeps for its fast launches

_POINTER, _EXTENT, _STRIDE, _SCALAR, _WORKSPACE, _COUNTERS, _TENSORMAP = range(7)
# The hidden parameters (docs/abi.md): not arguments, filled per launch -- a split kernel's
# workspace and counters, and the tensor maps of TMA copies (`tilec.runtime.tensormap`).
HIDDEN_KINDS = {"workspace": _WORKSPACE, "counters": _COUNTERS, "tensormap": _TENSORMAP}
_TENSORMAP_ALIGNMENT = 64


class Launcher:
    """Launches kernel `abi.name` of `ptx`. `abi` is a `KernelABI` (or anything with its
    attributes: the runtime reads `name`, `parameters`, `grid`, `block`, `num_threads`,
    `shared_bytes`, `max_extents`, `written`); `specialization` is what the kernel was compiled
    assuming (`tilec.lowering.Specialization`: sets of parameter names `aligned`, `unit`,
    `divisible`). `loc` points error messages at the kernel's source."""

    def __init__(
        self,
        ptx: str,
        abi: Any,
        specialization: Any = None,
        *,
        loc: Location = UNKNOWN_LOC,
        synchronize: bool = False,
    ):
        self.ptx = ptx
        self.abi = abi
        # Wait for every launch and report its error at the call (kernels compiled with
        # TILEC_CHECK_BOUNDS=1: a bad index is a GPUError where the kernel was called).
        self.synchronize = synchronize
        self.name = abi.name
        self.specialization = specialization
        self.loc = loc
        arguments = [p for p in abi.parameters if p.kind not in HIDDEN_KINDS]
        self.checker = ArgumentChecker(abi.name, arguments, loc)
        # A split kernel (`split-reduction`): its split axis, and per GPU (SMs, blocks per SM).
        self.split = getattr(abi, "split", None)
        self._split_axis = len(abi.grid)
        # Thread-block clusters (`KernelABI.cluster`): blocks a cluster along x, y, z.
        self.cluster = tuple(getattr(abi, "cluster", (1, 1, 1)))
        self._check_cluster()
        # A kernel `flatten` ran as one dimension: (F, D1, .., Dk) (`KernelABI.flattened`).
        self._flattened = tuple(getattr(abi, "flattened", ()))
        self._residency: dict[int, tuple[int, int]] = {}
        self._functions: dict[int, Any] = {}  # device ordinal -> CUfunction
        self._streams: dict[int, Any] = {}  # stream handle -> CUstream (`fast_launch`)
        self._keep: list[Any] = []  # cuda.core objects that own the loaded code
        self._lock = threading.Lock()
        self._plan_parameters()
        self._plan_checks()

    # -- set-up ---------------------------------------------------------------------------------

    def _plan_parameters(self) -> None:
        """Where each parameter comes from, and the layout of the parameter buffer: each at an
        offset aligned to its size, as the kernel's `.param` space lays them out."""
        index = {name: i for i, (name, *_rest) in enumerate(self.checker.arguments)}
        self._fields: list[tuple[int, int, int]] = []
        self._scalar_codes: dict[int, str] = {}  # argument index -> its `struct` code
        layout, offsets, offset = "<", [], 0
        # (argument index, encoder) of each tensor-map parameter, in order.
        self._encoders: list[tuple[int, TensorMapEncoder]] = []
        for p in self.abi.parameters:
            if p.kind == "tensormap":
                j = len(self._encoders)
                what = f"argument '{p.argument}' of kernel '{self.name}'"
                encoder = TensorMapEncoder(p.dtype, tuple(p.box), what, getattr(p, "fold", 0))
                self._encoders.append((index[p.argument], encoder))
                padding = -offset % _TENSORMAP_ALIGNMENT
                layout += "x" * padding + f"{TENSORMAP_BYTES}s"
                offset += padding
                offsets.append(offset)
                offset += TENSORMAP_BYTES
                self._fields.append((index[p.argument], _TENSORMAP, j))
                continue
            if p.kind in HIDDEN_KINDS:
                code, kind = "Q", HIDDEN_KINDS[p.kind]
                layout += "x" * (-offset % 8) + code
                offset += -offset % 8
                offsets.append(offset)
                offset += 8
                self._fields.append((-1, kind, 0))
                continue
            if p.kind == "scalar":
                code = SCALAR_CODES[p.dtype]
                kind = _SCALAR
                self._scalar_codes[index[p.argument]] = code
            else:
                code = "Q" if p.kind == "pointer" else "q"
                kind = {"pointer": _POINTER, "extent": _EXTENT, "stride": _STRIDE}[p.kind]
            size = struct.calcsize("<" + code)
            padding = -offset % size
            layout += "x" * padding + code
            offset += padding
            offsets.append(offset)
            offset += size
            self._fields.append((index[p.argument], kind, p.axis or 0))
        # One expression that gathers every parameter from the converted arguments: a loop
        # with a branch per parameter costs a microsecond a launch, this a tenth of that.
        getters = {_POINTER: "v[{i}].pointer", _EXTENT: "v[{i}].shape[{a}]"}
        getters.update({_STRIDE: "v[{i}].strides[{a}]", _SCALAR: "v[{i}]"})
        getters.update({_WORKSPACE: "h[0]", _COUNTERS: "h[1]"})  # h: the hidden addresses
        getters[_TENSORMAP] = "t[{a}]"  # t: the tensor maps' bytes
        items = "".join(getters[k].format(i=i, a=a) + ", " for i, k, a in self._fields)
        self._gather = eval(f"lambda v, h=(0, 0), t=(): ({items})")  # only indices: safe
        self._struct = struct.Struct(layout)
        self._buffer = ctypes.create_string_buffer(max(offset, 1))
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
        self._pointers_address = ctypes.addressof(self._pointers)

    def _plan_checks(self) -> None:
        """The per-launch checks that depend on what the kernel was compiled for."""
        names = [name for name, *_rest in self.checker.arguments]
        dims_of = {name: dims for name, _kind, _dtype, dims in self.checker.arguments}
        self._whole = [
            (dim, limit) for dim, limit in sorted(getattr(self.abi, "max_extents", {}).items())
        ]
        self._promises: list[tuple[int, str, int, str]] = []  # argument, what, axis, parameter
        spec = self.specialization
        if spec is not None:
            for p in self.abi.parameters:
                if p.kind in HIDDEN_KINDS:
                    continue
                i = names.index(p.argument)
                if p.name in spec.aligned:
                    self._promises.append((i, "aligned", 0, p.name))
                if p.name in spec.unit:
                    self._promises.append((i, "unit", p.axis, p.name))
                if p.kind in ("extent", "stride") and spec.multiple(p.name) > 1:
                    self._promises.append((i, p.kind, p.axis, p.name))
                if p.kind == "scalar" and p.name in getattr(spec, "positive", ()):
                    self._promises.append((i, "positive", 0, p.name))
        self._grid = [(axis.dim, axis.tile) for axis in self.abi.grid]
        written = getattr(self.abi, "written", frozenset())
        self._written = {names.index(n) for n in written if n in names}
        self._dims_of = dims_of

    def _check_cluster(self) -> None:
        """Refuse cluster shapes no launch can keep: a persistent grid clustered along y or z
        (its blocks lie along x, a whole number of clusters), or clusters along an axis the grid does not
        tile (a split axis, or one past the grid's), whose count the launcher does not round."""
        if self.cluster == (1, 1, 1):
            return
        if getattr(self.abi, "persistent", False) and self.cluster[1:] != (1, 1):
            raise LaunchError(
                f"kernel '{self.name}' is persistent and runs in clusters of "
                f"{list(self.cluster)} blocks: its blocks walk the tiles along x only",
                self.loc,
                hint="compile it without pipeline's persistent or without its cluster option",
            )
        axes = len(self.abi.grid)
        if any(c != 1 for c in self.cluster[axes:]):
            raise LaunchError(
                f"kernel '{self.name}' asks for clusters of {list(self.cluster)} blocks along "
                f"grid axes x, y, z, but its grid tiles {axes} of them",
                self.loc,
            )

    # -- launching ------------------------------------------------------------------------------

    def __call__(self, *values: Any, stream: Any = None) -> None:
        """Check `values` (one per kernel argument) and launch the kernel on them."""
        self.launch(self.checker.convert(values), stream)

    def grid(self, arguments: Arguments) -> tuple[int, int, int]:
        """The grid for `arguments` (checked against CUDA's limits): `ceil(extent / tile)`
        blocks along each axis, rounded up to a multiple of the kernel's clusters (the PTX's
        `.reqnctapercluster` refuses any other grid; the blocks past the tiles compute
        nothing but take part in their cluster's copies and barriers)."""
        grid = [1, 1, 1]
        for axis, (dim, tile) in enumerate(self._grid):
            extent = arguments.extents.get(dim)
            if extent is None and self._flattened and dim == self._flattened[0]:
                # Launched on the source's tensors: F is the product of their dimensions.
                extent = 1
                for d in self._flattened[1:]:
                    extent *= arguments.extents[d]
            if extent is None:
                raise LaunchError(
                    f"grid dimension {dim} of kernel '{self.name}' is not the extent of any "
                    "tensor argument",
                    self.loc,
                )
            blocks = -(-extent // tile)
            blocks = -(-blocks // self.cluster[axis]) * self.cluster[axis]
            if blocks > GRID_LIMITS[axis]:
                clusters = f" (in clusters of {self.cluster[axis]})" * (self.cluster[axis] > 1)
                raise LaunchError(
                    f"dimension {dim}={extent} needs {blocks} blocks of {tile}{clusters} along "
                    f"grid axis {'xyz'[axis]}, more than CUDA's {GRID_LIMITS[axis]}",
                    self.loc,
                    hint="split the work into several launches",
                )
            grid[axis] = blocks
        if grid[0] * grid[1] * grid[2] > MAX_BLOCKS:
            raise LaunchError(
                f"kernel '{self.name}' needs {grid[0] * grid[1] * grid[2]} blocks in all, more "
                f"than {MAX_BLOCKS}: tilec numbers a launch's blocks (and a persistent "
                "kernel's tiles) in 32 bits",
                self.loc,
                hint="split the work into several launches",
            )
        return grid[0], grid[1], grid[2]

    def check(self, arguments: Arguments) -> None:
        """The checks that depend on how the kernel was compiled: whole dimensions no larger
        than `max_extents`, and the specialization's promises."""
        for dim, limit in self._whole:
            extent = arguments.extents.get(dim, 0)
            if extent > limit:
                raise LaunchError(
                    f"dimension {dim}={extent} is larger than its tile B{dim}={limit}, and "
                    f"kernel '{self.name}' uses {dim} whole",
                    self.loc,
                    hint=f"compile the kernel for a larger extent of {dim} (tilec.max_extent = "
                    f"{limit}); @tilec.jit does so by itself",
                )
        values = self._flat(arguments.values) if self._flattened else arguments.values
        for i, what, axis, parameter in self._promises:
            if what == "positive":
                dtype = self.checker.arguments[i][2]
                if not is_positive(dtype, values[i]):
                    self._broken(
                        i,
                        f"a value finite and above zero, got {_scalar_text(dtype, values[i])}",
                        "compile the kernel for any value of it (@tilec.jit does so by itself "
                        "for a value that is not positive)",
                    )
                continue
            tensor: DeviceTensor = values[i]
            if what == "aligned":
                if tensor.host is None and tensor.pointer % 16:
                    self._broken(i, f"16-byte aligned addresses, got {tensor.pointer:#x}")
            elif what == "unit":
                if tensor.strides[axis] != 1:
                    self._broken(
                        i,
                        f"unit stride in dimension {axis}, got stride {tensor.strides[axis]} "
                        f"(strides {tensor.strides})",
                        "pass a contiguous tensor (x.contiguous()), or compile the kernel for "
                        "this layout (@tilec.jit does so by itself)",
                    )
            else:
                value = (tensor.shape if what == "extent" else tensor.strides)[axis]
                m = self.specialization.multiple(parameter)
                if value % m:
                    self._broken(i, f"{what} {axis} divisible by {m} ({parameter}), got {value}")

    def _broken(self, index: int, what: str, hint: str | None = None) -> None:
        name, kind, dtype, dims = self.checker.arguments[index]
        text = ", ".join("?" if d is None else str(d) for d in dims)
        typed = dtype if kind == "scalar" else f"{dtype}[{text}]"
        raise LaunchError(
            f"argument '{name}' of kernel '{self.name}' ({name}: {typed}): the kernel "
            f"was compiled for {what}",
            self.loc,
            hint=hint or "compile the kernel for these arguments (@tilec.jit does so by itself)",
        )

    def launch(self, arguments: Arguments, stream: Any = None, *, matched: bool = False) -> None:
        """Launch on checked `arguments` (`self.checker.convert(values)`). Raises
        `LaunchError` for arguments the kernel cannot take, before queueing anything.
        `matched`: the caller has chosen this kernel for these arguments' specialization and
        whole extents (as `@tilec.jit` does), so `check` has nothing to find."""
        if not matched:
            self.check(arguments)
        grid = self.grid(arguments)
        for i in self._written if arguments.host_tensors else ():
            tensor = arguments.values[i]
            if tensor.host is not None and not tensor.host.flags.writeable:
                name = self.checker.arguments[i][0]
                raise LaunchError(
                    f"argument '{name}' of kernel '{self.name}': the kernel writes it, but the "
                    "array is read-only",
                    self.loc,
                )
        ordinal = arguments.device
        if ordinal is None:
            ordinal = get_device().device_id
        function = self._functions.get(ordinal)
        if function is None:
            function = self._load(ordinal)
        if stream is not None:
            handle = stream_handle(stream)
        elif arguments.framework_stream is not None:
            handle = arguments.framework_stream(ordinal)
        else:
            handle = 0
        if 0 in grid:
            return  # an empty tensor: nothing to compute (CUDA refuses an empty grid)
        hidden = (0, 0)
        if self.split is not None:
            grid, hidden = self.split_launch(grid, arguments.extents, ordinal, handle)
        elif getattr(self.abi, "persistent", False):
            grid = self.persistent_grid(grid, ordinal)
        if arguments.host_tensors:
            self._launch_with_copies(function, grid, arguments, handle, hidden)
        else:
            self._launch(function, grid, arguments.values, handle, ordinal, hidden)
        if self.synchronize:
            _, driver = cuda_modules()
            (err,) = driver.cuStreamSynchronize(handle)
            check(driver, err, f"running kernel '{self.name}'")

    def split_launch(
        self, grid: tuple[int, int, int], extents: dict[str, int], ordinal: int, stream: int
    ) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """For a split kernel: the grid with its split axis, and the workspace and counters
        addresses (`tilec.runtime.split`: S from the SMs and this kernel's occupancy)."""
        residency = self._residency.get(ordinal)
        if residency is None:
            residency = self._residency[ordinal] = self._measure_residency(ordinal)
        rate = dram_bytes_per_clock(ordinal) if self.split.dot_bm else None
        return split_grid(
            self.split, self._split_axis, grid, extents, residency, ordinal, stream, rate
        )

    def persistent_grid(self, grid: tuple[int, int, int], ordinal: int) -> tuple[int, int, int]:
        """For a persistent kernel: as many blocks along x as GPU `ordinal` holds at once (at
        most one a tile), which walk the `grid`'s tiles (passes/pipeline_persistent.py)."""
        residency = self._residency.get(ordinal)
        if residency is None:
            residency = self._residency[ordinal] = self._measure_residency(ordinal)
        tiles = grid[0] * grid[1] * grid[2]
        blocks = min(tiles, residency[0] * residency[1])
        c = self.cluster[0]  # whole clusters (the tiles, rounded by `grid`, are)
        return (max(blocks // c, 1) * c, 1, 1)

    def _measure_residency(self, ordinal: int) -> tuple[int, int]:
        """(SMs, blocks of this kernel an SM holds) on GPU `ordinal`."""
        _, driver = cuda_modules()
        err, device = driver.cuDeviceGet(ordinal)
        check(driver, err, "cuDeviceGet")
        err, sms = driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device
        )
        check(driver, err, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")
        err, blocks = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self._functions[ordinal], self.abi.num_threads, self.abi.shared_bytes
        )
        check(driver, err, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return int(sms), max(int(blocks), 1)

    def parameters(self, values: list, hidden: tuple = (0, 0)) -> tuple[int | float, ...]:
        """The value of every kernel parameter, in order, for converted argument `values`
        (and a split kernel's workspace and counters addresses, `hidden`)."""
        return self._gather(values, hidden, self._tensormaps(values))

    def _tensormaps(self, values: list) -> tuple[bytes, ...]:
        """The bytes of each tensor-map parameter for converted argument `values`."""
        return tuple(encode(values[i]) for i, encode in self._encoders)

    def _flat(self, values: list) -> list:
        """`values` as a flattened kernel takes them (`KernelABI.flattened`): each tensor
        viewed as one dimension of its elements in order -- refused where it is not dense
        (row-major, no gaps), which that view needs. Scalars, and tensors of one dimension
        already (the kernel's own signature), as they are."""
        out = []
        for i, v in enumerate(values):
            if type(v) is DeviceTensor and len(v.shape) != 1:
                flat = flat_view(v)
                if not is_dense(v) or flat.shape[0] > MAX_EXTENT:  # (32-bit bounds)
                    what = f"at most {MAX_EXTENT} elements, got {flat.shape[0]}"
                    if not is_dense(v):
                        what = f"a dense tensor (row-major, no gaps), got strides {v.strides}"
                    self._broken(
                        i,
                        f"{what}: it runs as one dimension {self._flattened[0]}",
                        "pass a contiguous tensor; @tilec.jit compiles the kernel on its own "
                        "grid for other tensors by itself",
                    )
                v = flat
            out.append(v)
        return out

    def _launch(
        self, function: Any, grid: tuple, values: list, stream: int, ordinal: int, hidden=(0, 0)
    ):
        if self._flattened:
            values = self._flat(values)
        self.send(function, grid, self._pack_values, (values, hidden), stream, ordinal)

    def _pack_values(self, source: tuple) -> None:
        values, hidden = source
        self._struct.pack_into(
            self._buffer, 0, *self._gather(values, hidden, self._tensormaps(values))
        )

    def send(self, function: Any, grid: tuple, pack: Any, source: Any, stream: int, ordinal: int):
        """Fill the parameter buffer with `pack(source)` and queue the kernel: no checks left
        (the caller made them). `pack` may raise before anything is queued."""
        _, driver = cuda_modules()
        block = self.abi.num_threads
        shared = self.abi.shared_bytes
        pointers = self._pointers_address
        with self._lock:  # the buffer is reused; the driver copies it during the call
            pack(source)
            (err,) = driver.cuLaunchKernel(
                function, *grid, block, 1, 1, shared, stream, pointers, 0
            )
            if err:  # CUDA_SUCCESS is 0
                self._launch_failed(err, function, grid, stream, ordinal, pointers)

    def _launch_failed(
        self, err: Any, function: Any, grid: tuple, stream: Any, ordinal: int, pointers: int
    ) -> None:
        """After `cuLaunchKernel` returned `err` with the parameters at `pointers` (still
        there): launch again where the thread only lacked a context, else raise `GPUError`."""
        _, driver = cuda_modules()
        if err == driver.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            # A thread that never used this GPU has no current context: give it one.
            get_device(ordinal).set_current()
            block, shared = self.abi.num_threads, self.abi.shared_bytes
            (err,) = driver.cuLaunchKernel(
                function, *grid, block, 1, 1, shared, stream, pointers, 0
            )
        if err != driver.CUresult.CUDA_SUCCESS:
            check(driver, err, f"launching kernel '{self.name}' (cuLaunchKernel)")

    def fast_launch(
        self, values: list, converters: dict[int, Any], grid: tuple, ordinal: int
    ) -> Callable[..., None]:
        """A function `launch(v0, ..., vN, stream)` that queues this kernel for calls whose
        tensors have exactly the extents and strides of `values` (the converted, checked
        arguments of an earlier call) and whose grid is `grid`, on GPU `ordinal`. `vI` is
        argument I's address when it is a tensor, its Python value when it is a scalar
        (converted by `converters[I]`, which may raise `_Problem` before anything is queued;
        None: packed as it is). `@tilec.jit`'s fast path, where every attribute lookup and
        call shows in the host time of a launch, so it is written out for this case:

        * the parameters live in storage of its own: the extents and strides, written once,
          and a buffer for the addresses and scalars, one `struct.pack_into` a call; the grid,
          block and the address of the parameter array are constants of its text;
        * it takes no lock: one thread may call it at a time (`@tilec.jit` keeps one per
          thread), and the driver has copied the parameters when `cuLaunchKernel` returns;
        * the stream goes to `cuLaunchKernel` as a `CUstream` made once per handle: given an
          int, cuda.bindings makes a new `CUstream` on every call, which costs more than
          finding the one made before. (cuda.bindings' own checks are a few hundred ns of a
          launch's several µs, and cheaper than calling libcuda through ctypes: see
          docs/runtime.md.)

        A split kernel's grid and workspace come from `split_launch` on every call (the
        stream's workspace may have grown since); a persistent kernel's grid is the blocks the
        GPU holds at once (`persistent_grid`), fixed here."""
        arity = len(self.checker.arguments)
        inputs = ", ".join(f"v{i}" for i in range(arity))
        if self._flattened:  # the extents and strides below are the one-dimensional views'
            values = self._flat(values)
        if 0 in grid:  # an empty tensor: nothing to compute (CUDA refuses an empty grid)
            return eval(f"lambda {inputs}, stream: None")
        # `grid` (from `grid`) is whole clusters already; rounding again costs nothing here
        # and keeps a grid made elsewhere launchable.
        grid = tuple(-(-int(n) // c) * c for n, c in zip(grid, self.cluster))
        if getattr(self.abi, "persistent", False):  # the blocks the GPU holds walk the tiles
            grid = self.persistent_grid(grid, ordinal)
        _, driver = cuda_modules()
        streams, make_stream = self._streams, driver.CUstream

        def as_stream(handle: int) -> Any:
            # A handle is a value, not an owner: an entry for a destroyed stream is never
            # wrong, only unused; the table starts again rather than grow without bound.
            if len(streams) >= _STREAMS_KEPT:
                streams.clear()
            stream = streams[handle] = make_stream(handle)
            return stream

        namespace: dict[str, Any] = {
            "launch_kernel": driver.cuLaunchKernel,
            "function": self._functions[ordinal],
            "failed": self._launch_failed,
            "streams": streams,
            "as_stream": as_stream,
        }
        # Two buffers, each field at an offset aligned to its size: what changes per call
        # (addresses, scalars) and what does not (extents, strides).
        layouts, sizes, places, constants, terms = ["<", "<"], [0, 0], [], [], []
        for i, kind, axis in self._fields:
            if kind in (_WORKSPACE, _COUNTERS):
                code, changes, term = "Q", True, f"hidden[{kind - _WORKSPACE}]"
            elif kind == _TENSORMAP:  # by address: the extents and strides are fixed here
                encoder = self._encoders[axis][1]
                namespace[f"tensormap{axis}"] = encoder.for_layout(
                    tuple(values[i].shape), tuple(values[i].strides)
                )
                code, changes, term = f"{TENSORMAP_BYTES}s", True, f"tensormap{axis}(v{i})"
            elif kind == _POINTER:
                code, changes, term = "Q", True, f"v{i}"
            elif kind == _SCALAR:
                code, changes, term = self._scalar_codes[i], True, f"v{i}"
                if converters.get(i) is not None:
                    namespace[f"convert{i}"] = converters[i]
                    term = f"convert{i}(v{i})"
            else:
                code, changes = "q", False
                dims = values[i].shape if kind == _EXTENT else values[i].strides
                constants.append(int(dims[axis]))
            which = 0 if changes else 1
            size = struct.calcsize("<" + code)
            padding = -sizes[which] % size
            layouts[which] += "x" * padding + code
            places.append((which, sizes[which] + padding))
            sizes[which] += padding + size
            if changes:
                terms.append(term)
        buffers = [ctypes.create_string_buffer(max(n, 1)) for n in sizes]
        struct.pack_into(layouts[1], buffers[1], 0, *constants)
        bases = [ctypes.addressof(b) for b in buffers]
        pointers = (ctypes.c_void_p * max(len(places), 1))(*[bases[w] + o for w, o in places])
        namespace["keep"] = (buffers, pointers)  # alive as long as the function
        namespace["pack_into"] = struct.Struct(layouts[0]).pack_into
        namespace["buffer"] = buffers[0]
        address = ctypes.addressof(pointers)
        x, y, z = (int(n) for n in grid)
        where = f"{x}, {y}, {z}"
        split = ""
        if self.split is not None:  # the grid and the hidden addresses, per call
            namespace["split_launch"] = self.split_launch
            namespace["extents"] = {
                d: values[i].shape[axis]
                for i, (_name, kind, _dtype, dims) in enumerate(self.checker.arguments)
                if kind != "scalar"
                for axis, d in enumerate(dims)
                if isinstance(d, str)
            }
            split = f"    grid, hidden = split_launch(({where}), extents, {int(ordinal)}, stream)\n"
            where = "grid[0], grid[1], grid[2]"
        arguments = (
            f"function, {where}, {int(self.abi.num_threads)}, 1, 1, "
            f"{int(self.abi.shared_bytes)}, handle, {address}, 0"
        )
        # The text holds only indices, integers and the names of `namespace`: safe to run.
        text = (
            f"def launch({inputs}, stream):\n"
            f"{split}"
            f"    pack_into(buffer, 0, {', '.join(terms)})\n"
            "    handle = streams.get(stream)\n"
            "    if handle is None:\n"
            "        handle = as_stream(stream)\n"
            f"    (err,) = launch_kernel({arguments})\n"
            "    if err:  # CUDA_SUCCESS is 0\n"
            f"        failed(err, function, ({where}), handle, {int(ordinal)}, {address})\n"
        )
        exec(compile(text, f"<tilec launch of {self.name}>", "exec"), namespace)
        return namespace["launch"]

    def _launch_with_copies(
        self, function: Any, grid: tuple, arguments: Arguments, stream: int, hidden=(0, 0)
    ):
        _, driver = cuda_modules()
        ordinal = arguments.device if arguments.device is not None else get_device().device_id
        err, status = driver.cuStreamIsCapturing(stream)
        check(driver, err, "cuStreamIsCapturing")
        if status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            raise LaunchError(
                f"kernel '{self.name}' was given numpy arrays during CUDA graph capture: they "
                "are copied to the GPU and back, which a graph cannot do",
                self.loc,
                hint="pass GPU tensors (torch, CuPy) when capturing a graph",
            )
        copies: list[tuple[DeviceTensor, np.ndarray, Any]] = []
        written = {id(arguments.values[i]) for i in self._written}
        try:
            for tensor in arguments.host_tensors:
                # The caller's array when it is contiguous, else a contiguous copy of it.
                data = np.ascontiguousarray(tensor.host)
                err, pointer = driver.cuMemAllocAsync(max(data.nbytes, 1), stream)
                check(driver, err, "cuMemAllocAsync")
                copies.append((tensor, data, pointer))
                tensor.pointer = int(pointer)
                if data.nbytes:
                    (err,) = driver.cuMemcpyHtoDAsync(
                        pointer, data.ctypes.data, data.nbytes, stream
                    )
                    check(driver, err, "cuMemcpyHtoDAsync")
            self._launch(function, grid, arguments.values, stream, ordinal, hidden)
            for tensor, data, pointer in copies:
                if id(tensor) in written and data.nbytes:
                    (err,) = driver.cuMemcpyDtoHAsync(
                        data.ctypes.data, pointer, data.nbytes, stream
                    )
                    check(driver, err, "cuMemcpyDtoHAsync")
        finally:
            for _tensor, _data, pointer in copies:
                driver.cuMemFreeAsync(pointer, stream)
            (err,) = driver.cuStreamSynchronize(stream)
        check(driver, err, f"running kernel '{self.name}'")
        for tensor, data, _pointer in copies:
            if id(tensor) in written and data is not tensor.host:
                tensor.host[...] = data

    # -- loading --------------------------------------------------------------------------------

    def _load(self, ordinal: int) -> Any:
        core, driver = cuda_modules()
        device = get_device(ordinal)
        device.set_current()
        arch = _cubin_arch(self.ptx, device, self.name)
        options = core.ProgramOptions(arch=arch, name=self.name)
        try:
            program = core.Program(self.ptx, "ptx", options)
            cache = _program_cache()
            code = program.compile("cubin", cache=cache) if cache else program.compile("cubin")
            kernel = code.get_kernel(self.name)
        except Exception as e:  # cuda.core raises several kinds; the message is what matters
            raise GPUError(
                f"the PTX of kernel '{self.name}' could not be compiled for {arch}: {e}"
            ) from None
        err, function = driver.cuKernelGetFunction(kernel.handle)
        check(driver, err, "cuKernelGetFunction")
        self._check_resources(driver, device, function)
        self._keep.append((code, kernel))
        self._functions[ordinal] = function
        return function

    def _check_resources(self, driver: Any, device: Any, function: Any) -> None:
        attributes = driver.CUfunction_attribute
        shared = self.abi.shared_bytes
        limit = device.properties.max_shared_memory_per_block_optin
        if shared > limit:
            raise LaunchError(
                f"kernel '{self.name}' needs {shared} bytes of shared memory per block; "
                f"{device.name} has at most {limit}",
                self.loc,
                hint="use smaller tiles (tile={...}) or fewer warps",
            )
        if shared > DEFAULT_SHARED_LIMIT:
            (err,) = driver.cuFuncSetAttribute(
                function, attributes.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared
            )
            check(driver, err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        err, most = driver.cuFuncGetAttribute(
            attributes.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function
        )
        check(driver, err, "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)")
        if most < self.abi.num_threads:
            err, registers = driver.cuFuncGetAttribute(
                attributes.CU_FUNC_ATTRIBUTE_NUM_REGS, function
            )
            check(driver, err, "cuFuncGetAttribute(NUM_REGS)")
            raise LaunchError(
                f"kernel '{self.name}' uses {registers} registers per thread: {device.name} can "
                f"run at most {most} such threads in a block, and the kernel needs "
                f"{self.abi.num_threads}",
                self.loc,
                hint="use smaller tiles (tile={...}) or fewer warps (warps=...)",
            )


def _scalar_text(dtype: str, value: Any) -> str:
    """A converted scalar (`tilec.runtime.arguments`: bf16 as its bits) as a number, and as
    the parameter holds it where that differs (an f32 of 1e-50 is 0)."""
    if dtype == "bf16":
        return repr(struct.unpack("<f", struct.pack("<I", int(value) << 16))[0])
    text = repr(float(value))
    if dtype == "f32":
        try:
            held = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            held = float("inf")
        if held != value and held == held:
            text += f" ({held!r} as an f32)"
    return text


def stream_handle(stream: Any) -> int:
    """The `CUstream` handle of `stream`: an int, an object with `__cuda_stream__` (cuda.core,
    recent torch), a torch stream (`cuda_stream`), a CuPy stream (`ptr`)."""
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if value is not None:
            return int(value)
    raise TypeError(f"not a CUDA stream: {type(stream).__name__}")


def _cubin_arch(ptx: str, device: Any, kernel: str) -> str:
    """The architecture to compile `ptx` for on `device`: the device's own, with the `a`
    suffix when the PTX uses architecture-specific features."""
    target = next(
        (line.split()[1].rstrip(",") for line in ptx.splitlines() if line.startswith(".target")),
        "sm_80",
    )
    major, minor = device.compute_capability
    own = f"sm_{major}{minor}"
    wanted = int(target[3:].rstrip("a"))
    if wanted > major * 10 + minor or (target.endswith("a") and target[:-1] != own):
        raise GPUError(
            f"kernel '{kernel}' was compiled for {target}, which {device.name} ({own}) cannot "
            f"run; compile it for {device_arch(device)}"
        )
    return own + ("a" if target.endswith("a") else "")


_CACHE: list[Any] = []


def _program_cache() -> Any:
    """cuda.core's on-disk cubin cache in tilec's cache directory (None: caching is off)."""
    if not _CACHE:
        from tilec.cache import cache_dir

        directory = cache_dir()
        cache = None
        if directory is not None:
            from cuda.core.utils import FileStreamProgramCache

            try:
                cache = FileStreamProgramCache(directory / "cubin", max_size_bytes=2**30)
            except OSError:
                cache = None
        _CACHE.append(cache)
    return _CACHE[0]
