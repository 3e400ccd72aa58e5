//! `oka_engine._oka_engine`: the Python binding of [`oka_training::engine`].
//! Tables cross by the Arrow C data interface (no copy); the GIL is released
//! while a batch is computed (a spec's Python UDFs take it back for their
//! batches: they run in this interpreter, through `oka-python`'s worker code). The Python API (`oka_engine.Engine`) is in
//! `python/oka_engine/__init__.py`.

use arrow::datatypes::Schema;
use arrow::pyarrow::PyArrowType;
use arrow::record_batch::RecordBatch;
use oka_python::inproc::{InProcess, Interpreter, InterpreterError, WORKER_SOURCE};
use oka_training::engine::{Compute, Engine};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A spec loaded once.
#[pyclass(name = "_Engine", module = "oka_engine._oka_engine", frozen)]
#[derive(Debug)]
struct PyEngine {
    engine: Engine,
    /// What runs the spec's Python UDFs (kept with the engine's runners).
    _python: InProcess,
}

fn compute_of(
    features: Option<Vec<String>>,
    args_json: &str,
    time_column: String,
) -> PyResult<Compute> {
    let parsed: serde_json::Value =
        serde_json::from_str(args_json).map_err(|e| PyValueError::new_err(format!("args: {e}")))?;
    let serde_json::Value::Object(by_feature) = parsed else {
        return Err(PyValueError::new_err(
            "args must be a dict of {feature: {argument: value}}",
        ));
    };
    let mut args = Vec::new();
    for (feature, given) in by_feature {
        let serde_json::Value::Object(given) = given else {
            return Err(PyValueError::new_err(format!(
                "args[{feature:?}] must be a dict of argument values"
            )));
        };
        for (arg, value) in given {
            args.push((feature.clone(), arg, value));
        }
    }
    Ok(Compute {
        features,
        time_column,
        args,
    })
}

/// Runs Python UDFs' batches in this interpreter, through the worker module
/// `oka-python` gives (the same code the pool's processes run).
#[derive(Debug)]
struct PyInterpreter {
    worker: Py<PyModule>,
    udfs: Py<PyAny>,
    config: Py<PyAny>,
    progress: Py<PyAny>,
}

impl PyInterpreter {
    /// Loads the worker module and the UDFs of `load` (the `load` message);
    /// `Err` names each module or function that does not load.
    fn load(py: Python<'_>, python: &InProcess, load: &[u8]) -> PyResult<Self> {
        let source = std::ffi::CString::new(WORKER_SOURCE)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let worker = PyModule::from_code(py, &source, c"oka_worker.py", c"oka_engine._worker")?;
        let marshal = py.import("marshal")?;
        let message = marshal.call_method1("loads", (PyBytes::new(py, load),))?;
        let (config, decls) = (message.get_item(1)?, message.get_item(2)?);
        let loaded = worker.call_method1("load", (&config, decls))?;
        let (udfs, problems) = (loaded.get_item(0)?, loaded.get_item(1)?);
        let answer = marshal.call_method1("dumps", (("loaded", problems), 2))?;
        if let Some(why) = python.problems(&answer.extract::<Vec<u8>>()?) {
            return Err(PyValueError::new_err(format!(
                "the spec's Python UDFs did not load:\n{why}"
            )));
        }
        let progress = py.eval(c"memoryview(bytearray(16)).cast('q')", None, None)?;
        Ok(Self {
            worker: worker.unbind(),
            udfs: udfs.unbind(),
            config: config.unbind(),
            progress: progress.unbind(),
        })
    }
}

impl Interpreter for PyInterpreter {
    fn run(&self, batch: &[u8]) -> Result<Vec<u8>, InterpreterError> {
        Python::attach(|py| {
            let marshal = py.import("marshal")?;
            let message = marshal.call_method1("loads", (PyBytes::new(py, batch),))?;
            let args = (
                self.udfs.bind(py),
                message.get_item(1)?,
                self.progress.bind(py),
                self.config.bind(py),
            );
            self.worker
                .bind(py)
                .call_method1("run_batch", args)?
                .extract::<Vec<u8>>()
        })
        .map_err(|e: PyErr| InterpreterError::caused(e.to_string(), e))
    }
}

#[pymethods]
impl PyEngine {
    /// `origin`: the spec's path, when it has Python UDFs (their files are
    /// relative to its folder); they run in this interpreter.
    #[new]
    #[pyo3(signature = (spec_yaml, origin=None))]
    fn new(py: Python<'_>, spec_yaml: &str, origin: Option<&str>) -> PyResult<Self> {
        let python = InProcess::new();
        let engine = Engine::with_python(origin.unwrap_or("spec"), spec_yaml, &python)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let load = python
            .load_message()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        if let Some(load) = load {
            python.start(Box::new(PyInterpreter::load(py, &python, &load)?));
        }
        Ok(Self {
            engine,
            _python: python,
        })
    }

    /// One record batch in, the same rows with the features' columns out.
    #[pyo3(signature = (batch, features, args_json, time_column))]
    fn compute_batch(
        &self,
        py: Python<'_>,
        batch: PyArrowType<RecordBatch>,
        features: Option<Vec<String>>,
        args_json: &str,
        time_column: String,
    ) -> PyResult<PyArrowType<RecordBatch>> {
        let compute = compute_of(features, args_json, time_column)?;
        let batch = batch.0;
        py.detach(|| self.engine.compute(batch, &compute))
            .map(PyArrowType)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The schema of `compute_batch`'s answer to batches of `schema`.
    #[pyo3(signature = (schema, features, time_column))]
    fn output_schema(
        &self,
        schema: PyArrowType<Schema>,
        features: Option<Vec<String>>,
        time_column: String,
    ) -> PyResult<PyArrowType<Schema>> {
        let compute = compute_of(features, "{}", time_column)?;
        self.engine
            .output_schema(&schema.0, &compute)
            .map(|s| PyArrowType(s.as_ref().clone()))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

#[pymodule]
fn _oka_engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
