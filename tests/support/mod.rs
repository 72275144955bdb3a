//! Helpers shared by the integration tests (each includes this with `mod support;`):
//!
//! - [`log`]: [`log::Log`], a shared list of what a breaker told: an observer (each transition
//!   as an owned entry) or an `on_state_change` callback;
//! - [`policy`]: [`policy::Recorded`], a policy wrapper writing down every hook call, and the
//!   policies that trip on the first failure;
//! - [`clock`]: [`clock::Behind`], a clock that reads behind a `ManualClock` on demand;
//! - [`rng`]: one small deterministic [`rng::Rng`];
//! - [`setup`]: a breaker tripped, or half-open;
//! - [`load`] and [`replay_suite`] (here), with [`brpc`]: the recorded conformance vectors.
//!
//! Nothing here needs a cargo feature.
// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

pub(crate) mod brpc;
pub(crate) mod clock;
pub(crate) mod hooks;
pub(crate) mod log;
pub(crate) mod policy;
#[path = "../../crates/demo/src/rng.rs"]
pub(crate) mod rng;
pub(crate) mod setup;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;
use serde::de::DeserializeOwned;

/// Reads and parses `tests/data/<suite>/<file>`, gunzipping a `.gz` file.
pub(crate) fn load<T: DeserializeOwned>(suite: &str, file: &str) -> Vec<T> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(suite)
        .join(file);
    let f = File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    if file.ends_with(".gz") {
        GzDecoder::new(f).read_to_string(&mut text)
    } else {
        let mut f = f;
        f.read_to_string(&mut text)
    }
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Replays every scenario of `tests/data/<suite>/<file>` (which must hold `expected`
/// scenarios) with `replay`, prints how many passed, and fails listing every divergence.
pub(crate) fn replay_suite<T: DeserializeOwned>(
    suite: &str,
    file: &str,
    expected: usize,
    replay: impl Fn(&T) -> Result<(), String>,
) {
    let scenarios: Vec<T> = load(suite, file);
    assert_eq!(scenarios.len(), expected, "{file}: scenario count");
    let failures: Vec<String> = scenarios.iter().filter_map(|s| replay(s).err()).collect();
    println!(
        "{suite} {file}: {} / {} scenarios passed",
        scenarios.len() - failures.len(),
        scenarios.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} scenarios diverge from {suite}:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}
