//! `cubenet studio`: the local web application over a folder of runs (see [`cubenet_studio`]).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use cubenet_studio::{Studio, StudioConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The folder of runs to show (each run an artifact directory directly inside it)
    #[arg(long, default_value = "artifacts")]
    runs: PathBuf,
    /// The address to listen on; anything but loopback lets other machines sign in with the
    /// printed token
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// The port; 0 takes a free one
    #[arg(long, default_value_t = 8765)]
    port: u16,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let studio = Studio::bind(&StudioConfig {
        runs: args.runs,
        host: args.host,
        port: args.port,
    })?;
    println!("cubenet studio: open {}", studio.url());
    studio.serve()?;
    Ok(())
}
