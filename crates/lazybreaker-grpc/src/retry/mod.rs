//! gRPC's retries (proposal A6) on tonic: [`ServiceConfig`], the retry part of a service
//! config.

mod config;

pub use config::{RetryPolicy, ServiceConfig};
