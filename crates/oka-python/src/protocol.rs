//! The protocol between the server and a worker (version [`PROTOCOL`]; the
//! worker's side is `worker.py`, whose docstring is the reference): frames of a
//! 4-byte little-endian length and marshal data, the messages each way, and the
//! limits that bound what a worker may send.

use std::io::{self, Read, Write};
use std::time::Duration;

use crate::marshal::{Obj, Reader};

/// The protocol version both sides must speak.
pub const PROTOCOL: i64 = 1;

/// The oldest CPython a worker may run.
pub const MIN_PYTHON: (i64, i64) = (3, 9);

/// The largest frame a worker may send (a batch's results).
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// The largest result of one key.
pub const MAX_ROW_BYTES: usize = 16 << 20;

/// The longest string a UDF may return in one value, in characters.
pub const MAX_STR_CHARS: usize = 1 << 20;

/// How often, at most, a worker sends the traceback of a UDF's exception.
pub const TRACEBACK_INTERVAL: Duration = Duration::from_secs(10);

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The worker closed its end (it exited or died).
    #[error("the worker closed its connection")]
    Closed,
    /// Nothing arrived within the read's timeout (the frame so far is kept).
    #[error("no answer yet")]
    Waiting,
    /// A frame longer than the protocol allows.
    #[error("the worker sent a frame of {0} bytes, over the limit of {MAX_FRAME_BYTES}")]
    TooLarge(usize),
    /// Another I/O failure.
    #[error("{}", oka_core::words::io_reason(.0))]
    Io(io::Error),
}

/// Reads frames from a socket with a read timeout, keeping a frame's bytes
/// across timeouts.
#[derive(Debug, Default)]
pub struct FrameReader {
    head: [u8; 4],
    head_len: usize,
    /// The frame's body once its length is known, and how much of it is in.
    body: Option<(Vec<u8>, usize)>,
}

impl FrameReader {
    /// Reads until a whole frame is in; [`FrameError::Waiting`] when the read
    /// times out first (call again to go on).
    pub fn read(&mut self, r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
        loop {
            match &mut self.body {
                None => {
                    self.head_len += read_some(r, &mut self.head[self.head_len..])?;
                    if self.head_len == 4 {
                        let len = u32::from_le_bytes(self.head) as usize;
                        if len > MAX_FRAME_BYTES {
                            return Err(FrameError::TooLarge(len));
                        }
                        self.head_len = 0;
                        self.body = Some((vec![0; len], 0));
                    }
                }
                Some((body, filled)) if *filled == body.len() => {
                    let (body, _) = self.body.take().unwrap_or_default();
                    return Ok(body);
                }
                Some((body, filled)) => *filled += read_some(r, &mut body[*filled..])?,
            }
        }
    }
}

/// Reads what is there into `buf`: at least a byte, or why not.
fn read_some(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, FrameError> {
    loop {
        return match r.read(buf) {
            Ok(0) => Err(FrameError::Closed),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(FrameError::Waiting)
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(FrameError::Closed),
            Err(e) => Err(FrameError::Io(e)),
        };
    }
}

/// Writes `payload` as one frame.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> Result<(), FrameError> {
    let len = u32::try_from(payload.len()).map_err(|_| FrameError::TooLarge(payload.len()))?;
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(payload);
    w.write_all(&frame).map_err(|e| match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => FrameError::Closed,
        _ => FrameError::Io(e),
    })
}

oka_core::described_error! {
    /// A message that is not what the protocol says comes next.
    pub struct ProtocolError;
}

fn bad(what: impl Into<String>) -> ProtocolError {
    ProtocolError::new(what.into())
}

/// The worker's first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Its protocol version.
    pub protocol: i64,
    /// CPython's version.
    pub python: (i64, i64, i64),
    /// Its process id.
    pub pid: i64,
}

impl Hello {
    /// Parses a `hello` frame.
    pub fn parse(frame: &[u8]) -> Result<Self, ProtocolError> {
        let obj = Reader::new(frame)
            .obj()
            .map_err(|e| bad(format!("an unreadable first message ({e})")))?;
        let parts = obj.as_list().unwrap_or_default();
        let int = |i: usize| parts.get(i).and_then(Obj::as_int);
        let version = parts.get(2).and_then(Obj::as_list).unwrap_or_default();
        let v = |i: usize| version.get(i).and_then(Obj::as_int);
        match (parts.first().and_then(Obj::as_str), int(1), int(3), int(4)) {
            (Some("hello"), Some(protocol), Some(pid), Some(_)) => Ok(Self {
                protocol,
                python: (v(0).unwrap_or(0), v(1).unwrap_or(0), v(2).unwrap_or(0)),
                pid,
            }),
            _ => Err(bad("a first message that is not Oka's worker saying hello")),
        }
    }
}

/// One problem a worker found loading the UDFs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    /// The UDF (its index in the load message).
    pub udf: usize,
    /// The module's file.
    pub file: String,
    /// The line, when the problem has one.
    pub line: Option<u32>,
    /// Python's words.
    pub message: String,
}

/// Parses a `loaded` frame: the problems (none: every UDF is ready).
pub fn parse_loaded(frame: &[u8]) -> Result<Vec<LoadProblem>, ProtocolError> {
    let obj = Reader::new(frame)
        .obj()
        .map_err(|e| bad(format!("an unreadable answer to `load` ({e})")))?;
    let parts = obj.as_list().unwrap_or_default();
    let (Some("loaded"), Some(problems)) = (
        parts.first().and_then(Obj::as_str),
        parts.get(1).and_then(Obj::as_list),
    ) else {
        return Err(bad("an answer to `load` that is not `loaded`"));
    };
    problems
        .iter()
        .map(|p| {
            let p = p.as_list().unwrap_or_default();
            let udf = p.first().and_then(Obj::as_int);
            let file = p.get(1).and_then(Obj::as_str);
            let message = p.get(3).and_then(Obj::as_str);
            match (udf, file, message) {
                (Some(udf), Some(file), Some(message)) => Ok(LoadProblem {
                    udf: usize::try_from(udf).map_err(|_| bad("a negative UDF number"))?,
                    file: file.to_owned(),
                    line: p
                        .get(2)
                        .and_then(Obj::as_int)
                        .and_then(|l| u32::try_from(l).ok()),
                    message: message.to_owned(),
                }),
                _ => Err(bad("a load problem without its UDF, file or message")),
            }
        })
        .collect()
}

/// A `done` frame: `('done', flags, times, answers)`; the answers, one per
/// row, are read from [`Done::answers_at`] on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// A UDF ran out of memory: the worker is to be replaced.
    pub out_of_memory: bool,
    /// Per group of the batch: the UDF and its time in Python, in nanoseconds.
    pub times: Vec<(usize, u64)>,
    /// How many answers there are.
    pub answers: usize,
    /// Where in the frame the first answer begins.
    pub answers_at: usize,
}

impl Done {
    /// Parses a `done` frame up to its answers.
    pub fn parse(frame: &[u8]) -> Result<Self, ProtocolError> {
        let unreadable =
            |e: crate::marshal::ReadError| bad(format!("an unreadable batch answer ({e})"));
        let mut r = Reader::new(frame);
        let fields = r.seq().map_err(unreadable)?;
        let kind = r.obj().map_err(unreadable)?;
        let flags = r.obj().map_err(unreadable)?;
        let times = r.obj().map_err(unreadable)?;
        let (4, Some("done"), Some(flags), Some(times)) =
            (fields, kind.as_str(), flags.as_int(), times.as_list())
        else {
            return Err(bad("a batch answer that is not `done`"));
        };
        let answers = r.seq().map_err(unreadable)?;
        let times = times
            .chunks(2)
            .filter_map(|pair| match pair {
                [u, ns] => Some((
                    usize::try_from(u.as_int()?).ok()?,
                    u64::try_from(ns.as_int()?).ok()?,
                )),
                _ => None,
            })
            .collect();
        Ok(Self {
            out_of_memory: flags & 1 != 0,
            times,
            answers,
            answers_at: frame.len() - r.remaining(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_timeouts_between_their_bytes() {
        /// Gives one byte per read, and a timeout between bytes.
        struct Trickle(Vec<u8>, usize, bool);
        impl Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.2 = !self.2;
                if self.2 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                match self.0.get(self.1) {
                    Some(&b) => {
                        buf[0] = b;
                        self.1 += 1;
                        Ok(1)
                    }
                    None => Ok(0),
                }
            }
        }
        let mut data = Vec::new();
        write_frame(&mut data, b"hello").unwrap();
        write_frame(&mut data, b"").unwrap();
        let mut r = Trickle(data, 0, false);
        let mut frames = FrameReader::default();
        let mut got = Vec::new();
        loop {
            match frames.read(&mut r) {
                Ok(f) => got.push(f),
                Err(FrameError::Waiting) => continue,
                Err(FrameError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), Vec::new()]);
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_before_it_is_read() {
        let mut data = Vec::new();
        data.extend_from_slice(&(MAX_FRAME_BYTES as u32 + 1).to_le_bytes());
        let err = FrameReader::default().read(&mut &data[..]).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge(_)), "{err}");
    }
}
