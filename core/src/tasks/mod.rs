//! MCP tasks: a tool call that outlives the request that made it.
//!
//! A client that calls a tool "as a task" is answered at once with a task
//! id; the app runs an ordinary call, and its result waits here until the
//! client fetches it (`tasks/result`), however long the call took and
//! whether or not the client stayed connected. The proxy, not the app,
//! holds the task: apps know nothing of tasks beyond the id their call
//! carries (`InvokeTool.task_id`).
//!
//! [`Tasks`] is the store: each task's state (status, timestamps, `ttl`),
//! its owner (the session and the credential that created it: no other
//! credential learns that it exists), and once it ended its outcome, kept
//! as the JSON text of the answer so that the result reaches the client as
//! the app wrote it. The store is one concrete type over a backend; memory
//! is the single node's. A shared backend (the cluster's JetStream KV
//! bucket) keeps the same entries under the task id: [`StoredTask`] is
//! already the serialised form, and everything a node must know of a task
//! that another node runs is in it; what stays per process is only the
//! running call's cancellation and its waiters.
//!
//! Bounds: a task lives at most `max_ttl` (the client may ask for less),
//! results are bounded in bytes per session and in total (a result over a
//! bound fails its task with a sentence naming the setting), and expired
//! tasks are dropped as the store is used.

mod time;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::caller::Caller;

pub use time::rfc3339;

/// The settings of tasks.
#[derive(Clone, Debug)]
pub struct TaskSettings {
    /// Whether clients may call tools as tasks at all (the capability is
    /// advertised only then).
    pub enabled: bool,
    /// The longest a task and its result are kept; a client asking for
    /// more (or nothing) gets this.
    pub max_ttl: Duration,
    /// How often a client is told to poll.
    pub poll_interval: Duration,
    /// The bytes of results one session's tasks may hold at once.
    pub max_result_bytes_per_session: usize,
    /// The bytes of results all tasks may hold at once.
    pub max_result_bytes_total: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            max_result_bytes_per_session: 16 * 1024 * 1024,
            max_result_bytes_total: 256 * 1024 * 1024,
        }
    }
}

/// Tasks listed per page of `tasks/list`.
pub const PAGE_SIZE: usize = 50;

/// Where a task stands (MCP's `TaskStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The call runs.
    Working,
    /// The app asked the client something and waits for its answer.
    InputRequired,
    /// The call answered.
    Completed,
    /// The call answered with an error, or did not answer.
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl TaskStatus {
    /// Its MCP name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether nothing changes any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Who may open a task: the session it was created in and the credential
/// that created it (its kind, and for an OAuth access token its issuer and
/// subject). Compared whole; every other owner is told the task does not
/// exist.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskOwner {
    /// The session.
    pub session_id: String,
    /// The credential, as one string.
    pub credential: String,
}

impl TaskOwner {
    /// The owner of a task `caller` creates in `session_id`.
    pub fn new(session_id: &str, caller: &Caller) -> Self {
        let mut credential = caller.kind.as_str().to_owned();
        if let Some(identity) = &caller.identity {
            credential.push('\u{0}');
            credential.push_str(&identity.issuer);
            credential.push('\u{0}');
            credential.push_str(&identity.subject);
        }
        Self {
            session_id: session_id.to_owned(),
            credential,
        }
    }
}

/// A task as clients see it (MCP's `Task`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskState {
    /// The task's id: 128 random bits.
    pub id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// Why it stands there, in a sentence; empty for nothing to say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_message: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it last changed, likewise.
    pub updated_ms: u64,
    /// How long after its creation it is kept, in milliseconds.
    pub ttl_ms: u64,
    /// How often the client is told to poll, in milliseconds.
    pub poll_interval_ms: u64,
}

/// How a task's call ended, as its answer's JSON text.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum TaskOutcome {
    /// The call's result: a `CallToolResult` object, as written for the
    /// client (the app's values unchanged).
    Result(Box<RawValue>),
    /// A JSON-RPC error instead of a result.
    Error {
        code: i32,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Box<RawValue>>,
    },
}

impl TaskOutcome {
    fn bytes(&self) -> usize {
        match self {
            Self::Result(raw) => raw.get().len(),
            Self::Error { message, data, .. } => {
                message.len() + data.as_ref().map_or(0, |data| data.get().len())
            }
        }
    }
}

/// A task as a shared backend stores it: everything any node needs to
/// answer for it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredTask {
    /// The version of this form.
    pub v: u32,
    /// Who may open it.
    pub owner: TaskOwner,
    /// Its state.
    pub state: TaskState,
    /// How its call ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TaskOutcome>,
    /// Its place in its owner's list (creation order).
    pub seq: u64,
}

/// Why a task operation was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TaskError {
    /// No such task for this owner (or it expired): the same answer either
    /// way, so that ids of other owners cannot be probed.
    #[error(
        "Failed to retrieve task: Task not found (it may have expired, or belongs to another credential)"
    )]
    NotFound,
    /// `tasks/cancel` of a task that ended.
    #[error("Cannot cancel task: already in terminal status '{}'", .0.as_str())]
    Terminal(TaskStatus),
    /// A `tasks/list` cursor this store did not hand out.
    #[error(
        "Invalid cursor: the cursor is not one this server handed out; list again without a cursor"
    )]
    BadCursor,
    /// The operating system's random generator failed.
    #[error("Cannot create task: the server could not draw a random task id; try again")]
    NoRandomness,
}

/// A task just created: its state, and the token that cancels its call.
#[derive(Debug)]
pub struct Created {
    /// Its state (working).
    pub state: TaskState,
    /// Cancelled when the client cancels the task.
    pub cancel: CancellationToken,
}

/// The tasks of this process (and, with a shared backend, of the cluster).
pub struct Tasks {
    settings: TaskSettings,
    memory: Mutex<Memory>,
}

struct Entry {
    stored: StoredTask,
    cancel: CancellationToken,
    changed: watch::Sender<TaskStatus>,
}

#[derive(Default)]
struct Memory {
    tasks: HashMap<String, Entry>,
    bytes_by_session: HashMap<String, usize>,
    bytes_total: usize,
    next_seq: u64,
}

impl Memory {
    /// Drops the tasks whose ttl ran out by `now_ms`, and their results'
    /// bytes.
    fn expire(&mut self, now_ms: u64) {
        let expired: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, entry)| {
                let state = &entry.stored.state;
                state.created_ms.saturating_add(state.ttl_ms) <= now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(entry) = self.tasks.remove(&id) {
                entry.cancel.cancel();
                self.release(&entry.stored);
            }
        }
    }

    fn release(&mut self, stored: &StoredTask) {
        let bytes = stored.outcome.as_ref().map_or(0, TaskOutcome::bytes);
        self.bytes_total = self.bytes_total.saturating_sub(bytes);
        if let Some(held) = self.bytes_by_session.get_mut(&stored.owner.session_id) {
            *held = held.saturating_sub(bytes);
            if *held == 0 {
                self.bytes_by_session.remove(&stored.owner.session_id);
            }
        }
    }

    fn owned(&self, owner: &TaskOwner, id: &str) -> Result<&Entry, TaskError> {
        self.tasks
            .get(id)
            .filter(|entry| &entry.stored.owner == owner)
            .ok_or(TaskError::NotFound)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh task id: 128 bits from the OS generator, URL-safe.
fn mint_id() -> Result<String, TaskError> {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| TaskError::NoRandomness)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

impl Tasks {
    /// An empty store in memory.
    pub fn new(settings: TaskSettings) -> Self {
        Self {
            settings,
            memory: Mutex::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &TaskSettings {
        &self.settings
    }

    fn lock(&self) -> MutexGuard<'_, Memory> {
        // Plain data, each change made whole under the lock.
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates a working task for `owner`, kept `requested_ttl_ms` (capped
    /// by the setting; the setting when `None`).
    pub fn create(
        &self,
        owner: TaskOwner,
        requested_ttl_ms: Option<u64>,
    ) -> Result<Created, TaskError> {
        let id = mint_id()?;
        let now = now_ms();
        let max_ttl = millis(self.settings.max_ttl);
        let state = TaskState {
            id: id.clone(),
            status: TaskStatus::Working,
            status_message: String::new(),
            created_ms: now,
            updated_ms: now,
            ttl_ms: requested_ttl_ms.map_or(max_ttl, |ttl| ttl.clamp(1, max_ttl)),
            poll_interval_ms: millis(self.settings.poll_interval),
        };
        let cancel = CancellationToken::new();
        let mut memory = self.lock();
        memory.expire(now);
        let seq = memory.next_seq;
        memory.next_seq += 1;
        let (changed, _) = watch::channel(TaskStatus::Working);
        memory.tasks.insert(
            id,
            Entry {
                stored: StoredTask {
                    v: 1,
                    owner,
                    state: state.clone(),
                    outcome: None,
                    seq,
                },
                cancel: cancel.clone(),
                changed,
            },
        );
        Ok(Created { state, cancel })
    }

    /// The task `id` as `owner` may see it.
    pub fn get(&self, owner: &TaskOwner, id: &str) -> Result<TaskState, TaskError> {
        let mut memory = self.lock();
        memory.expire(now_ms());
        memory
            .owned(owner, id)
            .map(|entry| entry.stored.state.clone())
    }

    /// The task `id` as `owner` may see it, with its outcome once it ended
    /// (2026-07-28 `tasks/get` inlines it).
    pub fn detailed(
        &self,
        owner: &TaskOwner,
        id: &str,
    ) -> Result<(TaskState, Option<TaskOutcome>), TaskError> {
        let mut memory = self.lock();
        memory.expire(now_ms());
        memory.owned(owner, id).map(|entry| {
            let stored = &entry.stored;
            let ended = stored.state.status.is_terminal();
            (
                stored.state.clone(),
                stored.outcome.clone().filter(|_| ended),
            )
        })
    }

    /// Moves a running task to `status` (working or input required), with
    /// `message`; a task that ended stays as it is.
    pub fn set_status(&self, id: &str, status: TaskStatus, message: &str) {
        let mut memory = self.lock();
        let Some(entry) = memory.tasks.get_mut(id) else {
            return;
        };
        let state = &mut entry.stored.state;
        if state.status.is_terminal() || state.status == status {
            return;
        }
        state.status = status;
        message.clone_into(&mut state.status_message);
        state.updated_ms = now_ms();
        entry.changed.send_replace(status);
    }

    /// Records how the task's call ended: `completed`, or `failed` when
    /// `failed`. A task cancelled meanwhile stays cancelled; a result over
    /// a bound fails the task with a sentence naming the setting instead.
    /// The state after.
    pub fn finish(&self, id: &str, outcome: TaskOutcome, failed: bool) -> Option<TaskState> {
        let mut memory = self.lock();
        let bytes = outcome.bytes();
        let (session_id, terminal) = {
            let entry = memory.tasks.get(id)?;
            (
                entry.stored.owner.session_id.clone(),
                entry.stored.state.status.is_terminal(),
            )
        };
        if terminal {
            return memory.tasks.get(id).map(|entry| entry.stored.state.clone());
        }
        let held = memory
            .bytes_by_session
            .get(&session_id)
            .copied()
            .unwrap_or(0);
        let over = if held.saturating_add(bytes) > self.settings.max_result_bytes_per_session {
            Some(format!(
                "The tool's result ({bytes} bytes) was not kept: this session's task results would exceed OPENCLAW_PROXY_TASK_RESULT_BYTES_PER_SESSION ({} bytes). Fetch or let expire earlier results, or call the tool without a task.",
                self.settings.max_result_bytes_per_session
            ))
        } else if memory.bytes_total.saturating_add(bytes) > self.settings.max_result_bytes_total {
            Some(format!(
                "The tool's result ({bytes} bytes) was not kept: the server's task results would exceed OPENCLAW_PROXY_TASK_RESULT_BYTES_TOTAL ({} bytes). Try again later, or call the tool without a task.",
                self.settings.max_result_bytes_total
            ))
        } else {
            None
        };
        let (outcome, failed, message) = match over {
            Some(sentence) => (
                TaskOutcome::Error {
                    code: -32603,
                    message: sentence.clone(),
                    data: None,
                },
                true,
                sentence,
            ),
            None => {
                *memory.bytes_by_session.entry(session_id).or_default() += bytes;
                memory.bytes_total += bytes;
                let message = match &outcome {
                    TaskOutcome::Error { message, .. } => message.clone(),
                    TaskOutcome::Result(_) if failed => "The tool reported an error.".to_owned(),
                    TaskOutcome::Result(_) => String::new(),
                };
                (outcome, failed, message)
            }
        };
        let entry = memory.tasks.get_mut(id)?;
        let status = if failed {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        entry.stored.outcome = Some(outcome);
        let state = &mut entry.stored.state;
        state.status = status;
        state.status_message = message;
        state.updated_ms = now_ms();
        entry.changed.send_replace(status);
        Some(state.clone())
    }

    /// Cancels `owner`'s task `id`: it is cancelled from now on, whatever
    /// its call does, and the call is told to stop. A task that ended is
    /// refused with its status.
    pub fn cancel(&self, owner: &TaskOwner, id: &str) -> Result<TaskState, TaskError> {
        let mut memory = self.lock();
        memory.expire(now_ms());
        let status = memory.owned(owner, id)?.stored.state.status;
        if status.is_terminal() {
            return Err(TaskError::Terminal(status));
        }
        let entry = memory.tasks.get_mut(id).ok_or(TaskError::NotFound)?;
        entry.stored.outcome = Some(TaskOutcome::Error {
            code: -32603,
            message: "The task was cancelled by request.".to_owned(),
            data: None,
        });
        let state = &mut entry.stored.state;
        state.status = TaskStatus::Cancelled;
        "The task was cancelled by request.".clone_into(&mut state.status_message);
        state.updated_ms = now_ms();
        entry.changed.send_replace(TaskStatus::Cancelled);
        entry.cancel.cancel();
        Ok(state.clone())
    }

    /// Waits until `owner`'s task `id` ended, then its state and outcome.
    pub async fn outcome(
        &self,
        owner: &TaskOwner,
        id: &str,
    ) -> Result<(TaskState, TaskOutcome), TaskError> {
        let mut changed = self.watch(owner, id)?;
        loop {
            if let Some(ended) = self.ended(owner, id)? {
                return Ok(ended);
            }
            if changed.changed().await.is_err() {
                // The task was dropped (it expired) while waited for.
                return self.ended(owner, id)?.ok_or(TaskError::NotFound);
            }
        }
    }

    /// The task's status changes, from now on.
    pub fn watch(
        &self,
        owner: &TaskOwner,
        id: &str,
    ) -> Result<watch::Receiver<TaskStatus>, TaskError> {
        let memory = self.lock();
        memory
            .owned(owner, id)
            .map(|entry| entry.changed.subscribe())
    }

    fn ended(
        &self,
        owner: &TaskOwner,
        id: &str,
    ) -> Result<Option<(TaskState, TaskOutcome)>, TaskError> {
        let memory = self.lock();
        let entry = memory.owned(owner, id)?;
        let stored = &entry.stored;
        Ok(match (&stored.outcome, stored.state.status.is_terminal()) {
            (Some(outcome), true) => Some((stored.state.clone(), outcome.clone())),
            _ => None,
        })
    }

    /// One page of `owner`'s tasks, oldest first, after `cursor` (a
    /// previous page's), and the cursor of the next page.
    pub fn list(
        &self,
        owner: &TaskOwner,
        cursor: Option<&str>,
    ) -> Result<(Vec<TaskState>, Option<String>), TaskError> {
        let after = match cursor {
            None => None,
            Some(cursor) => Some(cursor.parse::<u64>().map_err(|_| TaskError::BadCursor)?),
        };
        let mut memory = self.lock();
        memory.expire(now_ms());
        let mut mine: Vec<(u64, TaskState)> = memory
            .tasks
            .values()
            .filter(|entry| &entry.stored.owner == owner)
            .filter(|entry| after.is_none_or(|after| entry.stored.seq > after))
            .map(|entry| (entry.stored.seq, entry.stored.state.clone()))
            .collect();
        mine.sort_unstable_by_key(|(seq, _)| *seq);
        let next = (mine.len() > PAGE_SIZE).then(|| mine[PAGE_SIZE - 1].0.to_string());
        mine.truncate(PAGE_SIZE);
        Ok((mine.into_iter().map(|(_, state)| state).collect(), next))
    }

    /// The bytes of results held, for one session and in total.
    pub fn result_bytes(&self, session_id: &str) -> (usize, usize) {
        let memory = self.lock();
        (
            memory
                .bytes_by_session
                .get(session_id)
                .copied()
                .unwrap_or(0),
            memory.bytes_total,
        )
    }
}

#[cfg(test)]
mod tests;
