//! A unary request read ahead, so that it can be sent again: [`read_ahead`] takes what its
//! body has ready at once (all of a unary call's one message), and [`Replay`] sends it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use http::HeaderMap;
use http_body::{Body as _, Frame, SizeHint};
use tonic::body::Body;
use tonic::codegen::Bytes;
use tonic::Status;

/// A request body, read ahead.
pub(crate) enum Read {
    /// All of it: it can be sent again.
    Whole(Buffered),
    /// What was ready at once and within the cap, then the rest (a stream, or a large
    /// message): sent once.
    Partial(Body),
}

/// A whole request body, kept for every attempt.
pub(crate) struct Buffered {
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Buffered {
    /// The body again, for one attempt (the chunks are shared, not copied).
    pub(crate) fn body(&self) -> Body {
        Body::new(Replay {
            chunks: self.chunks.iter().cloned().collect(),
            trailers: self.trailers.clone(),
            error: None,
            rest: None,
        })
    }
}

/// Reads what `body` has ready now, at most `cap` bytes, without waiting: a unary call's
/// body (tonic's encoding of its one message) is ready at once and ends, so it comes back
/// [`Read::Whole`]; a stream that waits for its next message, a body larger than `cap` or
/// one that fails comes back [`Read::Partial`], what was read put back in front of the rest.
pub(crate) fn read_ahead(mut body: Body, cap: usize) -> Read {
    let mut cx = Context::from_waker(Waker::noop());
    let mut chunks = Vec::new();
    let mut trailers = None;
    let mut size = 0usize;
    let partial = |chunks: Vec<Bytes>, error, rest| {
        Read::Partial(Body::new(Replay {
            chunks: chunks.into(),
            trailers: None,
            error,
            rest,
        }))
    };
    loop {
        if size > cap {
            return partial(chunks, None, Some(body));
        }
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => return Read::Whole(Buffered { chunks, trailers }),
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    size = size.saturating_add(data.len());
                    chunks.push(data);
                }
                Err(frame) => {
                    if let Ok(t) = frame.into_trailers() {
                        trailers = Some(t);
                    }
                }
            },
            Poll::Ready(Some(Err(status))) => return partial(chunks, Some(status), None),
            // The noop waker is not kept: whoever polls the rest registers its own.
            Poll::Pending => return partial(chunks, None, Some(body)),
        }
    }
}

/// A body from kept chunks (and trailers), then an error or the rest of a body, if any.
struct Replay {
    chunks: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    error: Option<Status>,
    rest: Option<Body>,
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(chunk) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(error) = self.error.take() {
            return Poll::Ready(Some(Err(error)));
        }
        if let Some(rest) = self.rest.as_mut() {
            return Pin::new(rest).poll_frame(cx);
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
            && self.error.is_none()
            && self.trailers.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let kept: u64 = self.chunks.iter().map(|c| c.len() as u64).sum();
        match &self.rest {
            None => SizeHint::with_exact(kept),
            Some(rest) => {
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(kept));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(kept));
                }
                hint
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(mut body: Body) -> (Vec<u8>, Option<HeaderMap>) {
        let mut cx = Context::from_waker(Waker::noop());
        let (mut data, mut trailers) = (Vec::new(), None);
        while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
            let frame = frame.unwrap();
            match frame.into_data() {
                Ok(d) => data.extend_from_slice(&d),
                Err(f) => trailers = f.into_trailers().ok(),
            }
        }
        (data, trailers)
    }

    #[test]
    fn a_body_ready_at_once_is_kept_whole_and_sent_again_alike() {
        let body = Body::new(http_body_util_free::Chunks(vec![
            Bytes::from_static(b"ab"),
            Bytes::from_static(b"c"),
        ]));
        let Read::Whole(kept) = read_ahead(body, 1024) else {
            panic!("ready at once: whole");
        };
        for _ in 0..2 {
            assert_eq!(collect(kept.body()).0, b"abc");
        }
        let Read::Whole(empty) = read_ahead(Body::empty(), 0) else {
            panic!("an empty body is whole");
        };
        assert!(empty.body().is_end_stream());
    }

    #[test]
    fn a_body_over_the_cap_is_sent_once_whole() {
        let body = Body::new(http_body_util_free::Chunks(vec![
            Bytes::from_static(b"ab"),
            Bytes::from_static(b"cd"),
            Bytes::from_static(b"e"),
        ]));
        let Read::Partial(rest) = read_ahead(body, 3) else {
            panic!("over the cap: partial");
        };
        assert_eq!(collect(rest).0, b"abcde", "what was read comes first");
    }

    #[test]
    fn a_stream_that_waits_for_its_next_message_is_sent_once() {
        let body = Body::new(http_body_util_free::Waits(Some(Bytes::from_static(
            b"first",
        ))));
        let Read::Partial(rest) = read_ahead(body, 1024) else {
            panic!("a stream that waits: partial");
        };
        let mut rest = rest;
        let mut cx = Context::from_waker(Waker::noop());
        let frame = Pin::new(&mut rest).poll_frame(&mut cx);
        let Poll::Ready(Some(Ok(frame))) = frame else {
            panic!("what was read comes first");
        };
        assert_eq!(frame.into_data().unwrap(), "first");
        assert!(Pin::new(&mut rest).poll_frame(&mut cx).is_pending());
        assert!(!rest.is_end_stream());
    }

    /// A body of chunks, each ready at once (no dependency for it).
    mod http_body_util_free {
        use super::*;

        pub(super) struct Chunks(pub(super) Vec<Bytes>);

        impl http_body::Body for Chunks {
            type Data = Bytes;
            type Error = Status;

            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
                if self.0.is_empty() {
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Ok(Frame::data(self.0.remove(0)))))
            }
        }

        /// One message, then a wait for the next (a client stream).
        pub(super) struct Waits(pub(super) Option<Bytes>);

        impl http_body::Body for Waits {
            type Data = Bytes;
            type Error = Status;

            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
                match self.0.take() {
                    Some(first) => Poll::Ready(Some(Ok(Frame::data(first)))),
                    None => Poll::Pending,
                }
            }
        }
    }
}
