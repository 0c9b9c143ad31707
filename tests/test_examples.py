"""The example bots compile, and the shared pipeline module imports with the bench extras."""

import importlib.util
import py_compile

from tests.conftest import ROOT


def test_example_bots_compile():
    for path in sorted((ROOT / "examples").glob("*.py")):
        py_compile.compile(str(path), doraise=True)


def test_bot_common_imports_and_exposes_run_bot():
    spec = importlib.util.spec_from_file_location("bot_common", ROOT / "examples/bot_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.run_bot)
