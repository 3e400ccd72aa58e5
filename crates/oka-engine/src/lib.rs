//! `oka_engine._oka_engine`: the Python binding of [`oka_training::engine`].
//! Tables cross by the Arrow C data interface (no copy); the GIL is released
//! while a batch is computed. The Python API (`oka_engine.Engine`) is in
//! `python/oka_engine/__init__.py`.

use arrow::datatypes::Schema;
use arrow::pyarrow::PyArrowType;
use arrow::record_batch::RecordBatch;
use oka_training::engine::{Compute, Engine};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A spec loaded once.
#[pyclass(name = "_Engine", module = "oka_engine._oka_engine", frozen)]
#[derive(Debug)]
struct PyEngine {
    engine: Engine,
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

#[pymethods]
impl PyEngine {
    #[new]
    fn new(spec_yaml: &str) -> PyResult<Self> {
        let engine = Engine::new(spec_yaml).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self { engine })
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
