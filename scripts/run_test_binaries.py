#!/usr/bin/env python3
"""Runs the workspace's test binaries side by side, as `cargo test --workspace` would run
them one after another.

    cargo test --workspace --no-run --message-format=json-render-diagnostics > built.json
    python3 scripts/run_test_binaries.py built.json

Why: `cargo test` runs each test binary (and each crate's doc tests) in turn, so a suite
that waits on child processes and sockets leaves a core idle while it waits, and every
short suite waits for the long one before it. Here one more runs at once than the
machine has cores, the longest first (its time from the last run, kept in the target directory),
with the doc tests as one more job. Each binary runs where cargo would run it (its
package's folder, with `CARGO_MANIFEST_DIR` set); its output is kept and printed whole
when it fails. Exit status: 0 when every binary and the doc tests passed.
"""
import json, os, re, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

RESULT = re.compile(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored")


def test_binaries(built_json):
    """(name, package folder, executable) of every test binary cargo built."""
    found = []
    for line in Path(built_json).read_text().splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        package = Path(message["manifest_path"]).parent
        name = f"{package.name} {message['target']['kind'][0]} {message['target']['name']}"
        found.append((name, package, message["executable"]))
    return found


def run(job):
    """Runs one job; returns (name, exit status, output, seconds, passed, failed)."""
    name, cwd, argv, env = job
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    output = done.stdout.decode("utf-8", "replace")
    counts = [tuple(map(int, m.group(2, 3))) for m in RESULT.finditer(output)]
    passed = sum(p for p, _ in counts)
    failed = sum(f for _, f in counts)
    return name, done.returncode, output, seconds, passed, failed


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[0] + "\nusage: run_test_binaries.py BUILT_JSON")
    target = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
    times_file = target / "whittle-test-times.json"
    try:
        last_times = json.loads(times_file.read_text())
    except (OSError, ValueError):
        last_times = {}

    jobs = []
    for name, package, executable in test_binaries(sys.argv[1]):
        env = dict(os.environ, CARGO_MANIFEST_DIR=str(package), CARGO_PKG_NAME=package.name)
        jobs.append((name, package, [executable], env))
    jobs.append(("doc tests", Path.cwd(), ["cargo", "test", "--workspace", "--doc", "-q"],
                 dict(os.environ)))
    # Longest first; a job never seen before counts as long, so it is not left to the end.
    jobs.sort(key=lambda job: -last_times.get(job[0], 60.0))

    started = time.monotonic()
    passed = failed = 0
    failures = []
    times = {}
    # One job more than there are cores: many suites wait on child processes, sockets
    # and timeouts for much of their time (mcp, checkpoint, replay: wall two to four
    # times their CPU), and with a job a core two such waits at once left a core idle
    # while CPU-bound suites queued. A third job on 2 cores keeps them busy; more
    # only takes CPU from the longest suite, which sets the end.
    with ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1) as pool:
        running = [pool.submit(run, job) for job in jobs]
        for finished in as_completed(running):
            name, status, output, seconds, ok, bad = finished.result()
            times[name] = round(seconds, 2)
            passed += ok
            failed += bad
            mark = "ok  " if status == 0 else "FAIL"
            print(f"{mark} {name:<40} {ok:>4} passed {bad:>3} failed {seconds:6.1f} s", flush=True)
            if status != 0:
                failures.append((name, output))

    for name, output in failures:
        print(f"\n==== {name}: output\n{output}", flush=True)
    try:
        times_file.write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError:
        pass
    total = time.monotonic() - started
    print(f"{passed} passed, {failed} failed, {len(failures)} of {len(jobs)} jobs failed, "
          f"in {total:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
