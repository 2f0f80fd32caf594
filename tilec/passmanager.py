"""Pass infrastructure: the `Pass` base class, the registry, pipeline text, instrumentation and
the remarks channel.

A pass is a small class:

    @register_pass
    class Pipeline(Pass):
        '''Software-pipelines loops that stream tiles from global memory.

        What it decides, what it assumes...'''
        name = "pipeline"
        summary = "Multi-buffer global->shared copies in loops"

        @dataclass
        class Options:
            stages: int = option(3, "number of buffers per streamed operand")

        def run(self, module, ctx):
            ctx.remark(op, "3 stages: 96 KiB of shared memory fits 2 blocks per SM")

A pipeline is written `canonicalize,cse,pipeline{stages=3}`; options inside braces are
separated by spaces or commas, and a value that holds either is quoted
(`specialize{tiles="BM=64,BN=32"}`). `PassManager` runs one with the instrumentation that
`tilec opt` exposes: IR printed before/after passes, numbered dumps, verification after each
pass, per-pass timing, and stopping after a pass.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tempfile
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

from tilec.diagnostics import (
    UNKNOWN_LOC,
    InternalCompilerError,
    Location,
    TileError,
    register_source,
)
from tilec.ir.core import Operation
from tilec.ir.printer import print_op
from tilec.ir.verifier import VerifyError, verify

__all__ = [
    "Instrumentation",
    "Pass",
    "PassContext",
    "PassManager",
    "Remark",
    "option",
    "parse_pipeline",
    "register_pass",
    "registered_passes",
]


def option(default: Any, help: str) -> Any:
    """Declare a pass option: a typed dataclass field with a default and a one-line help."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Remark:
    """A decision a pass made, with its reason, attached to the op it concerns."""

    pass_name: str
    message: str
    op: Operation | None = field(compare=False, default=None)
    loc: Location = UNKNOWN_LOC

    def __str__(self) -> str:
        return f"remark[{self.pass_name}]: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """`{"pass", "op" (its name, or null), "loc" ({"file", "line", "col"} or null when
        unknown), "message"}`."""
        loc = self.loc
        return {
            "pass": self.pass_name,
            "op": self.op.name if self.op is not None else None,
            "loc": {"file": loc.file, "line": loc.line, "col": loc.col} if loc.known else None,
            "message": self.message,
        }


class PassContext:
    """What a running pass can reach: its remarks channel (and later, device limits)."""

    def __init__(self) -> None:
        self.remarks: list[Remark] = []
        self.current_pass = ""

    def remark(self, op: Operation | None, message: str) -> None:
        """Record a decision (and why) on `op`."""
        self.remarks.append(
            Remark(self.current_pass, message, op, op.loc if op is not None else UNKNOWN_LOC)
        )

    def remarks_for(self, op: Operation) -> list[str]:
        return [str(r) for r in self.remarks if r.op is op]

    def remark_lookup(self) -> Callable[[Operation], Sequence[str]]:
        by_op: dict[int, list[str]] = {}
        for r in self.remarks:
            if r.op is not None:
                by_op.setdefault(id(r.op), []).append(str(r))
        return lambda op: by_op.get(id(op), ())


class Pass:
    """Base of all passes. Subclasses set `name`, `summary`, optionally `Options` (a
    dataclass whose fields are declared with `option`), and implement `run`."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # Whether the pass keeps every computed bit: translation validation (running the kernel in
    # the interpreter before and after the pass) then demands identical results. A pass that
    # may reorder floating-point arithmetic sets this to False and is checked with a tolerance.
    exact: ClassVar[bool] = True

    @dataclass
    class Options:
        pass

    def __init__(self, options: Any = None):
        self.options = options if options is not None else self.Options()

    def run(self, module: Operation, ctx: PassContext) -> None:
        raise NotImplementedError

    def pipeline_text(self) -> str:
        """This pass as pipeline text, with the options that differ from their defaults."""
        changed = [
            f"{f.name}={_format_option(getattr(self.options, f.name))}"
            for f in dataclasses.fields(self.options)
            if getattr(self.options, f.name) != f.default
        ]
        return self.name + ("{" + " ".join(changed) + "}" if changed else "")

    @classmethod
    def describe(cls) -> str:
        """Summary, description and options, as `tilec passes` prints them."""
        lines = [f"{cls.name}: {cls.summary}"]
        doc = (cls.__doc__ or "").strip()
        if doc:
            body = [ln.strip() for ln in doc.splitlines()[1:]]
            text = "\n".join(body).strip()
            if text:
                lines += ["    " + ln if ln else "" for ln in text.splitlines()]
        for f in dataclasses.fields(cls.Options):
            lines.append(
                f"    option {f.name}: {_type_name(cls, f)} = {_format_option(f.default)}"
                f"  -- {f.metadata.get('help', '')}"
            )
        return "\n".join(lines)


def _format_option(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    text = str(v)
    # A value with separators in it is quoted, as the pipeline parser reads it back; so is the
    # empty string, which would otherwise print as nothing at all.
    quoted = isinstance(v, str) and (not text or any(c in text for c in " ,{}"))
    return f'"{text}"' if quoted else text


def _option_type(cls: type[Pass], f: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(cls.Options)
    return hints.get(f.name, str)


def _type_name(cls: type[Pass], f: dataclasses.Field) -> str:
    t = _option_type(cls, f)
    if typing.get_origin(t) is typing.Literal:
        return "|".join(map(str, typing.get_args(t)))
    return getattr(t, "__name__", str(t))


_PASSES: dict[str, type[Pass]] = {}


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: make a pass available to pipelines and `tilec passes`."""
    if not cls.name or not cls.summary or not (cls.__doc__ or "").strip():
        raise TypeError(f"pass {cls.__name__} needs a name, a summary and a docstring")
    if cls.name in _PASSES and _PASSES[cls.name] is not cls:
        raise ValueError(f"pass '{cls.name}' is registered twice")
    _PASSES[cls.name] = cls
    return cls


def registered_passes() -> dict[str, type[Pass]]:
    import tilec.passes  # noqa: F401  (registers the passes)

    return dict(sorted(_PASSES.items()))


# ---------------------------------------------------------------------------------------------
# Pipeline text

_PIPELINE_SOURCE = "<pipeline>"


def parse_pipeline(text: str) -> list[Pass]:
    """`canonicalize,cse,pipeline{stages=3}` -> pass instances. Errors point into `text`."""
    passes = registered_passes()
    register_source(_PIPELINE_SOURCE, text)

    def err(message: str, pos: int, hint: str | None = None) -> TileError:
        return TileError(message, Location(_PIPELINE_SOURCE, 1, pos + 1), hint=hint)

    result: list[Pass] = []
    pos = 0
    n = len(text)
    while pos < n:
        while pos < n and text[pos] in " ,":
            pos += 1
        if pos >= n:
            break
        start = pos
        while pos < n and (text[pos].isalnum() or text[pos] in "-_"):
            pos += 1
        name = text[start:pos]
        if not name:
            raise err(f"expected a pass name, found '{text[pos]}'", pos)
        cls = passes.get(name)
        if cls is None:
            close = difflib.get_close_matches(name, list(passes), n=1)
            hint = (
                (f"did you mean '{close[0]}'? " if close else "") + "passes: " + ", ".join(passes)
            )
            raise err(f"unknown pass '{name}'", start, hint)
        values: dict[str, Any] = {}
        if pos < n and text[pos] == "{":
            close_at = _find_closing_brace(text, pos)
            if close_at == -1:
                raise err(f"'{{' after '{name}' is never closed", pos)
            values = _parse_options(cls, text, pos + 1, close_at, err)
            pos = close_at + 1
        if pos < n and text[pos] not in " ,":
            raise err(f"expected ',' between passes, found '{text[pos]}'", pos)
        result.append(cls(cls.Options(**values)))
    return result


def _find_closing_brace(text: str, open_at: int) -> int:
    """The index of the `}` that closes the options opened at `open_at` (-1: none), skipping
    quoted values."""
    pos = open_at + 1
    while pos < len(text):
        if text[pos] == '"':
            closing = text.find('"', pos + 1)
            if closing == -1:
                return -1
            pos = closing
        elif text[pos] == "}":
            return pos
        pos += 1
    return -1


def _parse_options(cls: type[Pass], text: str, start: int, end: int, err) -> dict[str, Any]:
    fields_by_name = {f.name: f for f in dataclasses.fields(cls.Options)}
    values: dict[str, Any] = {}
    pos = start
    while pos < end:
        while pos < end and text[pos] in " ,":
            pos += 1
        if pos >= end:
            break
        item_end = pos
        while item_end < end and text[item_end] not in " ,":
            if text[item_end] == '"':  # a quoted value may hold separators: tiles="BM=64,BN=64"
                closing = text.find('"', item_end + 1, end)
                if closing == -1:
                    raise err("'\"' in an option value is never closed", item_end)
                item_end = closing
            item_end += 1
        item = text[pos:item_end]
        key, eq, raw = item.partition("=")
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            raw = raw[1:-1]
        f = fields_by_name.get(key)
        if f is None:
            valid = (
                ", ".join(f"{k} ({_type_name(cls, v)})" for k, v in fields_by_name.items())
                or "none"
            )
            raise err(
                f"pass '{cls.name}' has no option '{key}'", pos, f"options of '{cls.name}': {valid}"
            )
        if not eq:
            raise err(f"option '{key}' needs a value: {key}=...", pos)
        value_pos = pos + len(key) + 1
        values[key] = _convert_option(cls, f, raw, lambda m, at=value_pos: err(m, at))
        pos = item_end
    return values


def _convert_option(cls: type[Pass], f: dataclasses.Field, raw: str, err) -> Any:
    t = _option_type(cls, f)
    if typing.get_origin(t) is typing.Literal:
        choices = typing.get_args(t)
        if raw not in choices:
            raise err(
                f"option '{f.name}' must be one of {', '.join(map(str, choices))}, got '{raw}'"
            )
        return raw
    if t is bool:
        if raw not in ("true", "false", "1", "0"):
            raise err(f"option '{f.name}' must be true or false, got '{raw}'")
        return raw in ("true", "1")
    if t is int:
        try:
            return int(raw)
        except ValueError:
            raise err(f"option '{f.name}' must be an integer, got '{raw}'") from None
    if t is float:
        try:
            return float(raw)
        except ValueError:
            raise err(f"option '{f.name}' must be a number, got '{raw}'") from None
    return raw


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class Instrumentation:
    """What `PassManager` shows and checks around each pass (the `tilec opt` flags)."""

    print_ir_after_all: bool = False
    print_ir_before: set[str] = field(default_factory=set)
    print_ir_after: set[str] = field(default_factory=set)
    stop_after: str | None = None
    dump_dir: str | None = None
    verify_each: bool = True
    timing: bool = False
    print_remarks: bool = False
    print_locations: bool = False
    stream: TextIO | None = None  # where IR printed around passes goes (stderr by default)


class PassManager:
    """Runs a list of passes over a module with instrumentation."""

    def __init__(
        self,
        passes: Sequence[Pass],
        instrumentation: Instrumentation | None = None,
        later_steps: Sequence[str] = (),
    ):
        """`later_steps` names the steps that follow the passes (lowering to LLVM IR, PTX) and
        that `--stop-after`/`--print-ir-after` may name too."""
        self.passes = list(passes)
        self.instr = instrumentation or Instrumentation()
        self.context = PassContext()
        self.timings: list[tuple[str, float]] = []
        self.stopped = False  # whether --stop-after ended the pipeline before its last step
        self._dump_index = 0
        stop = self.instr.stop_after
        steps = [p.name for p in self.passes] + list(later_steps)
        if stop is not None and stop not in steps:
            raise TileError(
                f"--stop-after={stop}: no step '{stop}' in the pipeline",
                hint="steps of this pipeline: " + (", ".join(steps) or "none"),
            )

    @classmethod
    def from_text(
        cls,
        pipeline: str,
        instrumentation: Instrumentation | None = None,
        later_steps: Sequence[str] = (),
    ) -> PassManager:
        return cls(parse_pipeline(pipeline), instrumentation, later_steps)

    def _print(self, header: str, module: Operation) -> None:
        self.print_text(header, self._text(module))

    def print_text(self, header: str, text: str) -> None:
        """Print one step's output (IR, or LLVM IR/PTX after lowering) with a header."""
        import sys

        stream = self.instr.stream or sys.stderr
        stream.write(f"// -----// {header} //----- //\n")
        stream.write(text if text.endswith("\n") else text + "\n")

    def _text(self, module: Operation) -> str:
        return print_op(
            module,
            print_locations=self.instr.print_locations,
            remarks=self.context.remark_lookup() if self.instr.print_remarks else None,
        )

    def _dump(self, name: str, module: Operation) -> None:
        if self.instr.dump_dir is not None:
            self.dump_text(name, self._text(module), ".tir")

    def dump_text(self, name: str, text: str, suffix: str) -> None:
        """Write one step's output to the dump directory as the next numbered file."""
        if self.instr.dump_dir is None:
            return
        os.makedirs(self.instr.dump_dir, exist_ok=True)
        path = os.path.join(self.instr.dump_dir, f"{self._dump_index:02d}-{name}{suffix}")
        self._dump_index += 1
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def run(
        self,
        module: Operation,
        after_each: Callable[[Pass, Operation, Operation], None] | None = None,
        *,
        input_name: str = "input",
    ) -> Operation:
        """Run the pipeline; returns the module (passes rewrite it in place). `after_each`
        is called with each pass, the module once the pass has run and verified, and a copy
        of it as it is then (which the next pass leaves alone). The IR before the first pass
        is dumped as `input_name`.

        A crash's report saves the IR the pass was given: a copy taken before it (the one
        `after_each` got from the pass before), printed only if the pass fails -- printing
        it before every pass cost more than the passes on small kernels."""
        instr = self.instr
        self._dump(input_name, module)
        before = module.clone() if instr.verify_each else None
        for p in self.passes:
            if p.name in instr.print_ir_before:
                self._print(f"IR Dump Before {p.name}", module)
            self.context.current_pass = p.name
            start = time.perf_counter()
            try:
                p.run(module, self.context)
            except TileError:
                raise
            except Exception as e:
                before_text = print_op(before) if before is not None else None
                raise InternalCompilerError(
                    p.name, e, save_crash_ir(p.name, before_text, instr.dump_dir)
                ) from e
            self.timings.append((p.name, time.perf_counter() - start))
            if instr.verify_each:
                try:
                    verify(module)
                except VerifyError as e:
                    path = save_crash_ir(
                        p.name, print_op(module, print_locations=True), instr.dump_dir
                    )
                    raise InternalCompilerError(
                        p.name, RuntimeError(f"the pass produced invalid IR: {e.render()}"), path
                    ) from e
            if instr.print_ir_after_all or p.name in instr.print_ir_after:
                self._print(f"IR Dump After {p.name}", module)
            self._dump(p.name, module)
            if instr.verify_each or after_each is not None:
                before = module.clone()
            if after_each is not None:
                after_each(p, module, before)  # type: ignore[arg-type]
            if instr.stop_after == p.name:
                self.stopped = True
                break
        return module

    def timing_report(self) -> str:
        total = sum(t for _, t in self.timings) or 1e-12
        lines = [
            "===-------------------------------------------------------------------------===",
            "                         ... Pass execution timing report ...",
            "===-------------------------------------------------------------------------===",
            "  Wall Time (s)   (%)   Pass",
        ]
        for name, t in self.timings:
            lines.append(f"  {t:12.6f}  {100 * t / total:5.1f}%  {name}")
        lines.append(f"  {total:12.6f}  100.0%  Total")
        return "\n".join(lines) + "\n"

    def __iter__(self) -> Iterator[Pass]:
        return iter(self.passes)


def save_crash_ir(
    pass_name: str, text: str | None, dump_dir: str | None, suffix: str = ".tir"
) -> str | None:
    """Write the text a step failed on to `dump_dir` (else the temporary directory) as
    `tilec-crash-<step>-*<suffix>`; its path, or None when it could not be written."""
    if text is None:
        return None
    directory = dump_dir or tempfile.gettempdir()
    try:
        os.makedirs(directory, exist_ok=True)
        fd, path = tempfile.mkstemp(
            prefix=f"tilec-crash-{pass_name}-", suffix=suffix, dir=directory
        )
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    except OSError:
        return None
