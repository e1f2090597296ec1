//! Other writers against tablekeeper's rewrites: commits planned on a snapshot older than a
//! rewrite ([`stale`]), and their exact repair ([`repair`]).
//!
//! This module only declares; the items live in the files.

pub(crate) mod repair;
pub(crate) mod stale;
