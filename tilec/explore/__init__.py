"""The pass explorer (`tilec explore`): an HTML page that steps through a compilation pass by
pass, with the IR, its diff, the passes' remarks at their ops, the source beside it, pictures
of layouts and swizzles, and the PTX with the registers and shared memory it uses
(docs/explore.md)."""

from tilec.explore.report import build_report, report_data

__all__ = ["build_report", "report_data"]
