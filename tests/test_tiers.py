"""The unit tier is decided by declarations, not by a list kept apart from them: every shared fixture
(``tests/fixtures/``) is declared ``@heavy``, so a new one cannot slip into ``pytest -m unit``."""

from __future__ import annotations

import ast
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def _plain_fixtures(path: Path) -> list[str]:
    """``file:line name`` of each function in ``path`` decorated with ``pytest.fixture`` itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if ast.unparse(target) in ("pytest.fixture", "fixture"):
                found.append(f"{path.name}:{node.lineno} {node.name}")
    return found


def test_every_shared_fixture_declares_itself_heavy() -> None:
    plain = [hit for path in sorted(FIXTURES.glob("*.py")) for hit in _plain_fixtures(path)]
    assert not plain, (
        "declare these with @heavy (from tests.fixtures import heavy) so the tests using them leave the"
        f" unit tier, or move a fixture that starts nothing into a conftest.py: {plain}"
    )


def test_the_check_sees_a_plain_fixture(tmp_path: Path) -> None:
    module = tmp_path / "new_daemon.py"
    module.write_text("import pytest\n\n\n@pytest.fixture(scope='session')\ndef new_daemon():\n    yield\n")
    assert _plain_fixtures(module) == ["new_daemon.py:5 new_daemon"]
