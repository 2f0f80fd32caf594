"""What the differential check reports (`tilec.fuzz.differential`): a finding, the bugs it
knows and counts apart, what checking one program did, and a bulk run's summary."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KNOWN_BUGS", "Finding", "KnownBug", "ProgramResult", "Summary", "known_bug"]


@dataclass
class Finding:
    """One thing that went wrong. `kind`: "rejected" (a TileError for a well-typed program),
    "internal-error", "invalid-ir", "mismatch", "interpreter-error", "ptxas"; `stage`: the
    step after which (or in which) it happened: "frontend", a pass name, "lower-to-llvm",
    "ptxas"."""

    kind: str
    stage: str
    message: str
    seed: int
    kernel: str | None = None
    arch: str | None = None
    directory: str | None = None

    def describe(self) -> str:
        where = f"{self.stage}" + (f" [{self.arch}]" if self.arch else "")
        kernel = f" kernel {self.kernel}" if self.kernel else ""
        saved = f" (saved in {self.directory})" if self.directory else ""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"seed {self.seed}{kernel}: {self.kind} after {where}: {first}{saved}"


@dataclass(frozen=True)
class KnownBug:
    """A bug the fuzzer finds that lies in code this checker's owners do not change: its
    findings are counted apart (`Summary.known`) and its shrunk program is kept as a test
    marked `xfail(strict=True)` (tests/unit/test_fuzz.py), which starts failing once it is
    fixed, so that the entry here is removed."""

    name: str
    kind: str
    stage: str
    pattern: str  # a regular expression the finding's message matches
    reason: str

    def matches(self, finding: Finding) -> bool:
        return (
            finding.kind == self.kind
            and finding.stage == self.stage
            and re.search(self.pattern, finding.message) is not None
        )


# Bugs the check has found and that are not fixed yet, each with a strict-xfail test; empty
# now (the last, tiling without room for a 3-D tile's conversion scratch, was fixed in
# passes/tiling.py).
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(finding: Finding) -> KnownBug | None:
    return next((bug for bug in KNOWN_BUGS if bug.matches(finding)), None)


@dataclass
class ProgramResult:
    """What checking one program did."""

    kernels: int = 0
    stages: int = 0  # interpreter runs compared
    ptxas_kernels: int = 0  # kernel x architecture pairs ptxas accepted
    findings: list[Finding] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    # Located errors for pins no block can hold (the same kernel without its pins compiles):
    # the program's fault, the right answer, counted apart.
    pin_rejections: int = 0
    cpu_seconds: float = 0.0  # the checking process's CPU time and its ptxas runs'


@dataclass
class Summary:
    """A bulk run: counts, findings, time."""

    programs: int = 0
    kernels: int = 0
    stages: int = 0
    ptxas_kernels: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    known: list[Finding] = field(default_factory=list)  # findings of `KNOWN_BUGS`
    features: Counter = field(default_factory=Counter)
    pin_rejections: int = 0
    # CPU time the checks took, summed over the worker processes and their ptxas runs: the
    # work done, whatever else shared the machine (wall time `seconds` stretches with it).
    cpu_seconds: float = 0.0

    @property
    def kernels_per_second(self) -> float:
        return self.kernels / self.seconds if self.seconds else 0.0

    def add(self, result: ProgramResult) -> None:
        self.programs += 1
        self.kernels += result.kernels
        self.stages += result.stages
        self.ptxas_kernels += result.ptxas_kernels
        self.pin_rejections += result.pin_rejections
        self.cpu_seconds += result.cpu_seconds
        for finding in result.findings:
            (self.known if known_bug(finding) else self.findings).append(finding)
        self.features.update(result.features)

    def render(self) -> str:
        lines = [
            f"{self.kernels} generated kernels ({self.programs} programs) in {self.seconds:.1f} s"
            f" ({self.kernels_per_second:.1f} kernels/s; {self.cpu_seconds:.0f} s of CPU): "
            f"{self.stages} interpreter runs "
            f"compared, {self.ptxas_kernels} kernel x arch assembled by ptxas; "
            f"{self.pin_rejections} kernel x arch refused for their pins (located errors; "
            "without the pins they compile)",
            "reached on sm_90a (programs): "
            + ", ".join(
                f"{what} {self.features[f'reached:{what}:sm_90a']}"
                for what in (
                    *("tma", "warp_specialize", "persistent", "vector_red", "split_k"),
                    *("split_online", "split_tile", "split_scan", "split_passes"),
                )
            ),
            f"{len(self.findings)} finding(s); {len(self.known)} of known bugs "
            f"({', '.join(sorted({known_bug(f).name for f in self.known})) or 'none'})",
        ]
        by = Counter((f.kind, f.stage) for f in self.findings)
        lines += [f"  {n} x {kind} after {stage}" for (kind, stage), n in sorted(by.items())]
        lines += ["  " + f.describe() for f in self.findings[:20]]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "programs": self.programs,
            "kernels": self.kernels,
            "stages": self.stages,
            "ptxas_kernels": self.ptxas_kernels,
            "pin_rejections": self.pin_rejections,
            "seconds": round(self.seconds, 1),
            "cpu_seconds": round(self.cpu_seconds, 1),
            "kernels_per_second": round(self.kernels_per_second, 2),
            "findings": [f.__dict__ for f in self.findings],
            "known": [f.__dict__ for f in self.known],
        }
