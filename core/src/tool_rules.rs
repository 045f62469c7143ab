//! Tool rules (`loopwarden.toolRules`): what a config says about one tool (or a glob of tools),
//! compiled once per (re)load and consulted per event. A rule gives the tool a class (readOnly,
//! mutating, poll) and projects JSON paths out of (or keeps only them in) its arguments before the
//! args digest is taken, and out of its results before the outcome is hashed, so fields a host
//! varies on every call (a nonce, a request id, a timestamp) stop hiding a loop.
//!
//! The JSON path syntax is a small subset of JSONPath, parsed here and only here (the config
//! loader calls `parse_path` through the Python module to validate and compile a path once):
//! `$` followed by steps, each `.name`, `['name']` / `["name"]`, or `[*]` / `.*` (every element
//! of an array, every member value of an object). No indexes, slices, filters or `..`.

use std::sync::Arc;

use crate::json::Value;

/// What a tool does, as far as loop detection cares. Sources, strongest first: the config's tool
/// rule, the MCP server's ToolAnnotations (sent by the MCP proxy with each call), built-in host
/// presets. Unknown: no source said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolClass {
    #[default]
    Unknown,
    ReadOnly,
    Mutating,
    Poll,
}

impl ToolClass {
    /// The config's spelling ("" for unknown).
    pub fn from_name(name: &str) -> Option<ToolClass> {
        Some(match name {
            "" => ToolClass::Unknown,
            "readOnly" => ToolClass::ReadOnly,
            "mutating" => ToolClass::Mutating,
            "poll" => ToolClass::Poll,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ToolClass::Unknown => "",
            ToolClass::ReadOnly => "readOnly",
            ToolClass::Mutating => "mutating",
            ToolClass::Poll => "poll",
        }
    }
}

/// One step of a JSON path: a member by name, or every element / member value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(Box<[u8]>),
    Each,
}

pub type Path = Vec<Step>;

/// Parse a path of the documented subset; the error says what is wrong and where.
pub fn parse_path(text: &str) -> Result<Path, String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.first() != Some(&'$') {
        return Err("must start with `$` (e.g. `$.nonce`)".into());
    }
    let mut steps = Vec::new();
    let mut i = 1;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                if chars.get(i + 1) == Some(&'.') {
                    return Err(format!("recursive descent `..` is not supported (at character {})", i + 1));
                }
                if chars.get(i + 1) == Some(&'*') {
                    steps.push(Step::Each);
                    i += 2;
                    continue;
                }
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && !matches!(chars[end], '.' | '[' | ']' | '\'' | '"' | '*') && !chars[end].is_whitespace() {
                    end += 1;
                }
                if end == start {
                    return Err(format!("expected a member name after `.` (at character {})", start + 1));
                }
                steps.push(Step::Key(chars[start..end].iter().collect::<String>().into_bytes().into()));
                i = end;
            }
            '[' => {
                match chars.get(i + 1) {
                    Some('*') if chars.get(i + 2) == Some(&']') => {
                        steps.push(Step::Each);
                        i += 3;
                    }
                    Some(&quote @ ('\'' | '"')) => {
                        let mut name = String::new();
                        let mut j = i + 2;
                        loop {
                            match chars.get(j) {
                                None => return Err(format!("unterminated quoted name (opened at character {})", i + 2)),
                                Some('\\') => {
                                    let Some(&c) = chars.get(j + 1) else {
                                        return Err(format!("unterminated quoted name (opened at character {})", i + 2));
                                    };
                                    name.push(c);
                                    j += 2;
                                }
                                Some(&c) if c == quote => break,
                                Some(&c) => {
                                    name.push(c);
                                    j += 1;
                                }
                            }
                        }
                        if chars.get(j + 1) != Some(&']') {
                            return Err(format!("expected `]` after the quoted name (at character {})", j + 2));
                        }
                        steps.push(Step::Key(name.into_bytes().into()));
                        i = j + 2;
                    }
                    Some(c) if c.is_ascii_digit() || *c == '-' || *c == ':' => {
                        return Err(format!("array indexes and slices are not supported, use `[*]` (at character {})", i + 1));
                    }
                    _ => {
                        return Err(format!("expected `[*]` or a quoted name `['name']` (at character {})", i + 1));
                    }
                }
            }
            c => return Err(format!("unexpected {c:?} (at character {}): steps are `.name`, `['name']` or `[*]`", i + 1)),
        }
    }
    if steps.is_empty() {
        return Err("`$` alone selects the whole value: name a member (e.g. `$.nonce`)".into());
    }
    Ok(steps)
}

/// Remove what `path` selects from `value`, in place (nothing when it selects nothing).
pub fn remove(value: &mut Value, path: &[Step]) {
    let Some((step, rest)) = path.split_first() else { return };
    match (step, value) {
        (Step::Key(key), Value::Object(entries)) => {
            if rest.is_empty() {
                entries.retain(|(k, _)| k.as_ref() != key.as_ref());
            } else if let Some((_, child)) = entries.iter_mut().find(|(k, _)| k.as_ref() == key.as_ref()) {
                remove(child, rest);
            }
        }
        (Step::Each, Value::Array(items)) => {
            if rest.is_empty() {
                items.clear();
            } else {
                items.iter_mut().for_each(|item| remove(item, rest));
            }
        }
        (Step::Each, Value::Object(entries)) => {
            if rest.is_empty() {
                entries.clear();
            } else {
                entries.iter_mut().for_each(|(_, child)| remove(child, rest));
            }
        }
        _ => {}
    }
}

/// Only what `paths` select of `value` (the skeleton that leads to it kept); None: nothing.
fn keep<'a>(value: &Value<'a>, paths: &[&[Step]]) -> Option<Value<'a>> {
    if paths.iter().any(|p| p.is_empty()) {
        return Some(value.clone());
    }
    match value {
        Value::Object(entries) => {
            let mut kept = Vec::new();
            for (key, child) in entries {
                let below: Vec<&[Step]> = paths
                    .iter()
                    .filter(|p| match &p[0] {
                        Step::Key(k) => k.as_ref() == key.as_ref(),
                        Step::Each => true,
                    })
                    .map(|p| &p[1..])
                    .collect();
                if below.is_empty() {
                    continue;
                }
                if let Some(v) = keep(child, &below) {
                    kept.push((key.clone(), v));
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Array(items) => {
            let below: Vec<&[Step]> = paths.iter().filter(|p| p[0] == Step::Each).map(|p| &p[1..]).collect();
            if below.is_empty() {
                return None;
            }
            Some(Value::Array(items.iter().filter_map(|item| keep(item, &below)).collect()))
        }
        _ => None,
    }
}

/// Does `name` match `pattern`? `*` matches any run of characters; everything else is literal.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// What one rule projects out of the arguments (ignoreArgs) or keeps of them (keepArgs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ArgsProjection {
    #[default]
    None,
    Ignore(Vec<Path>),
    Keep(Vec<Path>),
}

/// One compiled rule. `pattern` is a normalised tool name, or a glob of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolRule {
    pub pattern: String,
    pub class: ToolClass,
    pub args: ArgsProjection,
    pub ignore_result: Vec<Path>,
}

impl ToolRule {
    pub fn projects_args(&self) -> bool {
        self.args != ArgsProjection::None
    }

    /// The arguments as hashed: `params` with the rule's paths removed, or only its kept paths.
    pub fn project_args<'a>(&self, params: &Value<'a>) -> Value<'a> {
        match &self.args {
            ArgsProjection::None => params.clone(),
            ArgsProjection::Ignore(paths) => {
                let mut projected = params.clone();
                paths.iter().for_each(|p| remove(&mut projected, p));
                projected
            }
            ArgsProjection::Keep(paths) => {
                let paths: Vec<&[Step]> = paths.iter().map(Vec::as_slice).collect();
                keep(params, &paths).unwrap_or(Value::Object(Vec::new()))
            }
        }
    }

    /// The result as hashed: the volatile fields `ignoreResult` names removed.
    pub fn project_result(&self, result: &mut Value) {
        self.ignore_result.iter().for_each(|p| remove(result, p));
    }
}

/// An agent's rules, most specific first: exact names, then globs by their literal length
/// (longest first), ties in the order written. The first match is the tool's rule.
#[derive(Clone, Debug, Default)]
pub struct ToolRules {
    rules: Vec<ToolRule>,
}

impl ToolRules {
    pub fn new(mut rules: Vec<ToolRule>) -> ToolRules {
        let specificity = |r: &ToolRule| {
            let globbed = r.pattern.contains('*');
            (globbed, std::cmp::Reverse(r.pattern.bytes().filter(|&c| c != b'*').count()))
        };
        rules.sort_by_key(specificity);
        ToolRules { rules }
    }

    pub fn shared(rules: Vec<ToolRule>) -> Arc<ToolRules> {
        Arc::new(ToolRules::new(rules))
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[ToolRule] {
        &self.rules
    }

    /// The rule of a normalised tool name, if any.
    pub fn find(&self, tool: &str) -> Option<&ToolRule> {
        // A pattern without `*` is a name: glob_match is then plain equality.
        self.rules.iter().find(|r| glob_match(&r.pattern, tool))
    }
}

/// The compiled rules from what Python hands over: a sequence of `ToolRule`s (`CompiledRule`
/// below), each path a sequence of steps (a name, or None for `[*]`), already validated by the
/// config loader (which parsed every path with `parse_path`).
#[cfg(feature = "python")]
pub(crate) fn from_py(value: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<Arc<ToolRules>> {
    use pyo3::types::PyAnyMethods;
    let raw: Vec<pyo3::PyRef<'_, CompiledRule>> = value.extract()?;
    let paths = |steps: &[Vec<Option<String>>]| -> Vec<Path> {
        steps
            .iter()
            .map(|p| p.iter().map(|s| s.as_ref().map_or(Step::Each, |k| Step::Key(k.as_bytes().into()))).collect())
            .collect()
    };
    let mut rules = Vec::with_capacity(raw.len());
    for rule in &raw {
        let CompiledRule { tool: pattern, tool_class: class, ignore_args, keep_args, ignore_result } = &**rule;
        let pattern = pattern.clone();
        let class = ToolClass::from_name(class)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("tool rule {pattern}: unknown class {class:?}")))?;
        let args = match (ignore_args.is_empty(), keep_args.is_empty()) {
            (true, true) => ArgsProjection::None,
            (false, true) => ArgsProjection::Ignore(paths(ignore_args)),
            (true, false) => ArgsProjection::Keep(paths(keep_args)),
            (false, false) => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "tool rule {pattern}: ignoreArgs and keepArgs are mutually exclusive"
                )))
            }
        };
        rules.push(ToolRule { pattern, class, args, ignore_result: paths(ignore_result) });
    }
    Ok(ToolRules::shared(rules))
}

/// One `loopwarden.toolRules` entry as the config loader compiled it (`loopwarden_core.ToolRule`,
/// config/tool_rules.py builds them): its tool pattern, class, and its paths as steps (a member
/// name, or None for `[*]`), each path already validated with `parse_path`.
#[cfg(feature = "python")]
#[pyo3::pyclass(module = "loopwarden_core", name = "ToolRule", frozen, get_all)]
pub(crate) struct CompiledRule {
    tool: String,
    tool_class: String,
    ignore_args: Vec<Vec<Option<String>>>,
    keep_args: Vec<Vec<Option<String>>>,
    ignore_result: Vec<Vec<Option<String>>>,
}

#[cfg(feature = "python")]
#[pyo3::pymethods]
impl CompiledRule {
    #[new]
    #[pyo3(signature = (tool, tool_class, *, ignore_args = Vec::new(), keep_args = Vec::new(), ignore_result = Vec::new()))]
    fn new(tool: String, tool_class: String, ignore_args: Vec<Vec<Option<String>>>, keep_args: Vec<Vec<Option<String>>>,
           ignore_result: Vec<Vec<Option<String>>>) -> CompiledRule {
        CompiledRule { tool, tool_class, ignore_args, keep_args, ignore_result }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{canonical, decode};

    fn path(text: &str) -> Path {
        parse_path(text).unwrap()
    }

    fn text(value: &Value) -> String {
        String::from_utf8(canonical(value)).unwrap()
    }

    #[test]
    fn the_documented_subset_parses() {
        assert_eq!(path("$.a.b"), vec![Step::Key(b"a".to_vec().into()), Step::Key(b"b".to_vec().into())]);
        assert_eq!(path("$.a[*].b"), path("$['a'][*][\"b\"]"));
        assert_eq!(path("$.a.*"), path("$.a[*]"));
        assert_eq!(path("$['we.ird key']"), vec![Step::Key(b"we.ird key".to_vec().into())]);
        assert_eq!(path(r"$['it\'s']"), vec![Step::Key(b"it's".to_vec().into())]);
    }

    #[test]
    fn anything_else_is_refused_saying_why() {
        for (bad, why) in [
            ("a.b", "must start with `$`"),
            ("$", "`$` alone"),
            ("$..a", "recursive descent"),
            ("$.a[0]", "indexes"),
            ("$.a[?(@.x)]", "expected `[*]`"),
            ("$.", "expected a member name"),
            ("$['a", "unterminated"),
            ("$['a'x", "expected `]`"),
            ("$a", "unexpected 'a'"),
        ] {
            let error = parse_path(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn remove_and_keep_project_the_selected_fields() {
        let value = decode(r#"{"a": {"b": 1, "c": 2}, "items": [{"id": 1, "ts": 9}, {"id": 2, "ts": 8}], "n": 5}"#, 64).unwrap();
        let mut removed = value.clone();
        remove(&mut removed, &path("$.a.b"));
        remove(&mut removed, &path("$.items[*].ts"));
        remove(&mut removed, &path("$.missing.x"));
        assert_eq!(text(&removed), r#"{"a":{"c":2},"items":[{"id":1},{"id":2}],"n":5}"#);
        let rule = ToolRule { args: ArgsProjection::Keep(vec![path("$.a.c"), path("$.items[*].id"), path("$.absent")]), ..Default::default() };
        assert_eq!(text(&rule.project_args(&value)), r#"{"a":{"c":2},"items":[{"id":1},{"id":2}]}"#);
        let nothing = ToolRule { args: ArgsProjection::Keep(vec![path("$.absent")]), ..Default::default() };
        assert_eq!(text(&nothing.project_args(&value)), "{}");
    }

    #[test]
    fn globs_match_normalised_names_and_the_most_specific_rule_wins() {
        assert!(glob_match("mcp__github__*", "mcp__github__create_issue"));
        assert!(glob_match("*_status", "command_status"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("fetch", "fetcher"));
        assert!(!glob_match("*_status", "status_x"));
        let rule = |p: &str, class| ToolRule { pattern: p.into(), class, ..Default::default() };
        let rules = ToolRules::new(vec![
            rule("*", ToolClass::ReadOnly),
            rule("send_*", ToolClass::Mutating),
            rule("send_email_draft", ToolClass::ReadOnly),
        ]);
        assert_eq!(rules.find("send_email").map(|r| r.class), Some(ToolClass::Mutating));
        assert_eq!(rules.find("send_email_draft").map(|r| r.class), Some(ToolClass::ReadOnly));
        assert_eq!(rules.find("read").map(|r| r.class), Some(ToolClass::ReadOnly));
        assert!(ToolRules::default().find("read").is_none());
    }
}
