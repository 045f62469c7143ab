//! The engine: one event in, one verdict out, run state updated in place. A port of
//! `engine/evaluate.py`, `state.py`, `detectors/` and `compaction_guard.py`; the Python engine
//! is the reference and the differential suite (tests/core) holds the two to the same verdicts.

use std::collections::{HashSet, VecDeque};

use crate::fingerprint::{args_digest, is_known_poll, outcome_fingerprint, Catalog, ERROR, MARKER, PENDING};
use crate::json::{decode, py_isspace, JsonError, Value};
use crate::toolnames::normalize_tool_name;

pub const MAX_ANNOUNCED_KEYS: usize = 512;
pub const MAX_SEEN_TRIPLES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow = 1,
    Warn = 2,
    Block = 3,
    Abort = 4,
    Reject = 5,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Warn => "warn",
            Action::Block => "block",
            Action::Abort => "abort",
            Action::Reject => "reject",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detector {
    None = 0,
    GenericRepeat = 1,
    KnownPollNoProgress = 2,
    PingPong = 3,
    UnknownToolRepeat = 4,
    GlobalCircuitBreaker = 5,
    PostCompactionGuard = 6,
    RunWideNoProgress = 7,
    ArgumentChurn = 8,
    ErrorRepeat = 9,
}

impl Detector {
    pub fn name(self) -> &'static str {
        match self {
            Detector::None => "none",
            Detector::GenericRepeat => "generic_repeat",
            Detector::KnownPollNoProgress => "known_poll_no_progress",
            Detector::PingPong => "ping_pong",
            Detector::UnknownToolRepeat => "unknown_tool_repeat",
            Detector::GlobalCircuitBreaker => "global_circuit_breaker",
            Detector::PostCompactionGuard => "post_compaction_guard",
            Detector::RunWideNoProgress => "run_wide_no_progress",
            Detector::ArgumentChurn => "argument_churn",
            Detector::ErrorRepeat => "error_repeat",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None = 0,
    Warning = 1,
    Critical = 2,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Verdict {
    pub action: Action,
    pub detector: Detector,
    pub level: Level,
    pub count: u32,
    pub message: String,
    pub warning_key: String,
    pub announce: bool,
    pub paired_tool_name: String,
    pub error_code: &'static str,
    pub tool_name: String,
    pub evidence_seqs: Vec<u64>,
    pub evidence_call_ids: Vec<String>,
    pub shadow_action: Option<Action>,
    pub guard_armed: bool,
}

impl Verdict {
    pub fn allow(tool_name: &str) -> Verdict {
        Verdict {
            action: Action::Allow,
            detector: Detector::None,
            level: Level::None,
            count: 0,
            message: String::new(),
            warning_key: String::new(),
            announce: false,
            paired_tool_name: String::new(),
            error_code: "",
            tool_name: tool_name.to_string(),
            evidence_seqs: Vec::new(),
            evidence_call_ids: Vec::new(),
            shadow_action: None,
            guard_armed: false,
        }
    }
    pub fn reject(code: &'static str, message: String) -> Verdict {
        let mut v = Verdict::allow("");
        v.action = Action::Reject;
        v.error_code = code;
        v.message = message;
        v
    }
}

/// Effective settings of one agent (engine/settings.py's LoopDetectionSettings).
#[derive(Clone, Debug)]
pub struct Settings {
    pub enabled: Option<bool>,
    pub history_size: usize,
    pub warning_threshold: u32,
    pub critical_threshold: u32,
    pub unknown_tool_threshold: u32,
    pub global_circuit_breaker_threshold: u32,
    pub generic_repeat: bool,
    pub known_poll_no_progress: bool,
    pub ping_pong: bool,
    pub compaction_window_size: u32,
    pub abort_after_blocks: u32,
    pub run_wide_breaker_threshold: u32,
    pub shadow: bool,
    pub argument_churn_warn_at: u32,
    pub argument_churn_block_at: u32,
    pub error_repeat_threshold: u32,
    pub ping_pong_needs_answers: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: None,
            history_size: 30,
            warning_threshold: 10,
            critical_threshold: 20,
            unknown_tool_threshold: 10,
            global_circuit_breaker_threshold: 30,
            generic_repeat: true,
            known_poll_no_progress: true,
            ping_pong: true,
            compaction_window_size: 3,
            abort_after_blocks: 0,
            run_wide_breaker_threshold: 0,
            shadow: false,
            argument_churn_warn_at: 0,
            argument_churn_block_at: 0,
            error_repeat_threshold: 0,
            ping_pong_needs_answers: false,
        }
    }
}

impl Settings {
    fn ranked_after_on(&self) -> bool {
        self.argument_churn_warn_at > 0 || self.argument_churn_block_at > 0 || self.error_repeat_threshold > 0
    }
    fn rolling_on(&self) -> bool {
        self.enabled == Some(true)
    }
    fn recording_on(&self) -> bool {
        self.enabled != Some(false)
    }
}

/// One event as the engine sees it (JSON still as text).
pub enum Event<'a> {
    ToolCall { tool_name: &'a str, params_json: &'a str, tool_call_id: &'a str, seq: u64 },
    ToolOutcome { tool_name: &'a str, params_json: &'a str, tool_call_id: &'a str, result_json: Option<&'a str>, error: Option<&'a str>, seq: u64 },
    CompactionRetry,
    RunEnd,
}

pub use crate::intern::RecordExtra;
use crate::intern::{tool_id, tool_name, ExtraHandle, OVERFLOW};

/// A tool name as records compare it: its interned id (OVERFLOW: compare names) and the name.
#[derive(Clone, Copy)]
pub struct Tool<'a> {
    pub id: u16,
    pub name: &'a str,
}

impl<'a> Tool<'a> {
    pub fn new(name: &'a str) -> Tool<'a> {
        Tool { id: tool_id(name), name }
    }
}

/// One history record: 80 bytes (the tool an interned u16 id, the rare fields behind a u32
/// handle), so a full default history of 30 is 2,400 bytes.
#[derive(Clone)]
pub struct Record {
    pub seq: u64,
    pub args: [u8; 32],
    pub result: [u8; 32],
    tool: u16,
    pub status: u8,
    /// Rare: a pending call's id, the missing tool an error named, a tool name without an id.
    extra: ExtraHandle,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("seq", &self.seq)
            .field("tool", &self.tool())
            .field("args", &hex(&self.args))
            .field("result", &hex(&self.result))
            .field("status", &self.status)
            .field("extra", &self.extra.get())
            .finish()
    }
}

impl Record {
    /// A record as the engine makes one (`tool`: the normalised name).
    pub fn new(seq: u64, tool: &str, args: [u8; 32], result: [u8; 32], status: u8, call_id: Option<&str>,
               unknown: Option<&str>) -> Record {
        Record::of(seq, Tool::new(tool), args, result, status, call_id, unknown)
    }
    fn of(seq: u64, tool: Tool, args: [u8; 32], result: [u8; 32], status: u8, call_id: Option<&str>,
          unknown: Option<&str>) -> Record {
        let mut r = Record { seq, args, result, tool: tool.id, status, extra: ExtraHandle::default() };
        let own_name = (tool.id == OVERFLOW).then(|| tool.name.into());
        r.extra = ExtraHandle::new(RecordExtra { call_id: call_id.map(Into::into), unknown: unknown.map(Into::into), tool: own_name });
        r
    }
    pub fn tool(&self) -> &str {
        if self.tool == OVERFLOW {
            return self.extra.get().and_then(|e| e.tool.as_deref()).unwrap_or("");
        }
        tool_name(self.tool).unwrap_or("")
    }
    /// Is this a record of `tool`? (An id comparison, but for names past the table's bound.)
    #[inline]
    pub fn is_tool(&self, tool: Tool) -> bool {
        self.tool == tool.id && (tool.id != OVERFLOW || self.tool() == tool.name)
    }
    #[inline]
    pub fn same_tool(&self, other: &Record) -> bool {
        self.tool == other.tool && (self.tool != OVERFLOW || self.tool() == other.tool())
    }
    pub fn call_id(&self) -> Option<&str> {
        self.extra.get().and_then(|e| e.call_id.as_deref())
    }
    pub fn unknown(&self) -> Option<&str> {
        self.extra.get().and_then(|e| e.unknown.as_deref())
    }
    /// Completing a pending call: its id goes, the missing tool an error named comes.
    fn complete(&mut self, unknown: Option<&str>) {
        if self.tool != OVERFLOW && unknown.is_none() {
            self.extra = ExtraHandle::default();
            return;
        }
        let tool = self.extra.get().and_then(|e| e.tool.clone());
        self.extra = ExtraHandle::new(RecordExtra { call_id: None, unknown: unknown.map(Into::into), tool });
    }
}

/// (tool, args digest, result status, result digest) of one observed outcome.
pub type Triple = (Box<str>, [u8; 32], u8, [u8; 32]);

#[derive(Clone, Debug)]
pub struct Guard {
    pub window_size: u32,
    pub observed: u32,
    pub first: Option<Triple>,
    pub all_identical: bool,
    pub seqs: Vec<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct RunState {
    pub capacity: usize,
    pub history: VecDeque<Record>,
    /// Boxed (8 bytes, not 24): most runs never warn.
    pub announced: Option<Box<Vec<(String, u32)>>>,
    pub guard: Option<Box<Guard>>,
    pub abort: Option<Box<Verdict>>,
    pub blocks: u32,
    pub seen_triples: Option<Box<HashSet<u64>>>,
    pub no_new_streak: u32,
}

impl RunState {
    pub fn new(capacity: usize) -> RunState {
        RunState { capacity, history: VecDeque::with_capacity(capacity.min(64)), ..Default::default() }
    }

    fn append(&mut self, record: Record) {
        while self.history.len() >= self.capacity && !self.history.is_empty() {
            self.history.pop_front();
        }
        self.history.push_back(record);
    }

    fn resize(&mut self, capacity: usize) {
        while self.history.len() > capacity {
            self.history.pop_front();
        }
        self.capacity = capacity;
    }
}

/// Digest equality as four machine words (history scans compare digests more than anything).
#[inline]
pub fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let word = |d: &[u8; 32], i: usize| u64::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3], d[i + 4], d[i + 5], d[i + 6], d[i + 7]]);
    word(a, 0) == word(b, 0) && word(a, 8) == word(b, 8) && word(a, 16) == word(b, 16) && word(a, 24) == word(b, 24)
}

pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

pub fn args_hash_text(tool: &str, digest: &[u8; 32]) -> String {
    format!("{tool}:{}", hex(digest))
}

pub fn result_hash_text(status: u8, digest: &[u8; 32]) -> Option<String> {
    match status {
        PENDING => None,
        ERROR => Some(format!("error:{}", hex(digest))),
        _ => Some(hex(digest)),
    }
}

struct Invalid(&'static str, String);

fn decode_field(text: &str, field: &str, code: &'static str, max_depth: usize) -> Result<Value, Invalid> {
    decode(text, max_depth).map_err(|e| match e {
        JsonError::TooDeep(m) => Invalid("json_too_deep", format!("{field} {m}")),
        JsonError::Invalid(m) => Invalid(code, format!("{field} is not valid JSON: {m}")),
    })
}

fn decode_params(text: &str, max_depth: usize) -> Result<Value, Invalid> {
    if text.is_empty() || text.chars().all(py_isspace) {
        return Ok(Value::Object(Vec::new()));
    }
    decode_field(text, "params_json", "invalid_params_json", max_depth)
}

/// `args_digest`, remembering the last params text hashed: a call's outcome repeats its params
/// byte for byte, and equal text (and tool) decodes to an equal value, so to an equal digest.
fn args_digest_of(tool: &str, params_json: &str, params: &Value) -> [u8; 32] {
    thread_local! {
        static LAST: std::cell::RefCell<(String, String, [u8; 32])> = const { std::cell::RefCell::new((String::new(), String::new(), [0; 32])) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.1 == params_json && last.0 == tool && !params_json.is_empty() {
            return last.2;
        }
        let digest = args_digest(tool, params);
        if params_json.len() <= 1 << 16 {
            last.0.clear();
            last.0.push_str(tool);
            last.1.clear();
            last.1.push_str(params_json);
            last.2 = digest;
        }
        digest
    })
}

struct Detection {
    detector: Detector,
    level: Level,
    count: u32,
    message: String,
    warning_key: String,
    paired_tool_name: String,
    evidence: Vec<usize>,
}

fn detection(detector: Detector, level: Level, count: u32, message: String, key: String, evidence: Vec<usize>) -> Detection {
    Detection { detector, level, count, message, warning_key: key, paired_tool_name: String::new(), evidence }
}

struct Counts {
    streak: u32,
    result_key: Option<(u8, [u8; 32])>,
    recent: u32,
}

struct Context<'a> {
    history: &'a VecDeque<Record>,
    tool: &'a str,
    t: Tool<'a>,
    args: [u8; 32],
    known_poll: bool,
    no_new_streak: u32,
    counts: Option<Counts>,
}

impl<'a> Context<'a> {
    /// Indexes of records of this call, newest first.
    fn matches(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.history.len()).rev().filter(move |&i| {
            let r = &self.history[i];
            same(&r.args, &self.args) && r.is_tool(self.t)
        })
    }

    fn counts(&mut self) -> &Counts {
        if self.counts.is_none() {
            let mut streak = 0;
            let mut recent = 0;
            let mut latest: Option<(u8, [u8; 32])> = None;
            let mut open = true;
            for i in self.matches() {
                recent += 1;
                let r = &self.history[i];
                if !open || r.status == PENDING {
                    continue;
                }
                let key = (r.status, r.result);
                match latest {
                    None => latest = Some(key),
                    Some(l) if l != key => {
                        open = false;
                        continue;
                    }
                    _ => {}
                }
                streak += 1;
            }
            self.counts = Some(Counts { streak, result_key: latest, recent });
        }
        self.counts.as_ref().unwrap()
    }

    fn args_hash(&self) -> String {
        args_hash_text(self.tool, &self.args)
    }

    fn result_key(&mut self) -> String {
        let key = self.counts().result_key;
        let result = match key {
            None => "none".to_string(),
            Some((s, d)) => result_hash_text(s, &d).unwrap_or_else(|| "none".into()),
        };
        format!("{}:{}:{}", self.tool, self.args_hash(), result)
    }

    fn streak_evidence(&self, count: u32) -> Vec<usize> {
        let mut found: Vec<usize> =
            self.matches().filter(|&i| self.history[i].status != PENDING).take(count as usize).collect();
        found.reverse();
        found
    }

    fn recent_evidence(&self) -> Vec<usize> {
        let mut found: Vec<usize> = self.matches().collect();
        found.reverse();
        found
    }
}

fn unknown_tool(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut count = 0u32;
    let mut missing: Option<&str> = None;
    for r in ctx.history.iter().rev() {
        let Some(name) = r.unknown() else { break };
        if !r.is_tool(ctx.t) {
            break;
        }
        match missing {
            None => missing = Some(name),
            Some(m) if m != name => break,
            _ => {}
        }
        count += 1;
    }
    if count < s.unknown_tool_threshold {
        return None;
    }
    let missing = missing.unwrap_or(ctx.tool).to_string();
    let size = ctx.history.len();
    Some(detection(
        Detector::UnknownToolRepeat,
        Level::Critical,
        count,
        format!("CRITICAL: unavailable tool {missing}: it does not exist here and has been tried {count} times, so this call was not run. Stop calling it and answer without it."),
        format!("unknown-tool:{}:{missing}", ctx.tool),
        (size - count as usize..size).collect(),
    ))
}

fn global_breaker(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let streak = ctx.counts().streak;
    if streak < s.global_circuit_breaker_threshold {
        return None;
    }
    let tool = ctx.tool;
    Some(detection(
        Detector::GlobalCircuitBreaker,
        Level::Critical,
        streak,
        format!("CRITICAL: global circuit breaker: {tool} returned the identical result {streak} times in a row for the same arguments, so this call was not run. Stop this loop and report that the task cannot be completed this way."),
        format!("global:{}", ctx.result_key()),
        ctx.streak_evidence(streak),
    ))
}

fn run_wide(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.run_wide_breaker_threshold;
    let streak = ctx.no_new_streak;
    if threshold == 0 || streak < threshold {
        return None;
    }
    let mut completed: Vec<usize> =
        (0..ctx.history.len()).rev().filter(|&i| ctx.history[i].status != PENDING).take(streak as usize).collect();
    completed.reverse();
    Some(detection(
        Detector::RunWideNoProgress,
        Level::Critical,
        streak,
        format!("CRITICAL: run-wide breaker: the last {streak} completed tool calls of this run, across all tools and arguments, made no progress (they only repeated calls and results already seen), so this call was not run. Stop cycling through the same actions; change approach or report the task as failed."),
        format!("run-wide:{threshold}"),
        completed,
    ))
}

fn known_poll(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !ctx.known_poll || !s.known_poll_no_progress {
        return None;
    }
    let streak = ctx.counts().streak;
    let tool = ctx.tool;
    if streak >= s.critical_threshold {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} was polled {streak} times with the same arguments and no progress: the state never changed, so this poll was not run. Stop polling and report the process as stuck or failed."),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    if streak >= s.warning_threshold {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Warning,
            streak,
            format!("WARNING: {tool} was polled {streak} times with the same arguments and no progress: the state has not changed. Wait longer between checks, or report the task as failed if the process is stuck."),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    None
}

fn ping_pong(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !s.ping_pong {
        return None;
    }
    let h = ctx.history;
    let size = h.len();
    if size < 2 {
        return None;
    }
    let last = &h[size - 1];
    if last.is_tool(ctx.t) && same(&last.args, &ctx.args) {
        return None;
    }
    let mut other_index: Option<usize> = None;
    for i in (0..size - 1).rev() {
        if !h[i].same_tool(last) || !same(&h[i].args, &last.args) {
            other_index = Some(i);
            break;
        }
    }
    let other = other_index?;
    if !h[other].is_tool(ctx.t) || !same(&h[other].args, &ctx.args) {
        return None;
    }
    let mut tail = 0usize;
    for i in (0..size).rev() {
        let r = &h[i];
        let alternates =
            if tail.is_multiple_of(2) { r.same_tool(last) && same(&r.args, &last.args) } else { r.is_tool(ctx.t) && same(&r.args, &ctx.args) };
        if !alternates {
            break;
        }
        tail += 1;
    }
    if tail < 2 {
        return None;
    }
    let mut sides: [Option<(u8, [u8; 32])>; 2] = [None, None];
    let mut evidence_ok = true;
    for offset in 0..tail {
        let r = &h[size - 1 - offset];
        if r.status == PENDING {
            evidence_ok = false;
            break;
        }
        let key = (r.status, r.result);
        let side = offset % 2;
        match sides[side] {
            None => sides[side] = Some(key),
            Some(k) if k != key => {
                evidence_ok = false;
                break;
            }
            _ => {}
        }
    }
    let silent = evidence_ok && (is_silent(&sides[0]) || is_silent(&sides[1]));
    let count = (tail + 1) as u32;
    if count < s.warning_threshold {
        return None;
    }
    let tool = ctx.tool;
    let paired = last.tool().to_string();
    let paired_hash = args_hash_text(&paired, &last.args);
    let mut pair = [ctx.args_hash(), paired_hash];
    pair.sort();
    let key = format!("pingpong:{}|{}", pair[0], pair[1]);
    let evidence: Vec<usize> = (size + 1 - count as usize..size).collect();
    let (level, message) = if count >= s.critical_threshold && evidence_ok && !(silent && s.ping_pong_needs_answers) {
        (Level::Critical, format!("CRITICAL: ping-pong loop: you have alternated between {tool} and {paired} for {count} consecutive calls and both keep returning the same results, so this call was not run. Stop switching between them; try a different approach or report the task as failed."))
    } else {
        (Level::Warning, format!("WARNING: you have alternated between {tool} and {paired} for {count} consecutive calls. This looks like a ping-pong loop: stop switching between the two, or report the task as failed."))
    };
    Some(Detection { detector: Detector::PingPong, level, count, message, warning_key: key, paired_tool_name: paired, evidence })
}

/// Outcomes that say nothing (pingPongNeedsAnswers): the default hash of an empty OpenClaw
/// result, and empty plain values.
fn is_silent(side: &Option<(u8, [u8; 32])>) -> bool {
    use crate::json::{digest as value_digest, Value};
    use std::sync::OnceLock;
    static SILENT: OnceLock<Vec<[u8; 32]>> = OnceLock::new();
    let silent = SILENT.get_or_init(|| {
        let empty_result = Value::object(vec![(b"details".to_vec(), Value::Object(vec![])), (b"text".to_vec(), Value::Str(vec![]))]);
        [empty_result, Value::Str(vec![]), Value::Null, Value::Object(vec![]), Value::Array(vec![])].iter().map(value_digest).collect()
    });
    matches!(side, Some((status, digest)) if *status == crate::fingerprint::RESULT && silent.contains(digest))
}

fn generic_repeat(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if ctx.known_poll || !s.generic_repeat {
        return None;
    }
    let streak = ctx.counts().streak;
    let tool = ctx.tool;
    if streak >= s.critical_threshold {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} was called {streak} times with identical arguments and identical outcomes, so this call was not run: repeating it cannot make progress. Do not retry it; change approach or report that the task failed."),
            format!("generic:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    let repeats = ctx.counts().recent;
    if repeats >= s.warning_threshold {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Warning,
            repeats,
            format!("WARNING: {tool} has been called {repeats} times with identical arguments. If the result is not changing, stop repeating this call: try something else or report the task as failed."),
            format!("generic:{tool}:{}", ctx.args_hash()),
            ctx.recent_evidence(),
        ));
    }
    None
}

fn error_repeat(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.error_repeat_threshold;
    if threshold == 0 {
        return None;
    }
    let (streak, key) = {
        let c = ctx.counts();
        (c.streak, c.result_key)
    };
    match key {
        Some((status, _)) if status == ERROR && streak + 1 >= threshold => {}
        _ => return None,
    }
    let tool = ctx.tool;
    let key = format!("error:{}", ctx.result_key());
    if streak >= threshold {
        return Some(detection(
            Detector::ErrorRepeat,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} failed {streak} times in a row with identical arguments and the identical error, so this call was not run. Fix what the error says before calling it again, or report the task as failed."),
            key,
            ctx.streak_evidence(streak),
        ));
    }
    Some(detection(
        Detector::ErrorRepeat,
        Level::Warning,
        streak,
        format!("WARNING: {tool} failed {streak} times in a row with identical arguments and the identical error. Read the error and change the call: one more identical failure and it will be blocked."),
        key,
        ctx.streak_evidence(streak),
    ))
}

fn argument_churn(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let (warn_at, block_at) = (s.argument_churn_warn_at, s.argument_churn_block_at);
    if warn_at == 0 && block_at == 0 {
        return None;
    }
    let h = ctx.history;
    let mut shared: Option<(u8, [u8; 32])> = None;
    let mut seen: Vec<[u8; 32]> = Vec::new();
    let mut indexes: Vec<usize> = Vec::new();
    for i in (0..h.len()).rev() {
        let r = &h[i];
        if !r.is_tool(ctx.t) || r.status == PENDING {
            continue;
        }
        let key = (r.status, r.result);
        match shared {
            None => shared = Some(key),
            Some(k) if k != key => break,
            _ => {}
        }
        if seen.contains(&r.args) {
            break;
        }
        seen.push(r.args);
        indexes.push(i);
    }
    let (status, digest) = shared?;
    indexes.reverse();
    let streak = indexes.len() as u32;
    let tool = ctx.tool;
    let key = format!("churn:{tool}:{}", result_hash_text(status, &digest).unwrap_or_default());
    if block_at > 0 && streak >= block_at {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} was called {streak} times in a row with changing arguments and returned identical outcomes every time, so this call was not run: varying the arguments is not making progress. Change approach or report the task as failed."),
            key,
            indexes,
        ));
    }
    if warn_at > 0 && streak >= warn_at {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Warning,
            streak,
            format!("WARNING: {tool} was called {streak} times in a row with changing arguments and returned identical outcomes every time. Varying the arguments is not making progress: try something else or report the task as failed."),
            key,
            indexes,
        ));
    }
    None
}

type DetectFn = fn(&mut Context, &Settings) -> Option<Detection>;
const PRECEDENCE: [DetectFn; 6] = [unknown_tool, global_breaker, run_wide, known_poll, ping_pong, generic_repeat];
const RANKED_AFTER: [DetectFn; 2] = [error_repeat, argument_churn];

fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut found = None;
    for d in PRECEDENCE {
        found = d(ctx, s);
        if found.is_some() {
            break;
        }
    }
    if !s.ranked_after_on() || matches!(&found, Some(d) if d.level == Level::Critical) {
        return found;
    }
    let mut rank = found.as_ref().map_or(Level::None, |d| d.level);
    for d in RANKED_AFTER {
        if let Some(det) = d(ctx, s) {
            if det.level > rank {
                rank = det.level;
                let critical = det.level == Level::Critical;
                found = Some(det);
                if critical {
                    break;
                }
            }
        }
    }
    found
}

fn still_aborted(state: &RunState, tool_name: &str) -> Option<Verdict> {
    let abort = state.abort.as_ref()?;
    let mut v = (**abort).clone();
    if !tool_name.is_empty() {
        v.tool_name = tool_name.to_string();
    }
    Some(v)
}

fn gate(state: &mut RunState, s: &Settings, tool_name: &str) -> Option<Verdict> {
    if let Some(v) = still_aborted(state, tool_name) {
        return Some(v);
    }
    if !s.recording_on() {
        return Some(Verdict::allow(tool_name));
    }
    if s.history_size != state.capacity {
        state.resize(s.history_size);
    }
    None
}

fn evidence(state: &RunState, indexes: &[usize]) -> (Vec<u64>, Vec<String>) {
    let seqs = indexes.iter().map(|&i| state.history[i].seq).collect();
    let ids = indexes
        .iter()
        .filter_map(|&i| state.history[i].call_id().map(str::to_string))
        .collect();
    (seqs, ids)
}

fn shadowed(mut v: Verdict) -> Verdict {
    v.shadow_action = Some(v.action);
    v.action = Action::Allow;
    v.announce = true;
    v
}

fn announce(state: &mut RunState, key: &str, count: u32) -> bool {
    let decade = count / 10;
    let announced = state.announced.get_or_insert_with(Default::default);
    if let Some(entry) = announced.iter_mut().find(|(k, _)| k == key) {
        if decade <= entry.1 {
            return false;
        }
        entry.1 = decade;
        return true;
    }
    if announced.len() >= MAX_ANNOUNCED_KEYS {
        announced.remove(0);
    }
    announced.push((key.to_string(), decade));
    true
}

fn record(seq: u64, tool: Tool, args: [u8; 32], call_id: &str, status: u8, result: [u8; 32], unknown: Option<&str>) -> Record {
    Record::of(seq, tool, args, result, status, (!call_id.is_empty()).then_some(call_id), unknown)
}

pub fn evaluate(state: &mut RunState, event: &Event, s: &Settings, catalog: &Catalog, max_depth: usize) -> Verdict {
    let result = match event {
        Event::ToolCall { tool_name, params_json, tool_call_id, seq } => {
            on_tool_call(state, tool_name, params_json, tool_call_id, *seq, s, catalog, max_depth)
        }
        Event::ToolOutcome { tool_name, params_json, tool_call_id, result_json, error, seq } => {
            on_tool_outcome(state, tool_name, params_json, tool_call_id, *result_json, *error, *seq, s, catalog, max_depth)
        }
        Event::CompactionRetry => Ok(still_aborted(state, "").unwrap_or_else(|| arm(state, s))),
        Event::RunEnd => Ok(Verdict::allow("")),
    };
    result.unwrap_or_else(|Invalid(code, message)| Verdict::reject(code, message))
}

fn arm(state: &mut RunState, s: &Settings) -> Verdict {
    let mut v = Verdict::allow("");
    if !s.recording_on() {
        v.message = "post-compaction guard is off (tools.loopDetection.enabled is false)".into();
        return v;
    }
    let window = s.compaction_window_size;
    state.guard = Some(Box::new(Guard { window_size: window, observed: 0, first: None, all_identical: true, seqs: Vec::new() }));
    v.message = format!("post-compaction guard armed for {window} attempts");
    v.guard_armed = true;
    v
}

#[allow(clippy::too_many_arguments)]
fn on_tool_call(
    state: &mut RunState, raw_tool: &str, params_json: &str, call_id: &str, seq: u64, s: &Settings, catalog: &Catalog,
    max_depth: usize,
) -> Result<Verdict, Invalid> {
    let tool = normalize_tool_name(raw_tool);
    let params = decode_params(params_json, max_depth)?;
    if let Some(v) = gate(state, s, &tool) {
        return Ok(v);
    }
    let digest = args_digest_of(&tool, params_json, &params);
    let t = Tool::new(&tool);
    let found = if s.rolling_on() {
        let mut ctx = Context {
            history: &state.history,
            tool: &tool,
            t,
            args: digest,
            known_poll: is_known_poll(&tool, &params, catalog),
            no_new_streak: state.no_new_streak,
            counts: None,
        };
        detect(&mut ctx, s)
    } else {
        None
    };
    let Some(det) = found else {
        state.append(record(seq, t, digest, call_id, PENDING, [0; 32], None));
        return Ok(Verdict::allow(&tool));
    };
    let (seqs, ids) = evidence(state, &det.evidence);
    let mut v = Verdict {
        action: Action::Warn,
        detector: det.detector,
        level: det.level,
        count: det.count,
        message: det.message,
        warning_key: det.warning_key,
        announce: false,
        paired_tool_name: det.paired_tool_name,
        error_code: "",
        tool_name: tool.clone(),
        evidence_seqs: seqs,
        evidence_call_ids: ids,
        shadow_action: None,
        guard_armed: false,
    };
    if det.level == Level::Critical {
        state.blocks += 1;
        v.action = Action::Block;
        v.announce = true;
        if s.abort_after_blocks > 0 && state.blocks >= s.abort_after_blocks {
            let last = v.message.strip_prefix("CRITICAL: ").unwrap_or(&v.message).to_string();
            v.message = format!(
                "CRITICAL: run aborted: this is block {} of the run ({} on {}), so the loop persisted and the run is over (tool_loop_persisted). Last block: {last}",
                state.blocks, v.detector.name(), v.tool_name
            );
            v.action = Action::Abort;
            v.error_code = "tool_loop_persisted";
        }
        if s.shadow {
            state.append(record(seq, t, digest, call_id, PENDING, [0; 32], None));
            return Ok(shadowed(v));
        }
        if v.action == Action::Abort {
            state.abort = Some(Box::new(v.clone()));
        }
        return Ok(v);
    }
    state.append(record(seq, t, digest, call_id, PENDING, [0; 32], None));
    v.announce = announce(state, &v.warning_key, v.count);
    Ok(v)
}

fn track_outcome(state: &mut RunState, tool: &str, args: &[u8; 32], status: u8, result: &[u8; 32]) {
    // run_wide.py's key, byte for byte (the first 8 bytes of a sha256, read big-endian): the set
    // is persisted, so a run restored into the other engine must recognise its triples.
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update(args);
    hasher.update([status]);
    hasher.update(result);
    let full = hasher.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&full[..8]);
    let key = u64::from_be_bytes(out);
    let seen = state.seen_triples.get_or_insert_with(Default::default);
    if seen.contains(&key) {
        state.no_new_streak += 1;
        return;
    }
    state.no_new_streak = 0;
    if seen.len() < MAX_SEEN_TRIPLES {
        seen.insert(key);
    }
}

#[allow(clippy::too_many_arguments)]
fn on_tool_outcome(
    state: &mut RunState, raw_tool: &str, params_json: &str, call_id: &str, result_json: Option<&str>,
    error: Option<&str>, seq: u64, s: &Settings, catalog: &Catalog, max_depth: usize,
) -> Result<Verdict, Invalid> {
    let tool = normalize_tool_name(raw_tool);
    let params = decode_params(params_json, max_depth)?;
    let has_result = error.is_none() && matches!(result_json, Some(r) if !r.is_empty());
    let result = if has_result {
        Some(decode_field(result_json.unwrap_or(""), "result_json", "invalid_result_json", max_depth)?)
    } else {
        None
    };
    if let Some(v) = gate(state, s, &tool) {
        return Ok(v);
    }
    let raw = error.or(result_json);
    let wrapped = matches!(raw, Some(r) if r.contains(MARKER));
    let fp = outcome_fingerprint(&tool, &params, result.as_ref(), error, catalog, wrapped);
    if fp.status == PENDING {
        return Ok(Verdict::allow(&tool));
    }
    let digest = args_digest_of(&tool, params_json, &params);
    let t = Tool::new(&tool);
    // Fill the newest matching pending call, or append a completed record.
    let mut filled = false;
    for i in (0..state.history.len()).rev() {
        let r = &mut state.history[i];
        if !same(&r.args, &digest) || !r.is_tool(t) || r.status != PENDING {
            continue;
        }
        if !call_id.is_empty() && r.call_id() != Some(call_id) {
            continue;
        }
        r.status = fp.status;
        r.result = fp.digest;
        r.complete(fp.unknown_tool_name.as_deref());
        filled = true;
        break;
    }
    if !filled {
        state.append(record(seq, t, digest, call_id, fp.status, fp.digest, fp.unknown_tool_name.as_deref()));
    }
    if s.run_wide_breaker_threshold > 0 {
        track_outcome(state, &tool, &digest, fp.status, &fp.digest);
    }
    if let Some(abort) = observe_outcome(state, &tool, digest, fp.status, fp.digest, seq) {
        if s.shadow {
            return Ok(shadowed(abort));
        }
        state.abort = Some(Box::new(abort.clone()));
        return Ok(abort);
    }
    Ok(Verdict::allow(&tool))
}

fn observe_outcome(state: &mut RunState, tool: &str, args: [u8; 32], status: u8, result: [u8; 32], seq: u64) -> Option<Verdict> {
    let guard = state.guard.as_mut()?;
    let triple = (Box::<str>::from(tool), args, status, result);
    match &guard.first {
        None => guard.first = Some(triple),
        Some(first) if *first != triple => guard.all_identical = false,
        _ => {}
    }
    guard.observed += 1;
    guard.seqs.push(seq);
    if guard.observed < guard.window_size {
        return None;
    }
    let guard = state.guard.take()?;
    if !guard.all_identical {
        return None;
    }
    let observed = guard.observed;
    let mut v = Verdict::allow(tool);
    v.action = Action::Abort;
    v.detector = Detector::PostCompactionGuard;
    v.level = Level::Critical;
    v.count = observed;
    v.message = format!("CRITICAL: compaction did not break the loop: after compaction, {tool} was called {observed} times with the same arguments and returned the same result each time, so the run was aborted (compaction_loop_persisted). Report the task as failed.");
    v.warning_key = format!(
        "compaction:{tool}:{}:{}",
        args_hash_text(tool, &args),
        result_hash_text(status, &result).unwrap_or_default()
    );
    v.announce = true;
    v.error_code = "compaction_loop_persisted";
    v.evidence_seqs = guard.seqs;
    Some(v)
}
