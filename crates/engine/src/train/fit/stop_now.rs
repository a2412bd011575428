//! Ending a run at once, for a process that exits next (a second Ctrl-C): what it leaves on
//! disk and on the terminal is what a clean stop leaves.

use crate::error_line::error_line;
use crate::train::fit::{dashboard, stops};

/// Waits for the file writes in flight, lets no new one start, restores the terminal from the
/// dashboard, and returns the line to print ([`stops::StopPoint`]'s): the checkpoint it names
/// is then the newest there will be.
pub fn end_now() -> String {
    crate::atomic_file::freeze_writes();
    let line = error_line(&stops::stopped());
    dashboard::restore_terminal_for_exit();
    line
}
