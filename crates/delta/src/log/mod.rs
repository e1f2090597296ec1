//! The transaction log, read and kept: reading it directly ([`read`]: listings, commits,
//! partition keys, `_last_checkpoint`), one read of each commit file per process
//! ([`shared_reads`]), the deletion vectors its actions name
//! ([`deletion_vector`]), which versions load and what cleanup may delete ([`integrity`]), the
//! rule that no commit of tablekeeper's deletes a log file ([`guard`]), the one operation that
//! does delete log files, after writing a checkpoint ([`checkpoint`]), every commit tablekeeper
//! writes ([`commit`]), the table's system domains ([`domain`]), the commit history
//! that outlives the log ([`history`]), the files another table's log references, read
//! without deltalake ([`references`]), and a UniForm table's Iceberg metadata ([`iceberg`]).
//!
//! This module only declares; the items live in the files.

pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod deletion_vector;
pub(crate) mod domain;
pub(crate) mod guard;
pub(crate) mod history;
pub(crate) mod iceberg;
pub(crate) mod integrity;
pub(crate) mod path;
pub(crate) mod read;
pub(crate) mod references;
pub(crate) mod shared_reads;
