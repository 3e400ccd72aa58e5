//! One worker process: started (`python worker.py`, its socket on descriptor
//! 0, what it prints to the server's log), greeted (protocol and Python
//! versions checked), loaded (every module imported, every function checked),
//! watched (its progress file) and killed.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, FileExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::protocol::{
    FrameError, FrameReader, Hello, LoadProblem, MIN_PYTHON, PROTOCOL, parse_loaded, write_frame,
};

/// How long a worker may take to start and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker may take to import the modules (numpy, a model, …).
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// Lines of a worker's output kept to explain a failed start.
const TAIL_LINES: usize = 20;
/// The longest line of a worker's output logged whole.
const MAX_LINE: usize = 4096;
/// Lines of output per worker logged per second, at most.
const LINES_PER_SECOND: u32 = 20;

/// What starts workers: the interpreter, the limits, the worker script.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The interpreter (`--python`).
    pub python: PathBuf,
    /// Each worker's memory limit in MiB (0: none).
    pub memory_mib: u64,
    /// `worker.py`, written into the runtime folder.
    pub script: PathBuf,
    /// The runtime folder (progress files).
    pub dir: PathBuf,
}

/// Why a worker did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The interpreter could not be run, or is not one Oka can use.
    #[error("{0}")]
    Interpreter(String),
    /// A module or function could not be loaded.
    #[error("the Python UDFs did not load")]
    Load(Vec<LoadProblem>),
}

/// A live worker process.
#[derive(Debug)]
pub struct Process {
    child: Child,
    /// The server's end of the socket (reads; writes go through `writer`).
    pub stream: UnixStream,
    /// The same socket, for whoever sends the next batch.
    pub writer: Arc<UnixStream>,
    /// Frames read so far.
    pub frames: FrameReader,
    progress: File,
    /// The row last seen running: its batch (when that was sent), its index,
    /// and when it was first seen.
    seen: Option<(Instant, usize, Instant)>,
    /// When it started.
    pub started: Instant,
    /// Its process id.
    pub pid: u32,
}

/// Where a worker was when it was looked at: the row of its batch it was
/// running, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The row's index in the batch; `None` outside a row.
    pub row: Option<usize>,
    /// When that row began.
    pub since: Instant,
}

impl Process {
    /// Starts worker `index`, greets it and loads it with `load` (the `load`
    /// message). `tail` keeps its last lines of output.
    pub fn start(launch: &Launch, index: usize, load: &[u8]) -> Result<Self, StartError> {
        let progress_path = launch.dir.join(format!("progress-{index}"));
        let mut init = Vec::with_capacity(16);
        init.extend_from_slice(&(-1i64).to_le_bytes());
        init.extend_from_slice(&0i64.to_le_bytes());
        std::fs::write(&progress_path, &init).map_err(|e| {
            interpreter(format!(
                "cannot write the worker's progress file {}: {}",
                progress_path.display(),
                oka_core::words::io_reason(&e)
            ))
        })?;
        let progress = File::open(&progress_path).map_err(|e| {
            interpreter(format!(
                "cannot read {}: {}",
                progress_path.display(),
                oka_core::words::io_reason(&e)
            ))
        })?;
        let (ours, theirs) = UnixStream::pair().map_err(|e| {
            interpreter(format!(
                "cannot make a socket pair: {}",
                oka_core::words::io_reason(&e)
            ))
        })?;
        let mut command = command(launch, &progress_path, theirs);
        let mut child = command.spawn().map_err(|e| {
            interpreter(format!(
                "cannot start the Python interpreter `{}`: {} (install CPython {}.{} or newer, or give --python /path/to/venv/bin/python)",
                launch.python.display(),
                oka_core::words::io_reason(&e),
                MIN_PYTHON.0,
                MIN_PYTHON.1
            ))
        })?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(err) = child.stderr.take() {
            forward_output(index, err, Arc::clone(&tail));
        }
        let writer = ours
            .try_clone()
            .map_err(|e| interpreter(oka_core::words::io_reason(&e)));
        let mut process = match writer {
            Ok(writer) => Self {
                child,
                stream: ours,
                writer: Arc::new(writer),
                frames: FrameReader::default(),
                progress,
                seen: None,
                started: Instant::now(),
                pid: 0,
            },
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        match process.greet(launch, load, &tail) {
            Ok(()) => Ok(process),
            Err(e) => {
                process.kill();
                Err(e)
            }
        }
    }

    /// The hello, the versions, the load and its answer.
    fn greet(
        &mut self,
        launch: &Launch,
        load: &[u8],
        tail: &Mutex<VecDeque<String>>,
    ) -> Result<(), StartError> {
        let python = launch.python.display();
        let frame = self.read_within(HELLO_TIMEOUT).map_err(|e| {
            self.failed_start(
                &format!("the Python worker ({python}) did not start: {e}"),
                tail,
            )
        })?;
        let hello = Hello::parse(&frame).map_err(|e| {
            self.failed_start(
                &format!("`{python}` did not start Oka's worker: it sent {e}"),
                tail,
            )
        })?;
        self.pid = u32::try_from(hello.pid).unwrap_or(0);
        let (major, minor, micro) = hello.python;
        if hello.protocol != PROTOCOL {
            return Err(interpreter(format!(
                "the Python worker speaks protocol {} and this oka speaks {PROTOCOL}: the worker script and the server come from different builds",
                hello.protocol
            )));
        }
        if (major, minor) < MIN_PYTHON {
            return Err(interpreter(format!(
                "`{python}` is Python {major}.{minor}.{micro}; Python UDFs need CPython {}.{} or newer (give --python the path of a newer one)",
                MIN_PYTHON.0, MIN_PYTHON.1
            )));
        }
        write_frame(&mut &*self.writer, load).map_err(|e| {
            self.failed_start(
                &format!("the Python worker ({python}) stopped at start: {e}"),
                tail,
            )
        })?;
        let frame = self.read_within(LOAD_TIMEOUT).map_err(|e| {
            self.failed_start(
                &format!(
                    "the Python worker ({python}) did not finish importing the UDF modules: {e}"
                ),
                tail,
            )
        })?;
        let problems = parse_loaded(&frame)
            .map_err(|e| interpreter(format!("the Python worker ({python}) sent {e}")))?;
        if !problems.is_empty() {
            return Err(StartError::Load(problems));
        }
        Ok(())
    }

    /// A start that failed, with what the worker printed last.
    fn failed_start(&mut self, what: &str, tail: &Mutex<VecDeque<String>>) -> StartError {
        let status = self.kill();
        // Its output may still be on its way to the forwarding thread.
        std::thread::sleep(Duration::from_millis(50));
        let lines: Vec<String> = tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        let mut message = format!("{what} ({})", describe_exit(status));
        if !lines.is_empty() {
            message.push_str("; it printed:\n  ");
            message.push_str(&lines.join("\n  "));
        }
        interpreter(message)
    }

    fn read_within(&mut self, limit: Duration) -> Result<Vec<u8>, FrameError> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FrameError::Io(std::io::ErrorKind::TimedOut.into()));
            }
            self.stream
                .set_read_timeout(Some(left.min(Duration::from_millis(250))))
                .map_err(FrameError::Io)?;
            match self.frames.read(&mut self.stream) {
                Err(FrameError::Waiting) => {
                    if let Ok(Some(_)) = self.child.try_wait() {
                        return Err(FrameError::Closed);
                    }
                }
                other => return other,
            }
        }
    }

    /// Where the worker is in the batch sent at `batch`: the row it runs (the
    /// worker writes its index into shared memory before each row) and since
    /// when, as first seen here (so at most a look's interval late).
    pub fn progress(&mut self, batch: Instant) -> Option<Progress> {
        let mut buf = [0u8; 8];
        self.progress.read_exact_at(&mut buf, 0).ok()?;
        let Ok(row) = usize::try_from(i64::from_le_bytes(buf)) else {
            return Some(Progress {
                row: None,
                since: batch,
            });
        };
        let since = match self.seen {
            Some((b, r, since)) if b == batch && r == row => since,
            _ => {
                let now = Instant::now();
                self.seen = Some((batch, row, now));
                now
            }
        };
        Some(Progress {
            row: Some(row),
            since,
        })
    }

    /// The row the worker was running when it ended, if any.
    pub fn last_row(&self) -> Option<usize> {
        let mut buf = [0u8; 8];
        self.progress.read_exact_at(&mut buf, 0).ok()?;
        usize::try_from(i64::from_le_bytes(buf)).ok()
    }

    /// Kills the worker (if it still runs) and reaps it: how it ended.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = self.child.kill();
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
        self.child.wait().ok()
    }

    /// Reaps a worker that closed its socket (it is exiting), waiting briefly;
    /// kills it if it does not exit.
    pub fn reap(&mut self) -> Option<ExitStatus> {
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill()
    }
}

/// The command that runs a worker: `python -u worker.py PROGRESS MEMORY_MIB`,
/// the socket as its standard input, its output to the server's log.
fn command(launch: &Launch, progress: &Path, socket: UnixStream) -> Command {
    let mut command = Command::new(&launch.python);
    command
        .arg("-u")
        .arg(&launch.script)
        .arg(progress)
        .arg(launch.memory_mib.to_string())
        .stdin(Stdio::from(OwnedFd::from(socket)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: a terminal's Ctrl-C goes to the server,
        // which stops its workers itself.
        .process_group(0);
    for (var, value) in [
        ("OPENBLAS_NUM_THREADS", "1"),
        ("OMP_NUM_THREADS", "1"),
        ("MKL_NUM_THREADS", "1"),
        ("MALLOC_ARENA_MAX", "2"),
    ] {
        if std::env::var_os(var).is_none() {
            command.env(var, value);
        }
    }
    command
}

fn interpreter(message: String) -> StartError {
    StartError::Interpreter(message)
}

/// How a worker ended, in words: `killed by signal 11 (SIGSEGV)`, `exited with
/// status 3`.
pub fn describe_exit(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "its exit status is unknown".to_owned();
    };
    if let Some(signal) = status.signal() {
        let name = match signal {
            1 => " (SIGHUP)",
            2 => " (SIGINT)",
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            13 => " (SIGPIPE)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("killed by signal {signal}{name}");
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_owned(),
    }
}

/// Logs what a worker prints (its stderr, where its stdout goes too), line by
/// line, at most [`LINES_PER_SECOND`] lines a second; keeps the last lines in
/// `tail`.
fn forward_output(
    index: usize,
    out: std::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let spawned = std::thread::Builder::new()
        .name(format!("oka-python-out-{index}"))
        .spawn(move || {
            let mut reader = BufReader::new(out);
            let mut line = Vec::new();
            let mut window = (Instant::now(), 0u32, 0u64);
            loop {
                line.clear();
                match reader.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                if let Ok(mut t) = tail.lock() {
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(text.clone());
                }
                if window.0.elapsed() >= Duration::from_secs(1) {
                    if window.2 > 0 {
                        warn!(worker = index, dropped = window.2, "python worker output: lines dropped (more than {LINES_PER_SECOND} a second)");
                    }
                    window = (Instant::now(), 0, 0);
                }
                if window.1 < LINES_PER_SECOND {
                    window.1 += 1;
                    info!(target: "oka_python::worker", worker = index, "{text}");
                } else {
                    window.2 += 1;
                }
            }
        });
    if let Err(e) = spawned {
        warn!(error = %oka_core::words::io_reason(&e), "cannot start the thread that logs a Python worker's output");
    }
}

/// The worker script's name in the runtime folder.
pub const WORKER_SCRIPT: &str = "oka_worker.py";

/// Where the stand-in for Volga's API is, in the runtime folder.
pub const VOLGA_SHIM: &str = "volga_shim";

/// The runtime folder: a private folder for the worker script, the stand-in
/// for Volga's API and the progress files, removed when the pool stops.
#[derive(Debug)]
pub struct RuntimeDir(pub PathBuf);

impl RuntimeDir {
    /// Makes the folder and writes `files` (a path inside it, and the text)
    /// into it.
    pub fn create(files: &[(&str, &str)]) -> Result<Self, StartError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // A folder of our own: created here (never one that already exists,
        // which someone else could have made), readable by us alone.
        let mut dir = std::env::temp_dir();
        let mut made = Err(std::io::ErrorKind::AlreadyExists.into());
        for _ in 0..64 {
            dir = std::env::temp_dir().join(format!(
                "oka-python-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            made = std::fs::DirBuilder::new().mode(0o700).create(&dir);
            if !matches!(&made, Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists) {
                break;
            }
        }
        let failed = |dir: &Path, e: std::io::Error| {
            interpreter(format!(
                "cannot prepare the Python workers' folder {}: {}",
                dir.display(),
                oka_core::words::io_reason(&e)
            ))
        };
        made.map_err(|e| failed(&dir, e))?;
        // Ours from here: removed when dropped, whatever happens next.
        let this = Self(dir);
        for (path, text) in files {
            let path = this.0.join(path);
            let written = match path.parent() {
                Some(parent) => std::fs::create_dir_all(parent),
                None => Ok(()),
            }
            .and_then(|()| std::fs::write(&path, text));
            written.map_err(|e| failed(&this.0, e))?;
        }
        Ok(this)
    }

    /// The worker script's path.
    pub fn script(&self) -> PathBuf {
        self.0.join(WORKER_SCRIPT)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
