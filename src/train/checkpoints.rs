//! Which epochs' checkpoints a run keeps. During training every epoch is saved; afterwards
//! [`super::restore_best_epoch`] reads the best one from the metric logs and prunes the rest
//! down to the best and the last. burn-train 0.21's own strategies choose the best epoch
//! from its event store while the current epoch's validation metrics may still be in
//! flight (seen on wgpu: the epoch kept was not the one with the lowest logged loss), and
//! its composition of last-N and best-metric can delete the best epoch's files.

use burn::train::checkpoint::{CheckpointingAction, CheckpointingStrategy};
use burn::train::metric::store::EventStoreClient;

/// Saves every epoch and deletes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct SaveEveryEpoch;

impl CheckpointingStrategy for SaveEveryEpoch {
    fn checkpointing(
        &mut self,
        _epoch: usize,
        _store: &EventStoreClient,
    ) -> Vec<CheckpointingAction> {
        vec![CheckpointingAction::Save]
    }
}
