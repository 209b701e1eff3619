#!/usr/bin/env python3
"""Twenty small questions about a fixture workspace (bench/embedded_questions/workspace),
asked of whittle's embedded model with `whittle -p QUESTION --output-format json`, no key
in the environment. Reports, per question and in total: how many tool calls the agent
made, whether the answer holds the expected fact (a regular expression), and the seconds
it took. Each question runs in a fresh copy of the workspace.

    python3 bench/embedded_questions.py [--whittle PATH] [--timeout 180] [--only N,M]

The binary defaults to $CARGO_TARGET_DIR/release/whittle (build it with
`cargo build --release -p whittle`). A question whose run fails or times out counts as
wrong, with no tool call.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = ROOT / "bench" / "embedded_questions" / "workspace"

# (question, regular expression the answer must match, case-insensitive)
QUESTIONS = [
    ("Which file defines the class Ledger?", r"ledger\.py"),
    ("Which file defines the function monthly_totals?", r"report\.py"),
    ("What does the README say Tallybook keeps a tally of?", r"expense"),
    ("What version number is in the VERSION file?", r"2\.4\.1"),
    ("Which license does this project use? Check the LICENSE file.", r"\bMIT\b"),
    ("What is DEFAULT_CURRENCY set to in src/config.py?", r"\bEUR\b"),
    ("How many test functions are in tests/test_ledger.py?", r"\b(3|three)\b"),
    ("What is the package name in pyproject.toml?", r"tallybook"),
    ("Which Python version does pyproject.toml require?", r"3\.10"),
    ("Which dependency does pyproject.toml list?", r"\bclick\b"),
    ("Which file defines parse_amount?", r"ledger\.py"),
    ("Which command does docs/usage.md say adds an expense?", r"tally add"),
    ("What is the first item in notes/TODO.md?", r"export"),
    ("Which folder holds the tests of this project?", r"\btests\b"),
    ("What does parse_amount in src/ledger.py return for an empty string?", r"\b(0|zero)\b"),
    ("What is the title of README.md?", r"tallybook"),
    ("What is MAX_ENTRIES set to in src/config.py?", r"\b500\b"),
    ("Which file format does the README say the expenses are kept in?", r"\bcsv\b"),
    ("Which test file tests the report module?", r"test_report\.py"),
    ("Which files are in the src folder?", r"config\.py.*ledger\.py.*report\.py|"
     r"config\.py.*report\.py.*ledger\.py|ledger\.py.*config\.py.*report\.py|"
     r"ledger\.py.*report\.py.*config\.py|report\.py.*config\.py.*ledger\.py|"
     r"report\.py.*ledger\.py.*config\.py"),
]

KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "WHITTLE_MODEL")


def main():
    ap = argparse.ArgumentParser()
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    ap.add_argument("--whittle", default=str(target / "release" / "whittle"))
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--only", default="", help="comma-separated question numbers (1-based)")
    ap.add_argument("--json", default="", help="also write the rows to this file")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["RAYON_NUM_THREADS"] = env.get("RAYON_NUM_THREADS", "2")
    only = {int(n) for n in args.only.split(",") if n.strip()}
    rows = []
    for i, (question, expected) in enumerate(QUESTIONS, 1):
        if only and i not in only:
            continue
        with tempfile.TemporaryDirectory() as d:
            ws = Path(d) / "workspace"
            shutil.copytree(WORKSPACE, ws)
            start = time.perf_counter()
            try:
                run = subprocess.run(
                    [args.whittle, "-p", question, "--output-format", "json"],
                    cwd=ws, env=env, capture_output=True, text=True, timeout=args.timeout,
                    stdin=subprocess.DEVNULL)
                seconds = time.perf_counter() - start
                lines = [l for l in run.stdout.splitlines() if l.strip().startswith("{")]
                result = json.loads(lines[-1]) if lines else {}
            except subprocess.TimeoutExpired:
                seconds, result = time.perf_counter() - start, {"error": "timeout"}
            except json.JSONDecodeError:
                seconds, result = time.perf_counter() - start, {"error": "bad json"}
        answer = result.get("result") or ""
        right = bool(re.search(expected, answer, re.I | re.S))
        calls = int(result.get("tool_calls") or 0)
        rows.append({"n": i, "question": question, "tool_calls": calls, "right": right,
                     "seconds": round(seconds, 1), "answer": answer.strip()[:300],
                     "error": result.get("error")})
        print(f"{i:2} {'RIGHT' if right else 'wrong'} calls={calls} {seconds:5.1f}s "
              f"{question}\n   -> {answer.strip()[:160]!r}", file=sys.stderr, flush=True)
    n = len(rows)
    with_tool = sum(1 for r in rows if r["tool_calls"] > 0)
    right = sum(1 for r in rows if r["right"])
    secs = sum(r["seconds"] for r in rows) / max(n, 1)
    print("| # | question | tool calls | right | s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['question']} | {r['tool_calls']} | {'yes' if r['right'] else 'no'} "
              f"| {r['seconds']} |")
    print(f"\n**{with_tool}/{n} called a tool, {right}/{n} right, {secs:.1f} s per answer "
          f"(mean)**")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
