//! [`Committed`]: the body of a committed call, watched for the `OK` in its trailers, which
//! refills the channel's retry throttling.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Frame, SizeHint};
use lazybreaker::retry::TokenBucket;
use tonic::body::Body;
use tonic::codegen::Bytes;
use tonic::{Code, Status};

use crate::rules::code_in;

/// A committed call's response body: passes every frame on, and records a success in the
/// bucket when its trailers say `OK` (a committed call's failure is its answer, and not
/// counted: grpc-go counts failures only where it would retry).
pub(crate) struct Committed {
    inner: Body,
    bucket: Option<Arc<TokenBucket>>,
}

impl Committed {
    pub(crate) fn new(inner: Body, bucket: Arc<TokenBucket>) -> Self {
        Self {
            inner,
            bucket: Some(bucket),
        }
    }
}

impl http_body::Body for Committed {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(trailers) = frame.trailers_ref() {
                if let Some(bucket) = self.bucket.take() {
                    if code_in(trailers) == Some(Code::Ok) {
                        bucket.record_success();
                    }
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
