# Sourced by run.sh and against_feast.sh: `bench_data PYTHON ROWS RECORDS`
# sets DATA to target/bench-training/data-ROWS-RECORDS, written by
# make_data.py once (kept for the same sizes), and builds the release oka.
bench_data() {
  local python=$1 rows=$2 records=$3
  DATA=$WORK/data-$rows-$records
  if [[ ! -f $DATA/entities.parquet ]]; then
    rm -rf "$DATA"
    "$python" "$HERE/make_data.py" "$DATA" "$rows" "$records"
  fi
  (cd "$ROOT" && cargo build --release --locked -q --bin oka)
}
