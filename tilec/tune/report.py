"""A search as text: the candidates table, the winner, the heuristic's choice and its regret.

`tilec tune` prints `render(result.to_json())`; `tilec compile --explain` prints the same
from the cache entries of the kernel it explains (`explain_section`), so a tuned kernel's
explanation says what was measured, not only what the models chose.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tilec.tune.space import config_text, kernel_line

__all__ = ["explain_section", "render", "table"]

SHOWN = ("tile.", "warps", "stages", "path", "tiling.group_m", "split")


def _decisions_text(decisions: Mapping[str, Any]) -> str:
    parts = []
    for name, value in decisions.items():
        if not any(name.startswith(p) for p in SHOWN):
            continue
        label = name.replace("tile.", "B").replace("tiling.group_m", "group")
        parts.append(f"{label}={value}")
    blocks = decisions.get("assign-layouts.min_blocks_per_sm")
    if blocks:
        parts.append(f"blocks/SM={blocks}")
    return " ".join(parts)


def _number(value: Any, digits: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, digits)


def _short(reason: str, width: int = 120) -> str:
    """A reason on one table line: its first clause (the full text is in the JSON)."""
    text = reason.split(" (", 1)[0] if len(reason) > width else reason
    return text if len(text) <= width else text[: width - 3] + "..."


def table(candidates: Sequence[Mapping[str, Any]], limit: int = 0) -> list[str]:
    """One line per candidate (timed ones fastest first, then the rest in order): its pins,
    what they compiled to, time, spread, and why it was excluded."""
    timed = sorted(
        (c for c in candidates if c["status"] == "ok" and c["ms"] is not None),
        key=lambda c: c["ms"],
    )
    rest = [c for c in candidates if c not in timed]
    rows = timed + rest
    if limit and len(rows) > limit:
        rows = rows[:limit]
    # Over several GPUs, the GPU each time is from.
    gpus = any(c.get("device") is not None for c in candidates)
    gpu_header = f"{'gpu':>3}  " if gpus else ""
    lines = [
        f"  {'#':>3}  {'ms':>9}  {'spread':>6}  {gpu_header}{'status':<9}  config -> decisions"
    ]
    for c in rows:
        reason = f"  ({_short(c['reason'])})" if c["reason"] else ""
        gpu = f"{'-' if c.get('device') is None else c['device']:>3}  " if gpus else ""
        lines.append(
            f"  {c['index']:>3}  {_number(c['ms'], '9.4f')}  {_number(c['spread'], '6.3f')}  "
            f"{gpu}{c['status']:<9}  {config_text(c['config'])} -> "
            f"{_decisions_text(c['decisions'])}{reason}"
        )
    if limit and len(candidates) > limit:
        lines.append(f"  ... {len(candidates) - limit} more")
    return lines


def _summary(entry: Mapping[str, Any]) -> list[str]:
    winner, heuristic = entry["winner"], entry["heuristic"]
    counts: dict[str, int] = {}
    for c in entry["candidates"]:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return [
        f"  heuristic  {config_text(heuristic['config'])}: "
        f"{_decisions_text(heuristic['decisions'])}, {_number(heuristic['ms'], '.4f')} ms",
        f"  winner     {config_text(winner['config'])}: "
        f"{_decisions_text(winner['decisions'])}, {_number(winner['ms'], '.4f')} ms "
        f"(spread {_number(winner['spread'], '.3f')})",
        f"  regret     {entry['regret']:.3f} (heuristic time / tuned time)",
        f"  searched   {', '.join(entry['searched']) or 'nothing'}; {len(entry['candidates'])} "
        f"candidates ({tally}) in {entry['elapsed_s']:.1f} s, "
        f"{entry['candidates_per_s']:.2f} candidates/s; stopped: {entry['stopped']}",
        *_gpus(entry.get("gpus")),
    ]


def _gpus(gpus: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The GPUs line of a search over several: each GPU and the scale of its times."""
    if not gpus:
        return []
    each = ", ".join(
        str(g["gpu"])
        + ("" if g["scale"] == 1 else f" (times x{g['scale']:.3f})")
        + (f" (left out: {g['left_out']})" if g.get("left_out") else "")
        for g in gpus
    )
    return [
        f"  gpus       {each}; the final round, the winner and the regret on GPU {gpus[0]['gpu']}"
    ]


def render(entry: Mapping[str, Any], *, emit_pins: bool = False) -> str:
    """The whole report of one search (a `TuneResult.to_json()` or a cache entry)."""
    sizes = ",".join(f"{d}={n}" for d, n in entry["sizes"].items())
    binding = ",".join(f"{p}={d}" for p, d in (entry.get("dtypes") or {}).items())
    kernel = f"{entry['kernel']}[{binding}]" if binding else entry["kernel"]
    lines = [
        f"tune {kernel} ({entry['file']}) at {sizes} on {entry['arch']}, {entry['clock']} clock"
    ]
    lines += table(entry["candidates"])
    lines += _summary(entry)
    if emit_pins:
        lines.append("pins (paste above the kernel):")
        lines += kernel_line(entry["pins"])
    return "\n".join(lines) + "\n"


def explain_section(entries: Sequence[Mapping[str, Any]], limit: int = 8) -> list[str]:
    """The `tuned` lines of `--explain` for a kernel's cache entries."""
    lines = []
    for entry in entries:
        sizes = ",".join(f"{d}={n}" for d, n in entry["sizes"].items())
        gpu = entry.get("key", {}).get("gpu", "?")
        lines.append(f"tuned     at {sizes} on {gpu} ({entry['clock']} clock)")
        lines += ["  " + line for line in _summary(entry)]
        lines += ["  " + line for line in table(entry["candidates"], limit)]
        lines += ["    pins: " + line for line in kernel_line(entry["pins"])]
    return lines
