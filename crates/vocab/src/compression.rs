//! The Parquet compression tablekeeper writes the files it re-encodes with
//! (`layout.compression`): the codecs by name, their level ranges and the default, zstd
//! level 4 (what deltalake's OPTIMIZE writes).

use std::fmt;

use serde::Serialize;

use crate::names::Codec;

/// A codec and, for codecs that have them, a level inside the codec's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compression {
    codec: Codec,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<u32>,
}

impl Compression {
    /// zstd level 4.
    pub const DEFAULT: Compression = Compression {
        codec: Codec::Zstd,
        level: Some(4),
    };

    /// `codec` at `level` (its default level when `None`). The error says what the codec
    /// accepts.
    pub fn new(codec: Codec, level: Option<u32>) -> Result<Self, String> {
        match (codec.levels(), level) {
            (None, None) => Ok(Compression { codec, level: None }),
            (None, Some(level)) => Err(format!(
                "`{codec}` has no compression levels, but level {level} is given: remove `level`"
            )),
            (Some(_), None) => Ok(Compression {
                codec,
                level: codec.default_level(),
            }),
            (Some((min, max)), Some(level)) if (min..=max).contains(&level) => Ok(Compression {
                codec,
                level: Some(level),
            }),
            (Some((min, max)), Some(level)) => Err(format!(
                "`{codec}` level {level} is out of range: use a level from {min} to {max}"
            )),
        }
    }

    pub fn codec(self) -> Codec {
        self.codec
    }

    /// The level; `None` for codecs without levels.
    pub fn level(self) -> Option<u32> {
        self.level
    }
}

impl Default for Compression {
    fn default() -> Self {
        Compression::DEFAULT
    }
}

/// `zstd-4`, `gzip-6`, `snappy`: the form logs, `plan` and job results show.
impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Some(level) => write!(f, "{}-{level}", self.codec),
            None => write!(f, "{}", self.codec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_checked_against_the_codec() {
        assert_eq!(Compression::default().to_string(), "zstd-4");
        assert_eq!(
            Compression::new(Codec::Zstd, Some(19)).unwrap().to_string(),
            "zstd-19"
        );
        assert_eq!(
            Compression::new(Codec::Gzip, None).unwrap().to_string(),
            "gzip-6"
        );
        assert_eq!(
            Compression::new(Codec::Snappy, None).unwrap().to_string(),
            "snappy"
        );
        let err = Compression::new(Codec::Zstd, Some(23)).unwrap_err();
        assert_eq!(
            err,
            "`zstd` level 23 is out of range: use a level from 1 to 22"
        );
        let err = Compression::new(Codec::Snappy, Some(3)).unwrap_err();
        assert!(err.contains("has no compression levels"), "{err}");
        assert!(Compression::new(Codec::Zstd, Some(0)).is_err());
        assert!(Compression::new(Codec::Brotli, Some(11)).is_ok());
    }

    #[test]
    fn every_codec_with_levels_has_its_default_in_range() {
        for codec in Codec::ALL {
            match (codec.levels(), codec.default_level()) {
                (Some((min, max)), Some(level)) => assert!((min..=max).contains(&level)),
                (None, None) => {}
                other => panic!("{codec}: {other:?}"),
            }
        }
    }
}
