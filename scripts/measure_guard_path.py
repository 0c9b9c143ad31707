"""CacheBustGuard's CPU per LLM request, before and after moving it off the request path.

Times the guard's inline hooks the way an LLM service runs them for one request, against
hooks that do nothing, for the guard of this checkout and the guard of an earlier revision
(``--before``, default: the commit before the change), interleaved rep by rep in one
process. The same inputs as ``pipecat-fast bench overhead``'s guard rows: a 3k- and a
30k-token system prompt, 16 history messages, the prompt unchanged or its last line changing
on every request. Clock: CPU time (``time.process_time_ns``); medians and min-max over reps.

* on the request path: ``on_before_process_frame(LLMContextFrame)`` and
  ``on_before_push_frame(LLMFullResponseStartFrame)``, before the request is sent;
* after the response: ``on_before_push_frame(LLMFullResponseEndFrame)`` and
  ``on_after_process_frame(LLMContextFrame)``.

    PYTHONPATH=$PWD python scripts/measure_guard_path.py [--before REV] [--reps 7]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BEFORE = "572ec651290d057f5adcbd01085e88457143d7c5"
"""The commit before 'CacheBustGuard off the request path'."""


def old_guard(rev: str, root: Path):
    """The CacheBustGuard class of an earlier revision, importable beside this one."""
    pkg = root / "guard_before"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
        ).stdout

    core = show("pipecat_fast/lint/guard_core.py").replace(
        "from pipecat_fast.lint.textmap import", "from guard_before.textmap import"
    )
    guard = show("pipecat_fast/lint/guard.py").replace(
        "from pipecat_fast.lint.guard_core import", "from guard_before.guard_core import"
    )
    (pkg / "textmap.py").write_text(show("pipecat_fast/lint/textmap.py"))
    (pkg / "guard_core.py").write_text(core)
    (pkg / "guard.py").write_text(guard)
    sys.path.insert(0, str(root))
    return importlib.import_module("guard_before.guard").CacheBustGuard


class NullHooks:
    def _cbg_before_process(self, service, frame):
        return None

    def _cbg_before_push(self, service, frame):
        return None

    def _cbg_after_process(self, service, frame):
        return None


def measure(factory, llm, frames, n_requests: int) -> tuple[float, float, int]:
    from pipecat.frames.frames import LLMFullResponseEndFrame, LLMFullResponseStartFrame

    hooks = factory()
    start, end = LLMFullResponseStartFrame(), LLMFullResponseEndFrame()
    on = off = 0
    gc.collect()
    for i in range(n_requests):
        frame = frames[i % len(frames)]
        t0 = time.process_time_ns()
        hooks._cbg_before_process(llm, frame)
        hooks._cbg_before_push(llm, start)
        t1 = time.process_time_ns()
        hooks._cbg_before_push(llm, end)
        hooks._cbg_after_process(llm, frame)
        off += time.process_time_ns() - t1
        on += t1 - t0
    warnings = len(getattr(hooks, "warnings", []))
    return on / n_requests / 1000, off / n_requests / 1000, warnings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help="git revision of the earlier guard")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()

    from loguru import logger

    logger.remove()
    from pipecat.frames.frames import LLMContextFrame
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.llm import OpenAILLMService

    from pipecat_fast.bench.evals.overhead import guard_context, system_prompt
    from pipecat_fast.lint.guard import CacheBustGuard

    with tempfile.TemporaryDirectory() as tmp:
        Before = old_guard(args.before, Path(tmp))
        guards = {
            "none": NullHooks,
            "before": lambda: Before(provider="openai"),
            "after": lambda: CacheBustGuard(provider="openai"),
        }
        results = {}
        for n_tokens in (3000, 30000):
            prompt = system_prompt(n_tokens)
            for case, suffixes in (
                ("unchanged", [""]),
                ("end changing", ["\n14:03:21", "\n14:03:22"]),
            ):
                llm = OpenAILLMService(api_key="not-used")
                frames = [
                    LLMContextFrame(
                        LLMContext(
                            [{"role": "system", "content": prompt + s}] + guard_context(prompt)
                        )
                    )
                    for s in suffixes
                ]
                n = 200 if n_tokens <= 5000 else 40
                runs = {k: [] for k in guards}
                for f in guards.values():
                    measure(f, llm, frames, 4)  # warm-up
                for rep in range(args.reps):
                    order = list(guards) if rep % 2 == 0 else list(guards)[::-1]
                    for k in order:
                        runs[k].append(measure(guards[k], llm, frames, n))
                results[(n_tokens, case)] = runs
    print(
        "| prompt | case | before: on the request path | after: on the request path "
        "| after: once the response ended | warnings before/after |"
    )
    print("|---|---|---|---|---|---|")
    for (n_tokens, case), runs in results.items():
        base = runs["none"]

        def over(k, idx, runs=runs, base=base):
            v = [a[idx] - b[idx] for a, b in zip(runs[k], base, strict=True)]
            return f"{statistics.median(v):,.1f} [{min(v):,.1f}–{max(v):,.1f}] µs"

        before_total = [
            a[0] + a[1] - b[0] - b[1] for a, b in zip(runs["before"], base, strict=True)
        ]
        b_total = (
            f"{statistics.median(before_total):,.1f} [{min(before_total):,.1f}–"
            f"{max(before_total):,.1f}] µs"
        )
        print(
            f"| {n_tokens:,} tokens | {case} | {b_total} | {over('after', 0)} | "
            f"{over('after', 1)} | {runs['before'][0][2]}/{runs['after'][0][2]} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
