"""Bad programs: mutations of generated kernels, each of which must give a located
`file:line:col: error:` and exit status 1 (or compile, when the mutation happens to be
harmless), never a traceback or an internal compiler error.

Each mutant is a generated program (`tilec.fuzz.generate`) with one mutation of a kind:

* `name` — an identifier replaced by a misspelling or an unknown name, or a name used out of
  its scope;
* `broadcast` — a value combined with a tile whose shape does not broadcast with it;
* `pin` — a pin that cannot work: sizes that are not powers of two, zero, negative, huge,
  of dimensions that do not exist or are used whole, warps and stages out of range, options
  of the wrong type, unknown options;
* `literal` — a literal of any size or precision (1e400, 2**70, 1e-400, 300 into i8, 0x..,
  odd forms such as `1.e5`, `0b1`, `1_0`, `5j`) in place of an operand;
* `nesting` — deep nesting: thousands of parentheses, of unary operators, of calls, a long
  operator chain, loops nested deeper than the language allows;
* `bytes` — odd bytes anywhere: NUL, form feed, lone carriage returns, tabs, non-breaking and
  zero-width spaces, a byte-order mark, invalid UTF-8, characters outside the BMP;
* `token` — tokens deleted, duplicated, swapped or replaced (as test_frontend_fuzz.py does).

The check runs `tilec compile FILE --emit tir -p DEFAULT_PIPELINE` through `tilec.cli.main`,
in-process for speed (the entry point the `tilec` command calls), and a sample through the
real `tilec` executable in a subprocess; both must print a located error and return 1, or
succeed. `python -m tilec.fuzz.mutate --count N` runs it (docs/testing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tilec.compiler import DEFAULT_PIPELINE
from tilec.fuzz.generate import sample_program

__all__ = ["KINDS", "Mutant", "MutationSummary", "check_mutant", "mutate", "run_mutations"]

KINDS = ("name", "broadcast", "pin", "literal", "nesting", "bytes", "token")

LOCATED = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+): error: ", re.MULTILINE)
IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z_0-9]*\b")
TOKEN = re.compile(
    r"\n[ \t]*|[ \t]+|#[^\n]*|\w+|\"[^\"\n]*\"|'[^'\n]*'"
    r"|\*\*|//|<<|>>|<=|>=|==|!=|->|\.\.\.|[^\s\w]"
)
NAMES = (
    *("tiles", "zeros", "full", "offsets", "sum", "exp", "where", "f32", "i8", "kernel"),
    *("tm", "tn", "tk", "M", "N", "K", "D", "BM", "inf", "None", "True", "print", "range"),
)
LITERALS = (
    *("1e400", "-1e400", "1e-400", "99999999999999999999999999999", "2**70", "-(2**63)"),
    *("0x7fffffffffffffffffff", "0xffffffffffffffff", "9223372036854775808", "300", "-129"),
    *("65505.0", "3.5e38", "1.e5", ".5", "0b101", "0o17", "1_000", "5j", "0.0", "-0.0"),
    *("00", "1e", "0x", "1.2.3", "1__0", "nan", "inf", "-inf", "True", "1e308*10"),
    *("123456789012345678901234567890.5", "4.9e-324", "0e0", "1E+5", "2147483648", "-1"),
)
PINS = (
    *('tile={"M": 3}', 'tile={"M": 0}', 'tile={"M": -16}', 'tile={"M": 1 << 40}'),
    *('tile={"M": 2**40}', 'tile={"M": 16.0}', 'tile={"M": "16"}', 'tile={"Q": 16}'),
    *('tile={"D": 16}', 'tile={"M": 16, "M": 32}', "tile={M: 1}", 'tile={"m": 16}'),
    *('tile={"M": 4096, "N": 4096}', 'tile={"M": 1024, "N": 1024, "K": 1024}', "tile=16"),
    *("warps=3", "warps=0", "warps=64", "warps=-4", "warps=4.0", "warps=True", 'warps="4"'),
    *("stages=0", "stages=9", "stages=-1", "stages=2.5", "stages=None", "unroll=2"),
    *('tile={"M": 128, "N": 128}, warps=1', 'tile={"M": 16, "N": 16}, warps=32'),
    *("warps=4, warps=8", "tile={}", "tile={**x}", "tile=[16]", "stages=1e400"),
)
ODD = (
    *("\x00", "\x0c", "\r", "\t", "\xa0", "\u200b", "\ufeff", "\u2028", "\U0001f600"),
    *("\x1b", "\x7f", "é", "\u00ad", "\\", "$", "`", "?", "!", "\r\n", "\v"),
)


@dataclass(frozen=True)
class Mutant:
    """A mutated program: its bytes, what was done, and the seed that made it."""

    seed: int
    kind: str
    description: str
    data: bytes


@dataclass
class MutationSummary:
    """A run of the mutation check."""

    mutants: int = 0
    accepted: int = 0
    rejected: int = 0
    subprocess_runs: int = 0
    seconds: float = 0.0
    by_kind: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def render(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        lines = [
            f"{self.mutants} mutated programs in {self.seconds:.1f} s "
            f"({self.mutants / max(self.seconds, 1e-9):.0f}/s; {kinds}): {self.rejected} "
            f"rejected with a located error, {self.accepted} compiled; "
            f"{self.subprocess_runs} through the tilec executable",
            f"{len(self.failures)} failure(s)",
        ]
        return "\n".join(lines + [f"  {f}" for f in self.failures[:20]])


# ---------------------------------------------------------------------------------------------
# Mutations


def _replace_identifier(rng: random.Random, text: str) -> tuple[str, str]:
    matches = [m for m in IDENTIFIER.finditer(text) if m.group() not in ("def", "for", "in")]
    m = rng.choice(matches)
    word = m.group()
    options = [word + "q", word[:-1] or "q", word.swapcase(), "undefined_name", rng.choice(NAMES)]
    new = rng.choice(options)
    return text[: m.start()] + new + text[m.end() :], f"{word!r} -> {new!r}"


def _expression_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the right-hand side of every assignment or store."""
    spans = []
    for m in re.finditer(r"(?m)^ +[^\n=]*?(?:[-+*/%|&^@]|<<|>>|//|\*\*)?= (?P<rhs>[^\n]+)$", text):
        spans.append((m.start("rhs"), m.end("rhs")))
    return spans


def _wrap_expression(rng: random.Random, text: str, wrap) -> tuple[str, str]:
    spans = _expression_spans(text)
    if not spans:
        return text + "\n" + wrap("x"), "appended"
    start, end = rng.choice(spans)
    return text[:start] + wrap(text[start:end]) + text[end:], f"line at {start}"


def _broadcast(rng: random.Random, text: str) -> tuple[str, str]:
    shape = rng.choice(
        ("[3]", "[tm, 3]", "[4, 4, 4]", "[tn, tm]", "[tm, tm]", "[D, tm]", "[5, tn]", "[tn]")
    )
    dtype = rng.choice(("f32", "i32", "f16", "i1"))
    op = rng.choice(("+", "*", "-", "<"))
    if rng.random() < 0.3:
        return _wrap_expression(rng, text, lambda e: f"where(zeros({shape}, i1), {e}, 0)")
    return _wrap_expression(rng, text, lambda e: f"({e}) {op} zeros({shape}, {dtype})")


def _pin(rng: random.Random, text: str) -> tuple[str, str]:
    pin = rng.choice(PINS)
    lines = text.split("\n")
    decorated = [i for i, line in enumerate(lines) if line.startswith("@kernel(")]
    if decorated and rng.random() < 0.5:
        i = rng.choice(decorated)
        lines[i] = f"@kernel({pin})"
    else:
        defs = [i for i, line in enumerate(lines) if line.startswith("def ")]
        i = rng.choice(defs)
        if i > 0 and lines[i - 1].startswith("@kernel("):
            lines[i - 1] = f"@kernel({pin})"
        else:
            lines.insert(i, f"@kernel({pin})")
    if rng.random() < 0.2:  # the same pin where the loop is written
        loop = rng.choice(("tiles(M", "tiles(K"))
        joined = "\n".join(lines)
        at = joined.find(loop)
        close = joined.find(")", at)
        if at >= 0 and close > at:
            inner = pin.split("=", 1)[1] if pin.startswith("tile=") else "{M: 3}"
            joined = joined[:close] + f", tile={inner}" + joined[close:]
            return joined, f"tiles() pin {inner}"
    return "\n".join(lines), pin


def _literal(rng: random.Random, text: str) -> tuple[str, str]:
    literal = rng.choice(LITERALS)
    numbers = list(re.finditer(r"(?<![\w.])\d+(?:\.\d*)?(?:e-?\d+)?(?![\w.])", text))
    if numbers and rng.random() < 0.5:
        m = rng.choice(numbers)
        return text[: m.start()] + literal + text[m.end() :], f"{m.group()} -> {literal}"
    op = rng.choice(("+", "*", "//", "<<", "&", "-", "**"))
    return _wrap_expression(rng, text, lambda e: f"({e}) {op} {literal}")


def _nesting(rng: random.Random, text: str) -> tuple[str, str]:
    # Past Python's recursion limit (1000) is what matters; a few go far beyond it.
    depth = rng.choice((100, 500, 1000, 1500, 3000)) if rng.random() < 0.95 else 30000
    what = rng.randrange(6)
    if what == 0:
        return _wrap_expression(rng, text, lambda e: "(" * depth + e + ")" * depth)
    if what == 1:
        return _wrap_expression(rng, text, lambda e: "-" * depth + f"({e})")
    if what == 2:
        return _wrap_expression(rng, text, lambda e: "abs(" * depth + e + ")" * depth)
    if what == 3:
        return _wrap_expression(rng, text, lambda e: f"({e})" + " + 1" * depth)
    if what == 4:
        levels = min(depth, 200)
        nest = (
            "".join("    " * (2 + i) + f"for e{i} in tiles(M):\n" for i in range(levels))
            + "    " * (2 + levels)
            + "pass\n"
        )
        lines = text.rstrip("\n").split("\n")
        return "\n".join(lines) + "\n" + nest, f"{levels} nested loops"
    return _wrap_expression(rng, text, lambda e: "[" * depth + e + "]" * depth)


def _odd_bytes(rng: random.Random, text: str) -> tuple[bytes, str]:
    data = text.encode("utf-8")
    count = rng.choice((1, 1, 2, 5))
    done = []
    for _ in range(count):
        at = rng.randrange(len(data) + 1)
        if rng.random() < 0.25:
            raw = rng.choice((b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80"))
        else:
            raw = rng.choice(ODD).encode("utf-8")
        data = data[:at] + raw + data[at:]
        done.append(f"{raw!r}@{at}")
    if rng.random() < 0.1:
        data = data.replace(b"\n", rng.choice((b"\r", b"\r\n", b"\n\n\t")))
        done.append("line endings")
    return data, ", ".join(done)


def _tokens(rng: random.Random, text: str) -> tuple[str, str]:
    tokens = TOKEN.findall(text)
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        i = rng.randrange(len(tokens))
        operation = rng.randrange(4)
        if operation == 0:
            del tokens[i]
            done.append(f"delete {i}")
        elif operation == 1:
            tokens.insert(i, tokens[i])
            done.append(f"duplicate {i}")
        elif operation == 2 and i + 2 < len(tokens):
            tokens[i], tokens[i + 2] = tokens[i + 2], tokens[i]
            done.append(f"swap {i}")
        else:
            tokens[i] = rng.choice([*NAMES, "(", ")", ":", ",", "=", "\n    ", "@", "[", "]"])
            done.append(f"replace {i}")
        if not tokens:
            break
    return "".join(tokens), ", ".join(done)


def mutate(seed: int, kind: str | None = None) -> Mutant:
    """The mutant of `seed`: a generated program with one mutation (of `kind`, else one
    chosen by the seed)."""
    rng = random.Random(f"tilec-mutant-{seed}")
    kind = kind or KINDS[seed % len(KINDS)]
    text = sample_program(seed, kernels=rng.choice((1, 1, 2))).source
    if kind == "bytes":
        data, description = _odd_bytes(rng, text)
        return Mutant(seed, kind, description, data)
    mutation = {
        "name": _replace_identifier,
        "broadcast": _broadcast,
        "pin": _pin,
        "literal": _literal,
        "nesting": _nesting,
        "token": _tokens,
    }[kind]
    mutated, description = mutation(rng, text)
    return Mutant(seed, kind, description, mutated.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------------------------------------
# The check


def _verdict(mutant: Mutant, path: str, returncode: int, stderr: str, how: str) -> str | None:
    """None when the outcome is acceptable, else what was wrong."""
    head = f"seed {mutant.seed} ({mutant.kind}: {mutant.description[:60]}) {how}"
    if returncode == 0:
        return None
    if "Traceback" in stderr or "internal compiler error" in stderr:
        return f"{head}: a traceback or internal error (exit {returncode}):\n{stderr[-3000:]}"
    if returncode != 1:
        return f"{head}: exit status {returncode}:\n{stderr[-2000:]}"
    m = LOCATED.search(stderr)
    if m is None or not stderr.startswith(m.group("file")) or int(m.group("line")) < 1:
        return f"{head}: the error is not located (file:line:col: error:):\n{stderr[-2000:]}"
    if os.path.basename(m.group("file")) != os.path.basename(path):
        return f"{head}: the error names {m.group('file')}, not the file:\n{stderr[-2000:]}"
    return None


def _arguments(path: str, output: str) -> list[str]:
    return ["compile", path, "--emit", "tir", "-p", DEFAULT_PIPELINE, "-o", output]


def check_mutant(mutant: Mutant, directory: str, subprocess_run: bool = False) -> str | None:
    """Compile `mutant` as `tilec compile` does, in-process (or through the `tilec`
    executable): None when it compiled or failed with a located error and exit status 1,
    else what went wrong."""
    from tilec.cli import main

    path = os.path.join(directory, f"mutant-{mutant.seed}.tile")
    output = os.path.join(directory, "out.tir")
    with open(path, "wb") as f:
        f.write(mutant.data)
    if subprocess_run:
        result = subprocess.run(
            [*_tilec_command(), *_arguments(path, output)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
        )
        return _verdict(mutant, path, result.returncode, result.stderr, "through tilec")
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            returncode = main(_arguments(path, output))
    except BaseException:  # the property under test: nothing escapes main
        return (
            f"seed {mutant.seed} ({mutant.kind}): escaped tilec.cli.main:\n"
            + (traceback.format_exc()[-3000:])
        )
    return _verdict(mutant, path, returncode, stderr.getvalue(), "in-process")


def _tilec_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "tilec")
    if os.path.exists(script):
        return [script]
    found = shutil.which("tilec")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from tilec.cli import main; sys.exit(main())"]


def _check_range(job: tuple[int, int, int]) -> MutationSummary:
    first, count, subprocess_every = job
    summary = MutationSummary()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tilec-mutants-") as directory:
        for seed in range(first, first + count):
            mutant = mutate(seed)
            through = bool(subprocess_every) and seed % subprocess_every == 0
            problem = check_mutant(mutant, directory, subprocess_run=through)
            summary.mutants += 1
            summary.subprocess_runs += through
            summary.by_kind[mutant.kind] += 1
            if problem is not None:
                summary.failures.append(problem)
            else:
                # A rejected mutant leaves no output file behind.
                output = os.path.join(directory, "out.tir")
                if os.path.exists(output):
                    summary.accepted += 1
                    os.remove(output)
                else:
                    summary.rejected += 1
    summary.seconds = time.perf_counter() - start
    return summary


def run_mutations(
    count: int, *, seed: int = 0, workers: int = 1, subprocess_every: int = 1000
) -> MutationSummary:
    """Check `count` mutants (seeds `seed` ...), on `workers` processes; every
    `subprocess_every`-th goes through the `tilec` executable."""
    start = time.perf_counter()
    chunk = max(1, -(-count // max(workers * 4, 1)))
    jobs = [
        (s, min(chunk, seed + count - s), subprocess_every)
        for s in range(seed, seed + count, chunk)
    ]
    if workers <= 1:
        parts = [_check_range(job) for job in jobs]
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(workers) as pool:  # fork can hang
            parts = pool.map(_check_range, jobs)
    total = MutationSummary()
    for part in parts:
        total.mutants += part.mutants
        total.accepted += part.accepted
        total.rejected += part.rejected
        total.subprocess_runs += part.subprocess_runs
        total.by_kind.update(part.by_kind)
        total.failures += part.failures
    total.seconds = time.perf_counter() - start
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--subprocess-every", type=int, default=1000)
    parser.add_argument("--show", action="store_true", help="print the mutant of --seed")
    args = parser.parse_args(argv)
    if args.show:
        mutant = mutate(args.seed)
        print(f"# {mutant.kind}: {mutant.description}")
        sys.stdout.write(mutant.data.decode("utf-8", "replace"))
        return 0
    summary = run_mutations(
        args.count, seed=args.seed, workers=args.workers, subprocess_every=args.subprocess_every
    )
    print(summary.render())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
