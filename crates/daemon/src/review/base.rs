//! The inventory a pull request is compared with (`plan --base BASE`): a path, or `git:REF`
//! for the same inventory at a ref of the git repository that holds it (the pull request's
//! base branch in CI). A ref's files are written to a temporary folder under the same names
//! and loaded there, so a problem in them is reported the way `validate` reports it.
//!
//! It runs `git` (the repository's own tool, on PATH) and reads; it never changes the
//! repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use tablekeeper_inventory::{Inventory, LoadError};

/// Why the base inventory could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BaseError {
    #[error("{0}")]
    Git(String),
    #[error("cannot write the base inventory to a temporary folder: {0}")]
    Io(#[from] std::io::Error),
    #[error("the base inventory {origin} does not load")]
    Load { origin: String, source: LoadError },
}

/// The base inventory `base` names, for the inventory at `head` (a file or a folder).
pub(crate) fn load(base: &str, head: &Path) -> Result<Inventory, BaseError> {
    match base.strip_prefix("git:") {
        Some(reference) => at_ref(reference, head),
        None => Inventory::load(Path::new(base)).map_err(|source| BaseError::Load {
            origin: base.to_owned(),
            source,
        }),
    }
}

/// `head`'s inventory as it is at `reference` of the repository holding it.
fn at_ref(reference: &str, head: &Path) -> Result<Inventory, BaseError> {
    let folder = if head.is_dir() {
        head.to_path_buf()
    } else {
        head.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    };
    let prefix = git(&folder, &["rev-parse", "--show-prefix"])?;
    let prefix = prefix.trim();
    let names: Vec<String> = if head.is_dir() {
        git(&folder, &["ls-tree", "--name-only", reference, "--", "."])?
            .lines()
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
            .map(str::to_owned)
            .collect()
    } else {
        head.file_name()
            .map(|n| vec![n.to_string_lossy().into_owned()])
            .unwrap_or_default()
    };
    let copy = tempfile::tempdir()?;
    for name in &names {
        let text = git(&folder, &["show", &format!("{reference}:{prefix}{name}")])?;
        std::fs::write(copy.path().join(name), text)?;
    }
    let target = if head.is_dir() {
        copy.path().to_path_buf()
    } else {
        copy.path()
            .join(names.first().map_or("inventory.yaml", String::as_str))
    };
    Inventory::load(&target).map_err(|source| BaseError::Load {
        origin: format!("git:{reference}"),
        source,
    })
}

/// Runs `git args` in `dir`; its stdout, or an error quoting git.
fn git(dir: &Path, args: &[&str]) -> Result<String, BaseError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| {
            BaseError::Git(format!(
                "cannot run git ({e}): install git, or pass the base inventory as a path"
            ))
        })?;
    if !out.status.success() {
        return Err(BaseError::Git(format!(
            "`git {}` in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
