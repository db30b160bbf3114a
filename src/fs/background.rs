//! Structures that need every metadata row (`by-id/`, `by-scene/`, `columns/`): built once per
//! mount, in a thread of their own, and waited for interruptibly.
//!
//! Why in the background: building reads one row per record, which takes minutes for millions
//! of records and forever for a snapshot that claims ten billion. A request that did it would
//! hold its requester in D state the whole time (see [`crate::interrupt`]). So the first
//! request that needs the structure starts one builder thread and waits for it, looking at its
//! requester every [`interrupt::POLL`]: Ctrl-C ends the `ls` at once, and the build goes on,
//! so the next `ls` finds it further along or done.
//!
//! Before the thread starts, the caller's `price` check refuses a claim the memory budget
//! cannot hold. A refusal or a failed build is kept and reported (EIO, one log line) on every
//! later use; the rest of the tree is unaffected.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::error::FsError;
use crate::dataset::Dataset;
use crate::interrupt;

#[derive(Debug)]
enum State<T> {
    NotStarted,
    Building,
    Ready(Arc<T>),
    /// Refused or failed for good (the error says why, naming the count and the limit).
    Failed(FsError),
}

#[derive(Debug)]
struct Shared<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
    /// Set when the mount's core goes away: the builder stops.
    stop: AtomicBool,
}

/// Checks, before anything is read, that the dataset's claims fit the budget.
pub type Price = fn(&Dataset) -> Result<(), FsError>;

/// One structure of one mount, built at most once.
#[derive(Debug)]
pub struct Background<T> {
    shared: Arc<Shared<T>>,
    /// What it is, for log lines ("by-id/ and by-scene/").
    what: &'static str,
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

impl<T: Send + Sync + 'static> Background<T> {
    pub fn new(what: &'static str) -> Self {
        Background {
            shared: Arc::new(Shared {
                state: Mutex::new(State::NotStarted),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
            what,
        }
    }

    /// The structure, building it first (in the background) if needed; waits for the build,
    /// ending early when the requester is interrupted.
    /// `build` builds the structure, returning early with an error once the flag is set.
    pub fn get<B>(&self, dataset: &Arc<Dataset>, price: Price, build: B) -> Result<Arc<T>, FsError>
    where
        B: FnOnce(&Dataset, &AtomicBool) -> Result<T, FsError> + Send + 'static,
    {
        let mut build = Some(build);
        let mut state = self.lock();
        loop {
            match &*state {
                State::Ready(built) => return Ok(built.clone()),
                State::Failed(why) => return Err(why.clone()),
                State::NotStarted => {
                    let started = price(dataset).and_then(|()| match build.take() {
                        Some(build) => self.start(dataset, build),
                        None => Err(FsError::failed("the builder was already started")),
                    });
                    *state = match started {
                        Ok(()) => State::Building,
                        Err(why) => {
                            tracing::error!(error = %why, "{} unavailable", self.what);
                            State::Failed(why)
                        }
                    };
                }
                State::Building => {
                    interrupt::check()?;
                    state = interrupt::waiting(|| {
                        self.shared
                            .changed
                            .wait_timeout(state, interrupt::POLL)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    });
                }
            }
        }
    }

    /// The structure if it is built already; never starts or waits for a build.
    pub fn ready(&self) -> Option<Arc<T>> {
        match &*self.lock() {
            State::Ready(built) => Some(built.clone()),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        crate::sync::lock(&self.shared.state)
    }

    fn start<B>(&self, dataset: &Arc<Dataset>, build: B) -> Result<(), FsError>
    where
        B: FnOnce(&Dataset, &AtomicBool) -> Result<T, FsError> + Send + 'static,
    {
        tracing::info!(
            records = dataset.len(),
            "building {} from every metadata row",
            self.what
        );
        let (shared, dataset, what) = (self.shared.clone(), dataset.clone(), self.what);
        std::thread::Builder::new()
            .name("sdsfs-index".into())
            .spawn(move || {
                // A panic in the build fails the build (its waiters get the error) instead
                // of leaving them waiting for a thread that is gone.
                let outcome = super::panics::catch(|| {
                    crate::interrupt::background(|| build(&dataset, &shared.stop))
                })
                .unwrap_or_else(|caught| {
                    Err(FsError::failed(format!(
                        "building {what} panicked: {caught}"
                    )))
                });
                let mut state = crate::sync::lock(&shared.state);
                *state = match outcome {
                    Ok(built) => State::Ready(Arc::new(built)),
                    Err(why) => {
                        tracing::error!(error = %why, "{what} unavailable");
                        State::Failed(why)
                    }
                };
                shared.changed.notify_all();
            })
            .map(|_| ())
            .map_err(|e| FsError::at(format!("cannot start the builder of {}", self.what), e))
    }
}
