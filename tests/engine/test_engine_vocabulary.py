"""The engine tests speak the core's vocabulary and only the core's: the names they assert with
are the core's exported tuples, and no engine test reaches for the reference engine (that is
tests/differential's job, where the oracle is used on purpose)."""
import ast
import pathlib

import loopwarden_core
import pytest

from tests.engine.driver import A, D, L, Vocabulary

ENGINE_TESTS = sorted(pathlib.Path(__file__).parent.glob("*.py"))


def test_the_names_are_the_cores_own_strings():
    assert ("warn", "generic_repeat", "critical") == (A.warn, D.generic_repeat, L.critical)
    assert set(loopwarden_core.ACTIONS) == {getattr(A, name) for name in loopwarden_core.ACTIONS}


# The reference's spellings ("WARN", a detector "none") and near misses are not the core's names.
@pytest.mark.parametrize(("vocabulary", "name"), [(A, "WARN"), (A, "warning"), (D, "none"), (D, "generic"), (L, "warn")])
def test_a_name_the_core_does_not_export_fails(vocabulary: Vocabulary, name: str):
    with pytest.raises(AttributeError):
        getattr(vocabulary, name)


@pytest.mark.parametrize("path", ENGINE_TESTS, ids=lambda p: p.name)
def test_no_engine_test_imports_the_reference_engine(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert set() == {name for name in imported if name == "tests.reference" or name.startswith("tests.reference.")}
