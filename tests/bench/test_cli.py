"""The bench and demo commands fail with one clear line on bad input."""

from pathlib import Path

from pipecat_fast.cli import main


def test_unknown_configuration_is_a_clear_error(capsys):
    assert main(["bench", "--configs", "stock,nope", "--calls", "1"]) == 2
    assert "unknown bench configuration(s) nope" in capsys.readouterr().out


def test_non_positive_call_count_is_a_clear_error(capsys):
    assert main(["bench", "--calls", "0"]) == 2
    assert "at least 1" in capsys.readouterr().out


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
