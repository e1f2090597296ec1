//! The top-level `budget:` block (DESIGN.md, "Budget (contract)"): reading it from the tree
//! into a checked [`Budget`], and checking its owner caps against the tables' owners.
//!
//! Owns the rules inside the block (a window of at least a minute, positive figures, no
//! owner cap above the fleet budget) and the one rule across the inventory (a capped owner
//! owns a table); that only one file holds a `budget:` is `load.rs`'s, as for `defaults:`.
//! This module states no weights or costs: what the budget buys is the planner's business.

use std::collections::BTreeMap;
use std::path::Path;

use crate::defaults;
use crate::error::Problem;
use crate::model::{Budget, BudgetMode};
use crate::tree::{Node, Value};
use crate::walk::{
    did_you_mean, read_choice, read_duration, read_positive_number, At, Block, Ctx, Field, Keys,
};

/// Keys of the `budget:` block.
pub(crate) const BUDGET_KEYS: &[&str] = &["window", "cpu_seconds", "owners", "mode"];

const BUDGET_ELSEWHERE: &[(&str, &str)] = &[(
    "importance",
    "importance is per table: write it under a table's `maintenance:` or under `defaults:`",
)];

/// What the `budget:` block says.
#[derive(Debug)]
pub(crate) struct BudgetDraft {
    /// The block, checked and defaulted; `None` when a value was wrong (already reported).
    pub budget: Option<Budget>,
    /// Every capped owner with where its key is written, even one whose cap was wrong, so
    /// that unknown owners are reported in the same pass.
    pub owners: Vec<At<String>>,
}

/// Reads `budget:`; `None` only when it is not a mapping (already reported).
pub(crate) fn read_budget(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<BudgetDraft> {
    let block = Block::open(
        ctx,
        node,
        path,
        Keys {
            known: BUDGET_KEYS,
            elsewhere: BUDGET_ELSEWHERE,
            note: None,
        },
    )?;
    let window = block.read(ctx, "window", |ctx, node, field| {
        let window = read_duration(ctx, node, field)?;
        if window < defaults::MIN_BUDGET_WINDOW {
            ctx.error(
                node.loc,
                field,
                format!(
                    "a window of {} is too short to bound what the jobs it admits spend (most \
                     run longer): write at least `1m` (default `1h`)",
                    humantime::format_duration(window)
                ),
            );
            return None;
        }
        Some(window)
    });
    let cpu_seconds = block.read(ctx, "cpu_seconds", |ctx, node, field| {
        read_positive_number(
            ctx,
            node,
            field,
            "`cpu_seconds` is what budgeted maintenance may spend per window across all \
             replicas: write a positive number, e.g. `3600` (one core for an hour)",
        )
    });
    if matches!(cpu_seconds, Field::Absent) {
        ctx.error(
            block.loc,
            &block.field("cpu_seconds"),
            "missing required key `cpu_seconds`: write the CPU-seconds budgeted maintenance may \
             spend per window across all replicas, e.g. `cpu_seconds: 3600` (one core for an \
             hour)",
        );
    }
    let mode = block.read(ctx, "mode", |ctx, node, field| {
        read_choice(ctx, node, field, &BudgetMode::ALL.map(|m| (m.as_str(), m)))
    });
    let (owners, caps) = match block.node("owners") {
        Some(node) => read_owners(ctx, node, &block.field("owners"), cpu_seconds.get()),
        None => (Vec::new(), Some(BTreeMap::new())),
    };
    let budget = match (cpu_seconds.get(), caps) {
        (Some(&cpu_seconds), Some(owners)) if !window.is_invalid() && !mode.is_invalid() => {
            Some(Budget {
                window: window.get().copied().unwrap_or(defaults::BUDGET_WINDOW),
                cpu_seconds,
                owners,
                mode: mode.get().copied().unwrap_or(defaults::BUDGET_MODE),
            })
        }
        _ => None,
    };
    Some(BudgetDraft { budget, owners })
}

/// `budget.owners`: owner name -> positive CPU-seconds, each at most `fleet` (when that was
/// readable). Returns every owner written and, when every cap is good, the caps.
fn read_owners(
    ctx: &mut Ctx<'_>,
    node: &Node,
    path: &str,
    fleet: Option<&f64>,
) -> (Vec<At<String>>, Option<BTreeMap<String, f64>>) {
    let Value::Map(entries) = &node.value else {
        ctx.error(
            node.loc,
            path,
            format!(
                "expected a mapping of owner to CPU-seconds, e.g. `owners: {{ finance: 600 }}`, \
                 found {}",
                node.value.kind()
            ),
        );
        return (Vec::new(), None);
    };
    let mut owners: Vec<At<String>> = Vec::new();
    let mut caps = BTreeMap::new();
    let mut ok = true;
    for entry in entries {
        let Some(owner) = entry.key.as_deref() else {
            ctx.error(
                entry.key_loc,
                path,
                "an owner must be a plain name, found a list or mapping used as a key",
            );
            ok = false;
            continue;
        };
        let field = format!("{path}.{owner}");
        if let Some(first) = owners.iter().find(|o| o.value == owner) {
            ctx.error(
                entry.key_loc,
                &field,
                format!(
                    "owner `{owner}` is capped twice (first at line {}): keep one",
                    first.loc.line
                ),
            );
            ok = false;
            continue;
        }
        owners.push(At {
            value: owner.to_string(),
            loc: entry.key_loc,
        });
        let Some(cap) = read_positive_number(
            ctx,
            &entry.value,
            &field,
            "a cap is the CPU-seconds per window the owner's tables may spend: write a \
             positive number, or remove the owner to leave it uncapped",
        ) else {
            ok = false;
            continue;
        };
        if let Some(&fleet) = fleet {
            if cap > fleet {
                ctx.error(
                    entry.value.loc,
                    &field,
                    format!(
                        "a cap of {cap} CPU-seconds for `{owner}` is above the fleet budget \
                         `budget.cpu_seconds` ({fleet}): an owner's cap is a share of the fleet \
                         budget; lower it to at most {fleet} or raise `budget.cpu_seconds`"
                    ),
                );
                ok = false;
                continue;
            }
        }
        caps.insert(owner.to_string(), cap);
    }
    (owners, ok.then_some(caps))
}

/// Every owner capped in `budget.owners` owns a table of the inventory: a cap on an owner
/// without tables is a typo or a leftover, and would silently apply to nothing.
/// `owners` are the tables' owners as read, `None` for one that could not be read.
pub(crate) fn check_owners(
    file: &Path,
    budget: &BudgetDraft,
    owners: &[Option<&str>],
    problems: &mut Vec<Problem>,
) {
    // An owner that could not be read is reported at its table; checking against the rest
    // would call a correct cap unknown.
    if owners.iter().any(Option::is_none) {
        return;
    }
    let mut known: Vec<&str> = owners.iter().flatten().copied().collect();
    known.sort_unstable();
    known.dedup();
    let mut ctx = Ctx {
        file,
        table: None,
        problems,
    };
    for owner in budget
        .owners
        .iter()
        .filter(|o| !known.contains(&o.value.as_str()))
    {
        let hint = did_you_mean(&owner.value, &known)
            .map(|close| format!("did you mean `{close}`? "))
            .unwrap_or_default();
        ctx.error(
            owner.loc,
            &format!("budget.owners.{}", owner.value),
            format!(
                "no table of the inventory has owner `{}`, so the cap would apply to nothing: \
                 {hint}write the `owner` of a table, or remove the entry",
                owner.value
            ),
        );
    }
}
