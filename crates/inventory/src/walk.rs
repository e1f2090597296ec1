//! Generic helpers for walking the located YAML tree: opening a mapping against its known
//! keys, reading typed values, and recording located problems.
//!
//! Everything here reports and continues: a wrong value becomes a [`Problem`] and an
//! [`Field::Invalid`], never an early return, so one pass finds every problem. This module
//! knows nothing about tables; the inventory's shape lives in `check.rs`.

use std::path::Path;
use std::time::Duration;

use crate::error::Problem;
use crate::schedule::Schedule;
use crate::tree::{Entry, Loc, Node, Value};
use crate::values;

/// A value read from the tree, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct At<T> {
    pub value: T,
    pub loc: Loc,
}

/// The outcome of reading one key: not written (or written as null), written but wrong
/// (a problem was recorded), or a good value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Field<T> {
    Absent,
    Invalid,
    Set(At<T>),
}

impl<T> Field<T> {
    pub fn at(&self) -> Option<&At<T>> {
        match self {
            Field::Set(at) => Some(at),
            Field::Absent | Field::Invalid => None,
        }
    }

    pub fn get(&self) -> Option<&T> {
        self.at().map(|at| &at.value)
    }

    pub fn is_invalid(&self) -> bool {
        matches!(self, Field::Invalid)
    }
}

/// Where problems go while one file is walked.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub file: &'a Path,
    /// The table being walked, for the "table `NAME`" part of each problem.
    pub table: Option<String>,
    pub problems: &'a mut Vec<Problem>,
}

impl Ctx<'_> {
    /// Records a problem at `loc`; `field` is the key path (empty: none).
    pub fn error(&mut self, loc: Loc, field: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.to_path_buf(),
            line: loc.line,
            column: loc.column,
            table: self.table.clone(),
            field: (!field.is_empty()).then(|| field.to_string()),
            message: message.into(),
        });
    }
}

/// Joins a key path: `join("retention", "log_retention")` is `retention.log_retention`.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// How to explain unknown keys of one mapping.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys<'k> {
    /// Every key the mapping accepts.
    pub known: &'k [&'k str],
    /// Keys that are valid elsewhere, with a hint where they belong.
    pub elsewhere: &'k [(&'k str, &'k str)],
    /// An extra sentence for unknown keys (the list of operations under `maintenance`).
    pub note: Option<&'k str>,
}

/// A mapping whose keys were checked: known keys, first occurrence of each.
#[derive(Debug)]
pub(crate) struct Block<'n> {
    pub path: String,
    pub loc: Loc,
    entries: Vec<&'n Entry>,
}

impl<'n> Block<'n> {
    /// Opens `node` as a mapping with the given keys, reporting a wrong type, unknown keys
    /// (with a did-you-mean hint), repeated keys and non-text keys. `None` only when the
    /// node is not a mapping.
    pub fn open(
        ctx: &mut Ctx<'_>,
        node: &'n Node,
        path: &str,
        keys: Keys<'_>,
    ) -> Option<Block<'n>> {
        let Value::Map(entries) = &node.value else {
            ctx.error(
                node.loc,
                path,
                format!(
                    "expected a mapping with keys {}, found {}",
                    keys.known.join(", "),
                    node.value.kind()
                ),
            );
            return None;
        };
        let mut kept: Vec<&'n Entry> = Vec::new();
        for entry in entries {
            let Some(key) = entry.key.as_deref() else {
                ctx.error(
                    entry.key_loc,
                    path,
                    "a key must be a plain word, found a list or mapping used as a key",
                );
                continue;
            };
            let field = join(path, key);
            if !keys.known.contains(&key) {
                ctx.error(entry.key_loc, &field, unknown_key_message(key, path, keys));
                continue;
            }
            if let Some(first) = kept.iter().find(|e| e.key.as_deref() == Some(key)) {
                ctx.error(
                    entry.key_loc,
                    &field,
                    format!(
                        "`{key}` is set twice in this mapping (first at line {}): keep one",
                        first.key_loc.line
                    ),
                );
                continue;
            }
            kept.push(entry);
        }
        Some(Block {
            path: path.to_string(),
            loc: node.loc,
            entries: kept,
        })
    }

    /// The value of `key`, unless absent or null.
    pub fn node(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|e| e.key.as_deref() == Some(key))
            .map(|e| &e.value)
            .filter(|node| node.value != Value::Null)
    }

    /// The key path of `key` inside this block.
    pub fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Reads `key` with `read`, which reports its own problems and returns `None` for a
    /// bad value.
    pub fn read<T>(
        &self,
        ctx: &mut Ctx<'_>,
        key: &str,
        read: impl FnOnce(&mut Ctx<'_>, &'n Node, &str) -> Option<T>,
    ) -> Field<T> {
        let Some(node) = self.node(key) else {
            return Field::Absent;
        };
        match read(ctx, node, &self.field(key)) {
            Some(value) => Field::Set(At {
                value,
                loc: node.loc,
            }),
            None => Field::Invalid,
        }
    }
}

fn unknown_key_message(key: &str, path: &str, keys: Keys<'_>) -> String {
    let place = if path.is_empty() {
        String::new()
    } else {
        format!(" under `{path}`")
    };
    let mut message = if let Some((_, home)) = keys.elsewhere.iter().find(|(k, _)| *k == key) {
        format!("`{key}` does not belong{place}: {home}")
    } else if let Some(close) = did_you_mean(key, keys.known) {
        format!("unknown key `{key}`{place}: did you mean `{close}`?")
    } else {
        format!(
            "unknown key `{key}`{place}: allowed keys are {}",
            keys.known.join(", ")
        )
    };
    if let Some(note) = keys.note {
        message.push_str(" (");
        message.push_str(note);
        message.push(')');
    }
    message
}

/// The known word closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    // 0.6 accepts one or two edits on words of six letters or more (`owners` → `owner`,
    // `compcation` → `compaction`) and rejects unrelated words of similar length.
    const MIN_SIMILARITY: f64 = 0.6;
    let word = word.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::normalized_damerau_levenshtein(&word, k), *k))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// `, put it in quotes` for scalars that YAML typed as something else than a string.
fn quote_hint(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) | Value::Int(_) | Value::Float(_) => ": put it in quotes",
        _ => "",
    }
}

pub(crate) fn read_string(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<String> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        other => {
            ctx.error(
                node.loc,
                field,
                format!(
                    "expected a string, found {}{}",
                    other.kind(),
                    quote_hint(other)
                ),
            );
            None
        }
    }
}

/// A string that must not be empty or blank.
pub(crate) fn read_nonempty(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<String> {
    let s = read_string(ctx, node, field)?;
    if s.trim().is_empty() {
        ctx.error(
            node.loc,
            field,
            "the value is empty: write a non-empty string",
        );
        return None;
    }
    Some(s)
}

pub(crate) fn read_bool(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<bool> {
    match &node.value {
        Value::Bool(b) => Some(*b),
        Value::Str(s) => {
            ctx.error(
                node.loc,
                field,
                format!("expected `true` or `false`, found `{s}` (YAML 1.2 reads only true/false as booleans)"),
            );
            None
        }
        other => {
            ctx.error(
                node.loc,
                field,
                format!("expected `true` or `false`, found {}", other.kind()),
            );
            None
        }
    }
}

/// A whole number in `min..=max`.
pub(crate) fn read_count(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
    min: u64,
    max: u64,
    why_min: &str,
) -> Option<u64> {
    let n = match &node.value {
        Value::Int(n) => *n,
        Value::Str(s) => {
            ctx.error(
                node.loc,
                field,
                format!("expected a whole number, found the string `{s}`: write the number without quotes"),
            );
            return None;
        }
        other => {
            ctx.error(
                node.loc,
                field,
                format!("expected a whole number, found {}", other.kind()),
            );
            return None;
        }
    };
    if n < i128::from(min) {
        ctx.error(node.loc, field, format!("{n} is too small: {why_min}"));
        return None;
    }
    if n > i128::from(max) {
        ctx.error(
            node.loc,
            field,
            format!("{n} is too large: the largest allowed value is {max}"),
        );
        return None;
    }
    u64::try_from(n).ok()
}

/// A finite number above 0, whole or decimal; `why_positive` says what 0 would mean and
/// what to write instead.
pub(crate) fn read_positive_number(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
    why_positive: &str,
) -> Option<f64> {
    let n = match &node.value {
        // i128 to f64 rounds past 2^53, far beyond any budget
        Value::Int(n) => *n as f64,
        Value::Float(x) => *x,
        Value::Str(s) => {
            ctx.error(
                node.loc,
                field,
                format!(
                    "expected a number, found the string `{s}`: write the number without quotes"
                ),
            );
            return None;
        }
        other => {
            ctx.error(
                node.loc,
                field,
                format!("expected a number, found {}", other.kind()),
            );
            return None;
        }
    };
    // the YAML reader already refuses `.inf` and `.nan`; checked again so that a NaN, which
    // compares false with everything, can never pass as positive
    if !n.is_finite() {
        ctx.error(
            node.loc,
            field,
            format!("{n} is not a finite number: write a number such as `600` or `0.5`"),
        );
        return None;
    }
    if n <= 0.0 {
        ctx.error(
            node.loc,
            field,
            format!("{n} is not positive: {why_positive}"),
        );
        return None;
    }
    Some(n)
}

/// A list of strings; each element keeps its location. Repeated elements are reported.
pub(crate) fn read_string_list(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
) -> Option<Vec<At<String>>> {
    let items = match &node.value {
        Value::Seq(items) => items,
        Value::Str(s) => {
            ctx.error(
                node.loc,
                field,
                format!("expected a list of strings, found a string: write `[{s}]`"),
            );
            return None;
        }
        other => {
            ctx.error(
                node.loc,
                field,
                format!("expected a list of strings, found {}", other.kind()),
            );
            return None;
        }
    };
    let mut out: Vec<At<String>> = Vec::new();
    let mut ok = true;
    for item in items {
        match &item.value {
            Value::Str(s) if s.trim().is_empty() => {
                ctx.error(item.loc, field, "the list holds an empty string: remove it");
                ok = false;
            }
            Value::Str(s) => {
                if out.iter().any(|seen| seen.value == *s) {
                    ctx.error(
                        item.loc,
                        field,
                        format!("`{s}` is listed twice: remove one"),
                    );
                    ok = false;
                } else {
                    out.push(At {
                        value: s.clone(),
                        loc: item.loc,
                    });
                }
            }
            other => {
                ctx.error(
                    item.loc,
                    field,
                    format!(
                        "expected a string in the list, found {}{}",
                        other.kind(),
                        quote_hint(other)
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

pub(crate) fn read_duration(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Duration> {
    let parsed = match &node.value {
        Value::Str(s) => values::parse_duration(s),
        Value::Int(n) => values::parse_duration(&n.to_string()),
        other => Err(format!(
            "expected a duration, found {}: write e.g. `30m`, `168h`, `7d`, `2w` or `interval 7 days`",
            other.kind()
        )),
    };
    parsed
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}

pub(crate) fn read_size(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<u64> {
    let parsed = match &node.value {
        Value::Str(s) => values::parse_size(s),
        Value::Int(n) => u64::try_from(*n).map_err(|_| {
            format!("{n} is not a size: write e.g. `128MB`, `512MiB`, `1GiB` or a number of bytes")
        }),
        other => Err(format!(
            "expected a size, found {}: write e.g. `128MB`, `512MiB`, `1GiB` or a number of bytes",
            other.kind()
        )),
    };
    parsed
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}

pub(crate) fn read_schedule(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Schedule> {
    let parsed = match &node.value {
        Value::Str(s) => Schedule::parse(s).map_err(|e| e.to_string()),
        other => Err(format!(
            "expected a cron schedule in quotes, found {}: write e.g. `\"0 2 * * *\"` or `@daily`",
            other.kind()
        )),
    };
    parsed
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}

pub(crate) fn read_timezone(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<chrono_tz::Tz> {
    let parsed = match &node.value {
        Value::Str(s) => values::parse_timezone(s),
        other => Err(format!(
            "expected an IANA timezone name, found {}: write e.g. `UTC` or `Europe/Berlin`",
            other.kind()
        )),
    };
    parsed
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}

/// One of a closed set of words; the problem lists the allowed ones.
pub(crate) fn read_choice<T: Copy>(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
    choices: &[(&str, T)],
) -> Option<T> {
    let allowed: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
    let Value::Str(s) = &node.value else {
        ctx.error(
            node.loc,
            field,
            format!(
                "expected one of {}, found {}",
                allowed.join(", "),
                node.value.kind()
            ),
        );
        return None;
    };
    if let Some((_, value)) = choices.iter().find(|(word, _)| word == s) {
        return Some(*value);
    }
    let hint = did_you_mean(s, &allowed)
        .map(|close| format!("did you mean `{close}`? "))
        .unwrap_or_default();
    ctx.error(
        node.loc,
        field,
        format!(
            "unknown value `{s}`: {hint}allowed values are {}",
            allowed.join(", ")
        ),
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos_only() {
        let known = ["name", "path", "owner", "concurrency_key", "retention"];
        assert_eq!(did_you_mean("owners", &known), Some("owner"));
        assert_eq!(did_you_mean("Owner", &known), Some("owner"));
        assert_eq!(did_you_mean("retension", &known), Some("retention"));
        assert_eq!(did_you_mean("colour", &known), None);
        assert_eq!(
            did_you_mean(
                "compcation",
                &["compaction", "zorder", "vacuum", "checkpoint"]
            ),
            Some("compaction")
        );
    }

    #[test]
    fn join_builds_key_paths() {
        assert_eq!(join("", "name"), "name");
        assert_eq!(
            join("maintenance.vacuum", "schedule"),
            "maintenance.vacuum.schedule"
        );
    }
}
