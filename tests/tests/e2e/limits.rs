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
