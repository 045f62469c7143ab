//! Budgets: caps on what a run and its tree spend: tool calls per run and per
//! tree, tool seconds, tokens, dollars and wall time per tree (`loopwarden.budgets`).
//!
//! The arithmetic is here, apart from the request path, so it is tested on plain numbers. A
//! call-count budget of N lets N calls run and stops call N + 1 (the call is counted before it is
//! judged); the other budgets stop the first call after the total passed the cap (total > cap:
//! the spending is only known after the fact). A budget warns once per run, on the first call
//! that would otherwise be allowed once its spending reached `warnAt` x cap; a tree budget warns
//! each run of the tree once (each sub-agent is its own model context and needs telling).

use super::trees::Totals;
use super::wire::{EventRef, KindRef, UsageRef};
use super::Core;
use crate::engine::{ask, Action, Detector, Level, Settings, Verdict};
use crate::tables::{error_codes, messages};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    ToolCallsPerRun = 0,
    ToolCallsPerTree = 1,
    ToolSecondsPerTree = 2,
    TokensPerTree = 3,
    CostUsdPerTree = 4,
    WallSecondsPerTree = 5,
}

impl Budget {
    pub const ALL: [Budget; 6] = [
        Budget::ToolCallsPerRun, Budget::ToolCallsPerTree, Budget::ToolSecondsPerTree,
        Budget::TokensPerTree, Budget::CostUsdPerTree, Budget::WallSecondsPerTree,
    ];
    /// As the config spells it.
    pub fn name(self) -> &'static str {
        match self {
            Budget::ToolCallsPerRun => "toolCallsPerRun",
            Budget::ToolCallsPerTree => "toolCallsPerTree",
            Budget::ToolSecondsPerTree => "toolSecondsPerTree",
            Budget::TokensPerTree => "tokensPerTree",
            Budget::CostUsdPerTree => "costUsdPerTree",
            Budget::WallSecondsPerTree => "wallSecondsPerTree",
        }
    }
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
    /// Counted per call (N lets N calls run) rather than measured after the fact (total > cap).
    fn counts_calls(self) -> bool {
        matches!(self, Budget::ToolCallsPerRun | Budget::ToolCallsPerTree)
    }
    /// The cap in force (0 = off): the run's own settings for the per-run budget, the root's for the others.
    fn cap(self, run: &Settings, root: &Settings) -> f64 {
        match self {
            Budget::ToolCallsPerRun => run.budget_tool_calls_per_run as f64,
            Budget::ToolCallsPerTree => root.budget_tool_calls_per_tree as f64,
            Budget::ToolSecondsPerTree => root.budget_tool_seconds_per_tree as f64,
            Budget::TokensPerTree => root.budget_tokens_per_tree as f64,
            Budget::CostUsdPerTree => root.budget_cost_usd_per_tree,
            Budget::WallSecondsPerTree => root.budget_wall_seconds_per_tree as f64,
        }
    }
    fn format(self, amount: f64) -> String {
        match self {
            Budget::ToolCallsPerRun | Budget::ToolCallsPerTree => format!("{} tool calls", amount.max(0.0) as u64),
            Budget::ToolSecondsPerTree => format!("{:.1} s of tool time", amount.max(0.0)),
            Budget::TokensPerTree => format!("{} tokens", amount.max(0.0) as u64),
            Budget::CostUsdPerTree => format!("${:.2}", amount.max(0.0)),
            Budget::WallSecondsPerTree => format!("{:.0} s of wall time", amount.max(0.0)),
        }
    }
}

/// Whether any budget is on for a run under these settings (it then keeps totals).
pub fn any_on(run: &Settings, root: &Settings) -> bool {
    Budget::ALL.iter().any(|b| b.cap(run, root) > 0.0)
}

/// What a run and its tree have spent at a call, as the budgets read it.
pub struct Spent<'a> {
    pub run: &'a Totals,
    pub tree: &'a Totals,
    /// Seconds since the tree's first event.
    pub wall_seconds: f64,
    /// Allowances a person added per budget (index: Budget) by approving its ASK: the cap in
    /// force is cap x (1 + extensions).
    pub extensions: [u32; 6],
}

impl Spent<'_> {
    fn used(&self, budget: Budget) -> f64 {
        match budget {
            Budget::ToolCallsPerRun => self.run.tool_calls as f64,
            Budget::ToolCallsPerTree => self.tree.tool_calls as f64,
            Budget::ToolSecondsPerTree => self.tree.tool_ms as f64 / 1000.0,
            Budget::TokensPerTree => self.tree.tokens() as f64,
            Budget::CostUsdPerTree => self.tree.cost_usd,
            Budget::WallSecondsPerTree => self.wall_seconds,
        }
    }
}

/// The first budget an event that is `calls` tool calls (a tool call: 1, a model output: 0) is
/// past, as (budget, used, cap). `spent` counts the calls made before this event: its own are
/// added to the call-count budgets, so an output is stopped by one only once more calls than the
/// cap were made.
pub fn exhausted(run: &Settings, root: &Settings, spent: &Spent, calls: f64) -> Option<(Budget, f64, f64)> {
    Budget::ALL.into_iter().find_map(|b| {
        let cap = b.cap(run, root) * (1.0 + spent.extensions[b as usize] as f64);
        let used = spent.used(b) + if b.counts_calls() { calls } else { 0.0 };
        (cap > 0.0 && used > cap).then_some((b, used, cap))
    })
}

/// The first budget whose spending (this call counted) reached warnAt x cap and that this run
/// was not warned about yet, as (budget, used, cap).
pub fn to_warn(run: &Settings, root: &Settings, spent: &Spent, warned: u8) -> Option<(Budget, f64, f64)> {
    let fraction = run.budget_warn_at;
    if fraction <= 0.0 {
        return None;
    }
    Budget::ALL.into_iter().find_map(|b| {
        let cap = b.cap(run, root);
        let used = spent.used(b);
        // A small tolerance: 0.8 x 30 is 24.000000000000004 in binary floating point.
        (cap > 0.0 && warned & b.bit() == 0 && used >= fraction * cap - 1e-9 && used <= cap).then_some((b, used, cap))
    })
}

fn budget_verdict(action: Action, level: Level, tool: &str, budget: Budget, message: String) -> Verdict {
    let mut v = Verdict::allow(tool);
    v.action = action;
    v.detector = Detector::Budget;
    v.level = level;
    v.announce = true;
    v.count = 1;
    v.warning_key = format!("budget:{}", budget.name());
    v.message = message;
    v
}

/// The WARN of a budget reaching warnAt.
pub fn warning(tool: &str, (budget, used, cap): (Budget, f64, f64)) -> Verdict {
    let message = messages::budget_warning(budget.format(used), budget.name(), budget.format(cap), budget.format(cap - used));
    budget_verdict(Action::Warn, Level::Warning, tool, budget, message)
}

/// The call past a budget: ASK when `onBudget: "ask"` and the caller accepts it, else ABORT
/// `budget_exhausted`.
pub fn stop(tool: &str, (budget, used, cap): (Budget, f64, f64), ask: bool) -> Verdict {
    if ask {
        let message = messages::budget_ask(budget.name(), budget.format(cap), budget.format(used));
        return budget_verdict(Action::Ask, Level::Critical, tool, budget, message);
    }
    let message = messages::budget_exhausted_abort(budget.name(), budget.format(cap), budget.format(used));
    let mut v = budget_verdict(Action::Abort, Level::Critical, tool, budget, message);
    v.error_code = error_codes::BUDGET_EXHAUSTED;
    v
}

impl Core {
    /// Before the engine: give the run a link (and its root the tree's totals) when it is in a
    /// tree, under a budget, or sent what budgets count (usage, a tool's duration); keep the
    /// root held while its tree works. The run's root, "" for a plain run (its own root, no
    /// totals: nothing is allocated on its path).
    pub(super) fn keep_totals(&mut self, event: &EventRef, tenant: &str, run_id: &str, agent_id: &str, now: f64,
                              evictions: &mut Vec<&'static str>) -> String {
        let Some(entry) = self.store.get(tenant, run_id) else { return String::new() };
        let sent = match event.kind {
            Some(KindRef::Usage { .. }) | Some(KindRef::ModelOutput { usage: Some(_), .. }) => true,
            Some(KindRef::ToolOutcome { duration_ms, .. }) => duration_ms > 0,
            _ => false,
        };
        // A run with no link is its own root: its agent's settings are the root's.
        let settings = self.config.settings_for(agent_id);
        if entry.tree.is_none() && !sent && !any_on(settings, settings) {
            return String::new();
        }
        let root = entry.root_id().to_string();
        self.store.get_mut(tenant, run_id).expect("held").link(now);
        // The root was evicted (or expired) while its tree worked: it comes back empty, unless
        // that would evict another run (the run being evaluated among them).
        if root != run_id && !self.store.touch(tenant, &root, now, evictions) && self.store.has_room(tenant) {
            self.store.create(tenant, &root, crate::engine::RunState::new(self.config.default.history_size), now, evictions);
        }
        if let Some(r) = self.store.get_mut(tenant, &root) {
            r.link(now).tree_totals();
        }
        root
    }

    /// What the run and its tree spent, with the settings that judge it: (run's, root's), and
    /// the allowances added to each budget (the run's for its own budget, the root's for the tree's).
    #[allow(clippy::type_complexity)]
    fn spent(&self, tenant: &str, run_id: &str, root: &str, agent_id: &str, now: f64) -> Option<(Totals, Totals, f64, u8, &Settings, &Settings, [u32; 6])> {
        let link = self.store.get(tenant, run_id)?.tree.as_ref()?;
        let root_entry = self.store.get(tenant, root)?;
        let root_link = root_entry.tree.as_ref()?;
        let tree = root_link.tree.as_deref().cloned().unwrap_or_default();
        let root_agent = if root == run_id { agent_id } else { &*root_entry.agent_id };
        let mut extensions = root_link.extensions;
        extensions[Budget::ToolCallsPerRun as usize] = link.extensions[Budget::ToolCallsPerRun as usize];
        Some((link.totals.clone(), tree, (now - root_link.started).max(0.0), link.warned,
              self.config.settings_for(agent_id), self.config.settings_for(root_agent), extensions))
    }

    /// An approved budget ASK (`key` = "budget:<name>"): that budget gets another allowance of
    /// its size, on the run for its own budget, on the tree's root for a tree budget.
    pub(super) fn extend_budget(&mut self, tenant: &str, run_id: &str, root: &str, key: &str) {
        let Some(budget) = Budget::ALL.into_iter().find(|b| key.strip_prefix("budget:") == Some(b.name())) else { return };
        let holder = if budget == Budget::ToolCallsPerRun { run_id } else { root };
        if let Some(link) = self.store.get_mut(tenant, holder).and_then(|e| e.tree.as_mut()) {
            link.extensions[budget as usize] = link.extensions[budget as usize].saturating_add(1);
        }
        self.store.changed(tenant, holder);
    }

    /// Before the engine, on a tool call or a model output of a run not aborted: the ABORT (or,
    /// for a call, ASK) of an event past a budget; an ABORT is kept as the run's (shadow mode:
    /// reported, not enforced). A model output is work too: a run that only talks is stopped
    /// by its token and cost budgets at its next output.
    pub(super) fn budget_stop(&mut self, event: &EventRef, tenant: &str, run_id: &str, root: &str, agent_id: &str, now: f64) -> Option<Verdict> {
        let (tool_name, tool_call_id, calls) = match event.kind {
            Some(KindRef::ToolCall { tool_name, tool_call_id, .. }) => (tool_name, tool_call_id, 1.0),
            Some(KindRef::ModelOutput { .. }) => ("", "", 0.0),
            _ => return None,
        };
        if self.store.get(tenant, run_id)?.state.rare().abort.is_some() {
            return None;
        }
        let (run, tree, wall, _, run_s, root_s, extensions) = self.spent(tenant, run_id, root, agent_id, now)?;
        let past = exhausted(run_s, root_s, &Spent { run: &run, tree: &tree, wall_seconds: wall, extensions }, calls)?;
        let key = format!("budget:{}", past.0.name());
        let state = &self.store.get(tenant, run_id)?.state;
        // A person who said no (or did not answer in time) to going on past this budget: ABORT.
        // Only a call is held for a person (its approval names it).
        let ask = calls > 0.0 && run_s.on_budget == "ask" && event.accepts_ask
            && !ask::is_denied(state, &key, now, run_s.ask_timeout_seconds);
        let shadow = run_s.shadow;
        let tool = if calls > 0.0 { crate::toolnames::normalize_tool_name(tool_name) } else { String::new() };
        let v = stop(&tool, past, ask);
        if shadow {
            return Some(v.shadowed());
        }
        let state = &mut self.store.get_mut(tenant, run_id)?.state;
        if v.action == Action::Abort {
            state.rare_mut().abort = Some(Box::new(v.clone()));
        } else if v.action == Action::Ask {
            // Held for the person's answer: an approval extends the budget (extend_budget).
            ask::hold(state, ask::PendingAsk {
                tool_call_id: tool_call_id.into(),
                decision_id: "".into(),
                warning_key: key.into(),
                tool: tool.into(),
                args: [0; 32],
                outcome: None,
                asked_at: now,
                cause: ask::AskCause::Budget,
            });
        }
        Some(v)
    }

    /// After a verdict (not a REJECT): the event's spending counted into the run's and the
    /// tree's totals; a tool call that would be allowed warned of a stopped child or of a budget
    /// reaching warnAt; a child's first block or abort noted for its parent.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn after_verdict(&mut self, event: &EventRef, tenant: &str, run_id: &str, root: &str, agent_id: &str, now: f64,
                                verdict: &mut Verdict, blocks_before: u32, was_aborted: bool) {
        let add = |t: &mut Totals| match event.kind {
            Some(KindRef::ToolCall { .. }) => t.tool_calls = t.tool_calls.saturating_add(1),
            Some(KindRef::ToolOutcome { duration_ms, .. }) => t.tool_ms = t.tool_ms.saturating_add(duration_ms),
            Some(KindRef::Usage { input_tokens, output_tokens, cost_usd, .. })
            | Some(KindRef::ModelOutput { usage: Some(UsageRef { input_tokens, output_tokens, cost_usd, .. }), .. }) => {
                t.input_tokens = t.input_tokens.saturating_add(input_tokens);
                t.output_tokens = t.output_tokens.saturating_add(output_tokens);
                t.cost_usd += cost_usd;
            }
            _ => {}
        };
        // A run without a link counts its calls on its entry instead (request.rs).
        let linked = match self.store.get_mut(tenant, run_id).and_then(|e| e.tree.as_mut()) {
            Some(link) => {
                add(&mut link.totals);
                true
            }
            None => false,
        };
        if linked {
            if let Some(tree) = self.store.get_mut(tenant, root).and_then(|e| e.tree.as_mut()).and_then(|l| l.tree.as_mut()) {
                add(tree);
            }
            if root != run_id {
                self.store.changed(tenant, root);
            }
        }
        if let Some(KindRef::ToolCall { .. }) = event.kind {
            if verdict.action == Action::Allow && verdict.shadow_action.is_none() {
                let tool = verdict.tool_name.clone();
                if let Some(warn) = self.take_notice(tenant, run_id, &tool) {
                    *verdict = warn;
                } else if let Some((run, tree, wall, warned, run_s, root_s, _)) = self.spent(tenant, run_id, root, agent_id, now) {
                    if let Some(reached) = to_warn(run_s, root_s, &Spent { run: &run, tree: &tree, wall_seconds: wall, extensions: [0; 6] }, warned) {
                        *verdict = warning(&tool, reached);
                        if let Some(link) = self.store.get_mut(tenant, run_id).and_then(|e| e.tree.as_mut()) {
                            link.warned |= reached.0.bit();
                        }
                    }
                }
            }
        }
        self.notify_parent(tenant, run_id, verdict, blocks_before, was_aborted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_budget_of_n_lets_n_calls_run_and_warns_at_warn_at() {
        let s = Settings { budget_tool_calls_per_run: 30, ..Default::default() };
        let mut run = Totals::default();
        let tree = Totals::default();
        let mut first_warn = None;
        let mut warned = 0u8;
        for call in 1..=31u64 {
            let before = Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] };
            if let Some((b, used, cap)) = exhausted(&s, &s, &before, 1.0) {
                assert_eq!((call, b, used, cap), (31, Budget::ToolCallsPerRun, 31.0, 30.0));
                return;
            }
            run.tool_calls += 1;
            let after = Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] };
            if let Some(w) = to_warn(&s, &s, &after, warned) {
                warned |= w.0.bit();
                first_warn.get_or_insert(call);
                assert!(warning("read", w).message.contains("24 tool calls of the toolCallsPerRun budget of 30 tool calls is used; 6 tool calls left"));
            }
        }
        assert_eq!(first_warn, Some(24));
        panic!("call 31 was not stopped");
    }

    /// An approved budget ASK adds an allowance of the budget's size: the cap in force doubles.
    #[test]
    fn an_extension_adds_an_allowance_of_the_budgets_size() {
        let s = Settings { budget_tool_calls_per_run: 3, budget_tokens_per_tree: 100, ..Default::default() };
        let run = Totals { tool_calls: 3, ..Default::default() };
        let tree = Totals { input_tokens: 150, ..Default::default() };
        let spent = |extensions| Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions };
        assert_eq!(exhausted(&s, &s, &spent([0; 6]), 1.0).unwrap().0, Budget::ToolCallsPerRun);
        let calls_extended = exhausted(&s, &s, &spent([1, 0, 0, 0, 0, 0]), 1.0).unwrap();
        assert_eq!((calls_extended.0, calls_extended.2), (Budget::TokensPerTree, 100.0), "the 4th call is within 6");
        assert!(exhausted(&s, &s, &spent([1, 0, 0, 1, 0, 0]), 1.0).is_none(), "150 tokens are within 200");
    }

    #[test]
    fn measured_budgets_stop_the_first_call_after_the_total_passes_the_cap() {
        let run_s = Settings::default();
        let root_s = Settings {
            budget_tokens_per_tree: 1000,
            budget_cost_usd_per_tree: 0.5,
            budget_tool_seconds_per_tree: 2,
            budget_wall_seconds_per_tree: 60,
            ..Default::default()
        };
        let run = Totals::default();
        let mut tree = Totals { input_tokens: 600, output_tokens: 400, ..Default::default() };
        assert!(exhausted(&run_s, &root_s, &Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] }, 1.0).is_none(), "exactly the cap");
        tree.output_tokens = 401;
        assert_eq!(exhausted(&run_s, &root_s, &Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] }, 1.0).unwrap().0, Budget::TokensPerTree);
        tree.output_tokens = 0;
        tree.cost_usd = 0.51;
        assert_eq!(exhausted(&run_s, &root_s, &Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] }, 1.0).unwrap().0, Budget::CostUsdPerTree);
        tree.cost_usd = 0.0;
        tree.tool_ms = 2001;
        assert_eq!(exhausted(&run_s, &root_s, &Spent { run: &run, tree: &tree, wall_seconds: 0.0, extensions: [0; 6] }, 1.0).unwrap().0, Budget::ToolSecondsPerTree);
        tree.tool_ms = 0;
        assert_eq!(exhausted(&run_s, &root_s, &Spent { run: &run, tree: &tree, wall_seconds: 61.0, extensions: [0; 6] }, 1.0).unwrap().0, Budget::WallSecondsPerTree);
        let s = stop("read", (Budget::CostUsdPerTree, 0.51, 0.5), false);
        assert_eq!((s.action, s.error_code, s.detector), (Action::Abort, "budget_exhausted", Detector::Budget));
        assert!(s.message.contains("$0.50"), "{}", s.message);
        let ask = stop("read", (Budget::CostUsdPerTree, 0.51, 0.5), true);
        assert_eq!((ask.action, ask.error_code), (Action::Ask, ""));
    }

    #[test]
    fn a_model_output_is_no_call_for_the_call_budgets() {
        let s = Settings { budget_tool_calls_per_run: 3, ..Default::default() };
        let run = Totals { tool_calls: 3, ..Default::default() };
        let spent = Spent { run: &run, tree: &run, wall_seconds: 0.0, extensions: [0; 6] };
        assert!(exhausted(&s, &s, &spent, 0.0).is_none(), "3 calls of 3 ran: an output may follow");
        assert_eq!(exhausted(&s, &s, &spent, 1.0).map(|p| p.0), Some(Budget::ToolCallsPerRun), "a 4th call may not");
    }

    #[test]
    fn off_budgets_and_a_zero_warn_at_say_nothing() {
        let s = Settings::default();
        let big = Totals { tool_calls: u64::MAX / 2, input_tokens: 1 << 40, ..Default::default() };
        let spent = Spent { run: &big, tree: &big, wall_seconds: 1e9, extensions: [0; 6] };
        assert!(!any_on(&s, &s));
        assert!(exhausted(&s, &s, &spent, 1.0).is_none());
        let s = Settings { budget_tool_calls_per_run: 10, budget_warn_at: 0.0, ..Default::default() };
        let few = Totals { tool_calls: 9, ..Default::default() };
        assert!(to_warn(&s, &s, &Spent { run: &few, tree: &few, wall_seconds: 0.0, extensions: [0; 6] }, 0).is_none());
    }
}

/// The budgets on the request path: counted once per event (retries spend nothing), usage into
/// the tree, ASK that does not abort.
#[cfg(test)]
mod service_tests {
    use crate::engine::Action;
    use crate::pb;
    use crate::service::{Config, Core, Limits, Summary};

    fn core() -> Core {
        let mut core = Core::new(Config::default(), Limits::default(), 100, 3600.0, "t".into(), vec![]);
        core.config.default.budget_tool_calls_per_tree = 3;
        core
    }

    fn call(run: &str, parent: &str, seq: u64, n: u32) -> pb::Event {
        pb::Event {
            run_id: run.into(),
            parent_run_id: parent.into(),
            seq,
            kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), params_json: format!(r#"{{"n":{n}}}"#), ..Default::default() })),
            ..Default::default()
        }
    }

    fn send(core: &mut Core, event: pb::Event) -> crate::engine::Verdict {
        core.evaluate_event(&event, "", 1.0, &mut Summary::default()).verdict
    }

    #[test]
    fn a_retry_spends_nothing_and_a_tree_budget_stops_every_run_of_the_tree() {
        let mut core = core();
        send(&mut core, call("root", "", 1, 1));
        send(&mut core, call("kid", "root", 1, 2));
        send(&mut core, call("kid", "root", 1, 2)); // a retry: answered from the window
        let third = send(&mut core, call("kid", "", 2, 3));
        assert_ne!(third.action, Action::Abort, "3 of 3: not past the cap");
        let tree = core.store.get("", "root").unwrap().tree.as_ref().unwrap().tree.as_ref().unwrap().tool_calls;
        assert_eq!(tree, 3);
        let past = send(&mut core, call("root", "", 2, 4));
        assert_eq!((past.action, past.error_code), (Action::Abort, "budget_exhausted"));
        assert_eq!(send(&mut core, call("kid", "", 3, 5)).error_code, "budget_exhausted");
    }

    #[test]
    fn usage_counts_into_the_tree_once_and_is_allowed_even_when_aborted() {
        let mut core = core();
        core.config.default.budget_tool_calls_per_tree = 0;
        core.config.default.budget_tokens_per_tree = 100;
        let usage = |run: &str, parent: &str, seq| pb::Event {
            run_id: run.into(),
            parent_run_id: parent.into(),
            seq,
            kind: Some(pb::event::Kind::Usage(pb::Usage { input_tokens: 40, output_tokens: 20, cost_usd: 0.1, model: String::new() })),
            ..Default::default()
        };
        assert_eq!(send(&mut core, usage("root", "", 1)).action, Action::Allow);
        assert_eq!(send(&mut core, usage("kid", "root", 1)).action, Action::Allow);
        send(&mut core, usage("kid", "root", 1)); // a retry
        let tree = core.store.get("", "root").unwrap().tree.as_ref().unwrap().tree.as_deref().cloned().unwrap();
        assert_eq!((tree.input_tokens, tree.output_tokens), (80, 40));
        assert!((tree.cost_usd - 0.2).abs() < 1e-9);
        assert_eq!(send(&mut core, call("kid", "", 2, 1)).error_code, "budget_exhausted");
        assert_eq!(send(&mut core, usage("kid", "", 3)).action, Action::Allow, "an aborted run's usage still counts");
        assert_eq!(core.store.get("", "kid").unwrap().tree.as_ref().unwrap().totals.input_tokens, 80);
    }

    /// A model output's usage is spent as a usage event's: into the tree, once (a retry with the
    /// same seq and content spends nothing), and a plain run without a budget keeps its totals.
    #[test]
    fn a_model_outputs_usage_counts_into_the_tree_once() {
        let mut core = core();
        core.config.default.budget_tool_calls_per_tree = 0;
        core.config.default.budget_tokens_per_tree = 100;
        let said = |run: &str, parent: &str, seq, text: &str| pb::Event {
            run_id: run.into(),
            parent_run_id: parent.into(),
            seq,
            kind: Some(pb::event::Kind::ModelOutput(pb::ModelOutput {
                text: text.into(),
                usage: Some(pb::Usage { input_tokens: 40, output_tokens: 20, cost_usd: 0.1, model: "m".into() }),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(send(&mut core, said("root", "", 1, "one")).action, Action::Allow);
        assert_eq!(send(&mut core, said("kid", "root", 1, "two")).action, Action::Allow);
        send(&mut core, said("kid", "root", 1, "two")); // a retry
        let tree = core.store.get("", "root").unwrap().tree.as_ref().unwrap().tree.as_deref().cloned().unwrap();
        assert_eq!((tree.input_tokens, tree.output_tokens), (80, 40));
        assert!((tree.cost_usd - 0.2).abs() < 1e-9);
        // 120 tokens of 100: the next output (the same seq with other text is a new event) and
        // the next call are stopped.
        let past = send(&mut core, said("kid", "root", 1, "another text"));
        assert_eq!((past.action, past.error_code, past.tool_name.as_str()), (Action::Abort, "budget_exhausted", ""));
        assert!(past.message.contains("tokensPerTree"), "{}", past.message);
        assert_eq!(send(&mut core, call("root", "", 2, 1)).error_code, "budget_exhausted");
        let without = pb::Event { run_id: "bare".into(), seq: 1, ..said("", "", 1, "x") };
        core.config.default.budget_tokens_per_tree = 0;
        send(&mut core, without);
        let bare = core.store.get("", "bare").unwrap().tree.as_ref().expect("usage gives the run its totals").totals.clone();
        assert_eq!(bare.input_tokens, 40);
    }

    #[test]
    fn an_ask_leaves_the_run_going() {
        let mut core = core();
        core.config.default.budget_tool_calls_per_tree = 0;
        core.config.default.budget_tool_calls_per_run = 1;
        core.config.default.on_budget = "ask".into();
        send(&mut core, call("r", "", 1, 1));
        let mut asking = call("r", "", 2, 2);
        asking.accepts_ask = true;
        assert_eq!(send(&mut core, asking).action, Action::Ask);
        assert!(core.store.get("", "r").unwrap().state.rare().abort.is_none());
        assert_eq!(send(&mut core, call("r", "", 3, 3)).action, Action::Abort, "a caller that cannot ask is aborted");
    }

    /// wallSecondsPerTree counts from the tree's first event on the core's clock (`now`): a
    /// call past the cap by any run of the tree is aborted, one within it is not.
    #[test]
    fn wall_seconds_per_tree_counts_from_the_trees_first_event() {
        for (elapsed, aborted) in [(59.0, false), (61.0, true)] {
            let mut core = core();
            core.config.default.budget_tool_calls_per_tree = 0;
            core.config.default.budget_wall_seconds_per_tree = 60;
            let at = |core: &mut Core, event, now| core.evaluate_event(&event, "", now, &mut Summary::default()).verdict;
            assert_ne!(at(&mut core, call("root", "", 1, 1), 100.0).action, Action::Abort);
            assert_ne!(at(&mut core, call("kid", "root", 1, 2), 101.0).action, Action::Abort);
            let late = at(&mut core, call("kid", "root", 2, 3), 100.0 + elapsed);
            assert_eq!(late.action == Action::Abort, aborted, "{elapsed} s after the tree's first event");
            if aborted {
                assert_eq!(late.error_code, "budget_exhausted");
                assert!(late.message.contains("wallSecondsPerTree"), "{}", late.message);
            }
        }
    }
}
