//! Native TLS on the one port (issue 12): HTTPS (HTTP/2 and HTTP/1.1 by
//! ALPN), a WSS bridge, a gRPC bridge over TLS and MCP calls, with a
//! certificate the test makes (`rcgen`); answer URLs say `https`/`wss`; a
//! certificate replaced on disk is served to new connections while the
//! bridges already open keep working.
//!
//! The MCP client is rmcp's, over reqwest, which this workspace builds
//! without TLS; it reaches the proxy through a TLS-originating forwarder in
//! the test (plain HTTP in, TLS to the proxy), as a service-mesh sidecar
//! would. Everything else speaks TLS itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use openclaw_proxy_edge::tls::TlsFiles;
use openclaw_proxy_tests::*;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig as McpClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::{TlsConnector, client::TlsStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use super::security::{CapturedLogs, GrpcBridgeEnd, body, grpc_attach, with_bearer};

/// A certificate authority made for the test.
struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        Self { issuer }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `localhost` and `127.0.0.1`, as PEM files.
    fn issue_into(&self, files: &TlsFiles) {
        let key = KeyPair::generate().expect("server key");
        let certificate = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("server params")
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        std::fs::write(&files.cert, certificate.pem()).expect("write certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
    }
}

/// A directory of its own for one test's PEM files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("openclaw-proxy-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn files(&self) -> TlsFiles {
        TlsFiles {
            reload_interval: Duration::from_millis(50),
            ..TlsFiles::new(self.0.join("cert.pem"), self.0.join("key.pem"))
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn tls_server(files: TlsFiles) -> TestServer {
    TestServer::builder().tls(files).start().await
}

fn client_config(authority: CertificateDer<'static>, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(authority).expect("trust the test CA");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Arc::new(config)
}

async fn tls_connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("server name");
    TlsConnector::from(config).connect(name, tcp).await
}

/// `POST /v1/chat/sessions` over HTTPS and HTTP/2 (negotiated by ALPN).
async fn create_over_h2(server: &TestServer, authority: CertificateDer<'static>) -> Value {
    let tls = tls_connect(server.addr, client_config(authority, &[b"h2", b"http/1.1"]))
        .await
        .expect("TLS handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut sender = openclaw_proxy_tests::http2_over(tls).await;
    let request = hyper::Request::post(format!(
        "https://localhost:{}/v1/chat/sessions",
        server.addr.port()
    ))
    .header("authorization", format!("Bearer {APP_TOKEN}"))
    .header("content-type", "application/json")
    .body(http_body_util::Full::new(bytes::Bytes::from(
        body().to_string(),
    )))
    .expect("request");
    let response = sender.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&bytes).expect("JSON reply")
}

/// `GET /health` over HTTPS and HTTP/1.1.
async fn health_over_http1(server: &TestServer, authority: CertificateDer<'static>) -> String {
    let tls = tls_connect(server.addr, client_config(authority, &[b"http/1.1"]))
        .await
        .expect("TLS handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("HTTP/1.1 over TLS");
    tokio::spawn(connection);
    let request = hyper::Request::get("/health")
        .header("host", format!("localhost:{}", server.addr.port()))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A WSS bridge that answers every call with its arguments.
async fn wss_echo_app(
    server: &TestServer,
    authority: CertificateDer<'static>,
    bridge_url: &str,
    token: &str,
) -> tokio::task::JoinHandle<()> {
    use futures_util::{SinkExt, StreamExt};
    assert!(bridge_url.starts_with("wss://"), "{bridge_url}");
    let tls = tls_connect(server.addr, client_config(authority, &[b"http/1.1"]))
        .await
        .expect("TLS handshake");
    let mut request = bridge_url.into_client_request().expect("request");
    let value = format!("Bearer {token}").parse().expect("header");
    request.headers_mut().insert("authorization", value);
    let (mut socket, _) = tokio_tungstenite::client_async(request, tls)
        .await
        .expect("WSS handshake");
    tokio::spawn(async move {
        while let Some(Ok(frame)) = socket.next().await {
            let Message::Text(text) = frame else { continue };
            let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if frame["type"] == "invoke_tool" {
                let result = json!({"type": "invoke_result", "request_id": frame["request_id"],
                                    "ok": true, "content": frame["arguments"]});
                if socket
                    .send(Message::Text(result.to_string().into()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    })
}

/// A gRPC channel over TLS, verifying the proxy against `authority`.
async fn grpc_channel(server: &TestServer, authority_pem: &str) -> Channel {
    Channel::from_shared(format!("https://localhost:{}", server.addr.port()))
        .expect("URI")
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(authority_pem))
                .domain_name("localhost"),
        )
        .expect("TLS config")
        .connect()
        .await
        .expect("gRPC over TLS")
}

/// Plain HTTP in on a loopback port, TLS out to the proxy: for clients built
/// without TLS. Stops when dropped.
struct TlsForwarder {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TlsForwarder {
    async fn start(upstream: SocketAddr, authority: CertificateDer<'static>) -> Self {
        let config = client_config(authority, &[b"http/1.1"]);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let config = config.clone();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tls_connect(upstream, config).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, task }
    }

    /// rmcp's client on `/v1/mcp/{session}` with the session's MCP token.
    async fn mcp_echo(&self, session_id: &str, mcp_token: &str, text: &str) -> Value {
        let config = StreamableHttpClientTransportConfig::with_uri(format!(
            "http://{}/v1/mcp/{session_id}",
            self.addr
        ))
        .auth_header(mcp_token);
        let transport =
            StreamableHttpClientTransport::with_client(openclaw_proxy_tests::http_client(), config);
        let client = McpClientConfig::default()
            .serve(transport)
            .await
            .expect("MCP over TLS");
        let Value::Object(arguments) = json!({"text": text}) else {
            unreachable!("an object")
        };
        let result = client
            .call_tool(CallToolRequestParams::new("echo_text").with_arguments(arguments))
            .await
            .expect("tools/call over TLS");
        let _ = client.cancel().await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        result.structured_content.unwrap_or(Value::Null)
    }
}

impl Drop for TlsForwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn one_tls_port_serves_https_wss_grpc_and_mcp() {
    let scratch = Scratch::new("serves");
    let files = scratch.files();
    let authority = Authority::new();
    authority.issue_into(&files);
    let server = tls_server(files).await;

    // HTTPS over HTTP/2 and HTTP/1.1; the answer's URLs say so.
    let reply = create_over_h2(&server, authority.der()).await;
    let port = server.addr.port();
    let id = reply["mcpSessionId"].as_str().expect("id").to_owned();
    assert_eq!(
        reply["bridge_url"],
        format!("wss://localhost:{port}/v1/chat/sessions/{id}/bridge")
    );
    assert_eq!(
        reply["mcp_url"],
        format!("https://localhost:{port}/v1/mcp/{id}")
    );
    assert_eq!(health_over_http1(&server, authority.der()).await, "ok");

    // Cleartext on the TLS port gets no HTTP answer.
    let plain = Rest::new(server.http_url()).get("/health").try_send().await;
    assert!(plain.is_err(), "{plain:?}");

    // A WSS bridge serves the session's MCP calls.
    let bridge_url = reply["bridge_url"].as_str().expect("url");
    let session_token = reply["session_token"].as_str().expect("token");
    let mcp_token = reply["mcp_token"].as_str().expect("token");
    let _app = wss_echo_app(&server, authority.der(), bridge_url, session_token).await;
    server
        .wait_for_session(&id, "the WSS bridge attached", |session| {
            session.bridge_connected
        })
        .await;
    let forwarder = TlsForwarder::start(server.addr, authority.der()).await;
    let content = no_hang(forwarder.mcp_echo(&id, mcp_token, "over wss")).await;
    assert_eq!(content, json!({"text": "over wss"}));

    // A session created and bridged over gRPC with TLS.
    let channel = grpc_channel(&server, &authority.pem()).await;
    let created = openclaw_proxy_core::proto::session_service_client::SessionServiceClient::new(
        channel.clone(),
    )
    .create_session(with_bearer(
        session_request(vec![tool("echo_text", "")]),
        Some(APP_TOKEN),
    ))
    .await
    .expect("CreateSession over TLS")
    .into_inner();
    let mut bridge: GrpcBridgeEnd =
        grpc_attach(channel, &created.session_id, Some(&created.session_token))
            .await
            .expect("Attach over TLS");
    let (content, invoke) = no_hang(async {
        tokio::join!(
            forwarder.mcp_echo(&created.session_id, &created.mcp_token, "over grpc"),
            bridge.echo_one()
        )
    })
    .await;
    assert_eq!(invoke.tool_name, "echo_text");
    assert_eq!(content, json!({"text": "over grpc"}));
}

#[tokio::test]
async fn a_replaced_certificate_is_served_to_new_connections_and_bridges_stay() {
    let scratch = Scratch::new("reload");
    let files = scratch.files();
    let first = Authority::new();
    first.issue_into(&files);
    let server = tls_server(files.clone()).await;
    let reply = create_over_h2(&server, first.der()).await;
    let id = reply["mcpSessionId"].as_str().expect("id").to_owned();
    let _app = wss_echo_app(
        &server,
        first.der(),
        reply["bridge_url"].as_str().expect("url"),
        reply["session_token"].as_str().expect("token"),
    )
    .await;
    server
        .wait_for_session(&id, "the WSS bridge attached", |session| {
            session.bridge_connected
        })
        .await;

    // A certificate from another authority replaces the files.
    let second = Authority::new();
    second.issue_into(&files);
    let config = client_config(second.der(), &[b"http/1.1"]);
    eventually(
        "the new certificate served",
        Duration::from_secs(10),
        || {
            let config = config.clone();
            let addr = server.addr;
            async move { tls_connect(addr, config).await.is_ok() }
        },
    )
    .await;
    assert!(
        tls_connect(server.addr, client_config(first.der(), &[b"http/1.1"]))
            .await
            .is_err(),
        "the old certificate is no longer served"
    );

    // The bridge opened under the old certificate is still attached and
    // answers a call that arrives under the new one.
    let forwarder = TlsForwarder::start(server.addr, second.der()).await;
    let content = no_hang(forwarder.mcp_echo(
        &id,
        reply["mcp_token"].as_str().expect("token"),
        "after reload",
    ))
    .await;
    assert_eq!(content, json!({"text": "after reload"}));
}

// A current-thread runtime, so the subscriber set here sees the reloader.
#[tokio::test(flavor = "current_thread")]
async fn a_broken_certificate_file_keeps_the_old_certificate() {
    let logs = CapturedLogs::default();
    let _guard = logs.install();
    let scratch = Scratch::new("broken");
    let files = scratch.files();
    let authority = Authority::new();
    authority.issue_into(&files);
    let server = tls_server(files.clone()).await;
    assert_eq!(health_over_http1(&server, authority.der()).await, "ok");
    std::fs::write(&files.cert, "not a certificate").expect("write");
    eventually("the broken file was tried", Duration::from_secs(10), || {
        let tried = logs
            .lines()
            .iter()
            .any(|line| line.contains("TLS certificate not reloaded"));
        async move { tried }
    })
    .await;
    // Handshakes still succeed with the certificate loaded at start.
    assert_eq!(health_over_http1(&server, authority.der()).await, "ok");
    // A server refuses to start on broken files, naming them.
    let refused = openclaw_proxy_edge::tls::Tls::load(files.clone()).err();
    let message = refused.map(|error| error.to_string()).unwrap_or_default();
    assert!(message.contains("cert.pem"), "{message}");
}

/// A client that completes the TLS handshake and then sends nothing, or
/// part of the HTTP/2 preface, is closed at the header-read timeout, as on
/// a plain port; a real client is served after them.
#[tokio::test]
async fn a_tls_client_that_never_says_its_protocol_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let scratch = Scratch::new("first-bytes");
    let files = scratch.files();
    let authority = Authority::new();
    authority.issue_into(&files);
    let server = TestServer::builder()
        .tls(files)
        .edge(|edge| edge.connections.header_read_timeout = Duration::from_millis(500))
        .start()
        .await;
    for sent in [&b""[..], b"P", b"PRI * HTTP/2.0\r\n"] {
        let mut stream = tls_connect(server.addr, client_config(authority.der(), &[b"h2"]))
            .await
            .expect("handshake");
        stream.write_all(sent).await.expect("write");
        let mut rest = Vec::new();
        // A close, or a reset: either ends the read.
        let _ = no_hang(stream.read_to_end(&mut rest)).await;
        assert!(rest.is_empty(), "{sent:?}: {rest:?}");
    }
    assert_eq!(health_over_http1(&server, authority.der()).await, "ok");
}
