//! Where each configuration value comes from: the environment (`TABLEKEEPER_<KEY>`) first,
//! then the config file, then the built-in default; each value keeps its origin, so an error
//! names the key and where the bad value came from. The typed readers (counts, durations,
//! addresses, lower bounds) are written once here and used for every key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::ConfigError;
use super::raw::RawConfig;

/// The config file (if any) and the environment, read key by key.
pub(super) struct Sources<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    /// How values from the file are named in errors: its path, or `defaults`.
    file_origin: String,
    /// The file's folder: a relative inventory path in the file is relative to it.
    base_dir: Option<PathBuf>,
}

impl<'e> Sources<'e> {
    /// Reads the file (an empty one is every default); unknown keys are errors.
    pub(super) fn read(
        file: Option<&Path>,
        env: &'e dyn Fn(&str) -> Option<String>,
    ) -> Result<(RawConfig, Self), ConfigError> {
        let (raw, file_origin) = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                let raw: RawConfig = if text.trim().is_empty() {
                    RawConfig::default()
                } else {
                    serde_saphyr::from_str(&text).map_err(|e| ConfigError::Parse {
                        path: path.to_path_buf(),
                        message: e.to_string(),
                    })?
                };
                (raw, path.display().to_string())
            }
            None => (RawConfig::default(), String::from("defaults")),
        };
        let sources = Sources {
            env,
            file_origin,
            base_dir: file.and_then(Path::parent).map(Path::to_path_buf),
        };
        Ok((raw, sources))
    }

    pub(super) fn file_origin(&self) -> &str {
        &self.file_origin
    }

    /// The value of `key` and its origin: the environment first, then the file.
    pub(super) fn text(&self, key: &str, from_file: Option<String>) -> Option<(String, String)> {
        let env_key = format!("TABLEKEEPER_{}", key.to_ascii_uppercase());
        if let Some(v) = (self.env)(&env_key).filter(|v| !v.is_empty()) {
            return Some((v, env_key));
        }
        from_file.map(|v| (v, self.file_origin.clone()))
    }

    /// A path: a relative one in the config file is relative to that file, so `tablekeeper
    /// run --config /etc/tablekeeper/tablekeeper.yaml` works from any working directory.
    pub(super) fn path(&self, key: &str, from_file: Option<String>) -> Option<PathBuf> {
        self.text(key, from_file).map(|(v, origin)| {
            let p = PathBuf::from(v);
            match (&self.base_dir, origin.starts_with("TABLEKEEPER_")) {
                (Some(dir), false) if p.is_relative() => dir.join(p),
                _ => p,
            }
        })
    }

    /// A value parsed by its `FromStr`; `message` says what a bad one should look like.
    pub(super) fn parsed<T: std::str::FromStr>(
        &self,
        key: &'static str,
        from_file: Option<String>,
        default: T,
        message: impl FnOnce(&str) -> String,
    ) -> Result<T, ConfigError> {
        match self.text(key, from_file) {
            Some((v, origin)) => v.trim().parse().map_err(|_| ConfigError::Value {
                key,
                origin,
                message: message(&v),
            }),
            None => Ok(default),
        }
    }

    /// A whole number of at least 1.
    pub(super) fn count(
        &self,
        key: &'static str,
        from_file: Option<usize>,
        default: usize,
    ) -> Result<usize, ConfigError> {
        match self.text(key, from_file.map(|n| n.to_string())) {
            Some((v, origin)) => match v.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(ConfigError::Value {
                    key,
                    origin,
                    message: format!("`{v}` must be a whole number of at least 1"),
                }),
            },
            None => Ok(default),
        }
    }

    /// A duration like `30s`, `5m` or `2h`.
    pub(super) fn duration(
        &self,
        key: &'static str,
        from_file: Option<String>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        match self.text(key, from_file) {
            Some((v, origin)) => {
                humantime::parse_duration(v.trim()).map_err(|e| ConfigError::Value {
                    key,
                    origin,
                    message: format!("`{v}` is not a duration like `30s`, `5m` or `2h`: {e}"),
                })
            }
            None => Ok(default),
        }
    }

    /// `value` unless it is under `min`: then an error saying to use at least `min`, and
    /// `why` after it.
    pub(super) fn at_least(
        &self,
        key: &'static str,
        value: Duration,
        min: Duration,
        why: &str,
    ) -> Result<Duration, ConfigError> {
        if value >= min {
            return Ok(value);
        }
        Err(ConfigError::Value {
            key,
            origin: "config".into(),
            message: format!(
                "{} is too short: use at least {}{why}",
                humantime::format_duration(value),
                humantime::format_duration(min)
            ),
        })
    }
}
