//! The one map of task statuses to the words the protocol spells them with: the stores
//! write these words, the admin API and the metrics show them.

use rmcp::model::TaskStatus;

/// Every status this crate knows, in the order of their lifecycle.
pub(crate) const STATUSES: [TaskStatus; 5] = [
    TaskStatus::Working,
    TaskStatus::InputRequired,
    TaskStatus::Completed,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

/// A status as the protocol spells it: the one map of statuses to words, which the stores
/// write and the admin API and metrics show.
#[must_use]
pub fn status_word(status: TaskStatus) -> &'static str {
    known_word(status).unwrap_or("unknown")
}

/// [`status_word`], `None` for a status of a newer protocol revision than this crate knows.
pub(crate) fn known_word(status: TaskStatus) -> Option<&'static str> {
    Some(match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

/// The status the protocol spells `word`, if any.
#[must_use]
pub fn parse_status(word: &str) -> Option<TaskStatus> {
    STATUSES
        .into_iter()
        .find(|status| known_word(*status) == Some(word))
}
