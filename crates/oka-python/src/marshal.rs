//! The subset of CPython's `marshal` format the protocol uses (the format of
//! `Python/marshal.c`, readable by every CPython since 3.4, stdlib only, decoded
//! and encoded in C on the worker's side).
//!
//! [`Writer`] writes what the server sends: `None`, bools, ints (`i`, and `l`
//! past 32 bits), floats (`g`), strings (`u`, or interned short ASCII `Z` for
//! names, written once per frame and referred to after: `r`), lists, tuples and
//! dicts. [`Reader`] reads what a worker sends: `marshal.dumps(…, 2)`, which has
//! no references, with the same types.

use std::collections::HashMap;

use oka_core::Value;

/// `None`.
pub const NONE: u8 = b'N';
/// `False`.
pub const FALSE: u8 = b'F';
/// `True`.
pub const TRUE: u8 = b'T';
/// An int within 32 bits.
pub const INT: u8 = b'i';
/// A longer int.
pub const LONG: u8 = b'l';
/// A float.
pub const BINARY_FLOAT: u8 = b'g';
/// A string.
pub const UNICODE: u8 = b'u';
/// `bytes`.
const BYTES: u8 = b's';
const SHORT_ASCII_INTERNED: u8 = b'Z';
const REF: u8 = b'r';
/// A tuple.
pub const TUPLE: u8 = b'(';
/// A list.
pub const LIST: u8 = b'[';
const DICT: u8 = b'{';
const NULL: u8 = b'0';
const FLAG_REF: u8 = 0x80;
/// Names a writer looks up in order before it hashes.
const FEW_NAMES: usize = 16;

/// Writes marshal data into a buffer.
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
    /// Names written with a reference flag, by their text's address and length:
    /// the reference index of each. The first few are looked up in order (a
    /// frame has the columns of an entity or two), the rest by hash.
    few: Vec<((usize, usize), u32)>,
    names: HashMap<(usize, usize), u32>,
    refs: u32,
}

impl<'a> Writer<'a> {
    /// A writer appending to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Self {
            out,
            few: Vec::new(),
            names: HashMap::new(),
            refs: 0,
        }
    }

    /// `None`.
    pub fn none(&mut self) {
        self.out.push(NONE);
    }

    /// A bool.
    pub fn bool(&mut self, b: bool) {
        self.out.push(if b { TRUE } else { FALSE });
    }

    /// An int: `i` within 32 bits, else `l` (15-bit digits, least first).
    pub fn int(&mut self, i: i64) {
        if let Ok(small) = i32::try_from(i) {
            self.out.push(INT);
            self.out.extend_from_slice(&small.to_le_bytes());
            return;
        }
        let mut magnitude = i.unsigned_abs();
        let mut digits = Vec::with_capacity(5);
        while magnitude > 0 {
            digits.push((magnitude & 0x7fff) as u16);
            magnitude >>= 15;
        }
        let n = digits.len() as i32;
        self.out.push(LONG);
        self.out
            .extend_from_slice(&(if i < 0 { -n } else { n }).to_le_bytes());
        for d in digits {
            self.out.extend_from_slice(&d.to_le_bytes());
        }
    }

    /// A float.
    pub fn float(&mut self, f: f64) {
        self.out.push(BINARY_FLOAT);
        self.out.extend_from_slice(&f.to_le_bytes());
    }

    /// A string.
    pub fn str(&mut self, s: &str) {
        self.out.push(UNICODE);
        self.len(s.len());
        self.out.extend_from_slice(s.as_bytes());
    }

    /// Bytes (Python's `bytes`).
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.push(BYTES);
        self.len(b.len());
        self.out.extend_from_slice(b);
    }

    /// A name (a dict key, a column): interned, written once per frame and then
    /// referred to, so the worker builds each distinct name once. `s` must live
    /// as long as the writer (its address identifies it).
    pub fn name(&mut self, s: &'a str) {
        let id = (s.as_ptr() as usize, s.len());
        let known = match self.few.iter().find(|(n, _)| *n == id) {
            Some((_, r)) => Some(*r),
            None if self.few.len() == FEW_NAMES => self.names.get(&id).copied(),
            None => None,
        };
        if let Some(r) = known {
            self.out.push(REF);
            self.out.extend_from_slice(&r.to_le_bytes());
            return;
        }
        if s.len() <= 255 && s.is_ascii() {
            self.out.push(SHORT_ASCII_INTERNED | FLAG_REF);
            self.out.push(s.len() as u8);
            self.out.extend_from_slice(s.as_bytes());
            if self.few.len() < FEW_NAMES {
                self.few.push((id, self.refs));
            } else {
                self.names.insert(id, self.refs);
            }
            self.refs += 1;
        } else {
            self.str(s);
        }
    }

    /// The start of a list of `n` items.
    pub fn list(&mut self, n: usize) {
        self.out.push(LIST);
        self.len(n);
    }

    /// The start of a tuple of `n` items.
    pub fn tuple(&mut self, n: usize) {
        self.out.push(TUPLE);
        self.len(n);
    }

    /// The start of a dict: then key, value, key, value, …, [`Self::dict_end`].
    pub fn dict(&mut self) {
        self.out.push(DICT);
    }

    /// The end of a dict.
    pub fn dict_end(&mut self) {
        self.out.push(NULL);
    }

    /// A value; a timestamp as its microseconds since the epoch (the worker
    /// knows which columns are timestamps and makes datetimes of them).
    pub fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.none(),
            Value::Bool(b) => self.bool(*b),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => self.float(*f),
            Value::String(s) => self.str(s),
            Value::Timestamp(t) => self.int(t.0),
            Value::List(items) => {
                self.list(items.len());
                for item in items.iter() {
                    self.value(item);
                }
            }
        }
    }

    fn len(&mut self, n: usize) {
        // Frames are far below 2 GiB (the protocol's limit is checked by the
        // caller), so a length always fits.
        self.out
            .extend_from_slice(&(i32::try_from(n).unwrap_or(i32::MAX)).to_le_bytes());
    }
}

/// Why marshal data could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The data ended inside a value.
    #[error("the data ends inside a value")]
    Truncated,
    /// A type this protocol does not use.
    #[error("unexpected marshal type {0:#04x}")]
    Type(u8),
    /// A length or count below zero.
    #[error("a negative length")]
    Negative,
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("values nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// How deep values may nest (declared types nest two or three levels).
pub const MAX_DEPTH: usize = 32;

/// A value as marshal gives it (worker → server).
#[derive(Debug, Clone, PartialEq)]
pub enum Obj {
    /// `None`.
    None,
    /// A bool.
    Bool(bool),
    /// An int within 64 bits.
    Int(i64),
    /// An int past 64 bits (not kept).
    BigInt,
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A string that is not valid UTF-8 (a lone surrogate), by its length.
    BadStr(usize),
    /// A list or tuple.
    List(Vec<Obj>),
    /// A dict, as pairs.
    Dict(Vec<(Obj, Obj)>),
}

impl Obj {
    /// The int, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if this is a list or tuple.
    pub fn as_list(&self) -> Option<&[Obj]> {
        match self {
            Self::List(items) => Some(items),
            _ => None,
        }
    }
}

/// Reads marshal data from a slice.
#[derive(Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    /// How many bytes are left to read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    /// The next value.
    pub fn obj(&mut self) -> Result<Obj, ReadError> {
        self.obj_at(0)
    }

    /// The type of the next value, without reading it.
    pub fn peek(&self) -> Result<u8, ReadError> {
        self.data.get(self.at).copied().ok_or(ReadError::Truncated)
    }

    /// The length of the next value, a tuple or list (its items follow).
    pub fn seq(&mut self) -> Result<usize, ReadError> {
        match self.byte()? {
            TUPLE | LIST => {
                let n = self.len()?;
                if n > self.remaining() {
                    return Err(ReadError::Truncated);
                }
                Ok(n)
            }
            other => Err(ReadError::Type(other)),
        }
    }

    /// The next value, an int: `None` past 64 bits.
    pub fn int(&mut self) -> Result<Option<i64>, ReadError> {
        match self.byte()? {
            INT => Ok(Some(i64::from(i32::from_le_bytes(self.array()?)))),
            LONG => Ok(self.long()?.as_int()),
            other => Err(ReadError::Type(other)),
        }
    }

    /// The next value, a float.
    pub fn float(&mut self) -> Result<f64, ReadError> {
        match self.byte()? {
            BINARY_FLOAT => Ok(f64::from_le_bytes(self.array()?)),
            other => Err(ReadError::Type(other)),
        }
    }

    /// The next value, a string: its text, or its length when it is not
    /// valid UTF-8.
    pub fn str(&mut self) -> Result<Result<&'a str, usize>, ReadError> {
        match self.byte()? {
            UNICODE => {
                let n = self.len()?;
                let bytes = self.take(n)?;
                Ok(std::str::from_utf8(bytes).map_err(|_| n))
            }
            other => Err(ReadError::Type(other)),
        }
    }

    /// The next value, a string or `None`.
    pub fn opt_str(&mut self) -> Result<Option<&'a str>, ReadError> {
        if self.peek()? == NONE {
            self.at += 1;
            return Ok(None);
        }
        Ok(self.str()?.ok())
    }

    fn obj_at(&mut self, depth: usize) -> Result<Obj, ReadError> {
        if depth > MAX_DEPTH {
            return Err(ReadError::TooDeep);
        }
        let ty = self.byte()?;
        if ty & FLAG_REF != 0 {
            return Err(ReadError::Type(ty));
        }
        Ok(match ty {
            NONE => Obj::None,
            FALSE => Obj::Bool(false),
            TRUE => Obj::Bool(true),
            INT => Obj::Int(i64::from(i32::from_le_bytes(self.array()?))),
            LONG => self.long()?,
            BINARY_FLOAT => Obj::Float(f64::from_le_bytes(self.array()?)),
            UNICODE => {
                let n = self.len()?;
                let bytes = self.take(n)?;
                match std::str::from_utf8(bytes) {
                    Ok(s) => Obj::Str(s.to_owned()),
                    Err(_) => Obj::BadStr(n),
                }
            }
            TUPLE | LIST => {
                let n = self.len()?;
                // Each item takes at least a byte: a count past the data is a lie.
                if n > self.data.len() - self.at {
                    return Err(ReadError::Truncated);
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.obj_at(depth + 1)?);
                }
                Obj::List(items)
            }
            DICT => {
                let mut pairs = Vec::new();
                loop {
                    if self.peek()? == NULL {
                        self.at += 1;
                        break;
                    }
                    let k = self.obj_at(depth + 1)?;
                    let v = self.obj_at(depth + 1)?;
                    pairs.push((k, v));
                }
                Obj::Dict(pairs)
            }
            other => return Err(ReadError::Type(other)),
        })
    }

    /// `l`: a sign-carrying digit count, then 15-bit digits, least first.
    fn long(&mut self) -> Result<Obj, ReadError> {
        let n = i32::from_le_bytes(self.array()?);
        let digits = n.unsigned_abs() as usize;
        let mut magnitude: u128 = 0;
        let mut big = false;
        for i in 0..digits {
            let d = u16::from_le_bytes(self.array()?);
            if i >= 8 {
                big |= d != 0;
            } else {
                magnitude |= u128::from(d & 0x7fff) << (15 * i);
            }
        }
        let value = if n < 0 {
            (magnitude <= i64::MIN.unsigned_abs().into())
                .then(|| (magnitude as i128).wrapping_neg())
        } else {
            (magnitude <= i64::MAX as u128).then_some(magnitude as i128)
        };
        Ok(match value {
            Some(v) if !big => Obj::Int(v as i64),
            _ => Obj::BigInt,
        })
    }

    fn len(&mut self) -> Result<usize, ReadError> {
        usize::try_from(i32::from_le_bytes(self.array()?)).map_err(|_| ReadError::Negative)
    }

    fn byte(&mut self) -> Result<u8, ReadError> {
        let b = self.peek()?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self.at.checked_add(n).ok_or(ReadError::Truncated)?;
        let bytes = self.data.get(self.at..end).ok_or(ReadError::Truncated)?;
        self.at = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut Writer::new(&mut out));
        out
    }

    #[test]
    fn ints_round_trip_through_both_encodings() {
        for i in [
            0,
            1,
            -1,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::from(i32::MAX) + 1,
            i64::from(i32::MIN) - 1,
            1 << 45,
            -(1 << 45),
            i64::MAX,
            i64::MIN,
        ] {
            let bytes = write(|w| w.int(i));
            assert_eq!(Reader::new(&bytes).obj(), Ok(Obj::Int(i)), "{i}");
        }
    }

    #[test]
    fn an_int_past_64_bits_is_big() {
        // 2**64 as marshal writes it: five 15-bit digits.
        let mut bytes = vec![LONG];
        bytes.extend_from_slice(&5i32.to_le_bytes());
        for d in [0u16, 0, 0, 0, 16] {
            bytes.extend_from_slice(&d.to_le_bytes());
        }
        assert_eq!(Reader::new(&bytes).obj(), Ok(Obj::BigInt));
    }

    #[test]
    fn strings_floats_and_containers_read_back() {
        let bytes = write(|w| {
            w.list(4);
            w.str("naïve");
            w.float(-2.5);
            w.none();
            w.tuple(1);
            w.bool(true);
        });
        assert_eq!(
            Reader::new(&bytes).obj(),
            Ok(Obj::List(vec![
                Obj::Str("naïve".into()),
                Obj::Float(-2.5),
                Obj::None,
                Obj::List(vec![Obj::Bool(true)]),
            ]))
        );
    }

    #[test]
    fn a_name_is_written_once_then_referred_to() {
        let name = String::from("value");
        let mut bytes = Vec::new();
        let mut w = Writer::new(&mut bytes);
        w.name(&name);
        w.name(&name);
        assert_eq!(bytes[0], SHORT_ASCII_INTERNED | FLAG_REF);
        assert_eq!(&bytes[7..], &[REF, 0, 0, 0, 0]);
    }

    #[test]
    fn hostile_data_is_an_error_not_a_panic_or_a_huge_allocation() {
        let mut lie = vec![LIST];
        lie.extend_from_slice(&i32::MAX.to_le_bytes());
        assert_eq!(Reader::new(&lie).obj(), Err(ReadError::Truncated));
        let mut negative = vec![UNICODE];
        negative.extend_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(Reader::new(&negative).obj(), Err(ReadError::Negative));
        let deep: Vec<u8> = std::iter::repeat_n([LIST, 1, 0, 0, 0], 100)
            .flatten()
            .collect();
        assert_eq!(Reader::new(&deep).obj(), Err(ReadError::TooDeep));
        assert_eq!(Reader::new(b"c").obj(), Err(ReadError::Type(b'c')));
        assert_eq!(Reader::new(&[UNICODE, 9]).obj(), Err(ReadError::Truncated));
        // A lone surrogate, as `surrogatepass` writes it.
        let mut bad = vec![UNICODE];
        bad.extend_from_slice(&3i32.to_le_bytes());
        bad.extend_from_slice(&[0xed, 0xa0, 0x80]);
        assert_eq!(Reader::new(&bad).obj(), Ok(Obj::BadStr(3)));
    }
}
