//! Ceilings on what clients and apps can make the server hold: sessions,
//! tools and their size, calls in flight, and the rate of session creation
//! per client address.
//!
//! Every limit is a setting whose name the refusal quotes, so an operator who
//! meets one in a client's error knows what to raise. `0` means "no limit"
//! for each of them. The connection limit and the size of one message live
//! in the HTTP edge, which owns connections and bodies.
//!
//! The creation rate is a token bucket per client address (GCRA, from
//! `governor`). Behind a reverse proxy every request comes from the proxy's
//! address, so the client's is read from `X-Forwarded-For`, but only when the
//! peer is listed in `OPENCLAW_PROXY_TRUSTED_PROXIES`: anyone else could put
//! any address there and escape the limit.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};

use crate::error::ErrorKind;
use crate::proto::{self, ToolDefinition};

/// The default of [`Limits::max_total_tool_definition_bytes`]: 512 MiB.
pub const DEFAULT_MAX_TOTAL_TOOL_DEFINITION_BYTES: usize = 512 * 1024 * 1024;

/// The ceilings of one server. `0` disables a limit.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Live sessions this node knows of.
    pub max_sessions: usize,
    /// Tools in one session.
    pub max_tools_per_session: usize,
    /// The size of one session's tool definitions together (names,
    /// descriptions, schemas and paths), in bytes.
    pub max_tool_definition_bytes: usize,
    /// The size of every tool set this node holds, in bytes (a set shared
    /// by sessions counts once): what bounds the memory tool definitions
    /// take, however many sessions hold them.
    pub max_total_tool_definition_bytes: usize,
    /// Calls in flight on one session's bridge.
    pub max_calls_per_session: u32,
    /// Session creations per client address.
    pub session_create_rate: Option<CreateRate>,
    /// Peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<AddressRange>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_sessions: 100_000,
            max_tools_per_session: 512,
            max_tool_definition_bytes: 1024 * 1024,
            max_total_tool_definition_bytes: DEFAULT_MAX_TOTAL_TOOL_DEFINITION_BYTES,
            max_calls_per_session: 256,
            session_create_rate: Some(CreateRate {
                per_second: 100,
                burst: 1000,
            }),
            trusted_proxies: Vec::new(),
        }
    }
}

impl Limits {
    /// No ceilings at all (tests of other behaviour, benchmarks).
    pub fn none() -> Self {
        Self {
            max_sessions: 0,
            max_tools_per_session: 0,
            max_tool_definition_bytes: 0,
            max_total_tool_definition_bytes: 0,
            max_calls_per_session: 0,
            session_create_rate: None,
            trusted_proxies: Vec::new(),
        }
    }

    /// Checks a session's tool definitions against the count and size limits
    /// before anything is parsed.
    pub fn check_tools(&self, definitions: &[ToolDefinition]) -> Result<(), LimitError> {
        let count = definitions.len();
        if self.max_tools_per_session > 0 && count > self.max_tools_per_session {
            return Err(LimitError::TooManyTools {
                count,
                limit: self.max_tools_per_session,
            });
        }
        if self.max_tool_definition_bytes > 0 {
            let bytes = tool_bytes(definitions);
            if bytes > self.max_tool_definition_bytes {
                return Err(LimitError::ToolDefinitionsTooLarge {
                    bytes,
                    limit: self.max_tool_definition_bytes,
                });
            }
        }
        Ok(())
    }
}

impl Limits {
    /// Checks the resources, resource templates and prompts declared beside
    /// `tools` against the same limits: each list holds at most as many
    /// entries as a session may have tools, and everything declared counts
    /// toward the definition bytes.
    pub fn check_declarations(
        &self,
        tools: &[ToolDefinition],
        resources: &[proto::ResourceDefinition],
        resource_templates: &[proto::ResourceTemplateDefinition],
        prompts: &[proto::PromptDefinition],
    ) -> Result<(), LimitError> {
        let limit = self.max_tools_per_session;
        for (list, count) in [
            ("resources", resources.len()),
            ("resource_templates", resource_templates.len()),
            ("prompts", prompts.len()),
        ] {
            if limit > 0 && count > limit {
                return Err(LimitError::TooManyDeclared { list, count, limit });
            }
        }
        if self.max_tool_definition_bytes > 0 {
            let resource_bytes: usize = resources
                .iter()
                .map(|r| {
                    r.uri.len()
                        + r.name.len()
                        + r.title.len()
                        + r.description.len()
                        + r.mime_type.len()
                        + r.annotations_json.len()
                        + r.icons_json.len()
                })
                .sum();
            let template_bytes: usize = resource_templates
                .iter()
                .map(|t| {
                    t.uri_template.len()
                        + t.name.len()
                        + t.title.len()
                        + t.description.len()
                        + t.mime_type.len()
                        + t.annotations_json.len()
                        + t.icons_json.len()
                })
                .sum();
            let prompt_bytes: usize = prompts
                .iter()
                .map(|p| {
                    p.name.len()
                        + p.title.len()
                        + p.description.len()
                        + p.icons_json.len()
                        + p.arguments
                            .iter()
                            .map(|a| a.name.len() + a.title.len() + a.description.len())
                            .sum::<usize>()
                })
                .sum();
            let bytes = tool_bytes(tools) + resource_bytes + template_bytes + prompt_bytes;
            if bytes > self.max_tool_definition_bytes {
                return Err(LimitError::ToolDefinitionsTooLarge {
                    bytes,
                    limit: self.max_tool_definition_bytes,
                });
            }
        }
        Ok(())
    }
}

/// The bytes of text a session's tool definitions hold.
fn tool_bytes(tools: &[ToolDefinition]) -> usize {
    tools
        .iter()
        .map(|tool| {
            tool.name.len()
                + tool.description.len()
                + tool.input_schema_json.len()
                + tool.path.len()
        })
        .sum()
}

/// A limit was reached. Each message names the limit and its setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "this server holds its limit of {limit} sessions; delete unused sessions or raise OPENCLAW_PROXY_MAX_SESSIONS"
    )]
    TooManySessions { limit: usize },
    #[error(
        "{count} tools is more than the limit of {limit} per session (OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION)"
    )]
    TooManyTools { count: usize, limit: usize },
    #[error(
        "the tool definitions take {bytes} bytes, more than the limit of {limit} bytes per session (OPENCLAW_PROXY_MAX_TOOL_DEFINITION_BYTES)"
    )]
    ToolDefinitionsTooLarge { bytes: usize, limit: usize },
    #[error(
        "this server holds {held} bytes of tool definitions; {bytes} more would pass its limit of {limit} bytes in all (OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES): delete unused sessions, share one tool set between sessions, or raise the limit"
    )]
    TotalToolDefinitions {
        bytes: usize,
        held: usize,
        limit: usize,
    },
    #[error(
        "{count} {list} is more than the limit of {limit} per session (OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION bounds each list a session declares)"
    )]
    TooManyDeclared {
        list: &'static str,
        count: usize,
        limit: usize,
    },
    #[error(
        "too many sessions created from {client}: the limit is {per_second} per second with bursts of {burst} (OPENCLAW_PROXY_SESSION_CREATE_RATE); retry in {} ms",
        retry_after.as_millis()
    )]
    CreateRate {
        client: IpAddr,
        per_second: u32,
        burst: u32,
        retry_after: Duration,
    },
}

impl LimitError {
    /// A limit reached, with the wait before a retry when it is known.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Exhausted {
            retry_after: self.retry_after(),
        }
    }

    /// How long the client should wait before retrying, when that is known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::CreateRate { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// Session creations allowed per client address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateRate {
    /// Sustained creations per second.
    pub per_second: u32,
    /// Creations allowed at once after a quiet period.
    pub burst: u32,
}

impl FromStr for CreateRate {
    type Err = String;

    /// `"100"` (per second, burst the same) or `"100/1000"` (per second,
    /// burst). `"0"` is parsed by the caller as "no limit".
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (rate, burst) = match text.split_once('/') {
            Some((rate, burst)) => (rate, Some(burst)),
            None => (text, None),
        };
        let number = |part: &str, what: &str| {
            part.trim().parse::<u32>().map_err(|_| {
                format!(
                    "{what} {part:?} is not a whole number: write RATE or RATE/BURST, e.g. 100/1000"
                )
            })
        };
        let per_second = number(rate, "the rate")?;
        let burst = match burst {
            Some(burst) => number(burst, "the burst")?,
            None => per_second,
        };
        if per_second == 0 || burst == 0 {
            return Err("a rate and a burst must be above 0 (use 0 alone for no limit)".into());
        }
        Ok(Self { per_second, burst })
    }
}

type KeyedLimiter = RateLimiter<IpAddr, HashMapStateStore<IpAddr>, DefaultClock>;

/// The token buckets of session creation, one per client address.
pub(crate) struct CreateLimiter {
    rate: CreateRate,
    buckets: KeyedLimiter,
}

impl CreateLimiter {
    pub(crate) fn new(rate: CreateRate) -> Option<Self> {
        let per_second = NonZeroU32::new(rate.per_second)?;
        let burst = NonZeroU32::new(rate.burst)?;
        let quota = Quota::per_second(per_second).allow_burst(burst);
        Some(Self {
            rate,
            buckets: RateLimiter::keyed(quota),
        })
    }

    /// Takes one creation from `client`'s bucket.
    pub(crate) fn check(&self, client: IpAddr) -> Result<(), LimitError> {
        self.buckets.check_key(&client).map_err(|not_until| {
            let retry_after = not_until.wait_time_from(DefaultClock::default().now());
            LimitError::CreateRate {
                client,
                per_second: self.rate.per_second,
                burst: self.rate.burst,
                retry_after,
            }
        })
    }

    /// Forgets buckets that are full again, so one-off addresses do not
    /// accumulate.
    pub(crate) fn forget_idle(&self) {
        self.buckets.retain_recent();
        self.buckets.shrink_to_fit();
    }
}

/// An address or a CIDR block (`10.0.0.0/8`, `::1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    network: IpAddr,
    prefix: u8,
}

impl AddressRange {
    /// Whether `address` lies in the range.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        match (self.network, address) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(network) & mask == u32::from(address) & mask
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(network) & mask == u128::from(address) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for AddressRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network = address
            .parse::<IpAddr>()
            .map(canonical)
            .map_err(|_| format!("{text:?} is not an IP address or CIDR block (10.0.0.0/8)"))?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|prefix| *prefix <= bits)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {bits}"))?,
        };
        Ok(Self { network, prefix })
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) as the IPv4 address they
/// are, so one rule covers both spellings.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The client's address: the peer's, or, when the peer is a trusted proxy,
/// the right-most address in `X-Forwarded-For` that is not itself a trusted
/// proxy (the left-most entries are whatever the client claimed).
pub fn client_address(
    peer: IpAddr,
    forwarded_for: Option<&str>,
    trusted: &[AddressRange],
) -> IpAddr {
    let is_trusted = |address: IpAddr| trusted.iter().any(|range| range.contains(address));
    let peer = canonical(peer);
    let Some(forwarded_for) = forwarded_for.filter(|_| is_trusted(peer)) else {
        return peer;
    };
    let mut client = peer;
    for hop in forwarded_for.rsplit(',') {
        let Ok(address) = hop.trim().parse::<IpAddr>().map(canonical) else {
            // A hop that is not an address: nothing left of it can be
            // trusted, so the last proxy seen stands for the client.
            break;
        };
        client = address;
        if !is_trusted(address) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(text: &str) -> Vec<AddressRange> {
        text.split(',')
            .map(|range| range.parse().expect("valid range"))
            .collect()
    }

    #[test]
    fn ranges_match_their_addresses_in_both_families() {
        let private = ranges("10.0.0.0/8,::1,fd00::/8");
        let ip = |text: &str| text.parse::<IpAddr>().expect("address");
        assert!(private[0].contains(ip("10.200.3.4")));
        assert!(private[0].contains(ip("::ffff:10.1.1.1")));
        assert!(!private[0].contains(ip("11.0.0.1")));
        assert!(private[1].contains(ip("::1")));
        assert!(private[2].contains(ip("fd12::5")));
        assert!(
            "0.0.0.0/0"
                .parse::<AddressRange>()
                .expect("all")
                .contains(ip("1.2.3.4"))
        );
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/x", ""] {
            assert!(bad.parse::<AddressRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn forwarded_for_counts_only_behind_a_trusted_proxy() {
        let trusted = ranges("10.0.0.0/8");
        let ip = |text: &str| text.parse::<IpAddr>().expect("address");
        // An untrusted peer cannot choose its address.
        assert_eq!(
            client_address(ip("203.0.113.9"), Some("1.1.1.1"), &trusted),
            ip("203.0.113.9")
        );
        // Behind two trusted proxies, the first untrusted hop from the right.
        let chain = Some("6.6.6.6, 198.51.100.7, 10.0.0.2");
        assert_eq!(
            client_address(ip("10.0.0.1"), chain, &trusted),
            ip("198.51.100.7")
        );
        // Garbage stops the walk at the last proxy.
        assert_eq!(
            client_address(ip("10.0.0.1"), Some("bogus, 10.0.0.3"), &trusted),
            ip("10.0.0.3")
        );
        assert_eq!(
            client_address(ip("10.0.0.1"), None, &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn rates_parse_with_an_optional_burst() {
        assert_eq!(
            "100/1000".parse(),
            Ok(CreateRate {
                per_second: 100,
                burst: 1000
            })
        );
        assert_eq!(
            "5".parse(),
            Ok(CreateRate {
                per_second: 5,
                burst: 5
            })
        );
        assert!("0/5".parse::<CreateRate>().is_err());
        assert!("fast".parse::<CreateRate>().is_err());
    }

    #[test]
    fn a_client_past_its_burst_is_refused_with_the_setting_named() {
        let limiter = CreateLimiter::new(CreateRate {
            per_second: 1,
            burst: 3,
        })
        .expect("limiter");
        let client: IpAddr = "192.0.2.1".parse().expect("address");
        for _ in 0..3 {
            limiter.check(client).expect("within the burst");
        }
        let refused = limiter.check(client).expect_err("past the burst");
        assert!(
            refused
                .to_string()
                .contains("OPENCLAW_PROXY_SESSION_CREATE_RATE"),
            "{refused}"
        );
        assert!(refused.retry_after().is_some());
        // Another address has its own bucket.
        limiter
            .check("192.0.2.2".parse().expect("address"))
            .expect("own bucket");
    }

    #[test]
    fn tool_limits_count_and_measure_definitions() {
        let definition = |name: &str, schema: &str| ToolDefinition {
            name: name.into(),
            input_schema_json: schema.into(),
            ..ToolDefinition::default()
        };
        let limits = Limits {
            max_tools_per_session: 2,
            max_tool_definition_bytes: 20,
            ..Limits::none()
        };
        let three = vec![
            definition("a", ""),
            definition("b", ""),
            definition("c", ""),
        ];
        let error = limits.check_tools(&three).expect_err("too many");
        assert!(
            error
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION"),
            "{error}"
        );
        let big = vec![definition("a", &" ".repeat(30))];
        let error = limits.check_tools(&big).expect_err("too large");
        assert!(
            error
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_TOOL_DEFINITION_BYTES"),
            "{error}"
        );
        limits
            .check_tools(&[definition("a", "{}")])
            .expect("within both");
        Limits::none().check_tools(&three).expect("no limits");
    }
}
