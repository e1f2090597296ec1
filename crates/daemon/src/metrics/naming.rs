//! How every metric is named: the `tablekeeper_` namespace, for counters, gauges and
//! histograms alike.

use prometheus::{HistogramOpts, Opts};

pub(super) fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace("tablekeeper")
}

pub(super) fn histogram(name: &str, help: &str, buckets: &[f64]) -> HistogramOpts {
    HistogramOpts::new(name, help)
        .namespace("tablekeeper")
        .buckets(buckets.to_vec())
}
