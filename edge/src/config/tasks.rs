//! The settings of MCP tasks (docs/mcp.md, "Tasks"): whether clients may
//! call tools as tasks, how long a task and its result are kept, how often
//! clients are told to poll, and how many bytes of results are held.

use std::time::Duration;

use openclaw_proxy_core::tasks::TaskSettings;

/// The task flags of the server's command line.
#[derive(Clone, Debug, clap::Args)]
pub struct TaskArgs {
    /// Let MCP clients call tools that declare execution.taskSupport as tasks, and advertise the tasks capability (2025-11-25) and extension (2026-07-28).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_TASKS",
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub tasks: bool,

    /// The longest a task and its result are kept, in seconds from its creation; a client asking for a longer ttl gets this.
    #[arg(long, env = "OPENCLAW_PROXY_TASK_MAX_TTL_SECONDS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..=7 * 86_400))]
    pub task_max_ttl_seconds: u64,

    /// How often clients are told to poll a task (pollInterval), in milliseconds.
    #[arg(long, env = "OPENCLAW_PROXY_TASK_POLL_INTERVAL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub task_poll_interval_ms: u64,

    /// The bytes of task results one session may hold at once; a larger result fails its task naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_TASK_RESULT_BYTES_PER_SESSION", default_value_t = 16 * 1024 * 1024)]
    pub task_result_bytes_per_session: usize,

    /// The bytes of task results the server holds at once; a result beyond it fails its task naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_TASK_RESULT_BYTES_TOTAL", default_value_t = 256 * 1024 * 1024)]
    pub task_result_bytes_total: usize,
}

impl TaskArgs {
    /// The core's task settings.
    pub fn settings(&self) -> TaskSettings {
        TaskSettings {
            enabled: self.tasks,
            max_ttl: Duration::from_secs(self.task_max_ttl_seconds),
            poll_interval: Duration::from_millis(self.task_poll_interval_ms),
            max_result_bytes_per_session: self.task_result_bytes_per_session,
            max_result_bytes_total: self.task_result_bytes_total,
        }
    }
}
