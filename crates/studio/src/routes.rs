//! What the studio answers: its page and assets, the runs as JSON, a run's live updates as
//! server-sent events, a run's figures and files, and Stop. Every route sits behind
//! [`super::guard`]; a run is named only through [`RunsFolder::find`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream::{self, Stream};

use super::assets;
use super::runs::{RunStatus, RunsFolder};
use cubenet_engine::train::{
    CONFIG_FILE, CONFUSION_MATRIX_FILE, CURVES_FILE, PER_CLASS_ACCURACY_FILE, RUN_FILE, RunDir,
};

/// How often a live run's folder is looked at for news.
const LIVE_POLL: Duration = Duration::from_millis(500);

/// The files of a run that its page may show or offer as a download, with their types.
const RUN_FILES: [(&str, &str); 5] = [
    (CURVES_FILE, "image/png"),
    (CONFUSION_MATRIX_FILE, "image/png"),
    (PER_CLASS_ACCURACY_FILE, "text/csv; charset=utf-8"),
    (RUN_FILE, "text/plain; charset=utf-8"),
    (CONFIG_FILE, "application/json"),
];

/// The studio's routes over `runs`.
pub fn router(runs: Arc<RunsFolder>) -> Router {
    Router::new()
        .route("/", get(|| async { assets::page() }))
        .route("/assets/{file}", get(asset))
        .route("/api/runs", get(list_runs))
        .route("/api/runs/{name}", get(run_detail))
        .route("/api/runs/{name}/events", get(run_events))
        .route("/api/runs/{name}/files/{file}", get(run_file))
        .route("/api/runs/{name}/stop", post(stop_run))
        .fallback(|| async { not_found() })
        .with_state(runs)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    assets::asset(&file).unwrap_or_else(not_found)
}

async fn list_runs(State(runs): State<Arc<RunsFolder>>) -> Response {
    blocking(move || Json(runs.summaries()).into_response()).await
}

async fn run_detail(State(runs): State<Arc<RunsFolder>>, Path(name): Path<String>) -> Response {
    blocking(move || match runs.detail(&name) {
        Some(detail) => Json(detail).into_response(),
        None => not_found(),
    })
    .await
}

/// A run's page, sent again whenever its folder changes, as `run` events.
async fn run_events(State(runs): State<Arc<RunsFolder>>, Path(name): Path<String>) -> Response {
    let exists = {
        let (runs, name) = (runs.clone(), name.clone());
        tokio::task::spawn_blocking(move || runs.find(&name).is_some())
            .await
            .unwrap_or(false)
    };
    if !exists {
        return not_found();
    }
    Sse::new(run_updates(runs, name))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn run_updates(
    runs: Arc<RunsFolder>,
    name: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(None, move |last: Option<u64>| {
        let (runs, name) = (runs.clone(), name.clone());
        async move {
            loop {
                let (runs, name) = (runs.clone(), name.clone());
                let news = tokio::task::spawn_blocking(move || {
                    let fingerprint = runs.fingerprint(&name)?;
                    if Some(fingerprint) == last {
                        return Some((fingerprint, None));
                    }
                    let detail = runs.detail(&name)?;
                    Some((fingerprint, serde_json::to_string(&detail).ok()))
                })
                .await
                .ok()
                .flatten();
                match news {
                    // The run is gone: end the stream.
                    None => return None,
                    Some((fingerprint, Some(json))) => {
                        let event = Event::default().event("run").data(json);
                        return Some((Ok(event), Some(fingerprint)));
                    }
                    Some((_, None)) => tokio::time::sleep(LIVE_POLL).await,
                }
            }
        }
    })
}

async fn run_file(
    State(runs): State<Arc<RunsFolder>>,
    Path((name, file)): Path<(String, String)>,
) -> Response {
    let Some(&(_, content_type)) = RUN_FILES.iter().find(|(known, _)| *known == file) else {
        return not_found();
    };
    blocking(move || {
        let Some(dir) = runs.find(&name) else {
            return not_found();
        };
        match super::confined::read(&dir.root().join(&file)) {
            Ok(bytes) => ([(header::CONTENT_TYPE, content_type)], bytes).into_response(),
            Err(_) => not_found(),
        }
    })
    .await
}

/// Stops a running run as Ctrl-C would: at its next step, with a checkpoint that
/// `cubenet train --resume` continues from.
async fn stop_run(State(runs): State<Arc<RunsFolder>>, Path(name): Path<String>) -> Response {
    blocking(move || {
        let Some(dir) = runs.find(&name) else {
            return not_found();
        };
        match runs.detail(&name).map(|detail| detail.summary.status) {
            Some(RunStatus::Running) => match interrupt(&dir) {
                Ok(()) => (StatusCode::ACCEPTED, "stopping at the next step").into_response(),
                Err(reason) => (StatusCode::CONFLICT, reason).into_response(),
            },
            _ => (StatusCode::CONFLICT, "the run is not running").into_response(),
        }
    })
    .await
}

/// Sends SIGINT to the process that holds `dir`'s lock, and to no other process: only one
/// that provably holds that lock file ([`RunDir::holder`]).
#[cfg(unix)]
fn interrupt(dir: &RunDir) -> Result<(), String> {
    let pid = dir
        .holder()
        .ok_or_else(|| "no process provably holds this run's lock file".to_string())?;
    let pid = libc::pid_t::try_from(pid).map_err(|_| "the run's process id is out of range")?;
    // SAFETY: kill(2) with a process id and a signal number has no memory effects.
    match unsafe { libc::kill(pid, libc::SIGINT) } {
        0 => Ok(()),
        _ => Err(format!(
            "cannot signal process {pid}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

#[cfg(not(unix))]
fn interrupt(_: &RunDir) -> Result<(), String> {
    Err("stopping a run from the studio needs a Unix system".into())
}

/// Runs file-reading `work` off the server's async threads.
async fn blocking(work: impl FnOnce() -> Response + Send + 'static) -> Response {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
