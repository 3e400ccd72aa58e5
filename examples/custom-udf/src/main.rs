//! A custom `oka` binary: the stock CLI plus a native UDF, `window_mean`, which
//! specs use as `udf: {native: window_mean}`.

use std::process::ExitCode;

use oka_core::{NativeUdfs, Row, UdfCall, UdfError};

/// The mean and count of the `value` field over a list input (`range`/`last_n`).
fn window_mean(call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
    let name = call
        .input_names
        .first()
        .ok_or_else(|| UdfError::failed("window_mean needs one dependency"))?;
    let records = call.input(name)?.many();
    let sum = records
        .iter()
        .map(|r| r.float("value"))
        .sum::<Result<f64, _>>()?;
    let n = records.len();
    let mean = if n == 0 { 0.0 } else { sum / n as f64 };
    let row = call
        .output()
        .set("count", i64::try_from(n).unwrap_or(i64::MAX))?
        .set("mean", mean)?
        .build();
    Ok(vec![row])
}

/// The native UDFs this binary offers.
fn natives() -> NativeUdfs {
    let mut udfs = NativeUdfs::new();
    udfs.register("window_mean", window_mean);
    udfs
}

fn main() -> ExitCode {
    oka_cli::main_with(natives())
}

#[cfg(test)]
mod tests {
    use oka_core::execute::{Fetched, Outcome, execute};
    use oka_core::{FeatureRequest, Registry, Row, Timestamp, Value};

    use super::natives;

    #[test]
    fn spec_loads_and_the_udf_averages() {
        let yaml = include_str!("../spec.yaml");
        let r = Registry::from_yaml("spec.yaml", yaml, &natives()).unwrap();
        let req: FeatureRequest = serde_json::from_value(serde_json::json!({
            "target_features": ["mean_feature"], "keys": [{"id": "a"}]
        }))
        .unwrap();
        let prepared = r.prepare(&req, Timestamp(10)).unwrap();
        let rows: Vec<Row> = [1.0, 2.0, 6.0]
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let ts = Timestamp(i as i64);
                Row::new(
                    ts,
                    vec![Value::from("a"), Value::Timestamp(ts), Value::Float(*v)],
                )
            })
            .collect();
        let fetched = Fetched::read_all(&prepared, |_| vec![rows.clone()]).unwrap();
        let out = execute(&r, &prepared, &fetched, None).unwrap();
        let Outcome::Present(result) = &out.of(&prepared.targets[0])[0] else {
            panic!("{out:?}")
        };
        assert_eq!(result[0].columns[2], Value::Int(3));
        assert_eq!(result[0].columns[3], Value::Float(3.0));
    }

    #[test]
    fn unknown_native_is_rejected_without_registration() {
        let yaml = include_str!("../spec.yaml");
        let err = Registry::from_yaml("spec.yaml", yaml, &oka_core::NativeUdfs::new()).unwrap_err();
        assert!(
            err.to_string().contains("no native udf `window_mean`"),
            "{err}"
        );
    }
}
