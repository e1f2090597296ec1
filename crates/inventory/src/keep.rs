//! What a table keeps for others: `retention.clones` (shallow clones outside the inventory,
//! whose logs VACUUM reads) and `retention.pins` (versions held until a date).
//!
//! Owns reading both from the tree, each problem at its own item with its field path
//! (`retention.pins[1].until`); whether a pin has expired is not a validation question (it
//! changes with the clock): the daemon reports expired pins and stops honouring them.

use crate::model::{Pin, PinAt};
use crate::tree::{Node, Value};
use crate::values::{self, DateAs};
use crate::walk::{read_count, read_string, read_string_list, Block, Ctx, Field, Keys};

/// Keys of one `retention.pins` entry.
pub(crate) const PIN_KEYS: &[&str] = &["version", "timestamp", "until", "reason"];

/// `retention.clones`: a list of table paths, normalized like `path:`.
pub(crate) fn read_clones(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Vec<String>> {
    let items = read_string_list(ctx, node, field)?;
    let mut clones = Vec::new();
    let mut ok = true;
    for (i, item) in items.into_iter().enumerate() {
        match values::parse_table_path(&item.value) {
            Ok(path) => clones.push(path.normalized),
            Err(message) => {
                ctx.error(item.loc, &format!("{field}[{i}]"), message);
                ok = false;
            }
        }
    }
    ok.then_some(clones)
}

/// `retention.pins`: `{ version | timestamp, until, reason }` mappings.
pub(crate) fn read_pins(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Vec<Pin>> {
    let Value::Seq(items) = &node.value else {
        ctx.error(
            node.loc,
            field,
            format!(
                "expected a list of `{{ version, until, reason }}` mappings, found {}",
                node.value.kind()
            ),
        );
        return None;
    };
    let mut pins = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match read_pin(ctx, item, &format!("{field}[{i}]")) {
            Some(pin) => pins.push(pin),
            None => ok = false,
        }
    }
    ok.then_some(pins)
}

fn read_pin(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<Pin> {
    let block = Block::open(
        ctx,
        node,
        path,
        Keys {
            known: PIN_KEYS,
            elsewhere: &[],
            note: Some("e.g. `{ version: 1482, until: 2027-03-01, reason: \"model run 88\" }`"),
        },
    )?;
    let version = block.read(ctx, "version", |ctx, node, field| {
        read_count(ctx, node, field, 0, i64::MAX as u64, "versions start at 0")
    });
    let timestamp = block.read(ctx, "timestamp", |ctx, node, field| {
        instant(ctx, node, field, DateAs::Start)
    });
    let until = block.read(ctx, "until", |ctx, node, field| {
        instant(ctx, node, field, DateAs::End)
    });
    let reason = block.read(ctx, "reason", read_string);
    let at = match (&version, &timestamp) {
        (Field::Set(v), Field::Absent) => Some(PinAt::Version(v.value)),
        (Field::Absent, Field::Set(t)) => Some(PinAt::Timestamp(t.value)),
        (Field::Set(_), Field::Set(_)) => {
            ctx.error(
                node.loc,
                path,
                "a pin holds one version: set `version` or `timestamp`, not both",
            );
            None
        }
        (Field::Absent, Field::Absent) => {
            ctx.error(
                node.loc,
                path,
                "missing `version` (or `timestamp`): say which version the pin holds, e.g. \
                 `version: 1482`",
            );
            None
        }
        _ => None,
    };
    if matches!(until, Field::Absent) {
        ctx.error(
            node.loc,
            &block.field("until"),
            "missing required key `until`: a pin must end, e.g. `until: 2027-03-01`; an \
             expired pin is reported and no longer keeps anything",
        );
    }
    Some(Pin {
        at: at?,
        until: until.get().copied()?,
        reason: match reason {
            Field::Set(reason) => reason.value,
            Field::Absent => String::new(),
            Field::Invalid => return None,
        },
    })
}

fn instant(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
    date_as: DateAs,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let Value::Str(text) = &node.value else {
        ctx.error(
            node.loc,
            field,
            format!(
                "expected a date or an RFC 3339 instant, found {}: write e.g. `2027-03-01`",
                node.value.kind()
            ),
        );
        return None;
    };
    values::parse_instant(text, date_as)
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}
