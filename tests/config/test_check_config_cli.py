"""`check-config FILE` run as real subprocesses, both as a module and as the `loopwarden` script."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.test_config_loader import keys_of

FIXTURES = Path(__file__).parent / "fixtures"
LOOPWARDEN_SCRIPT = Path(sys.executable).with_name("loopwarden")

COMMANDS = {
    "module": [sys.executable, "-m", "loopwarden_server.config", "check-config"],
    "console-script": [str(LOOPWARDEN_SCRIPT), "check-config"],
}


@pytest.fixture(params=sorted(COMMANDS))
def check_config(request: pytest.FixtureRequest):
    """Runs check-config on a path through one of the two entry points."""
    if request.param == "console-script" and not LOOPWARDEN_SCRIPT.exists():
        pytest.fail(f"console script missing: {LOOPWARDEN_SCRIPT} (reinstall the package)")

    def run(path: Path | str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COMMANDS[request.param], str(path)], capture_output=True, text=True, timeout=60, check=False
        )

    return run


class TestCheckConfig:
    def test_valid_file_prints_ok_summary(self, check_config) -> None:
        """A valid file exits 0 with one `ok:` line naming the file, the global settings and the agents."""
        path = FIXTURES / "valid" / "copy_paste_agent_framework.json5"
        result = check_config(path)
        assert (0, "") == (result.returncode, result.stderr)
        assert (
            f"ok: {path} (global: enabled=true W=12 C=24 G=36 U=5 H=50; agents: main, researcher, ops)\n"
            == result.stdout
        )

    def test_invalid_file_prints_exact_error(self, check_config) -> None:
        """An invalid file exits 1 with `error: FILE:LINE: <message>` on stderr and nothing on stdout."""
        path = FIXTURES / "invalid" / "warning_equals_critical.json5"
        result = check_config(path)
        assert (1, "") == (result.returncode, result.stdout)
        assert (
            f"error: {path}:3: tools.loopDetection.criticalThreshold: must be greater than warningThreshold (10), got 10\n"
            == result.stderr
        )

    def test_syntax_error_names_the_file_once(self, check_config) -> None:
        """A JSON5 syntax error already starts with the file name, which is not repeated."""
        path = FIXTURES / "invalid" / "json5_syntax_error.json5"
        result = check_config(path)
        assert 1 == result.returncode
        assert f'error: {path}: invalid JSON5: line 3: Unexpected "2" at column 49\n' == result.stderr

    def test_missing_file_exits_2(self, check_config, tmp_path: Path) -> None:
        """A file that does not exist exits 2 with a message saying it cannot be read."""
        path = tmp_path / "absent.json5"
        result = check_config(path)
        assert (2, "") == (result.returncode, result.stdout)
        assert f"error: cannot read {path}: No such file or directory\n" == result.stderr

    def test_default_config_passes(self, check_config, tmp_path: Path) -> None:
        """The embedded default config, written to disk, passes its own check."""
        from loopwarden_server.config import default_config_text

        path = tmp_path / "default.json5"
        path.write_text(default_config_text(), encoding="utf-8")
        result = check_config(path)
        assert (0, f"ok: {path} (global: enabled=true W=10 C=20 G=30 U=10 H=30; agents: none)\n") == (
            result.returncode,
            result.stdout,
        )


class TestInProcess:
    def test_main_returns_exit_code(self, capsys: pytest.CaptureFixture[str]) -> None:
        """check.main can be called directly and returns the exit code instead of exiting."""
        from loopwarden_server.config.check import main

        path = FIXTURES / "valid" / "empty_object.json5"
        assert 0 == main([str(path)])
        assert capsys.readouterr().out.startswith(f"ok: {path} (global: enabled=unset ")


class TestCheckConfigAgentForms:
    def test_entries_form_is_valid(self, check_config) -> None:
        """A file using agents.entries exits 0 and lists those agents."""
        path = FIXTURES / "valid" / "agents_entries_form.json5"
        result = check_config(path)
        assert (0, "") == (result.returncode, result.stderr)
        assert "agents: list-agent, safe-runner, researcher)" in result.stdout

    def test_one_id_in_both_forms_fails_naming_both_paths(self, check_config) -> None:
        """The same id in agents.list and agents.entries exits 1 naming both dotted paths."""
        path = FIXTURES / "invalid" / "duplicate_agent_id_across_forms.json5"
        result = check_config(path)
        assert (1, "") == (result.returncode, result.stdout)
        assert (f'error: {path}:5: agents.entries.safe-runner: duplicate agent id "safe-runner" '
                "(first at agents.list[0])\n") == result.stderr

    def test_misspelled_block_fails_with_a_suggestion(self, check_config) -> None:
        """`tools.loopDetecton` exits 1 and suggests `loopDetection`."""
        path = FIXTURES / "invalid" / "near_miss_loop_detection.json5"
        result = check_config(path)
        assert 1 == result.returncode
        assert 'tools.loopDetecton: not a key loopwarden reads here; did you mean "loopDetection"?' in result.stderr


class TestEveryProblemAtOnce:
    """check-config reports every problem of a file in one run, in file order, each as
    FILE:LINE: PATH: PROBLEM, with a suggestion for a key one or two edits from a known one."""

    def test_three_mistakes_three_lines(self, check_config) -> None:
        """A typo one edit from a setting, a wrong type and W not below C: three errors with their
        lines, one "did you mean", exit 1."""
        path = FIXTURES / "several" / "three_mistakes.json5"
        result = check_config(path)
        assert (1, "") == (result.returncode, result.stdout)
        assert result.stderr == (
            f"error: {path}:6: tools.loopDetection.criticalThreshold: must be greater than warningThreshold (20), got 10\n"
            f'error: {path}:7: tools.loopDetection.historySize: must be a positive integer, got "thirty"\n'
            f'error: {path}:11: loopwarden.shadowMod: unknown key; did you mean "shadowMode"? (allowed: {LOOPWARDEN_KEYS})\n'
        )
        assert 1 == result.stderr.count("did you mean")

    def test_problems_across_blocks_and_agents(self, check_config) -> None:
        """Problems in the global block, two agents of both spellings and a near-miss section name
        all come out, each on its own line, a swapped pair of letters counted as one edit."""
        path = FIXTURES / "several" / "across_blocks.json5"
        result = check_config(path)
        assert (1, "") == (result.returncode, result.stdout)
        assert result.stderr.splitlines() == [
            f'error: {path}:4: tools.loopDetection.warningTreshold: unknown key; did you mean "warningThreshold"? '
            "(allowed: criticalThreshold, detectors, enabled, globalCircuitBreakerThreshold, historySize, "
            "postCompactionGuard, unknownToolThreshold, warningThreshold)",
            f"error: {path}:5: tools.loopDetection.enabled: must be true or false, got \"yes\"",
            f'error: {path}:10: agents.list[0].tools.loopDetection.criticalThreshold: must be greater than '
            "warningThreshold (30), got 25",
            f"error: {path}:11: agents.list[1].id: is required (a non-empty string)",
            f'error: {path}:16: agents.entries["two words"].tools.loopDetcetion: not a key loopwarden reads here; '
            'did you mean "loopDetection"? (as written it would be ignored)',
        ]


LOOPWARDEN_KEYS = keys_of("loopwarden", per_agent=False)
