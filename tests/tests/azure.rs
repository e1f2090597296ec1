//! The Azure path end to end, on Azurite (Azure Blob Storage's emulator): python deltalake
//! writes an `az://` table; the real binary compacts, repairs a stale overwrite python commits
//! from an old snapshot, Z-orders, checkpoints and vacuums it, with the rows read back by
//! python deltalake and deltalake after each step (`tablekeeper_tests::cloud`). A wrong
//! account key makes the table `unreadable` (Azure's 403), not `unknown`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tablekeeper_delta::fixtures::azurite::AzureServer;
use tablekeeper_tests::cloud::{maintenance_keeps_every_row, plan_is_unreadable, python};

#[tokio::test]
async fn maintenance_on_azure_blob_storage_keeps_every_row() {
    AzureServer::shared().expect("Azurite");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("az://lake/events-{}", uuid::Uuid::new_v4());
    maintenance_keeps_every_row(dir.path(), &uri, "az.events").await;
}

#[test]
fn a_wrong_account_key_makes_an_azure_table_unreadable() {
    AzureServer::shared().expect("Azurite");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("az://lake/keyed-{}", uuid::Uuid::new_v4());
    python(&uri, &["append", "1", "0"]);
    // a rotated key: base64, the right length, not the account's
    let stdout = plan_is_unreadable(
        dir.path(),
        &uri,
        "az.keyed",
        &[(
            "AZURE_STORAGE_ACCOUNT_KEY",
            "d3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmc=",
        )],
    );
    assert!(stdout.contains("403"), "the store's own words: {stdout}");
}
