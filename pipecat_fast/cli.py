"""``pipecat-fast`` command line: ``demo``, ``bench [SUITE]`` and ``lint``.

Each command lives in its own module that exposes ``add_arguments(parser)`` and
``run(args) -> int``; this file only routes to them, importing lazily so that
``pipecat-fast lint`` does not load the audio stack.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "pipecat_fast.bench.demo",
        "synthesized caller speech through a real Pipecat pipeline, stock beside pipecat-fast",
    ),
    "lint": ("pipecat_fast.lint.cli", "find prompt-cache busters in prompts and prompt code"),
}

BENCH_SUITES: dict[str, tuple[str, str]] = {
    "pipeline": (
        "pipecat_fast.bench.pipeline_bench",
        "stock vs pipecat-fast configurations, interleaved call by call (default)",
    ),
    "sbd": (
        "pipecat_fast.bench.evals.sbd",
        "streaming sentence-boundary accuracy: ours vs Pipecat vs pySBD",
    ),
    "partials": (
        "pipecat_fast.bench.evals.partials",
        "prefill tokens re-read on real ASR partial sequences",
    ),
    "lint": (
        "pipecat_fast.bench.evals.lint",
        "real-prompt confusion table for the cache-bust linter",
    ),
    "overhead": (
        "pipecat_fast.bench.evals.overhead",
        "CPU each lever adds per frame, against a no-op (interleaved, medians)",
    ),
    "bargein": (
        "pipecat_fast.bench.evals.bargein",
        "barge-in truncation: words committed vs heard, timestamps vs estimate vs stock",
    ),
    "load": (
        "pipecat_fast.bench.load",
        "K concurrent callers on one shared engine: TTFA, queue and compute per config and K",
    ),
}


def _build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pipecat-fast", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = argv[0] if argv else None
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == wanted:
            importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module)
    bench = sub.add_parser("bench", help="benchmarks; SUITE defaults to 'pipeline'")
    suites = bench.add_subparsers(dest="suite", required=True)
    wanted_suite = argv[1] if wanted == "bench" and len(argv) > 1 else None
    for name, (module, help_text) in BENCH_SUITES.items():
        p = suites.add_parser(name, help=help_text)
        if name == wanted_suite:
            importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pipecat-fast`` script.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The process exit code.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # `pipecat-fast bench --calls 4` means the default suite.
    if argv and argv[0] == "bench" and (len(argv) == 1 or argv[1] not in BENCH_SUITES):
        if not (len(argv) > 1 and argv[1] in ("-h", "--help")):
            argv.insert(1, "pipeline")
    parser = _build_parser(argv)
    args = parser.parse_args(argv)
    with _interruptible() as stopped_by:
        return int(importlib.import_module(args._module).run(args) or 0)
    # Ctrl-C or SIGTERM: the command's servers and engines were stopped on the way out (their
    # context managers ran; atexit hooks kill what an owner left), and no traceback is printed.
    print(f"pipecat-fast: stopped by {stopped_by[0]}", file=sys.stderr)
    return 128 + stopped_by[1]


class _interruptible:
    """Ctrl-C or SIGTERM ends the command quietly, after its cleanup ran.

    Async commands run through :func:`pipecat_fast._signals.run`, which turns SIGTERM into a
    cancellation of the command's task; for the rest, SIGTERM here raises the same interrupt.
    A swallowed interrupt leaves ``(name, signal number)`` in the list this yields.
    """

    def __enter__(self) -> list:
        self.stopped: list = []
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self.stopped

    def _on_sigterm(self, signum, frame) -> None:
        from pipecat_fast._signals import Terminated

        raise Terminated

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        if exc_type is None or not issubclass(exc_type, KeyboardInterrupt):
            return False
        from pipecat_fast._signals import Terminated

        if issubclass(exc_type, Terminated):
            self.stopped[:] = ["SIGTERM", int(signal.SIGTERM)]
        else:
            self.stopped[:] = ["Ctrl-C", int(signal.SIGINT)]
        return True


if __name__ == "__main__":
    sys.exit(main())
