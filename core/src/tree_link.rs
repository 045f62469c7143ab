//! A run's place in its run tree and its budget totals, as data: what service/trees.rs keeps on
//! a run's store entry and the stored-run format (stored.rs) writes and reads. Below both, so
//! the format needs nothing of the service and the service's imports of it point one way.

use crate::engine::Detector;

/// Children listed per run (ended ones too): the oldest is dropped past it (the count stays).
pub const MAX_LISTED_CHILDREN: usize = 1000;
/// Notices of stopped children a parent keeps until its next allowed call: the oldest is dropped.
pub const MAX_NOTICES: usize = 4;

/// Spending counted for budgets: a run's own, or (on the root) its whole tree's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub tool_calls: u64,
    pub tool_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// Runs of the tree so far, ended ones too (1 in a run's own totals).
    pub runs: u64,
}

impl Totals {
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// What a stopped child leaves its parent: the parent's next allowed call is warned with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub child: String,
    pub detector: Detector,
    pub tool: String,
    pub head: String,
}

/// A run's place in its tree, its totals and its tree-related pending state.
#[derive(Clone, Debug, Default)]
pub struct TreeLink {
    /// "" for a root run.
    pub parent: String,
    /// "" when the run is its tree's root.
    pub root: String,
    /// 0 for the root.
    pub depth: u32,
    /// Children in creation order (ended ones too), at most MAX_LISTED_CHILDREN.
    pub children: Vec<String>,
    /// Children ever created under this run (what runTree.maxChildren bounds).
    pub children_created: u32,
    pub totals: Totals,
    /// When the run joined (its first event, or its creation as a missing parent): the store's clock.
    pub started: f64,
    /// On the root only: the whole tree's totals.
    pub tree: Option<Box<Totals>>,
    pub notices: Vec<Notice>,
    /// Budgets (budgets::Budget bits) already warned about in this run.
    pub warned: u8,
    /// Extra allowances a person granted per budget (index: budgets::Budget), by approving a
    /// budget ASK: the per-run budget's on the run, the tree budgets' on the root.
    pub extensions: [u32; 6],
}

impl TreeLink {
    pub fn new(started: f64) -> TreeLink {
        TreeLink { started, totals: Totals { runs: 1, ..Default::default() }, ..Default::default() }
    }
    /// Note a stopped child; the oldest notice goes when there are too many.
    pub fn push_notice(&mut self, notice: Notice) {
        if self.notices.iter().any(|n| n.child == notice.child) {
            return;
        }
        if self.notices.len() >= MAX_NOTICES {
            self.notices.remove(0);
        }
        self.notices.push(notice);
    }
    /// The tree's totals (on a root): begun from the root's own when first asked for.
    pub fn tree_totals(&mut self) -> &mut Totals {
        let own = &self.totals;
        self.tree.get_or_insert_with(|| Box::new(Totals { runs: 1, ..own.clone() }))
    }
    pub fn add_child(&mut self, child: &str) {
        if self.children.len() >= MAX_LISTED_CHILDREN {
            self.children.remove(0);
        }
        self.children.push(child.to_string());
        self.children_created = self.children_created.saturating_add(1);
    }
}
