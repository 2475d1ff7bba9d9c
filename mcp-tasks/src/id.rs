//! Task identifiers: a millisecond timestamp, then 128 bits from the operating system's
//! CSPRNG.
//!
//! The 128 random bits make an id unguessable; the timestamp in front makes ids sort by
//! creation time, so a durable store keyed by id (a B-tree: SQLite, Postgres) appends new
//! tasks at one edge of its index instead of touching a random page per task. With purely
//! random ids every create in a group commit dirtied its own leaf page; in order, a batch
//! of 64 creates fills a handful of pages (`examples/store_bench.rs`, BENCHMARKS.md). The
//! cost: an id tells its holder when the task was created, which `tasks/get` tells it
//! anyway (`createdAt`).

// Unguessable ids: docs/protocol.md R13.

/// Hex digits of the timestamp: 48 bits of milliseconds, enough until the year 10889.
const TIME_DIGITS: usize = 12;
/// Hex digits of the random part: 128 bits.
const RANDOM_DIGITS: usize = 32;

/// The length of every id [`new_task_id`] makes.
pub const TASK_ID_LEN: usize = TIME_DIGITS + RANDOM_DIGITS;

/// A fresh task id: 44 lowercase hex digits, 12 of the creation time in milliseconds since
/// the Unix epoch, then 32 carrying 128 random bits.
///
/// # Panics
/// Never in practice: only if the operating system has no usable entropy source, in which
/// case no secure id can be made and serving tasks must stop.
#[must_use]
pub fn new_task_id() -> String {
    let mut bytes = [0u8; RANDOM_DIGITS / 2];
    getrandom::fill(&mut bytes).expect("the operating system's CSPRNG is unavailable");
    // A clock before 1970 gives 0: ids then lose their order, never their entropy.
    let millis = crate::clock::system_now_ms();
    // Digit by digit from a table: `format!`'s `{:x}` of the two numbers, or an iterator
    // chain extending the string, cost a task 300 to 1,300 more instructions (BENCHMARKS.md,
    // "Task ids without format!").
    let hex = |nibble: u64| char::from(HEX[(nibble & 0xf) as usize]);
    let mut id = String::with_capacity(TASK_ID_LEN);
    for digit in (0..TIME_DIGITS).rev() {
        id.push(hex(millis >> (4 * digit)));
    }
    for b in bytes {
        id.push(hex(u64::from(b >> 4)));
        id.push(hex(u64::from(b)));
    }
    id
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The creation time in milliseconds that id `id` carries, when it is one of [`new_task_id`]'s.
pub(crate) fn created_ms(id: &str) -> Option<u64> {
    if id.len() != TASK_ID_LEN {
        return None;
    }
    u64::from_str_radix(id.get(..TIME_DIGITS)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashSet,
        time::{SystemTime, UNIX_EPOCH},
    };

    use super::*;

    #[test]
    fn ids_are_hex_distinct_and_carry_their_creation_time() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let ids: Vec<String> = (0..10_000).map(|_| new_task_id()).collect();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10_000);
        for id in &ids {
            assert_eq!(id.len(), TASK_ID_LEN);
            assert!(
                id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
            let millis = u128::from_str_radix(&id[..TIME_DIGITS], 16).unwrap();
            assert!((before..=after).contains(&millis), "{id}");
            assert_eq!(created_ms(id).map(u128::from), Some(millis));
        }
        // Made one after another, ids sort by creation time.
        assert!(
            ids.windows(2)
                .all(|w| w[0][..TIME_DIGITS] <= w[1][..TIME_DIGITS])
        );
    }

    #[test]
    fn ids_of_another_shape_carry_no_time() {
        assert_eq!(created_ms("task-1"), None);
        assert_eq!(created_ms(&"z".repeat(TASK_ID_LEN)), None);
    }

    #[test]
    fn the_random_part_varies_in_every_digit() {
        // 10,000 ids: each of the 32 random digits takes more than one value (a stuck digit
        // would cost entropy).
        let ids: Vec<String> = (0..10_000).map(|_| new_task_id()).collect();
        for position in TIME_DIGITS..TASK_ID_LEN {
            let seen: HashSet<u8> = ids.iter().map(|id| id.as_bytes()[position]).collect();
            assert_eq!(seen.len(), 16, "digit {position} takes every hex value");
        }
    }

    #[test]
    fn neighbouring_random_digits_vary_apart() {
        // Two digits drawn apart take nearly all 256 pairs in 10,000 ids; a digit written
        // from the same bits as its neighbour (half the entropy) gives 16.
        let ids: Vec<String> = (0..10_000).map(|_| new_task_id()).collect();
        for position in TIME_DIGITS..TASK_ID_LEN - 1 {
            let pairs: HashSet<&[u8]> = ids
                .iter()
                .map(|id| &id.as_bytes()[position..position + 2])
                .collect();
            assert!(
                pairs.len() > 200,
                "digits {position} and the next: {} pairs",
                pairs.len()
            );
        }
    }
}
