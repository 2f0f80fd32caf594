"""Line info: the LLVM debug metadata that asks only for line tables
(`emissionKind: DebugDirectivesOnly`, as Triton does: `.file`/`.loc` directives in the PTX, no
DWARF sections), and `llvm_line_locations`, which reads the locations back from LLVM text.

The kernel lowering (`tilec.lowering.llvm`) makes one `DebugInfo` per module when
`line_info=True`: a `DISubprogram` per kernel at its `def`, and on every instruction the
`DILocation` of the op it was lowered from (hoisted per-thread constants carry the op that
first needed them). Files are named as the ops' locations name them, i.e. as the user gave
the path.
"""

from __future__ import annotations

import re

from llvmlite import ir

from tilec.diagnostics import Location

__all__ = ["DebugInfo", "llvm_line_locations"]

I32 = ir.IntType(32)


class DebugInfo:
    """The module's line-table metadata: one compile unit, a file per source file, a
    subprogram per kernel, and a location per distinct (scope, line, column)."""

    def __init__(self, llmod: ir.Module, filename: str):
        self.module = llmod
        self._files: dict[str, ir.DIValue] = {}
        self.unit = llmod.add_debug_info(
            "DICompileUnit",
            {
                "language": ir.DIToken("DW_LANG_C"),
                "file": self.file(filename or "<unknown>"),
                "producer": "tilec",
                "isOptimized": True,
                "runtimeVersion": 0,
                "emissionKind": ir.DIToken("DebugDirectivesOnly"),
            },
            is_distinct=True,
        )
        llmod.add_named_metadata("llvm.dbg.cu", self.unit)
        for flag, value in (("Dwarf Version", 4), ("Debug Info Version", 3)):
            llmod.add_named_metadata("llvm.module.flags", [I32(2), flag, I32(value)])
        self._no_types = llmod.add_debug_info("DISubroutineType", {"types": llmod.add_metadata([])})
        self._locations: dict[tuple[int, str, int, int], ir.DIValue] = {}

    def file(self, name: str) -> ir.DIValue:
        found = self._files.get(name)
        if found is None:
            found = self.module.add_debug_info("DIFile", {"filename": name, "directory": ""})
            self._files[name] = found
        return found

    def subprogram(self, fn: ir.Function, loc: Location) -> ir.DIValue:
        """The kernel's subprogram (at its `def`), attached to `fn`."""
        file = self.file(loc.file or "<unknown>")
        line = max(loc.line, 0)
        sp = self.module.add_debug_info(
            "DISubprogram",
            {
                "name": fn.name,
                "linkageName": fn.name,
                "scope": file,
                "file": file,
                "line": line,
                "type": self._no_types,
                "scopeLine": line,
                "unit": self.unit,
                "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            },
            is_distinct=True,
        )
        fn.set_metadata("dbg", sp)
        return sp

    def location(self, subprogram: ir.DIValue, sp_file: str, loc: Location) -> ir.DIValue | None:
        """The `DILocation` of `loc` in `subprogram` (whose file is `sp_file`); a location in
        another file is scoped by a `DILexicalBlockFile` naming it. None: `loc` is unknown."""
        if not loc.known:
            return None
        key = (id(subprogram), loc.file, loc.line, loc.col)
        found = self._locations.get(key)
        if found is None:
            scope = subprogram
            if loc.file != sp_file:
                scope = self.module.add_debug_info(
                    "DILexicalBlockFile",
                    {"scope": subprogram, "file": self.file(loc.file), "discriminator": 0},
                )
            found = self.module.add_debug_info(
                "DILocation", {"line": loc.line, "column": loc.col, "scope": scope}
            )
            self._locations[key] = found
        return found


_METADATA_NODE = re.compile(r"^!(\d+) = (?:distinct )?!(DI\w+)\((.*)\)\s*$")
_METADATA_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|[^,]+)')
_DEBUG_REFERENCE = re.compile(r"!dbg !(\d+)")


def llvm_line_locations(text: str) -> tuple[Location | None, ...]:
    """Per line of LLVM IR `text`, the source location its `!dbg` attachment names (a
    kernel's `define` line: its `def`), None for lines without one."""
    nodes: dict[str, tuple[str, dict[str, str]]] = {}
    lines = text.splitlines()
    for line in lines:
        if line.startswith("!") and (m := _METADATA_NODE.match(line)):
            fields = {k: v.strip() for k, v in _METADATA_FIELD.findall(m.group(3))}
            nodes[m.group(1)] = (m.group(2), fields)

    def file_of(ref: str) -> str:
        kind, fields = nodes.get(ref.lstrip("!"), ("", {}))
        if kind == "DIFile":
            return _unescape(fields.get("filename", '""')[1:-1])
        return file_of(fields["file"]) if "file" in fields else ""

    found: dict[str, Location | None] = {}

    def location(ref: str) -> Location | None:
        if ref not in found:
            kind, fields = nodes.get(ref, ("", {}))
            if kind == "DILocation":
                scope = fields.get("scope", "")
                found[ref] = Location(
                    file_of(scope), int(fields.get("line", 0)), int(fields.get("column", 0))
                )
            elif kind == "DISubprogram":
                found[ref] = Location(file_of(fields.get("file", "")), int(fields["line"]), 1)
            else:
                found[ref] = None
        return found[ref]

    return tuple(
        location(m.group(1)) if "!dbg" in line and (m := _DEBUG_REFERENCE.search(line)) else None
        for line in lines
    )


def _unescape(text: str) -> str:
    """An LLVM string's contents (`\\XX` escapes hex bytes of UTF-8) as text."""
    if "\\" not in text:
        return text
    data = re.sub(rb"\\([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), text.encode())
    return data.decode("utf-8", "replace")
