//! Standing exemptions ("always" answers to an ASK), tenant-wide: every run of a tenant's agent
//! is checked against them, so they live beside the run store, not in a run. Kept here with
//! their own dirty set so the state store writes a tenant's table as one record (stored.rs:
//! `encode_exemptions`) next to its runs, and a restart or another replica reads it back.
//!
//! Times are the service's clock (monotonic seconds) in memory and wall-clock seconds outside
//! (the store, ListExemptions): `wall_now - now` converts, as for a run's last event.

use std::collections::{HashMap, HashSet};

use crate::engine::ask::{Exemption, Grant};
use crate::toolnames::normalize_tool_name;

/// Most exemptions one tenant holds (the oldest goes first): an "always" is a person's answer,
/// so this is far above any real use and only bounds a misbehaving client.
pub const MAX_EXEMPTIONS_PER_TENANT: usize = 1024;

#[derive(Default)]
pub struct Exemptions {
    /// tenant -> its exemptions, oldest first.
    by_tenant: HashMap<String, Vec<Exemption>>,
    /// Tenants whose table changed since the last flush (the state store's side).
    dirty: HashSet<String>,
    tracking: bool,
    /// tenant -> ids revoked here, until they would have expired: a stored table read later
    /// (after a failed load, or another replica's older copy) never brings one back, so a merge
    /// is the union minus revocations.
    revoked: HashMap<String, Vec<(String, f64)>>,
}

impl Exemptions {
    /// Start marking changed tables (a state store is configured).
    pub fn track_changes(&mut self) {
        self.tracking = true;
    }

    fn changed(&mut self, tenant: &str) {
        if self.tracking {
            self.dirty.insert(tenant.to_string());
        }
    }

    /// The tenant's table (empty when it has none), for the engine to match a critical against.
    pub fn of_tenant(&self, tenant: &str) -> &[Exemption] {
        self.by_tenant.get(tenant).map_or(&[], Vec::as_slice)
    }

    /// Record an "always" answer of a run of `agent_id`; a standing exemption of the same
    /// (agent, tool, args) is replaced (the newer answer and its TTL win).
    pub fn grant(&mut self, tenant: &str, agent_id: &str, run_id: &str, grant: Grant, now: f64) -> Exemption {
        let exemption = Exemption {
            id: grant.decision_id,
            agent_id: agent_id.to_string(),
            tool: grant.tool,
            args: grant.args,
            outcome: grant.outcome,
            created_at: now,
            expires_at: now + grant.ttl_seconds as f64,
            run_id: run_id.to_string(),
        };
        let table = self.by_tenant.entry(tenant.to_string()).or_default();
        table.retain(|e| e.expires_at > now && !(e.agent_id == exemption.agent_id && e.tool == exemption.tool && e.args == exemption.args));
        if table.len() >= MAX_EXEMPTIONS_PER_TENANT {
            table.remove(0);
        }
        table.push(exemption.clone());
        self.changed(tenant);
        exemption
    }

    /// The tenant's unexpired exemptions, newest first; `agent_id`/`tool_name` filter when not
    /// empty (the tool name is normalised as calls' are).
    pub fn list(&self, tenant: &str, agent_id: &str, tool_name: &str, now: f64) -> Vec<&Exemption> {
        let tool = normalize_tool_name(tool_name);
        let mut found: Vec<&Exemption> = self.of_tenant(tenant).iter()
            .filter(|e| e.expires_at > now)
            .filter(|e| agent_id.is_empty() || e.agent_id == agent_id)
            .filter(|e| tool_name.is_empty() || e.tool == tool)
            .collect();
        found.reverse();
        found
    }

    /// The tenant's unexpired exemptions that apply to runs of `agent_id`, newest first.
    pub fn of_agent(&self, tenant: &str, agent_id: &str, now: f64) -> Vec<&Exemption> {
        let mut found: Vec<&Exemption> = self.of_tenant(tenant).iter().filter(|e| e.expires_at > now && e.agent_id == agent_id).collect();
        found.reverse();
        found
    }

    /// Withdraw one; None when the tenant holds no such id (expired ones included: gone).
    pub fn revoke(&mut self, tenant: &str, id: &str, now: f64) -> Option<Exemption> {
        let table = self.by_tenant.get_mut(tenant)?;
        let index = table.iter().position(|e| e.id == id && e.expires_at > now)?;
        let revoked = table.remove(index);
        if table.is_empty() {
            self.by_tenant.remove(tenant);
        }
        let ids = self.revoked.entry(tenant.to_string()).or_default();
        if ids.len() >= MAX_EXEMPTIONS_PER_TENANT {
            ids.remove(0);
        }
        ids.push((revoked.id.clone(), revoked.expires_at));
        self.changed(tenant);
        Some(revoked)
    }

    /// Drop expired exemptions (a table left empty goes; the store deletes it at the next flush).
    pub fn expire(&mut self, now: f64) {
        let mut emptied = Vec::new();
        for (tenant, table) in self.by_tenant.iter_mut() {
            let before = table.len();
            table.retain(|e| e.expires_at > now);
            if table.len() != before {
                emptied.push((tenant.clone(), table.is_empty()));
            }
        }
        for (tenant, empty) in emptied {
            if empty {
                self.by_tenant.remove(&tenant);
            }
            self.changed(&tenant);
        }
        self.revoked.retain(|_, ids| {
            ids.retain(|(_, expires_at)| *expires_at > now);
            !ids.is_empty()
        });
    }

    /// Exemptions in force (the gauge).
    pub fn count(&self, now: f64) -> usize {
        self.by_tenant.values().map(|t| t.iter().filter(|e| e.expires_at > now).count()).sum()
    }

    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    pub fn take_dirty(&mut self) -> Vec<String> {
        let mut tenants: Vec<String> = self.dirty.drain().collect();
        tenants.sort();
        tenants
    }

    pub fn redirty(&mut self, tenants: Vec<String>) {
        self.dirty.extend(tenants);
    }

    /// The tenant's table as its state-store record, None when it holds none (delete the key).
    pub fn encode(&self, tenant: &str, wall_now: f64, now: f64) -> Option<Vec<u8>> {
        let live: Vec<&Exemption> = self.of_tenant(tenant).iter().filter(|e| e.expires_at > now).collect();
        if live.is_empty() {
            return None;
        }
        Some(crate::stored::encode_exemptions(tenant, &live, wall_now - now))
    }

    /// Latest expiry of the tenant's table, in seconds from now (the store's key TTL).
    pub fn ttl_seconds(&self, tenant: &str, now: f64) -> f64 {
        self.of_tenant(tenant).iter().map(|e| e.expires_at - now).fold(0.0, f64::max)
    }

    /// Take in a stored table: it replaces the tenant's in memory unless that one has changes
    /// not yet written (then the two are merged by id, memory winning). Expired ones and ones
    /// revoked here are dropped (the union minus revocations). Returns the tenant and how many were taken in; Err names the malformed field.
    pub fn load(&mut self, record: &[u8], wall_now: f64, now: f64) -> Result<(String, usize), String> {
        let (tenant, stored) = crate::stored::decode_exemptions(record, now - wall_now)?;
        let revoked = self.revoked.get(&tenant);
        let stored: Vec<Exemption> = stored.into_iter()
            .filter(|e| e.expires_at > now && !revoked.is_some_and(|ids| ids.iter().any(|(id, _)| *id == e.id)))
            .collect();
        let count = stored.len();
        if self.dirty.contains(&tenant) {
            let table = self.by_tenant.entry(tenant.clone()).or_default();
            for e in stored {
                if !table.iter().any(|mine| mine.id == e.id) {
                    table.push(e);
                }
            }
            table.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
        } else if stored.is_empty() {
            self.by_tenant.remove(&tenant);
        } else {
            self.by_tenant.insert(tenant.clone(), stored);
        }
        Ok((tenant, count))
    }

    /// A shared store holds no table for the tenant (none granted, or all revoked elsewhere):
    /// memory's copy goes too, unless it has changes not yet written.
    pub fn absent_in_store(&mut self, tenant: &str) {
        if !self.dirty.contains(tenant) {
            self.by_tenant.remove(tenant);
        }
    }

    pub fn clear(&mut self) {
        self.by_tenant.clear();
        self.dirty.clear();
        self.revoked.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(tool: &str, id: &str, ttl: u32) -> Grant {
        Grant { decision_id: id.into(), tool: tool.into(), args: [7; 32], outcome: Some((1, [9; 32])), ttl_seconds: ttl }
    }

    #[test]
    fn tables_are_per_tenant_newest_first_and_expire() {
        let mut x = Exemptions::default();
        x.track_changes();
        x.grant("t", "a", "r1", grant("read", "d-1", 10), 100.0);
        x.grant("t", "a", "r1", grant("grep", "d-2", 100), 101.0);
        x.grant("u", "a", "r9", grant("read", "d-3", 100), 101.0);
        let ids = |v: Vec<&Exemption>| v.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(x.list("t", "", "", 102.0)), ["d-2", "d-1"]);
        assert_eq!(ids(x.list("t", "", "Read", 102.0)), ["d-1"], "tool names are normalised");
        assert_eq!(ids(x.list("t", "other", "", 102.0)), Vec::<String>::new());
        assert_eq!(ids(x.list("t", "", "", 111.0)), ["d-2"], "d-1 expired at 110");
        assert_eq!(x.take_dirty(), ["t", "u"]);
        assert!(x.revoke("u", "d-1", 102.0).is_none(), "another tenant's id");
        assert_eq!(x.revoke("t", "d-1", 102.0).map(|e| e.id), Some("d-1".into()));
        assert!(x.revoke("t", "d-1", 102.0).is_none());
        // The same (agent, tool, args) granted again replaces the older answer.
        x.grant("t", "a", "r2", grant("grep", "d-4", 100), 103.0);
        assert_eq!(ids(x.list("t", "", "", 104.0)), ["d-4"]);
    }

    #[test]
    fn a_table_survives_the_store_with_wall_clock_times() {
        let mut x = Exemptions::default();
        let made = x.grant("t", "a", "r1", grant("read", "d-1", 60), 100.0);
        // Stored at wall 1000 (now 100), taken in by another process whose clock says 5 at wall 1010.
        let record = x.encode("t", 1000.0, 100.0).expect("one");
        let mut y = Exemptions::default();
        assert_eq!(y.load(&record, 1010.0, 5.0).unwrap(), ("t".into(), 1));
        let back = y.list("t", "", "", 5.0)[0].clone();
        assert_eq!((back.id.as_str(), back.agent_id.as_str(), back.tool.as_str(), back.args, back.outcome), ("d-1", "a", "read", made.args, made.outcome));
        assert!((back.expires_at - 55.0).abs() < 1e-6, "{}", back.expires_at);
        assert!(x.encode("nobody", 1000.0, 100.0).is_none());
        assert!(y.load(b"{\"tenant\": 1}", 0.0, 0.0).unwrap_err().contains("not an exemption table"));
        // A JSON-era table (b"LWX\x01" + zlib) is still read, and a malformed one names its field.
        let legacy = |json: &str| [b"LWX\x01".as_slice(), &miniz_oxide::deflate::compress_to_vec_zlib(json.as_bytes(), 1)].concat();
        let old = legacy(r#"{"tenant":"t","exemptions":[{"id":"d-9","agent_id":"a","tool":"read","args":"0101010101010101010101010101010101010101010101010101010101010101","outcome":null,"created_at":1000.0,"expires_at":1100.0,"run_id":"r"}]}"#);
        assert_eq!(y.load(&old, 1010.0, 5.0).unwrap(), ("t".into(), 1));
        assert!(y.load(&legacy(r#"{"tenant": 1}"#), 0.0, 0.0).unwrap_err().contains("tenant"));
    }

    #[test]
    fn a_stored_table_read_late_is_merged_as_the_union_minus_revocations() {
        let mut elsewhere = Exemptions::default();
        elsewhere.grant("t", "a", "r1", grant("read", "d-1", 600), 100.0);
        elsewhere.grant("t", "a", "r1", grant("grep", "d-2", 600), 100.0);
        let stored = elsewhere.encode("t", 1000.0, 100.0).expect("two");
        // Here the load failed: a grant and a revocation of a stored id were made from memory.
        let mut here = Exemptions::default();
        here.track_changes();
        here.grant("t", "a", "r2", grant("find", "d-3", 600), 100.0);
        here.by_tenant.get_mut("t").unwrap().push(elsewhere.of_tenant("t")[0].clone());
        assert!(here.revoke("t", "d-1", 100.0).is_some());
        here.load(&stored, 1000.0, 100.0).unwrap();
        let ids: Vec<String> = here.list("t", "", "", 101.0).iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids, ["d-2", "d-3"], "d-2 from the store, d-3 from memory, d-1 revoked stays gone");
        here.take_dirty();
        here.load(&stored, 1000.0, 100.0).unwrap();
        assert_eq!(here.list("t", "", "", 101.0).len(), 1, "an older copy read again brings no revoked id back");
        here.expire(701.0);
        assert!(here.revoked.is_empty(), "revocations are kept only while they could matter");
    }
}
