//! The check a run makes before it allocates its network: the memory the layer table says
//! training (or classifying) needs, against what the device has free, refused in one line
//! with both figures instead of an allocation that aborts the process.

use indicatif::HumanBytes;

use crate::device::{BackendKind, memory};
use crate::model::NetworkSize;
use crate::train::TrainError;

/// Refuses to train a network of `size` at `batch` on `kind`'s device when its estimate
/// exceeds the memory free there.
pub(crate) fn check_training(
    size: NetworkSize,
    batch: usize,
    kind: BackendKind,
) -> Result<(), TrainError> {
    check(size.training_bytes(batch), kind, || {
        format!("train batches of {batch}")
    })
    .map_err(|message| too_large(size, message, " or lower the batch size"))
}

/// Refuses to load a saved network of `size` to classify batches of `batch` on `kind`'s
/// device when that exceeds the memory free there.
pub(crate) fn check_inference(
    size: NetworkSize,
    batch: usize,
    kind: BackendKind,
) -> Result<(), TrainError> {
    check(size.inference_bytes(batch), kind, || {
        format!("classify batches of {batch}")
    })
    .map_err(|message| too_large(size, message, ""))
}

/// `needed` bytes against what `kind`'s device has free: the figures and the limit that
/// sets the second, when they do not fit.
fn check(needed: u64, kind: BackendKind, purpose: impl Fn() -> String) -> Result<(), String> {
    match memory::room(kind) {
        Some(room) if needed > room.bytes => Err(format!(
            "needs about {} of memory to {}, more than the {} {}",
            HumanBytes(needed),
            purpose(),
            HumanBytes(room.bytes),
            room.set_by
        )),
        _ => Ok(()),
    }
}

fn too_large(size: NetworkSize, figures: String, advice: &str) -> TrainError {
    TrainError::TooLarge {
        message: format!(
            "the network ({} parameters) {figures}: make the network smaller{advice}",
            size.params
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_larger_than_the_machine_is_refused_with_both_figures() {
        let huge = NetworkSize::of_widths(&[784, 1_000_000_000, 10]);
        let message = check_training(huge, 64, BackendKind::Ndarray)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("needs about") && message.contains("more than the"),
            "{message}"
        );
        let small = NetworkSize::of_widths(&[784, 100, 10]);
        check_training(small, 64, BackendKind::Ndarray).unwrap();
        check_inference(small, 64, BackendKind::Ndarray).unwrap();
    }
}
