//! A long `tablekeeper maintain`'s progress on stderr: an indicatif bar of the bytes rewritten
//! when stderr is a terminal, one plain line per finished task otherwise (CI logs, pipes).
//! stdout stays the report's alone.

use std::io::IsTerminal;

use bytesize::ByteSize;
use indicatif::{ProgressBar, ProgressStyle};

/// Tasks and bytes done of the job's total.
#[derive(Debug)]
pub(crate) struct TaskProgress {
    bar: Option<ProgressBar>,
    tasks: usize,
    bytes: u64,
    tasks_done: usize,
    bytes_done: u64,
}

impl TaskProgress {
    /// Starts showing a job of `tasks` tasks reading `bytes` in all.
    pub(crate) fn start(tasks: usize, bytes: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(bytes);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {binary_bytes}/{binary_total_bytes} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(format!("0/{tasks} tasks"));
            bar
        });
        if bar.is_none() {
            eprintln!("progress: 0 of {tasks} tasks, 0 B of {}", ByteSize(bytes));
        }
        TaskProgress {
            bar,
            tasks,
            bytes,
            tasks_done: 0,
            bytes_done: 0,
        }
    }

    /// One more task finished, having read `bytes`; `what` says how it ended.
    pub(crate) fn task_done(&mut self, bytes: u64, what: &str) {
        self.tasks_done += 1;
        self.bytes_done += bytes;
        match &self.bar {
            Some(bar) => {
                bar.set_position(self.bytes_done);
                bar.set_message(format!("{}/{} tasks", self.tasks_done, self.tasks));
            }
            None => eprintln!(
                "progress: {} of {} tasks, {} of {} ({what})",
                self.tasks_done,
                self.tasks,
                ByteSize(self.bytes_done),
                ByteSize(self.bytes)
            ),
        }
    }

    /// Clears the bar (the report follows on stdout).
    pub(crate) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
