"""`@tilec.jit`'s fast path: a launch function per argument signature, written out for one
kernel's arguments (`_fast_path`), remembered per thread (`_ThreadLaunches`).

A call whose signature (tensor dtypes, shapes, strides, devices, alignment; scalar types and,
where the kernel is specialized on it, a scalar's sign) was seen before skips every check and
the choice of compiled kernel (`tilec.jit.JitFunction.__call__`, `_remember`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilec.runtime.arguments import _Problem, _torch_stream
from tilec.runtime.launcher import stream_handle

__all__ = ["_FAST_ENTRIES", "_ThreadLaunches", "_fast_path"]

_FAST_ENTRIES = 256  # signatures remembered per kernel


class _ThreadLaunches(threading.local):
    """`launches`: this thread's signature -> launch function (`JitFunction._remember`)."""

    def __init__(self) -> None:
        self.launches: dict[tuple, Callable[..., None]] = {}


def _fast_path(
    kinds: Sequence[str],
    per_thread: _ThreadLaunches,
    tensor_types: tuple[type, ...],
    signs: Mapping[int, tuple[float, float]] | None = None,
) -> tuple[Callable[[tuple, Any], bool], Callable[[tuple], tuple]]:
    """`(fast_call, signature)` for a kernel whose arguments are of `kinds` ("scalar", or a
    tensor), written out for exactly those arguments: straight-line code, no loop.

    `signature(args)` is what the checks and the choice of compiled kernel depend on, for torch
    tensors and Python scalars: per tensor its dtype, shape, strides, device and address modulo
    16 (alignment to its element and to 16 bytes); per scalar its type, and for scalar i of
    `signs` whether it lies in the open interval `signs[i]` (`POSITIVE_RANGE`: whether its
    parameter's type holds it finite and above zero, `Specialization.positive`). Two calls with one
    signature pass the same checks and launch the same kernel with the same grid; only the
    addresses, the scalars' values and the stream differ.

    `fast_call(args, stream)` looks `signature(args)` up in this thread's `launches` and, when
    found, calls that launch (`Launcher.fast_launch`) with the addresses and scalars on `stream`
    (else torch's current stream on the tensors' GPU, looked up on every call: the caller may
    have switched streams, or be capturing a graph, since), and says True. False: nothing was
    queued, and the full path must run (another count of arguments, a tensor not exactly of
    `tensor_types` (`torch.Tensor`, `nn.Parameter`), an unknown signature, a scalar out of
    range). `signature` is only asked of arguments that `fast_call` would look up
    (`_remember` checks them first)."""
    import torch

    names = [f"a{i}" for i in range(len(kinds))]
    tensors = [i for i, kind in enumerate(kinds) if kind != "scalar"]
    first = tensors[0]
    key, values = [], []
    signs = signs or {}
    for i, kind in enumerate(kinds):
        if kind == "scalar":
            key.append(f"type(a{i})")
            if i in signs:
                key.append(f"low{i} < a{i} < high{i}")
            values.append(f"a{i}")
        else:
            device = "device" if i == first else f"a{i}.get_device()"
            key += [f"a{i}.dtype", f"a{i}.shape", f"a{i}.stride()", device, f"p{i} & 15"]
            values.append(f"p{i}")
    not_tensors = " or ".join(f"type(a{i}) not in Tensors" for i in tensors)
    addresses = "".join(f"    p{i} = a{i}.data_ptr()\n" for i in tensors)
    head = (
        f"    try:\n        {', '.join(names)}, = args\n"
        "    except ValueError:\n        return False\n"
        f"    if {not_tensors}:\n        return False\n"
        f"{addresses}    device = a{first}.get_device()\n"
    )
    text = (
        f"def signature(args):\n{head}    return ({', '.join(key)},)\n\n"
        f"def fast_call(args, stream):\n{head}"
        f"    launch = per_thread.launches.get(({', '.join(key)},))\n"
        "    if launch is None:\n        return False\n"
        "    if stream is None:\n        stream = current_stream(device)\n"
        "    else:\n        stream = stream_handle(stream)\n"
        f"    try:\n        launch({', '.join(values)}, stream)\n"
        "    except Problem:\n        return False  # nothing was queued; the full path says why\n"
        "    return True\n"
    )
    # The raw handle, without making a torch.cuda.Stream object (a few µs a launch).
    current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _torch_stream
    namespace = {
        "Tensors": tensor_types,
        "per_thread": per_thread,
        "current_stream": current_stream,
        "stream_handle": stream_handle,
        "Problem": _Problem,
    }
    for i, (low, high) in signs.items():
        namespace[f"low{i}"], namespace[f"high{i}"] = low, high
    # The text holds only indices and the names of `namespace`: safe to run.
    exec(compile(text, "<tilec fast path>", "exec"), namespace)
    return namespace["fast_call"], namespace["signature"]
