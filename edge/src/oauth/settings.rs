//! The OAuth settings: flags and `OPENCLAW_PROXY_OAUTH_*` variables, parsed
//! once into [`OAuthSettings`]. OAuth is on when an issuer is set.

use std::path::PathBuf;
use std::time::Duration;

use jsonwebtoken::Algorithm;

use super::fetch;

/// Where the issuer's signing keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// The `jwks_uri` of the issuer's metadata.
    Discover,
    /// A JWKS URL.
    Url(String),
    /// A JWKS file, read again whenever the keys are refreshed.
    File(PathBuf),
}

/// How access tokens are checked.
#[derive(Clone, Debug)]
pub struct OAuthSettings {
    /// The `iss` every token must carry, exactly.
    pub issuer: String,
    /// The `aud` tokens must carry; `None` for the resource's own URL
    /// (`{public URL}/v1/mcp`, or a session's URL below it).
    pub audience: Option<String>,
    /// Where the signing keys come from.
    pub jwks: JwksSource,
    /// The signature algorithms accepted (never `none` nor HMAC).
    pub algorithms: Vec<Algorithm>,
    /// Scopes every token must grant.
    pub required_scopes: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// The claim that names the subject.
    pub subject_claim: String,
    /// When true, only access tokens open the MCP side.
    pub only: bool,
    /// The least time between two fetches of the key set for a `kid` not
    /// seen before.
    pub jwks_refresh_min: Duration,
    /// The key set is fetched again once it is this old (in the
    /// background: requests go on with the keys known).
    pub jwks_max_age: Duration,
    /// How long one load of the key set (with the issuer's metadata) may
    /// take before the keys known stay in use.
    pub jwks_fetch_timeout: Duration,
    /// Verified tokens remembered (each until it expires).
    pub cache_entries: usize,
}

impl OAuthSettings {
    /// Settings for `issuer` with the defaults: keys from its metadata,
    /// RS256 and ES256, no required scope, 60 s of leeway, `sub`.
    pub fn new(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: None,
            jwks: JwksSource::Discover,
            algorithms: vec![Algorithm::RS256, Algorithm::ES256],
            required_scopes: Vec::new(),
            leeway: Duration::from_secs(60),
            subject_claim: "sub".into(),
            only: false,
            jwks_refresh_min: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(3600),
            jwks_fetch_timeout: Duration::from_secs(10),
            cache_entries: 10_000,
        }
    }
}

/// The OAuth flags of the server's command line.
#[derive(Clone, Debug, clap::Args)]
pub struct OAuthArgs {
    /// OAuth 2.1 issuer (authorization server) whose JWT access tokens open the MCP endpoints (empty: OAuth off).
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_ISSUER", default_value = "")]
    pub oauth_issuer: String,

    /// The `aud` access tokens must carry (default: the MCP endpoint's own URL, {public URL}/v1/mcp).
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_AUDIENCE")]
    pub oauth_audience: Option<String>,

    /// JWKS URL of the issuer's signing keys (default: the jwks_uri of its metadata).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OAUTH_JWKS_URL",
        conflicts_with = "oauth_jwks_file"
    )]
    pub oauth_jwks_url: Option<String>,

    /// JWKS file of the issuer's signing keys, read again when keys are refreshed.
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_JWKS_FILE")]
    pub oauth_jwks_file: Option<PathBuf>,

    /// Signature algorithms accepted, comma-separated (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA).
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_ALGORITHMS", value_delimiter = ',',
          default_value = "RS256,ES256", value_parser = parse_algorithm)]
    pub oauth_algorithms: Vec<Algorithm>,

    /// Scopes every access token must grant, comma-separated.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OAUTH_REQUIRED_SCOPES",
        value_delimiter = ',',
        default_value = ""
    )]
    pub oauth_required_scopes: Vec<String>,

    /// Clock skew allowed on a token's exp and nbf, in seconds.
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_LEEWAY_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(0..=600))]
    pub oauth_leeway_seconds: u64,

    /// The claim that names the subject a session's owner is compared with.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OAUTH_SUBJECT_CLAIM",
        default_value = "sub"
    )]
    pub oauth_subject_claim: String,

    /// When true, only OAuth access tokens open the MCP endpoints: the OpenClaw token and sessions' mcp_tokens do not.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OAUTH_ONLY",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub oauth_only: bool,

    /// Least seconds between two fetches of the key set for a key id not seen before.
    #[arg(long, env = "OPENCLAW_PROXY_OAUTH_JWKS_REFRESH_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub oauth_jwks_refresh_seconds: u64,
}

/// An accepted algorithm: asymmetric signatures only.
fn parse_algorithm(text: &str) -> Result<Algorithm, String> {
    let algorithm: Algorithm = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a JWS algorithm name"))?;
    match algorithm {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => Err(format!(
            "{text} is an HMAC algorithm: a resource server holding the issuer's public keys must never accept it"
        )),
        algorithm => Ok(algorithm),
    }
}

/// A setting that makes OAuth unusable.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("OPENCLAW_PROXY_OAUTH_ISSUER: {0}")]
    Issuer(fetch::FetchError),
    #[error("OPENCLAW_PROXY_OAUTH_JWKS_URL: {0}")]
    JwksUrl(fetch::FetchError),
    #[error("OPENCLAW_PROXY_OAUTH_ALGORITHMS is empty: name at least one, such as RS256")]
    NoAlgorithm,
    #[error(
        "OPENCLAW_PROXY_OAUTH_ONLY is set but OPENCLAW_PROXY_OAUTH_ISSUER is empty: set the issuer"
    )]
    OnlyWithoutIssuer,
}

impl OAuthArgs {
    /// The settings, `None` when no issuer is set.
    pub fn settings(&self) -> Result<Option<OAuthSettings>, SettingsError> {
        let issuer = self.oauth_issuer.trim();
        if issuer.is_empty() {
            return if self.oauth_only {
                Err(SettingsError::OnlyWithoutIssuer)
            } else {
                Ok(None)
            };
        }
        fetch::check_url(issuer).map_err(SettingsError::Issuer)?;
        let jwks = match (&self.oauth_jwks_url, &self.oauth_jwks_file) {
            (Some(url), _) => {
                fetch::check_url(url.trim()).map_err(SettingsError::JwksUrl)?;
                JwksSource::Url(url.trim().to_owned())
            }
            (None, Some(path)) => JwksSource::File(path.clone()),
            (None, None) => JwksSource::Discover,
        };
        if self.oauth_algorithms.is_empty() {
            return Err(SettingsError::NoAlgorithm);
        }
        Ok(Some(OAuthSettings {
            audience: self
                .oauth_audience
                .as_deref()
                .map(str::trim)
                .filter(|audience| !audience.is_empty())
                .map(str::to_owned),
            jwks,
            algorithms: self.oauth_algorithms.clone(),
            required_scopes: self
                .oauth_required_scopes
                .iter()
                .map(|scope| scope.trim().to_owned())
                .filter(|scope| !scope.is_empty())
                .collect(),
            leeway: Duration::from_secs(self.oauth_leeway_seconds),
            subject_claim: self.oauth_subject_claim.trim().to_owned(),
            only: self.oauth_only,
            jwks_refresh_min: Duration::from_secs(self.oauth_jwks_refresh_seconds),
            ..OAuthSettings::new(issuer)
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        oauth: OAuthArgs,
    }

    fn settings(args: &[&str]) -> Result<Option<OAuthSettings>, String> {
        let mut argv = vec!["openclaw-proxy"];
        argv.extend_from_slice(args);
        let command = Command::try_parse_from(argv).map_err(|error| error.to_string())?;
        command.oauth.settings().map_err(|error| error.to_string())
    }

    #[test]
    fn hmac_and_none_are_refused_and_http_is_for_loopback() {
        let refused = settings(&[
            "--oauth-issuer",
            "https://id.example",
            "--oauth-algorithms",
            "RS256,HS256",
        ]);
        assert!(refused.expect_err("HMAC").contains("HMAC"));
        let refused = settings(&[
            "--oauth-issuer",
            "https://id.example",
            "--oauth-algorithms",
            "none",
        ]);
        assert!(refused.expect_err("none").contains("none"));
        let refused = settings(&["--oauth-issuer", "http://id.example"]);
        assert!(
            refused
                .expect_err("http")
                .contains("OPENCLAW_PROXY_OAUTH_ISSUER")
        );
        let refused = settings(&["--oauth-only"]);
        assert!(
            refused
                .expect_err("no issuer")
                .contains("OPENCLAW_PROXY_OAUTH_ISSUER")
        );
    }

    #[test]
    fn an_issuer_turns_oauth_on_with_the_defaults() {
        assert!(settings(&[]).expect("parses").is_none());
        let on = settings(&[
            "--oauth-issuer",
            "http://127.0.0.1:9/",
            "--oauth-required-scopes",
            "mcp, tools",
        ])
        .expect("parses")
        .expect("on");
        assert_eq!(on.issuer, "http://127.0.0.1:9/");
        assert_eq!(on.jwks, JwksSource::Discover);
        assert_eq!(on.algorithms, [Algorithm::RS256, Algorithm::ES256]);
        assert_eq!(on.required_scopes, ["mcp", "tools"]);
        assert_eq!(on.subject_claim, "sub");
    }
}
