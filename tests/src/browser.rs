//! Headless Chromium (Debian's `chromium` package; `scripts/test.sh` installs it) for the
//! dashboard tests: the DOM after a page loaded and rendered, or a screenshot of it.

use std::path::Path;
use std::process::Command;

/// Runs Chromium on `url` with `mode` (`--dump-dom`, `--screenshot=FILE`); its stdout.
fn chromium(url: &str, mode: &str) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--window-size=900,1400",
            mode,
            url,
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!("chromium is not installed ({e}): `apt-get install chromium` (scripts/test.sh does)")
        });
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DOM after Chromium loaded and rendered `url`.
pub fn browse(url: &str) -> String {
    chromium(url, "--dump-dom")
}

/// A PNG of `url` as Chromium renders it, 900 pixels wide, written to `file`.
pub fn screenshot(url: &str, file: &Path) {
    chromium(url, &format!("--screenshot={}", file.display()));
}
