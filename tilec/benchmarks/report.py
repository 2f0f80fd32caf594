"""The benchmark suite's results, read: one row per workload and size, the summary lines, JSON
and a chart. Pure Python on the result dicts of `tilec.benchmarks.gpu.run` (no GPU needed).

A row compares tilec with its best peer: the fastest peer whose output was right. The ratio is
tilec's time over that peer's (above 1: tilec is slower). The roofline fraction is tilec's
rate over the ceiling measured in the same run: the copy bandwidth for memory-bound kernels,
cuBLAS's throughput at 8192³ (of the row's dtype; f16 for attention) for the others. A row
whose tilec kernel failed or was wrong, or that has no peer at all, shows why and is left out
of the geometric mean; a peer this machine lacks is named in the row's notes as "no peer".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["chart", "geometric_mean", "rows", "summary", "table", "to_json", "write_json"]

CEILING_NAMES = {"copy": "copy", "f16": "f16", "bf16": "bf16", "int8": "i8", "fp8": "e4m3"}
WORST = 3  # workloads named in the summary line


def _role(result: dict[str, Any]) -> str:
    """A result's role; results written before roles existed get theirs from their names."""
    if result.get("role"):
        return result["role"]
    if result["workload"] == "copy":
        return "ceiling"
    if result["workload"] in ("host overhead", "cold compile"):
        return "info"
    return "tilec" if result["implementation"] == "tilec" else "peer"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def ceilings(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ceilings measured in the run, by name ("copy", "f16", ...)."""
    found = {}
    for r in results:
        if _role(r) == "ceiling":
            name = r.get("ceiling") or ("copy" if r["unit"] == "GB/s" else "f16")
            found[name] = r
    return found


def _usable(result: dict[str, Any]) -> bool:
    """A peer that can be the best: it ran, was not wrong, and has a time."""
    return (
        result.get("status", "ok") == "ok"
        and result.get("correct") is not False
        and _finite(result.get("ms"))
    )


def _peer_status(result: dict[str, Any]) -> str:
    status = result.get("status", "ok")
    return "wrong" if status == "ok" and result.get("correct") is False else status


def rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per workload and size (in the order measured)."""
    ceiling_rates = {k: v["rate"] for k, v in ceilings(results).items()}
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        if _role(r) in ("tilec", "peer"):
            groups.setdefault((r["workload"], r["size"], r.get("tier", "suite")), []).append(r)
    table = []
    for (workload, size, tier), group in groups.items():
        mine = next((r for r in group if _role(r) == "tilec"), None)
        peers = [r for r in group if _role(r) == "peer"]
        usable = [p for p in peers if _usable(p)]
        best = min(usable, key=lambda p: p["ms"]) if usable else None
        eager = [p for p in usable if p.get("eager")]
        row: dict[str, Any] = {
            "workload": workload,
            "size": size,
            "tier": tier,
            "kind": (mine or group[0]).get("kind", ""),
            "unit": (mine or group[0]).get("unit", ""),
            "ceiling": (mine or group[0]).get("ceiling")
            or ("copy" if (mine or group[0]).get("unit") == "GB/s" else "f16"),
            "tilec_ms": mine["ms"] if mine else math.nan,
            "tilec_rate": mine["rate"] if mine else math.nan,
            "tilec_spread": mine.get("spread", math.nan) if mine else math.nan,
            "tilec_note": mine.get("note", "") if mine else "no tilec result",
            "best_peer": best["implementation"] if best else None,
            "peer_ms": best["ms"] if best else math.nan,
            "peer_spread": best.get("spread", math.nan) if best else math.nan,
            "ratio": math.nan,
            "eager_ratio": math.nan,
            "roofline": math.nan,
            "peers": [
                {
                    "name": p["implementation"],
                    "ms": p["ms"],
                    "status": _peer_status(p),
                    "note": p.get("note", ""),
                }
                for p in peers
            ],
        }
        if mine is None or mine.get("status") == "failed" or not _finite(mine.get("ms")):
            row["status"] = "tilec failed"
        elif mine.get("correct") is False or mine.get("status") == "wrong":
            row["status"] = "tilec wrong"
        elif best is None:
            row["status"] = "no peer"
        else:
            row["status"] = "ok"
        if mine is not None and _finite(mine.get("ms")):
            if best is not None:
                row["ratio"] = mine["ms"] / best["ms"]
            if eager:
                row["eager_ratio"] = mine["ms"] / min(p["ms"] for p in eager)
            ceiling = ceiling_rates.get(row["ceiling"], math.nan)
            if _finite(ceiling) and ceiling > 0:
                row["roofline"] = mine["rate"] / ceiling
        table.append(row)
    return table


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of the positive finite `values` (nan when there are none)."""
    kept = [v for v in values if _finite(v) and v > 0]
    if not kept:
        return math.nan
    return math.exp(sum(math.log(v) for v in kept) / len(kept))


def summary(table: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The geometric mean of tilec / best peer over the rows of each tier whose status is "ok",
    what was left out and why, and the worst workloads (each by its worst row)."""
    found: dict[str, Any] = {}
    for tier in ("suite", "small"):
        tier_rows = [r for r in table if r["tier"] == tier]
        if not tier_rows:
            continue
        counted = [r for r in tier_rows if r["status"] == "ok"]
        excluded: dict[str, int] = {}
        for r in tier_rows:
            if r["status"] != "ok":
                excluded[r["status"]] = excluded.get(r["status"], 0) + 1
        worst_by_workload: dict[str, dict[str, Any]] = {}
        for r in counted:
            held = worst_by_workload.get(r["workload"])
            if held is None or r["ratio"] > held["ratio"]:
                worst_by_workload[r["workload"]] = r
        worst = sorted(worst_by_workload.values(), key=lambda r: -r["ratio"])[:WORST]
        entry: dict[str, Any] = {
            "rows": len(tier_rows),
            "counted": len(counted),
            "geomean": geometric_mean([r["ratio"] for r in counted]),
            "excluded": excluded,
            "worst": [
                {"workload": r["workload"], "size": r["size"], "ratio": r["ratio"]} for r in worst
            ],
            "missing_peers": sum(
                any(p["status"] == "missing" for p in r["peers"]) for r in tier_rows
            ),
        }
        if tier == "small":
            against_eager = [
                r for r in tier_rows if _finite(r["eager_ratio"]) and r["status"] != "tilec wrong"
            ]
            entry["eager_geomean"] = geometric_mean([r["eager_ratio"] for r in against_eager])
            entry["slower_than_eager"] = [
                {"workload": r["workload"], "size": r["size"], "ratio": r["eager_ratio"]}
                for r in sorted(against_eager, key=lambda r: -r["eager_ratio"])
                if r["eager_ratio"] > 1.0
            ]
        found[tier] = entry
    return found


def _number(value: float, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if _finite(value) else f"{'-':>{width}}"


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def _notes(row: dict[str, Any]) -> str:
    parts = []
    if row["status"] == "tilec failed":
        parts.append("tilec FAILED: " + _clip(row["tilec_note"], 70))
    elif row["status"] == "tilec wrong":
        parts.append("tilec output WRONG")
    for p in row["peers"]:
        if p["name"] == row["best_peer"]:
            continue
        if p["status"] == "missing":
            parts.append(f"no peer {p['name']} ({_clip(p['note'], 50)})")
        elif p["status"] == "failed":
            parts.append(f"{p['name']} failed ({_clip(p['note'], 50)})")
        elif p["status"] == "wrong":
            parts.append(f"{p['name']} WRONG")
        elif _finite(p["ms"]) and _finite(row["tilec_ms"]):
            parts.append(f"vs {p['name']} {row['tilec_ms'] / p['ms']:.3f}")
    return "; ".join(parts)


def _summary_lines(facts: dict[str, Any]) -> list[str]:
    lines = []

    def left_out(entry: dict[str, Any]) -> str:
        if not entry["excluded"]:
            return "none left out"
        return "left out: " + ", ".join(f"{n} {why}" for why, n in entry["excluded"].items())

    def named(items: Sequence[dict[str, Any]]) -> str:
        return ", ".join(f"{w['workload']} {w['ratio']:.3f} ({w['size']})" for w in items) or "-"

    if "suite" in facts:
        s = facts["suite"]
        lines.append(
            f"geomean tilec/best peer over {s['counted']} of {s['rows']} suite rows: "
            f"{_number(s['geomean'], 0, 3).strip()} (above 1: tilec slower); worst: "
            f"{named(s['worst'])}; {left_out(s)}"
            + (f"; {s['missing_peers']} rows lack a peer (see notes)" if s["missing_peers"] else "")
        )
    if "small" in facts:
        s = facts["small"]
        lines.append(
            f"small sizes (target: no slower than eager torch): tilec/eager geomean "
            f"{_number(s['eager_geomean'], 0, 3).strip()}, tilec/best peer "
            f"{_number(s['geomean'], 0, 3).strip()} over {s['counted']} of {s['rows']} rows; "
            f"slower than eager: {named(s['slower_than_eager'])}; {left_out(s)}"
        )
    return lines


def table(results: Sequence[dict[str, Any]], *, rounds: int = 3) -> str:
    """The ceilings, one line per workload and size, the summary lines, then the extra rows
    (host overhead, cold compile)."""
    lines = []
    found = ceilings(results)
    if found:
        parts = [
            f"{r['size'] if name != 'copy' else 'device copy'} {_number(r['rate'], 0, 0).strip()} {r['unit']}"
            for name, r in found.items()
        ]
        lines.append("ceilings (this run): " + "; ".join(parts))
    header = (
        f"{'workload':<17} {'size':<22} {'tilec ms':>9} {'best peer':<22} {'peer ms':>9} "
        f"{'tilec/peer':>10} {'roofline':>10} {'ok':<5} {'spread t/p':<10}  notes"
    )
    lines += [header, "-" * len(header)]
    table_rows = rows(results)
    for tier in ("suite", "small"):
        tier_rows = [r for r in table_rows if r["tier"] == tier]
        if tier == "small" and tier_rows:
            lines.append("small sizes (a few MiB moved; target: no slower than eager torch)")
        for r in tier_rows:
            ok = {"ok": "yes", "no peer": "yes", "tilec wrong": "WRONG", "tilec failed": "FAIL"}
            roofline = (
                f"{100 * r['roofline']:5.1f}% {CEILING_NAMES.get(r['ceiling'], r['ceiling'])}"
                if _finite(r["roofline"])
                else "-"
            )
            spreads = "/".join(
                _number(v, 0, 2).strip() for v in (r["tilec_spread"], r["peer_spread"])
            )
            lines.append(
                f"{_clip(r['workload'], 17):<17} {_clip(r['size'], 22):<22} "
                f"{_number(r['tilec_ms'], 9, 4)} {_clip(r['best_peer'] or 'no peer', 22):<22} "
                f"{_number(r['peer_ms'], 9, 4)} {_number(r['ratio'], 10, 3)} {roofline:>10} "
                f"{ok[r['status']]:<5} {spreads:<10}  {_notes(r)}"
            )
    lines.append(
        "tilec/peer: tilec's time over the best (fastest correct) peer's, above 1 tilec is "
        "slower; roofline: tilec's GB/s over the copy bandwidth, or its TFLOP/s (TOPS) over "
        f"cuBLAS's at 8192³, both of this run; times are medians of {rounds} interleaved "
        "rounds, spread = slowest round / fastest (tilec/peer)"
    )
    lines[-1:] = _wrap(lines[-1], 110)
    lines += _summary_lines(summary(table_rows))
    extras: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        if _role(r) == "info":
            extras.setdefault((r["workload"], r["size"]), []).append(r)
    for (workload, size), group in extras.items():
        parts = [
            f"{r['implementation']} {_number(r['rate'], 0, 3).strip()} {r['unit']}" for r in group
        ]
        notes = "; ".join(r["note"] for r in group if r.get("note"))
        lines.append(f"{workload} ({size}): " + ", ".join(parts) + (f" ({notes})" if notes else ""))
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """`value` with every non-finite float as None: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_json(results: Sequence[dict[str, Any]], **about: Any) -> dict[str, Any]:
    """Everything measured, the rows and the summary, as one JSON-ready dict; `about` (gpu,
    versions, ...) goes at the top."""
    table_rows = rows(results)
    return _plain(
        {
            **about,
            "ceilings": {k: v["rate"] for k, v in ceilings(results).items()},
            "summary": summary(table_rows),
            "rows": table_rows,
            "results": list(results),
        }
    )


def write_json(path: str, results: Sequence[dict[str, Any]], **about: Any) -> None:
    """The results as JSON at `path` (`replace_file`)."""
    replace_file(path, json.dumps(to_json(results, **about), indent=1, allow_nan=False))


def replace_file(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` whole: beside it, then renamed over it, so that a run cut off
    mid-write (a GPU call's time limit) leaves the last complete file, never a part of one."""
    partial = f"{os.fspath(path)}.partial"
    with open(partial, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(partial, path)


def chart(results: Sequence[dict[str, Any]], path: str) -> str:
    """A horizontal bar per row: tilec / best peer on a log scale, from the line at 1 (level);
    small sizes in lighter colours. Rows without a ratio (tilec failed or wrong, no peer) are
    named with why. Returns a line saying what was written (or why not:
    no matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"chart skipped: matplotlib is not installed (wanted {path})"
    table_rows = rows(results)
    if not table_rows:
        return f"chart skipped: no rows to draw (wanted {path})"
    labels = [
        f"{r['workload']} {r['size']}" + (" (small)" if r["tier"] == "small" else "")
        for r in table_rows
    ]
    ratios = [r["ratio"] if r["status"] == "ok" else math.nan for r in table_rows]
    drawn = [v for v in ratios if _finite(v) and v > 0]
    low = min([*drawn, 1.0]) / 1.5
    high = max([*drawn, 1.0]) * 1.5
    figure, axes = plt.subplots(figsize=(10, 1.2 + 0.28 * len(table_rows)))
    positions = list(range(len(table_rows)))[::-1]
    for y, r, ratio in zip(positions, table_rows, ratios):
        if r["status"] == "ok" and _finite(ratio) and ratio > 0:
            color = "#c0392b" if ratio > 1 else "#27ae60"
            if r["tier"] == "small":
                color = "#e59866" if ratio > 1 else "#82e0aa"
            axes.barh(y, ratio - 1.0, left=1.0, color=color, height=0.7)  # from level
            axes.text(max(ratio, 1.0) * 1.02, y, f"{ratio:.2f}", va="center", fontsize=7)
        else:  # failed, wrong, or no peer: named, not drawn
            axes.text(1.02, y, r["status"], va="center", fontsize=7, color="#555555")
    axes.set_xscale("log")
    axes.set_xlim(low, high)
    axes.axvline(1.0, color="black", linewidth=1)
    axes.set_yticks(positions)
    axes.set_yticklabels(labels, fontsize=7)
    axes.set_xlabel("tilec time / best peer time (log scale; above 1: tilec slower)")
    facts = summary(table_rows).get("suite", {})
    title = "tilec against the best peer, per workload and size"
    if facts and _finite(facts.get("geomean")):
        title += f" (suite geomean {facts['geomean']:.3f})"
    axes.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return f"chart written to {path}"
