//! execFailureStreak's tests: terminal exec failures continuing one generic_repeat streak
//! across changing commands (the streak itself is `Context::failure_tail`), the cases of upstream
//! OpenClaw's tool-loop-detection tests and the resets the masked identity keeps.

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings, Verdict};

    /// The reference thresholds (W 10, C 20, G 30, H 30) with the streak on.
    fn settings() -> Settings {
        Settings { warning_threshold: 10, critical_threshold: 20, global_circuit_breaker_threshold: 30, history_size: 30,
                   exec_failure_streak: true, ..small() }
    }

    fn command(text: &str) -> String {
        format!(r#"{{"command": "{text}"}}"#)
    }

    fn exec_result(status: &str, exit_code: &str, output: &str) -> String {
        format!(r#"{{"content": [{{"type": "text", "text": "{output}"}}], "details": {{"status": "{status}", "exitCode": {exit_code}, "aggregated": "{output}"}}}}"#)
    }

    fn failing(output: &str) -> String {
        exec_result("completed", "1", output)
    }

    /// `calls` exec rounds: call i runs `commands(i)` and answers `results(i)`.
    fn rounds(run: &mut Run, calls: usize, commands: impl Fn(usize) -> String, results: impl Fn(usize) -> String) -> Vec<Verdict> {
        (0..calls).map(|i| run.round("exec", &commands(i), &results(i))).collect()
    }

    fn first_block(verdicts: &[Verdict]) -> Option<usize> {
        verdicts.iter().position(|v| v.action == Action::Block).map(|i| i + 1)
    }

    /// The acceptance line: forty commands differing in one slice, one terminal failure.
    #[test]
    fn changing_commands_with_one_failure_block_at_call_twenty_one() {
        let mut run = Run::new(settings());
        let permission = exec_result("failed", "126", "Command not executable (permission denied)");
        let verdicts = rounds(&mut run, 40, |i| command(&format!("python job-{i}.py")), |_| permission.clone());
        assert!(verdicts[..20].iter().all(|v| seen(v) == ALLOW), "no repeat of one command: nothing to warn");
        assert_eq!(seen(&verdicts[20]), (Action::Block, Detector::GenericRepeat, 20));
        assert_eq!(verdicts[20].evidence_seqs.len(), 20, "the twenty failures are the evidence");
        assert!(verdicts[20..].iter().all(|v| seen(v) == (Action::Block, Detector::GenericRepeat, 20)));
    }

    /// Under fast (C 5, churn blockAt 10) a streak across changing commands is churn: blocked at
    /// churn's threshold, while one command failing the same way is still blocked at C.
    #[test]
    fn across_commands_the_streak_is_judged_at_churns_threshold_when_later() {
        let fast = Settings { warning_threshold: 4, critical_threshold: 5, argument_churn_warn_at: 6,
                              argument_churn_block_at: 10, ..settings() };
        let failure = failing("ModuleNotFoundError: No module named 'torch'");
        let mut run = Run::new(fast.clone());
        let verdicts = rounds(&mut run, 12, |i| command(&format!("python job-{i}.py")), |_| failure.clone());
        assert_eq!(first_block(&verdicts), Some(11));
        assert_eq!(seen(&verdicts[10]), (Action::Block, Detector::GenericRepeat, 10));
        let mut run = Run::new(fast);
        let verdicts = rounds(&mut run, 7, |_| command("python job.py"), |_| failure.clone());
        assert_eq!(first_block(&verdicts), Some(6));
        assert_eq!(seen(&verdicts[5]), (Action::Block, Detector::GenericRepeat, 5));
    }

    #[test]
    fn drifting_times_pids_attempts_and_durations_keep_the_streak() {
        let mut run = Run::new(settings());
        let verdicts = rounds(&mut run, 21, |_| command("node retry.js"), |i| {
            failing(&format!("failed at 2026-08-30T10:20:{:02}Z (12:00:{:02}); attempt {i}, retry={i}, after {}ms/{}s, pid={}",
                             10 + i, 10 + i, i + 1, i + 1, 1000 + i))
        });
        assert_eq!(first_block(&verdicts), Some(21));
        assert_eq!(seen(&verdicts[20]), (Action::Block, Detector::GenericRepeat, 20));
        // Changing commands drift the same way.
        let mut run = Run::new(settings());
        let verdicts = rounds(&mut run, 21, |i| command(&format!("python job-{i}.py")), |i| failing(&format!("Traceback at 09:{:02}:00 (pid {})", i, 400 + i)));
        assert_eq!(first_block(&verdicts), Some(21));
    }

    /// Each kind of reset, 15 failures in: the streak starts over, so nothing blocks by call 34.
    #[test]
    fn another_cause_resets_the_streak() {
        let changed: [(&str, &str, &str); 4] = [
            ("exit code", "2", "connect failed: errno 111"),
            ("diagnostic text", "1", "connect failed: host unreachable"),
            ("errno", "1", "connect failed: errno 113"),
            ("calendar date", "1", "connect failed: errno 111 on 2026-08-31"),
        ];
        for (kind, code, text) in changed {
            let mut run = Run::new(settings());
            let usual = |_| failing(if kind == "calendar date" { "connect failed: errno 111 on 2026-08-30" } else { "connect failed: errno 111" });
            let mut verdicts = rounds(&mut run, 15, |i| command(&format!("curl host-{i}")), usual);
            verdicts.push(run.round("exec", &command("curl host-15"), &exec_result("completed", code, text)));
            verdicts.extend(rounds(&mut run, 18, |i| command(&format!("curl other-{i}")), usual));
            assert_eq!(first_block(&verdicts), None, "{kind}");
        }
    }

    #[test]
    fn an_intervening_command_stays_a_reset_after_the_first_resumes() {
        let mut run = Run::new(settings());
        let first = command("node first.js");
        rounds(&mut run, 19, |_| first.clone(), |i| failing(&format!("failed in pid={}", 1000 + i)));
        run.round("exec", &command("node second.js"), &failing("failed in pid=2000"));
        let v = run.round("exec", &first, &failing("failed in pid=3000"));
        assert_eq!(seen(&v), (Action::Warn, Detector::GenericRepeat, 19));
        assert_eq!(seen(&run.call("exec", &first)), (Action::Warn, Detector::GenericRepeat, 20));
    }

    #[test]
    fn a_success_or_another_tool_resets_the_streak() {
        for interruption in ["read", "exec"] {
            let mut run = Run::new(settings());
            let failure = failing("Traceback: missing package");
            rounds(&mut run, 19, |i| command(&format!("python job-{i}.py")), |_| failure.clone());
            if interruption == "read" {
                run.round("read", r#"{"path": "setup.py"}"#, r#""ok""#);
            } else {
                run.round("exec", &command("pip list"), &exec_result("completed", "0", "done"));
            }
            let verdicts = rounds(&mut run, 20, |i| command(&format!("python latest-{i}.py")), |_| failure.clone());
            assert_eq!(first_block(&verdicts), None, "{interruption}");
        }
    }

    #[test]
    fn what_is_not_a_terminal_failure_never_streaks() {
        for result in [
            exec_result("failed", "null", "process failed before spawning"),
            exec_result("completed", "0", "ok"),
            r#"{"content": [], "details": {"status": "failed", "exitCode": 1, "timedOut": true, "aggregated": "slow"}}"#.to_string(),
            r#"{"content": [{"type": "text", "text": "(Command exited with code 1)"}], "details": {"status": "completed", "exitCode": 1}}"#.to_string(),
        ] {
            let mut run = Run::new(settings());
            let verdicts = rounds(&mut run, 30, |i| command(&format!("grep target-{i}")), |_| result.clone());
            assert!(verdicts.iter().all(|v| seen(v) == ALLOW), "{result}");
        }
    }

    #[test]
    fn off_unless_configured() {
        let mut run = Run::new(Settings { exec_failure_streak: false, ..settings() });
        let failure = failing("Traceback: missing package");
        let verdicts = rounds(&mut run, 30, |i| command(&format!("python job-{i}.py")), |_| failure.clone());
        assert!(verdicts.iter().all(|v| seen(v) == ALLOW));
        assert!(run.state.history().iter().all(|r| r.failure_key().is_none()), "and no identity is kept");
    }

    /// The identities are run state: a run written and read back keeps its streak.
    #[test]
    fn identities_survive_the_state_record() {
        use crate::stored::{decode, encode, RunRecord};
        let mut run = Run::new(settings());
        let failure = failing("Traceback: missing package");
        rounds(&mut run, 20, |i| command(&format!("python job-{i}.py")), |_| failure.clone());
        let record = RunRecord { tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 0.0, events_evaluated: 40,
                                 state: &run.state, retries: None, tree: None };
        let bytes = encode(&record);
        run.state = decode(&bytes, 64).unwrap().state;
        assert!(run.state.history().iter().any(|r| r.failure_key().is_some()));
        assert_eq!(seen(&run.call("exec", &command("python next.py"))), (Action::Block, Detector::GenericRepeat, 20));
    }
}
