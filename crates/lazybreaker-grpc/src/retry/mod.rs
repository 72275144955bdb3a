//! gRPC's retries (proposal A6) on tonic: [`ServiceConfig`], the retry part of a service
//! config, and [`RetryLayer`], which retries a channel's calls as it says.

mod config;
mod layer;
mod replay;
mod watch;

pub use config::{RetryPolicy, ServiceConfig};
pub use layer::{GrpcRetry, RetryLayer, MAX_BUFFER};
