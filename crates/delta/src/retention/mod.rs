//! What storage must keep, and the only deletion of data files: how long removed files and old
//! log entries must be kept ([`window`]: the "longest wins" rule), and VACUUM, which deletes
//! only what nothing inside that window needs ([`vacuum`]), nor a pin or another table's log
//! ([`keep`]). What a change of the retention would do, before it is made: [`preview`].
//!
//! This module only declares; the items live in the files.

pub(crate) mod keep;
pub(crate) mod preview;
pub(crate) mod vacuum;
pub(crate) mod window;
