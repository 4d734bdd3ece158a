//! Per-decision store state: the WASI context that grants nothing, the memory
//! limiter, and the guest's log import.
//!
//! A fresh [`SandboxState`] is made for every decision, so nothing a guest
//! does while deciding for one object can be seen while deciding for another.

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{v0_1, v0_2, v0_3, v0_4, v0_5, v0_6};

/// Most log messages kept from one decision; later ones are counted, not kept.
pub const MAX_LOG_MESSAGES: usize = 64;
/// Longest log message kept, in bytes; longer ones are cut.
pub const MAX_LOG_MESSAGE_BYTES: usize = 4096;

/// The fixed wall-clock time every guest sees: 2020-01-01T00:00:00Z.
/// A guest has no business knowing the time; this keeps decisions replayable.
const FIXED_WALL_CLOCK_SECS: u64 = 1_577_836_800;

/// Severity of a guest log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One message a guest logged while deciding.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GuestLog {
    pub level: LogLevel,
    pub message: String,
}

/// Store data for one decision.
pub struct SandboxState {
    /// Made on the guest's first WASI call: most decisions make none (the
    /// SDK needs no clock, file or random number), and building the context
    /// and its table is a measurable part of a decision's fixed cost.
    wasi: Option<(WasiCtx, ResourceTable)>,
    memory_limit: usize,
    /// Set when the guest asked for more memory than the cap allows.
    pub(crate) memory_limit_hit: bool,
    pub(crate) logs: Vec<GuestLog>,
    pub(crate) dropped_logs: usize,
}

impl SandboxState {
    pub fn new(memory_limit: usize) -> Self {
        Self {
            wasi: None,
            memory_limit,
            memory_limit_hit: false,
            logs: Vec::new(),
            dropped_logs: 0,
        }
    }
}

/// A WASI context with no preopened directories, no environment, no
/// arguments, no sockets, closed stdin, discarded stdout/stderr, a frozen
/// clock and a fixed random stream.
fn deterministic_wasi() -> WasiCtx {
    let mut builder = WasiCtx::builder();
    builder
        .wall_clock(FixedWallClock)
        .monotonic_clock(FixedMonotonicClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![
            0x5a, 0x17, 0xc3, 0x88,
        ]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![
            0x2b, 0x91, 0x4e, 0x06,
        ]))
        .insecure_random_seed(0x7261_6477_6173_6d00)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}

struct FixedWallClock;

impl wasmtime_wasi::HostWallClock for FixedWallClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    fn now(&self) -> std::time::Duration {
        std::time::Duration::from_secs(FIXED_WALL_CLOCK_SECS)
    }
}

struct FixedMonotonicClock;

impl wasmtime_wasi::HostMonotonicClock for FixedMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }

    fn now(&self) -> u64 {
        0
    }
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (ctx, table) = self
            .wasi
            .get_or_insert_with(|| (deterministic_wasi(), ResourceTable::new()));
        WasiCtxView { ctx, table }
    }
}

impl ResourceLimiter for SandboxState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Table size cap; Rust guests use a handful of entries.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl SandboxState {
    /// Keep one guest log message, within the per-decision caps.
    fn record_log(&mut self, level: LogLevel, mut message: String) {
        if self.logs.len() >= MAX_LOG_MESSAGES {
            self.dropped_logs += 1;
            return;
        }
        if message.len() > MAX_LOG_MESSAGE_BYTES {
            let mut cut = MAX_LOG_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        self.logs.push(GuestLog { level, message });
    }
}

/// The `log` import, for each contract version the host loads.
macro_rules! log_import {
    ($($version:ident),*) => {$(
        impl $version::radapp::policy::log::Host for SandboxState {
            fn log(&mut self, level: $version::radapp::policy::log::Level, message: String) {
                use $version::radapp::policy::log::Level;
                let level = match level {
                    Level::Trace => LogLevel::Trace,
                    Level::Debug => LogLevel::Debug,
                    Level::Info => LogLevel::Info,
                    Level::Warn => LogLevel::Warn,
                    Level::Error => LogLevel::Error,
                };
                self.record_log(level, message);
            }
        }

        impl $version::radapp::policy::types::Host for SandboxState {}
    )*};
}

log_import!(v0_1, v0_2, v0_3, v0_4, v0_5, v0_6);

// Contract 0.4 keeps each kind's records in a type-only interface.
impl v0_4::radapp::policy::template_types::Host for SandboxState {}
impl v0_4::radapp::policy::resource_types::Host for SandboxState {}
impl v0_5::radapp::policy::template_types::Host for SandboxState {}
impl v0_5::radapp::policy::resource_types::Host for SandboxState {}
impl v0_6::radapp::policy::template_types::Host for SandboxState {}
impl v0_6::radapp::policy::resource_types::Host for SandboxState {}
