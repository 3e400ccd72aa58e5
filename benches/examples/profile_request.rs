//! Serves one in-process request body many times, for profilers:
//! `valgrind --tool=callgrind target/release/examples/profile_request 100 2000`
//! (keys per request, iterations).
#![allow(clippy::unwrap_used, missing_docs)]

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let iterations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = rt.block_on(oka_benches::state(10_000));
    let body = oka_benches::request("simple_feature", keys);
    let mut bytes = 0;
    for _ in 0..iterations {
        bytes += oka_benches::serve_once(&rt, &state, &body).len();
    }
    println!("{iterations} requests of {keys} keys, {bytes} bytes answered");
}
