//! The spill files' records: each a length-prefixed payload, written and read
//! back by the same run (no format version). Rows are in the store codec
//! ([`oka_storage::codec`]), which keeps every value exactly.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use oka_core::{Entity, EntityKey, Query, Row, Timestamp};
use oka_storage::codec;

use crate::error::TrainingError;
use crate::history::Answer;

const BUFFER: usize = 1 << 15;
/// No record written is near this (a window's answer is at most a feature's
/// `history` records).
const MAX_RECORD: u64 = 1 << 32;

/// A spill file being written.
#[derive(Debug)]
pub(super) struct Out {
    w: BufWriter<File>,
    path: PathBuf,
}

impl Out {
    pub(super) fn create(path: PathBuf) -> Result<Self, TrainingError> {
        let file = File::create(&path).map_err(|e| TrainingError::os(&path, &e))?;
        Ok(Self {
            w: BufWriter::with_capacity(BUFFER, file),
            path,
        })
    }

    /// Appends one record.
    pub(super) fn record(&mut self, payload: &[u8]) -> Result<(), TrainingError> {
        let len = (payload.len() as u64).to_le_bytes();
        (self.w.write_all(&len))
            .and_then(|()| self.w.write_all(payload))
            .map_err(|e| TrainingError::os(&self.path, &e))
    }

    pub(super) fn finish(mut self) -> Result<PathBuf, TrainingError> {
        self.w
            .flush()
            .map_err(|e| TrainingError::os(&self.path, &e))?;
        Ok(self.path)
    }
}

/// A spill file being read, record by record.
#[derive(Debug)]
pub(super) struct In {
    r: BufReader<File>,
    path: PathBuf,
}

impl In {
    pub(super) fn open(path: &Path) -> Result<Self, TrainingError> {
        let file = File::open(path).map_err(|e| TrainingError::os(path, &e))?;
        Ok(Self {
            r: BufReader::with_capacity(BUFFER, file),
            path: path.to_owned(),
        })
    }

    /// The next record's payload into `payload`; `false` at the end.
    pub(super) fn next_into(&mut self, payload: &mut Vec<u8>) -> Result<bool, TrainingError> {
        let os = |e: std::io::Error| TrainingError::os(&self.path, &e);
        if self.r.fill_buf().map_err(os)?.is_empty() {
            return Ok(false);
        }
        let mut len = [0u8; 8];
        self.r.read_exact(&mut len).map_err(os)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_RECORD {
            return Err(self.damaged("length"));
        }
        let len = len as usize;
        payload.clear();
        payload.resize(len, 0);
        self.r.read_exact(payload).map_err(os)?;
        Ok(true)
    }

    pub(super) fn damaged(&self, what: &str) -> TrainingError {
        damaged(&self.path, what)
    }
}

fn damaged(path: &Path, what: &str) -> TrainingError {
    TrainingError::io(
        path,
        format!("a spill file is damaged ({what}); was it changed during the run?"),
    )
}

/// Reads a payload's fields.
pub(super) struct Fields<'a> {
    rest: &'a [u8],
    path: &'a Path,
}

impl<'a> Fields<'a> {
    pub(super) fn new(payload: &'a [u8], path: &'a Path) -> Self {
        Self {
            rest: payload,
            path,
        }
    }

    pub(super) fn u64(&mut self) -> Result<u64, TrainingError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or_else(|| damaged(self.path, "short record"))?;
        self.rest = rest;
        Ok(u64::from_le_bytes(*head))
    }

    fn bytes(&mut self) -> Result<&'a [u8], TrainingError> {
        let len = usize::try_from(self.u64()?).map_err(|_| damaged(self.path, "length"))?;
        if len > self.rest.len() {
            return Err(damaged(self.path, "short record"));
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }

    fn key(&mut self) -> Result<EntityKey, TrainingError> {
        let bytes = self.bytes()?;
        let text = std::str::from_utf8(bytes).map_err(|_| damaged(self.path, "key"))?;
        Ok(EntityKey::from_canonical(text))
    }

    fn row(&mut self, entity: &Entity) -> Result<Row, TrainingError> {
        let bytes = self.bytes()?;
        codec::decode_row(entity, bytes).map_err(|e| damaged(self.path, &e.to_string()))
    }

    fn query(&mut self) -> Result<Query, TrainingError> {
        let (tag, a, b) = (self.u64()?, self.u64()?, self.u64()?);
        match tag {
            0 => Ok(Query::Latest),
            1 => Ok(Query::Range {
                start: Timestamp(a as i64),
                end: Timestamp(b as i64),
            }),
            2 => Ok(Query::LastN {
                n: usize::try_from(a).map_err(|_| damaged(self.path, "query"))?,
            }),
            _ => Err(damaged(self.path, "query")),
        }
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_query(out: &mut Vec<u8>, q: &Query) {
    let (tag, a, b) = match *q {
        Query::Latest => (0, 0, 0),
        Query::Range { start, end } => (1, start.0 as u64, end.0 as u64),
        Query::LastN { n } => (2, n as u64, 0),
    };
    for v in [tag, a, b] {
        put_u64(out, v);
    }
}

/// A history record: its key and row.
pub(super) fn put_history(out: &mut Vec<u8>, entity: &Entity, key: &EntityKey, row: &Row) {
    out.clear();
    put_bytes(out, key.as_str().as_bytes());
    put_bytes(out, &codec::encode_row(entity, row));
}

pub(super) fn history(
    f: &mut Fields<'_>,
    entity: &Entity,
) -> Result<(EntityKey, Row), TrainingError> {
    Ok((f.key()?, f.row(entity)?))
}

/// One read a row's request makes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Request {
    /// The row's number in the entity file, from 0.
    pub row: u64,
    pub time: Timestamp,
    pub query: Query,
    pub key: EntityKey,
}

pub(super) fn put_request(out: &mut Vec<u8>, r: &Request) {
    out.clear();
    put_u64(out, r.row);
    put_u64(out, r.time.0 as u64);
    put_query(out, &r.query);
    put_bytes(out, r.key.as_str().as_bytes());
}

pub(super) fn request(f: &mut Fields<'_>) -> Result<Request, TrainingError> {
    Ok(Request {
        row: f.u64()?,
        time: Timestamp(f.u64()? as i64),
        query: f.query()?,
        key: f.key()?,
    })
}

/// A request's answer; its payload starts with the row's number, so that
/// answer files merge by it without decoding the rest.
pub(super) fn put_answer(out: &mut Vec<u8>, entity: &Entity, r: &Request, a: &Answer) {
    out.clear();
    put_u64(out, r.row);
    put_query(out, &r.query);
    put_bytes(out, r.key.as_str().as_bytes());
    put_u64(out, u64::from(a.expired));
    put_u64(out, a.rows.len() as u64);
    for row in &a.rows {
        put_bytes(out, &codec::encode_row(entity, row));
    }
}

/// An answer record: the row's number, the read (query, key) and the answer.
pub(super) fn answer(
    f: &mut Fields<'_>,
    entity: &Entity,
) -> Result<(u64, Query, EntityKey, Answer), TrainingError> {
    let row = f.u64()?;
    let query = f.query()?;
    let key = f.key()?;
    let expired = f.u64()? != 0;
    let n = f.u64()?;
    let mut rows = Vec::new();
    for _ in 0..n {
        rows.push(f.row(entity)?);
    }
    Ok((row, query, key, Answer { rows, expired }))
}
