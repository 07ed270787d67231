#!/usr/bin/env python3
"""The price of consumer-side dedup in docs/answers.md (Q5), from the committed `make bench` results.

  q5_price.py sentence|table   print that part (scripts/answers.sh writes it into the page)
  q5_price.py --rewrite        rewrite both parts in docs/answers.md between their markers, so that
                               the page quotes the bench run that docs/benchmarks.md shows
                               (`make bench` calls this after a full run)

guard_machine against baseline: throughput over a backlog, p50/p99 record age at the paced rate,
CPU per record (JVM and MariaDB). Exits 1 with a message when the results are missing or unreadable.
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_JSON = ROOT / "docs" / "benchmarks" / "results-full.json"
BENCH_MD = ROOT / "docs" / "benchmarks.md"
ANSWERS = ROOT / "docs" / "answers.md"
MARKERS = {"sentence": ("<!-- q5-price-sentence -->", "<!-- /q5-price-sentence -->"),
           "table": ("<!-- q5-price -->", "<!-- /q5-price -->")}


def run_of_page():
    """'of <date>, commit `<c>`' from the page's 'Measured by' line, or None."""
    try:
        m = re.search(r"Measured by `[^`]+` on ([^`]+?) at commit `([^`]+)`", BENCH_MD.read_text(encoding="utf-8"))
    except OSError:
        return None
    return f"of {m.group(1)}, commit `{m.group(2)}`" if m else None


class Unreadable(Exception):
    """The bench results or the answers page cannot be read or written."""


def price(part):
    try:
        s = json.loads(BENCH_JSON.read_text(encoding="utf-8"))["scenarios"]
        b, g = s["baseline"], s["guard_machine"]
        # MariaDB's CPU is null when the database is not on the bench's machine
        cpu_b = b["jvm_cpu_ms_per_record"] + b["db_cpu_ms_per_record"]
        cpu_g = g["jvm_cpu_ms_per_record"] + g["db_cpu_ms_per_record"]
        ratio, p99 = g["rec_per_s"] / b["rec_per_s"], g["p99_ms"] - b["p99_ms"]
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        raise Unreadable(f"{BENCH_JSON} is missing or lacks a figure the price needs: {e!r}") from e
    if part == "sentence":
        return (f"{ratio:.2f}× the plain pipeline's throughput ({g['rec_per_s']:,.0f} against {b['rec_per_s']:,.0f} records/s on one"
                f" sidecar), {p99:+,.0f} ms of p99 record age ({g['p99_ms']:,.0f} against {b['p99_ms']:,.0f} ms at a paced rate) and"
                f" {cpu_g - cpu_b:+.3f} ms of CPU per record (JVM and MariaDB).")
    run = run_of_page()
    lines = [f"The price, from the committed `make bench` results{' ' + run if run else ''} ([benchmarks.md](benchmarks.md),"
             " `docs/benchmarks/results-full.json`): `baseline` is the pipeline of the plain consumer above, `guard_machine` the"
             " sidecar with L1, ledger and state machine, both in the benchmark's JVM on the same broker, MariaDB and business.",
             "",
             "| | plain pipeline (`baseline`) | OnceGuard (`guard_machine`) | price |",
             "|---|---:|---:|---:|",
             f"| records/s over a backlog | {b['rec_per_s']:,.0f} | {g['rec_per_s']:,.0f} | {ratio:.2f}× |",
             f"| p50 / p99 record age at a paced rate, ms | {b['p50_ms']:,.0f} / {b['p99_ms']:,.0f} | {g['p50_ms']:,.0f} /"
             f" {g['p99_ms']:,.0f} | {g['p50_ms'] - b['p50_ms']:+,.0f} / {p99:+,.0f} |",
             f"| CPU ms per record: JVM + MariaDB | {b['jvm_cpu_ms_per_record']:.3f} + {b['db_cpu_ms_per_record']:.3f}"
             f" | {g['jvm_cpu_ms_per_record']:.3f} + {g['db_cpu_ms_per_record']:.3f} | {cpu_g - cpu_b:+.3f} |"]
    return "\n".join(lines)


def marked(part):
    begin, end = MARKERS[part]
    body = price(part)
    return f"{begin}{body}{end}" if part == "sentence" else f"{begin}\n{body}\n{end}"


def rewrite():
    try:
        text = ANSWERS.read_text(encoding="utf-8")
    except OSError as e:
        raise Unreadable(f"cannot read {ANSWERS}: {e}") from e
    for part, (begin, end) in MARKERS.items():
        pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
        if len(pattern.findall(text)) != 1:
            sys.exit(f"q5_price: {ANSWERS} has no single {begin} … {end}: write it with `make answers` first")
        text = pattern.sub(lambda _: marked(part), text)
    try:
        ANSWERS.write_text(text, encoding="utf-8")
    except OSError as e:
        raise Unreadable(f"cannot write {ANSWERS}: {e}") from e
    print(f"[q5_price] rewrote the Q5 price in {ANSWERS} from {BENCH_JSON}", file=sys.stderr)


def main(argv):
    try:
        if argv == ["--rewrite"]:
            rewrite()
        elif len(argv) == 1 and argv[0] in MARKERS:
            print(marked(argv[0]))
        else:
            sys.exit(__doc__)
    except Unreadable as e:
        print(f"q5_price: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
