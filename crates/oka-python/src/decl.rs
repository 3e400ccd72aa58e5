//! The UDFs a pool runs: each declaration the spec loader hands over
//! ([`PythonDecl`]), with its module's source read once (so a replaced worker
//! runs the code the spec was loaded with), how it and its rows are written for
//! the worker, and its load problems in words.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use oka_core::batch::{PythonDecl, PythonStyle, UdfBatch};
use oka_core::udf::Input;
use oka_core::{Entity, FieldType, UdfError};

use crate::marshal::Writer;
use crate::protocol::{
    LoadProblem, MAX_FRAME_BYTES, MAX_ROW_BYTES, MAX_STR_CHARS, TRACEBACK_INTERVAL,
};

/// The largest module file Oka reads.
const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// A Feast on-demand view the pool runs (`style: feast`), from the registry
/// `oka serve --feast-repo` read: its worker rebuilds it with Feast's SDK.
#[derive(Debug, Clone)]
pub struct FeastView {
    /// The view's name (the UDF's `function`).
    pub name: String,
    /// The feature repository: on the workers' `sys.path`, as it is under
    /// `feast serve` (a transformation pickled by reference imports from it).
    pub repo: PathBuf,
    /// The view's message in the registry, byte for byte.
    pub proto: Arc<[u8]>,
    /// The features it reads of each source view (its join keys come too).
    pub reads: Vec<(String, Vec<String>)>,
    /// Input columns (features, join keys, request fields) Oka holds other
    /// than as Feast gives them to Python: `bytes` and `list<bytes>` (base64
    /// strings in Oka).
    pub kinds_in: Vec<(String, &'static str)>,
    /// Output columns Feast narrows: `float32`, `list<float32>`, `bytes` and
    /// `list<bytes>` (Oka keeps bytes as base64).
    pub kinds_out: Vec<(String, &'static str)>,
    /// A view with `write_to_online_store=True`: run on what is written to it
    /// ([`PythonRuntime::declare_write`](crate::PythonRuntime::declare_write)),
    /// not on reads.
    pub on_write: bool,
}

/// One Python UDF as the pool runs it.
#[derive(Debug)]
pub struct UdfEntry {
    decl: PythonDecl,
    /// A Feast on-demand view's (`style: feast`).
    feast: Option<FeastView>,
    /// `file.py:function`.
    label: String,
    /// The module's file, absolute.
    path: PathBuf,
    /// Its module name (the file's stem).
    module: String,
    /// The module's source, read at load.
    source: Arc<str>,
    memory_mib: u64,
}

oka_core::described_error! {
    /// Why a declaration was refused.
    pub struct DeclError;
}

impl UdfEntry {
    /// Reads `decl`'s module (for a Feast view, finds it in `feast`).
    pub fn new(decl: PythonDecl, memory_mib: u64, feast: &[FeastView]) -> Result<Self, DeclError> {
        if decl.style == PythonStyle::Feast {
            return Self::feast(decl, memory_mib, feast);
        }
        let shown = decl.file.display().to_string();
        let path = std::fs::canonicalize(&decl.file).map_err(|e| {
            DeclError::new(format!(
                "cannot read the Python file {shown}: {} (the path is relative to the spec's folder)",
                oka_core::words::io_reason(&e)
            ))
        })?;
        let source = read_source(&path, &shown)?;
        let module = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file_name = path
            .file_name()
            .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
        Ok(Self {
            label: format!("{file_name}:{}", decl.function),
            path,
            module,
            source: source.into(),
            memory_mib,
            decl,
            feast: None,
        })
    }

    /// A Feast on-demand view, from the registry the server read.
    fn feast(decl: PythonDecl, memory_mib: u64, feast: &[FeastView]) -> Result<Self, DeclError> {
        let Some(view) = feast.iter().find(|v| v.name == decl.function) else {
            return Err(DeclError::new(format!(
                "`{}` is a Feast on-demand view (style: feast), run from the Feast repository of {}: serve it with `oka serve --feast-repo DIR`",
                decl.function,
                decl.file.display()
            )));
        };
        Ok(Self {
            label: format!("Feast on-demand view {}", view.name),
            path: view.repo.clone(),
            module: String::new(),
            source: "".into(),
            memory_mib,
            feast: Some(view.clone()),
            decl,
        })
    }

    /// Its declaration.
    pub fn decl(&self) -> &PythonDecl {
        &self.decl
    }

    /// The Feast view it runs, for `style: feast`.
    pub fn feast_view(&self) -> Option<&FeastView> {
        self.feast.as_ref()
    }

    /// The module's source, as read at load.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The module's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The feature.
    pub fn feature(&self) -> &str {
        &self.decl.feature
    }

    /// `file.py:function`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The place of the UDF in the spec, `features.NAME.udf.python`, with the
    /// spec file.
    pub fn spec_place(&self) -> (&str, &str) {
        (&self.decl.origin, &self.decl.path)
    }

    /// How long one key's call may run.
    pub fn timeout(&self) -> Duration {
        self.decl.timeout
    }

    /// The output entity.
    pub fn output(&self) -> &Entity {
        &self.decl.output
    }

    /// Each worker's memory limit.
    pub fn memory_mib(&self) -> u64 {
        self.memory_mib
    }

    /// A key's error for an answer the worker should not have sent.
    pub fn worker_fault(&self, what: &str) -> UdfError {
        UdfError::failed(format!(
            "the Python worker running `{}` ({}) sent {what}",
            self.decl.feature, self.label
        ))
    }

    /// This UDF in the `load` message: `(path, module, source, function, inputs,
    /// args, outputs, style, feast)`; for a Feast view, `path` is the
    /// repository, `source` the view's message (bytes) and `feast` what the
    /// worker needs beside it ([`Self::write_feast`]), else None.
    pub fn write_load<'a>(&'a self, w: &mut Writer<'a>) {
        w.tuple(9);
        w.str(&self.path.to_string_lossy());
        w.str(&self.module);
        match &self.feast {
            Some(view) => w.bytes(&view.proto),
            None => w.str(&self.source),
        }
        w.str(&self.decl.function);
        w.list(self.decl.inputs.len());
        for input in &self.decl.inputs {
            w.tuple(3);
            w.str(&input.name);
            let stamps: Vec<_> = (input.entity.columns.iter())
                .filter(|c| is_timestamps(&c.ty))
                .collect();
            w.list(stamps.len());
            for c in stamps {
                w.tuple(2);
                w.str(&c.name);
                w.bool(matches!(c.ty, FieldType::List(_)));
            }
            w.bool(input.many);
        }
        w.list(self.decl.args.len());
        for a in &self.decl.args {
            w.tuple(2);
            w.str(&a.name);
            w.str(&a.ty.to_string());
        }
        let out = &self.decl.output;
        w.list(out.columns.len());
        for (i, c) in out.columns.iter().enumerate() {
            w.tuple(3);
            w.str(&c.name);
            w.str(&c.ty.to_string());
            w.bool(out.key_index.contains(&i) || i == out.timestamp_index);
        }
        match &self.feast {
            Some(view) if view.on_write => w.str("feast_write"),
            _ => w.str(self.decl.style.name()),
        }
        match &self.feast {
            Some(view) => self.write_feast(w, view),
            None => w.none(),
        }
    }

    /// A Feast view's part of the `load` message: `(take, kinds_in,
    /// kinds_out)`, `take` per input the columns given to the view (its join
    /// keys and the features it reads of it).
    fn write_feast(&self, w: &mut Writer<'_>, view: &FeastView) {
        w.tuple(3);
        w.list(self.decl.inputs.len());
        for input in &self.decl.inputs {
            let entity = &input.entity;
            let read = view.reads.iter().find(|(v, _)| **v == *input.name);
            let take: Vec<&str> = (entity.columns.iter().enumerate())
                .filter(|(i, c)| {
                    entity.key_index.contains(i)
                        || match read {
                            Some((_, fs)) if !fs.is_empty() => fs.iter().any(|f| **f == *c.name),
                            _ => *i != entity.timestamp_index,
                        }
                })
                .map(|(_, c)| &*c.name)
                .collect();
            w.list(take.len());
            for name in take {
                w.str(name);
            }
        }
        for kinds in [&view.kinds_in, &view.kinds_out] {
            w.dict();
            for (name, kind) in kinds {
                w.str(name);
                w.str(kind);
            }
            w.dict_end();
        }
    }

    /// One call's part of a batch frame: the UDF's number, its arguments (a
    /// dict) and a tuple of inputs per key in `keys` (indices into
    /// `batch.keys`).
    pub fn write_call<'a>(
        &'a self,
        w: &mut Writer<'a>,
        index: usize,
        batch: &'a UdfBatch,
        keys: impl ExactSizeIterator<Item = usize>,
    ) {
        w.int(index as i64);
        w.dict();
        for (a, v) in self.decl.args.iter().zip(&batch.args) {
            w.name(&a.name);
            w.value(v);
        }
        w.dict_end();
        w.list(keys.len());
        for k in keys {
            let inputs = batch.inputs(k);
            w.tuple(inputs.len());
            for (input, decl) in inputs.iter().zip(&self.decl.inputs) {
                match input {
                    Input::One(row) => write_record(w, &decl.entity, row),
                    Input::Many(rows) => {
                        w.list(rows.len());
                        for row in rows.iter() {
                            write_record(w, &decl.entity, row);
                        }
                    }
                }
            }
        }
    }
}

/// A record as a dict of its columns.
fn write_record<'a>(w: &mut Writer<'a>, entity: &'a Entity, row: &'a oka_core::Row) {
    w.dict();
    for (c, v) in entity.columns.iter().zip(row.columns.iter()) {
        w.name(&c.name);
        w.value(v);
    }
    w.dict_end();
}

/// Whether a column holds timestamps (the worker makes datetimes of them).
fn is_timestamps(ty: &FieldType) -> bool {
    matches!(ty, FieldType::Timestamp)
        || matches!(ty, FieldType::List(inner) if **inner == FieldType::Timestamp)
}

/// A module's source, bounded, as UTF-8 (`shown`: its path as the spec gives it).
fn read_source(path: &Path, shown: &str) -> Result<String, DeclError> {
    use std::io::Read;
    let refused = |why: String| DeclError::new(format!("{shown}: {why}"));
    let file = std::fs::File::open(path).map_err(|e| refused(oka_core::words::io_reason(&e)))?;
    let mut text = String::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| {
            refused(match e.kind() {
                std::io::ErrorKind::InvalidData => "the file is not UTF-8 text".to_owned(),
                _ => oka_core::words::io_reason(&e),
            })
        })?;
    if text.len() as u64 > MAX_SOURCE_BYTES {
        return Err(refused(format!(
            "the file is over {} MiB; a UDF module is source code",
            MAX_SOURCE_BYTES >> 20
        )));
    }
    Ok(text)
}

/// Writes the `load` message: the limits and where the stand-in for Volga's
/// API is, then each UDF as the worker loads it.
pub fn load_message(udfs: &[UdfEntry], memory_mib: u64, volga_shim: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.tuple(3);
    w.str("load");
    w.dict();
    for (k, v) in [
        ("max_str_chars", MAX_STR_CHARS as i64),
        ("max_row_bytes", MAX_ROW_BYTES as i64),
        ("max_frame_bytes", MAX_FRAME_BYTES as i64),
        (
            "traceback_interval_ns",
            TRACEBACK_INTERVAL.as_nanos() as i64,
        ),
        ("memory_mib", memory_mib as i64),
    ] {
        w.str(k);
        w.int(v);
    }
    w.str("volga_shim");
    w.str(&volga_shim.to_string_lossy());
    w.dict_end();
    w.list(udfs.len());
    for u in udfs {
        u.write_load(&mut w);
    }
    out
}

/// Load problems in words, one line each: the spec's place, then Python's
/// (`file:line`) and message; one line for a problem several UDFs share.
pub fn describe_problems(udfs: &[UdfEntry], problems: &[LoadProblem]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut seen: Vec<(&str, Option<u32>, &str)> = Vec::new();
    for p in problems {
        if seen.contains(&(p.file.as_str(), p.line, p.message.as_str())) {
            continue;
        }
        seen.push((&p.file, p.line, &p.message));
        let place = match p.line {
            Some(line) => format!("{}:{line}", p.file),
            None => p.file.clone(),
        };
        lines.push(match udfs.get(p.udf) {
            Some(u) => {
                let (origin, path) = u.spec_place();
                format!("{origin}: {path}: {place}: {}", p.message)
            }
            None => format!("{place}: {}", p.message),
        });
    }
    lines.join("\n")
}
