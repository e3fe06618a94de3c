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
mod metrics_http;
mod net;
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
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

/// Reports bad arguments as every other error is reported: one line, `soe: error: ...`, exit
/// 1. `--help` and `--version` print as usual and exit 0.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = error.print();
        return if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    eprintln!("soe: error: {}", one_line(&error.render().to_string()));
    ExitCode::FAILURE
}

/// clap's message on one line: its first line without the `error: ` prefix, and the usage line
/// (which names the command) in brackets.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("bad arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
    {
        Some(usage) => format!("{first} (usage: {usage}; see --help)"),
        None => format!("{first} (see --help)"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fit_on_one_line() {
        for args in [
            &["soe", "ping"][..],
            &["soe", "ping", "127.0.0.1:1", "--bogus"],
            &["soe", "ping", "127.0.0.1:1", "--udp-length", "100000"],
            &["soe", "frobnicate"],
            &["soe", "load", "127.0.0.1:1"],
        ] {
            let error = Cli::try_parse_from(args).unwrap_err();
            let line = one_line(&error.render().to_string());
            assert!(!line.contains('\n'), "{line}");
            assert!(!line.starts_with("error:"), "{line}");
            assert!(line.contains("see --help"), "{line}");
        }
    }
}
