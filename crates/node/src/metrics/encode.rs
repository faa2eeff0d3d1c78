//! Text exposition of [`Families`] with the `prometheus-client` crate: the Prometheus text
//! format 0.0.4 (what every Prometheus scrapes) or OpenMetrics 1.0 when the scraper asks for it
//! (`Accept: application/openmetrics-text`). The crate writes names, types, help, label
//! escaping and number formats; this module only hands it the samples, through a
//! [`Collector`] that holds one status's families.

use std::collections::HashMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::families::{Families, Kind, Labels};

/// `Content-Type` of the Prometheus text format.
pub(crate) const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// `Content-Type` of OpenMetrics text.
pub(crate) const OPENMETRICS_TEXT: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The text format a scraper asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Prometheus,
    OpenMetrics,
}

impl Format {
    /// The format for an `Accept` header (OpenMetrics only when asked for).
    pub(crate) fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_TEXT,
            Format::OpenMetrics => OPENMETRICS_TEXT,
        }
    }
}

/// Encodes `families` in `format`.
pub(crate) fn encode(families: Families, format: Format) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StatusCollector(families)));
    let mut out = String::new();
    match format {
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?
        }
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry)?,
    }
    Ok(out)
}

/// `v` as an integer when it is a whole number that f64 holds exactly.
fn whole(v: f64) -> Option<u64> {
    (v.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&v)).then_some(v as u64)
}

/// One status's families, handed to the encoder at the scrape.
#[derive(Debug)]
struct StatusCollector(Families);

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0.families {
            let metric_type = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Untyped => MetricType::Unknown,
            };
            let mut me = encoder.encode_descriptor(&f.name, &f.help, None, metric_type)?;
            for (labels, v) in &f.samples {
                let sample = me.encode_family(labels)?;
                // Whole numbers (nearly every status value) print without a fraction.
                match (f.kind, whole(*v)) {
                    (Kind::Counter, Some(n)) => ConstCounter::new(n).encode(sample)?,
                    (Kind::Counter, None) => ConstCounter::new(*v).encode(sample)?,
                    (_, Some(n)) => ConstGauge::new(n).encode(sample)?,
                    (_, None) => ConstGauge::new(*v).encode(sample)?,
                }
            }
        }
        for h in &self.0.histograms {
            let mut me =
                encoder.encode_descriptor(&h.name, &h.help, None, MetricType::Histogram)?;
            // The encoder takes per-bucket counts and accumulates them itself; it adds the
            // `+Inf` bucket (the count).
            let per_bucket: Vec<(f64, u64)> = h
                .buckets
                .iter()
                .scan(0u64, |below, &(le, cumulative)| {
                    let n = cumulative.saturating_sub(*below);
                    *below = cumulative;
                    Some((le, n))
                })
                .collect();
            me.encode_histogram::<Labels>(
                h.sum,
                h.count,
                &per_bucket,
                None::<&HashMap<usize, Exemplar<Labels, f64>>>,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_status() -> client::NodeStatus {
        let mut s = client::NodeStatus {
            node: 3,
            ..Default::default()
        };
        s.bundles.received = 12;
        s.bundles.malformed_by_reason.insert("crc".into(), 1);
        s.queues.per_neighbour.insert(2, 4);
        s.store.commit_latency = client::status::CommitLatency {
            le_s: vec![0.001, 0.01],
            cumulative: vec![1, 3],
            count: 4,
            sum_s: 0.25,
        };
        s
    }

    #[test]
    fn prometheus_text_has_types_totals_labels_and_a_full_histogram() {
        let text = encode(Families::from_status(&sample_status()), Format::Prometheus).unwrap();
        assert!(
            text.contains("# TYPE dtnkit_bundles_received_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_bundles_received_total 12\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_bundles_malformed_total{reason=\"crc\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_queue_bundles{neighbour=\"2\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_store_commit_seconds_bucket{le=\"0.01\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_store_commit_seconds_bucket{le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("dtnkit_store_commit_seconds_count 4\n"),
            "{text}"
        );
        assert!(
            !text.contains("# EOF"),
            "the 0.0.4 format has no EOF marker"
        );
    }

    #[test]
    fn openmetrics_on_request_ends_with_eof() {
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        let text = encode(Families::from_status(&sample_status()), Format::OpenMetrics).unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("# TYPE dtnkit_bundles_received counter\n"),
            "{text}"
        );
    }
}
