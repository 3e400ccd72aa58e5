//! The CSV splitter: RFC 4180 fields of one record, fed a line at a time so that a
//! quoted field may span lines.

/// Where the CSV splitter is within a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// At the start of a field.
    #[default]
    FieldStart,
    /// Inside a field that did not start with a quote.
    Unquoted,
    /// Inside a quoted field.
    Quoted,
    /// Just after a quote inside a quoted field: `""` or the closing quote.
    QuoteInQuoted,
}

/// Splits one CSV record, fed a line at a time, into its fields' text.
#[derive(Debug, Default)]
pub(super) struct Splitter {
    /// Every field's text, one after another.
    text: String,
    /// The end of each field in `text`.
    ends: Vec<usize>,
    state: State,
}

impl Splitter {
    pub(super) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.state = State::FieldStart;
    }

    /// Adds a line break to the open quoted field.
    pub(super) fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
    }

    /// Splits one line (without its line break): `Ok(true)` when the record is
    /// complete, `Ok(false)` when a quoted field is still open, an error for a
    /// malformed record.
    pub(super) fn feed(&mut self, line: &str) -> Result<bool, &'static str> {
        // Bytes from `start` up to the current position belong to the current field
        // and are copied in one go. Every byte the state machine acts on is ASCII,
        // so each slice boundary is a character boundary.
        let mut start = 0;
        for (i, b) in line.bytes().enumerate() {
            match (self.state, b) {
                (State::FieldStart, b'"') => {
                    self.state = State::Quoted;
                    start = i + 1;
                }
                (State::FieldStart, b',') => {
                    self.end_field();
                    start = i + 1;
                }
                (State::FieldStart, _) => {
                    self.state = State::Unquoted;
                    start = i;
                }
                (State::Unquoted, b',') => {
                    self.text.push_str(&line[start..i]);
                    self.end_field();
                    self.state = State::FieldStart;
                    start = i + 1;
                }
                (State::Unquoted, b'"') => {
                    return Err(
                        "a quote inside an unquoted field; quote the whole field and double the inner quotes",
                    );
                }
                (State::Quoted, b'"') => {
                    self.text.push_str(&line[start..i]);
                    self.state = State::QuoteInQuoted;
                }
                (State::QuoteInQuoted, b'"') => {
                    self.text.push('"');
                    self.state = State::Quoted;
                    start = i + 1;
                }
                (State::QuoteInQuoted, b',') => {
                    self.end_field();
                    self.state = State::FieldStart;
                    start = i + 1;
                }
                (State::QuoteInQuoted, _) => {
                    return Err(
                        "text after a closing quote; quote the whole field and double the inner quotes",
                    );
                }
                (State::Unquoted | State::Quoted, _) => {}
            }
        }
        match self.state {
            State::Quoted => {
                self.text.push_str(&line[start..]);
                Ok(false)
            }
            State::Unquoted => {
                self.text.push_str(&line[start..]);
                self.end_field();
                Ok(true)
            }
            State::FieldStart | State::QuoteInQuoted => {
                self.end_field();
                Ok(true)
            }
        }
    }

    fn end_field(&mut self) {
        self.ends.push(self.text.len());
    }

    /// The number of fields split.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The fields' text.
    pub(super) fn cells(&self) -> impl Iterator<Item = &str> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| self.text.get(start..end).unwrap_or_default())
    }
}
