//! Errors of the inventory crate: why an inventory could not be loaded.
//!
//! Two kinds, because callers treat them differently: [`LoadError::Unusable`] means the
//! input could not even be read (wrong path, unreadable, not text; `tablekeeper validate`
//! exits 2), [`LoadError::Invalid`] carries every [`Problem`] found in input that could be
//! read (exit 1). A problem is located (file, line, column) and says how to fix it; it is
//! data, so the CLI prints one per line and the daemon logs them on a failed reload.

use std::fmt;
use std::path::PathBuf;

/// Why [`crate::Inventory::load`] or [`crate::Inventory::load_paths`] returned no inventory.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The input could not be read at all: a missing path, an unreadable file, a file that
    /// is not UTF-8 text, or a directory without any `*.yaml`/`*.yml` file.
    #[error("cannot use inventory `{}`: {reason}", path.display())]
    Unusable {
        /// The path that could not be used.
        path: PathBuf,
        /// What is wrong with it, lowercase, no trailing period.
        reason: String,
    },
    /// The input was read but holds problems; all of them, sorted by file, line, column.
    #[error("{}", render_problems(.0))]
    Invalid(Vec<Problem>),
}

impl LoadError {
    /// The problems of an [`LoadError::Invalid`] inventory; empty for
    /// [`LoadError::Unusable`].
    pub fn problems(&self) -> &[Problem] {
        match self {
            LoadError::Invalid(problems) => problems,
            LoadError::Unusable { .. } => &[],
        }
    }
}

fn render_problems(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    format!(
        "invalid inventory ({} problems):\n{}",
        problems.len(),
        lines.join("\n")
    )
}

/// One located problem in an inventory file.
///
/// Renders (via `Display`) exactly as
/// ``FILE:LINE:COL: error: table `NAME`: `field.path`: message``; the table part is left
/// out for problems outside a table and the field part for problems not tied to a key
/// (a YAML syntax error, for instance).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file the problem is in, as it was named or found (directory + file name).
    pub file: PathBuf,
    /// 1-based line of the offending value or key.
    pub line: usize,
    /// 1-based column (in characters) of the offending value or key.
    pub column: usize,
    /// The table the problem belongs to, when it is inside a table that has a name.
    pub table: Option<String>,
    /// The key path inside the table (`retention.deleted_file_retention`) or, outside a
    /// table, inside the file (`defaults.compaction.schedule`).
    pub field: Option<String>,
    /// What is wrong and how to fix it: lowercase, no trailing period.
    pub message: String,
}

impl fmt::Display for Problem {
    /// One line per problem, always: names, keys and values quoted from the file may hold
    /// line breaks or other control characters, which are written escaped (`\n`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display().to_string();
        write!(
            f,
            "{}:{}:{}: error: ",
            OneLine(&file),
            self.line,
            self.column
        )?;
        if let Some(table) = &self.table {
            write!(f, "table `{}`: ", OneLine(table))?;
        }
        if let Some(field) = &self.field {
            write!(f, "`{}`: ", OneLine(field))?;
        }
        write!(f, "{}", OneLine(&self.message))
    }
}

/// Writes text with control characters escaped.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// A schedule that tablekeeper cannot run; the message says which forms are accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub(crate) String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_renders_on_one_line() {
        let p = Problem {
            file: PathBuf::from("inv.yaml"),
            line: 3,
            column: 5,
            table: Some("t".to_string()),
            field: Some("a\nb".to_string()),
            message: "unknown key `a\nb`\t".to_string(),
        };
        assert_eq!(
            p.to_string(),
            "inv.yaml:3:5: error: table `t`: `a\\nb`: unknown key `a\\nb`\\t"
        );
    }
}
