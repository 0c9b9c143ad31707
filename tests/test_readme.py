"""The README's pipeline snippet parses and imports only what exists."""

import ast
import re

from tests.conftest import ROOT


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_readme_snippet_parses_and_its_imports_resolve():
    tree = ast.parse(readme_snippet())
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert len(imports) >= 5
    # Only the import statements run: the rest needs a transport and real services.
    exec(compile(ast.Module(body=imports, type_ignores=[]), "README.md", "exec"), {})
    names = {alias.asname or alias.name for n in imports for alias in n.names}
    assert {"TwoUpdateStabilizer", "SpeculativePrefill", "TTFAObserver"} <= names
