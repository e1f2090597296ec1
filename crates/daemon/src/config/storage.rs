//! Object-store settings for every table (`storage_options`: timeouts and retries), from the
//! config file or `TABLEKEEPER_STORAGE_OPTIONS`: never credentials, which come from the
//! environment or the platform identity.

use std::collections::BTreeMap;

use super::error::ConfigError;

/// Fragments of option names that carry credentials: refused in `storage_options`, so a
/// secret never lands in a config file or a ConfigMap.
const CREDENTIAL_KEYS: &[&str] = &[
    "secret",
    "token",
    "password",
    "access_key",
    "account_key",
    "sas",
    "credential",
    "session",
];

/// Reads `TABLEKEEPER_STORAGE_OPTIONS` (`key=value,key=value`) for commands that take no
/// config file (`maintain`, `repair`); `run` and `plan --config` read it with the file.
pub fn storage_options_from_env() -> Result<BTreeMap<String, String>, ConfigError> {
    match std::env::var("TABLEKEEPER_STORAGE_OPTIONS") {
        Ok(text) if !text.trim().is_empty() => {
            parse_storage_options(&text, "TABLEKEEPER_STORAGE_OPTIONS")
        }
        _ => Ok(BTreeMap::new()),
    }
}

fn parse_storage_options(
    text: &str,
    origin: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut options = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| ConfigError::Value {
            key: "storage_options",
            origin: origin.to_owned(),
            message: format!(
                "`{pair}` is not `key=value` (write e.g. `timeout=30s,max_retries=5`)"
            ),
        })?;
        options.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    check_storage_options(&options, origin)?;
    Ok(options)
}

fn check_storage_options(
    options: &BTreeMap<String, String>,
    origin: &str,
) -> Result<(), ConfigError> {
    for key in options.keys() {
        let lower = key.to_ascii_lowercase();
        if key.trim().is_empty() {
            return Err(ConfigError::Value {
                key: "storage_options",
                origin: origin.to_owned(),
                message: "an option has an empty name".into(),
            });
        }
        if let Some(word) = CREDENTIAL_KEYS.iter().find(|w| lower.contains(*w)) {
            return Err(ConfigError::Value {
                key: "storage_options",
                origin: origin.to_owned(),
                message: format!(
                    "`{key}` looks like a credential ({word}): credentials come from the environment \
                     (AWS_*, GOOGLE_*, AZURE_*) or the platform identity, never from the config"
                ),
            });
        }
    }
    Ok(())
}

/// The storage options: `TABLEKEEPER_STORAGE_OPTIONS` when set, else the file's.
pub(super) fn options(
    env: &dyn Fn(&str) -> Option<String>,
    from_file: Option<BTreeMap<String, String>>,
    file_origin: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    match env("TABLEKEEPER_STORAGE_OPTIONS").filter(|v| !v.trim().is_empty()) {
        Some(text) => parse_storage_options(&text, "TABLEKEEPER_STORAGE_OPTIONS"),
        None => {
            let options = from_file.unwrap_or_default();
            check_storage_options(&options, file_origin)?;
            Ok(options)
        }
    }
}

/// Opens every table of this process with `options` (object-store timeouts and retries).
pub fn apply_storage_options(options: &BTreeMap<String, String>) {
    if !options.is_empty() {
        tablekeeper_delta::set_storage_options(
            options
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
    }
}
