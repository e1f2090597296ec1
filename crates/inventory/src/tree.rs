//! The lenient first pass: one YAML document as a tree of located nodes.
//!
//! Deserializing straight into typed structs stops at the first unknown key or wrong type,
//! and the inventory must report every problem at once. So a file is first read into this
//! untyped tree, where every node, key and scalar carries its line and column (from
//! serde-saphyr's [`Spanned`], which records the location of each YAML node), and the
//! checks in `check.rs` walk the tree afterwards.
//!
//! This module owns YAML parsing and nothing else: it must never interpret keys. The only
//! errors it reports are YAML-level ones (syntax, several documents in one file, resource
//! budgets), each with its location.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, MessageFormatter, Spanned};

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub line: usize,
    pub column: usize,
}

impl Loc {
    /// The start of a file, for problems about a file as a whole.
    pub const START: Loc = Loc { line: 1, column: 1 };

    fn from_saphyr(location: serde_saphyr::Location) -> Loc {
        // serde-saphyr reports line 0 for locations it does not know (its
        // `Location::UNKNOWN`); problems are promised 1-based, so point at the file start.
        let clamp = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).max(1);
        Loc {
            line: clamp(location.line()),
            column: clamp(location.column()),
        }
    }
}

/// A YAML node and where it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: Value,
    pub loc: Loc,
}

/// The value of a node, with YAML 1.2 core-schema scalar typing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in document order, duplicates kept (the checks report them).
    Map(Vec<Entry>),
}

impl Value {
    /// How a value is named in "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "a number",
            Value::Float(_) => "a decimal number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// One `key: value` pair of a mapping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The key as text; `None` when the key is a list or a mapping.
    pub key: Option<String>,
    pub key_loc: Loc,
    pub value: Node,
}

/// A YAML-level error: the file is not a single well-formed YAML document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub loc: Loc,
    pub message: String,
}

/// YAML nodes one inventory file may hold. serde-saphyr's default (250,000) stops a file at
/// about 35,000 tables; the inventory is reviewed text, not untrusted input, and a fleet of
/// 100,000 tables in one file needs about 700,000 nodes. Past this (about 500,000 tables of
/// a few keys each), split the inventory into several files of one directory.
const MAX_NODES: usize = 4_000_000;
/// Parser events one inventory file may produce (about two per node).
const MAX_EVENTS: usize = 4 * MAX_NODES;

/// Parses one YAML document. `Ok(None)` for a document without content (an empty file or
/// only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut options = serde_saphyr::Options::default();
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = MAX_NODES;
    budget.max_events = MAX_EVENTS;
    options.budget = Some(budget);
    // Keep repeated keys so the checks can report them with both locations instead of
    // the parser stopping the whole file at the first one.
    options.duplicate_keys = DuplicateKeyPolicy::PassThrough;
    // YAML 1.2 booleans only: with YAML 1.1 rules a key `n` or a value `no` turns into
    // `false`, which silently breaks key matching and string values.
    options.strict_booleans = true;
    match serde_saphyr::from_str_with_options::<Spanned<Value>>(text, options) {
        Ok(root) => {
            let node = Node::from(root);
            Ok((node.value != Value::Null).then_some(node))
        }
        Err(error) => Err(syntax_error(&error)),
    }
}

fn syntax_error(error: &serde_saphyr::Error) -> SyntaxError {
    let inner = error.without_snippet();
    let loc = inner.location().map_or(Loc::START, Loc::from_saphyr);
    let message = if matches!(inner, serde_saphyr::Error::MultipleDocuments { .. }) {
        "the file holds several YAML documents (`---`): put each table in its own file or \
         list them under one `tables:`"
            .to_string()
    } else if let serde_saphyr::Error::Budget { breach, .. } = inner {
        format!(
            "the file is larger than one inventory file may be ({breach:?}; at most \
             {MAX_NODES} YAML nodes, about 500,000 tables): split it into several files of \
             the inventory directory"
        )
    } else {
        let text = serde_saphyr::DefaultMessageFormatter.format_message(inner);
        // The formatter's text is raw parser output; keep problems on one line.
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        format!("invalid YAML: {text}")
    };
    SyntaxError { loc, message }
}

impl From<Spanned<Value>> for Node {
    fn from(spanned: Spanned<Value>) -> Node {
        Node {
            value: spanned.value,
            loc: Loc::from_saphyr(spanned.referenced),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Int(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(i128::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        // `!!binary` scalars: inventory values are text, so keep what is readable and let
        // the typed checks complain about it.
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Value>>()? {
            items.push(Node::from(item));
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Spanned<Value>>()?;
            entries.push(Entry {
                key: key.value.0,
                key_loc: Loc::from_saphyr(key.referenced),
                value: Node::from(value),
            });
        }
        Ok(Value::Map(entries))
    }
}

/// A mapping key as text: scalars are kept as written (`1` → "1"), collections become
/// `None` and are reported by the checks.
struct KeyText(Option<String>);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = KeyText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_unit<E>(self) -> Result<KeyText, E> {
        Ok(KeyText(Some("null".to_string())))
    }

    fn visit_none<E>(self) -> Result<KeyText, E> {
        Ok(KeyText(Some("null".to_string())))
    }

    fn visit_bool<E>(self, v: bool) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_i64<E>(self, v: i64) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_i128<E>(self, v: i128) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_u128<E>(self, v: u128) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_f64<E>(self, v: f64) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_str<E>(self, v: &str) -> Result<KeyText, E> {
        Ok(KeyText(Some(v.to_string())))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<KeyText, E> {
        Ok(KeyText(Some(String::from_utf8_lossy(v).into_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyText, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(KeyText(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyText, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(KeyText(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(node: &Node) -> &[Entry] {
        match &node.value {
            Value::Map(entries) => entries,
            other => panic!("expected a map, got {other:?}"),
        }
    }

    /// 50,000 tables need about 350,000 nodes: past serde-saphyr's default budget.
    #[test]
    fn a_file_of_fifty_thousand_tables_parses() {
        let mut text = String::from("tables:\n");
        for i in 0..50_000 {
            text.push_str(&format!(
                "  - name: fleet.t{i}\n    path: s3://lake/t{i}\n    owner: team-{}\n",
                i % 50
            ));
        }
        let root = parse(&text).unwrap().unwrap();
        match &map(&root)[0].value.value {
            Value::Seq(tables) => assert_eq!(tables.len(), 50_000),
            other => panic!("expected the tables, got {other:?}"),
        }
    }

    #[test]
    fn nodes_and_keys_carry_locations() {
        let root = parse("name: a\nlayout:\n  zorder: [x, y]\n")
            .unwrap()
            .unwrap();
        let entries = map(&root);
        assert_eq!(entries[0].key.as_deref(), Some("name"));
        assert_eq!(entries[0].key_loc, Loc { line: 1, column: 1 });
        assert_eq!(entries[0].value.loc, Loc { line: 1, column: 7 });
        let layout = map(&entries[1].value);
        assert_eq!(layout[0].key_loc, Loc { line: 3, column: 3 });
        let Value::Seq(items) = &layout[0].value.value else {
            panic!()
        };
        assert_eq!(
            items[1].loc,
            Loc {
                line: 3,
                column: 15
            }
        );
        assert_eq!(items[1].value, Value::Str("y".into()));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let root = parse("n: no\ny: yes\nok: true\n").unwrap().unwrap();
        let entries = map(&root);
        assert_eq!(entries[0].key.as_deref(), Some("n"));
        assert_eq!(entries[0].value.value, Value::Str("no".into()));
        assert_eq!(entries[2].value.value, Value::Bool(true));
    }

    #[test]
    fn duplicate_keys_are_kept_for_the_checks() {
        let root = parse("a: 1\na: 2\n").unwrap().unwrap();
        assert_eq!(map(&root).len(), 2);
    }

    #[test]
    fn empty_and_comment_only_documents_have_no_root() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# nothing yet\n").unwrap(), None);
    }

    #[test]
    fn syntax_errors_are_located() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert_eq!(err.loc.line, 2);
        assert!(err.message.starts_with("invalid YAML: "), "{}", err.message);
        assert!(!err.message.contains("line 2"), "{}", err.message);
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(
            err.message.contains("several YAML documents"),
            "{}",
            err.message
        );
    }

    #[test]
    fn complex_keys_have_no_text() {
        let root = parse("? [1, 2]\n: 3\n").unwrap().unwrap();
        assert_eq!(map(&root)[0].key, None);
    }
}
