//! Early stopping on the mean validation loss, decided from the logged loss of every epoch
//! so far rather than from state kept in memory, so that a resumed run stops exactly where
//! the uninterrupted one would have.

use std::time::{Duration, Instant};

use burn::train::EarlyStoppingStrategy;
use burn::train::metric::store::{Aggregate, EventStoreClient, Split};

use crate::train::TrainingWatch;

/// The longest a decision waits for an epoch's validation to end.
const VALIDATION_WAIT: Duration = Duration::from_secs(30 * 60);

/// Stops once `patience` epochs have passed without a lower validation loss.
///
/// burn-train asks right after an epoch's validation steps are launched, while their losses
/// are still on their way to the event store (under DDP every replica asks as soon as its
/// own training epoch ends, and only the first device validates). An epoch's loss is read
/// only once its validation has ended (the [`TrainingWatch`] says when), because the store
/// keeps the first mean it computes for an epoch: read early, it would be the mean of part
/// of the validation. And this epoch's loss is waited for only when it decides, that is
/// when the run stops unless it is a new lowest: waiting drains the device before the next
/// epoch's first step can be launched, on every device.
#[derive(Clone)]
pub struct PatienceStopping {
    pub patience: usize,
    /// The first epoch this process trains (after a resume point, whose earlier epochs'
    /// losses are already logged).
    pub first_epoch: usize,
    pub watch: TrainingWatch,
}

impl PatienceStopping {
    /// The logged mean validation loss of `epoch` (NaN when none was logged by `deadline`).
    fn loss(&self, epoch: usize, store: &EventStoreClient, deadline: Instant) -> f64 {
        if epoch >= self.first_epoch && !self.watch.wait_for_validation(epoch, deadline) {
            return f64::NAN;
        }
        store
            .find_metric("Loss", epoch, Aggregate::Mean, &Split::Valid)
            .unwrap_or(f64::NAN)
    }
}

impl EarlyStoppingStrategy for PatienceStopping {
    fn should_stop(&mut self, epoch: usize, store: &EventStoreClient) -> bool {
        let deadline = Instant::now() + VALIDATION_WAIT;
        stops_after(epoch, self.patience, |e| self.loss(e, store, deadline))
    }
}

/// Whether a run stops after `epoch` (from 1), given `loss(e)`, the validation loss of each
/// epoch `e`; the loss of `epoch` itself is asked for only when it decides.
fn stops_after(epoch: usize, patience: usize, mut loss: impl FnMut(usize) -> f64) -> bool {
    let mut losses: Vec<f64> = (1..epoch).map(&mut loss).collect();
    // A non-finite loss is never the lowest: if the run goes on whatever this epoch's loss,
    // it goes on without it.
    losses.push(f64::NAN);
    if !patience_exhausted(&losses, patience) {
        return false;
    }
    losses[epoch - 1] = loss(epoch);
    patience_exhausted(&losses, patience)
}

/// Whether the last of `losses` (one per epoch, from epoch 1) comes `patience` or more
/// epochs after the lowest finite one (the first, on ties).
pub fn patience_exhausted(losses: &[f64], patience: usize) -> bool {
    let best = losses
        .iter()
        .enumerate()
        .filter(|(_, loss)| loss.is_finite())
        .fold(None, |best: Option<(usize, f64)>, (i, &loss)| match best {
            Some((_, lowest)) if lowest <= loss => best,
            _ => Some((i, loss)),
        });
    let since = match best {
        Some((i, _)) => losses.len() - 1 - i,
        None => losses.len(),
    };
    !losses.is_empty() && since >= patience
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::{patience_exhausted, stops_after};

    #[test]
    fn counts_epochs_since_the_lowest_loss() {
        assert!(!patience_exhausted(&[], 1));
        assert!(!patience_exhausted(&[1.0], 1));
        assert!(!patience_exhausted(&[1.0, 0.5, 0.6], 2));
        assert!(patience_exhausted(&[1.0, 0.5, 0.6, 0.7], 2));
        // A tie is no improvement.
        assert!(patience_exhausted(&[1.0, 0.5, 0.5], 1));
        assert!(patience_exhausted(&[f64::NAN, f64::NAN], 2));
    }

    #[test]
    fn decides_as_from_every_loss_and_waits_for_this_epochs_only_when_it_decides() {
        let mut rng = StdRng::seed_from_u64(3);
        for run in 0..200 {
            // Losses that mostly fall, with plateaus, rises and non-finite ones.
            let losses: Vec<f64> = (0..12)
                .map(|_| match rng.random_range(0..10) {
                    0 => f64::NAN,
                    1 => 1.0,
                    _ => rng.random_range(0.0..1.0),
                })
                .collect();
            for patience in 1..5 {
                for epoch in 1..=losses.len() {
                    let mut asked = Vec::new();
                    let stops = stops_after(epoch, patience, |e| {
                        asked.push(e);
                        losses[e - 1]
                    });
                    let label = format!("run {run}, patience {patience}, epoch {epoch}");
                    assert_eq!(
                        stops,
                        patience_exhausted(&losses[..epoch], patience),
                        "{label}"
                    );
                    let mut without = losses[..epoch].to_vec();
                    without[epoch - 1] = f64::NAN;
                    let decides = patience_exhausted(&without, patience);
                    assert_eq!(asked.contains(&epoch), decides, "{label}: asked {asked:?}");
                    assert!(asked.iter().all(|&e| e <= epoch), "{label}");
                }
            }
        }
    }
}
