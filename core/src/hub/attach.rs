//! Bridges: attaching one to a session (replacing the bridge it had),
//! driving it until it ends, and detaching it.

use std::sync::Arc;

use futures_util::Stream;

use super::{Hub, HubError};
use crate::audit::{self, Origin};
use crate::bridge::{self, Bridge, BridgeStream, Inbound, SessionChange, proxy};
use crate::escape::Outside;
use crate::metrics::{Metrics, Transport};
use crate::outcome::BridgeEnd;
use crate::proto::{self, proxy_message};

impl Hub {
    /// Attaches a bridge from `origin` to a session, replacing any bridge it
    /// had; `origin`'s transport labels the bridge in metrics and audit
    /// events.
    ///
    /// `inbound` carries the app's messages after its `hello`; the returned
    /// stream carries the proxy's messages, starting with `attached`, and ends
    /// with the reason the bridge ended.
    ///
    /// The bridge's driver runs in a task of its own. (A transport that ran
    /// it in its writer's task saved a task per bridge, and every lone call
    /// paid for it: see `docs/performance.md`, "A lone call".)
    pub async fn attach<S>(
        &self,
        hello: proto::Hello,
        inbound: S,
        origin: Origin,
    ) -> Result<BridgeStream, HubError>
    where
        S: Stream<Item = Inbound> + Send + 'static,
    {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        if hello.session_id.is_empty() {
            return Err(HubError::MissingSessionId);
        }
        let record = self.record(&hello.session_id).await?;
        let id = record.id.clone();
        let bridge = Bridge::new(
            id.clone(),
            origin,
            self.inner.metrics.clone(),
            self.inner.config.max_client_requests_per_call,
        );
        // First in the queue, before any invocation a call could queue once
        // the bridge is installed.
        bridge.notify(proxy(proxy_message::Kind::Attached(proto::Attached {
            session_id: id.to_string(),
        })));
        let replaced = self.inner.install(&id, &bridge);
        // From here until its driver runs, a failure or a dropped future
        // must not leave the bridge installed.
        let mut unattached = Unattached {
            hub: self,
            id: &id,
            bridge: &bridge,
            armed: true,
        };
        let was_replaced = replaced.is_some();
        if let Some(old) = replaced {
            old.end(BridgeEnd::Replaced);
        }
        // Installed first, checked second: a sweep, delete or shutdown that
        // ran in between either sees this bridge and ends it, or is seen here.
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        if self.inner.directory.get(&id).await?.is_none() {
            return Err(HubError::UnknownSession(hello.session_id));
        }
        self.inner.directory.touch(&id);
        // Before the app hears `attached`, calls from anywhere can find it.
        self.inner.remote.bridge_attached(&record).await;
        let event = if was_replaced {
            "bridge_replaced"
        } else {
            "bridge_attached"
        };
        audit::event(event, Outside::session(&id), origin);
        // Boxed: the driver then holds a pointer, not the transport's
        // stream (and is one type for every transport). Counted from here to
        // the driver's end, however it ends.
        let counted = BridgeCounted::new(&self.inner.metrics, bridge.origin().transport);
        let driver = self.driver(id.clone(), bridge.clone(), Box::pin(inbound), counted);
        unattached.armed = false;
        drop(unattached);
        tokio::spawn(driver);
        Ok(BridgeStream::new(bridge))
    }

    /// The bridge's driver: one per attached bridge, alive as long as the
    /// bridge, so its size is paid by every idle session (a size test keeps
    /// it small).
    fn driver(
        &self,
        session: Arc<str>,
        bridge: Arc<Bridge>,
        inbound: InboundStream,
        counted: BridgeCounted,
    ) -> BridgeDriver {
        let config = &self.inner.config;
        let driving = bridge::Driving::new(bridge::Liveness {
            ping_interval: config.ping_interval,
            missed_pings_allowed: config.missed_pings_allowed,
            write_timeout: config.bridge_write_timeout,
        });
        BridgeDriver {
            hub: self.clone(),
            session,
            bridge,
            inbound,
            driving,
            detached: false,
            _counted: counted,
        }
    }

    /// Forgets an ended bridge if it is still the session's current one, and
    /// the session's local state once nothing uses it.
    fn detach(&self, session_id: &Arc<str>, bridge: &Arc<Bridge>, end: BridgeEnd) {
        let Some(local) = self.inner.local(session_id) else {
            return;
        };
        let current = {
            let mut state = local.state();
            let current = state
                .bridge
                .as_ref()
                .is_some_and(|attached| Arc::ptr_eq(attached, bridge));
            if current {
                state.bridge = None;
            }
            current
        };
        if current {
            self.inner.remote.bridge_detached(session_id);
            audit::bridge_ended(
                Outside::session(session_id),
                bridge.origin(),
                &end.reason_for_app(),
            );
        }
        self.inner.directory.touch(session_id);
        self.inner.forget_if_unused(session_id);
    }
}

/// The app's messages, as the driver reads them.
type InboundStream = std::pin::Pin<Box<dyn Stream<Item = Inbound> + Send>>;

/// One bridge's driver: reads the app's messages, applies the changes they
/// announce, keeps the bridge alive, and detaches it when it ends (see
/// [`Hub::attach`]; it is a state machine rather than an `async fn`
/// to stay small). Dropped before its end, it ends the bridge.
pub(crate) struct BridgeDriver {
    hub: Hub,
    session: Arc<str>,
    bridge: Arc<Bridge>,
    inbound: InboundStream,
    driving: bridge::Driving,
    detached: bool,
    _counted: BridgeCounted,
}

impl Drop for BridgeDriver {
    fn drop(&mut self) {
        if !self.detached {
            self.bridge.end(BridgeEnd::Disconnected);
            let end = self.bridge.end_reason().unwrap_or(BridgeEnd::Disconnected);
            self.hub.detach(&self.session, &self.bridge, end);
        }
    }
}

impl std::future::Future for BridgeDriver {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let this = &mut *self;
        let (hub, session, bridge) = (&this.hub, &this.session, &this.bridge);
        let mut on_change = |change| hub.apply_change(session, bridge, change);
        loop {
            let driven = this
                .driving
                .poll(cx, bridge, this.inbound.as_mut(), &mut on_change);
            match std::task::ready!(driven) {
                bridge::Driven::Ended(end) => {
                    this.detached = true;
                    hub.detach(session, bridge, end);
                }
                bridge::Driven::Done => return std::task::Poll::Ready(()),
            }
        }
    }
}

/// Ends and detaches a bridge whose attach did not complete (an error, or
/// the caller dropped the future), unless disarmed once its driver runs.
struct Unattached<'a> {
    hub: &'a Hub,
    id: &'a Arc<str>,
    bridge: &'a Arc<Bridge>,
    armed: bool,
}

impl Drop for Unattached<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.bridge.end(BridgeEnd::SessionDeleted);
            self.hub
                .detach(self.id, self.bridge, BridgeEnd::SessionDeleted);
        }
    }
}

impl Hub {
    /// Applies a change the app announced on its bridge: declarations
    /// beside the bridge (which keeps reading results and answering pings
    /// meanwhile), answered on it.
    fn apply_change(&self, session: &Arc<str>, bridge: &Arc<Bridge>, change: SessionChange) {
        match change {
            SessionChange::Declarations(update) => {
                let Some(slot) = bridge.begin_update() else {
                    return;
                };
                let (hub, id) = (self.clone(), session.clone());
                tokio::spawn(async move {
                    let answer = hub.update_tools(&id, *update).await;
                    slot.bridge().notify(tools_updated(answer));
                });
            }
            SessionChange::ResourceUpdated(uri) => {
                tracing::debug!(
                    session = Outside::session(session).field(),
                    uri = Outside::new(&uri).field(),
                    "resource updated"
                );
                self.publish(session, super::SessionEvent::ResourceUpdated(uri.into()));
            }
        }
    }
}

/// The answer on the bridge to a tool update it carried.
fn tools_updated(answer: Result<proto::UpdateToolsResponse, HubError>) -> proto::ProxyMessage {
    match answer {
        Ok(updated) => proxy(proxy_message::Kind::ToolsUpdated(proto::ToolsUpdated {
            tools: updated.tools,
            resources: updated.resources,
            resource_templates: updated.resource_templates,
            prompts: updated.prompts,
        })),
        Err(error) => proxy(proxy_message::Kind::Error(proto::ErrorNotice {
            message: format!("the tool update was refused: {error}"),
            request_id: String::new(),
        })),
    }
}

/// One attached bridge in the `bridges` gauge, from its driver's start to
/// the end of its task.
struct BridgeCounted {
    metrics: Arc<Metrics>,
    transport: Transport,
}

impl BridgeCounted {
    fn new(metrics: &Arc<Metrics>, transport: Transport) -> Self {
        metrics.bridge(transport, 1);
        Self {
            metrics: metrics.clone(),
            transport,
        }
    }
}

impl Drop for BridgeCounted {
    fn drop(&mut self) {
        self.metrics.bridge(self.transport, -1);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::super::Backend;
    use super::super::testing::{App, config, hub, session, spawn_call};
    use super::*;
    use crate::config::CoreConfig;
    use crate::delivery::NoRemote;
    use crate::directory::{DirectoryError, MemoryDirectory, SessionDirectory, SessionRecord};
    use crate::outcome::InvokeError;
    use futures_util::StreamExt;

    /// A directory in which the session disappears between attach's lookup
    /// and its check: the interleaving of an attach with a concurrent expiry
    /// or delete, forced.
    #[derive(Default)]
    struct VanishingDirectory(MemoryDirectory);

    impl SessionDirectory for VanishingDirectory {
        fn create(
            &self,
            record: Arc<SessionRecord>,
        ) -> futures_util::future::BoxFuture<'_, Result<(), DirectoryError>> {
            self.0.create(record)
        }
        fn cached(&self, id: &str) -> Option<Arc<SessionRecord>> {
            self.0.cached(id)
        }
        fn get<'a>(
            &'a self,
            id: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<Option<Arc<SessionRecord>>, DirectoryError>>
        {
            Box::pin(async move {
                self.0.remove(id).await?;
                Ok(None)
            })
        }
        fn touch(&self, id: &str) {
            self.0.touch(id);
        }
        fn remove<'a>(
            &'a self,
            id: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<bool, DirectoryError>> {
            self.0.remove(id)
        }
        fn update_offer<'a>(
            &'a self,
            id: &'a str,
            offer: crate::directory::Offer,
        ) -> futures_util::future::BoxFuture<'a, Result<bool, DirectoryError>> {
            self.0.update_offer(id, offer)
        }
        fn expired(&self, ttl: Duration) -> Vec<Arc<str>> {
            self.0.expired(ttl)
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn owned_by(&self, owner: &crate::caller::Owner) -> Vec<Arc<SessionRecord>> {
            self.0.owned_by(owner)
        }
        fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
            self.0.changes()
        }
    }

    #[tokio::test]
    async fn updates_beyond_those_being_applied_are_refused_and_the_app_told() {
        let hub = hub();
        let id = session(&hub).await;
        let update = || {
            Inbound::Message(proto::AppMessage {
                kind: Some(proto::app_message::Kind::UpdateTools(
                    proto::UpdateTools::default(),
                )),
            })
        };
        // A burst the driver reads before any update it started can run.
        let burst = bridge::UPDATES_IN_FLIGHT + 8;
        let inbound = futures_util::stream::iter((0..burst).map(move |_| update()))
            .chain(futures_util::stream::pending());
        let hello = proto::Hello {
            session_id: id.clone(),
        };
        let mut outbound = hub
            .attach(hello, inbound, Origin::default())
            .await
            .expect("attach");
        let (mut updated, mut refused) = (0, 0);
        while updated + refused < burst {
            match outbound
                .next()
                .await
                .expect("open")
                .expect("not ended")
                .kind
            {
                Some(proxy_message::Kind::ToolsUpdated(_)) => updated += 1,
                Some(proxy_message::Kind::Error(notice)) => {
                    assert!(
                        notice.message.contains("too many updates"),
                        "{}",
                        notice.message
                    );
                    refused += 1;
                }
                _ => {}
            }
        }
        assert_eq!(updated, bridge::UPDATES_IN_FLIGHT);
        assert_eq!(refused, 8);
    }

    #[tokio::test]
    async fn a_bridges_driver_task_stays_small() {
        // One driver task per attached bridge, alive as long as it: every
        // byte here is a byte of every idle session. It was 1.5 KB (2 KB on
        // the gRPC bridge) while it held the transport's stream inline, and
        // 608 bytes as an `async fn` (224 as a state machine).
        let hub = hub();
        let id: Arc<str> = "s".into();
        let bridge = Bridge::new(id.clone(), Origin::default(), hub.inner.metrics.clone(), 1);
        let counted = BridgeCounted::new(&hub.inner.metrics, Transport::Grpc);
        let inbound: InboundStream = Box::pin(futures_util::stream::pending());
        let driver = hub.driver(id, bridge, inbound, counted);
        let size = std::mem::size_of_val(&driver);
        println!("driver {size}");
        assert!(size <= 224, "the driver's future is {size} bytes");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_bridge_replaces_the_old_one_and_fails_its_calls_at_once() {
        let hub = hub();
        let id = session(&hub).await;
        let mut old = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = old.next_invoke().await;
        assert_eq!(invoke.request_id, format!("{id}:1"));

        let mut new = App::attach(&hub, &id).await;
        assert_eq!(old.next().await.err(), Some(BridgeEnd::Replaced));
        let error = call.await.expect("join").expect_err("cut off");
        assert!(
            matches!(error, InvokeError::BridgeEnded(BridgeEnd::Replaced)),
            "{error}"
        );

        // The new bridge serves the next call, with the next request id.
        let call = spawn_call(&hub, &id);
        let invoke = new.next_invoke().await;
        assert_eq!(invoke.request_id, format!("{id}:2"));
        new.answer(&invoke.request_id, json!("fresh")).await;
        let outcome = call.await.expect("join").expect("answered");
        assert_eq!(outcome.content_value(), json!("fresh"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_app_that_stops_reading_is_dropped_and_its_calls_fail_at_once() {
        let hub = Hub::new(CoreConfig {
            bridge_write_timeout: Duration::from_secs(5),
            tool_timeout: Duration::from_secs(600),
            ..config()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        app.next_invoke().await;
        // A reading app is never dropped, however long its call runs.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(hub.inner.local_bridge(&id).is_some(), "a reading app stays");
        // Now it stops reading while the proxy has something for it.
        let unread = spawn_call(&hub, &id);
        tokio::time::advance(Duration::from_secs(7)).await;
        for call in [call, unread] {
            let error = call.await.expect("join").expect_err("dropped");
            assert!(
                matches!(error, InvokeError::BridgeEnded(BridgeEnd::Stalled)),
                "{error}"
            );
        }
        assert_eq!(app.next().await.err(), Some(BridgeEnd::Stalled));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bridge_cannot_stay_on_a_session_removed_while_it_attaches() {
        let hub = Hub::with_backend(
            CoreConfig::default(),
            Backend {
                directory: Arc::new(VanishingDirectory::default()),
                remote: Arc::new(NoRemote),
            },
        );
        let id = session(&hub).await;
        let hello = proto::Hello {
            session_id: id.clone(),
        };
        let (_to_hub, inbound) = mpsc::channel(1);
        let refused = hub
            .attach(hello, ReceiverStream::new(inbound), Origin::default())
            .await;
        assert!(matches!(refused, Err(HubError::UnknownSession(_))));
        assert!(hub.inner.local(&id).is_none(), "no bridge is left behind");
    }
}
