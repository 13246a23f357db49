//! Limits and timeouts that keep a client from holding the server's
//! resources: each is a setting, and each ends with a status that names it.

use std::time::Duration;

use openclaw_proxy_core::CoreConfig;
use openclaw_proxy_core::proto::{self, bridge_service_client::BridgeServiceClient};
use openclaw_proxy_tests::*;

#[tokio::test]
async fn a_grpc_bridge_that_never_says_hello_is_ended() {
    let server = TestServer::start_with(
        CoreConfig {
            hello_timeout: Duration::from_millis(300),
            ..core_config()
        },
        edge_config(),
    )
    .await;
    let mut bridges = BridgeServiceClient::new(server.channel().await);
    let silent = futures_util::stream::pending::<proto::AppMessage>();
    let status = no_hang(bridges.attach(with_token(silent, APP_TOKEN)))
        .await
        .expect_err("no hello, no bridge");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    assert!(
        status
            .message()
            .contains("OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn one_connection_carries_hundreds_of_bridges() {
    // hyper's own limit is 200 streams per HTTP/2 connection; a backend app
    // multiplexing its sessions' bridges needs more.
    const BRIDGES: usize = 300;
    let server = TestServer::start().await;
    let channel = server.channel().await;
    let mut ids = Vec::with_capacity(BRIDGES);
    let mut sessions = server.sessions().await;
    for _ in 0..BRIDGES {
        ids.push(
            sessions
                .create(vec![tool("echo_text", "")])
                .await
                .expect("create")
                .id,
        );
    }
    let mut bridges = Vec::with_capacity(BRIDGES);
    for id in &ids {
        let bridge = no_hang(GrpcBridge::open(channel.clone(), APP_TOKEN, id))
            .await
            .expect("attached on the shared connection");
        bridges.push(bridge);
    }
    assert_eq!(bridges.len(), BRIDGES);
}
