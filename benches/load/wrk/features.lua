-- wrk script for Oka's POST /v1/features (benches/load/wrk.sh).
--
-- Each wrk thread builds 4,096 requests once, in init(), and then cycles through them,
-- so the generator spends nothing per request beyond handing wrk a ready string.
-- Every request names OKA_BATCH (default 1) keys `test-id-<k>`, k drawn at random
-- below OKA_KEYS (default 10,000), of the seed's OKA_FEATURE (default simple_feature),
-- with the seed's argument (multiplier 2.0): the same body as `oka-load`'s
-- (OKA_UDF_ARGS replaces the request's `udf_args`).
--
-- done() prints one JSON line (prefixed "wrk-json ") with requests, duration, errors
-- and latency percentiles in microseconds, for the script to read.

local keys = tonumber(os.getenv("OKA_KEYS") or "10000")
local batch = tonumber(os.getenv("OKA_BATCH") or "1")
local feature = os.getenv("OKA_FEATURE") or "simple_feature"
-- The request's udf_args (JSON); default: the seed's multiplier for simple_feature.
local udf_args = os.getenv("OKA_UDF_ARGS") or '{"simple_feature":{"multiplier":2.0}}'
local count = 4096

local threads = {}
local n_threads = 0

function setup(thread)
   n_threads = n_threads + 1
   thread:set("thread_id", n_threads)
   table.insert(threads, thread)
end

local requests = {}
local next_request = 0

function init(args)
   math.randomseed(1000003 * (thread_id or 1))
   local headers = { ["Content-Type"] = "application/json" }
   for r = 1, count do
      local parts = {}
      for b = 1, batch do
         parts[b] = string.format('{"id":"test-id-%d"}', math.random(0, keys - 1))
      end
      local body = string.format(
         '{"target_features":["%s"],"keys":[%s],"udf_args":%s}',
         feature, table.concat(parts, ","), udf_args)
      requests[r] = wrk.format("POST", "/v1/features", headers, body)
   end
end

function request()
   next_request = next_request % count + 1
   return requests[next_request]
end

function done(summary, latency, _)
   local e = summary.errors
   io.write(string.format(
      'wrk-json {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d}}\n',
      summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.max))
end
