//! The hub over time: the idle sweep, the drain before shutdown, shutdown
//! itself, and readiness.

use std::sync::Arc;

use super::Hub;
use crate::audit::{self, Origin};
use crate::escape::Outside;
use crate::outcome::BridgeEnd;

impl Hub {
    /// Removes sessions idle for longer than the TTL that have neither a
    /// bridge nor a call in flight here; sessions this process is using are
    /// kept alive in the directory. Returns how many were removed.
    pub async fn sweep_expired(&self) -> usize {
        let busy: Vec<Arc<str>> = self.inner.local_ids();
        for id in &busy {
            self.inner.directory.touch(id);
        }
        let mut removed = 0;
        for id in self.inner.directory.expired(self.inner.config.session_ttl) {
            if self.inner.local(&id).is_some() {
                continue;
            }
            match self.inner.directory.remove(&id).await {
                Ok(true) => {
                    removed += 1;
                    // A bridge that attached since the check above must not
                    // outlive its session.
                    self.end_local_bridge(&id, BridgeEnd::SessionDeleted);
                    audit::event("session_expired", Outside::session(&id), Origin::default());
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "the idle sweep cannot remove sessions"),
            }
        }
        removed
    }

    /// Runs the idle sweep every `sweep_interval` until shutdown.
    pub async fn run_sweeper(self) {
        let period = self.inner.config.sweep_interval;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.inner.shutdown.cancelled() => return,
                _ = ticker.tick() => {
                    self.sweep_expired().await;
                    if let Some(creations) = &self.inner.creations {
                        creations.forget_idle();
                    }
                }
            }
        }
    }

    /// Ends every bridge with [`BridgeEnd::ShuttingDown`], failing their calls,
    /// and refuses new sessions and bridges from now on.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
        for id in self.inner.local_ids() {
            self.end_local_bridge(&id, BridgeEnd::ShuttingDown);
        }
    }

    /// Whether [`Hub::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// Reports not ready from now on while everything is still served, so
    /// load balancers stop sending new work before [`Hub::shutdown`].
    pub fn begin_drain(&self) {
        self.inner
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the hub can serve: not shutting down, and (in a cluster) its
    /// backend reachable. The error says what is missing.
    pub fn readiness(&self) -> Result<(), String> {
        if self.is_shutting_down()
            || self
                .inner
                .draining
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err("the proxy is shutting down".into());
        }
        self.inner.remote.ready()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::super::HubError;
    use super::super::testing::{App, TTL, detached, hub, session, spawn_call};
    use super::*;
    use crate::config::CoreConfig;
    use crate::proto;

    #[tokio::test(start_paused = true)]
    async fn the_sweep_removes_idle_sessions_only() {
        let hub = hub();
        let idle = session(&hub).await;
        let bridged = session(&hub).await;
        let _app = App::attach(&hub, &bridged).await;

        tokio::time::advance(TTL - Duration::from_secs(1)).await;
        assert_eq!(hub.sweep_expired().await, 0, "not idle long enough yet");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(hub.sweep_expired().await, 1);
        assert!(!hub.session_exists(&idle).await.expect("lookup"));
        assert!(hub.session_exists(&bridged).await.expect("lookup"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_in_flight_keeps_its_session_after_the_bridge_is_gone() {
        let hub = Hub::new(CoreConfig {
            session_ttl: TTL,
            tool_timeout: TTL * 3,
            ping_interval: Duration::from_secs(3600),
            ..CoreConfig::default()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;

        // Long past the TTL, the call still runs: the session stays.
        tokio::time::advance(TTL * 2).await;
        assert_eq!(hub.sweep_expired().await, 0);
        app.answer(&invoke.request_id, json!("done")).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!("done")
        );

        // Once the bridge is gone and the TTL has passed since, it expires.
        drop(app);
        detached(&hub, &id).await;
        tokio::time::advance(TTL).await;
        assert_eq!(hub.sweep_expired().await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bridge_cannot_attach_during_shutdown() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        hub.shutdown();
        assert_eq!(app.next().await.err(), Some(BridgeEnd::ShuttingDown));
        let hello = proto::Hello { session_id: id };
        let (_to_hub, inbound) = mpsc::channel(1);
        let refused = hub
            .attach(hello, ReceiverStream::new(inbound), Origin::default())
            .await;
        assert!(matches!(refused, Err(HubError::ShuttingDown)));
    }
}
