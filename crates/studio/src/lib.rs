//! `cubenet studio`: a local web application over a folder of runs. It lists every run
//! there, whether `cubenet train` or the studio started it, in a sortable table; shows a
//! run's curves, progress, results, run file and log, live while it trains; overlays several
//! runs' curves and sets two runs' settings side by side; and stops a running run at a
//! checkpoint. It is one more reader of the artifact directories ([`cubenet_engine::train::RunDir`]),
//! served from this binary ([`assets`]) on loopback by default, behind [`guard`].

mod assets;
mod confined;
mod guard;
mod metric_curves;
mod routes;
mod runs;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use rand::RngExt;

use runs::RunsFolder;

/// Where the studio serves, and what.
#[derive(Debug, Clone)]
pub struct StudioConfig {
    /// The folder whose runs it shows; nothing outside it is read.
    pub runs: PathBuf,
    /// The address to listen on: loopback unless a user asks otherwise.
    pub host: IpAddr,
    /// The port; 0 takes a free one.
    pub port: u16,
}

/// Why the studio cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum StudioError {
    #[error("runs folder {}: {reason}", path.display())]
    RunsFolder { path: PathBuf, reason: String },
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the studio's server stopped: {0}")]
    Serve(#[source] std::io::Error),
}

/// A studio listening on its address, not yet answering.
pub struct Studio {
    listener: TcpListener,
    runs: Arc<RunsFolder>,
    guard: Arc<guard::Guard>,
    url: String,
}

impl Studio {
    /// Opens the runs folder and takes the address, with a fresh random token.
    pub fn bind(config: &StudioConfig) -> Result<Self, StudioError> {
        let runs = Arc::new(RunsFolder::open(&config.runs)?);
        let address = SocketAddr::new(config.host, config.port);
        let listen_error = |source| StudioError::Listen { address, source };
        let listener = TcpListener::bind(address).map_err(listen_error)?;
        let address = listener.local_addr().map_err(listen_error)?;
        let token = format!("{:032x}", rand::rng().random::<u128>());
        let shown = match address.ip() {
            ip if ip.is_unspecified() => {
                SocketAddr::new(IpAddr::from([127, 0, 0, 1]), address.port())
            }
            _ => address,
        };
        Ok(Self {
            url: format!("http://{shown}/?token={token}"),
            guard: Arc::new(guard::Guard::new(address, token)),
            listener,
            runs,
        })
    }

    /// The address to open, with the token that signs the browser in.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers requests until the process ends.
    pub fn serve(self) -> Result<(), StudioError> {
        self.listener
            .set_nonblocking(true)
            .map_err(StudioError::Serve)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(StudioError::Serve)?;
        let app = routes::router(self.runs).layer(axum::middleware::from_fn_with_state(
            self.guard,
            guard::check,
        ));
        runtime
            .block_on(async move {
                let listener = tokio::net::TcpListener::from_std(self.listener)?;
                axum::serve(listener, app).await
            })
            .map_err(StudioError::Serve)
    }
}
