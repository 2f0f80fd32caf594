"""The pass explorer's page in a real browser: headless Chromium (the system's, /usr/bin/chromium,
which .ci/run installs) driven by Playwright. It steps through the passes with the keyboard
and checks what a reader would: the pass name, the IR and the diff change; remarks are shown
at their ops; a layout picture is drawn; source and IR lines point at each other. It saves a
screenshot for people to look at in tests/artifacts/ (docs/explore.md).

Without Chromium the tests fail and say how to install it; off CI (no CI variable),
TILEC_SKIP_BROWSER=1 skips them instead. TILEC_CHROMIUM names another Chromium binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")
# What makes Chromium start quietly as root in a container, touching no network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    if os.environ.get("TILEC_SKIP_BROWSER") == "1" and not os.environ.get("CI"):
        pytest.skip("TILEC_SKIP_BROWSER=1: the explorer's browser test is skipped")
    path = os.environ.get("TILEC_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    pytest.fail(
        f"no Chromium at {path}: install it (apt-get install chromium, as .ci/run does), "
        "point TILEC_CHROMIUM at one, or set TILEC_SKIP_BROWSER=1 to skip this test off CI",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        # Playwright's launch gives every browser a fresh, temporary profile (user data dir).
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        yield browser
        browser.close()


def write_report(directory: Path, *args: str) -> Path:
    output = directory / "report.html"
    result = subprocess.run(
        [TILEC, "explore", *args, "-o", str(output)],
        capture_output=True,
        text=True,
        check=False,
        cwd=directory,
    )
    assert output.is_file(), result.stderr
    return output


def open_page(browser, path: Path):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    # Anything the page asks of the network is a failure of "self-contained".
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(path.as_uri())
    return page, errors, requests


def shown(page) -> dict[str, str]:
    return {
        "title": page.inner_text("#stage-title"),
        "ir": page.inner_text("#ir-text"),
        "diff": page.inner_text("#diff-head") + page.inner_text("#diff-text"),
    }


def test_stepping_through_the_passes_of_matmul(browser, tmp_path):
    report = write_report(
        tmp_path,
        str(ROOT / "examples" / "matmul.tile"),
        "-k",
        "matmul",
        "--assume",
        "aligned,unit,divisible",
    )
    page, errors, requests = open_page(browser, report)
    names = page.eval_on_selector_all(
        "#stage-list li .name", "items => items.map(i => i.textContent)"
    )
    assert names[:3] == ["frontend", "assume", "canonicalize"] and names[-1] in ("ptx", "cubin")

    seen = [shown(page)]
    assert seen[0]["title"] == "IR from the frontend"
    for _ in range(len(names) - 1):
        page.keyboard.press("ArrowDown")
        seen.append(shown(page))
    titles = [s["title"] for s in seen]
    assert titles[names.index("tiling")] == "IR after tiling"
    texts = page.evaluate("DATA.stages.map(s => s.text)")
    for step in range(1, len(seen)):
        before, after = seen[step - 1], seen[step]
        assert after["title"] != before["title"], names[step]  # the pass name changes
        assert after["diff"] != before["diff"], names[step]
        if texts[step] != texts[step - 1]:
            assert after["ir"] != before["ir"], names[step]
    tiling = names.index("tiling")
    assert seen[tiling]["ir"] != seen[tiling - 1]["ir"]
    assert seen[tiling]["diff"] != seen[tiling - 1]["diff"]
    assert "tilec.num_warps" in seen[tiling]["ir"] and "tilec.num_warps" not in seen[0]["ir"]
    assert "added" in seen[tiling]["diff"]

    # Back to smem-placement with the keyboard: its remarks stand at the ops they concern.
    for _ in range(len(names) - 1 - names.index("smem-placement")):
        page.keyboard.press("ArrowUp")
    assert page.inner_text("#stage-title") == "IR after smem-placement"
    remarks = page.locator("#ir-text .remark")
    assert remarks.count() >= 2
    swizzle_remark = page.locator("#ir-text .remark", has_text="XOR").first
    assert swizzle_remark.is_visible()
    following = swizzle_remark.evaluate(
        "r => { let n = r.nextElementSibling; while (n.classList.contains('remark')) "
        "n = n.nextElementSibling; return n.textContent; }"
    )
    assert "tile.alloc_shared" in following

    # The layouts tab: a drawn picture of the accumulator's #mma layout, and the swizzles.
    page.keyboard.press("2")
    picture = page.locator("figure.layout-picture", has_text="#mma").first
    assert picture.is_visible()
    colours = picture.locator("canvas").evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " const s = new Set(); for (let i = 0; i < d.length; i += 4 * 97)"
        " s.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]); return s.size; }"
    )
    assert colours >= 4  # warps in their colours, lanes in their shades
    assert page.locator("figure.swizzle-picture svg rect").count() > 0

    # A source line highlights the IR lines of the ops it produced.
    page.locator("#source-text .ln", has_text="acc += a[tm, tk] @ b[tk, tn]").first.click()
    hits = page.locator("#ir-text .ln.hit")
    assert hits.count() >= 1
    assert any("tile.dot" in text for text in hits.all_inner_texts())
    # And back: an IR line highlights the source line it comes from.
    page.locator("#ir-text .ln", has_text="tile.store %c").first.click()
    assert page.locator("#source-text .ln.hit").count() == 1
    assert "c[tm, tn] = acc" in page.inner_text("#source-text .ln.hit")

    page.keyboard.press("End")
    page.keyboard.press("3")
    assert page.locator("#resources table.res").is_visible()
    assert "matmul" in page.inner_text("#resources")
    assert ".entry" in page.inner_text("#ptx-text") or ".visible" in page.inner_text("#ptx-text")

    # The screenshot for people: smem-placement with its layouts.
    page.keyboard.press("Home")
    for _ in range(names.index("smem-placement")):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("2")
    page.mouse.move(0, 0)
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "explore-matmul.png"
    page.screenshot(path=str(screenshot))
    print(f"screenshot: {screenshot}")
    assert screenshot.stat().st_size > 10_000
    assert errors == [] and requests == []


def test_a_failed_compilation_opens_at_the_error(browser, tmp_path):
    (tmp_path / "k.tile").write_text(
        "def k(a: f32[N]):\n    for t in tiles(N):\n        a[t] = b[t]\n"
    )
    report = write_report(tmp_path, "k.tile")
    page, errors, requests = open_page(browser, report)
    assert page.locator("#banner").is_visible()
    assert "Compilation failed in frontend" in page.inner_text("#banner")
    assert "k.tile:3:" in page.inner_text("#ir-text .error-box")
    assert page.inner_text("#source-text .ln.err").strip().endswith("a[t] = b[t]")
    assert errors == [] and requests == []
