//! Deletion vectors, reduced to what maintenance needs: which rows of a data file are deleted
//! (the cardinality), which file on storage holds the vector, and the descriptor's identity.
//!
//! Owns the one translation from the log's `deletionVector` descriptor (as deltalake's
//! snapshot hands it over, or as a JSON commit spells it) into a [`DeletionVector`]; the file a
//! descriptor points to is derived by the Delta kernel deltalake runs on
//! (`DeletionVectorDescriptor::absolute_path`), never by decoding its path here. The protocol
//! identifies a logical file by its path *and* its deletion vector's unique id, so every check
//! that matches removes to adds compares both. This module never reads a vector's bitmap.

use deltalake::kernel::DeletionVectorDescriptor;
use serde_json::Value;
use url::Url;

/// A data file's deletion vector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct DeletionVector {
    /// The descriptor's unique id (storage type, path or inline bytes, offset).
    pub id: String,
    /// Rows it marks deleted.
    pub cardinality: u64,
    /// The file holding it: relative to the table root for the usual `u` descriptors, an
    /// absolute URL for `p` descriptors; `None` for inline vectors, which live in the log.
    pub file: Option<String>,
}

/// The base that relative deletion-vector paths are resolved against, then stripped again;
/// the kernel resolves a relative descriptor by joining it to the table root.
const ROOT: &str = "file:///table-root/";

impl DeletionVector {
    /// From deltalake's descriptor. A descriptor the kernel cannot read (a corrupt path) keeps
    /// its raw text as the file, so it is protected rather than ignored.
    pub(crate) fn from_descriptor(descriptor: DeletionVectorDescriptor) -> Self {
        let cardinality = u64::try_from(descriptor.cardinality).unwrap_or(0);
        let raw = descriptor.path_or_inline_dv.clone();
        match delta_kernel::actions::deletion_vector::DeletionVectorDescriptor::try_from(descriptor)
        {
            Ok(kernel) => {
                let root = Url::parse(ROOT).expect("constant url parses");
                let file = match kernel.absolute_path(&root) {
                    Ok(Some(url)) => Some(
                        url.as_str()
                            .strip_prefix(ROOT)
                            .map_or_else(|| url.to_string(), crate::log::path::decode_path),
                    ),
                    Ok(None) => None,
                    Err(_) => Some(raw),
                };
                DeletionVector {
                    id: kernel.unique_id(),
                    cardinality,
                    file,
                }
            }
            Err(_) => DeletionVector {
                id: raw.clone(),
                cardinality,
                file: Some(raw),
            },
        }
    }

    /// From the `deletionVector` object of a JSON add or remove action; `None` when absent or
    /// null, or when it is not a descriptor at all.
    pub(crate) fn from_json(value: Option<&Value>) -> Option<Self> {
        let value = value.filter(|v| !v.is_null())?;
        serde_json::from_value::<DeletionVectorDescriptor>(value.clone())
            .ok()
            .map(Self::from_descriptor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn relative_descriptors_name_their_file_under_the_table_root() {
        // the descriptor of the Databricks-written reference table `table-with-dv-small`
        let dv = DeletionVector::from_json(Some(&json!({
            "storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
            "offset": 1, "sizeInBytes": 36, "cardinality": 2
        })))
        .expect("descriptor");
        assert_eq!(
            dv.file.as_deref(),
            Some("deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin")
        );
        assert_eq!(dv.cardinality, 2);
        assert!(dv.id.starts_with('u'), "{}", dv.id);
    }

    #[test]
    fn a_random_prefix_becomes_a_directory() {
        let dv = DeletionVector::from_json(Some(&json!({
            "storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "offset": 4, "sizeInBytes": 40, "cardinality": 6
        })))
        .expect("descriptor");
        let file = dv.file.expect("a file");
        assert!(file.starts_with("ab/deletion_vector_"), "{file}");
    }

    #[test]
    fn inline_vectors_have_no_file_and_absent_ones_no_vector() {
        let inline = DeletionVector::from_json(Some(&json!({
            "storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            "sizeInBytes": 40, "cardinality": 6
        })))
        .expect("descriptor");
        assert_eq!(inline.file, None);
        assert_eq!(DeletionVector::from_json(None), None);
        assert_eq!(DeletionVector::from_json(Some(&Value::Null)), None);
    }
}
