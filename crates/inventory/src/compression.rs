//! `layout.compression`: a codec name (`zstd`), or `{ codec, level }`, read from the tree into
//! a checked [`Compression`]; the codec's level range is checked here, at the level's line.

use tablekeeper_vocab::{Codec, Compression};

use crate::tree::{Node, Value};
use crate::walk::{read_choice, read_count, Block, Ctx, Keys};

/// Keys of the `{ codec, level }` form.
pub(crate) const COMPRESSION_KEYS: &[&str] = &["codec", "level"];

pub(crate) fn read_compression(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Compression> {
    if let Value::Str(_) = node.value {
        let codec = read_codec(ctx, node, field)?;
        return checked(ctx, node, field, codec, None);
    }
    if !matches!(node.value, Value::Map(_)) {
        ctx.error(
            node.loc,
            field,
            format!(
                "expected a codec (`zstd`) or `{{ codec: zstd, level: 4 }}`, found {}",
                node.value.kind()
            ),
        );
        return None;
    }
    let block = Block::open(
        ctx,
        node,
        field,
        Keys {
            known: COMPRESSION_KEYS,
            elsewhere: &[],
            note: Some("e.g. `compression: { codec: zstd, level: 9 }`"),
        },
    )?;
    let Some(codec_node) = block.node("codec") else {
        ctx.error(
            block.loc,
            &block.field("codec"),
            format!(
                "`codec` is required: one of {}",
                Codec::ALL.map(Codec::as_str).join(", ")
            ),
        );
        return None;
    };
    let codec = read_codec(ctx, codec_node, &block.field("codec"))?;
    let Some(level_node) = block.node("level") else {
        return checked(ctx, node, field, codec, None);
    };
    let level_field = block.field("level");
    let level = read_count(
        ctx,
        level_node,
        &level_field,
        0,
        u64::from(u32::MAX),
        "a level is a whole number",
    )?;
    let level = u32::try_from(level).unwrap_or(u32::MAX);
    checked(ctx, level_node, &level_field, codec, Some(level))
}

/// `codec` at `level`, or the codec's own words on what it accepts, reported at `node`.
fn checked(
    ctx: &mut Ctx<'_>,
    node: &Node,
    field: &str,
    codec: Codec,
    level: Option<u32>,
) -> Option<Compression> {
    Compression::new(codec, level)
        .map_err(|message| ctx.error(node.loc, field, message))
        .ok()
}

fn read_codec(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Codec> {
    let choices = Codec::ALL.map(|codec| (codec.as_str(), codec));
    read_choice(ctx, node, field, &choices)
}
