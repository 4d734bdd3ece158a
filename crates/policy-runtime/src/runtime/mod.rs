//! The wasm policy runtime: one long-lived [`PolicyEngine`] compiles guests
//! once; each [`LoadedPolicy`] keeps an `InstancePre`; every decision runs in a
//! fresh store from the pooling allocator with a fuel budget and a memory cap.
//!
//! A trap, an exhausted fuel budget or a memory-cap hit fails that one decision
//! with a [`DecisionError`]; it never panics or hangs the host.

use std::path::Path;
use std::sync::{Arc, Mutex};

use radwasm_policy_model as model;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Store};

use super::bindings::{v0_1, v0_2, v0_3, v0_4, v0_5, v0_6};
use super::compile_cache::{DiskCache, LoadCounter, LoadOutcome, MemoryCache};
use super::options::EngineOptions;
use super::pool::{self, PoolLimits};
use super::sandbox::{GuestLog, SandboxState};
use super::validate::{self, LoadError, Worlds};
use radwasm_policy_fetch::BuiltIn;

mod exports;
mod loaded;

pub use loaded::{DecisionLimits, LoadedPolicy};

pub use radwasm_policy_fetch::digest;

/// Sandbox limits applied to every decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, wasm instructions) one decision may use.
    pub fuel: u64,
    /// Bytes of linear memory one guest instance may grow to.
    pub memory_bytes: usize,
    /// Decisions that may run at the same time (pooling allocator slots).
    pub concurrent_decisions: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // A default-policy decision uses well under a million units.
            fuel: 50_000_000,
            memory_bytes: 64 << 20,
            concurrent_decisions: 64,
        }
    }
}

/// Why one decision failed. The host reports it on that object only.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("policy {policy} does not decide for {kind} objects (it implements {worlds})")]
    KindNotSupported {
        policy: String,
        kind: &'static str,
        worlds: Worlds,
    },
    #[error("policy {policy} used its whole CPU budget ({fuel} fuel) without deciding")]
    OutOfFuel { policy: String, fuel: u64 },
    #[error("policy {policy} tried to grow its memory past the {limit_bytes}-byte cap")]
    MemoryLimit { policy: String, limit_bytes: usize },
    #[error("policy {policy} trapped: {detail}")]
    Trap { policy: String, detail: String },
    #[error("policy {policy} could not be instantiated: {detail}")]
    Instantiate { policy: String, detail: String },
    #[error("policy {policy} refused to decide: {error}")]
    Policy {
        policy: String,
        error: model::PolicyError,
    },
}

impl DecisionError {
    /// A short, stable name for metrics labels and status reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            DecisionError::KindNotSupported { .. } => "KindNotSupported",
            DecisionError::OutOfFuel { .. } => "OutOfFuel",
            DecisionError::MemoryLimit { .. } => "MemoryLimit",
            DecisionError::Trap { .. } => "Trap",
            DecisionError::Instantiate { .. } => "Instantiate",
            DecisionError::Policy { .. } => "PolicyError",
        }
    }
}

/// A plan with what the guest logged and the fuel it used.
///
/// For a layer, `plan` is the top layer's plan; `below` holds the plan of
/// every policy under it (bottom first), `logs` every layer's messages
/// (bottom first) and `fuel_used` their sum.
#[derive(Debug, Clone)]
pub struct Decision<P> {
    pub plan: P,
    pub logs: Vec<GuestLog>,
    /// Log messages past the per-decision cap, counted but not kept.
    pub dropped_logs: usize,
    pub fuel_used: u64,
    /// The plans of the policies below a layer, bottom first, each with the
    /// `name@version` of the policy that decided it; empty for a policy that
    /// decides alone.
    pub below: Vec<LayerPlan<P>>,
}

/// The plan one policy of a stack decided, below the top.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPlan<P> {
    pub policy: String,
    pub plan: P,
}

impl<P> Decision<P> {
    /// The same decision with its plans turned into another form.
    pub fn map_plan<Q>(self, f: impl Fn(P) -> Q) -> Decision<Q> {
        Decision {
            plan: f(self.plan),
            logs: self.logs,
            dropped_logs: self.dropped_logs,
            fuel_used: self.fuel_used,
            below: self
                .below
                .into_iter()
                .map(|layer| LayerPlan {
                    policy: layer.policy,
                    plan: f(layer.plan),
                })
                .collect(),
        }
    }
}

/// The shared wasmtime engine, linker and compiled-component cache.
#[derive(Clone)]
pub struct PolicyEngine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    engine: Engine,
    linker: Linker<SandboxState>,
    limits: Limits,
    /// Compiled components by the SHA-256 of their bytes
    /// (`compile_cache.rs`).
    compiled: Mutex<MemoryCache>,
    /// Compiled components on disk, across restarts (`--compile-cache`).
    disk: Option<DiskCache>,
    pool: PoolLimits,
    loads: LoadCounter,
    /// What a layer decides over until it is given another
    /// ([`EngineOptions::base`]).
    base: Option<BuiltIn>,
}

impl PolicyEngine {
    /// An engine with the given sandbox limits, the default pool limits
    /// and no disk cache.
    pub fn new(limits: Limits) -> anyhow::Result<Self> {
        Self::with_options(limits, EngineOptions::default())
    }

    /// An engine with the given sandbox limits, pool limits, disk cache and
    /// load counter.
    pub fn with_options(limits: Limits, options: EngineOptions) -> anyhow::Result<Self> {
        options.pool.check().map_err(anyhow::Error::msg)?;
        let pool = pool::pooling_config(
            limits.concurrent_decisions,
            limits.memory_bytes,
            &options.pool,
        );

        let mut config = Config::new();
        config
            .wasm_component_model(true)
            // Guests make plain synchronous calls; without the async
            // component-model machinery every call into a guest (and every
            // `cabi_realloc` while lowering the observation) is cheaper.
            .concurrency_support(false)
            .consume_fuel(true)
            // RADWASM_PERFMAP=1 writes /tmp/perf-PID.map so `perf` can name
            // guest functions (docs/policy-runtime.md).
            .profiler(if std::env::var_os("RADWASM_PERFMAP").is_some() {
                wasmtime::ProfilingStrategy::PerfMap
            } else {
                wasmtime::ProfilingStrategy::None
            })
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)
            .map_err(|error| anyhow::anyhow!("creating the wasm engine: {error}"))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|error| anyhow::anyhow!("linking WASI: {error}"))?;
        // The `log` import of every contract version loaded (their names
        // differ by version, so all live in one linker).
        v0_6::GuestExports::add_to_linker::<SandboxState, HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|error| anyhow::anyhow!("linking the 0.6 policy log import: {error}"))?;
        v0_5::GuestExports::add_to_linker::<SandboxState, HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|error| anyhow::anyhow!("linking the 0.5 policy log import: {error}"))?;
        v0_4::GuestExports::add_to_linker::<SandboxState, HasSelf<SandboxState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|error| anyhow::anyhow!("linking the 0.4 policy log import: {error}"))?;
        v0_3::Policy::add_to_linker::<SandboxState, HasSelf<SandboxState>>(&mut linker, |state| {
            state
        })
        .map_err(|error| anyhow::anyhow!("linking the policy log import: {error}"))?;
        v0_2::Policy::add_to_linker::<SandboxState, HasSelf<SandboxState>>(&mut linker, |state| {
            state
        })
        .map_err(|error| anyhow::anyhow!("linking the 0.2 policy log import: {error}"))?;
        v0_1::Policy::add_to_linker::<SandboxState, HasSelf<SandboxState>>(&mut linker, |state| {
            state
        })
        .map_err(|error| anyhow::anyhow!("linking the 0.1 policy log import: {error}"))?;

        let disk = options
            .compile_cache
            .map(|config| DiskCache::new(config, &engine));
        Ok(Self {
            inner: Arc::new(EngineInner {
                engine,
                linker,
                limits,
                compiled: Mutex::new(MemoryCache::default()),
                disk,
                pool: options.pool,
                loads: options.loads,
                base: options.base,
            }),
        })
    }

    /// The limits every decision runs under.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The policy a layer loaded by this engine decides over until it is
    /// given another ([`LoadedPolicy::on_base`]).
    pub fn base(&self) -> Option<BuiltIn> {
        self.inner.base
    }

    /// Load a policy from a `.wasm` file.
    pub fn load_file(&self, path: &Path) -> Result<LoadedPolicy, LoadError> {
        let bytes = std::fs::read(path).map_err(|error| LoadError::Read {
            source_name: path.display().to_string(),
            detail: error.to_string(),
        })?;
        self.load_bytes(&path.display().to_string(), &bytes)
    }

    /// Load a policy from component bytes; `source_name` names it in errors.
    pub fn load_bytes(&self, source_name: &str, bytes: &[u8]) -> Result<LoadedPolicy, LoadError> {
        validate::check_binary_kind(source_name, bytes)?;
        let digest = digest(bytes);
        let component = self.compile(source_name, &digest, bytes)?;
        let worlds = validate::check_component(source_name, &self.inner.engine, &component)?;

        let instance_pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|error| LoadError::Link {
                source_name: source_name.to_string(),
                detail: format!("{error:#}"),
            })?;
        let uses_wasi = component
            .component_type()
            .imports(&self.inner.engine)
            .any(|(name, _)| name.starts_with("wasi:"));
        LoadedPolicy::new(self, source_name, digest, worlds, instance_pre, uses_wasi)
    }

    /// The compiled component for `bytes`: from this engine's memory, the
    /// disk cache, or compiled now. Each load is logged and counted by
    /// where its code came from.
    fn compile(
        &self,
        source_name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        let started = std::time::Instant::now();
        if let Some(component) = self.cached(digest) {
            self.loaded(source_name, digest, LoadOutcome::MemoryCache, started);
            return Ok(component);
        }
        let engine = &self.inner.engine;
        let from_disk = self
            .inner
            .disk
            .as_ref()
            .and_then(|disk| disk.load(engine, digest));
        let (component, outcome) = match from_disk {
            Some(component) => (component, LoadOutcome::DiskCache),
            None => {
                let component = Component::new(engine, bytes).map_err(|error| {
                    let detail = match pool::explain(&error) {
                        Some(misfit) => misfit.to_string(),
                        None => format!("{error:#}"),
                    };
                    LoadError::Compile {
                        source_name: source_name.to_string(),
                        detail,
                    }
                })?;
                if let Some(disk) = &self.inner.disk {
                    disk.store(digest, &component);
                }
                (component, LoadOutcome::Compiled)
            }
        };
        if let Ok(mut cache) = self.inner.compiled.lock() {
            cache.insert(digest, component.clone());
        }
        self.loaded(source_name, digest, outcome, started);
        Ok(component)
    }

    fn loaded(
        &self,
        source_name: &str,
        digest: &str,
        outcome: LoadOutcome,
        started: std::time::Instant,
    ) {
        self.inner.loads.count(outcome);
        let took_ms = started.elapsed().as_secs_f64() * 1e3;
        match outcome {
            LoadOutcome::Compiled => tracing::info!(
                policy = source_name,
                digest,
                took_ms,
                cache = self
                    .inner
                    .disk
                    .as_ref()
                    .map(|disk| disk.dir().display().to_string()),
                "policy compiled"
            ),
            LoadOutcome::DiskCache => tracing::info!(
                policy = source_name,
                digest,
                took_ms,
                "policy loaded from the compile cache"
            ),
            LoadOutcome::MemoryCache => tracing::info!(
                policy = source_name,
                digest,
                took_ms,
                "policy already compiled"
            ),
        }
    }

    /// How many compiled components are kept in memory.
    pub fn compiled_kept(&self) -> usize {
        self.inner
            .compiled
            .lock()
            .map(|cache| cache.len())
            .unwrap_or(0)
    }

    /// Loads so far by where their compiled code came from.
    pub fn loads(&self) -> &LoadCounter {
        &self.inner.loads
    }

    /// How large a guest the instance pool takes.
    pub fn pool_limits(&self) -> PoolLimits {
        self.inner.pool
    }

    fn cached(&self, digest: &str) -> Option<Component> {
        self.inner.compiled.lock().ok()?.get(digest)
    }

    fn new_store(&self, limits: &DecisionLimits) -> Result<Store<SandboxState>, wasmtime::Error> {
        let mut store = Store::new(&self.inner.engine, SandboxState::new(limits.memory_bytes));
        store.limiter(|state| state);
        store.set_fuel(limits.fuel)?;
        Ok(store)
    }
}
