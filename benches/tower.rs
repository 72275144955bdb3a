//! The tower layer's added cost per call and `execute_async` against their peers (issue #11):
//! `cargo bench --bench tower --features tower`, see `benches/README.md`.

fn main() {}
