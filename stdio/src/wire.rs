//! stdin and stdout as both modes use them: bounded lines in, one JSON-RPC
//! message per line out.
//!
//! - [`LineReader`] never holds more than the line limit in memory: a longer
//!   line is reported once as [`LineError::TooLong`] and the rest of it is
//!   skipped as it arrives, so the next line is served normally.
//! - [`output`] owns stdout in one task. A failed write ends that task with
//!   [`WriteFailed`]; the modes watch [`OutputTask::wait`] and stop at once,
//!   because an MCP client that no longer reads its server's stdout would
//!   otherwise keep tool calls running that nobody sees the answer of.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::line::LineError;

/// Messages waiting for stdout; a full queue makes the producers wait.
const OUTPUT_QUEUE: usize = 256;

/// Reads `\n`-terminated lines of at most `limit` bytes (the `\n` not
/// counted). Cancel-safe: a read interrupted half-way resumes the same line.
pub struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    limit: usize,
    /// The previous call returned a whole line; it is cleared on the next.
    returned: bool,
    /// Skipping the rest of a line already reported as too long.
    discarding: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `input` with a line limit of `limit` bytes.
    pub fn new(input: R, limit: usize) -> Self {
        Self {
            read: BufReader::new(input),
            line: Vec::new(),
            limit,
            returned: false,
            discarding: false,
        }
    }

    /// The next line: `Ok(None)` at the end of input, `Some(Err(TooLong))`
    /// for a line over the limit (reported as soon as it passes the limit).
    /// A last line without `\n` still counts.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Result<&[u8], LineError>>> {
        if self.returned {
            self.line.clear();
            self.returned = false;
        }
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                self.discarding = false;
                if self.line.is_empty() {
                    return Ok(None);
                }
                self.returned = true;
                return Ok(Some(Ok(&self.line)));
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let content = newline.unwrap_or(available.len());
            let consumed = newline.map_or(available.len(), |at| at + 1);
            if self.discarding {
                self.read.consume(consumed);
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            if self.line.len().saturating_add(content) > self.limit {
                self.line.clear();
                self.discarding = newline.is_none();
                self.read.consume(consumed);
                return Ok(Some(Err(LineError::TooLong { limit: self.limit })));
            }
            self.line.extend_from_slice(&available[..content]);
            self.read.consume(consumed);
            if newline.is_some() {
                self.returned = true;
                return Ok(Some(Ok(&self.line)));
            }
        }
    }
}

/// stdout could not be written: the MCP client has gone or stopped reading.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "cannot write to stdout ({0}): the MCP client stopped reading; stopping so that no more tool calls run"
)]
pub struct WriteFailed(String);

impl WriteFailed {
    /// A failure with this reason.
    pub(crate) fn new(reason: String) -> Self {
        Self(reason)
    }
}

/// Where messages for stdout are queued; cheap to clone.
#[derive(Clone, Debug)]
pub struct Output(mpsc::Sender<String>);

impl Output {
    /// Queues one message (a JSON text without `\n`); `false` when stdout has
    /// failed and nothing more will be written.
    pub async fn send(&self, message: String) -> bool {
        self.0.send(message).await.is_ok()
    }
}

/// The task that writes stdout.
pub struct OutputTask {
    task: Option<JoinHandle<Result<(), WriteFailed>>>,
    outcome: Option<Result<(), WriteFailed>>,
}

impl OutputTask {
    /// Waits until the writer stops: `Err` as soon as a write fails, `Ok`
    /// once every [`Output`] is dropped and all was written. May be called
    /// again after it returned (it answers the same).
    pub async fn wait(&mut self) -> Result<(), WriteFailed> {
        if let Some(task) = &mut self.task {
            let outcome = match task.await {
                Ok(outcome) => outcome,
                Err(error) => Err(WriteFailed(format!("the writer task ended: {error}"))),
            };
            self.task = None;
            self.outcome = Some(outcome);
        }
        self.outcome.clone().unwrap_or(Ok(()))
    }
}

/// Starts the stdout writer.
pub fn output<W>(writer: W) -> (Output, OutputTask)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, receiver) = mpsc::channel(OUTPUT_QUEUE);
    let task = tokio::spawn(write_lines(writer, receiver));
    (
        Output(sender),
        OutputTask {
            task: Some(task),
            outcome: None,
        },
    )
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut messages: mpsc::Receiver<String>,
) -> Result<(), WriteFailed> {
    let failed = |error: std::io::Error| WriteFailed(error.to_string());
    while let Some(mut line) = messages.recv().await {
        line.push('\n');
        writer.write_all(line.as_bytes()).await.map_err(failed)?;
        writer.flush().await.map_err(failed)?;
    }
    Ok(())
}
