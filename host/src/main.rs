//! The `radwasm` command: the controller host, the local stand-ins and the
//! policy author's tools, in one binary.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = radwasm::cli::Cli::parse();
    radwasm::telemetry::init(cli.log_format);
    match radwasm::cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
