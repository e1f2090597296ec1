//! What a table's VACUUM and log cleanup keep for others, gathered from the three places it is
//! declared: the inventory's `retention.pins` and `retention.clones`, the pins added through
//! the API (`table_pins`, shared by every replica), and the other inventoried tables whose
//! logs may reference this one's files (shallow clones).
//!
//! Owns the translation into the delta crate's [`Keep`]; the delta crate reads the logs and
//! decides which files stay. Which inventoried tables count as referrers: those whose last
//! probe (any replica's, shared through `table_probes`) saw files named by absolute path, and
//! those not probed yet, whose logs are read to find out. A table known to reference others
//! that cannot be read refuses the VACUUM; one merely not probed yet does not block it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekeeper_delta::{Keep, Pin, PinTarget, Referrer, Standing, RETENTION_FLOOR};
use tablekeeper_inventory::{Inventory, PinAt, TableSpec};
use tablekeeper_store::TablePin;

/// Whether the last probe of an inventoried table saw files outside its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum References {
    /// Its probe found files named by absolute path: a referrer, for certain.
    External,
    /// Its probe found every file under its own root.
    OwnOnly,
    /// Not probed yet (or never readable): its log is read to find out.
    Unknown,
}

/// The pins, clones and referrers `spec`'s VACUUM and checkpoint must respect.
pub(crate) fn keep_for(
    inventory: &Inventory,
    spec: &TableSpec,
    api_pins: &[TablePin],
    references: impl Fn(&TableSpec) -> References,
) -> Keep {
    let mut pins: Vec<Pin> = spec.retention.pins.iter().map(inventory_pin).collect();
    pins.extend(
        api_pins
            .iter()
            .filter(|p| p.table_name == spec.name)
            .filter_map(api_pin),
    );
    let mut referrers: Vec<Referrer> = spec
        .retention
        .clones
        .iter()
        .map(|path| Referrer {
            name: path.clone(),
            uri: path.clone(),
            // a clone outside the inventory declares no window: Delta's default one
            window: RETENTION_FLOOR,
            standing: Standing::Declared,
        })
        .collect();
    for other in inventory.tables.iter().filter(|t| t.name != spec.name) {
        if spec.retention.clones.contains(&other.path) {
            continue;
        }
        let standing = match references(other) {
            References::External => Standing::Seen,
            References::Unknown => Standing::Unknown,
            References::OwnOnly => continue,
        };
        referrers.push(Referrer {
            name: other.name.clone(),
            uri: other.path.clone(),
            window: window_of(other),
            standing,
        });
    }
    Keep { pins, referrers }
}

/// A referrer's own VACUUM window: what its versions inside it need stays.
fn window_of(spec: &TableSpec) -> Duration {
    if spec.retention.allow_short_retention {
        spec.vacuum_window()
    } else {
        spec.vacuum_window().max(RETENTION_FLOOR)
    }
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn inventory_pin(pin: &tablekeeper_inventory::Pin) -> Pin {
    Pin {
        target: match pin.at {
            PinAt::Version(v) => PinTarget::Version(v),
            PinAt::Timestamp(at) => PinTarget::Timestamp(millis(at)),
        },
        until_ms: millis(pin.until),
        reason: pin.reason.clone(),
        source: "inventory".into(),
    }
}

fn api_pin(pin: &TablePin) -> Option<Pin> {
    Some(Pin {
        target: PinTarget::Version(u64::try_from(pin.version).ok()?),
        until_ms: millis(pin.until),
        reason: pin.reason.clone(),
        source: pin.created_by.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory() -> Inventory {
        let yaml = r#"
tables:
  - name: silver.orders
    path: /lake/silver/orders
    owner: data
    retention:
      clones: [/lake/outside/orders_copy]
      pins:
        - { version: 12, until: 2027-03-01, reason: "model run 88" }
  - name: sandbox.orders_test
    path: /lake/sandbox/orders_test
    owner: data
    retention: { deleted_file_retention: 10d }
  - name: gold.kpis
    path: /lake/gold/kpis
    owner: bi
"#;
        Inventory::parse(std::path::Path::new("inventory.yaml"), yaml).expect("valid inventory")
    }

    #[test]
    fn pins_clones_and_referrers_come_from_inventory_store_and_probes() {
        let inventory = inventory();
        let orders = inventory.table("silver.orders").expect("orders");
        let api = [
            TablePin {
                table_name: "silver.orders".into(),
                version: 30,
                until: "2027-01-01T00:00:00Z".parse().unwrap(),
                reason: "audit".into(),
                created_at: Utc::now(),
                created_by: "api".into(),
            },
            TablePin {
                table_name: "gold.kpis".into(),
                version: 1,
                until: "2027-01-01T00:00:00Z".parse().unwrap(),
                reason: String::new(),
                created_at: Utc::now(),
                created_by: "api".into(),
            },
        ];
        let keep = keep_for(&inventory, orders, &api, |t| match t.name.as_str() {
            "sandbox.orders_test" => References::External,
            _ => References::OwnOnly,
        });
        assert_eq!(
            keep.pins.iter().map(|p| p.target).collect::<Vec<_>>(),
            [PinTarget::Version(12), PinTarget::Version(30)],
            "the inventory's pin and the table's own API pin, not another table's"
        );
        // `until: 2027-03-01` holds through that day
        assert_eq!(
            keep.pins[0].until_ms,
            millis("2027-03-02T00:00:00Z".parse().unwrap())
        );
        let referrers: Vec<(&str, Standing, Duration)> = keep
            .referrers
            .iter()
            .map(|r| (r.name.as_str(), r.standing, r.window))
            .collect();
        assert_eq!(
            referrers,
            [
                (
                    "/lake/outside/orders_copy",
                    Standing::Declared,
                    RETENTION_FLOOR
                ),
                (
                    "sandbox.orders_test",
                    Standing::Seen,
                    Duration::from_secs(10 * 86_400)
                ),
            ]
        );
        let unknown = keep_for(&inventory, orders, &[], |_| References::Unknown);
        assert!(
            unknown
                .referrers
                .iter()
                .filter(|r| !r.standing.known())
                .count()
                == 2,
            "tables not probed yet are read, without blocking: {:?}",
            unknown.referrers
        );
    }

    #[test]
    fn a_clone_that_compacted_its_sources_files_away_stays_a_referrer_for_a_window() {
        let probe = crate::policy::planner::tests::probe;
        let now = Utc::now();
        let week = Duration::from_secs(7 * 86_400);
        let days_ago = |d: i64| serde_json::json!(now - chrono::Duration::days(d));
        assert!(probe(serde_json::json!({ "external_files": 3 })).references_others(week, now));
        assert!(!probe(serde_json::json!({})).references_others(week, now));
        // versions before the compaction (2 days ago) are inside the 7-day window
        let compacted = probe(serde_json::json!({ "last_external_remove_at": days_ago(2) }));
        assert!(compacted.references_others(week, now));
        assert!(!compacted.references_others(Duration::from_secs(86_400), now));
        let long_ago = probe(serde_json::json!({ "last_external_remove_at": days_ago(8) }));
        assert!(!long_ago.references_others(week, now));
    }
}
