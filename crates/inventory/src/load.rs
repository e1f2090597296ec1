//! Reading an inventory from disk: which files, in which order, and the rules that compare
//! files and tables with each other (one `defaults:` block, one `budget:` block, unique names,
//! unique paths, budget owners that own tables).
//!
//! A path is a file or a directory. In a directory every `*.yaml` and `*.yml` file directly
//! inside it is read (not sub-directories), in byte order of the file names; names starting
//! with `.` are skipped (editor files, and the `..data` entries of Kubernetes ConfigMap
//! mounts). A file named explicitly is read whatever its extension. A file reached twice
//! (named and also inside a named directory) is read once.
//!
//! An empty file, or one with only comments, holds no tables and is fine: it lets a team
//! keep a placeholder in Git. A directory without any inventory file is unusable: it is
//! almost always a wrong path.
//!
//! This module must never return an inventory when any problem was found.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::budget::check_owners;
use crate::build::build_table;
use crate::check::{check_file, FileDraft};
use crate::error::{LoadError, Problem};
use crate::model::Inventory;
use crate::tree::{self, Loc};

/// Loads the inventory named by `paths` (files and directories, merged as one inventory).
pub(crate) fn load_paths(paths: &[PathBuf]) -> Result<Inventory, LoadError> {
    if paths.is_empty() {
        return Err(LoadError::Unusable {
            path: PathBuf::new(),
            reason: "no inventory path given: name a YAML file or a directory of them".to_string(),
        });
    }
    let files = discover(paths)?;
    let mut sources = Vec::new();
    let mut texts = Vec::new();
    for file in files {
        texts.push(read_text(&file)?);
        sources.push(file);
    }
    let named: Vec<(PathBuf, String)> = sources.iter().cloned().zip(texts).collect();
    let inventory = check_texts(&named)?;
    Ok(inventory)
}

/// Checks already-read files as one inventory; the entry point for tests and for callers
/// that read files themselves. Files are taken in the given order.
pub(crate) fn check_texts(files: &[(PathBuf, String)]) -> Result<Inventory, LoadError> {
    let mut problems: Vec<Problem> = Vec::new();
    let mut drafts: Vec<FileDraft> = Vec::new();
    for (file, text) in files {
        match tree::parse(text) {
            Ok(root) => drafts.push(check_file(file, root.as_ref(), &mut problems)),
            Err(syntax) => {
                problems.push(problem(file, syntax.loc, None, None, syntax.message));
                drafts.push(FileDraft::default());
            }
        }
    }

    let fleet = single_block(
        files,
        &drafts,
        "defaults",
        |d| d.defaults.as_ref(),
        &mut problems,
    )
    .map(|(_, settings)| settings);
    let budget = single_block(
        files,
        &drafts,
        "budget",
        |d| d.budget.as_ref(),
        &mut problems,
    );
    check_unique_tables(&drafts, &mut problems);
    if let Some((file, budget)) = budget {
        let owners: Vec<Option<&str>> = drafts
            .iter()
            .flat_map(|d| &d.tables)
            .map(|t| t.owner.get().map(String::as_str))
            .collect();
        check_owners(file, budget, &owners, &mut problems);
    }

    let mut tables = Vec::new();
    for table in drafts.iter().flat_map(|d| &d.tables) {
        if let Some(spec) = build_table(table, fleet, &mut problems) {
            tables.push(spec);
        }
    }
    if !problems.is_empty() {
        // `Problem` orders by file, line, column first.
        problems.sort();
        problems.dedup();
        return Err(LoadError::Invalid(problems));
    }
    Ok(Inventory {
        tables,
        sources: files.iter().map(|(file, _)| file.clone()).collect(),
        budget: budget.and_then(|(_, draft)| draft.budget.clone()),
    })
}

/// The one `key:` block of the inventory (`defaults:`, `budget:`) and the file it is in; every
/// further one is a problem naming the first.
fn single_block<'d, T>(
    files: &'d [(PathBuf, String)],
    drafts: &'d [FileDraft],
    key: &str,
    block: impl Fn(&'d FileDraft) -> Option<&'d (T, Loc)>,
    problems: &mut Vec<Problem>,
) -> Option<(&'d Path, &'d T)> {
    let mut first: Option<(&Path, Loc, &'d T)> = None;
    for ((file, _), draft) in files.iter().zip(drafts) {
        let Some((value, loc)) = block(draft) else {
            continue;
        };
        match first {
            None => first = Some((file, *loc, value)),
            Some((first_file, first_loc, _)) => problems.push(problem(
                file,
                *loc,
                None,
                Some(key),
                format!(
                    "a second `{key}:` block; the first is at {}:{}:{}. Only one file of an \
                     inventory may hold `{key}:`: merge the two blocks into one",
                    first_file.display(),
                    first_loc.line,
                    first_loc.column
                ),
            )),
        }
    }
    first.map(|(file, _, value)| (file, value))
}

/// Names and paths must be unique across the whole inventory; each later entry is reported
/// with the location of the first.
fn check_unique_tables(drafts: &[FileDraft], problems: &mut Vec<Problem>) {
    let tables: Vec<_> = drafts.iter().flat_map(|d| &d.tables).collect();
    // First entry per name and per path identity: one pass, however large the inventory.
    let mut first_by_name: HashMap<&str, usize> = HashMap::new();
    let mut first_by_path: HashMap<&str, usize> = HashMap::new();
    for (index, table) in tables.iter().enumerate() {
        let first_name = table
            .name
            .get()
            .map(|n| *first_by_name.entry(n.as_str()).or_insert(index))
            .filter(|&first| first != index)
            .map(|first| tables[first]);
        let first_path = table
            .path
            .get()
            .map(|p| *first_by_path.entry(p.identity.as_str()).or_insert(index))
            .filter(|&first| first != index)
            .map(|first| tables[first]);
        if let Some(name) = table.name.at() {
            if let Some(first) = first_name {
                let at = first.name.at().map_or(first.loc, |a| a.loc);
                problems.push(problem(
                    &table.file,
                    name.loc,
                    Some(&name.value),
                    Some("name"),
                    format!(
                        "table name `{}` is already used at {}:{}:{}; names must be unique across the \
                         inventory: rename one of them",
                        name.value,
                        first.file.display(),
                        at.line,
                        at.column
                    ),
                ));
            }
        }
        if let Some(path) = table.path.at() {
            if let Some(first) = first_path {
                let at = first.path.at().map_or(first.loc, |a| a.loc);
                let first_name = first
                    .label
                    .as_ref()
                    .map(|n| format!("table `{n}`"))
                    .unwrap_or_else(|| "another table".to_string());
                problems.push(problem(
                    &table.file,
                    path.loc,
                    table.label.as_deref(),
                    Some("path"),
                    format!(
                        "path `{}` is already used by {first_name} at {}:{}:{}; two entries for one \
                         table schedule two compactions that can commit over each other and \
                         duplicate rows: keep a single entry",
                        path.value.normalized,
                        first.file.display(),
                        at.line,
                        at.column
                    ),
                ));
            }
        }
    }
}

fn problem(
    file: &Path,
    loc: Loc,
    table: Option<&str>,
    field: Option<&str>,
    message: String,
) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: loc.line,
        column: loc.column,
        table: table.map(str::to_string),
        field: field.map(str::to_string),
        message,
    }
}

/// The files to read, in order, each once.
fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        let metadata = fs::metadata(path).map_err(|e| unusable(path, &e))?;
        let found = if metadata.is_dir() {
            let listed = list_dir(path)?;
            if listed.is_empty() {
                return Err(LoadError::Unusable {
                    path: path.clone(),
                    reason: "the directory holds no `*.yaml` or `*.yml` file: point at the \
                             inventory directory or file"
                        .to_string(),
                });
            }
            listed
        } else if metadata.is_file() {
            vec![path.clone()]
        } else {
            return Err(LoadError::Unusable {
                path: path.clone(),
                reason: "neither a file nor a directory".to_string(),
            });
        };
        for file in found {
            // Canonical paths find the same file named twice; report it under the name the
            // user gave.
            let identity = fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if seen.insert(identity) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let entries = fs::read_dir(dir).map_err(|e| unusable(dir, &e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| unusable(dir, &e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if name.starts_with('.') || !(name.ends_with(".yaml") || name.ends_with(".yml")) {
            continue;
        }
        let path = entry.path();
        // Follows symlinks: ConfigMap mounts link each file into a hidden directory.
        if fs::metadata(&path).map(|m| m.is_file()).unwrap_or(false) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn read_text(file: &Path) -> Result<String, LoadError> {
    let bytes = fs::read(file).map_err(|e| unusable(file, &e))?;
    String::from_utf8(bytes).map_err(|e| LoadError::Unusable {
        path: file.to_path_buf(),
        reason: format!(
            "not UTF-8 text (invalid byte at offset {}): save the file as UTF-8",
            e.utf8_error().valid_up_to()
        ),
    })
}

fn unusable(path: &Path, error: &std::io::Error) -> LoadError {
    let reason = match error.kind() {
        ErrorKind::NotFound => "no such file or directory".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => error.to_string().to_lowercase(),
    };
    LoadError::Unusable {
        path: path.to_path_buf(),
        reason,
    }
}
