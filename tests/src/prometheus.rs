//! A reader of the Prometheus / OpenMetrics text format, enough to assert
//! exact values: every sample line `name{label="value",...} number`, comments
//! skipped.

use std::collections::BTreeMap;

/// One scrape: each sample by its name and labels.
#[derive(Debug, Default)]
pub struct Scrape {
    samples: BTreeMap<(String, BTreeMap<String, String>), f64>,
}

impl Scrape {
    /// Reads a scrape; an error names the line that is not a sample.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (series, value) = line
                .rsplit_once(' ')
                .ok_or_else(|| anyhow::anyhow!("no value in {line:?}"))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                other => other
                    .parse()
                    .map_err(|error| anyhow::anyhow!("value of {line:?}: {error}"))?,
            };
            let (name, labels) = match series.split_once('{') {
                None => (series.to_owned(), BTreeMap::new()),
                Some((name, rest)) => {
                    let body = rest
                        .strip_suffix('}')
                        .ok_or_else(|| anyhow::anyhow!("unclosed labels in {line:?}"))?;
                    (name.to_owned(), labels(body)?)
                }
            };
            samples.insert((name, labels), value);
        }
        Ok(Self { samples })
    }

    /// The value of the sample `name` with exactly these labels.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let labels = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        self.samples.get(&(name.to_owned(), labels)).copied()
    }

    /// Like [`Scrape::get`], panicking with the scrape when it is absent.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?} in {self:#?}"))
    }
}

/// `key="value",key="value"` (values with `\"`, `\\` and `\n` escapes).
fn labels(body: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .ok_or_else(|| anyhow::anyhow!("label without value in {body:?}"))?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => anyhow::bail!("dangling escape in {body:?}"),
                },
                Some((index, '"')) => break index,
                Some((_, other)) => value.push(other),
                None => anyhow::bail!("unterminated label value in {body:?}"),
            }
        };
        labels.insert(key.trim_start_matches(',').to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_with_and_without_labels() {
        let scrape = Scrape::parse(
            "# TYPE x counter\nx_total{a=\"1\",b=\"q\\\"uote\"} 3\ny 2.5\nz_bucket{le=\"+Inf\"} 1\n# EOF\n",
        )
        .expect("parses");
        assert_eq!(
            scrape.get("x_total", &[("a", "1"), ("b", "q\"uote")]),
            Some(3.0)
        );
        assert_eq!(scrape.get("y", &[]), Some(2.5));
        assert_eq!(scrape.get("z_bucket", &[("le", "+Inf")]), Some(1.0));
    }
}
