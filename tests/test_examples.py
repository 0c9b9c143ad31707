"""The example bots compile, and the shared pipeline module imports with the bench extras."""

import ast
import importlib
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


def pipecat_imports(source: str, filename: str) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from pipecat... import name`` in ``source``."""
    tree = ast.parse(source, filename)
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipecat.")
        for alias in node.names
    ]


def deprecated_uses(source: str, filename: str) -> list[str]:
    """Pipecat names ``source`` imports that Pipecat marks deprecated (PEP 702 ``@deprecated``),
    or a module Pipecat's docstring calls deprecated (``pipecat.pipeline.runner``)."""
    found = []
    for module_name, name in pipecat_imports(source, filename):
        module = importlib.import_module(module_name)
        if (module.__doc__ or "").lstrip().lower().startswith("deprecated module"):
            found.append(f"{filename}: module {module_name} is deprecated")
        if getattr(getattr(module, name), "__deprecated__", None):
            found.append(
                f"{filename}: {module_name}.{name}: {getattr(module, name).__deprecated__}"
            )
    return found


def test_the_deprecation_check_catches_pipeline_runner():
    source = "from pipecat.pipeline.runner import PipelineRunner\n"
    assert any("PipelineRunner" in line for line in deprecated_uses(source, "x.py"))
    assert deprecated_uses("from pipecat.workers.runner import WorkerRunner\n", "x.py") == []


def test_examples_and_readme_import_no_deprecated_pipecat_api():
    sources = {p.name: p.read_text("utf-8") for p in sorted((ROOT / "examples").glob("*.py"))}
    readme = (ROOT / "README.md").read_text("utf-8")
    sources.update({f"README.md block {i}": b for i, b in enumerate(_python_blocks(readme))})
    found = [line for name, src in sources.items() for line in deprecated_uses(src, name)]
    assert found == []


def _python_blocks(markdown: str) -> list[str]:
    import re

    return re.findall(r"```python\n(.*?)```", markdown, re.S)
