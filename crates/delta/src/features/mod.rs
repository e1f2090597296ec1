//! Table features: the protocol facts of a table, read once ([`protocol`]), which protocols and
//! features tablekeeper may maintain, for which operations, and why it refuses the rest
//! ([`maintainable`]). The writer rules of each feature a rewrite or
//! commit must follow belong here beside them.
//!
//! This module only declares; the items live in the files.

pub(crate) mod collations;
pub(crate) mod maintainable;
pub(crate) mod protocol;
