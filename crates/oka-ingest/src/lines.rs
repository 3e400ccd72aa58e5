//! Streaming readers of JSON Lines and CSV input, one record at a time, with the
//! physical line numbers each record came from.
//!
//! Memory is bounded by [`ReaderLimits::max_record_bytes`] whatever the input: lines
//! are read with `fill_buf`/`consume`, and a longer line is skipped without being
//! buffered (it becomes one rejected record). Every problem with a record's content
//! (a bad value, invalid UTF-8, a CSV quote that never closes) is a [`Record`] whose
//! `parsed` is an error; the reader goes on with the next line. Only a failure to
//! read the input itself, or a CSV header that cannot be used, is a [`ReadError`].
//!
//! CSV is RFC 4180: `,` between fields, `"` around a field that holds `,`, `"` (as
//! `""`) or line breaks. A quoted field that is still open at the end of a line
//! continues on the next one. When such a multi-line record turns out broken (the
//! quote never closes, the record would exceed the size limit, or it does not have
//! the header's number of fields), only its first line is rejected and reading
//! resumes on the line after it, so a stray quote never swallows the records that
//! follow.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, ErrorKind};
use std::path::Path;

use oka_core::{EntityKey, Row};

use crate::record::{RecordError, RecordParser, printable};
#[cfg(test)]
use crate::reject::UNTERMINATED;
use crate::reject::Unclosed;

mod csv;
use csv::Splitter;

/// The UTF-8 byte order mark, dropped from the start of the input.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The input's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    JsonLines,
    /// A header row of column names, then one record per row.
    Csv,
}

impl Format {
    /// The format a file name implies: `.jsonl`, `.ndjson` and `.json` are JSON
    /// Lines, `.csv` is CSV (any letter case); anything else is `None`.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" | "ndjson" | "json" => Some(Self::JsonLines),
            "csv" => Some(Self::Csv),
            _ => None,
        }
    }
}

/// Limits of a [`RecordReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderLimits {
    /// The longest record accepted, in bytes (a CSV record's lines together, line
    /// breaks included). Longer ones are rejected without being buffered.
    pub max_record_bytes: usize,
}

impl Default for ReaderLimits {
    fn default() -> Self {
        Self {
            max_record_bytes: 1 << 20,
        }
    }
}

/// One record of the input and its fate.
#[derive(Debug, Clone)]
pub struct Record {
    /// The 1-based line the record starts on.
    pub first_line: u64,
    /// The 1-based line it ends on (past `first_line` for a CSV record with a
    /// line break in a quoted field).
    pub last_line: u64,
    /// Its exact bytes, without the final line break (inner ones kept as they
    /// were, `\r\n` or `\n`), so a rejected record can be written out, fixed and
    /// read again. A line longer than the limit keeps only its first
    /// `max_record_bytes` bytes.
    pub raw: Vec<u8>,
    /// The key and row, or why the record was rejected.
    pub parsed: Result<(EntityKey, Row), RecordError>,
}

/// A failure to read the input, or a CSV header that cannot be used. Problems with
/// a record's content are never a `ReadError`: they are rejected [`Record`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Reading the input failed.
    #[error("reading line {line} failed: {source}")]
    Io {
        /// The line being read.
        line: u64,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A CSV input without a header row.
    #[error("the file is empty; a CSV file starts with a header row")]
    EmptyCsv,
    /// The CSV header is longer than the record limit.
    #[error("the CSV header (line {line}) is longer than {limit} bytes")]
    HeaderTooLong {
        /// The header's line.
        line: u64,
        /// The limit.
        limit: usize,
    },
    /// The CSV header is not UTF-8.
    #[error("the CSV header (line {line}) is not valid UTF-8 at byte {byte}")]
    HeaderNotUtf8 {
        /// The header's line.
        line: u64,
        /// The 1-based offset of the first invalid byte.
        byte: usize,
    },
    /// The CSV header cannot be split into column names.
    #[error("the CSV header (line {line}) cannot be read: {reason}")]
    BadHeader {
        /// The header's line.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// A CSV column that is not a field of the entity.
    #[error("CSV column `{column}` is not a field of entity `{entity}`")]
    UnknownColumn {
        /// The column (made [`printable`]).
        column: String,
        /// The entity.
        entity: String,
    },
    /// A CSV column named twice.
    #[error("CSV column `{column}` appears more than once in the header")]
    DuplicateColumn {
        /// The column.
        column: String,
    },
}

/// One physical line of the input.
#[derive(Debug)]
struct Line {
    /// 1-based.
    number: u64,
    /// Its bytes without the line break, at most `max_record_bytes` of them.
    bytes: Vec<u8>,
    /// Its full length without the line break (more than `bytes.len()` when
    /// truncated).
    len: usize,
    /// Whether it ended with `\r\n` (so the break is put back as it was).
    crlf: bool,
}

impl Line {
    /// The line break it ended with.
    fn newline(&self) -> &'static str {
        if self.crlf { "\r\n" } else { "\n" }
    }

    /// Whether it holds nothing but whitespace.
    fn is_blank(&self) -> bool {
        self.bytes.iter().all(u8::is_ascii_whitespace)
    }
}

/// Reads records from `input` one at a time; see the module docs.
#[derive(Debug)]
pub struct RecordReader<'e, R> {
    input: R,
    format: Format,
    parser: RecordParser<'e>,
    limits: ReaderLimits,
    /// Physical lines read from `input` so far.
    lines_read: u64,
    /// Lines read ahead by a broken multi-line CSV record, to be read again.
    pending: VecDeque<Line>,
    /// The column index of each CSV field.
    header: Vec<usize>,
    /// The CSV header line as read.
    header_line: Vec<u8>,
    /// The CSV record being split.
    splitter: Splitter,
    /// Set after the end of the input or an I/O error.
    done: bool,
}

impl<'e, R: BufRead> RecordReader<'e, R> {
    /// A reader of `input`. For CSV it reads and checks the header row: every
    /// column must be a field of the parser's entity, named once.
    pub fn new(
        input: R,
        format: Format,
        parser: RecordParser<'e>,
        limits: ReaderLimits,
    ) -> Result<Self, ReadError> {
        let mut reader = Self {
            input,
            format,
            parser,
            limits,
            lines_read: 0,
            pending: VecDeque::new(),
            header: Vec::new(),
            header_line: Vec::new(),
            splitter: Splitter::default(),
            done: false,
        };
        if format == Format::Csv {
            reader.read_header()?;
        }
        Ok(reader)
    }

    /// Physical lines read from the input so far: the header and blank lines
    /// included, and lines read ahead while looking for the end of a multi-line
    /// CSV record.
    pub fn lines_read(&self) -> u64 {
        self.lines_read
    }

    /// The CSV header line as it was read (empty for JSON Lines), to start a
    /// file of records that can be read again.
    pub fn header_line(&self) -> &[u8] {
        &self.header_line
    }

    /// The parser records go through.
    pub fn parser(&self) -> &RecordParser<'e> {
        &self.parser
    }

    fn read_header(&mut self) -> Result<(), ReadError> {
        let line = loop {
            match self.read_line()? {
                None => return Err(ReadError::EmptyCsv),
                Some(line) if line.is_blank() && line.len <= self.limits.max_record_bytes => {}
                Some(line) => break line,
            }
        };
        if line.len > self.limits.max_record_bytes {
            return Err(ReadError::HeaderTooLong {
                line: line.number,
                limit: self.limits.max_record_bytes,
            });
        }
        let text = std::str::from_utf8(&line.bytes).map_err(|e| ReadError::HeaderNotUtf8 {
            line: line.number,
            byte: e.valid_up_to() + 1,
        })?;
        let bad = |reason: &str| ReadError::BadHeader {
            line: line.number,
            reason: reason.to_owned(),
        };
        self.splitter.clear();
        match self.splitter.feed(text) {
            Ok(true) => {}
            Ok(false) => return Err(bad("a quoted column name never closes")),
            Err(reason) => return Err(bad(reason)),
        }
        let entity = self.parser.entity();
        let mut seen = HashSet::new();
        for name in self.splitter.cells() {
            let Some(index) = self.parser.column_index(name) else {
                return Err(ReadError::UnknownColumn {
                    column: printable(name).into_owned(),
                    entity: printable(&entity.name).into_owned(),
                });
            };
            if !seen.insert(index) {
                return Err(ReadError::DuplicateColumn {
                    column: printable(name).into_owned(),
                });
            }
            self.header.push(index);
        }
        self.header_line = line.bytes;
        Ok(())
    }

    /// The next physical line: one put back, or the next from the input.
    fn next_line(&mut self) -> Result<Option<Line>, ReadError> {
        match self.pending.pop_front() {
            Some(line) => Ok(Some(line)),
            None => self.read_line(),
        }
    }

    /// Reads one line from the input, keeping at most `max_record_bytes` (+1, for a
    /// `\r`) of it; `None` at the end of the input.
    fn read_line(&mut self) -> Result<Option<Line>, ReadError> {
        let keep = self.limits.max_record_bytes.saturating_add(1);
        let number = self.lines_read + 1;
        let mut bytes = Vec::new();
        let mut len = 0usize;
        let mut started = false;
        loop {
            let buf = match self.input.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(ReadError::Io {
                        line: number,
                        source,
                    });
                }
            };
            if buf.is_empty() {
                if !started {
                    return Ok(None);
                }
                break;
            }
            started = true;
            let (content, found) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let room = keep.saturating_sub(bytes.len()).min(content.len());
            bytes.extend_from_slice(&content[..room]);
            len = len.saturating_add(content.len());
            let used = content.len() + usize::from(found);
            self.input.consume(used);
            if found {
                break;
            }
        }
        self.lines_read = number;
        let crlf = len == bytes.len() && bytes.last() == Some(&b'\r');
        if crlf {
            bytes.pop();
            len -= 1;
        }
        if number == 1 && bytes.starts_with(BOM) {
            bytes.drain(..BOM.len());
            len -= BOM.len();
        }
        bytes.truncate(self.limits.max_record_bytes);
        Ok(Some(Line {
            number,
            bytes,
            len,
            crlf,
        }))
    }

    /// A line rejected on its own, as a record.
    fn reject(line: Line, why: RecordError) -> Record {
        Record {
            first_line: line.number,
            last_line: line.number,
            raw: line.bytes,
            parsed: Err(why),
        }
    }

    /// Why a line cannot be read at all (too long, not UTF-8), if it cannot.
    fn unreadable(&self, line: &Line) -> Option<RecordError> {
        if line.len > self.limits.max_record_bytes {
            return Some(RecordError::LineTooLong(self.limits.max_record_bytes));
        }
        std::str::from_utf8(&line.bytes)
            .err()
            .map(|e| RecordError::NotUtf8(e.valid_up_to() + 1))
    }

    fn next_json(&mut self) -> Result<Option<Record>, ReadError> {
        loop {
            let Some(line) = self.next_line()? else {
                return Ok(None);
            };
            if line.len <= self.limits.max_record_bytes && line.is_blank() {
                continue;
            }
            if let Some(why) = self.unreadable(&line) {
                return Ok(Some(Self::reject(line, why)));
            }
            let parsed = self.parser.parse_json(&line.bytes);
            return Ok(Some(Record {
                first_line: line.number,
                last_line: line.number,
                raw: line.bytes,
                parsed,
            }));
        }
    }

    fn next_csv(&mut self) -> Result<Option<Record>, ReadError> {
        let first = loop {
            let Some(line) = self.next_line()? else {
                return Ok(None);
            };
            if line.len <= self.limits.max_record_bytes && line.is_blank() {
                continue;
            }
            break line;
        };
        if let Some(why) = self.unreadable(&first) {
            return Ok(Some(Self::reject(first, why)));
        }
        self.splitter.clear();
        let fed = std::str::from_utf8(&first.bytes)
            .map_err(|_| "not valid UTF-8")
            .and_then(|text| self.splitter.feed(text));
        match fed {
            Ok(true) => {
                let parsed = self.parse_split();
                Ok(Some(Record {
                    first_line: first.number,
                    last_line: first.number,
                    raw: first.bytes,
                    parsed,
                }))
            }
            Ok(false) => self.continue_csv(first),
            Err(why) => Ok(Some(Self::reject(first, RecordError::Csv(why)))),
        }
    }

    /// Reads the rest of a CSV record whose quoted field is open at the end of
    /// `first`. When it turns out broken, rejects `first` alone and puts the lines
    /// read after it back, to be read again as records of their own.
    fn continue_csv(&mut self, first: Line) -> Result<Option<Record>, ReadError> {
        let max = self.limits.max_record_bytes;
        let mut size = first.len;
        let mut rest: Vec<Line> = Vec::new();
        loop {
            let before = rest.last().unwrap_or(&first);
            let newline = before.newline();
            let Some(line) = self.next_line()? else {
                return Ok(Some(self.unterminated(first, rest, Unclosed::EndOfInput)));
            };
            size = size.saturating_add(newline.len()).saturating_add(line.len);
            if size > max {
                rest.push(line);
                return Ok(Some(self.unterminated(first, rest, Unclosed::TooLong(max))));
            }
            self.splitter.push_str(newline);
            let number = line.number;
            let fed = match std::str::from_utf8(&line.bytes) {
                Ok(text) => self
                    .splitter
                    .feed(text)
                    .map_err(|why| Unclosed::Syntax { line: number, why }),
                Err(_) => Err(Unclosed::NotUtf8 { line: number }),
            };
            rest.push(line);
            match fed {
                Ok(false) => {}
                Err(detail) => {
                    return Ok(Some(self.unterminated(first, rest, detail)));
                }
                Ok(true) if self.splitter.len() != self.header.len() => {
                    let detail = Unclosed::FieldCount {
                        line: number,
                        found: self.splitter.len(),
                        expected: self.header.len(),
                    };
                    return Ok(Some(self.unterminated(first, rest, detail)));
                }
                Ok(true) => {
                    let parsed = self.parse_split();
                    let mut raw = first.bytes;
                    let mut newline = first.crlf;
                    for line in rest {
                        raw.extend_from_slice(if newline { b"\r\n" } else { b"\n" });
                        raw.extend_from_slice(&line.bytes);
                        newline = line.crlf;
                    }
                    return Ok(Some(Record {
                        first_line: first.number,
                        last_line: number,
                        raw,
                        parsed,
                    }));
                }
            }
        }
    }

    /// Rejects `first` as opening a quote that never closes, and puts `rest` back.
    fn unterminated(&mut self, first: Line, rest: Vec<Line>, detail: Unclosed) -> Record {
        for line in rest.into_iter().rev() {
            self.pending.push_front(line);
        }
        Self::reject(first, RecordError::Unterminated(detail))
    }

    /// Parses the record in the splitter.
    fn parse_split(&self) -> Result<(EntityKey, Row), RecordError> {
        let cells: Vec<&str> = self.splitter.cells().collect();
        self.parser.parse_cells(&self.header, &cells)
    }
}

impl<R: BufRead> Iterator for RecordReader<'_, R> {
    type Item = Result<Record, ReadError>;

    /// The next record; after an I/O error (returned once) and at the end of the
    /// input, `None`.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match self.format {
            Format::JsonLines => self.next_json(),
            Format::Csv => self.next_csv(),
        };
        match next {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::io::{Cursor, Read};
    use std::rc::Rc;
    use std::sync::Arc;

    use oka_core::{Entity, NativeUdfs, Registry, Timestamp, Value};

    use super::*;
    use crate::record::TimeBounds;

    /// 2025-04-18T10:00:00Z.
    const NOW: Timestamp = Timestamp(1_744_970_400_000_000);

    const SPEC: &str = "version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {v: float, n: int, ok: bool, tags: list<string>, seen: timestamp}
  S:
    keys: {k: string}
    timestamp: ts
    fields: {a: string, b: string}
features:
  p: {kind: pipeline, entity: E}
  q: {kind: pipeline, entity: S}
";

    fn entity(name: &str) -> Arc<Entity> {
        let registry = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        Arc::clone(
            &registry
                .features()
                .iter()
                .find(|f| &*f.entity.name == name)
                .unwrap()
                .entity,
        )
    }

    fn reader<'e, R: BufRead>(
        e: &'e Entity,
        input: R,
        format: Format,
        max_record_bytes: usize,
    ) -> Result<RecordReader<'e, R>, ReadError> {
        RecordReader::new(
            input,
            format,
            RecordParser::new(e, NOW, &TimeBounds::default()),
            ReaderLimits { max_record_bytes },
        )
    }

    fn read_all(e: &Entity, input: &[u8], format: Format, max: usize) -> Vec<Record> {
        reader(e, input, format, max)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    /// What should become of a record.
    #[derive(Debug)]
    enum Fate {
        /// Written, with this key.
        Ok(&'static str),
        /// Rejected, the message containing this.
        Rejected(&'static str),
    }
    use Fate::{Ok as Written, Rejected};

    /// A record's first and last line and its fate.
    type Expected = (u64, u64, Fate);

    /// Asserts each record's lines and fate, in order.
    fn assert_fates(records: &[Record], want: &[Expected]) {
        let got: Vec<String> = records
            .iter()
            .map(|r| match &r.parsed {
                Ok((key, _)) => format!("{}..{} ok {key}", r.first_line, r.last_line),
                Err(e) => format!("{}..{} rejected: {e}", r.first_line, r.last_line),
            })
            .collect();
        assert_eq!(records.len(), want.len(), "{got:#?}");
        for ((record, (first, last, fate)), shown) in records.iter().zip(want).zip(&got) {
            assert_eq!(
                (record.first_line, record.last_line),
                (*first, *last),
                "{shown}"
            );
            match (fate, &record.parsed) {
                (Written(key), Ok((k, _))) => assert_eq!(k.as_str(), *key, "{shown}"),
                (Rejected(part), Err(e)) => {
                    assert!(e.to_string().contains(part), "{shown}: want {part:?}")
                }
                _ => panic!("{shown}: want {fate:?}"),
            }
        }
    }

    #[test]
    fn json_lines_fates_and_line_numbers() {
        let e = entity("E");
        let long = format!(r#"{{"id":"long","tags":["{}"]}}"#, "x".repeat(300));
        let lines: Vec<Vec<u8>> = vec![
            br#"{"id":"a","v":1.5}"#.to_vec(),
            b"   \t".to_vec(),
            b"not json".to_vec(),
            br#"{"id":"b","v":NaN}"#.to_vec(),
            b"{\"id\":\"\xff\"}".to_vec(),
            br#"{"id":"c","ts":9e12}"#.to_vec(),
            br#"{"id":"d","ts":"2100-01-01T00:00:00Z"}"#.to_vec(),
            br#"{"id":"e","ts":-1}"#.to_vec(),
            br#"{"id":"f","ts":"1969-12-31T23:59:59Z"}"#.to_vec(),
            br#"{"id":"g","ts":1744970400000}"#.to_vec(),
            long.into_bytes(),
            br#"{"id":"h","\u001b[31mred":1}"#.to_vec(),
            b"".to_vec(),
            br#"{"id":"i","ts":1744970400,"tags":["x"],"seen":"2025-01-01T00:00:00Z"}"#.to_vec(),
            br#"{"id":"j"}"#.to_vec(),
        ];
        let input = lines.join(&b'\n');
        let records = read_all(&e, &input, Format::JsonLines, 200);
        assert_fates(
            &records,
            &[
                (1, 1, Written("a")),
                (
                    3,
                    3,
                    Rejected("not a JSON object: expected ident at line 1 column 2"),
                ),
                (4, 4, Rejected("not a JSON object: expected value")),
                (5, 5, Rejected("not valid UTF-8 at byte 8 of the line")),
                (
                    6,
                    6,
                    Rejected("field `ts`: 9000000000000 epoch seconds is outside"),
                ),
                (
                    7,
                    7,
                    Rejected("field `ts`: 2100-01-01T00:00:00+00:00 is 74.7 years in the future"),
                ),
                (
                    8,
                    8,
                    Rejected("field `ts`: 1969-12-31T23:59:59+00:00 is outside"),
                ),
                (
                    9,
                    9,
                    Rejected("field `ts`: 1969-12-31T23:59:59+00:00 is outside"),
                ),
                (10, 10, Rejected("epoch seconds, not milliseconds")),
                (11, 11, Rejected("line is longer than 200 bytes")),
                (12, 12, Rejected("entity `E` has no field `\\u{1b}[31mred`")),
                (14, 14, Written("i")),
                (15, 15, Written("j")),
            ],
        );
        // Raw bytes are the lines as they were (the long one cut at the limit).
        for r in &records {
            let line = &lines[(r.first_line - 1) as usize];
            if r.first_line == 11 {
                assert_eq!(r.raw, line[..200]);
            } else {
                assert_eq!(&r.raw, line);
            }
            if let Err(e) = &r.parsed {
                assert!(!e.to_string().contains('\u{1b}'), "{e}");
            }
        }
        let (_, row) = records[0].parsed.as_ref().unwrap();
        assert_eq!(row.columns[2], Value::Float(1.5));
        assert_eq!(row.event_time, NOW);
    }

    #[test]
    fn json_lines_with_crlf_and_no_final_newline() {
        let e = entity("E");
        let input = b"{\"id\":\"a\"}\r\n\r\n{\"id\":\"b\"}\r\nbad\r\n{\"id\":\"c\"}";
        let records = read_all(&e, input, Format::JsonLines, 1 << 20);
        assert_fates(
            &records,
            &[
                (1, 1, Written("a")),
                (3, 3, Written("b")),
                (4, 4, Rejected("not a JSON object")),
                (5, 5, Written("c")),
            ],
        );
        assert_eq!(records[2].raw, b"bad");
        // A final `\r` alone and a UTF-8 byte order mark are dropped too.
        let records = read_all(
            &e,
            b"\xEF\xBB\xBF{\"id\":\"a\"}\n{\"id\":\"b\"}\r",
            Format::JsonLines,
            64,
        );
        assert_fates(&records, &[(1, 1, Written("a")), (2, 2, Written("b"))]);
        // A line of exactly the limit fits, `\r` or not; one byte more does not.
        let line = br#"{"id":"abc"}"#;
        for (input, ok) in [
            (line.to_vec(), true),
            ([&line[..], b"\r\n"].concat(), true),
            ([&line[..], b" "].concat(), false),
            ([&line[..], b" \r\n"].concat(), false),
        ] {
            let records = read_all(&e, &input, Format::JsonLines, line.len());
            assert_eq!(records.len(), 1);
            assert_eq!(records[0].parsed.is_ok(), ok, "{input:?}");
        }
    }

    #[test]
    fn csv_fates_and_line_numbers() {
        let e = entity("E");
        let input: &[u8] = b"id,ts,v,n,ok,tags
a,2025-04-18T10:00:00Z,1.5,2,true,\"[\"\"x\"\"]\"
b,,1,,,\"[\"\"x\"\",
\"\"y\"\"]\"
c,,2,,,
d,,\"3,,,
e,,4,,,

f,,NaN,,,
g,,inf,,,
h,2100-01-01T00:00:00Z,,,,
i,,1,2
j,,\xff,,,
k,,\"1\",2,,
l,,1,\"2\"x,,
m,,1\",,,
n,,1e999,,,
o,,7,,,";
        let records = read_all(&e, input, Format::Csv, 1 << 20);
        assert_fates(
            &records,
            &[
                (2, 2, Written("a")),
                (3, 4, Written("b")),
                (5, 5, Written("c")),
                (
                    6,
                    6,
                    Rejected(
                        "unterminated quote: the quoted field opened on this line never closes (line 13 is not valid UTF-8)",
                    ),
                ),
                (7, 7, Written("e")),
                (
                    9,
                    9,
                    Rejected("field `v`: NaN and infinities are not allowed"),
                ),
                (
                    10,
                    10,
                    Rejected("field `v`: NaN and infinities are not allowed"),
                ),
                (
                    11,
                    11,
                    Rejected("field `ts`: 2100-01-01T00:00:00+00:00 is 74.7 years in the future"),
                ),
                (12, 12, Rejected("expected 6 fields, found 4")),
                (13, 13, Rejected("not valid UTF-8 at byte 4 of the line")),
                (14, 14, Written("k")),
                (15, 15, Rejected("text after a closing quote")),
                (
                    16,
                    16,
                    Rejected(
                        "a quote inside an unquoted field; quote the whole field and double the inner quotes",
                    ),
                ),
                (
                    17,
                    17,
                    Rejected("field `v`: NaN and infinities are not allowed"),
                ),
                (18, 18, Written("o")),
            ],
        );
        let (_, b) = records[1].parsed.as_ref().unwrap();
        assert_eq!(
            b.columns[5],
            Value::List(vec!["x".into(), "y".into()].into())
        );
        assert_eq!(records[1].raw, b"b,,1,,,\"[\"\"x\"\",\n\"\"y\"\"]\"");
        assert_eq!(records[3].raw, b"d,,\"3,,,");
        let (_, k) = records[10].parsed.as_ref().unwrap();
        assert_eq!(k.columns[2], Value::Float(1.0));
    }

    #[test]
    fn broken_multi_line_csv_records_reject_only_their_first_line() {
        let e = entity("E");
        let cases: &[(&[u8], usize, &[Expected])] = &[
            // The quote never closes: only line 2 is lost.
            (
                b"id,v\na,\"1\nb,2\nc,3\n",
                1 << 20,
                &[
                    (2, 2, Rejected(UNTERMINATED)),
                    (3, 3, Written("b")),
                    (4, 4, Written("c")),
                ],
            ),
            // It closes, but the record has the wrong number of fields.
            (
                b"id,v\na,\"x\nb\",1,2\nc,3\n",
                1 << 20,
                &[
                    (
                        2,
                        2,
                        Rejected("(read through line 3, it has 4 fields, not 2)"),
                    ),
                    (3, 3, Rejected("a quote inside an unquoted field")),
                    (4, 4, Written("c")),
                ],
            ),
            // Right field count, bad value: one record over both lines.
            (
                b"id,v\na,\"1\n2\"\nb,3\n",
                1 << 20,
                &[
                    (2, 3, Rejected("field `v`: `1\\u{a}2` is not a number")),
                    (4, 4, Written("b")),
                ],
            ),
            // It would grow past the limit.
            (
                b"id,v\na,\"1\nb,1\nc,2\nd,3\ne,4\nf,5\ng,6\nh,7\ni,8\n",
                24,
                &[
                    (
                        2,
                        2,
                        Rejected("(it would make a record longer than 24 bytes)"),
                    ),
                    (3, 3, Written("b")),
                    (4, 4, Written("c")),
                    (5, 5, Written("d")),
                    (6, 6, Written("e")),
                    (7, 7, Written("f")),
                    (8, 8, Written("g")),
                    (9, 9, Written("h")),
                    (10, 10, Written("i")),
                ],
            ),
            // A continuation line that is not UTF-8.
            (
                b"id,v\na,\"1\nb\xff\"\nc,3",
                1 << 20,
                &[
                    (2, 2, Rejected("(line 3 is not valid UTF-8)")),
                    (3, 3, Rejected("not valid UTF-8 at byte 2 of the line")),
                    (4, 4, Written("c")),
                ],
            ),
            // A continuation line that is too long on its own.
            (
                b"id,v\na,\"1\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\nc,3\n",
                16,
                &[
                    (2, 2, Rejected("longer than 16 bytes")),
                    (3, 3, Rejected("line is longer than 16 bytes")),
                    (4, 4, Written("c")),
                ],
            ),
            // Each of several broken records loses one line.
            (
                b"id,v\n\"a\nb,1\n\"c\nd,2\n",
                1 << 20,
                &[
                    (2, 2, Rejected(UNTERMINATED)),
                    (3, 3, Written("b")),
                    (4, 4, Rejected(UNTERMINATED)),
                    (5, 5, Written("d")),
                ],
            ),
            // A key with a line break, CRLF line ends kept inside the field.
            (
                b"id,v\r\n\"a\r\nb\",1\r\n\r\nc,2\r\n",
                1 << 20,
                &[(2, 3, Written("a\r\nb")), (5, 5, Written("c"))],
            ),
        ];
        for (input, max, want) in cases {
            let records = read_all(&e, input, Format::Csv, *max);
            assert_fates(&records, want);
        }
        let records = read_all(&e, b"id,v\r\n\"a\r\nb\",1\r\n", Format::Csv, 64);
        assert_eq!(records[0].raw, b"\"a\r\nb\",1");
    }

    #[test]
    fn csv_headers_are_checked() {
        let e = entity("E");
        let err = |input: &[u8]| {
            reader(&e, input, Format::Csv, 64)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(b"id,colour\na,red\n"),
            "CSV column `colour` is not a field of entity `E`"
        );
        assert_eq!(
            err(b"id,\x1b[2Jcolour\n"),
            "CSV column `\\u{1b}[2Jcolour` is not a field of entity `E`"
        );
        assert_eq!(
            err(b"id,v,id\n"),
            "CSV column `id` appears more than once in the header"
        );
        for empty in [&b""[..], b"\n", b"  \r\n\n"] {
            assert_eq!(
                err(empty),
                "the file is empty; a CSV file starts with a header row"
            );
        }
        assert_eq!(
            err(b"id,\xffv\n"),
            "the CSV header (line 1) is not valid UTF-8 at byte 4"
        );
        assert_eq!(
            err(b"\nid,\"v\n"),
            "the CSV header (line 2) cannot be read: a quoted column name never closes"
        );
        assert_eq!(
            err(&[b"id,".repeat(30).as_slice(), b"\n"].concat()),
            "the CSV header (line 1) is longer than 64 bytes"
        );
        // Quoted names, a byte order mark, and columns in any order (or left out).
        let records = read_all(&e, b"\xEF\xBB\xBF\"v\",id\n2,a\n", Format::Csv, 64);
        assert_fates(&records, &[(2, 2, Written("a"))]);
        let (_, row) = records[0].parsed.as_ref().unwrap();
        assert_eq!(row.columns[2], Value::Float(2.0));
        assert_eq!(row.event_time, NOW);
        // A header alone is no records.
        assert!(read_all(&e, b"id,v", Format::Csv, 64).is_empty());
    }

    #[test]
    fn csv_fields_round_trip() {
        // Random fields with commas, quotes and line breaks, written as RFC 4180
        // says, come back as they were.
        let e = entity("S");
        let alphabet = ["a", "b", ",", "\"", "\n", "\r\n", " ", "é", "|"];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut input = b"k,a,b\n".to_vec();
        let mut want = Vec::new();
        for i in 0..500 {
            let mut row = vec![format!("key{i}")];
            for _ in 0..2 {
                let len = next(6);
                row.push((0..len).map(|_| alphabet[next(alphabet.len())]).collect());
            }
            let cells: Vec<String> = row
                .iter()
                .map(|c| {
                    if c.contains([',', '"', '\n', '\r']) || next(4) == 0 {
                        format!("\"{}\"", c.replace('"', "\"\""))
                    } else {
                        c.clone()
                    }
                })
                .collect();
            input.extend_from_slice(cells.join(",").as_bytes());
            input.extend_from_slice(if next(2) == 0 { b"\n" } else { b"\r\n" });
            want.push(row);
        }
        let records = read_all(&e, &input, Format::Csv, 1 << 20);
        assert_eq!(records.len(), want.len());
        let mut line = 2;
        for (record, row) in records.iter().zip(&want) {
            let (key, got) = record.parsed.as_ref().unwrap();
            assert_eq!(key.as_str(), row[0]);
            for (value, text) in [(&got.columns[2], &row[1]), (&got.columns[3], &row[2])] {
                if text.is_empty() {
                    assert!(value.is_null());
                } else {
                    assert_eq!(*value, Value::from(text.as_str()));
                }
            }
            let breaks = row
                .iter()
                .map(|c| c.matches('\n').count() as u64)
                .sum::<u64>();
            assert_eq!((record.first_line, record.last_line), (line, line + breaks));
            line += breaks + 1;
        }
    }

    #[test]
    fn formats_from_paths() {
        for (path, want) in [
            ("a.jsonl", Some(Format::JsonLines)),
            ("a.ndjson", Some(Format::JsonLines)),
            ("dir.v2/a.json", Some(Format::JsonLines)),
            ("A.CSV", Some(Format::Csv)),
            ("a.tsv", None),
            ("csv", None),
        ] {
            assert_eq!(Format::from_path(Path::new(path)), want, "{path}");
        }
    }

    /// Generates numbered lines on demand and counts how many it has handed out.
    struct Lazy {
        line: fn(u64) -> String,
        next: u64,
        total: u64,
        buf: Vec<u8>,
        pos: usize,
        produced: Rc<Cell<u64>>,
    }

    impl Read for Lazy {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = {
                let buf = self.fill_buf()?;
                let n = buf.len().min(out.len());
                out[..n].copy_from_slice(&buf[..n]);
                n
            };
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Lazy {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.pos == self.buf.len() && self.next < self.total {
                self.next += 1;
                self.buf = (self.line)(self.next).into_bytes();
                self.pos = 0;
                self.produced.set(self.next);
            }
            Ok(&self.buf[self.pos..])
        }

        fn consume(&mut self, n: usize) {
            self.pos += n;
        }
    }

    #[test]
    fn records_stream_one_at_a_time() {
        let e = entity("E");
        for (format, total, line) in [
            (
                Format::JsonLines,
                200_000,
                (|i| {
                    if i % 1000 == 0 {
                        format!("{{\"id\":\"k{i}\",\"v\":\"bad\"}}\n")
                    } else {
                        format!("{{\"id\":\"k{i}\",\"v\":{i}}}\n")
                    }
                }) as fn(u64) -> String,
            ),
            (Format::Csv, 50_000, |i| {
                if i == 1 {
                    "id,v\n".to_owned()
                } else if i % 1000 == 0 {
                    format!("k{i},bad\n")
                } else {
                    format!("k{i},{i}\n")
                }
            }),
        ] {
            let produced = Rc::new(Cell::new(0));
            let input = Lazy {
                line,
                next: 0,
                total,
                buf: Vec::new(),
                pos: 0,
                produced: Rc::clone(&produced),
            };
            let mut written = 0u64;
            let mut rejected = Vec::new();
            for record in reader(&e, input, format, 1 << 20).unwrap() {
                let record = record.unwrap();
                // Never more than the record's own line read ahead of it.
                assert_eq!(produced.get(), record.last_line);
                match record.parsed {
                    Ok((key, row)) => {
                        assert_eq!(key.as_str(), format!("k{}", record.first_line));
                        assert_eq!(row.columns[2], Value::Float(record.first_line as f64));
                        written += 1;
                    }
                    Err(_) => rejected.push(record.first_line),
                }
            }
            let header = u64::from(format == Format::Csv);
            assert_eq!(rejected.len() as u64, total / 1000);
            assert!(rejected.iter().all(|l| l % 1000 == 0));
            assert_eq!(written + rejected.len() as u64 + header, total);
        }
    }

    #[test]
    fn an_overlong_line_is_skipped_without_buffering_it() {
        // A 3 MiB line (delivered lazily, so the test itself holds little) under
        // the default 1 MiB limit, then a good line.
        let e = entity("E");
        let produced = Rc::new(Cell::new(0));
        let input = Lazy {
            line: |i| {
                if i <= 48 {
                    "x".repeat(64 * 1024)
                } else if i == 49 {
                    "\n".to_owned()
                } else {
                    "{\"id\":\"after\"}".to_owned()
                }
            },
            next: 0,
            total: 50,
            buf: Vec::new(),
            pos: 0,
            produced,
        };
        let records: Vec<Record> = RecordReader::new(
            input,
            Format::JsonLines,
            RecordParser::new(&e, NOW, &TimeBounds::default()),
            ReaderLimits::default(),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
        assert_fates(
            &records,
            &[
                (1, 1, Rejected("line is longer than 1048576 bytes")),
                (2, 2, Written("after")),
            ],
        );
        assert_eq!(records[0].raw.len(), 1 << 20);
        assert!(records[0].raw.capacity() <= (1 << 21) + 1);
    }

    /// Fails after its data runs out.
    struct Failing(Cursor<Vec<u8>>);

    impl Read for Failing {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.0.read(out)
        }
    }

    impl BufRead for Failing {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.0.position() as usize >= self.0.get_ref().len() {
                return Err(std::io::Error::other("disk on fire"));
            }
            self.0.fill_buf()
        }

        fn consume(&mut self, n: usize) {
            self.0.consume(n);
        }
    }

    #[test]
    fn io_errors_end_the_iteration() {
        let e = entity("E");
        let input = Failing(Cursor::new(b"{\"id\":\"a\"}\n{\"id\":\"b\"}\n".to_vec()));
        let mut records = reader(&e, input, Format::JsonLines, 64).unwrap();
        assert!(records.next().unwrap().unwrap().parsed.is_ok());
        assert!(records.next().unwrap().unwrap().parsed.is_ok());
        assert_eq!(
            records.next().unwrap().unwrap_err().to_string(),
            "reading line 3 failed: disk on fire"
        );
        assert!(records.next().is_none());
        assert_eq!(records.lines_read(), 2);
    }
}
