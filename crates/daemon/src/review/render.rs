//! The review as people read it: plain text for a terminal, markdown for a pull-request
//! comment (a summary table first: tables changed, blocking problems, cost per day per owner;
//! then each table's settings and consequences). Severity is a word, never only a colour.

use std::fmt::Write as _;

use serde_json::Value;

use crate::review::model::{Change, Consequence, Review, SettingChange, Severity, TableChange};

/// The review in plain text; `base` names what it was compared with.
pub(crate) fn text(review: &Review, base: &str) -> String {
    let mut out = String::new();
    if review.tables.is_empty() && review.budget.is_none() {
        let _ = writeln!(out, "no table's effective settings changed against {base}");
        return out;
    }
    let _ = writeln!(
        out,
        "against {base}: {} table(s) changed{}, {} blocking problem(s)",
        review.tables.len(),
        budget_changed(review),
        review.blocking
    );
    if let Some(budget) = &review.budget {
        let _ = writeln!(out, "\nbudget (changed)");
        text_lines(&mut out, &budget.settings, &budget.consequences);
    }
    for t in &review.tables {
        let _ = writeln!(
            out,
            "\ntable {} ({}, owner {})",
            t.table,
            t.change.as_str(),
            t.owner
        );
        let settings = if t.change == Change::Changed {
            &t.settings[..]
        } else {
            &[]
        };
        text_lines(&mut out, settings, &t.consequences);
    }
    out
}

/// ", the budget changed" when it did.
fn budget_changed(review: &Review) -> &'static str {
    if review.budget.is_some() {
        ", the budget changed"
    } else {
        ""
    }
}

/// Each setting's change, then each consequence, a line each.
fn text_lines(out: &mut String, settings: &[SettingChange], consequences: &[Consequence]) {
    for s in settings {
        let _ = writeln!(
            out,
            "  {}: {} -> {}",
            s.key,
            value(&s.before),
            value(&s.after)
        );
    }
    for c in consequences {
        let _ = writeln!(out, "  [{}] {}", c.severity.as_str(), c.message);
    }
}

/// The review as a pull-request comment.
pub(crate) fn markdown(review: &Review, base: &str) -> String {
    let mut out = String::new();
    if review.tables.is_empty() && review.budget.is_none() {
        let _ = writeln!(
            out,
            "### tablekeeper plan\n\nNo table's effective settings changed against `{base}`."
        );
        return out;
    }
    let _ = writeln!(
        out,
        "### tablekeeper plan: {} table(s) changed{}, {} blocking problem(s)\n",
        review.tables.len(),
        budget_changed(review),
        review.blocking
    );
    let _ = writeln!(out, "Compared with `{base}`.\n");
    let _ = writeln!(out, "| table | owner | change | blocking | warnings |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for t in &review.tables {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            cell(&t.table),
            cell(&t.owner),
            t.change.as_str(),
            count(t, Severity::Blocking),
            count(t, Severity::Warning)
        );
    }
    let _ = writeln!(out, "\n| owner | cost per day before | after |");
    let _ = writeln!(out, "|---|---|---|");
    for (owner, cost) in &review.cost_per_day {
        let usd = |v: Option<f64>| {
            v.map_or_else(|| "not measured yet".to_owned(), |v| format!("${v:.2}"))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            cell(owner),
            usd(cost.before),
            usd(cost.after)
        );
    }
    if let Some(budget) = &review.budget {
        let _ = writeln!(out, "\n#### budget (changed)\n");
        details(&mut out, &budget.settings, &budget.consequences);
    }
    for t in &review.tables {
        let _ = writeln!(out, "\n#### `{}` ({})\n", cell(&t.table), t.change.as_str());
        let settings = if t.change == Change::Changed {
            &t.settings[..]
        } else {
            &[]
        };
        details(&mut out, settings, &t.consequences);
    }
    out
}

/// A settings table (when any changed), then the consequences, most severe first.
fn details(out: &mut String, settings: &[SettingChange], consequences: &[Consequence]) {
    if !settings.is_empty() {
        let _ = writeln!(out, "| setting | before | after |");
        let _ = writeln!(out, "|---|---|---|");
        for s in settings {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                cell(&s.key),
                code(&value(&s.before)),
                code(&value(&s.after))
            );
        }
        let _ = writeln!(out);
    }
    if consequences.is_empty() {
        let _ = writeln!(out, "Nothing else changes.");
    }
    let mut consequences: Vec<_> = consequences.iter().collect();
    consequences.sort_by_key(|c| c.severity);
    for c in consequences {
        let severity = match c.severity {
            Severity::Blocking => "**blocking**",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        let _ = writeln!(out, "- {severity}: {}", c.message.replace('\n', " "));
    }
}

fn count(t: &TableChange, severity: Severity) -> usize {
    t.consequences
        .iter()
        .filter(|c| c.severity == severity)
        .count()
}

/// A setting's value as written in the inventory: strings bare, absent as a dash.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn code(text: &str) -> String {
    if text == "—" {
        text.to_owned()
    } else {
        format!("`{}`", cell(text).replace('`', "'"))
    }
}

/// Text safe inside a markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::model::{Change, Consequence, Kind, SettingChange};

    #[test]
    fn markdown_puts_the_summary_first_and_names_each_severity() {
        let mut review = Review::default();
        review.push(TableChange {
            table: "silver.events".into(),
            owner: "data|platform".into(),
            change: Change::Changed,
            settings: vec![SettingChange {
                key: "retention.deleted_file_retention".into(),
                before: Value::String("7d".into()),
                after: Value::String("2d".into()),
            }],
            consequences: vec![
                Consequence::new(
                    Kind::RetentionShortened,
                    Severity::Warning,
                    "versions 3–9 stop being restorable",
                ),
                Consequence::new(
                    Kind::ReaderUnprotected,
                    Severity::Blocking,
                    "reader `trino` runs 12h",
                ),
            ],
        });
        let md = markdown(&review, "git:main");
        let summary = md.find("| table | owner |").unwrap();
        let details = md.find("#### `silver.events`").unwrap();
        assert!(summary < details, "{md}");
        assert!(md.contains("1 blocking problem(s)"), "{md}");
        assert!(md.contains("data\\|platform"), "pipes escaped: {md}");
        let blocking = md.find("- **blocking**: reader").unwrap();
        let warning = md.find("- warning: versions").unwrap();
        assert!(blocking < warning, "blocking first: {md}");
        assert!(
            text(&Review::default(), "base.yaml").contains("no table's effective settings changed")
        );
    }
}
