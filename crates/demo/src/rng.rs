//! xorshift64*: a small deterministic pseudo-random stream, no dependency. Also the core's
//! tests' and examples' (`tests/support/mod.rs` and `examples/common/mod.rs` include this file).

// Each includer (the demo, the core's tests, the examples) uses part of it.
#![allow(dead_code)]

/// xorshift64* from its seed (any but zero, which stays zero): the same seed, the same
/// stream, on every run and platform.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next value in `[0, n)` (`n` above zero; a modulo's slight bias is fine here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// The next value in `[0, 1)`, from the next 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
