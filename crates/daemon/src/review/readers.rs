//! Whether each declared reader can read a table's features: the compatibility table
//! (`data/reader-compatibility.yaml`, one published source per row) looked up by the reader's
//! `engine` and `version`. A reader that cannot read a feature the table has, or will have once
//! `protocol.features` changes, is a blocking problem; an engine, version or feature the table
//! has no sourced row for is a warning, never a guess. Only reader features matter: Delta's
//! protocol lets a reader ignore writer-only features.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use tablekeeper_inventory::Reader;

use crate::review::model::{Consequence, Kind, Severity};

/// The table's protocol uses table features (reader version 3): a row of the table of its own.
pub(crate) const TABLE_FEATURES: &str = "minReaderVersion3";

/// The table property that turns column mapping on in protocols older than table features.
pub(crate) const COLUMN_MAPPING_MODE: &str = "delta.columnMapping.mode";

/// The table, as compiled into the binary.
const TABLE: &str = include_str!("../../data/reader-compatibility.yaml");

/// Which engines read which features since which versions.
#[derive(Debug, Deserialize)]
pub(crate) struct Compatibility {
    features: Vec<Feature>,
    engines: Vec<Engine>,
}

#[derive(Debug, Deserialize)]
struct Feature {
    name: String,
    /// `reader-writer` or `writer-only`.
    kind: String,
    #[allow(dead_code)] // read by people: the row's proof
    source: String,
}

#[derive(Debug, Deserialize)]
struct Engine {
    engine: String,
    #[serde(default)]
    aliases: Vec<String>,
    /// What `version` means for this engine.
    versions: String,
    #[serde(default)]
    reads: BTreeMap<String, Support>,
}

#[derive(Debug, Deserialize)]
struct Support {
    /// First version that reads the feature; `any` for every version.
    since: Option<String>,
    #[serde(default)]
    never: bool,
    source: String,
}

impl Compatibility {
    /// The table compiled into the binary.
    pub(crate) fn shipped() -> Result<Self, String> {
        serde_saphyr::from_str(TABLE)
            .map_err(|e| format!("data/reader-compatibility.yaml does not parse: {e}"))
    }

    fn engine(&self, name: &str) -> Option<&Engine> {
        let name = name.trim().to_ascii_lowercase();
        self.engines
            .iter()
            .find(|e| e.engine == name || e.aliases.contains(&name))
    }

    /// Whether readers need to understand `feature` (a reader-writer feature, or one the
    /// table does not list: then assume they do).
    fn reader_feature(&self, feature: &str) -> bool {
        self.features
            .iter()
            .find(|f| f.name == feature)
            .is_none_or(|f| f.kind != "writer-only")
    }

    /// The features a reader of a table with `features` must handle: its reader features, a
    /// writer-only one only where an engine is documented to fail on it (the engine's own row
    /// says so), and [`TABLE_FEATURES`] once any reader feature but legacy column mapping needs
    /// reader version 3.
    fn for_readers<'f>(&self, engine: &Engine, features: &'f BTreeSet<String>) -> Vec<&'f str> {
        let mut out: Vec<&str> = features
            .iter()
            .map(String::as_str)
            .filter(|f| self.reader_feature(f) || engine.reads.contains_key(*f))
            .collect();
        let versioned = features
            .iter()
            .any(|f| self.reader_feature(f) && f != "columnMapping" && f != TABLE_FEATURES);
        if versioned && !out.contains(&TABLE_FEATURES) {
            out.insert(0, TABLE_FEATURES);
        }
        out
    }

    /// What `reader` can and cannot read of `features` (the table's, after the change).
    pub(crate) fn check(&self, reader: &Reader, features: &BTreeSet<String>) -> Vec<Consequence> {
        let (Some(engine_name), Some(version)) = (&reader.engine, &reader.version) else {
            return vec![Consequence::new(
                Kind::ReaderUnknown,
                Severity::Warning,
                format!(
                    "reader `{}` declares no `engine` and `version`, so whether it can read [{}] is not checked: add them (e.g. `{{ name: {}, engine: trino, version: \"476\" }}`)",
                    reader.name,
                    features.iter().cloned().collect::<Vec<_>>().join(", "),
                    reader.name
                ),
            )];
        };
        let Some(engine) = self.engine(engine_name) else {
            let known: Vec<&str> = self.engines.iter().map(|e| e.engine.as_str()).collect();
            let hint = known
                .iter()
                .map(|k| (strsim::levenshtein(k, engine_name), *k))
                .filter(|(d, _)| *d <= 3)
                .min()
                .map(|(_, k)| format!(" (did you mean `{k}`?)"))
                .unwrap_or_default();
            return vec![Consequence::new(
                Kind::ReaderUnknown,
                Severity::Warning,
                format!(
                    "reader `{}`: engine `{engine_name}` is not in the compatibility table{hint}; known: {}",
                    reader.name,
                    known.join(", ")
                ),
            )];
        };
        let mut out = Vec::new();
        for feature in self.for_readers(engine, features) {
            let who = format!("reader `{}` ({} {version})", reader.name, engine.engine);
            match engine.reads.get(feature) {
                Some(s) if s.never => out.push(Consequence::new(
                    Kind::ReaderIncompatible,
                    Severity::Blocking,
                    format!("{who} cannot read `{feature}`: no {} version reads it ({})", engine.engine, s.source),
                )),
                Some(Support { since: Some(since), source, .. }) => {
                    if since != "any" && compare_versions(version, since) == Ordering::Less {
                        out.push(Consequence::new(
                            Kind::ReaderIncompatible,
                            Severity::Blocking,
                            format!(
                                "{who} cannot read `{feature}`: {} reads it from {since} ({} {}; {source}); upgrade the reader first or leave the feature off",
                                engine.engine, engine.versions, since
                            ),
                        ));
                    }
                }
                _ => out.push(Consequence::new(
                    Kind::ReaderUnknown,
                    Severity::Warning,
                    format!("{who}: no sourced answer for `{feature}` in the compatibility table; check the engine's documentation before merging"),
                )),
            }
        }
        out
    }
}

/// Compares dotted versions part by part, numerically where both parts are numbers
/// (`3.10` after `3.9`; `15.4` before `15.4.1`).
fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |v: &str| -> Vec<String> {
        v.trim_start_matches(['v', 'V'])
            .split(['.', '-', '_'])
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (parts(a), parts(b));
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        let order = match (x, y) {
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            (Some(x), Some(y)) => match (x.parse::<u64>(), y.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                _ => x.cmp(y),
            },
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(engine: Option<&str>, version: Option<&str>) -> Reader {
        Reader {
            name: "r".into(),
            engine: engine.map(str::to_owned),
            version: version.map(str::to_owned),
            max_query_duration: None,
        }
    }

    #[test]
    fn unknown_engines_warn_and_documented_gaps_block() {
        let table = Compatibility::shipped().unwrap();
        let dv: BTreeSet<String> = ["deletionVectors".to_owned()].into();
        let misspelt = table.check(&reader(Some("trnio"), Some("476")), &dv);
        assert_eq!(misspelt.len(), 1);
        assert_eq!(misspelt[0].severity, Severity::Warning);
        assert!(
            misspelt[0].message.contains("did you mean `trino`?"),
            "{misspelt:?}"
        );
        let undeclared = table.check(&reader(None, None), &dv);
        assert_eq!(undeclared[0].kind, Kind::ReaderUnknown);
        // Trino reads deletion vectors from 427, and tables with table features from 414
        let old = table.check(&reader(Some("trino"), Some("420")), &dv);
        assert!(
            old.iter()
                .any(|c| c.severity == Severity::Blocking && c.message.contains("deletionVectors")),
            "{old:?}"
        );
        assert!(table
            .check(&reader(Some("trino"), Some("476")), &dv)
            .is_empty());
        // a writer-only feature does not concern a reader that follows the protocol
        let ict: BTreeSet<String> = ["inCommitTimestamp".to_owned()].into();
        assert!(table
            .check(&reader(Some("trino"), Some("476")), &ict)
            .is_empty());
    }

    #[test]
    fn versions_compare_by_number() {
        assert_eq!(compare_versions("3.10.0", "3.9"), Ordering::Greater);
        assert_eq!(compare_versions("15.4", "15.4.1"), Ordering::Less);
        assert_eq!(compare_versions("476", "427"), Ordering::Greater);
        assert_eq!(compare_versions("v2.4.0", "2.4.0"), Ordering::Equal);
    }

    #[test]
    fn the_shipped_table_parses_and_cites_a_source_for_every_row() {
        let table = Compatibility::shipped().unwrap();
        assert!(!table.engines.is_empty());
        for feature in &table.features {
            assert!(feature.source.starts_with("http"), "{feature:?}");
            assert!(matches!(
                feature.kind.as_str(),
                "reader-writer" | "writer-only"
            ));
        }
        for engine in &table.engines {
            for (feature, support) in &engine.reads {
                assert!(
                    support.source.starts_with("http") || support.source.contains('@'),
                    "{} {feature}: no source",
                    engine.engine
                );
                assert!(
                    support.never || support.since.is_some(),
                    "{} {feature}",
                    engine.engine
                );
            }
        }
    }
}
