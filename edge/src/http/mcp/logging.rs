//! App log records as MCP `notifications/message`, and MCP's log levels as
//! the core's.
//!
//! MCP deprecates logging from 2026-07-28 (SEP-2577), and rmcp marks its
//! logging types so; clients of every earlier revision still set a level and
//! read these notifications, so the proxy serves them until rmcp drops the
//! types. The deprecation is allowed here, in this one file.
#![allow(deprecated)]

use openclaw_proxy_core::progress::LogLevel;
use openclaw_proxy_core::proto::Log;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam, ServerNotification,
};

/// The core's name of an rmcp log level.
pub fn level_of(level: &LoggingLevel) -> Option<LogLevel> {
    serde_json::to_value(level)
        .ok()
        .and_then(|value| value.as_str().and_then(LogLevel::parse))
}

/// The `notifications/message` of one app log record: its level, logger and
/// data (JSON as the app wrote it; text that is not JSON as a string).
pub fn notification(record: Log) -> ServerNotification {
    let level = match LogLevel::parse(&record.level).unwrap_or(LogLevel::Info) {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    };
    let data = serde_json::from_str(&record.data_json)
        .unwrap_or(serde_json::Value::String(record.data_json));
    let mut param = LoggingMessageNotificationParam::new(level, data);
    param.logger = (!record.logger.is_empty()).then_some(record.logger);
    ServerNotification::LoggingMessageNotification(LoggingMessageNotification::new(param))
}
