//! Many rows' UDFs run together: every row's execution advances, the batch
//! calls of all of them (Python UDFs) are sent before any is waited for, so
//! the pool batches the rows of many training rows into one call each, as it
//! batches concurrent requests when serving.

use oka_core::Registry;
use oka_core::batch::block_on;
use oka_core::execute::{ExecuteError, Execution, Fetched, Outputs};
use oka_core::request::Prepared;

/// Runs the UDFs of every row that was read (`None`: a row that could not be;
/// its answer is not used): per row, its outputs.
pub(crate) fn execute_all(
    registry: &Registry,
    rows: &[Option<(&Prepared, &Fetched)>],
) -> Vec<Result<Outputs, ExecuteError>> {
    let mut runs: Vec<Result<Execution<'_>, ExecuteError>> = rows
        .iter()
        .map(|r| match r {
            Some((prepared, fetched)) => Execution::new(registry, prepared, fetched, None),
            None => Err(ExecuteError::NotWaiting),
        })
        .collect();
    loop {
        let mut waiting = Vec::new();
        for (i, run) in runs.iter_mut().enumerate() {
            let Ok(execution) = run else {
                continue;
            };
            match execution.advance() {
                Ok(calls) => {
                    for call in calls {
                        // Sent now: the pool queues them while a worker runs.
                        let answer = call.udf.call(call.batch);
                        waiting.push((i, call.id, answer));
                    }
                }
                Err(e) => *run = Err(e),
            }
        }
        if waiting.is_empty() {
            break;
        }
        for (i, id, answer) in waiting {
            let answer = block_on(answer);
            if let Ok(execution) = &mut runs[i]
                && let Err(e) = execution.complete(id, answer)
            {
                runs[i] = Err(e);
            }
        }
    }
    runs.into_iter().map(|r| r.map(Execution::finish)).collect()
}
