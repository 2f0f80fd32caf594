"""gpucheck reads compute-sanitizer's verdicts (no GPU needed): memcheck's and racecheck's
summary lines, as the H200's compute-sanitizer printed them."""

from __future__ import annotations

import pytest

from tilec.gpucheck import sanitizer_errors

RACY = """\
========= Error: Race reported between Write access at softmax+0x1b80 in softmax.tile:12
=========     and Read access at softmax+0x1710 in softmax.tile:12 [140 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""


@pytest.mark.parametrize(
    ("output", "errors"),
    [
        ("========= ERROR SUMMARY: 0 errors\n", 0),
        ("========= ERROR SUMMARY: 3 errors\n", 3),
        ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", 0),
        (RACY, 2),
        ("========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n", 1),
        ("Traceback (most recent call last):\n", None),
    ],
)
def test_summaries_are_read(output, errors):
    assert sanitizer_errors(output) == errors
