//! Run trees: a run whose first event names `parent_run_id` is a child of that
//! run. Each run keeps its own history (its own RunState, so concurrent children never count
//! each other's calls); this module keeps what ties them together on their store entries: the
//! parent, the root, the depth, the children, the run's and the tree's totals, and the notices a
//! stopped child leaves its parent.
//!
//! Design. A plain run (no parent, no child, no budget) carries no link (`Entry.tree` is None),
//! so its memory and its stored record stay what they were. Links name runs by id and are looked
//! up in the store, so a tree is no owner graph: a run evicted or loaded on its own breaks no
//! pointer. The root's entry holds the tree's totals and its start time; every event of a child
//! also touches the root, so an idle root is not expired while its children work.

use super::store::Entry;
use super::summary::Summary;
use super::Core;
use crate::engine::{Action, Detector, Level, RunState, Verdict};
use crate::tables::{error_codes, messages};
use crate::py_repr::py_repr;
pub use crate::tree_link::{Notice, Totals, TreeLink, MAX_LISTED_CHILDREN, MAX_NOTICES};

/// How much of a stopped child's message a notice keeps.
const NOTICE_HEAD_CHARS: usize = 120;
/// A bound on walks up a parent chain (a chain longer than this is not followed further).
const MAX_WALK: usize = 10_000;

impl Entry {
    /// The root of the run's tree (the run itself when it is a root or in no tree).
    pub fn root_id(&self) -> &str {
        match &self.tree {
            Some(link) if !link.root.is_empty() => &link.root,
            _ => &self.run_id,
        }
    }
    pub fn parent_id(&self) -> &str {
        self.tree.as_ref().map_or("", |l| l.parent.as_str())
    }
    pub(super) fn link(&mut self, now: f64) -> &mut TreeLink {
        let calls = self.unlinked_calls;
        self.tree.get_or_insert_with(|| {
            let mut link = TreeLink::new(now);
            link.totals.tool_calls = calls;
            Box::new(link)
        })
    }
}

/// The verdict of a run past a tree bound (its abort, kept in its state).
fn tree_abort(code: &'static str, message: String) -> Verdict {
    let mut v = Verdict::allow("");
    v.action = Action::Abort;
    v.level = Level::Critical;
    v.announce = true;
    v.error_code = code;
    v.message = message;
    v
}

impl Core {
    /// The root of the tree the event's run is in, or will be in after this event: a held run's
    /// root; a new run's parent's root when the parent is held; else the routed header (a new
    /// child whose parent is not held takes the header's run as its root); else the parent.
    pub(super) fn tree_root(&self, tenant: &str, run_id: &str, parent: &str, routed: &str) -> String {
        if let Some(entry) = self.store.get(tenant, run_id) {
            return entry.root_id().to_string();
        }
        if parent.is_empty() {
            return run_id.to_string();
        }
        if let Some(p) = self.store.get(tenant, parent) {
            return p.root_id().to_string();
        }
        if !routed.is_empty() {
            return routed.to_string();
        }
        parent.to_string()
    }

    /// REJECT `invalid_parent_run_id` when the event's parent contradicts the run's (a run's
    /// parent is fixed by its first event) or would close a cycle (the parent descends from it).
    pub(super) fn parent_error(&self, tenant: &str, run_id: &str, parent: &str) -> Option<Verdict> {
        if parent.is_empty() {
            return None;
        }
        if let Some(entry) = self.store.get(tenant, run_id) {
            let have = entry.parent_id();
            if have == parent {
                return None;
            }
            let message = if have.is_empty() {
                format!(
                    "parent_run_id {} differs from run {}'s: it has no parent (its first event named none, or it was created as a root); a run's parent is fixed by its first event",
                    py_repr(parent), py_repr(run_id)
                )
            } else {
                format!(
                    "parent_run_id {} differs from run {}'s parent {}; a run's parent is fixed by its first event",
                    py_repr(parent), py_repr(run_id), py_repr(have)
                )
            };
            return Some(Verdict::reject(error_codes::INVALID_PARENT_RUN_ID, message));
        }
        if !self.store.orphans_possible {
            return None; // every held run's ancestors are held, and this run is not: no cycle
        }
        let mut at = parent;
        for _ in 0..MAX_WALK {
            let Some(p) = self.store.get(tenant, at) else { break };
            if p.root_id() == run_id || p.parent_id() == run_id {
                return Some(Verdict::reject(
                    error_codes::INVALID_PARENT_RUN_ID,
                    format!("parent_run_id {} descends from run {}: a run cannot be a child of its own descendant", py_repr(parent), py_repr(run_id)),
                ));
            }
            at = p.parent_id();
            if at.is_empty() {
                break;
            }
        }
        None
    }

    /// An empty run (no events yet), created because a child named it.
    fn create_empty(&mut self, tenant: &str, run_id: &str, now: f64, summary: &mut Summary) {
        let capacity = self.config.default.history_size;
        self.store.create(tenant, run_id, RunState::new(capacity), now, &mut summary.evictions);
        self.store.get_mut(tenant, run_id).expect("created").link(now);
    }

    /// Before a new run whose first event names `parent` is created: the parent created when it
    /// is not held (as a root, or on a routed stream whose header names another run, as a child
    /// of that run). First, so that creating them can never evict the new run itself.
    pub(super) fn ensure_parent(&mut self, tenant: &str, run_id: &str, parent: &str, routed: &str, now: f64, summary: &mut Summary) {
        if self.store.get(tenant, parent).is_none() {
            let header_root = !routed.is_empty() && routed != parent && routed != run_id;
            if header_root && self.store.get(tenant, routed).is_none() {
                self.create_empty(tenant, routed, now, summary);
            }
            self.create_empty(tenant, parent, now, summary);
            if header_root {
                // The missing parent joins the header's tree (not bounded: it was not asked for).
                self.link_child(tenant, parent, routed, now, false);
            }
        }
    }

    /// The new run (held) linked under `parent` (ensure_parent went first; a store too small to
    /// hold both may have evicted the parent: the run is then linked by name alone). Some(abort)
    /// when the run is past a tree bound.
    pub(super) fn join_tree(&mut self, tenant: &str, run_id: &str, parent: &str, now: f64) -> Option<Verdict> {
        self.link_child(tenant, run_id, parent, now, true)
    }

    /// Link `child` (held) under `parent`; with `bounded`, runTree's bounds apply (the root's agent
    /// settings): Some(abort) when the child is past one.
    fn link_child(&mut self, tenant: &str, child: &str, parent: &str, now: f64, bounded: bool) -> Option<Verdict> {
        let (depth, root, created) = match self.store.get_mut(tenant, parent) {
            Some(p) => {
                let root = p.root_id().to_string();
                let link = p.link(now);
                (link.depth.saturating_add(1), root, link.children_created)
            }
            None => {
                self.store.orphans_possible = true; // linked by name alone: its parent is not held
                (1, parent.to_string(), 0)
            }
        };
        let root_agent = self.store.get(tenant, &root).map(|e| e.agent_id.clone()).unwrap_or_default();
        let settings = self.config.settings_for(&root_agent);
        let (max_depth, max_children) = (settings.run_tree_max_depth, settings.run_tree_max_children);
        let mut abort = None;
        let counted = !(bounded && max_children > 0 && created >= max_children);
        if !counted {
            abort = Some(tree_abort(error_codes::TOO_MANY_CHILDREN, messages::too_many_children_abort(py_repr(parent), created)));
        } else {
            if let Some(p) = self.store.get_mut(tenant, parent) {
                p.link(now).add_child(child);
            }
            self.store.changed(tenant, parent);
            if let Some(r) = self.store.get_mut(tenant, &root) {
                r.link(now).tree_totals().runs += 1;
            }
            self.store.changed(tenant, &root);
            if bounded && max_depth > 0 && depth > max_depth {
                abort = Some(tree_abort(error_codes::TREE_TOO_DEEP, messages::tree_too_deep_abort(depth, py_repr(&root), max_depth)));
            }
        }
        if let Some(c) = self.store.get_mut(tenant, child) {
            let link = c.link(now);
            link.parent = parent.to_string();
            link.root = root;
            link.depth = depth;
        }
        abort
    }

    /// run_end: free the run and its held descendants (the parent still lists the ended run).
    /// `root`: the run's root as the event names it, for a run not held here.
    pub(super) fn end_run(&mut self, tenant: &str, run_id: &str, root: &str) {
        let mut pending = vec![run_id.to_string()];
        let mut ended: Vec<(String, String)> = Vec::new();
        // Seen ids by hash: a wide tree's thousands of children are each looked up once.
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        while let Some(id) = pending.pop() {
            if ended.len() >= MAX_WALK || !seen.insert(id.clone()) {
                continue;
            }
            let root_of = match self.store.get(tenant, &id) {
                Some(entry) => {
                    if let Some(link) = &entry.tree {
                        pending.extend(link.children.iter().cloned());
                    }
                    entry.root_id().to_string()
                }
                None => root.to_string(),
            };
            ended.push((id, root_of));
        }
        for (id, root_of) in ended {
            self.store.remove_rooted(tenant, &id, &root_of);
        }
    }

    /// After a child's event: its first BLOCK (blocks 0 -> 1) or its ABORT leaves its parent a
    /// notice (when the parent is held).
    pub(super) fn notify_parent(&mut self, tenant: &str, run_id: &str, verdict: &Verdict, blocks_before: u32, was_aborted: bool) {
        let Some(entry) = self.store.get(tenant, run_id) else { return };
        let parent = entry.parent_id();
        if parent.is_empty() {
            return;
        }
        let first_block = blocks_before == 0 && entry.state.blocks >= 1;
        let first_abort = !was_aborted && entry.state.rare().abort.is_some();
        if !(first_block || first_abort) {
            return;
        }
        let text = verdict.message.strip_prefix("CRITICAL: ").unwrap_or(&verdict.message);
        let mut head: String = text.chars().take(NOTICE_HEAD_CHARS).collect();
        if text.chars().count() > NOTICE_HEAD_CHARS {
            head.push('…');
        }
        let notice = Notice { child: run_id.to_string(), detector: verdict.detector, tool: verdict.tool_name.clone(), head: head.replace('\n', " ") };
        let parent = parent.to_string();
        if let Some(p) = self.store.get_mut(tenant, &parent) {
            let now = p.last_seen;
            p.link(now).push_notice(notice);
            self.store.changed(tenant, &parent);
        }
    }

    /// The oldest pending notice of a stopped child, as the WARN a parent's allowed call becomes.
    pub(super) fn take_notice(&mut self, tenant: &str, run_id: &str, tool: &str) -> Option<Verdict> {
        let entry = self.store.get_mut(tenant, run_id)?;
        let link = entry.tree.as_mut()?;
        if link.notices.is_empty() {
            return None;
        }
        let n = link.notices.remove(0);
        let mut v = Verdict::allow(tool);
        v.action = Action::Warn;
        v.detector = Detector::ChildStopped;
        v.level = Level::Warning;
        v.announce = true;
        v.count = 1;
        v.warning_key = format!("child_stopped:{}", n.child);
        let what = if n.detector == Detector::None { "a tree or budget limit".to_string() } else { n.detector.name().to_string() };
        let on = if n.tool.is_empty() { "its run".to_string() } else { n.tool.clone() };
        v.message = messages::child_stopped_warning(py_repr(&n.child), what, on, n.head);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;
    use crate::service::{Config, Limits};

    fn core() -> Core {
        Core::new(Config::default(), Limits::default(), 1000, 3600.0, "t".into(), vec![])
    }

    fn call(run: &str, parent: &str, seq: u64) -> pb::Event {
        pb::Event {
            run_id: run.into(),
            parent_run_id: parent.into(),
            seq,
            kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), params_json: r#"{"p":1}"#.into(), ..Default::default() })),
            ..Default::default()
        }
    }

    fn send(core: &mut Core, run: &str, parent: &str, seq: u64) -> Verdict {
        core.evaluate_event(&call(run, parent, seq), "", 1.0, &mut Summary::default()).verdict
    }

    #[test]
    fn children_are_listed_under_their_parent_with_root_and_depth() {
        let mut core = core();
        send(&mut core, "root", "", 1);
        send(&mut core, "a", "root", 1);
        send(&mut core, "b", "root", 1);
        send(&mut core, "a1", "a", 1);
        let root = core.store.get("", "root").unwrap();
        assert_eq!(root.tree.as_ref().unwrap().children, ["a", "b"]);
        assert_eq!(root.tree.as_ref().unwrap().tree.as_ref().unwrap().runs, 4);
        let a1 = core.store.get("", "a1").unwrap();
        assert_eq!((a1.parent_id(), a1.root_id(), a1.tree.as_ref().unwrap().depth), ("a", "root", 2));
    }

    #[test]
    fn a_missing_parent_is_created_and_a_contradicting_parent_rejected() {
        let mut core = core();
        send(&mut core, "child", "p", 1);
        assert!(core.store.get("", "p").is_some(), "parent created");
        let v = send(&mut core, "child", "other", 2);
        assert_eq!((v.action, v.error_code), (Action::Reject, "invalid_parent_run_id"));
        assert!(v.message.contains("'other'") && v.message.contains("'p'"), "{}", v.message);
        assert_eq!(send(&mut core, "child", "", 3).action, Action::Allow, "an empty parent repeats nothing");
        let v = send(&mut core, "p", "child", 1);
        assert_eq!((v.action, v.error_code), (Action::Reject, "invalid_parent_run_id"), "a cycle");
    }

    #[test]
    fn a_deep_tree_whose_ancestors_are_all_held_adds_levels_without_walking_it() {
        let mut core = core();
        core.config.default.run_tree_max_depth = 0;
        send(&mut core, "l0", "", 1);
        for level in 1..900 {
            assert_eq!(send(&mut core, &format!("l{level}"), &format!("l{}", level - 1), 1).action, Action::Allow);
        }
        assert!(!core.store.orphans_possible, "every run's ancestors are held: a new level checks no chain");
        assert_eq!(core.store.get("", "l899").unwrap().tree.as_ref().unwrap().depth, 899);
    }

    #[test]
    fn a_cycle_through_a_run_that_was_evicted_is_still_refused() {
        let mut core = Core::new(Config::default(), Limits::default(), 3, 3600.0, "t".into(), vec![]);
        send(&mut core, "a", "", 1);
        send(&mut core, "b", "a", 1);
        send(&mut core, "c", "b", 1);
        send(&mut core, "x", "", 1); // a full store: its least recently used run is evicted
        let held: Vec<&str> = ["a", "b", "c"].into_iter().filter(|id| core.store.get("", id).is_some()).collect();
        assert_eq!(held, ["a", "c"], "b, used least recently, went");
        assert!(core.store.orphans_possible, "c lost its parent");
        let v = send(&mut core, "b", "c", 1);
        assert_eq!((v.action, v.error_code), (Action::Reject, "invalid_parent_run_id"), "b would descend from itself");
    }

    #[test]
    fn on_a_routed_stream_a_missing_parent_joins_the_headers_tree() {
        let mut core = core();
        let mut summary = Summary::default();
        let d = core.evaluate_timed(&crate::service::EventRef::from(&call("c", "p", 1)), "", "root", 1.0, &mut summary);
        assert_eq!(d.verdict.action, Action::Allow);
        assert_eq!(core.store.get("", "p").unwrap().parent_id(), "root");
        assert_eq!(core.store.get("", "c").unwrap().root_id(), "root");
        let d = core.evaluate_timed(&crate::service::EventRef::from(&call("x", "", 1)), "", "root", 1.0, &mut summary);
        assert_eq!(d.verdict.error_code, "run_id_mismatch");
        let end = pb::Event { run_id: "gone".into(), kind: Some(pb::event::Kind::RunEnd(pb::RunEnd {})), ..Default::default() };
        let d = core.evaluate_timed(&crate::service::EventRef::from(&end), "", "root", 1.0, &mut summary);
        assert_eq!(d.verdict.action, Action::Allow, "a run_end of a run not held is one of the header's tree");
    }

    #[test]
    fn depth_and_children_are_bounded() {
        let mut core = core();
        core.config.default.run_tree_max_depth = 2;
        core.config.default.run_tree_max_children = 2;
        send(&mut core, "r", "", 1);
        send(&mut core, "c1", "r", 1);
        send(&mut core, "c2", "r", 1);
        let v = send(&mut core, "c3", "r", 1);
        assert_eq!((v.action, v.error_code), (Action::Abort, "too_many_children"));
        assert_eq!(send(&mut core, "c3", "", 2).error_code, "too_many_children", "it stays aborted");
        assert_eq!(core.store.get("", "r").unwrap().tree.as_ref().unwrap().children, ["c1", "c2"], "not counted");
        send(&mut core, "g", "c1", 1);
        let v = send(&mut core, "gg", "g", 1);
        assert_eq!((v.action, v.error_code), (Action::Abort, "tree_too_deep"));
        assert!(v.message.contains("3 levels"), "{}", v.message);
    }

    #[test]
    fn run_end_frees_the_run_and_its_descendants_and_the_parent_keeps_listing_it() {
        let mut core = core();
        send(&mut core, "r", "", 1);
        send(&mut core, "a", "r", 1);
        send(&mut core, "a1", "a", 1);
        send(&mut core, "b", "r", 1);
        let end = pb::Event { run_id: "a".into(), kind: Some(pb::event::Kind::RunEnd(pb::RunEnd {})), ..Default::default() };
        core.evaluate_event(&end, "", 2.0, &mut Summary::default());
        assert!(core.store.get("", "a").is_none() && core.store.get("", "a1").is_none());
        assert_eq!(core.store.get("", "r").unwrap().tree.as_ref().unwrap().children, ["a", "b"]);
        let end = pb::Event { run_id: "r".into(), kind: Some(pb::event::Kind::RunEnd(pb::RunEnd {})), ..Default::default() };
        core.evaluate_event(&end, "", 2.0, &mut Summary::default());
        assert!(core.store.is_empty(), "the root's end frees the tree");
    }

    #[test]
    fn a_blocked_child_warns_its_parents_next_allowed_call_once() {
        let mut core = core();
        core.config.default.enabled = Some(true);
        send(&mut core, "p", "", 1);
        let mut last = Verdict::allow("");
        for seq in 1..=40 {
            last = send(&mut core, "kid", "p", seq);
            if last.action == Action::Block {
                break;
            }
            let outcome = pb::Event {
                run_id: "kid".into(),
                seq: 1000 + seq,
                kind: Some(pb::event::Kind::ToolOutcome(pb::ToolOutcome {
                    tool_name: "read".into(),
                    params_json: r#"{"p":1}"#.into(),
                    outcome: Some(pb::tool_outcome::Outcome::ResultJson("\"same\"".into())),
                    ..Default::default()
                })),
                ..Default::default()
            };
            core.evaluate_event(&outcome, "", 1.0, &mut Summary::default());
        }
        assert_eq!(last.action, Action::Block);
        let v = send(&mut core, "p", "", 2);
        assert_eq!((v.action, v.detector), (Action::Warn, Detector::ChildStopped));
        assert!(v.message.contains("'kid'"), "{}", v.message);
        assert_eq!(send(&mut core, "p", "", 3).detector, Detector::None, "once");
    }
}

/// A store too small to hold a tree evicts its runs, never the run being evaluated.
#[cfg(test)]
mod tiny_store_tests {
    use super::*;
    use crate::pb;
    use crate::service::{Config, Limits};

    /// Runs a child, its grandchild, the child again as a root and an unrelated child through a
    /// core whose store holds very few runs; `held` says how many it may hold after each event.
    fn evaluate_children_in_a_tiny_store(mut core: Core, tenant: &str, held: impl Fn(&Core) -> bool, what: &str) {
        core.config.default.budget_tool_calls_per_tree = 5;
        for (run, parent) in [("c", "p"), ("g", "c"), ("c", ""), ("x", "y")] {
            let event = pb::Event {
                run_id: run.into(),
                parent_run_id: parent.into(),
                kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), ..Default::default() })),
                ..Default::default()
            };
            let d = core.evaluate_timed(&crate::service::EventRef::from(&event), tenant, "root", 1.0, &mut Summary::default());
            assert_ne!(d.verdict.error_code, "internal_error", "{what}: {run}");
            assert!(held(&core), "{what}: {run}");
        }
    }

    #[test]
    fn a_one_run_store_evaluates_a_child_without_its_parent() {
        for max_runs in [1, 2] {
            let core = Core::new(Config::default(), Limits::default(), max_runs, 3600.0, "t".into(), vec![]);
            evaluate_children_in_a_tiny_store(core, "", |core| core.store.len() <= max_runs, &format!("max_runs {max_runs}"));
        }
    }

    #[test]
    fn a_tenant_quota_of_one_or_two_evaluates_a_child_without_its_parent() {
        for quota in [1, 2] {
            let mut core = Core::new(Config::default(), Limits::default(), 100, 3600.0, "t".into(), vec![]);
            core.store.tenant_quota = quota;
            evaluate_children_in_a_tiny_store(core, "a", |core| core.store.tenant_runs("a") <= quota, &format!("quota {quota}"));
        }
    }
}
