//! What a breaker tells the outside: Prometheus metrics scraped over HTTP, tracing events.
//!
//! One test binary for the area (its files are modules), so the suite links a few binaries
//! rather than one per file.

#[cfg(feature = "prometheus")]
mod scrape;
#[cfg(feature = "prometheus")]
mod standalone;
#[cfg(feature = "tracing")]
mod tracing;
