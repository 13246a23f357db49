//! The task calls running in this process. Nobody may be listening while
//! the app reports progress, writes log records or asks the client
//! something: those wait here, bounded (reports and records give way
//! oldest first; the app's requests never do, and their number per call is
//! bounded by the core), until a `tasks/result` request listens and
//! receives them on its stream. A request of the app moves the task to
//! `input_required` until the client answers it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::future::BoxFuture;
use openclaw_proxy_core::asking::ClientAsk;
use openclaw_proxy_core::progress::{CallEvent, LogLevel, ProgressReceiver, ProgressSink};
use openclaw_proxy_core::tasks::{TaskStatus, Tasks};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::ProgressToken;
use tracing::Instrument;

use super::{RELATED_TASK, wire};

/// Reports and log records kept per task while nobody listens.
const WAITING: usize = 64;

/// A task's call as the `tools/call` that made it starts it: the call
/// itself, and what it sends its caller.
pub struct Started {
    /// The call, from the bridge's answer to the MCP result.
    pub call: BoxFuture<'static, Result<RawToolResult, McpError>>,
    /// What the app sends its caller during the call.
    pub events: ProgressReceiver,
    /// The `progressToken` of the `tools/call`, for its progress reports.
    pub token: Option<ProgressToken>,
    /// The least severe log record the client wants.
    pub log_level: Option<LogLevel>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data, each change made whole under the lock.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One task's call running here.
pub struct Run {
    /// The `progressToken` of the `tools/call`.
    pub token: Option<ProgressToken>,
    /// The least severe log record the client wants.
    pub log_level: Option<LogLevel>,
    /// The `tasks/result` request listening now, by its number.
    listener: Mutex<Option<(u64, ProgressSink)>>,
    /// What came while nobody listened, oldest first.
    waiting: Mutex<VecDeque<CallEvent>>,
    listeners: std::sync::atomic::AtomicU64,
}

/// A `tasks/result` request listening to a run, until dropped.
pub struct Listener {
    run: Arc<Run>,
    number: u64,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut listener = lock(&self.run.listener);
        if listener
            .as_ref()
            .is_some_and(|(number, _)| *number == self.number)
        {
            *listener = None;
        }
    }
}

impl Run {
    /// Listens with `sink` (a `tasks/result` request's): what waited is
    /// handed over first. A later listener takes over from an earlier one.
    pub fn listen(run: Arc<Self>, sink: ProgressSink) -> Listener {
        let number = run
            .listeners
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut listener = lock(&run.listener);
            for event in lock(&run.waiting).drain(..) {
                pass(&sink, event);
            }
            *listener = Some((number, sink));
        }
        Listener { run, number }
    }

    fn deliver(&self, event: CallEvent) {
        let listener = lock(&self.listener);
        if let Some((_, sink)) = listener.as_ref() {
            pass(sink, event);
            return;
        }
        let mut waiting = lock(&self.waiting);
        if waiting.len() >= WAITING
            && let Some(oldest) = waiting
                .iter()
                .position(|event| !matches!(event, CallEvent::Ask(_)))
        {
            waiting.remove(oldest);
        }
        waiting.push_back(event);
    }
}

/// Hands one event to a listener's sink.
fn pass(sink: &ProgressSink, event: CallEvent) {
    match event {
        CallEvent::Progress(report) => {
            sink.push(report);
        }
        CallEvent::Log(record) => {
            let level = LogLevel::parse(&record.level).unwrap_or(LogLevel::Info);
            sink.push_log(level, record);
        }
        CallEvent::Ask(ask) => sink.push_ask(ask),
    }
}

/// The task calls running in this process, and the app's requests to the
/// client they wait on.
pub struct Runs {
    store: Arc<Tasks>,
    runs: Mutex<HashMap<String, Arc<Run>>>,
    /// The app's requests waiting for the client, by the id the client
    /// answers each by, with their task.
    asks: Mutex<HashMap<String, (String, ClientAsk)>>,
}

impl Runs {
    pub fn new(store: Arc<Tasks>) -> Self {
        Self {
            store,
            runs: Mutex::default(),
            asks: Mutex::default(),
        }
    }

    /// The run of task `id`, when it runs here.
    pub fn get(&self, id: &str) -> Option<Arc<Run>> {
        lock(&self.runs).get(id).cloned()
    }

    /// Runs task `id`'s call to its end, detached from the request that
    /// started it, and keeps its outcome in the store.
    pub fn start(self: &Arc<Self>, id: String, started: Started) {
        let run = Arc::new(Run {
            token: started.token.clone(),
            log_level: started.log_level,
            listener: Mutex::default(),
            waiting: Mutex::default(),
            listeners: std::sync::atomic::AtomicU64::new(0),
        });
        lock(&self.runs).insert(id.clone(), run.clone());
        let runs = self.clone();
        tokio::spawn(async move { runs.drive(id, run, started).await }.in_current_span());
    }

    async fn drive(&self, id: String, run: Arc<Run>, started: Started) {
        let Started {
            mut call,
            mut events,
            ..
        } = started;
        let outcome = loop {
            tokio::select! {
                biased;
                outcome = &mut call => break outcome,
                event = events.recv_event() => match event {
                    Some(event) => self.deliver(&id, &run, event),
                    None => break (&mut call).await,
                },
            }
        };
        while let Some(event) = events.try_recv_event() {
            self.deliver(&id, &run, event);
        }
        let (outcome, failed) = wire::outcome_of(outcome);
        let ended = self.store.finish(&id, outcome, failed);
        tracing::info!(
            status = ended
                .as_ref()
                .map_or("expired", |state| state.status.as_str()),
            "task ended"
        );
        lock(&self.runs).remove(&id);
        lock(&self.asks).retain(|_, (task, _)| task != &id);
    }

    /// The app's requests to the client that task `id` waits on, by the id
    /// each is answered by (2026-07-28 `inputRequests`).
    pub fn waiting_asks(&self, id: &str) -> Vec<(String, ClientAsk)> {
        let mut asks: Vec<(String, ClientAsk)> = lock(&self.asks)
            .iter()
            .filter(|(_, (task, _))| task == id)
            .map(|(key, (_, ask))| (key.clone(), ask.clone()))
            .collect();
        asks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        asks
    }

    /// Whether `answered_by` is a request task `id` waits on.
    pub fn waits_on(&self, id: &str, answered_by: &str) -> bool {
        lock(&self.asks)
            .get(answered_by)
            .is_some_and(|(task, _)| task == id)
    }

    fn deliver(&self, id: &str, run: &Run, event: CallEvent) {
        let event = match event {
            CallEvent::Ask(mut ask) => {
                let answered_by =
                    openclaw_proxy_core::hub::client_request_id(&ask.request_id, &ask.id);
                lock(&self.asks).insert(answered_by, (id.to_owned(), ask.clone()));
                self.store.set_status(
                    id,
                    TaskStatus::InputRequired,
                    "The tool asks the client something: call tasks/result to receive the request.",
                );
                ask.params_json = related(&ask.params_json, id);
                CallEvent::Ask(ask)
            }
            other => other,
        };
        run.deliver(event);
    }

    /// The client answered the app's request `answered_by`: its task works
    /// on once nothing else waits for the client.
    pub fn answered(&self, answered_by: &str) {
        let mut asks = lock(&self.asks);
        let Some((task, _)) = asks.remove(answered_by) else {
            return;
        };
        if !asks.values().any(|(waiting, _)| waiting == &task) {
            drop(asks);
            self.store.set_status(&task, TaskStatus::Working, "");
        }
    }
}

/// The app's request params with the task named in their `_meta`, as the
/// specification asks of every request related to a task.
fn related(params_json: &str, task_id: &str) -> String {
    let Ok(serde_json::Value::Object(mut params)) = serde_json::from_str(params_json) else {
        return params_json.to_owned();
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    if let serde_json::Value::Object(meta) = meta {
        meta.insert(
            RELATED_TASK.to_owned(),
            serde_json::json!({ "taskId": task_id }),
        );
    }
    serde_json::Value::Object(params).to_string()
}
