//! The one encoding of a [`Notice`] on the store's `LISTEN`/`NOTIFY` channel, which every
//! writer uses (SQL through [`notice_prefix`]) and the listener decodes: `a:<answer_seq>:<id>`,
//! `c:<id>`, `q:<id>`, `u:<id>`. [`Notice::Missed`] is never sent: the listener makes it.

use std::sync::Arc;

use crate::store::Notice;

/// The prefix of each payload (two bytes), as a literal so that SQL built with `concat!`
/// takes it: the statements that announce tasks in bulk prepend it to the id.
#[rustfmt::skip]
macro_rules! notice_prefix {
    (answers) => ("a:");
    (cancel) => ("c:");
    (queued) => ("q:");
    (changed) => ("u:");
}
pub(super) use notice_prefix;

/// The payload announcing `notice`: empty for [`Notice::Missed`], which is never sent (and
/// which [`decode`] refuses).
pub(super) fn encode(notice: &Notice) -> String {
    match notice {
        Notice::Answers { task_id, seq } => format!("{}{seq}:{task_id}", notice_prefix!(answers)),
        Notice::Cancel(id) => format!("{}{id}", notice_prefix!(cancel)),
        Notice::Queued(id) => format!("{}{id}", notice_prefix!(queued)),
        Notice::Changed(id) => format!("{}{id}", notice_prefix!(changed)),
        Notice::Missed => String::new(),
    }
}

/// Sends `notices` on `channel` in order, inside `tx` (they go out when it commits); no
/// statement when there are none. `context` says what failed.
pub(super) async fn announce(
    tx: &super::pool::Tx,
    channel: &str,
    notices: impl IntoIterator<Item = Notice>,
    context: &str,
) -> Result<(), crate::store::StoreError> {
    let payloads: Vec<String> = notices.into_iter().map(|notice| encode(&notice)).collect();
    if payloads.is_empty() {
        return Ok(());
    }
    let sql = "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p";
    tx.execute(sql, &[&channel, &payloads], context)
        .await
        .map(drop)
}

/// What announces the end of task `task_id` that its runner did not write (an operator's
/// fail, an expiry): while an instance runs its work (`running`), a cancel, so that it reads
/// the row and stops; otherwise a change, for the listen streams.
pub(super) fn ended_elsewhere(task_id: Arc<str>, running: bool) -> Notice {
    if running {
        Notice::Cancel(task_id)
    } else {
        Notice::Changed(task_id)
    }
}

/// The notice a payload announces; `None` for anything else (an unknown prefix, an empty
/// id, an answer sequence that is not a number).
pub(super) fn decode(payload: &str) -> Option<Notice> {
    let (prefix, id) = payload.split_at_checked(2)?;
    let task = |id: &str| (!id.is_empty()).then(|| Arc::from(id));
    Some(match prefix {
        notice_prefix!(answers) => {
            let (seq, id) = id.split_once(':')?;
            Notice::Answers {
                task_id: task(id)?,
                seq: seq.parse().ok()?,
            }
        }
        notice_prefix!(cancel) => Notice::Cancel(task(id)?),
        notice_prefix!(queued) => Notice::Queued(task(id)?),
        notice_prefix!(changed) => Notice::Changed(task(id)?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_notice_round_trips_and_malformed_payloads_are_refused() {
        let id = || Arc::<str>::from("t:1");
        let notices = [
            Notice::Answers {
                task_id: id(),
                seq: 3,
            },
            Notice::Cancel(id()),
            Notice::Queued(id()),
            Notice::Changed(id()),
        ];
        for notice in notices {
            let payload = encode(&notice);
            assert_eq!(decode(&payload), Some(notice), "{payload}");
        }
        assert_eq!(decode(&encode(&Notice::Missed)), None, "never sent");
        assert_eq!(decode("u:t-1"), Some(Notice::Changed(Arc::from("t-1"))));
        for bad in [
            "", "u", "a:t", "a:x:t", "a:-1:t", "a:1:", "x:t", "c:", "q:", "u:", "m:", ":t",
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
