//! What maintenance costs in money: the prices that turn measured CPU, object-store requests
//! and stored bytes into an estimate in USD. The defaults are public list prices (README
//! "Prices" names each source): AWS Fargate's Linux/x86 vCPU-hour and S3 Standard's requests
//! and storage, in us-east-1. Any one can be wrong for a given contract; they are estimates, and
//! every figure they turn into money stays beside the measure it came from.

use serde::{Deserialize, Serialize};
use tablekeeper_vocab::Cost;

use super::error::ConfigError;

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

    /// What `cost`'s CPU and requests come to at these prices (storage is priced apart).
    pub fn usd(&self, cost: &Cost) -> f64 {
        let r = &self.requests_per_1000;
        let requests = cost.requests.get as f64 * r.get
            + cost.requests.put as f64 * r.put
            + cost.requests.list as f64 * r.list
            + cost.requests.head as f64 * r.head
            + cost.requests.delete as f64 * r.delete;
        cost.cpu_seconds / 3600.0 * self.cpu_hour + requests / 1000.0
    }

    /// The list prices with `TABLEKEEPER_PRICES` over them, for commands without a config
    /// file (`maintain`).
    pub fn from_env() -> Result<Prices, ConfigError> {
        prices(None, "", &|key: &str| std::env::var(key).ok())
    }

    /// `cost` with its `estimated_usd` at these prices.
    pub fn priced(&self, mut cost: Cost) -> Cost {
        cost.estimated_usd = self.usd(&cost);
        cost
    }
}

/// `prices:` as the config file writes it: each price optional, the default list price where
/// absent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrices {
    cpu_hour: Option<f64>,
    requests_per_1000: Option<RawRequestPrices>,
    storage_gb_month: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequestPrices {
    get: Option<f64>,
    put: Option<f64>,
    list: Option<f64>,
    head: Option<f64>,
    delete: Option<f64>,
}

/// The prices: the file's `prices:`, then `TABLEKEEPER_PRICES` (`cpu_hour=0.05,get=0.0004`:
/// `cpu_hour`, `storage_gb_month` and the request kinds by name) over it, defaults for the
/// rest. A price must be a finite number of dollars, zero or more.
pub(super) fn prices(
    raw: Option<RawPrices>,
    file_origin: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Prices, ConfigError> {
    let mut prices = Prices::default();
    let raw = raw.unwrap_or_default();
    let requests = raw.requests_per_1000.unwrap_or_default();
    let from_file = [
        ("cpu_hour", raw.cpu_hour),
        ("storage_gb_month", raw.storage_gb_month),
        ("get", requests.get),
        ("put", requests.put),
        ("list", requests.list),
        ("head", requests.head),
        ("delete", requests.delete),
    ];
    for (name, value) in from_file {
        if let Some(value) = value {
            set(&mut prices, name, value, file_origin)?;
        }
    }
    if let Some(text) = env("TABLEKEEPER_PRICES").filter(|t| !t.trim().is_empty()) {
        let origin = "TABLEKEEPER_PRICES";
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let invalid = |message: String| ConfigError::Value {
                key: "prices",
                origin: origin.to_owned(),
                message,
            };
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                invalid(format!(
                    "`{pair}` is not `name=dollars` (write e.g. `cpu_hour=0.05,get=0.0004`)"
                ))
            })?;
            let value: f64 = value
                .trim()
                .parse()
                .map_err(|_| invalid(format!("`{}` is not a number of dollars", value.trim())))?;
            set(&mut prices, name.trim(), value, origin)?;
        }
    }
    Ok(prices)
}

fn set(prices: &mut Prices, name: &str, value: f64, origin: &str) -> Result<(), ConfigError> {
    let invalid = |message: String| ConfigError::Value {
        key: "prices",
        origin: origin.to_owned(),
        message,
    };
    if !value.is_finite() || value < 0.0 {
        return Err(invalid(format!(
            "`{name}` is {value}: a price is a number of dollars, zero or more"
        )));
    }
    let r = &mut prices.requests_per_1000;
    let slot = match name {
        "cpu_hour" => &mut prices.cpu_hour,
        "storage_gb_month" => &mut prices.storage_gb_month,
        "get" => &mut r.get,
        "put" => &mut r.put,
        "list" => &mut r.list,
        "head" => &mut r.head,
        "delete" => &mut r.delete,
        other => {
            return Err(invalid(format!(
                "`{other}` is not a price: use cpu_hour, storage_gb_month, get, put, list, head \
                 or delete"
            )))
        }
    };
    *slot = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekeeper_vocab::Requests;

    #[test]
    fn a_cost_is_priced_by_cpu_hour_and_requests_per_thousand() {
        let prices = Prices::default();
        let cost = Cost {
            cpu_seconds: 3600.0,
            requests: Requests {
                get: 1000,
                put: 2000,
                ..Requests::default()
            },
            ..Cost::default()
        };
        let usd = prices.usd(&cost);
        assert!((usd - (0.040_48 + 0.000_4 + 0.01)).abs() < 1e-12, "{usd}");
    }

    #[test]
    fn the_environment_overrides_the_file_and_bad_prices_name_themselves() {
        let raw = RawPrices {
            cpu_hour: Some(1.0),
            ..RawPrices::default()
        };
        let env = |key: &str| (key == "TABLEKEEPER_PRICES").then(|| "get=0.001, list=0".to_owned());
        let prices = prices(Some(raw), "config.yaml", &env).unwrap();
        assert_eq!(prices.cpu_hour, 1.0);
        assert_eq!(prices.requests_per_1000.get, 0.001);
        assert_eq!(prices.requests_per_1000.list, 0.0);
        assert_eq!(
            prices.requests_per_1000.put,
            Prices::default().requests_per_1000.put
        );
        let bad = |key: &str| (key == "TABLEKEEPER_PRICES").then(|| "gets=1".to_owned());
        let e = super::prices(None, "config.yaml", &bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`gets` is not a price"), "{e}");
        let negative = RawPrices {
            storage_gb_month: Some(-1.0),
            ..RawPrices::default()
        };
        let e = super::prices(Some(negative), "config.yaml", &|_: &str| None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("zero or more") && e.contains("config.yaml"),
            "{e}"
        );
    }
}
