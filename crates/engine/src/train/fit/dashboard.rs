//! burn-train's dashboard (its terminal UI, shown when stdout is a terminal), wrapped so that
//! every way of stopping a run through it is a clean stop and the terminal is always given
//! back.
//!
//! - Its "stop the training" key (`q` then `s`) becomes a stop request
//!   ([`super::stops::request_stop_at_next_step`]), which stops training at the next step with
//!   the line that says where `--resume` continues; the dashboard is handed an interrupter of
//!   its own, since burn-train checks its loop's interrupter during validation too (it would
//!   checkpoint a half-validated epoch).
//! - Its "kill" key (`q` then `k`) panics on its threads by design; the launch guard turns that
//!   into the same stop ([`super::launch_guard`]).
//! - Ctrl-C, which a terminal in raw mode reads as a key and burn-train ignores, sends SIGINT
//!   again once the process handles it ([`super::stops::handle_stop_signals`]); Ctrl-\ and
//!   Ctrl-Z stay keys, as they were.
//! - It opens at the first numeric metric: its plot keys (left, right) divide by the number of
//!   plotted metrics and panic while there is none.
//! - The terminal (raw mode, the alternate screen, the cursor) is restored when the dashboard
//!   closes, when its threads panic, when the training thread unwinds ([`TerminalGuard`]), and
//!   before a process that stops at once exits ([`restore_terminal_for_exit`]).

use std::error::Error;
use std::io::{self, IsTerminal, Write};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use burn::train::metric::MetricDefinition;
use burn::train::renderer::tui::TuiMetricsRendererWrapper;
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn::train::{Interrupter, LearnerSummary};

use super::stops;

/// Whether the dashboard has the terminal, and the signal of its closing.
static SHOWN: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// How long the training thread waits for a dashboard closing on another thread.
const CLOSING_WAIT: Duration = Duration::from_secs(2);

/// burn-train's dashboard, opened at the first numeric metric (see the module docs).
pub(crate) struct Dashboard {
    /// The epoch a resumed run continues after, where the dashboard's progress starts.
    resume_after: Option<usize>,
    /// The metrics registered before it opened.
    pending: Vec<MetricDefinition>,
    tui: Option<TuiMetricsRendererWrapper>,
    /// Set by the dashboard's "stop the training" key.
    keys: Interrupter,
    /// Whether that key's stop was requested.
    key_stop_requested: bool,
    /// Whether Ctrl-C sends SIGINT again.
    interrupt_key: bool,
}

impl Dashboard {
    pub(crate) fn new(resume_after: Option<usize>) -> Self {
        Self {
            resume_after,
            pending: Vec::new(),
            tui: None,
            keys: Interrupter::new(),
            key_stop_requested: false,
            interrupt_key: false,
        }
    }

    /// The open dashboard; opens it for a numeric metric.
    fn tui(&mut self, opens: bool) -> Option<&mut TuiMetricsRendererWrapper> {
        if self.tui.is_none() && opens {
            *lock_shown() = true;
            let mut tui = TuiMetricsRendererWrapper::new(self.keys.clone(), self.resume_after);
            for definition in self.pending.drain(..) {
                tui.register_metric(definition);
            }
            self.tui = Some(tui);
        }
        self.watch_keys();
        self.tui.as_mut()
    }

    /// Turns the stop key into a request, and Ctrl-C back into SIGINT once burn-train's
    /// thread has put the terminal in raw mode.
    fn watch_keys(&mut self) {
        if self.keys.should_stop() && !self.key_stop_requested {
            self.key_stop_requested = true;
            stops::request_stop_at_next_step();
        }
        if self.tui.is_some()
            && !self.interrupt_key
            && stops::signals_handled()
            && crossterm::terminal::is_raw_mode_enabled().unwrap_or(false)
        {
            self.interrupt_key = true;
            // Without it Ctrl-C stays a key: the run can still be stopped with `q`.
            let _ = let_ctrl_c_interrupt();
        }
    }
}

impl MetricsRendererTraining for Dashboard {
    fn update_train(&mut self, state: MetricState) {
        let opens = matches!(state, MetricState::Numeric(..));
        if let Some(tui) = self.tui(opens) {
            tui.update_train(state);
        }
    }

    fn update_valid(&mut self, state: MetricState) {
        let opens = matches!(state, MetricState::Numeric(..));
        if let Some(tui) = self.tui(opens) {
            tui.update_valid(state);
        }
    }

    fn render_train(&mut self, item: TrainingProgress, progress_indicators: Vec<ProgressType>) {
        if let Some(tui) = self.tui(false) {
            tui.render_train(item, progress_indicators);
        }
    }

    fn render_valid(&mut self, item: TrainingProgress, progress_indicators: Vec<ProgressType>) {
        if let Some(tui) = self.tui(false) {
            tui.render_valid(item, progress_indicators);
        }
    }

    fn on_train_end(&mut self, summary: Option<LearnerSummary>) -> Result<(), Box<dyn Error>> {
        match self.tui(false) {
            Some(tui) => tui.on_train_end(summary),
            None => Ok(()),
        }
    }
}

impl MetricsRendererEvaluation for Dashboard {
    fn update_test(&mut self, name: EvaluationName, state: MetricState) {
        let opens = matches!(state, MetricState::Numeric(..));
        if let Some(tui) = self.tui(opens) {
            tui.update_test(name, state);
        }
    }

    fn render_test(&mut self, item: EvaluationProgress, progress_indicators: Vec<ProgressType>) {
        if let Some(tui) = self.tui(false) {
            tui.render_test(item, progress_indicators);
        }
    }

    fn on_test_end(&mut self, summary: Option<LearnerSummary>) -> Result<(), Box<dyn Error>> {
        match self.tui(false) {
            Some(tui) => tui.on_test_end(summary),
            None => Ok(()),
        }
    }
}

impl MetricsRenderer for Dashboard {
    fn manual_close(&mut self) {
        if let Some(tui) = self.tui(false) {
            tui.manual_close();
        }
    }

    fn register_metric(&mut self, definition: MetricDefinition) {
        match self.tui.as_mut() {
            Some(tui) => tui.register_metric(definition),
            None => self.pending.push(definition),
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        // burn-train's dashboard restores the terminal as it closes, unless its thread panicked.
        drop(self.tui.take());
        restore_terminal();
    }
}

fn lock_shown() -> std::sync::MutexGuard<'static, bool> {
    SHOWN
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Gives the terminal back if the dashboard has it: raw mode off, the main screen, the cursor.
/// Takes stdout's lock before the dashboard's, as [`restore_terminal_for_exit`] does.
fn restore_terminal() {
    let mut stdout = io::stdout().lock();
    let mut shown = lock_shown();
    if std::mem::replace(&mut *shown, false) {
        write_restore(&mut stdout);
        SHOWN.1.notify_all();
    }
}

fn write_restore(stdout: &mut impl Write) {
    // Best effort on a way out: a terminal that is gone cannot be restored.
    let _ = crossterm::terminal::disable_raw_mode();
    if io::stdout().is_terminal() {
        let _ = crossterm::execute!(
            stdout,
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Restores the terminal for a process about to exit, and keeps burn-train's drawing thread
/// from writing after that.
pub(crate) fn restore_terminal_for_exit() {
    let mut stdout = io::stdout().lock();
    if std::mem::replace(&mut *lock_shown(), false) {
        write_restore(&mut stdout);
    }
    // Held until the process exits.
    std::mem::forget(stdout);
}

/// Restores the terminal when the training loop is left in any way: the dashboard closes on
/// burn-train's event thread, so a loop that unwound waits for it a moment before restoring
/// the terminal itself.
pub(crate) struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let deadline = Instant::now() + CLOSING_WAIT;
        let mut shown = lock_shown();
        while *shown {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            shown = SHOWN
                .1
                .wait_timeout(shown, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        drop(shown);
        restore_terminal();
    }
}

/// Lets Ctrl-C send SIGINT on the terminal in raw mode, leaving Ctrl-\ and Ctrl-Z keys.
#[cfg(unix)]
fn let_ctrl_c_interrupt() -> io::Result<()> {
    use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, tcgetattr, tcsetattr};
    /// The value that turns a special key off (`_POSIX_VDISABLE`).
    const DISABLED: u8 = if cfg!(any(target_os = "macos", target_os = "freebsd")) {
        0xff
    } else {
        0
    };
    // The terminal crossterm put in raw mode: stdin if it is one, else the controlling one.
    let stdin = io::stdin();
    let tty;
    let fd = match stdin.is_terminal() {
        true => std::os::fd::AsFd::as_fd(&stdin),
        false => {
            tty = std::fs::File::options()
                .read(true)
                .write(true)
                .open("/dev/tty")?;
            std::os::fd::AsFd::as_fd(&tty)
        }
    };
    let mut mode = tcgetattr(fd)?;
    mode.local_modes |= LocalModes::ISIG;
    mode.special_codes[SpecialCodeIndex::VQUIT] = DISABLED;
    mode.special_codes[SpecialCodeIndex::VSUSP] = DISABLED;
    tcsetattr(fd, OptionalActions::Now, &mode)?;
    Ok(())
}

#[cfg(not(unix))]
fn let_ctrl_c_interrupt() -> io::Result<()> {
    Ok(())
}
