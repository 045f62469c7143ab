"""`check-config FILE`: validate a config offline with exactly the loader the daemon uses, and
report every problem of the file at once, each with its line."""
from __future__ import annotations

import argparse
import sys

from loopwarden_server.config.loader import ConfigError, load_config_file, problems
from loopwarden_server.config.model import Config
from loopwarden_server.config.detection import LoopDetectionSettings

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check-config", description=__doc__)
    parser.add_argument("file", metavar="FILE", help="JSON5 config file to validate")
    file = parser.parse_args(argv).file
    try:
        config = load_config_file(file)
    except OSError as exc:
        print(f"error: cannot read {file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except ConfigError as exc:
        # Every problem of the file, one line each, in file order: FILE:LINE: PATH: PROBLEM.
        for problem in problems(exc):
            print(f"error: {located(problem, file)}", file=sys.stderr)
        return EXIT_INVALID
    print(f"ok: {file} ({summary(config)})")
    return EXIT_OK


def located(problem: ConfigError, file: str) -> str:
    """`FILE:LINE: PATH: PROBLEM`, as compilers write it (editors jump to it). A syntax error
    already starts with the file name (it is its path) and names its line: not said twice."""
    if problem.path == file:
        return str(problem)
    where = file if problem.line is None else f"{file}:{problem.line}"
    return f"{where}: {problem}"


def summary(config: Config) -> str:
    """One line a human can compare against what they meant to write."""
    settings = config.global_settings
    enabled = {True: "true", False: "false", None: "unset"}[settings.enabled]
    agents = ", ".join(config.agent_blocks) or "none"
    line = (
        f"global: enabled={enabled} W={settings.warning_threshold} C={settings.critical_threshold}"
        f" G={settings.global_circuit_breaker_threshold} U={settings.unknown_tool_threshold}"
        f" H={settings.history_size}; agents: {agents}"
    )
    if settings.preset:
        line += f"; preset: {settings.preset}"
    opt_in = _opt_in(settings)
    return line + (f"; opt-in: {opt_in}" if opt_in else "")


def _opt_in(settings: LoopDetectionSettings) -> str:
    """The global extensions that are on, in one short phrase (empty when none is)."""
    parts = []
    if settings.argument_churn_warn_at or settings.argument_churn_block_at:
        parts.append(f"argumentChurn {settings.argument_churn_warn_at}/{settings.argument_churn_block_at or '-'}")
    if settings.error_repeat_threshold:
        parts.append(f"errorRepeat {settings.error_repeat_threshold}")
    if settings.same_outcome_block_at:
        parts.append(f"sameOutcome {settings.same_outcome_block_at}/{settings.same_outcome_inconclusive_block_at}")
    if settings.run_wide_breaker_threshold:
        parts.append(f"runWideBreaker {settings.run_wide_breaker_threshold}")
    if settings.abort_after_blocks:
        parts.append(f"abortAfterBlocks {settings.abort_after_blocks}")
    if settings.ping_pong_needs_answers:
        parts.append("pingPongNeedsAnswers")
    if settings.cycle_warn_after or settings.cycle_block_after:
        parts.append(f"cycles {settings.cycle_warn_after}/{settings.cycle_block_after or '-'}")
    if settings.failure_cascade_threshold:
        parts.append(f"failureCascade {settings.failure_cascade_threshold}")
    if settings.exec_failure_streak:
        parts.append("execFailureStreak")
    if settings.duplicate_side_effect:
        parts.append("duplicateSideEffect")
    if settings.tool_rules:
        parts.append(f"toolRules {len(settings.tool_rules.rules)}")
    if settings.shadow:
        parts.append("shadowMode")
    return ", ".join(parts)
