//! OAuth access tokens on the MCP endpoints: a test issuer with keys made
//! here, its metadata and key set on a real loopback server; the real proxy
//! verifying tokens on every MCP route; sessions bound to their owner.
//!
//! Every refusal is checked on each MCP route, with the challenge that
//! tells a client where to sign in; every good token is checked to get in,
//! so no refusal passes by refusing everything.

use std::time::Duration;

use openclaw_proxy_edge::oauth::{JwksSource, OAuthSettings};
use openclaw_proxy_tests::oauth;
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

/// A server whose MCP side takes tokens of `issuer`, with `change` applied.
async fn server_for(issuer: &TestIssuer, change: impl FnOnce(&mut OAuthSettings)) -> TestServer {
    let mut settings = OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    change(&mut settings);
    TestServer::builder().oauth(settings).start().await
}

/// A session created with the app token, bound to `owner` if given.
async fn session(server: &TestServer, owner: Option<&str>) -> TestSession {
    let mut body = legacy_session_body();
    if let Some(owner) = owner {
        body["owner"] = json!({"subject": owner});
    }
    server.rest().register(&body).await
}

fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

/// The MCP endpoint's resource URL on `server`.
fn resource(server: &TestServer) -> String {
    format!("{}/v1/mcp", server.http_url())
}

/// One request on each MCP route of `session` at `server`.
async fn on_every_route(server: &TestServer, session: &str, token: &str) -> Vec<(String, Reply)> {
    oauth::on_every_route(&server.http_url(), session, token).await
}

/// Asserts a refusal with the challenge naming the session's metadata.
fn assert_challenged(server: &TestServer, session: &str, route: &str, reply: &Reply, error: &str) {
    oauth::assert_challenged(&server.http_url(), session, ("", route), reply, error);
}

#[tokio::test]
async fn a_signed_in_user_opens_only_the_sessions_bound_to_them() {
    let issuer = TestIssuer::start().await;
    for require_session_tokens in [false, true] {
        let mut settings = OAuthSettings::new(issuer.url.clone());
        settings.required_scopes = vec!["mcp".into()];
        let server = TestServer::builder()
            .require_session_tokens(require_session_tokens)
            .oauth(settings)
            .start()
            .await;
        let alices = session(&server, Some("alice")).await;
        let bobs = session(&server, Some("bob")).await;
        let nobodys = session(&server, None).await;
        let alice = issuer.token("alice", &resource(&server));
        for (route, reply) in on_every_route(&server, &alices.id, &alice).await {
            assert!(
                reply.status() != StatusCode::UNAUTHORIZED
                    && reply.status() != StatusCode::FORBIDDEN,
                "{route} refused alice her own session: {}",
                reply.text()
            );
        }
        let listed = Rest::new(server.http_url())
            .mcp(&format!("/v1/mcp/{}", alices.id), &tools_list())
            .bearer_auth(&alice)
            .send()
            .await;
        assert_eq!(listed.json()["result"]["tools"][0]["name"], "echo_text");
        for other in [&bobs.id, &nobodys.id] {
            for (route, reply) in on_every_route(&server, other, &alice).await {
                assert_challenged(&server, other, &route, &reply, "invalid_token");
            }
        }
        // A token for one session's own URL opens that session alone.
        let own_url = format!("{}/{}", resource(&server), alices.id);
        let scoped = issuer.token("alice", &own_url);
        let reply = Rest::new(server.http_url())
            .mcp(&alices.mcp_url, &tools_list())
            .bearer_auth(&scoped)
            .send()
            .await;
        assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
        let reply = Rest::new(server.http_url())
            .mcp("/v1/mcp", &tools_list())
            .header("mcp-session-id", &alices.id)
            .bearer_auth(&issuer.token("alice", &format!("{}/{}", resource(&server), bobs.id)))
            .send()
            .await;
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{}", reply.text());
        // The session's own token keeps working beside OAuth.
        let mcp_token = alices.mcp_token.clone().expect("mcp_token");
        let reply = Rest::new(server.http_url())
            .mcp(&alices.mcp_url, &tools_list())
            .bearer_auth(&mcp_token)
            .send()
            .await;
        assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
        let session_token = alices.session_token.clone().expect("session_token");
        let described = server
            .rest()
            .token(&session_token)
            .get_session(&alices.id)
            .await
            .json();
        assert_eq!(
            described["owner"],
            json!({"subject": "alice", "issuer": issuer.url})
        );
    }
}

#[tokio::test]
async fn bad_tokens_are_refused_on_every_mcp_route_with_a_challenge() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |_| {}).await;
    let owned = session(&server, Some("alice")).await;
    let audience = resource(&server);
    let mut cases: Vec<(&str, String, &str)> = issuer
        .bad_tokens("alice", &audience)
        .into_iter()
        .map(|bad| (bad.case, bad.token, bad.error))
        .collect();
    cases.push(("no token at all", String::new(), ""));
    for (case, token, error) in cases {
        let replies = on_every_route(&server, &owned.id, &token).await;
        assert_eq!(replies.len(), 4, "{case}: the legacy stream opened");
        for (route, reply) in replies {
            if error.is_empty() {
                assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{case}, {route}");
                let challenge = reply.header("www-authenticate").unwrap_or_default();
                assert!(
                    challenge.contains("resource_metadata=\""),
                    "{case}, {route}: {challenge}"
                );
                assert!(
                    !challenge.contains("error="),
                    "{case}, {route}: {challenge}"
                );
                continue;
            }
            let public = server.http_url();
            oauth::assert_challenged(&public, &owned.id, (case, &route), &reply, error);
            assert!(!reply.text().contains(&token), "{case}: the token echoed");
        }
    }
    // And the good token gets in on the same routes.
    let token = issuer.token("alice", &audience);
    for (route, reply) in on_every_route(&server, &owned.id, &token).await {
        assert!(
            reply.status().as_u16() < 401 || reply.status().as_u16() > 403,
            "{route}"
        );
    }
}

#[tokio::test]
async fn the_metadata_names_the_resource_and_its_issuer_where_the_challenge_says() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |_| {}).await;
    let owned = session(&server, Some("alice")).await;
    let refused = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .send()
        .await;
    let challenge = refused
        .header("www-authenticate")
        .unwrap_or_default()
        .to_owned();
    let url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a resource_metadata URL");
    let document = Rest::new(server.http_url()).get(url).send().await.json();
    assert_eq!(document["resource"], owned.mcp_url);
    assert_eq!(document["authorization_servers"], json!([issuer.url]));
    assert_eq!(document["scopes_supported"], json!(["mcp"]));
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/v1/mcp",
    ] {
        let document = Rest::new(server.http_url()).get(path).send().await.json();
        assert_eq!(document["resource"], resource(&server), "{path}");
    }
    let elsewhere = Rest::new(server.http_url())
        .get("/.well-known/oauth-protected-resource/v1/chat/sessions")
        .send()
        .await;
    assert_eq!(elsewhere.status(), StatusCode::NOT_FOUND);
    // Behind a reverse proxy, every URL is the public one.
    let mut settings = OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    let public = TestServer::builder()
        .edge(|edge| edge.public_url = Some("https://mcp.example.com/proxy".into()))
        .oauth(settings)
        .start()
        .await;
    let owned = session(&public, Some("alice")).await;
    let refused = Rest::new(public.http_url())
        .mcp(&format!("/v1/mcp/{}", owned.id), &tools_list())
        .send()
        .await;
    let challenge = refused.header("www-authenticate").unwrap_or_default();
    let expected = format!(
        "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/proxy/v1/mcp/{}\"",
        owned.id
    );
    assert!(challenge.contains(&expected), "{challenge}");
    let document = Rest::new(public.http_url())
        .get(&format!(
            "/.well-known/oauth-protected-resource/proxy/v1/mcp/{}",
            owned.id
        ))
        .send()
        .await
        .json();
    assert_eq!(
        document["resource"],
        format!("https://mcp.example.com/proxy/v1/mcp/{}", owned.id)
    );
    // Without an issuer there is nothing to discover.
    let plain = TestServer::start().await;
    let none = Rest::new(plain.http_url())
        .get("/.well-known/oauth-protected-resource/v1/mcp")
        .send()
        .await;
    assert_eq!(none.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_an_outage_keeps_the_known_keys() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |settings| {
        settings.jwks_refresh_min = Duration::ZERO
    })
    .await;
    let owned = session(&server, Some("alice")).await;
    let audience = resource(&server);
    let list = |token: String| {
        Rest::new(server.http_url())
            .mcp(&owned.mcp_url, &tools_list())
            .bearer_auth(&token)
            .send()
    };
    let first = issuer.key();
    assert_eq!(
        list(first.sign(&issuer.claims("alice", &audience)))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(issuer.jwks_fetches(), 1);
    let second = SigningKey::generate("key-2");
    issuer.rotate_to(second.clone());
    let reply = list(second.sign(&issuer.claims("alice", &audience))).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    assert_eq!(issuer.jwks_fetches(), 2);
    issuer.stop();
    // A new token (not remembered yet) with the known key still verifies.
    let mut claims = issuer.claims("alice", &audience);
    claims["jti"] = json!("another");
    let reply = list(second.sign(&claims)).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    let fetches = issuer.jwks_fetches();
    let reply = list(SigningKey::generate("key-3").sign(&claims)).await;
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{}", reply.text());
    // That unknown kid made the proxy try the stopped issuer, and the fetch
    // failed: the known key still verifies a token it has not seen before.
    assert_eq!(issuer.jwks_fetches(), fetches, "the issuer is stopped");
    claims["jti"] = json!("after the failed fetch");
    let reply = list(second.sign(&claims)).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn unknown_key_ids_fetch_the_key_set_at_most_once_per_interval() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |settings| {
        settings.jwks_refresh_min = Duration::from_secs(3600);
    })
    .await;
    let owned = session(&server, Some("alice")).await;
    let audience = resource(&server);
    let token = issuer.token("alice", &audience);
    let reply = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&token)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK);
    for n in 0..5 {
        let stranger = SigningKey::generate(&format!("made-up-{n}"));
        let reply = Rest::new(server.http_url())
            .mcp(&owned.mcp_url, &tools_list())
            .bearer_auth(&stranger.sign(&issuer.claims("alice", &audience)))
            .send()
            .await;
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        issuer.jwks_fetches(),
        1,
        "made-up kids made the proxy fetch again"
    );
}

#[tokio::test]
async fn static_tokens_open_nothing_in_oauth_only_mode_and_keys_may_come_from_a_file() {
    let issuer = TestIssuer::start().await;
    let dir = std::env::temp_dir().join(format!("oauth-jwks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("jwks.json");
    std::fs::write(&file, json!({"keys": [issuer.key().jwk()]}).to_string()).expect("write");
    issuer.stop();
    let server = server_for(&issuer, |settings| {
        settings.only = true;
        settings.jwks = JwksSource::File(file.clone());
    })
    .await;
    let owned = session(&server, Some("alice")).await;
    let rest = Rest::new(server.http_url());
    for token in [
        owned.mcp_token.clone().expect("mcp_token"),
        OPENCLAW_TOKEN.to_owned(),
    ] {
        let reply = rest
            .mcp(&owned.mcp_url, &tools_list())
            .bearer_auth(&token)
            .send()
            .await;
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{}", reply.text());
        assert!(
            reply.text().contains("only OAuth access tokens"),
            "{}",
            reply.text()
        );
    }
    let token = issuer.token("alice", &resource(&server));
    let reply = rest
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&token)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    // The app side is untouched: its token still opens the session.
    assert_eq!(
        server.rest().get_session(&owned.id).await.status(),
        StatusCode::OK
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn the_owner_may_be_named_by_another_claim_than_sub() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |settings| {
        settings.subject_claim = "email".into();
    })
    .await;
    let by_email = session(&server, Some("alice@example.com")).await;
    let by_sub = session(&server, Some("alice")).await;
    let mut claims = issuer.claims("alice", &resource(&server));
    claims["email"] = json!("alice@example.com");
    let token = issuer.key().sign(&claims);
    for (route, reply) in on_every_route(&server, &by_email.id, &token).await {
        assert!(
            reply.status() != StatusCode::UNAUTHORIZED && reply.status() != StatusCode::FORBIDDEN,
            "{route} refused the session owned by the token's email: {}",
            reply.text()
        );
    }
    let listed = Rest::new(server.http_url())
        .mcp(&by_email.mcp_url, &tools_list())
        .bearer_auth(&token)
        .send()
        .await;
    assert_eq!(listed.json()["result"]["tools"][0]["name"], "echo_text");
    // The session owned by the token's sub is not the token's.
    for (route, reply) in on_every_route(&server, &by_sub.id, &token).await {
        assert_challenged(&server, &by_sub.id, &route, &reply, "invalid_token");
    }
    // A token without the claim names no owner at all, whatever its sub.
    let without = issuer.token("alice@example.com", &resource(&server));
    let reply = Rest::new(server.http_url())
        .mcp(&by_email.mcp_url, &tools_list())
        .bearer_auth(&without)
        .send()
        .await;
    assert_challenged(
        &server,
        &by_email.id,
        "POST /v1/mcp/{id}",
        &reply,
        "invalid_token",
    );
    assert!(reply.text().contains("email"), "{}", reply.text());
}

/// Whom a token is for never follows what a request says of itself: with
/// neither a public URL nor an audience configured, on loopback, the
/// resource is the listen address's own origin, whatever `Host` or
/// `X-Forwarded-*` headers a request carries, even with every host allowed;
/// and the metadata document never reflects them.
#[tokio::test]
async fn the_audience_is_never_taken_from_a_requests_headers() {
    let issuer = TestIssuer::start().await;
    let mut settings = OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    let server = TestServer::builder()
        .edge(|edge| edge.allowed_hosts = vec!["*".into()])
        .oauth(settings)
        .start()
        .await;
    let owned = session(&server, Some("alice")).await;
    let list = |token: String, headers: &[(&str, &str)]| {
        let mut request = Rest::new(server.http_url())
            .mcp(&owned.mcp_url, &tools_list())
            .bearer_auth(&token);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let forged: [&[(&str, &str)]; 3] = [
        &[("host", "other-resource.example")],
        &[("x-forwarded-proto", "https")],
        &[
            ("host", "other-resource.example"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "other-resource.example"),
        ],
    ];
    // Tokens for other resource servers at the same issuer, each named by
    // what the forged headers say.
    let port = server.addr.port();
    for (audience, headers) in [
        ("http://other-resource.example/v1/mcp".to_owned(), forged[0]),
        (format!("https://127.0.0.1:{port}/v1/mcp"), forged[1]),
        (
            "https://other-resource.example/v1/mcp".to_owned(),
            forged[2],
        ),
    ] {
        let reply = list(issuer.token("alice", &audience), headers).await;
        assert_eq!(
            reply.status(),
            StatusCode::UNAUTHORIZED,
            "{audience} with {headers:?}: {}",
            reply.text()
        );
        assert!(
            reply.text().contains("another audience"),
            "{}",
            reply.text()
        );
    }
    // The server's own resource is accepted whatever the headers say.
    for headers in forged {
        let reply = list(issuer.token("alice", &resource(&server)), headers).await;
        assert_eq!(
            reply.status(),
            StatusCode::OK,
            "{headers:?}: {}",
            reply.text()
        );
    }
    // The metadata names the listen address's own resource.
    for headers in forged {
        for path in [
            "/.well-known/oauth-protected-resource/v1/mcp".to_owned(),
            format!("/.well-known/oauth-protected-resource/v1/mcp/{}", owned.id),
        ] {
            let mut request = Rest::new(server.http_url()).get(&path);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let document = request.send().await.json();
            let expected = if path.ends_with("/v1/mcp") {
                resource(&server)
            } else {
                owned.mcp_url.clone()
            };
            assert_eq!(document["resource"], expected, "{path} with {headers:?}");
        }
    }
}

/// Away from loopback, OAuth needs to be told whom tokens are for: the
/// server refuses to start without a public URL or an audience, naming both.
#[tokio::test]
async fn oauth_on_a_network_address_needs_a_public_url_or_an_audience() {
    let issuer = TestIssuer::start().await;
    let settings = OAuthSettings::new(issuer.url.clone());
    let refused = TestServer::builder()
        .oauth(settings.clone())
        .env("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0")
        .try_spawn()
        .await
        .err()
        .expect("refused to start");
    assert!(
        refused.contains("OPENCLAW_PROXY_PUBLIC_URL")
            && refused.contains("OPENCLAW_PROXY_OAUTH_AUDIENCE"),
        "{refused}"
    );
    let mut with_audience = settings.clone();
    with_audience.audience = Some("api://openclaw-proxy".into());
    let started = TestServer::builder()
        .oauth(with_audience)
        .env("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0")
        .try_spawn()
        .await;
    assert!(started.is_ok(), "{:?}", started.err());
    let started = TestServer::builder()
        .oauth(settings)
        .env("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0")
        .env("OPENCLAW_PROXY_PUBLIC_URL", "https://mcp.example.com")
        .try_spawn()
        .await;
    assert!(started.is_ok(), "{:?}", started.err());
}

/// NumericDates may have a fraction (RFC 7519 §2): such an `exp` and `nbf`
/// are dates like any other, and the token is good.
#[tokio::test]
async fn fractional_dates_are_dates() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |_| {}).await;
    let owned = session(&server, Some("alice")).await;
    let now = oauth::unix_now() as f64;
    let mut claims = issuer.claims("alice", &resource(&server));
    claims["exp"] = json!(now + 3600.5);
    claims["nbf"] = json!(now - 0.25);
    claims["iat"] = json!(now - 0.25);
    let reply = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&issuer.key().sign(&claims))
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    // Twice: the remembered token's own expiry is a date too.
    let reply = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&issuer.key().sign(&claims))
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    // A fractional date in the past is still expired.
    claims["exp"] = json!(now - 600.5);
    claims["jti"] = json!("expired");
    let reply = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&issuer.key().sign(&claims))
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{}", reply.text());
    assert!(reply.text().contains("expired"), "{}", reply.text());
}

/// A refusal whose reason is long or not ASCII (it quotes the token's
/// `kid`) still tells the client where to sign in, on every route.
#[tokio::test]
async fn the_challenge_keeps_its_metadata_whatever_the_reason_says() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |_| {}).await;
    let owned = session(&server, Some("alice")).await;
    let claims = issuer.claims("alice", &resource(&server));
    for kid in [
        "clé".to_owned(),
        "k".repeat(300),
        format!("{}é", "k".repeat(250)),
    ] {
        let token = SigningKey::generate(&kid).sign(&claims);
        for (route, reply) in on_every_route(&server, &owned.id, &token).await {
            assert_challenged(&server, &owned.id, &route, &reply, "invalid_token");
            let challenge = reply.header("www-authenticate").unwrap_or_default();
            assert!(
                challenge.contains("error_description=\""),
                "{route}: {challenge}"
            );
        }
    }
}

/// A token that marks header parameters as critical (RFC 7515 §4.1.11) is
/// refused: this server understands no such extension.
#[tokio::test]
async fn a_token_with_critical_headers_is_refused() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |_| {}).await;
    let owned = session(&server, Some("alice")).await;
    let key = issuer.key();
    let claims = issuer.claims("alice", &resource(&server));
    let header = |extra: Value| {
        let mut header = json!({"alg": "ES256", "typ": "JWT", "kid": key.kid});
        if let (Some(header), Value::Object(extra)) = (header.as_object_mut(), extra) {
            header.extend(extra);
        }
        header
    };
    // The same header without `crit` is good: the refusals below are the
    // `crit`'s.
    let good = key.sign_with_header(&header(json!({})), &claims);
    let reply = Rest::new(server.http_url())
        .mcp(&owned.mcp_url, &tools_list())
        .bearer_auth(&good)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    for extra in [
        json!({"crit": ["exp-policy"], "exp-policy": "strict"}),
        json!({"crit": ["b64"], "b64": false}),
        json!({"crit": "exp-policy"}),
    ] {
        let token = key.sign_with_header(&header(extra.clone()), &claims);
        for (route, reply) in on_every_route(&server, &owned.id, &token).await {
            assert_challenged(&server, &owned.id, &route, &reply, "invalid_token");
            assert!(
                reply.text().contains("critical"),
                "{extra}, {route}: {}",
                reply.text()
            );
        }
    }
}

/// Once the key set is old, it is fetched again in the background: an
/// issuer that hangs holds up no request whose key is known, and one such
/// fetch runs at a time.
#[tokio::test]
async fn a_hanging_issuer_holds_up_no_request_whose_key_is_known() {
    let issuer = TestIssuer::start().await;
    let server = server_for(&issuer, |settings| {
        settings.jwks_refresh_min = Duration::ZERO;
        settings.jwks_max_age = Duration::ZERO;
        // Longer than any test waits: a request waiting on the fetch
        // would never be answered here.
        settings.jwks_fetch_timeout = Duration::from_secs(600);
    })
    .await;
    let owned = session(&server, Some("alice")).await;
    let audience = resource(&server);
    let list = |n: u64| {
        let mut claims = issuer.claims("alice", &audience);
        claims["jti"] = json!(n);
        Rest::new(server.http_url())
            .mcp(&owned.mcp_url, &tools_list())
            .bearer_auth(&issuer.key().sign(&claims))
            .send()
    };
    assert_eq!(list(0).await.status(), StatusCode::OK);
    issuer.hang();
    for n in 1..=3 {
        let reply = no_hang(list(n)).await;
        assert_eq!(reply.status(), StatusCode::OK, "{n}: {}", reply.text());
    }
    eventually("a refresh hangs", Duration::from_secs(10), || async {
        issuer.jwks_hanging() == 1
    })
    .await;
    assert_eq!(issuer.jwks_hanging(), 1, "one refresh at a time");
    let reply = no_hang(list(4)).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    // Released, the refresh completes and the next old set is fetched again.
    let fetched = issuer.jwks_fetches();
    issuer.release();
    eventually("the refresh completes", Duration::from_secs(10), || async {
        issuer.jwks_fetches() > fetched
    })
    .await;
}
