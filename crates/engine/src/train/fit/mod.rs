//! The loop around burn-train that every job shares: the fit sequence ([`train_loop`]), the
//! loop's settings, the watch over a running loop, the epoch lines, early stopping, the
//! guard against known failures, the data-parallel strategies, stopping a run on request and
//! the dashboard that can ask for it, and launching a run on the backend chosen at run time.

pub(crate) mod dashboard;
pub mod data_parallel;
pub(crate) mod early_stopping;
pub(crate) mod epoch_lines;
pub(crate) mod experiment_log;
pub(crate) mod launch_guard;
pub(crate) mod learner_setup;
pub(crate) mod memory_check;
pub(crate) mod pinned_warmup;
pub(crate) mod run;
pub mod stop_now;
pub mod stops;
pub(crate) mod train_loop;
pub(crate) mod watch;
