//! The `radwasm` command (the command line is being assembled).
fn main() {
    radwasm::telemetry::init(radwasm::telemetry::LogFormat::Text);
}
