//! A table's health from its log alone: the prober that keeps tables loaded and re-probes them
//! incrementally ([`prober`]), the damage check that every referenced file and loadable version
//! is still there ([`presence`], which every operation's preparation also runs), and since when
//! deleted rows are still on storage ([`erasure`]), and the daily proof that every version owed
//! still restores ([`drill`]).
//!
//! This module only declares; the items live in the files.

pub(crate) mod drill;
pub(crate) mod erasure;
pub(crate) mod presence;
pub(crate) mod prober;
