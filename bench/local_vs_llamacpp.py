#!/usr/bin/env python3
"""whittle-local beside llama.cpp (llama-cpp-python 0.3.x) on the same GGUF file, same
thread count, in one run: prompt processing at ~200 and ~800 tokens, generation after a
short prompt and after a ~2,000-token one (the agent's calls generate after thousands of
tokens of system prompt, where attention dominates), and the time to first token of a
second agent call. Rounds alternate between the two engines and
the median of each is reported with the ratio whittle / llama.cpp (the machine is shared,
so only ratios measured side by side mean anything).

    python3 bench/local_vs_llamacpp.py [--threads 2] [--rounds 3] [--model PATH]

Needs `pip install llama-cpp-python` in the interpreter running it, and builds the
`speed` example of whittle-local in release mode (CARGO_TARGET_DIR is honoured).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILLER = ("The agent reads the failing test, finds the off-by-one error in the loop, "
          "and fixes it. ")


def default_model():
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    found = sorted((cache / "whittle" / "models").glob("*.gguf"))
    if not found:
        sys.exit("no model in the whittle cache: run `whittle model pull` first")
    return str(found[0])


def prompts(llm, sizes, directory):
    """Prompt texts of about `size` tokens each, cut from the same filler."""
    files, texts = [], []
    for size in sizes:
        ids = llm.tokenize((FILLER * (size // 10 + 20)).encode(), add_bos=False)[:size]
        text = llm.detokenize(ids).decode("utf-8", "replace")
        path = Path(directory) / f"prompt_{size}.txt"
        path.write_text(text)
        files.append(str(path))
        texts.append(text)
    return files, texts


LONG = 2000  # prompt tokens before the long-context generation
LONG_GEN = 64  # tokens generated after it


def llama_round(llm, texts, long_text):
    out = {"pp": []}
    for text in texts:
        ids = llm.tokenize(text.encode(), add_bos=False)
        llm.reset()
        t, c = time.perf_counter(), time.process_time()
        llm.eval(ids)
        out["pp"].append({"tokens": len(ids), "tokens_per_s": len(ids) / (time.perf_counter() - t),
                          "tokens_per_cpu_s": len(ids) / (time.process_time() - c)})
    # Generation: greedy, 128 tokens after the same short prompt.
    llm.reset()
    ids = llm.tokenize(b"Once upon a time, in a land far away, there lived a dragon who", add_bos=False)
    n, start = 0, None
    for _tok in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        n += 1
        if n == 1:
            start = time.perf_counter()  # the first token closes the prompt
            cpu = time.process_time()
        if n == 129:
            break
    out["tg_tokens_per_s"] = (n - 1) / (time.perf_counter() - start)
    out["tg_tokens_per_cpu_s"] = (n - 1) / (time.process_time() - cpu)
    # Generation after the long prompt, timed as whittle's speed example does: from the
    # first generated token (which closes the prompt) to the last.
    llm.reset()
    ids = llm.tokenize(long_text.encode(), add_bos=False)
    n = 0
    for _tok in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        n += 1
        if n == 1:
            start, cpu = time.perf_counter(), time.process_time()
        if n == LONG_GEN:
            break
    out["long_tg_tokens_per_s"] = (n - 1) / (time.perf_counter() - start)
    out["long_tg_tokens_per_cpu_s"] = (n - 1) / (time.process_time() - cpu)
    out["long_prompt_tokens"] = len(ids)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=None)
    ap.add_argument("--no-build", action="store_true", help="use the speed example as built")
    args = ap.parse_args()
    model = args.model or default_model()
    from llama_cpp import Llama, __version__ as llama_version

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "whittle-local", "--example", "speed"],
                       cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    speed = target / "release" / "examples" / "speed"
    llm = Llama(model_path=model, n_ctx=4096, n_threads=args.threads, n_threads_batch=args.threads,
                n_batch=512, verbose=False)
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as d:
        files, texts = prompts(llm, [200, 800], d)
        (long_file,), (long_text,) = prompts(llm, [LONG], d)
        ours, theirs = [], []
        for _ in range(args.rounds):
            theirs.append(llama_round(llm, texts, long_text))
            run = subprocess.run([str(speed), model, "--long", long_file, *files], env=env, check=True,
                                 capture_output=True, text=True)
            ours.append(json.loads(run.stdout))
    med = statistics.median
    print(f"model {Path(model).name}, {args.threads} threads, {args.rounds} alternating rounds, "
          f"llama-cpp-python {llama_version}; medians")
    print(f"{'':28}{'whittle':>10}{'llama.cpp':>11}{'ratio':>8}")
    def row(label, value):
        a, b = med(map(value, ours)), med(map(value, theirs))
        print(f"{label:28}{a:10.1f}{b:11.1f}{a / b:8.2f}")

    def rows(unit, rate):
        for i in range(2):
            n = ours[0]["pp"][i]["tokens"]
            row(f"prompt {n} tok ({unit})", lambda r: r["pp"][i][rate])
        tg = "tg_" + rate
        row(f"generation ({unit})", lambda r: r[tg])
        n = ours[0]["long_prompt_tokens"]
        row(f"gen after {n} ({unit})", lambda r: r["long_" + tg])

    rows("tok/s", "tokens_per_s")
    # Tokens per CPU second (process time, all threads): far steadier than wall time on a
    # loaded machine. At 1 thread it compares the work done; above 1, llama.cpp's
    # threads spin while waiting and that counts as its CPU time.
    if all(r.get("tg_tokens_per_cpu_s") for r in ours):
        rows("tok/cpu-s", "tokens_per_cpu_s")
    print(f"load average at the end: {open('/proc/loadavg').read().split()[0:3]}")
    last = ours[-1]
    print(f"second agent call: {last['second_call_prompt_tokens']} prompt tokens, "
          f"{last['second_call_cached']} from the cache, first token after "
          f"{med(r['second_call_first_token_s'] for r in ours):.3f} s "
          f"(first call's prompt: {last['session_prompt_tokens']} tokens); "
          f"{last['long_tg_tokens']} tokens generated after the long prompt; "
          f"load {med(r['load_s'] for r in ours):.2f} s")


if __name__ == "__main__":
    main()
