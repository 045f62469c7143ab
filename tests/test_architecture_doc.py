"""docs/architecture.md names every module of the daemon and of the core, so the map a new
contributor reads is the code as it is: a module added without its line fails here.

A module is named by its path under its package (`config/check.py`, `statestore/metrics.py`) or
under the crate (`src/service/store.rs`, `hook/src/main.rs`), as a whole word: `metrics.py` does not
count as named by `statestore/metrics.py`. Detector modules may share a line, by file name, after
`src/engine/detectors/`."""
from __future__ import annotations

import pathlib
import re
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
ROOTS = ("server/loopwarden_server/", "core/")  # what the doc's paths are relative to
DETECTORS = "src/engine/detectors/"


def modules() -> list[str]:
    """Every tracked module, by the path the doc names it with."""
    listed = subprocess.run(["git", "ls-files", "server/loopwarden_server", "core/src", "core/hook/src"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for path in listed:
        if not path.endswith((".py", ".rs")):
            continue
        root = next(prefix for prefix in ROOTS if path.startswith(prefix))
        found.append(path[len(root):])
    return sorted(found)


def named(text: str, module: str) -> bool:
    if re.search(rf"(?<![\w/.]){re.escape(module)}(?!\w)", text):
        return True
    if module.startswith(DETECTORS):  # detectors listed together after their folder
        listing = text[text.index(DETECTORS):] if DETECTORS in text else ""
        name = module[len(DETECTORS):]
        return re.search(rf"(?<![\w/.]){re.escape(name)}(?!\w)", listing[:2000]) is not None
    return False


def test_every_module_of_the_daemon_and_the_core_is_named():
    text = DOC.read_text()
    found = modules()
    assert len(found) > 100, "the listing found the modules"
    missing = [module for module in found if not named(text, module)]
    assert not missing, f"docs/architecture.md does not name these modules: {missing}"


def test_a_module_named_only_inside_a_longer_path_is_not_named():
    assert not named("    statestore/metrics.py   the state store's metrics", "metrics.py")
    assert named("    metrics.py   every metric", "metrics.py")
