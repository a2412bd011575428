//! The memory a run may take on its device, for the check it makes before it allocates its
//! network.

use sysinfo::{MemoryRefreshKind, RefreshKind, System};

use super::BackendKind;

/// Bytes free for a run on `kind`'s device: the host memory the OS reports as available on
/// the CPU backend; `None` on a GPU, whose allocator reports running out itself.
pub fn available_bytes(kind: BackendKind) -> Option<u64> {
    match kind {
        BackendKind::Ndarray => {
            let memory =
                RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram());
            Some(System::new_with_specifics(memory).available_memory())
        }
        BackendKind::Cuda | BackendKind::Wgpu => None,
    }
}
