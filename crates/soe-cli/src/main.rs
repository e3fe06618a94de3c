//! `soe`: a command-line tool for the SOE protocol (v3).
//!
//! * `soe serve`: an echo (or sink) server that logs sessions, with periodic stats and
//!   Prometheus metrics;
//! * `soe ping`: round trips to a server, like ping;
//! * `soe load`: a bounded load generator with a byte-for-byte verified summary;
//! * `soe decode`: a dissector for hex datagrams and pcap/pcapng captures;
//! * `soe proxy`: a relay that decodes both directions live and can impair the link.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)] // the limit is in clippy.toml

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod client;
mod decode;
mod flags;
mod keycheck;
mod load;
mod metrics_http;
mod net;
mod out;
mod ping;
mod proxy;
mod record;
mod serve;

/// The SOE protocol (v3) tool: serve, ping, load, decode, proxy.
#[derive(Debug, Parser)]
#[command(name = "soe", version, about, long_about = None)]
struct Cli {
    /// Log filter for diagnostics on stderr (`RUST_LOG` syntax, e.g. `debug` or
    /// `soe_session=trace`; a filter that does not parse is refused). Default: `warn`.
    #[arg(long, global = true, value_name = "FILTER", value_parser = parse_log_filter)]
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
            // Not eprintln!, which would panic if stderr's reader went away too.
            let _ = writeln!(std::io::stderr(), "soe: error: {error:#}");
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

/// clap's message on one line: its first line without the `error: ` prefix, the lines that
/// detail it (the names of missing arguments) after it, and the usage line (which names the
/// command) in brackets.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim);
    let first = lines.find(|l| !l.is_empty()).unwrap_or("bad arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // What follows the first line, up to the blank line before the usage or a tip.
    let details: Vec<&str> = lines
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage: ") && !l.starts_with("tip: "))
        .collect();
    let message = if details.is_empty() {
        first.to_owned()
    } else {
        format!("{} {}", first, details.join(", "))
    };
    match rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
    {
        Some(usage) => format!("{message} (usage: {usage}; see --help)"),
        None => format!("{message} (see --help)"),
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

/// The level names a filter directive may give.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Checks a `--log` filter: it must parse, and a bare word must be a level or look like a
/// target (a crate or module path: `soe`, `soe_session`, `tokio::net`), so that a misspelt
/// level (`debgu`, which the filter syntax would take as a target) is refused, not ignored.
fn parse_log_filter(filter: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("{filter:?} is not a log filter: {e}"))?;
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains(['=', '[', '{']);
        let level = LEVELS.iter().any(|l| directive.eq_ignore_ascii_case(l));
        let target = directive.contains("::")
            || directive.contains('_')
            || directive.starts_with("soe")
            || ["tokio", "mio", "metrics"].contains(&directive);
        if bare && !level && !target {
            return Err(format!(
                "{directive:?} is neither a level ({}) nor a target such as soe_session or \
                 soe_runtime=debug",
                LEVELS.join(", ")
            ));
        }
    }
    Ok(filter.to_owned())
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
    fn missing_arguments_are_named() {
        for (args, named) in [
            (
                &["soe", "load", "127.0.0.1:20042", "--sessions", "2"][..],
                "--messages <M>|--duration <S>",
            ),
            (
                &["soe", "proxy", "--listen", "127.0.0.1:1"],
                "--upstream <ADDR>",
            ),
            (&["soe", "ping"], "<ADDR>"),
        ] {
            let error = Cli::try_parse_from(args).unwrap_err();
            let line = one_line(&error.render().to_string());
            let (message, _usage) = line.split_once(" (usage: ").unwrap();
            assert!(message.contains(named), "{line}");
        }
    }

    #[test]
    fn bad_log_filters_are_refused() {
        for good in [
            "warn",
            "debug",
            "soe_session=trace",
            "soe",
            "tokio::net=info,warn",
        ] {
            assert!(parse_log_filter(good).is_ok(), "{good}");
        }
        for bad in ["soe=verbose", "debgu", "=="] {
            assert!(parse_log_filter(bad).is_err(), "{bad}");
        }
    }

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
