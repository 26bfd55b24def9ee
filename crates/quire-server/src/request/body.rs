//! Response bodies quire sends: stored bytes straight from the mapping, a fill as it
//! streams, or an origin response passed through.
//!
//! Key decisions:
//! - **A hit's body is the mapping itself.** [`Mapped`] owns the store handle (which
//!   pins the region) and hands hyper `Bytes::from_owner(..)` over the stored range:
//!   no copy in user space, no allocation that grows with the body; the pin drops
//!   when hyper has written the last byte (or the client went away).
//! - A fill's body is a channel of `Bytes` clones of what the origin sent, shared by
//!   every waiter (see [`crate::fill::coalesce`]); an error there aborts the response, so a
//!   client never takes a truncated body for a whole one.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use quire_store::{EntryRef, Handle};

use crate::fill::coalesce::{Chunk, FillBody};

/// A body error: the stream was cut (origin failure mid-body).
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A stored body range kept alive by its handle: the handle itself, or an `Arc`
/// of one that other owners share (a repeat's hit owns its handle alone, and
/// wrapping it in an `Arc` would cost an allocation per hit).
#[derive(Debug)]
pub(crate) struct Mapped<H> {
    handle: H,
    start: usize,
    end: usize,
}

impl<H: Borrow<Handle>> AsRef<[u8]> for Mapped<H> {
    fn as_ref(&self) -> &[u8] {
        &self.handle.borrow().body()[self.start..self.end]
    }
}

impl<H: Borrow<Handle>> Mapped<H> {
    /// `handle.body()[start..end]`. Out-of-range bounds are clamped (callers pass
    /// ranges checked against the body length).
    pub(crate) fn new(handle: H, start: u64, end: u64) -> Mapped<H> {
        let len = handle.borrow().body().len();
        let end = usize::try_from(end).unwrap_or(len).min(len);
        let start = usize::try_from(start).unwrap_or(end).min(end);
        Mapped { handle, start, end }
    }

    /// Drops the first `n` bytes (a write took them).
    pub(crate) fn advance(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
    }
}

impl<H: Borrow<Handle> + Send + 'static> Mapped<H> {
    /// As `Bytes`, for an owner that needs them (hyper, a pin kept past its write):
    /// an allocation, which a hit written at once does without.
    pub(crate) fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

/// `Bytes` over `handle.body()[start..end]` without copying ([`Mapped::new`]).
pub(crate) fn mapped<H>(handle: H, start: u64, end: u64) -> Bytes
where
    H: Borrow<Handle> + Send + 'static,
{
    Mapped::new(handle, start, end).into_bytes()
}

/// The store handle a fresh hit's body holds: the lookup's own, or one shared with
/// the record's other readers.
#[derive(Debug)]
pub(crate) enum Pinned {
    Own(Handle),
    Shared(std::sync::Arc<Handle>),
}

impl Borrow<Handle> for Pinned {
    fn borrow(&self) -> &Handle {
        match self {
            Pinned::Own(h) => h,
            Pinned::Shared(h) => h,
        }
    }
}

impl From<Handle> for Pinned {
    fn from(h: Handle) -> Pinned {
        Pinned::Own(h)
    }
}

impl From<std::sync::Arc<Handle>> for Pinned {
    fn from(h: std::sync::Arc<Handle>) -> Pinned {
        Pinned::Shared(h)
    }
}

/// What a response carries.
#[derive(Debug, Default)]
pub enum Body {
    /// Nothing (HEAD, 304, errors without text).
    #[default]
    Empty,
    /// Chunks known up front: a stored body, a multipart range answer, a message.
    Bytes(VecDeque<Bytes>),
    /// A fill as it streams.
    Fill(FillBody),
    /// An origin response passed through as it arrives.
    Origin(crate::upstream::UpBody),
    /// A body whose end (or drop) writes its request's access-log line.
    Logged(Box<Body>, Box<crate::ops::access_log::Ticket>),
}

impl Body {
    /// One chunk.
    pub fn full(b: impl Into<Bytes>) -> Body {
        let b = b.into();
        if b.is_empty() {
            Body::Empty
        } else {
            Body::Bytes(VecDeque::from([b]))
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Bytes(q) => Poll::Ready(q.pop_front().map(|b| Ok(Frame::data(b)))),
            Body::Fill(rx) => match rx.poll_recv(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Ready(Some(Chunk::Data(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
                Poll::Ready(Some(Chunk::Failed(why))) => Poll::Ready(Some(Err(why.into()))),
            },
            Body::Origin(inc) => Pin::new(inc).poll_frame(cx),
            Body::Logged(inner, ticket) => {
                let frame = Pin::new(inner.as_mut()).poll_frame(cx);
                if let Poll::Ready(Some(Ok(f))) = &frame {
                    ticket.bytes += f.data_ref().map_or(0, |d| d.len() as u64);
                }
                frame
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Bytes(q) => q.is_empty(),
            Body::Fill(_) => false,
            Body::Origin(inc) => inc.is_end_stream(),
            Body::Logged(inner, _) => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Bytes(q) => SizeHint::with_exact(q.iter().map(|b| b.len() as u64).sum()),
            Body::Fill(_) => SizeHint::default(),
            Body::Origin(inc) => inc.size_hint(),
            Body::Logged(inner, _) => inner.size_hint(),
        }
    }
}
