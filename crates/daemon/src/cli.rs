//! Command-line interface (DESIGN.md "CLI" contract): argument definitions only; each
//! subcommand's behaviour lives in `commands/`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "tablekeeper",
    version,
    about = "Keeps a fleet of Delta Lake tables maintained: compaction, Z-order, VACUUM and checkpoints from a YAML inventory"
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "TABLEKEEPER_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    /// A pull-request comment (with `--base` only).
    Markdown,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: schedules, workers, HTTP. SIGTERM/SIGINT drain and exit 0; SIGHUP reloads the inventory.
    Run {
        /// Daemon config file (YAML); every key can be overridden with TABLEKEEPER_<KEY>.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Validate inventory files or directories: exit 0 valid, 1 invalid (problems on stderr), 2 unusable input.
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Show, per table, health, drift and what would run now and why, without changing anything; exit 3 when a table cannot be read.
    Plan {
        /// Daemon config file naming the inventory.
        #[arg(long, short, conflicts_with = "inventory")]
        config: Option<PathBuf>,
        /// Inventory file or directory.
        #[arg(long)]
        inventory: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
        /// Exit 0 even when a table cannot be read (for CI jobs without storage access).
        #[arg(long)]
        allow_unreadable: bool,
        /// Compare with this inventory and show only what changed, with its consequences:
        /// a path, or `git:REF` for the inventory at that ref of its git repository. Exit 4
        /// when a consequence is blocking.
        #[arg(long, requires = "inventory")]
        base: Option<String>,
    },
    /// Run one operation on one table now, in the foreground, without a job store; prints the result as JSON.
    Maintain {
        #[arg(long)]
        inventory: PathBuf,
        #[arg(long)]
        table: String,
        /// compact, zorder, vacuum, checkpoint or repair.
        #[arg(long)]
        operation: String,
        /// Plan the operation and report what it would do, changing nothing.
        #[arg(long)]
        dry_run: bool,
        /// Apply the need thresholds (min_small_files, max_commits_since_checkpoint, ...) as a
        /// schedule tick does; without it the operation runs whatever they say.
        #[arg(long)]
        if_needed: bool,
        /// Let checkpoint delete expired log files even though no job store keeps their
        /// history: DESCRIBE HISTORY and time travel lose those commits for good.
        #[arg(long)]
        cleanup_log: bool,
    },
    /// Find stale writes (commits planned before one of tablekeeper's rewrites) and print (--dry-run) or apply their exact repair.
    Repair {
        #[arg(long)]
        inventory: PathBuf,
        #[arg(long)]
        table: String,
        /// Print the repair plan as JSON, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Apply the job-store migrations (the daemon also applies them at start).
    Migrate {
        #[arg(long, env = "TABLEKEEPER_DATABASE_URL")]
        database_url: Option<String>,
    },
    /// Print the inventory's JSON Schema (for editors and CI).
    Schema,
    /// Reports read from the job store.
    Report {
        #[command(subcommand)]
        report: ReportCommand,
    },
    /// Quickstart: create small-file-heavy demo tables and run the daemon on them with the embedded store.
    Demo {
        /// Folder for the demo tables, inventory and database.
        #[arg(long, default_value = "tablekeeper-demo")]
        dir: PathBuf,
        /// Address for the dashboard and metrics.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Stop by itself after this long (default: run until Ctrl-C).
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// What maintenance cost, by owner, table or operation: the chargeback report, read from
    /// the job store (jobs' measured costs, probes' costs, the monthly price of the bytes the
    /// history keeps).
    Costs {
        /// Daemon config file: its `database_url`, `prices` and `inventory`.
        #[arg(long, short, conflicts_with = "database_url")]
        config: Option<PathBuf>,
        /// The job store to read (default: the config's, else TABLEKEEPER_DATABASE_URL).
        #[arg(long)]
        database_url: Option<String>,
        /// The period: a duration back from now (`30d`, `36h`) or an RFC 3339 time.
        #[arg(long, default_value = "30d")]
        since: String,
        /// Only this owner's jobs, probes and retained bytes (as the jobs' results recorded
        /// the owner, and the inventory names the tables' owners).
        #[arg(long)]
        owner: Option<String>,
        #[arg(long, value_enum, default_value_t = crate::costs::report::By::Owner)]
        by: crate::costs::report::By,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// The maintenance budget per window: its budget and mode, what the jobs started in it
    /// spent, how many ran, how many waited (or in shadow mode would have) and the longest
    /// wait; read from the job store.
    Budget {
        /// Daemon config file: its `database_url`.
        #[arg(long, short, conflicts_with = "database_url")]
        config: Option<PathBuf>,
        /// The job store to read (default: the config's, else TABLEKEEPER_DATABASE_URL).
        #[arg(long)]
        database_url: Option<String>,
        /// The period: a duration back from now (`7d`, `36h`) or an RFC 3339 time.
        #[arg(long, default_value = "7d")]
        since: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Csv,
    Markdown,
}
