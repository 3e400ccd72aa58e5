//! What a process's tracing is told: where to send spans, how, and which
//! requests to sample. Read from flags with the OpenTelemetry environment
//! variables as their twins; every refusal names the flag or variable.

use opentelemetry_sdk::trace::Sampler;

/// How spans are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies, to `<endpoint>/v1/traces` (port 4318).
    HttpProtobuf,
    /// OTLP/gRPC, to `<endpoint>` (port 4317).
    Grpc,
}

impl Protocol {
    /// As `OTEL_EXPORTER_OTLP_PROTOCOL` names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }
}

/// Which requests are traced (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerChoice {
    /// Follow a sampled or unsampled `traceparent` (the default); otherwise
    /// decide every request by `root`.
    pub parent_based: bool,
    /// The share of new traces sampled, 0 to 1.
    pub ratio: f64,
}

impl SamplerChoice {
    /// The SDK's sampler for this choice.
    pub(crate) fn sampler(self) -> Sampler {
        let root = if self.ratio >= 1.0 {
            Sampler::AlwaysOn
        } else if self.ratio <= 0.0 {
            Sampler::AlwaysOff
        } else {
            Sampler::TraceIdRatioBased(self.ratio)
        };
        if self.parent_based {
            Sampler::ParentBased(Box::new(root))
        } else {
            root
        }
    }
}

/// Tracing's configuration, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    /// The URL spans are sent to (for HTTP, with `/v1/traces` appended).
    pub endpoint: String,
    /// The CA that signs an `https://` collector's certificate
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`); none: the Mozilla roots.
    pub certificate: Option<std::path::PathBuf>,
    /// How.
    pub protocol: Protocol,
    /// Which requests.
    pub sampler: SamplerChoice,
}

oka_core::described_error! {
    /// A tracing setting that cannot be used, in words.
    pub struct TraceConfigError;
}

const ENDPOINT: &str = "`--otlp-endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT)";
const PROTOCOL: &str = "`--otlp-protocol` (OTEL_EXPORTER_OTLP_PROTOCOL)";
const SAMPLER: &str = "OTEL_TRACES_SAMPLER";
const RATIO: &str = "`--trace-sample-ratio` (OTEL_TRACES_SAMPLER_ARG)";

impl TraceConfig {
    /// Checks the settings: `endpoint` a base URL (`http://host:port`, as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`), `protocol` `http/protobuf` (the default)
    /// or `grpc`, `sampler` one of OpenTelemetry's names (default
    /// `parentbased_traceidratio`), `ratio` from 0 to 1 (default 1).
    pub fn new(
        endpoint: &str,
        protocol: Option<&str>,
        sampler: Option<&str>,
        ratio: Option<&str>,
    ) -> Result<Self, TraceConfigError> {
        let protocol = match protocol.map(str::trim) {
            None | Some("" | "http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => {
                return Err(TraceConfigError::new(format!(
                    "{PROTOCOL} is `{other}`: use `http/protobuf` (port 4318) or `grpc` (port 4317)"
                )));
            }
        };
        let base = endpoint.trim();
        let uri: hyper::Uri = base.parse().map_err(|_| {
            TraceConfigError::new(format!(
                "{ENDPOINT} is `{base}`, not a URL: give the collector's base URL, e.g. http://localhost:4318"
            ))
        })?;
        match (uri.scheme_str(), protocol) {
            (Some("http"), _) | (Some("https"), Protocol::HttpProtobuf) if uri.host().is_some() => {
            }
            (Some("https"), Protocol::Grpc) => {
                return Err(TraceConfigError::new(format!(
                    "{ENDPOINT} is `{base}`: over gRPC spans are sent without TLS; use `--otlp-protocol http/protobuf` for an https:// collector, or a collector on the node or in the pod"
                )));
            }
            _ => {
                return Err(TraceConfigError::new(format!(
                    "{ENDPOINT} is `{base}`: give the collector's base URL with its scheme, e.g. http://localhost:4318 or https://collector.example:4318"
                )));
            }
        }
        let endpoint = match protocol {
            // As OTEL_EXPORTER_OTLP_ENDPOINT: the signal's path is appended.
            Protocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
            Protocol::Grpc => base.to_owned(),
        };
        Ok(Self {
            endpoint,
            certificate: None,
            protocol,
            sampler: sampler_choice(sampler, ratio)?,
        })
    }
}

fn sampler_choice(
    sampler: Option<&str>,
    ratio: Option<&str>,
) -> Result<SamplerChoice, TraceConfigError> {
    let (parent_based, fixed) = match sampler.map(str::trim) {
        None | Some("" | "parentbased_traceidratio") => (true, None),
        Some("traceidratio") => (false, None),
        Some("parentbased_always_on") => (true, Some(1.0)),
        Some("parentbased_always_off") => (true, Some(0.0)),
        Some("always_on") => (false, Some(1.0)),
        Some("always_off") => (false, Some(0.0)),
        Some(other) => {
            return Err(TraceConfigError::new(format!(
                "{SAMPLER} is `{other}`: use parentbased_traceidratio (the default), traceidratio, parentbased_always_on, parentbased_always_off, always_on or always_off"
            )));
        }
    };
    let ratio = match (fixed, ratio.map(str::trim).filter(|r| !r.is_empty())) {
        (Some(fixed), _) => fixed,
        (None, None) => 1.0,
        (None, Some(r)) => r
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| {
                TraceConfigError::new(format!(
                    "{RATIO} is `{r}`: give the share of new traces to sample, from 0 to 1 (e.g. 0.01 for 1%)"
                ))
            })?,
    };
    Ok(SamplerChoice {
        parent_based,
        ratio,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_endpoint_gets_the_signal_path_and_grpc_keeps_it() {
        let c = TraceConfig::new("http://collector:4318/", None, None, None).unwrap();
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(
            c.sampler,
            SamplerChoice {
                parent_based: true,
                ratio: 1.0
            }
        );
        let g = TraceConfig::new("http://collector:4317", Some("grpc"), None, None).unwrap();
        assert_eq!(g.endpoint, "http://collector:4317");
    }

    #[test]
    fn refusals_name_the_setting_and_what_to_do() {
        let e = |r: Result<TraceConfig, TraceConfigError>| r.unwrap_err().to_string();
        assert!(
            e(TraceConfig::new("collector:4318", None, None, None)).contains("--otlp-endpoint")
        );
        assert!(
            e(TraceConfig::new("https://c:4317", Some("grpc"), None, None))
                .contains("http/protobuf")
        );
        assert!(TraceConfig::new("https://c:4318", None, None, None).is_ok());
        assert!(
            e(TraceConfig::new(
                "http://c:4318",
                Some("http/json"),
                None,
                None
            ))
            .contains("OTEL_EXPORTER_OTLP_PROTOCOL")
        );
        assert!(
            e(TraceConfig::new(
                "http://c:4318",
                None,
                Some("jaeger_remote"),
                None
            ))
            .contains("OTEL_TRACES_SAMPLER")
        );
        for bad in ["1.5", "-0.1", "half", "NaN"] {
            assert!(
                e(TraceConfig::new("http://c:4318", None, None, Some(bad)))
                    .contains("OTEL_TRACES_SAMPLER_ARG"),
                "{bad}"
            );
        }
    }

    #[test]
    fn samplers_by_name() {
        let s = |name, arg| sampler_choice(Some(name), arg).unwrap();
        assert_eq!(s("traceidratio", Some("0.01")).ratio, 0.01);
        assert!(!s("traceidratio", Some("0.01")).parent_based);
        assert_eq!(s("parentbased_always_off", Some("0.5")).ratio, 0.0);
        assert_eq!(s("always_on", None).ratio, 1.0);
    }
}
