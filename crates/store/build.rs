//! Rebuild when a migration changes: `sqlx::migrate!` embeds the files at compile time
//! but does not tell cargo to watch them.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations/postgres");
    println!("cargo:rerun-if-changed=../../migrations/sqlite");
}
