//! The store's clock: the instance's, corrected by its offset from the database server's
//! clock, so that every instance of a cluster reads one clock (module docs of
//! [`postgres`](super), "One clock").

use deadpool_postgres::Object;

use super::{PgError, StoreError, row::db_now_ms};
use crate::clock::Clock;

/// Readings taken; the one with the shortest round trip is kept.
const SAMPLES: usize = 3;

/// `local` corrected by its offset from the server's clock: the server's reading minus the
/// midpoint of the local readings before and after it, from the sample with the shortest
/// round trip (its error is at most half that round trip).
pub(super) async fn measure(client: &Object, local: Clock) -> Result<Clock, StoreError> {
    let statement = concat!("SELECT ", db_now_ms!());
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..SAMPLES {
        let sent = local.now_ms();
        let row = client
            .query_one(statement, &[])
            .await
            .map_err(|e| PgError::query("could not read the database server's clock", e))?;
        let received = local.now_ms();
        let server: i64 = row.get(0);
        let round_trip = received.saturating_sub(sent);
        let midpoint = sent.saturating_add(round_trip / 2);
        let offset = server.saturating_sub(i64::try_from(midpoint).unwrap_or(i64::MAX));
        if best.is_none_or(|(shortest, _)| round_trip < shortest) {
            best = Some((round_trip, offset));
        }
    }
    let (round_trip, offset) = best.unwrap_or_default();
    if offset.unsigned_abs() > 1_000 {
        tracing::warn!(
            offset_ms = offset,
            round_trip_ms = round_trip,
            "this instance's clock is {offset} ms off the database server's; the task store \
             reads the server's clock instead"
        );
    }
    Ok(local.with_offset_ms(offset))
}
