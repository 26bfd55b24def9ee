//! The HTTP/1.1 response parser: an incremental state machine fed whatever bytes a
//! read returned. It finds the status, `Content-Length`, `Transfer-Encoding: chunked`
//! and `Connection: close`, skips bodies without keeping them (sized, chunked with
//! extensions and trailers, none for 1xx/204/304, or up to the end of the stream),
//! and counts every byte of the response. Bad input is an error, never a panic.

/// Why a response could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// Not `HTTP/1.x NNN ...`.
    StatusLine,
    /// A header line without a colon, or a bad `Content-Length`.
    Header,
    /// A chunk size that is not hex, or data not followed by CRLF.
    Chunk,
    /// The stream ended inside a response.
    Truncated,
}

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    /// Status code.
    pub status: u16,
    /// The server closes the connection after it (`Connection: close`, HTTP/1.0, or a
    /// body delimited by the end of the stream).
    pub close: bool,
    /// Bytes of the whole response, head and body.
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailer,
    UntilClose,
}

/// One connection's parser; reused response after response.
#[derive(Debug, Clone)]
pub(crate) struct Parser {
    state: State,
    status: u16,
    close: bool,
    bytes: u64,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::new()
    }
}

/// Where the first CRLF starts.
fn crlf(hay: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = hay[from..].iter().position(|&b| b == b'\n') {
        let at = from + p;
        if at > 0 && hay[at - 1] == b'\r' {
            return Some(at - 1);
        }
        from = at + 1;
    }
    None
}

/// Where the first CRLF CRLF (the end of a head) starts: a Horspool search, which
/// looks at about one byte in four of a head.
fn head_end(hay: &[u8]) -> Option<usize> {
    let mut i = 3;
    while i < hay.len() {
        match hay[i] {
            b'\n' if &hay[i - 3..i] == b"\r\n\r" => return Some(i - 3),
            b'\n' => i += 2,
            b'\r' => i += 1,
            _ => i += 4,
        }
    }
    None
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token))
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then_some(())
            .and_then(|()| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
    })
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        let d = (b as char).to_digit(16)?;
        n.checked_mul(16)?.checked_add(u64::from(d))
    })
}

impl Parser {
    /// A parser waiting for a status line.
    pub(crate) fn new() -> Parser {
        Parser {
            state: State::Head,
            status: 0,
            close: false,
            bytes: 0,
        }
    }

    /// Whether no byte of a response has been seen yet.
    pub(crate) fn idle(&self) -> bool {
        self.state == State::Head && self.bytes == 0
    }

    /// Consumes bytes from the front of `input` until a response completes or more
    /// input is needed. Returns how many bytes it consumed (the rest, an incomplete
    /// head or chunk line, must be offered again with more bytes after it) and the
    /// response if one completed.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Done>), ParseError> {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            match self.state {
                State::Head => {
                    let Some(end) = head_end(rest) else {
                        return Ok((pos, None));
                    };
                    self.head(&rest[..end + 2])?;
                    pos += end + 4;
                    self.bytes += end as u64 + 4;
                }
                State::Length(0) => return Ok((pos, Some(self.finish()))),
                State::Length(n) | State::ChunkData(n) => {
                    if rest.is_empty() {
                        return Ok((pos, None));
                    }
                    let take = n.min(rest.len() as u64);
                    pos += take as usize;
                    self.bytes += take;
                    self.state = match self.state {
                        State::Length(_) => State::Length(n - take),
                        _ if take == n => State::ChunkEnd,
                        _ => State::ChunkData(n - take),
                    };
                }
                State::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok((pos, None));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ParseError::Chunk);
                    }
                    pos += 2;
                    self.bytes += 2;
                    self.state = State::ChunkSize;
                }
                State::ChunkSize => {
                    let Some(end) = crlf(rest) else {
                        return Ok((pos, None));
                    };
                    let line = &rest[..end];
                    let digits = line
                        .iter()
                        .position(|&b| b == b';' || b == b' ' || b == b'\t')
                        .map_or(line, |i| &line[..i]);
                    let size = parse_hex(digits).ok_or(ParseError::Chunk)?;
                    pos += end + 2;
                    self.bytes += end as u64 + 2;
                    self.state = if size == 0 {
                        State::Trailer
                    } else {
                        State::ChunkData(size)
                    };
                }
                State::Trailer => {
                    let Some(end) = crlf(rest) else {
                        return Ok((pos, None));
                    };
                    pos += end + 2;
                    self.bytes += end as u64 + 2;
                    if end == 0 {
                        return Ok((pos, Some(self.finish())));
                    }
                }
                State::UntilClose => {
                    self.bytes += rest.len() as u64;
                    return Ok((input.len(), None));
                }
            }
        }
    }

    /// The stream ended: a body delimited by the end of the stream completes; the end
    /// inside any other response is an error. Call only when a response was expected
    /// or begun.
    pub(crate) fn eof(&mut self) -> Result<Done, ParseError> {
        match self.state {
            State::UntilClose => Ok(self.finish()),
            _ => Err(ParseError::Truncated),
        }
    }

    /// Forgets a response in progress (after an error or a reconnect).
    pub(crate) fn reset(&mut self) {
        *self = Parser::new();
    }

    fn finish(&mut self) -> Done {
        let done = Done {
            status: self.status,
            close: self.close,
            bytes: self.bytes,
        };
        self.reset();
        done
    }

    /// Reads the head (status line and header lines, each ending in CRLF) and picks
    /// the body's framing.
    fn head(&mut self, head: &[u8]) -> Result<(), ParseError> {
        let line_end = crlf(head).ok_or(ParseError::StatusLine)?;
        let line = &head[..line_end];
        let http10 = match line.get(..9) {
            Some(b"HTTP/1.1 ") => false,
            Some(b"HTTP/1.0 ") => true,
            _ => return Err(ParseError::StatusLine),
        };
        let code = line.get(9..12).ok_or(ParseError::StatusLine)?;
        if !matches!(line.get(12), None | Some(b' ')) {
            return Err(ParseError::StatusLine);
        }
        let status = parse_decimal(code)
            .filter(|c| (100..1000).contains(c))
            .ok_or(ParseError::StatusLine)? as u16;
        let mut length = None;
        let mut chunked = false;
        let mut close = http10;
        let mut rest = &head[line_end + 2..];
        while let Some(end) = crlf(rest) {
            let field = &rest[..end];
            rest = &rest[end + 2..];
            let colon = field
                .iter()
                .position(|&b| b == b':')
                .ok_or(ParseError::Header)?;
            let (name, value) = (&field[..colon], trim(&field[colon + 1..]));
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = parse_decimal(value).ok_or(ParseError::Header)?;
                if length.is_some_and(|l| l != n) {
                    return Err(ParseError::Header);
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = value
                    .split(|&b| b == b',')
                    .next_back()
                    .is_some_and(|t| trim(t).eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case(b"connection") {
                if has_token(value, b"close") {
                    close = true;
                } else if has_token(value, b"keep-alive") {
                    close = false;
                }
            }
        }
        self.status = status;
        self.close = close;
        self.state = if (100..200).contains(&status) {
            // An interim answer (100 Continue): the real one follows.
            self.close = false;
            State::Head
        } else if status == 204 || status == 304 {
            State::Length(0)
        } else if chunked {
            State::ChunkSize
        } else if let Some(n) = length {
            State::Length(n)
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes, as reads would, keeping unconsumed
    /// bytes; returns the responses and the error if any.
    fn run(input: &[u8], step: usize) -> (Vec<Done>, Option<ParseError>) {
        let mut p = Parser::new();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            buf.extend_from_slice(piece);
            loop {
                match p.feed(&buf) {
                    Ok((n, done)) => {
                        buf.drain(..n);
                        match done {
                            Some(d) => out.push(d),
                            None => break,
                        }
                    }
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        (out, None)
    }

    const CL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n5;ext=\"a;b\"\r\nhello\r\nA \r\n0123456789\r\n0;last\r\nX-Trailer: 1\r\nY: 2\r\n\r\n";
    const NOT_MODIFIED: &[u8] = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n";
    const CLOSE: &[u8] =
        b"HTTP/1.1 404 Not Found\r\nconnection: Close\r\ncontent-length: 3\r\n\r\nno!";

    #[test]
    fn responses_in_one_buffer_and_split_at_every_byte_agree() {
        let all = [CL, CHUNKED, NOT_MODIFIED, CLOSE, CL].concat();
        let want = vec![
            Done {
                status: 200,
                close: false,
                bytes: CL.len() as u64,
            },
            Done {
                status: 200,
                close: false,
                bytes: CHUNKED.len() as u64,
            },
            Done {
                status: 304,
                close: false,
                bytes: NOT_MODIFIED.len() as u64,
            },
            Done {
                status: 404,
                close: true,
                bytes: CLOSE.len() as u64,
            },
            Done {
                status: 200,
                close: false,
                bytes: CL.len() as u64,
            },
        ];
        for step in [all.len(), 1, 2, 3, 7, 16] {
            assert_eq!(run(&all, step), (want.clone(), None), "step {step}");
        }
    }

    #[test]
    fn a_body_up_to_the_end_of_the_stream() {
        let mut p = Parser::new();
        assert!(p.idle());
        let r = b"HTTP/1.0 200 OK\r\n\r\nabc";
        assert_eq!(p.feed(r), Ok((r.len(), None)));
        assert!(!p.idle());
        let d = p.eof().unwrap();
        assert_eq!((d.status, d.close, d.bytes), (200, true, r.len() as u64));
        assert!(p.idle());
        // An interim 100 then the answer.
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let d = p.feed(r).unwrap();
        assert_eq!(d.0, r.len());
        assert_eq!(
            d.1.map(|d| (d.status, d.bytes)),
            Some((204, r.len() as u64))
        );
        // The stream ends inside a sized body.
        assert_eq!(p.feed(&CL[..CL.len() - 1]).unwrap().1, None);
        assert_eq!(p.eof(), Err(ParseError::Truncated));
    }

    #[test]
    fn the_searches_find_the_first_match() {
        for hay in [
            &b"ab\r\n\r\n"[..],
            b"\r\n\r\n",
            b"\n\r\n\r\r\n\r\n",
            b"x\r\r\n\r\n\r\n",
            b"\r\n\n\r\n",
            b"abc\r\nd\r\n",
            b"",
            b"\r",
        ] {
            let naive = |n: &[u8]| hay.windows(n.len()).position(|w| w == n);
            assert_eq!(head_end(hay), naive(b"\r\n\r\n"), "{hay:?}");
            assert_eq!(crlf(hay), naive(b"\r\n"), "{hay:?}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let bad: &[&[u8]] = &[
            b"HTTX/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 20\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n",
            b"\r\n\r\n",
        ];
        for b in bad {
            for step in [1, b.len()] {
                let (out, err) = run(b, step);
                assert!(
                    out.is_empty() && err.is_some(),
                    "{:?}",
                    String::from_utf8_lossy(b)
                );
            }
        }
        // Arbitrary bytes never panic.
        let mut x = 0x1234_5678u32;
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let alphabet = b"HTP/1.0 2\r\n:;0aF";
                    alphabet[x as usize % alphabet.len()]
                })
                .collect();
            let _ = run(&junk, 5);
            let naive = |n: &[u8]| junk.windows(n.len()).position(|w| w == n);
            assert_eq!(head_end(&junk), naive(b"\r\n\r\n"));
            assert_eq!(crlf(&junk), naive(b"\r\n"));
        }
    }
}
