//! Logging setup: `tracing` to stderr, text for people or JSON for log
//! pipelines, filtered by `RUST_LOG` (default `info`, without kube's own
//! per-request error lines).

use tracing_subscriber::EnvFilter;

/// Output format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Install the global subscriber. Safe to call more than once (later calls
/// are ignored), so tests and the binary can share it.
pub fn init(format: LogFormat) {
    // kube's client logs every failed HTTP answer at ERROR, although the
    // controller retries it and logs the failure itself once, with the API
    // server's message, at the level it deserves; RUST_LOG can bring those
    // lines back.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube_client::client::builder=off"));
    // Colours only for a person at a terminal, never in a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
