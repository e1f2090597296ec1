//! What maintenance costs in money: the prices that turn measured CPU, object-store requests
//! and stored bytes into an estimate in USD. The defaults are public list prices (README
//! "Prices" names each source): AWS Fargate's Linux/x86 vCPU-hour and S3 Standard's requests
//! and storage, in us-east-1. Any one can be wrong for a given contract; they are estimates, and
//! every figure they turn into money stays beside the measure it came from.

use serde::Serialize;

/// Prices in USD.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prices {
    /// One CPU core for an hour.
    pub cpu_hour: f64,
    /// Per 1,000 object-store requests of each kind.
    pub requests_per_1000: RequestPrices,
    /// One GB (10^9 bytes) stored for a month.
    pub storage_gb_month: f64,
}

/// Per 1,000 requests, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RequestPrices {
    pub get: f64,
    pub put: f64,
    pub list: f64,
    pub head: f64,
    pub delete: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            // AWS Fargate, Linux/x86, per vCPU-hour, us-east-1
            cpu_hour: 0.040_48,
            requests_per_1000: RequestPrices {
                // S3 Standard, us-east-1: GET, SELECT and all other requests (HEAD among them)
                get: 0.000_4,
                // PUT, COPY, POST, LIST requests
                put: 0.005,
                list: 0.005,
                head: 0.000_4,
                // DELETE and CANCEL requests are free
                delete: 0.0,
            },
            // S3 Standard, first 50 TB per month
            storage_gb_month: 0.023,
        }
    }
}

impl Prices {
    /// What keeping `bytes` on storage costs per month.
    pub fn storage_per_month(&self, bytes: u64) -> f64 {
        bytes as f64 / 1e9 * self.storage_gb_month
    }
}
