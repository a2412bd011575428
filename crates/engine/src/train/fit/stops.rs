//! Stopping a run on request (Ctrl-C, SIGTERM or SIGHUP, burn-train's dashboard keys) so that
//! `--resume` continues it exactly.
//!
//! A first request during training stops it at its next step, on the training thread itself:
//! the learning-rate scheduler, which burn-train steps first thing in every training step
//! (on every replica), sets burn-train's interrupter, and burn-train checks it right after that
//! step. So the epoch the request lands in is neither validated nor checkpointed, its
//! checkpoint writes already launched are finished (burn-train's checkpointers join their
//! threads when the loop returns), and the newest complete checkpoint is the one `--resume`
//! continues after. A request during validation lets that validation and its checkpoint
//! finish, and stops at the first step of the next epoch; one during the last epoch's
//! validation stops the run before its evaluation. A second request, or one outside the loop
//! (loading data before it, evaluating after it), stops the process at once
//! ([`super::stop_now::end_now`]): file writes in flight finish, no new one starts, and the checkpoint named
//! is the newest one on disk.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::lr_scheduler::LrScheduler;
use burn::optim::LearningRate;
use burn::prelude::Backend;
use burn::train::Interrupter;

use crate::train::{RunDir, TrainError};

/// Where a stopped run stands, as its one line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopPoint {
    /// Stopped before training began: nothing new was written.
    BeforeTraining,
    /// Stopped in the first epoch of `epochs`, before any checkpoint.
    NoCheckpoint { epochs: usize },
    /// `--resume` continues after `epoch` of `epochs`.
    AfterEpoch { epoch: usize, epochs: usize },
}

impl std::fmt::Display for StopPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BeforeTraining => write!(f, "stopped before training began"),
            Self::NoCheckpoint { epochs } => write!(
                f,
                "stopped in epoch 1 of {epochs}, before its checkpoint: nothing to resume"
            ),
            Self::AfterEpoch { epoch, epochs } => write!(
                f,
                "stopped after epoch {epoch} of {epochs}; continue with --resume"
            ),
        }
    }
}

/// What a request to stop does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Training stops at its next step.
    AtNextStep,
    /// The caller is to end the process now ([`super::stop_now::end_now`]).
    Now,
}

/// The run a request is about: its directory and length once its loop has begun, and
/// whether the loop is running.
struct StopState {
    requests: usize,
    run: Option<(RunDir, usize)>,
    training: bool,
}

static STATE: Mutex<StopState> = Mutex::new(StopState {
    requests: 0,
    run: None,
    training: false,
});

/// Whether training is to stop at its next step: read at every step, so kept outside the lock.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether this process turns SIGINT into [`request_stop`]; see [`handle_stop_signals`].
static SIGNALS_HANDLED: AtomicBool = AtomicBool::new(false);

fn state() -> std::sync::MutexGuard<'static, StopState> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Asks the run in progress to stop (a signal's handler calls this): at its next step the
/// first time during training, at once otherwise.
pub fn request_stop() -> StopRequest {
    let mut state = state();
    state.requests += 1;
    match state.training && state.requests == 1 {
        true => {
            REQUESTED.store(true, Ordering::Relaxed);
            StopRequest::AtNextStep
        }
        false => StopRequest::Now,
    }
}

/// A request that never ends the process (the dashboard's "stop the training" key).
pub(crate) fn request_stop_at_next_step() {
    state().requests += 1;
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether a stop was requested since the current run's loop began.
pub(crate) fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Says that this process handles SIGINT with [`request_stop`], so the dashboard lets Ctrl-C
/// send it (by default a terminal in raw mode reads Ctrl-C as a key, which burn-train ignores).
pub fn handle_stop_signals() {
    SIGNALS_HANDLED.store(true, Ordering::Relaxed);
}

pub(crate) fn signals_handled() -> bool {
    SIGNALS_HANDLED.load(Ordering::Relaxed)
}

/// Where the current run stands, as [`TrainError::Stopped`] (or the error reading its
/// checkpoints).
pub(crate) fn stopped() -> TrainError {
    let run = state().run.clone();
    let Some((dir, epochs)) = run else {
        return TrainError::Stopped(StopPoint::BeforeTraining);
    };
    match dir.last_complete_checkpoint() {
        Ok(Some(epoch)) => TrainError::Stopped(StopPoint::AfterEpoch { epoch, epochs }),
        Ok(None) => TrainError::Stopped(StopPoint::NoCheckpoint { epochs }),
        Err(error) => error,
    }
}

/// The training loop of a run in `dir` of `epochs` epochs, while it lasts: a first request
/// stops it at its next step. Dropped, the run is finishing: a request then stops it at once.
pub(crate) struct TrainingPhase;

impl TrainingPhase {
    pub(crate) fn begin(dir: &RunDir, epochs: usize) -> Self {
        let mut state = state();
        state.requests = 0;
        state.run = Some((dir.clone(), epochs));
        state.training = true;
        REQUESTED.store(false, Ordering::Relaxed);
        Self
    }
}

impl Drop for TrainingPhase {
    fn drop(&mut self) {
        state().training = false;
    }
}

/// A learning-rate schedule that stops training at the step after a request (see the
/// module docs); its records are the wrapped schedule's, so checkpoints do not change.
#[derive(Clone)]
pub(crate) struct StopAtStep<S> {
    schedule: S,
    interrupter: Interrupter,
}

impl<S> StopAtStep<S> {
    pub(crate) fn new(schedule: S, interrupter: Interrupter) -> Self {
        Self {
            schedule,
            interrupter,
        }
    }
}

impl<S: LrScheduler> LrScheduler for StopAtStep<S> {
    type Record<B: Backend> = S::Record<B>;

    fn step(&mut self) -> LearningRate {
        if requested() {
            self.interrupter.stop(Some("stop requested"));
        }
        self.schedule.step()
    }

    fn to_record<B: Backend>(&self) -> Self::Record<B> {
        self.schedule.to_record::<B>()
    }

    fn load_record<B: Backend>(self, record: Self::Record<B>) -> Self {
        Self {
            schedule: self.schedule.load_record::<B>(record),
            interrupter: self.interrupter,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_say_where_resume_continues() {
        assert_eq!(
            StopPoint::AfterEpoch {
                epoch: 6,
                epochs: 30
            }
            .to_string(),
            "stopped after epoch 6 of 30; continue with --resume"
        );
        assert_eq!(
            StopPoint::NoCheckpoint { epochs: 30 }.to_string(),
            "stopped in epoch 1 of 30, before its checkpoint: nothing to resume"
        );
    }
}
