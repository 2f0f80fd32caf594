"""The pass explorer's report: one self-contained HTML page for a compiled `.tile` file.

`report_data` gathers, as JSON-ready data, everything the page shows: the source, every stage
of the compilation (the IR after the frontend and after each pass, LLVM IR, PTX, ptxas's
report) with its diff against the stage before (difflib), the remarks each pass made and the
IR lines of the ops they concern, the source location of every printed op, the pictures of
the layouts and swizzles the stage's types carry (tilec.explore.pictures), the registers and
shared memory of each kernel, and the error of a compilation that stopped. `build_report`
puts that data into the page (report.html beside this file: inline CSS and script, no
external assets), which renders it in the browser.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from importlib import resources
from typing import Any

from tilec.compiler import CompiledProgram, Stage
from tilec.diagnostics import InternalCompilerError, Location, TileError
from tilec.explore.pictures import picture_for, pictures_of

__all__ = ["build_report", "report_data"]

# What each stage's text is written in; every other stage is tile IR.
STAGE_LANGUAGE = {"lower-to-llvm": "llvm", "ptx": "ptx", "cubin": "ptxas"}
DATA_MARKER = "/*@TILEC_REPORT_DATA@*/"
TITLE_MARKER = "@TILEC_REPORT_TITLE@"


def _loc(loc: Location) -> list[int] | None:
    return [loc.line, loc.col] if loc.known else None


def _error_data(error: BaseException, stage: str | None) -> dict[str, Any]:
    if isinstance(error, TileError):
        return {
            "stage": stage,
            "message": error.message,
            "text": error.render(),
            "loc": _loc(error.loc),
        }
    if isinstance(error, InternalCompilerError):
        return {
            "stage": stage or error.pass_name,
            "message": str(error),
            "text": str(error),
            "loc": None,
        }
    return {
        "stage": stage,
        "message": str(error),
        "text": f"{type(error).__name__}: {error}",
        "loc": None,
    }


def _diff(before: str, after: str) -> list[str]:
    """The unified diff of two stages' text, without its file header lines."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3))
    return lines[2:]  # without "--- " and "+++ " (there when anything differs)


def _source_lines(stage: Stage, filename: str | None) -> list[int]:
    """Per line of the stage's text, the line of the source it comes from (0: none)."""
    return [
        loc.line if loc is not None and (filename is None or loc.file == filename) else 0
        for loc in stage.locations
    ]


def _stage_pictures(stage: Stage, filename: str) -> list[tuple[str, Any]]:
    from tilec.ir.parser import parse_module

    try:
        module = parse_module(stage.ir, f"<{stage.name} IR of {filename}>")
    except TileError:
        return []  # drawn from what parses; the text is still shown
    return list(pictures_of(module).items())


def report_data(compiled: CompiledProgram) -> dict[str, Any]:
    """What the page shows, as JSON-ready data. `compiled` may have stopped early
    (`tilec.compile(..., keep_going=True)`): its stages up to the failure are shown, then the
    error at the stage that failed (the frontend's, with no IR, when the source did not
    parse or analyse)."""
    filename = compiled.filename or "<source>"
    stages: list[dict[str, Any]] = []
    pictures: dict[str, dict[str, Any]] = {}
    picture_ids: dict[str, int] = {}
    previous: Stage | None = None
    for stage in compiled.stages:
        language = STAGE_LANGUAGE.get(stage.name, "tir")
        shown: list[int] = []
        if language == "tir":
            for key, t in _stage_pictures(stage, filename):
                if key not in picture_ids:
                    picture_ids[key] = len(pictures)
                    pictures[key] = picture_for(t)
                shown.append(picture_ids[key])
        same_language = (
            previous is not None and STAGE_LANGUAGE.get(previous.name, "tir") == language
        )
        stages.append(
            {
                "name": stage.name,
                "language": language,
                "text": stage.ir,
                "diff": _diff(previous.ir, stage.ir) if same_language else None,
                "previous": previous.name if previous is not None else None,
                "locs": _source_lines(stage, compiled.filename),
                "remarks": [
                    {
                        "pass": r.pass_name,
                        "message": r.message,
                        "op": r.op.name if r.op is not None else None,
                        "loc": _loc(r.loc),
                        "line": line,
                    }
                    for r, line in zip(stage.remarks, stage.remark_lines)
                ],
                "pictures": shown,
            }
        )
        previous = stage
    error = None
    if compiled.error is not None:
        error = _error_data(compiled.error, compiled.failed_stage)
        stages.append(
            {
                "name": error["stage"] or "frontend",
                "language": "error",
                "text": "",
                "diff": None,
                "previous": previous.name if previous is not None else None,
                "locs": [],
                "remarks": [],
                "pictures": [],
                "error": error,
            }
        )
    return {
        "filename": filename,
        "source": compiled.source or "",
        "kernels": compiled.kernels,
        "arch": compiled.arch,
        "stages": stages,
        "pictures": list(pictures.values()),
        "kernel_resources": _resources(compiled),
        # ptxas's report where the compile already ran it (never assembled again here).
        "explain": (
            compiled.explain(ptxas=compiled.resources is not None)
            if error is None and compiled.stages
            else None
        ),
        "error": error,
    }


def _resources(compiled: CompiledProgram) -> dict[str, Any]:
    """Per kernel: registers, spills, stack and "Potential Performance Loss" notes from ptxas
    (when it ran), and the dynamic shared memory the kernel is launched with."""
    from tilec.lowering.shared_memory import shared_bytes

    if compiled.ptx is None or compiled.module is None:
        return {}
    found = compiled.resources or {}
    result: dict[str, Any] = {}
    for kernel in compiled.module.functions:
        entry: dict[str, Any] = {"dynamic_shared": shared_bytes(kernel)}
        r = found.get(kernel.sym_name)
        if r is not None:  # every field of ptxas's report but the name the key already says
            fields = dataclasses.asdict(r)
            entry.update(
                {
                    k: list(v) if isinstance(v, tuple) else v
                    for k, v in fields.items()
                    if k != "name"
                }
            )
        result[kernel.sym_name] = entry
    return result


def build_report(compiled: CompiledProgram) -> str:
    """The explorer page (HTML, self-contained) for `compiled`: see `report_data`."""
    data = report_data(compiled)
    # Inside <script>, "</script>" or "<!--" in the IR or the source would end the data early.
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    template = resources.files("tilec.explore").joinpath("report.html").read_text("utf-8")
    title = f"tilec explore: {data['filename']}"
    return template.replace(TITLE_MARKER, _escape(title)).replace(DATA_MARKER, payload)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
