"""The bench and demo commands fail with one clear line on bad input."""

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
