//! The other workers' part in one decoding step: they stay on the step instead of going
//! back to rayon's idle loop between its products.
//!
//! A decoding step is about 120 small parallel products (a few to a few hundred
//! microseconds each) with short serial stretches between them. Given to rayon one at a
//! time, a worker that finds no work for a few tens of microseconds goes to sleep on a
//! futex, and the next product waits for it to be woken: measured at 2 threads, 84
//! context switches a token and 13% of the second core idle. Here the other workers
//! run [`Team::help`] for the whole step (as llama.cpp's pool spins on its barrier):
//! they take the products' chunks as they are published and, between them, run
//! whatever rayon work is pending (attention's parallel phases), so they never sleep
//! inside a step.
//!
//! Nothing waits for a helper to start (a helper not running, on a busy machine,
//! cannot stall the step): a product is a list of chunks that every thread claims from
//! one counter, the caller included, and the caller waits only for chunks a helper has
//! claimed and not finished.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Work split into chunks that any thread may run, in any order, once each.
pub(crate) trait Task: Send + Sync {
    /// Chunks in this task.
    fn chunks(&self) -> usize;
    /// Runs chunk `i` (below [`Task::chunks`]).
    fn run(&self, i: usize);
}

/// One published task and its progress.
struct Job {
    task: Arc<dyn Task>,
    /// The next chunk to claim.
    next: AtomicUsize,
    /// Chunks finished.
    done: AtomicUsize,
}

impl Job {
    /// Claims and runs chunks until none is left.
    fn work(&self) {
        let total = self.task.chunks();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= total {
                return;
            }
            self.task.run(i);
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// The caller of a decoding step and the workers helping it.
pub(crate) struct Team {
    /// Bumped once per published job.
    epoch: AtomicU64,
    job: Mutex<Option<Arc<Job>>>,
    /// Set when the step is over: helpers return.
    stop: AtomicBool,
    /// Set when the caller waited longer than [`STALL`] for a helper's chunk.
    stalled: AtomicBool,
}

/// A wait this long for a chunk a helper claimed means the helper lost its core (a
/// chunk takes microseconds): the machine is busy, and a team that spins is the wrong
/// tool there (measured with two busy loops on two cores: 10-16 tokens/s on the team,
/// 38-43 on rayon, whose idle workers sleep and get the core back first).
const STALL: std::time::Duration = std::time::Duration::from_micros(500);

impl Team {
    pub(crate) fn new() -> Team {
        Team {
            epoch: AtomicU64::new(0),
            job: Mutex::new(None),
            stop: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
        }
    }

    /// Runs every chunk of `task` (on the caller and whichever helpers are running)
    /// and returns when all are done.
    pub(crate) fn run(&self, task: Arc<dyn Task>) {
        let total = task.chunks();
        if total == 0 {
            return;
        }
        let job = Arc::new(Job {
            task,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        });
        if total > 1 {
            *self.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job.clone());
            self.epoch.fetch_add(1, Ordering::Release);
        }
        job.work();
        let mut spins = 0u32;
        let mut since = None;
        while job.done.load(Ordering::Acquire) < total {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                // A helper preempted mid-chunk on this core gets to finish it.
                std::thread::yield_now();
                let since = *since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > STALL {
                    self.stalled.store(true, Ordering::Relaxed);
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Whether the caller had to wait for a descheduled helper during the step.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// Ends the step: helpers return from [`Team::help`].
    pub(crate) fn finish(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// A helper's loop until [`Team::finish`]: each new job's chunks, and pending rayon
    /// work in between.
    pub(crate) fn help(&self) {
        let mut seen = 0u64;
        let mut spins = 0u32;
        while !self.stop.load(Ordering::Acquire) {
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch != seen {
                seen = epoch;
                let job = self
                    .job
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if let Some(job) = job {
                    job.work();
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(16) {
                std::hint::spin_loop();
            } else if rayon::yield_now() == Some(rayon::Yield::Executed) {
                // Ran a piece of the caller's rayon work (attention).
            } else if spins.is_multiple_of(1024) {
                // Not in a pool, or nothing pending: let another thread have the core.
                std::thread::yield_now();
            }
        }
    }
}

/// Ends a [`Team`]'s step when dropped (also when the step fails or panics, so the
/// helpers never wait forever).
pub(crate) struct Finish<'a>(pub(crate) &'a Team);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    struct Count(Vec<AtomicU32>);

    impl Task for Count {
        fn chunks(&self) -> usize {
            self.0.len()
        }
        fn run(&self, i: usize) {
            self.0[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every chunk runs exactly once, job after job, with any number of helpers (on
    /// rayon or not), and the helpers return when the step ends.
    #[test]
    fn every_chunk_runs_once() {
        for helpers in 0..4 {
            let team = Team::new();
            rayon::scope(|s| {
                for _ in 0..helpers {
                    s.spawn(|_| team.help());
                }
                let _finish = Finish(&team);
                for job in 0..300 {
                    let task = Arc::new(Count((0..job % 37).map(|_| AtomicU32::new(0)).collect()));
                    team.run(task.clone());
                    assert!(task.0.iter().all(|c| c.load(Ordering::Relaxed) == 1));
                }
            });
        }
    }
}
