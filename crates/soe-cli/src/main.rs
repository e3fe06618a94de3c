//! `soe`: a command-line tool for the SOE protocol (v3).
//!
//! * `soe serve`: an echo (or sink) server that logs sessions, with periodic stats and
//!   Prometheus metrics;
//! * `soe ping`: round trips to a server, like ping;
//! * `soe load`: a bounded load generator with a byte-for-byte verified summary;
//! * `soe decode`: a dissector for hex datagrams and pcap/pcapng captures;
//! * `soe proxy`: a relay that decodes both directions live and can impair the link.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod client;
mod decode;
mod flags;
mod load;
mod ping;
mod proxy;
mod serve;

/// The SOE protocol (v3) tool: serve, ping, load, decode, proxy.
#[derive(Debug, Parser)]
#[command(name = "soe", version, about, long_about = None)]
struct Cli {
    /// Log filter for diagnostics on stderr (`RUST_LOG` syntax, e.g. `debug` or
    /// `soe_session=trace`). Default: `warn`.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a server that echoes (or swallows) every message and logs sessions.
    Serve(serve::ServeArgs),
    /// Connect, send messages one at a time and print each round trip.
    Ping(ping::PingArgs),
    /// Generate load from many sessions and verify every echo byte for byte.
    Load(load::LoadArgs),
    /// Dissect SOE datagrams from hex or from a pcap/pcapng capture.
    Decode(decode::DecodeArgs),
    /// Relay between a client and a server, decoding both directions and impairing the link.
    Proxy(proxy::ProxyArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log.as_deref().unwrap_or("warn"));
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Ping(args) => ping::run(args),
        Command::Load(args) => load::run(args),
        Command::Decode(args) => decode::run(args),
        Command::Proxy(args) => proxy::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("soe: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command's future on a tokio runtime: multi-threaded for the commands that serve many
/// sessions (`serve`, `load`), on the calling thread for the others.
fn block_on<F: Future>(multi_thread: bool, future: F) -> anyhow::Result<F::Output> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    Ok(runtime.block_on(future))
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
