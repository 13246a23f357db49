//! What a client holds that it does not use: connections with nothing open
//! and streams that say nothing are closed after
//! `OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS`, so no credential-less
//! client can keep the connection slots.

use std::time::Duration;

use openclaw_proxy_tests::*;

/// An HTTP/2 connection whose client task answers the server's pings for as
/// long as it runs; the task ends when the server closes the connection.
async fn h2_connection(
    server: &TestServer,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (sender, connection) = h2::client::handshake(tcp).await.expect("handshake");
    (sender, tokio::spawn(connection))
}

async fn ready_status(server: &TestServer) -> u16 {
    no_hang(server.rest().ready()).await.status().as_u16()
}

#[tokio::test]
async fn idle_http2_connections_and_silent_reflection_streams_give_their_slots_back() {
    let server = TestServer::builder()
        .edge(|edge| {
            edge.connections.max_connections = 2;
            edge.connections.idle_timeout = Duration::from_millis(500);
        })
        .start()
        .await;
    // The preface and SETTINGS, pings answered, no stream.
    let (_idle_sender, idle) = h2_connection(&server).await;
    // A reflection stream that never sends its message.
    let (sender, reflecting) = h2_connection(&server).await;
    let mut sender = no_hang(sender.ready()).await.expect("a stream");
    let request = axum::http::Request::post(format!(
        "http://{}/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        server.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("a request");
    let (response, _body) = sender.send_request(request, false).expect("sent");
    // Both slots are taken meanwhile: a third connection is told so.
    assert_eq!(ready_status(&server).await, 429);
    // The server closes both; the client tasks see their connections end.
    no_hang(idle)
        .await
        .expect("join")
        .expect("an idle connection is closed without an error");
    let response = no_hang(response)
        .await
        .expect("the reflection answer's head");
    assert_eq!(response.status(), 200);
    let _ = no_hang(reflecting).await.expect("join");
    // Their slots are free again.
    assert_eq!(ready_status(&server).await, 200);
}

#[tokio::test]
async fn a_quiet_bridge_keeps_its_connection_past_the_idle_timeout() {
    let server = TestServer::builder()
        .edge(|edge| edge.connections.idle_timeout = Duration::from_millis(300))
        .start()
        .await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let _bridge = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("bridge");
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    // Several idle timeouts with nothing sent: the bridge's stream is open,
    // so its connection is not idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let request = openclaw_proxy_core::proto::GetSessionRequest {
        session_id: session.id.clone(),
    };
    let listed = server.hub.get_session(request).await.expect("the session");
    assert!(listed.bridge_connected, "the bridge is still attached");
}
