//! What to queue, and when: the cron schedules ([`cron`]) fire ticks ([`tick`]) that probe
//! a table and enqueue what the planner says is needed; the probe rounds ([`probes`]) probe
//! every table that is due, and each probe's findings are recorded and acted on ([`record`]:
//! history, shared probes, stale writes and their repairs, erasure deadlines).

pub(crate) mod cron;
pub(crate) mod probes;
pub(crate) mod record;
pub(crate) mod tick;
