"""A direct call of a `@tilec.jit` kernel while `torch.compile` traces it: one call of the
operator `tilec::launch` in the graph (docs/torch.md).

`JitFunction.__call__` comes here when Dynamo is compiling (so this module, and with it
`torch._dynamo`, is imported only then: importing `torch._dynamo` has side effects, such as
importing Triton, that a plain `import tilec` must not have). The tensors the kernel stores
into are the operator's mutated arguments, the ones it only loads from and the scalars plain
ones; the kernel is found again by a key that `torch.compiler.assume_constant_result` makes a
constant of the graph, so its registration and the walk of its IR run outside the traced code.
"""

from __future__ import annotations

from typing import Any

import torch

from tilec.diagnostics import TileError
from tilec.torch import OpError, _roles

__all__ = ["traced_call"]


_LAUNCH_SCHEMA = "(int kernel, Tensor[] read, Tensor(a!)[] written, Scalar[] scalars) -> ()"
# kernel key -> (the JitFunction, the role of each parameter: "r" read, "w" written, "s"
# scalar, and each parameter's name)
_TRACED: dict[int, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}


def _launch(kernel: int, read: list, written: list, scalars: list) -> None:
    """`tilec::launch`: run traced kernel `kernel` on its arguments, regrouped by role."""
    function, roles, _ = _TRACED[kernel]
    groups = {"r": iter(read), "w": iter(written), "s": iter(scalars)}
    arguments = [next(groups[role]) for role in roles]
    tensors = [*read, *written]
    try:
        if tensors and all(t.device.type == "cpu" for t in tensors):
            from tilec.interp import run_kernel

            run_kernel(function.instance_for(arguments).compiled, None, arguments)
        else:
            function(*arguments)
    except TileError as e:
        raise OpError(e.render().rstrip()) from None


@torch.compiler.assume_constant_result
def _traced_plan(trace_key: int) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """The key, parameter roles and parameter names for `tilec::launch` of the `JitFunction`
    whose `_trace_key` is `trace_key` (an int: Dynamo passes no object to such a function),
    registering both on first use. Run eagerly while Dynamo traces (its result is a constant
    of the graph), so the registration and the IR walk happen outside the traced code."""
    from tilec.jit import traced_function

    function = traced_function(trace_key)
    key = getattr(function, "_tilec_torch_key", None)
    if key is None:
        if not hasattr(torch.ops.tilec, "launch"):
            launch = torch.library.custom_op(
                "tilec::launch", mutates_args=("written",), schema=_LAUNCH_SCHEMA
            )(_launch)
            launch.register_fake(lambda kernel, read, written, scalars: None)
        params = _roles(function)
        roles = tuple(
            "s" if p.role == "scalar" else "w" if p.role in ("output", "mutated") else "r"
            for p in params
        )
        key = len(_TRACED)
        _TRACED[key] = (function, roles, tuple(p.name for p in params))
        function._tilec_torch_key = key
    _, roles, names = _TRACED[key]
    return key, roles, names


def traced_call(trace_key: int, args: tuple, kwargs: dict[str, Any]) -> None:
    """What `JitFunction.__call__` does while torch.compile traces it: one `tilec::launch`
    with the arguments (by position or name) grouped by role."""
    key, roles, names = _traced_plan(trace_key)
    by_name = dict(zip(names, args))
    for name, value in kwargs.items():
        by_name[name] = value
    if len(args) > len(names) or len(by_name) != len(names) or any(n not in by_name for n in names):
        from tilec.jit import traced_function

        function = traced_function(trace_key)
        raise OpError(
            TileError(
                f"kernel '{function.name}' takes the arguments {', '.join(names)}",
                function.loc,
            ).render()
        )
    values = [by_name[n] for n in names]
    read = [v for v, role in zip(values, roles) if role == "r"]
    written = [v for v, role in zip(values, roles) if role == "w"]
    scalars = [v for v, role in zip(values, roles) if role == "s"]
    torch.ops.tilec.launch(key, read, written, scalars)
