"""The bench and demo commands fail with one clear line on bad input."""

from pathlib import Path

from pipecat_fast.cli import main


def test_unknown_configuration_is_a_clear_error(capsys):
    assert main(["bench", "--configs", "stock,nope", "--calls", "1"]) == 2
    assert "unknown bench configuration(s) nope" in capsys.readouterr().out


def test_non_positive_call_count_is_a_clear_error(capsys):
    assert main(["bench", "--calls", "0"]) == 2
    assert "at least 1" in capsys.readouterr().out


def test_an_unknown_call_id_is_a_clear_error_naming_the_known_ones(capsys):
    assert main(["bench", "--call-ids", "reschedule,nope"]) == 2
    out = capsys.readouterr().out
    assert "no call script 'nope'" in out and "reschedule" in out


def test_call_ids_choose_the_calls_the_bench_runs(monkeypatch):
    from pipecat_fast.bench import pipeline_bench

    chosen = {}

    def bench_calls(n, *, ids=None, **kwargs):
        chosen.update(n=n, ids=ids)
        raise ValueError("stop here")  # before any emulator or pipeline starts

    monkeypatch.setattr(pipeline_bench, "bench_calls", bench_calls)
    assert main(["bench", "--call-ids", "reschedule, family_languages"]) == 2
    assert chosen == {"n": None, "ids": ["reschedule", "family_languages"]}
    assert main(["bench", "--call-ids", "reschedule", "--calls", "2"]) == 2
    assert chosen == {"n": 2, "ids": ["reschedule"]}
    assert main(["bench"]) == 2
    assert chosen == {"n": 3, "ids": None}


def test_bench_without_a_suite_means_the_pipeline_suite(capsys):
    # Same error path as above, reached through `pipecat-fast bench` with no suite name.
    assert main(["bench", "--configs", "nope"]) == 2


def test_engine_without_its_extra_is_one_line_naming_the_extra(capsys, monkeypatch):
    from pipecat_fast.testing import llama_server

    monkeypatch.setattr(llama_server, "llama_cpp_available", lambda: False)
    assert main(["bench", "--engine", "llama-cpp", "--calls", "1"]) == 2
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and "pip install 'pipecat-fast[llama]'" in out


def test_demo_without_matplotlib_still_reports_and_says_which_extra(capsys, monkeypatch):
    from pipecat_fast.bench import demo

    def no_matplotlib(*args, **kwargs):
        raise ImportError("the waterfall PNG needs matplotlib: pip install 'pipecat-fast[bench]'")

    monkeypatch.setattr(demo, "waterfall_png", no_matplotlib)
    assert demo._waterfall(Path("x.png"), [], ["stock", "all"], "same-region") is None
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and "pip install 'pipecat-fast[bench]'" in out


def _command(monkeypatch, name, run):
    """Register a throwaway command module ``name`` whose ``run`` is ``run``."""
    import sys
    import types

    from pipecat_fast import cli

    module = types.ModuleType(f"pf_test_{name}")
    module.add_arguments = lambda parser: None
    module.run = run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.COMMANDS, name, (module.__name__, "test"))


def test_ctrl_c_ends_a_command_with_one_line_and_exit_130_not_a_traceback(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    _command(monkeypatch, "interrupted", interrupted)
    assert main(["interrupted"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "pipecat-fast: stopped by Ctrl-C"


def test_sigterm_unwinds_the_command_so_atexit_stops_the_engine_it_started(tmp_path):
    # A command that starts a child process the way the engine wrapper does (registered for
    # the atexit hook) and then blocks; SIGTERM must run that hook, not kill the CLI outright.
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "sleeper.py"
    script.write_text(
        "import subprocess, sys, time, types\n"
        "from pipecat_fast import cli\n"
        "from pipecat_fast.testing import llama_server\n"
        "def run(args):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
        "                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "    llama_server._LIVE_PIDS.add(child.pid)\n"
        "    print(child.pid, flush=True)\n"
        "    time.sleep(120)\n"
        "m = types.ModuleType('pf_sleeper'); m.add_arguments = lambda p: None; m.run = run\n"
        "sys.modules['pf_sleeper'] = m\n"
        "cli.COMMANDS['sleeper'] = ('pf_sleeper', 'test')\n"
        "sys.exit(cli.main(['sleeper']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    child = int(proc.stdout.readline())

    def alive(pid):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return False
        return state != "Z"  # a zombie nobody reaped yet is dead

    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM
        assert "Traceback" not in err and "stopped by SIGTERM" in err
        assert not alive(child), "the engine-like child outlived the SIGTERMed CLI"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
