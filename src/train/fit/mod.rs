//! The loop around burn-train that every job shares: the fit sequence ([`train_loop`]), the
//! loop's settings, the watch over a running loop, the epoch lines, early stopping, the
//! guard against known failures, the data-parallel strategies, and launching a run on the
//! backend chosen at run time.

pub mod data_parallel;
pub(crate) mod early_stopping;
pub(crate) mod epoch_lines;
pub(crate) mod experiment_log;
pub(crate) mod launch_guard;
pub(crate) mod learner_setup;
pub(crate) mod memory_check;
pub(crate) mod pinned_warmup;
pub(crate) mod run;
pub(crate) mod train_loop;
pub(crate) mod watch;
