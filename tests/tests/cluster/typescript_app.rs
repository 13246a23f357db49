//! An app written with the TypeScript package (`proto/typescript`) whose
//! bridge is on one node while its caller is on another: the call, its
//! progress and the question the app asks the user all cross the cluster.

use std::path::Path;
use std::time::Duration;

use openclaw_proxy_tests::eventually;
use openclaw_proxy_tests::texts;
use openclaw_proxy_tests::typescript_package::{
    Host, PackageApp, call_tool, connect, typescript_app_package,
};
use serde_json::json;

use super::cluster;

#[tokio::test]
async fn a_typescript_package_app_bridged_on_one_node_serves_a_caller_on_another() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let installed = typescript_app_package(Path::new(env!("CARGO_TARGET_TMPDIR"))).await;
    let mut app = PackageApp::start(&installed, &b.url(), "grpc");
    let session_id = app.next_session().await;
    let host = Host::default();
    let client = connect(&a.url(), &session_id, host.clone()).await;

    // The session is reported before its bridge attaches; the cluster knows
    // of the bridge once it has.
    let mut echoed = call_tool(&client, "echo_text", json!({"text": "across"})).await;
    for _ in 0..500 {
        if texts(&echoed) != ["Bridge is not connected."] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        echoed = call_tool(&client, "echo_text", json!({"text": "across"})).await;
    }
    assert_eq!(
        echoed.structured_content,
        Some(json!({"echoed_text": "across"})),
        "{echoed:?}"
    );

    let done = call_tool(&client, "steps", json!({"count": 2})).await;
    assert_eq!(texts(&done), ["done"]);
    eventually("two progress reports", Duration::from_secs(10), || {
        std::future::ready(host.progress.lock().map(|p| p.len() >= 2).unwrap_or(false))
    })
    .await;

    let color = call_tool(&client, "ask_color", json!({})).await;
    assert_eq!(texts(&color), ["accept: teal"]);
    let _ = client.cancel().await;
    let _ = app.child.start_kill();
    let _ = app.child.wait().await;
}
