//! Early stopping on the mean validation loss, decided from the logged loss of every epoch
//! so far rather than from state kept in memory, so that a resumed run stops exactly where
//! the uninterrupted one would have.

use std::time::{Duration, Instant};

use burn::train::EarlyStoppingStrategy;
use burn::train::metric::store::{Aggregate, EventStoreClient, Split};

/// The longest a replica waits for the first device to log an epoch's validation loss.
const VALIDATION_WAIT: Duration = Duration::from_secs(30 * 60);

/// Stops once `patience` epochs have passed without a lower validation loss.
#[derive(Debug, Clone, Copy)]
pub struct PatienceStopping {
    pub patience: usize,
    /// Wait for the epoch's validation loss before deciding. Under DDP every replica asks
    /// as soon as its training epoch ends, while only the first device validates; waiting
    /// makes all of them decide on the same losses. A replica that stopped alone would leave
    /// the others waiting in their next all-reduce.
    pub wait_for_validation: bool,
}

impl EarlyStoppingStrategy for PatienceStopping {
    fn should_stop(&mut self, epoch: usize, store: &EventStoreClient) -> bool {
        let loss = |e| store.find_metric("Loss", e, Aggregate::Mean, &Split::Valid);
        if self.wait_for_validation {
            let deadline = Instant::now() + VALIDATION_WAIT;
            while loss(epoch).is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let losses: Vec<f64> = (1..=epoch).map(|e| loss(e).unwrap_or(f64::NAN)).collect();
        patience_exhausted(&losses, self.patience)
    }
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
    use super::patience_exhausted;

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
}
