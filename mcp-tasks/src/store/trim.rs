//! The owners whose finished tasks a store trims at its next sweep
//! ([`NewTask::max_finished_per_owner`]): a create notes its owner and bound, the store's
//! [`TaskStore::expire_due`](super::TaskStore::expire_due) takes them and removes, for each,
//! the finished tasks past the bound, oldest (by creation) first. Only owners noted since the
//! last sweep are looked at, each by an index of its own finished tasks. An owner whose
//! tasks were still running past its bound at the sweep is noted again: by the store that
//! sees it there (Postgres counts them), or at the end of each of its tasks (SQLite). A
//! sweep removes at most [`TRIM_ROWS`] of one owner's tasks; an owner with more past its
//! bound is noted again for the next sweep.
//!
//! A trim reads the owner's bound's worth of index entries whatever it removes, so an
//! owner is not trimmed at every sweep while it creates: it is trimmed once it was noted a
//! [`SLACK`]th of its bound times since its last trim, or [`LAG`] after the first of those
//! notes. Its cost is then at most about `SLACK` entries read for each task noted, and an
//! owner holds at most about a `SLACK`th more than its bound (for each instance that noted
//! it) for at most `LAG`. A bound under twice `SLACK` trims at every sweep, as before (a
//! `SLACK`th of it rounds down to one note).
//!
//! What a process noted is lost when it stops, so a runtime tells its store the bound when
//! it starts ([`TaskStore::set_max_finished_per_owner`](super::TaskStore::set_max_finished_per_owner)):
//! the store's sweeps then make a pass over every owner's finished tasks, by the same index,
//! in pages of at most [`PASS_ROWS`] rows a sweep, and trim each owner that holds more than
//! the bound. The rows decide, not what some process remembers: an owner left past its bound
//! by a process (or, on Postgres, an instance) that stopped before its sweep, or by a bound
//! lowered at the restart, is trimmed without creating again. A store shared by instances
//! passes again a while after each pass ends ([`Owners::repeat_every`]), so what an instance
//! left is trimmed even when none starts after it; its instances take turns at these passes
//! (one an interval, cluster-wide: [`Pass::repeat`]).

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;

use super::NewTask;

/// How many owners at most wait for a bound ([`Owners::ended`] before any create carried
/// one): a store whose creates never carry one does not remember every owner.
const MAX_WAITING: usize = 10_000;

/// How many finished tasks one sweep reads, at most, in its page of the pass over every
/// owner ([`Owners::pass`]).
pub(crate) const PASS_ROWS: u64 = 10_000;

/// How many of one owner's finished tasks one sweep removes, at most (oldest first): an
/// owner far past its bound (a bound lowered at a restart) is trimmed over several sweeps,
/// each of bounded work.
pub(crate) const TRIM_ROWS: u64 = 1_000;

/// An owner noted this many times per task of its bound is trimmed at the next sweep.
pub(crate) const SLACK: usize = 16;

/// How long after it is first noted an owner is trimmed at the latest.
pub(crate) const LAG: Duration = Duration::from_secs(30);

/// Owners to trim, each with the bound to trim it to.
pub(crate) type ToTrim = Vec<(Arc<str>, usize)>;

/// An owner noted since its last trim.
struct Noted {
    /// The bound its latest note carried; 0 before one did.
    keep: usize,
    /// How many tasks were noted (created, ended, or held past the bound at a trim).
    notes: usize,
    /// When the first of them was.
    since: Instant,
}

impl Noted {
    /// Whether a sweep at `now` trims it to `keep`.
    fn due(&self, keep: usize, now: Instant) -> bool {
        self.notes >= (keep / SLACK).max(1) || now.duration_since(self.since) >= LAG
    }
}

/// Owners to trim, with the bound their latest create carried.
#[derive(Default)]
pub(crate) struct Owners {
    due: Mutex<HashMap<Arc<str>, Noted>>,
    /// The bound the latest create carried (or a runtime told at its start); 0 before one
    /// did (and in `due`, an owner waiting for one).
    latest: AtomicUsize,
    passes: Mutex<Passes>,
}

/// The passes over every owner: the one underway, and when the next begins.
#[derive(Default)]
struct Passes {
    /// The pass a runtime's start asked for ([`Owners::bound`]), or the time for the next
    /// brought, while it lasts.
    now: Option<Pass>,
    /// How long after a pass ends the next begins ([`Owners::repeat_every`]); `None`: only
    /// at a start.
    every: Option<Duration>,
    /// When the next pass begins, with the bound it trims to.
    next: Option<(Instant, usize)>,
}

/// Where the pass over every owner's finished tasks is.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct Pass {
    /// The last owner a page reached; `None` before the first page.
    pub(crate) after: Option<Arc<str>>,
    /// The bound it trims to.
    pub(crate) keep: usize,
    /// For a pass that began `every` after the last one ended ([`Owners::repeat_every`]):
    /// `Some(every)`. A store that instances share lets one instance an interval make it
    /// (the others end theirs before the first page, [`Owners::passed`] with `None`). `None`
    /// for the pass a runtime's start asks for, which always runs: its bound may be new.
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "only the Postgres store takes turns")
    )]
    pub(crate) repeat: Option<Duration>,
}

impl Pass {
    /// Which of the owners one page `found` (each with how many of the page's finished
    /// tasks are its, in owner order, [`PASS_ROWS`] of them at most) to trim: those with
    /// more than the bound, and the page's last owner when the page is full (some of its
    /// tasks may lie past the page; its trim counts them all). With the pass's next place:
    /// after that last owner, or `None` when the page was not full (the pass is over).
    pub(crate) fn page(&self, found: Vec<(Arc<str>, u64)>) -> (ToTrim, Option<Arc<str>>) {
        let full = found.iter().map(|(_, rows)| rows).sum::<u64>() >= PASS_ROWS;
        let last = found.last().map(|(owner, _)| Arc::clone(owner));
        let keep = self.keep;
        let over = found
            .into_iter()
            .filter(|(owner, rows)| {
                usize::try_from(*rows).map_or(true, |rows| rows > keep)
                    || (full && Some(owner) == last.as_ref())
            })
            .map(|(owner, _)| (owner, keep))
            .collect();
        (over, if full { last } else { None })
    }
}

impl Owners {
    /// The bound a runtime tells its store when it starts: what an owner noted before any
    /// create carried a bound is trimmed to, and the start of a pass over every owner (one
    /// underway starts again, with this bound).
    pub(crate) fn bound(&self, keep: usize) {
        let keep = keep.max(1);
        self.latest.store(keep, Ordering::Relaxed);
        let mut passes = self.passes.lock();
        passes.now = Some(Pass {
            after: None,
            keep,
            repeat: None,
        });
        passes.next = None;
    }

    /// Passes over every owner again `every` after each pass ends (by default a store
    /// passes only when a runtime starts): on a store that instances share, one that stops
    /// before its sweep leaves owners past the bound that only the rows know of.
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "only the Postgres store passes again")
    )]
    pub(crate) fn repeat_every(&self, every: Duration) {
        self.passes.lock().every = Some(every);
    }

    /// Where the pass over every owner is, while one is underway; one begins when the
    /// time for the next has come.
    pub(crate) fn pass(&self) -> Option<Pass> {
        let mut passes = self.passes.lock();
        if passes.now.is_none()
            && let Some((at, keep)) = passes.next
            && Instant::now() >= at
        {
            passes.next = None;
            passes.now = Some(Pass {
                after: None,
                keep,
                repeat: passes.every,
            });
        }
        passes.now.clone()
    }

    /// Moves the pass that was at `from` on to `next` (ends it with `None`), unless it
    /// has moved (or started again) since: a repeat that lost its turn does not end the
    /// pass a start began meanwhile with the same bound.
    pub(crate) fn passed(&self, from: &Pass, next: Option<Arc<str>>) {
        let mut passes = self.passes.lock();
        if let Some(now) = passes.now.as_mut()
            && now == from
        {
            match next {
                Some(owner) => now.after = Some(owner),
                None => {
                    passes.now = None;
                    passes.next = passes
                        .every
                        .and_then(|every| Instant::now().checked_add(every))
                        .map(|at| (at, from.keep));
                }
            }
        }
    }

    /// Notes `task`'s owner when the task carries a bound.
    pub(crate) fn note(&self, task: &NewTask) {
        if let Some(keep) = task.max_finished_per_owner {
            let keep = keep.max(1);
            self.latest.store(keep, Ordering::Relaxed);
            count(&mut self.due.lock(), &task.owner, keep, 1);
        }
    }

    /// Notes `owner` again, with `keep`, as `excess` tasks more than its bound (the tasks it
    /// still held past it at a trim; `usize::MAX`, trim it at the next sweep).
    pub(crate) fn again(&self, owner: &Arc<str>, keep: usize, excess: usize) {
        count(&mut self.due.lock(), owner, keep, excess);
    }

    /// Notes the owner of a task that ended, with the bound the latest create carried; before
    /// a create in this process carried one (after a restart), with none yet: the owner waits
    /// for the first bound a create brings.
    #[cfg_attr(
        not(feature = "sqlite"),
        allow(dead_code, reason = "only the SQLite store notes ends")
    )]
    pub(crate) fn ended(&self, owner: &Arc<str>) {
        let known = self.latest.load(Ordering::Relaxed) > 0;
        let mut due = self.due.lock();
        if known || due.len() < MAX_WAITING {
            count(&mut due, owner, 0, 1);
        }
    }

    /// The owners due for a trim, with their bounds: those noted a [`SLACK`]th of their
    /// bound times, or first noted [`LAG`] ago. The others stay noted, as does an owner
    /// noted before any bound was known, until one is.
    pub(crate) fn take(&self) -> ToTrim {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> ToTrim {
        let latest = self.latest.load(Ordering::Relaxed);
        if latest == 0 {
            return Vec::new();
        }
        let mut taken = Vec::new();
        self.due.lock().retain(|owner, noted| {
            let keep = if noted.keep == 0 { latest } else { noted.keep };
            let due = noted.due(keep, now);
            if due {
                taken.push((Arc::clone(owner), keep));
            }
            !due
        });
        taken
    }
}

/// Counts `notes` more for `owner` in `due`; `keep`, when not 0, is its bound from now on.
fn count(due: &mut HashMap<Arc<str>, Noted>, owner: &Arc<str>, keep: usize, notes: usize) {
    let noted = due.entry(Arc::clone(owner)).or_insert_with(|| Noted {
        keep,
        notes: 0,
        since: Instant::now(),
    });
    noted.notes = noted.notes.saturating_add(notes);
    if keep > 0 {
        noted.keep = keep;
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::Arc,
        time::{Duration, Instant},
    };

    use super::{LAG, MAX_WAITING, NewTask, Owners, PASS_ROWS, SLACK};

    fn found(pages: &[(&str, u64)]) -> Vec<(Arc<str>, u64)> {
        pages.iter().map(|(o, n)| (Arc::from(*o), *n)).collect()
    }

    /// The pass a start asks for trims, page after page, the owners past the bound (and a
    /// full page's last owner, whose tasks may go on past it); a page that is not full ends
    /// it, and a start during a pass starts it again.
    #[test]
    fn the_pass_trims_the_owners_past_the_bound_page_by_page() {
        let owners = Owners::default();
        assert!(owners.pass().is_none(), "no pass before a start");
        owners.bound(3);
        let first = owners.pass().expect("a start begins a pass");
        assert_eq!((first.after.clone(), first.keep), (None, 3));
        let (over, next) = first.page(found(&[
            ("ann", 3),
            ("bob", 4),
            ("cy", PASS_ROWS - 8),
            ("dee", 1),
        ]));
        let dee = Arc::<str>::from("dee");
        assert_eq!(
            over,
            vec![
                (Arc::from("bob"), 3),
                (Arc::from("cy"), 3),
                (dee.clone(), 3)
            ]
        );
        assert_eq!(
            next,
            Some(dee.clone()),
            "a full page: the pass goes on after it"
        );
        owners.passed(&first, next);
        let second = owners.pass().expect("still passing");
        assert_eq!(second.after, Some(dee));
        owners.passed(&first, None);
        assert!(
            owners.pass().is_some(),
            "a page from an old place moves nothing"
        );
        let (over, next) = second.page(found(&[("eve", 2)]));
        assert!(over.is_empty() && next.is_none(), "{over:?}");
        owners.bound(5);
        owners.passed(&second, next);
        let again = owners.pass().expect("a second start begins again");
        assert_eq!((again.after.clone(), again.keep), (None, 5));
        owners.passed(&again, None);
        assert!(owners.pass().is_none(), "a page that is not full ends it");
        assert!(owners.pass().is_none(), "and no other begins by itself");
        owners.ended(&Arc::from("late"));
        assert_eq!(
            owners.take(),
            vec![(Arc::from("late"), 5)],
            "the bound told"
        );
    }

    /// A store that passes again begins a pass, with the bound of the last one, once the
    /// time has come after it ended; not while one is underway, nor before its time.
    #[test]
    fn a_store_that_passes_again_begins_once_the_time_has_come() {
        let owners = Owners::default();
        owners.repeat_every(std::time::Duration::ZERO);
        assert!(owners.pass().is_none(), "no pass before the first start");
        owners.bound(4);
        let first = owners.pass().expect("a start begins a pass");
        owners.passed(&first, Some(Arc::from("ann")));
        let second = owners.pass().expect("underway");
        assert_eq!(second.after, Some(Arc::from("ann")), "not begun again");
        owners.passed(&second, None);
        let again = owners.pass().expect("begun again once ended");
        assert_eq!((again.after.clone(), again.keep), (None, 4));
        assert_eq!(again.repeat, Some(std::time::Duration::ZERO), "and says so");
        assert_eq!(first.repeat, None, "not the start's");
        owners.bound(4);
        owners.passed(&again, None);
        let start = owners
            .pass()
            .expect("a repeat that ends leaves a later start's pass");
        assert_eq!(start.repeat, None);
        let owners = Owners::default();
        owners.repeat_every(std::time::Duration::from_secs(3600));
        owners.bound(4);
        let first = owners.pass().expect("a start begins a pass");
        owners.passed(&first, None);
        assert!(owners.pass().is_none(), "an hour away");
    }

    /// An owner whose bound is large is trimmed once it was noted a [`SLACK`]th of its bound
    /// times, or [`LAG`] after the first note, so a trim's read of the bound's worth of
    /// index entries is shared by that many tasks; a bound under twice `SLACK` (a `SLACK`th
    /// of it rounds down to one note), at every sweep.
    #[test]
    fn a_large_bound_is_trimmed_once_the_read_is_worth_it() {
        let owners = Owners::default();
        let note = |owner: &str, keep: usize| {
            let task = NewTask::new(Arc::from("t"), Arc::from(owner), Arc::from("tool"));
            owners.note(&task.with_max_finished_per_owner(keep));
        };
        let now = Instant::now();
        note("small", 2 * SLACK - 1);
        note("edge", 2 * SLACK);
        for _ in 1..100 {
            note("large", 100 * SLACK);
        }
        assert_eq!(
            owners.take_at(now),
            vec![(Arc::from("small"), 2 * SLACK - 1)],
            "a bound under twice SLACK at once; twice SLACK not after one note, a large one \
             not after 99"
        );
        note("large", 100 * SLACK);
        assert_eq!(owners.take_at(now), vec![(Arc::from("large"), 100 * SLACK)]);
        note("large", 100 * SLACK);
        owners.again(&Arc::from("held"), 100 * SLACK, 3);
        owners.again(&Arc::from("far"), 100 * SLACK, usize::MAX);
        assert_eq!(
            owners.take_at(now),
            vec![(Arc::from("far"), 100 * SLACK)],
            "more past its bound than a trim removes: at once"
        );
        let before = now + LAG - Duration::from_millis(1);
        assert!(owners.take_at(before).is_empty(), "not before the lag");
        let mut late = owners.take_at(now + LAG + Duration::from_secs(1));
        late.sort();
        let keep = 100 * SLACK;
        assert_eq!(
            late,
            vec![
                (Arc::from("edge"), 2 * SLACK),
                (Arc::from("held"), keep),
                (Arc::from("large"), keep)
            ]
        );
        assert!(owners.due.lock().is_empty(), "none noted since");
    }

    /// Owners whose tasks end before any bound is known wait for one, at most
    /// [`MAX_WAITING`] of them, and get the first bound a create brings.
    #[test]
    fn ends_before_a_bound_wait_for_one_and_are_bounded() {
        let owners = Owners::default();
        for i in 0..=MAX_WAITING {
            owners.ended(&Arc::from(format!("owner-{i}")));
        }
        assert!(owners.take().is_empty(), "no bound yet: nothing to trim");
        assert_eq!(owners.due.lock().len(), MAX_WAITING, "at most so many wait");
        let task = NewTask::new(Arc::from("t"), Arc::from("bob"), Arc::from("tool"))
            .with_max_finished_per_owner(7);
        owners.note(&task);
        let due = owners.take();
        assert_eq!(due.len(), MAX_WAITING + 1, "the waiting owners and bob");
        assert!(due.iter().all(|(_, keep)| *keep == 7), "all with the bound");
        owners.ended(&Arc::from("late"));
        assert_eq!(owners.take(), vec![(Arc::from("late"), 7)]);
    }
}
