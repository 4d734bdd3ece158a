//! Compiled components kept for the next load of the same bytes: in memory
//! for the life of the engine ([`MemoryCache`]), and on disk across restarts
//! ([`DiskCache`]).
//!
//! Compiling is by far the most expensive part of loading a policy: 0.2 s
//! for the default policy, 7 to 9 s and about 400 MiB for an interpreted
//! guest (CPython or SpiderMonkey inside the component) in a release build.
//! A controller that restarts, or a `radwasm policy test` run again, would
//! pay it every time; with the disk cache it maps the artifact wasmtime
//! wrote the first time instead, in about 40 ms
//! (`docs/benchmarks-policy-activation.md`, "Loading a policy").
//!
//! An artifact is only ever loaded by the engine configuration that wrote
//! it: its file name holds the component's SHA-256 and a hash of wasmtime's
//! compatibility key (its version, target, compiler settings and
//! features). A SHA-256 of the artifact is kept beside it and checked
//! before the artifact is mapped, so a truncated or damaged file is
//! compiled again, never run. Nothing about the cache can fail a load: a
//! directory that cannot be read or written is warned about and the
//! component compiled as if there were none.
//!
//! Why not wasmtime's own cache (`Config::cache`, the `cache` feature, on
//! by default), which also keeps compiled code on disk by a hash of the
//! bytes and the engine's settings: measured on the same components
//! (`host/benches/compile_cache.rs`, `docs/benchmarks-policy-activation.md`,
//! "The compile cache against wasmtime's"), it falls short on what this
//! file is for:
//!
//! - it has no memory cache: the same bytes loaded again in the same
//!   process are read and decompressed from disk again (122 ms for an
//!   interpreted guest, against a clone of the component here);
//! - it keeps artifacts compressed and copies each one into fresh memory on
//!   a hit (130 ms for the same guest after a restart, against 31 ms to
//!   check and map it here);
//! - it keeps no checksum: an artifact with a byte flipped loaded as a hit,
//!   its native code run as read, where this cache compiles it again;
//! - it evicts from a background worker at most once an hour, with soft
//!   limits, and counts only total hits and misses, so neither the bounds
//!   (`--compile-cache-max-mib`, 32 entries, enforced at every store) nor
//!   `radwasm_policy_loads_total{outcome}` and the per-load log line could
//!   be kept on top of it.
//!
//! So wasmtime's cache stays off (the engine never sets `Config::cache`).
//! Neither cache stops someone who can write the directory: under `run
//! --require-signatures` no disk cache is used at all (`cli/run.rs`).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Compiled components kept in memory for a reload of the same bytes (a
/// restart of a `ReconcilePolicy`'s load, a policy file re-read); the oldest
/// go first.
pub const COMPILED_KEPT: usize = 8;

/// Where a loaded policy's compiled code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoadOutcome {
    /// Compiled from the component's bytes.
    Compiled,
    /// Mapped from an artifact in the disk cache.
    DiskCache,
    /// Already compiled by this engine.
    MemoryCache,
}

impl LoadOutcome {
    /// The `outcome` label of `radwasm_policy_loads_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadOutcome::Compiled => "compiled",
            LoadOutcome::DiskCache => "disk_cache",
            LoadOutcome::MemoryCache => "memory_cache",
        }
    }
}

/// Labels of a policy load: where its compiled code came from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadLabels {
    pub outcome: &'static str,
}

/// Policy loads by [`LoadOutcome`]. Clones share the counts, so the
/// metrics registry and the engine hold the same one.
#[derive(Clone, Debug, Default)]
pub struct LoadCounter(Family<LoadLabels, Counter>);

impl LoadCounter {
    /// One load with this outcome.
    pub fn count(&self, outcome: LoadOutcome) {
        self.0
            .get_or_create(&LoadLabels {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Loads so far with this outcome.
    pub fn get(&self, outcome: LoadOutcome) -> u64 {
        self.0
            .get_or_create(&LoadLabels {
                outcome: outcome.as_str(),
            })
            .get()
    }

    /// The counter family, for a metrics registry.
    pub fn family(&self) -> Family<LoadLabels, Counter> {
        self.0.clone()
    }
}

/// Compiled components by the SHA-256 of their bytes, bounded
/// ([`COMPILED_KEPT`]): each swap brings a new digest, and a component no
/// policy holds any more only costs memory. A loaded policy keeps its own
/// component whether or not it is cached here.
#[derive(Default)]
pub(super) struct MemoryCache {
    components: HashMap<String, Component>,
    order: VecDeque<String>,
}

impl MemoryCache {
    pub(super) fn get(&self, digest: &str) -> Option<Component> {
        self.components.get(digest).cloned()
    }

    pub(super) fn insert(&mut self, digest: &str, component: Component) {
        self.order.retain(|d| d != digest);
        self.order.push_back(digest.to_string());
        while self.order.len() > COMPILED_KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.components.remove(&oldest);
            }
        }
        self.components.insert(digest.to_string(), component);
    }

    pub(super) fn len(&self) -> usize {
        self.components.len()
    }
}

/// Where and how much the disk cache keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCacheConfig {
    pub dir: PathBuf,
    /// Artifacts kept at most; the least recently used go first.
    pub max_entries: usize,
    /// Bytes of artifacts kept at most.
    pub max_bytes: u64,
}

/// Artifacts kept by default: a few versions of a few policies.
pub const DEFAULT_MAX_ENTRIES: usize = 32;
/// Bytes kept by default: an interpreted guest's artifact is about 40 MB,
/// the default policy's under 1 MB.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

impl DiskCacheConfig {
    /// The cache in `dir`, with the default bounds.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// `$XDG_CACHE_HOME/radwasm/compiled`, else `$HOME/.cache/radwasm/compiled`;
    /// `None` when neither variable is set (a container with no home).
    pub fn default_dir() -> Option<PathBuf> {
        let nonempty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        let base = nonempty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
            .or_else(|| nonempty("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
        Some(base.join("radwasm").join("compiled"))
    }
}

/// The on-disk cache of one engine configuration.
pub(super) struct DiskCache {
    config: DiskCacheConfig,
    /// Hex of a hash of wasmtime's compatibility key for this engine.
    engine_key: String,
}

/// What the artifact files are named after, beyond the engine's key: a new
/// layout of the cache changes it.
const LAYOUT: &[u8] = b"radwasm compiled component, layout 1";
const ARTIFACT: &str = "cwasm";
const CHECKSUM: &str = "cwasm.sha256";
/// Temporary files older than this are left over from a process that died
/// while writing, and are removed.
const STALE_TEMPORARY: Duration = Duration::from_secs(600);

/// Feeds what a `Hash` implementation writes into SHA-256, for a digest
/// that is stable across runs (std's hashers are not meant to be).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The part of an artifact's name that says which engine configuration
/// wrote it: wasmtime guarantees that engines with equal compatibility
/// hashes load each other's artifacts (the hash covers wasmtime's own
/// version, the target and every setting that changes compiled code).
pub(super) fn engine_key(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    hasher.write(LAYOUT);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..8])
}

impl DiskCache {
    pub(super) fn new(config: DiskCacheConfig, engine: &Engine) -> Self {
        Self {
            config,
            engine_key: engine_key(engine),
        }
    }

    pub(super) fn dir(&self) -> &Path {
        &self.config.dir
    }

    fn path(&self, digest: &str, extension: &str) -> PathBuf {
        self.config
            .dir
            .join(format!("{digest}-{}.{extension}", self.engine_key))
    }

    /// The artifact for `digest`, if one is kept, whole and loadable;
    /// `None` otherwise: an artifact without its checksum is left for the
    /// compile to rewrite; one that does not match it, or does not load, is
    /// warned about and removed.
    pub(super) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let artifact = self.path(digest, ARTIFACT);
        let checksum = self.path(digest, CHECKSUM);
        if !artifact.exists() {
            return None;
        }
        let verified = match std::fs::read_to_string(&checksum) {
            // Not yet written (another process is between its two renames)
            // or lost: not trusted, and left for the compile to rewrite.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(
                    artifact = %artifact.display(),
                    "compile cache: an artifact without its checksum; compiling"
                );
                return None;
            }
            Err(error) => Err(format!("its checksum file {}: {error}", checksum.display())),
            Ok(expected) => match file_sha256(&artifact) {
                Err(error) => Err(format!("reading it: {error}")),
                Ok(actual) if actual == expected.trim() => Ok(()),
                Ok(actual) => Err(format!(
                    "its SHA-256 is {actual}, not the {} recorded when it was written \
                     (truncated or damaged)",
                    expected.trim()
                )),
            },
        };
        if let Err(why) = verified {
            tracing::warn!(
                artifact = %artifact.display(),
                "compile cache: ignoring a compiled policy: {why}; compiling it again"
            );
            self.remove(digest);
            return None;
        }
        // SAFETY: `deserialize_file` maps the file and runs its code as
        // wasmtime wrote it, without checking it; it is sound only for an
        // artifact that `Component::serialize` of a compatible engine wrote
        // and nothing altered since. The directory is trusted to be the
        // controller's own (`--compile-cache`, an emptyDir in the cluster
        // manifests, the user's cache directory otherwise): the checksum
        // finds damage, not a writer who means harm, which is why `run
        // --require-signatures` uses no cache on disk (`cli/run.rs`). Only
        // this module writes into it, each file under a name that carries this
        // engine's compatibility hash, whole (a temporary file renamed into
        // place); and the SHA-256 recorded beside it when it was written has
        // just been checked, so a file that was truncated or damaged since
        // is never mapped. Files are replaced only by rename, so the one
        // mapped is the one checked or another whole artifact of the same
        // name.
        match unsafe { Component::deserialize_file(engine, &artifact) } {
            Ok(component) => {
                // Used now: the last to be evicted.
                if let Ok(file) = std::fs::File::options().append(true).open(&artifact) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(component)
            }
            Err(error) => {
                tracing::warn!(
                    artifact = %artifact.display(),
                    error = %format!("{error:#}"),
                    "compile cache: a compiled policy does not load; compiling it again"
                );
                self.remove(digest);
                None
            }
        }
    }

    /// Keep `component`'s artifact for `digest`; then evict beyond the
    /// bounds. Failures are warned about, never returned.
    pub(super) fn store(&self, digest: &str, component: &Component) {
        if let Err(error) = self.try_store(digest, component) {
            tracing::warn!(
                dir = %self.config.dir.display(),
                "compile cache: could not keep a compiled policy ({error:#}); it will be compiled again next time"
            );
            return;
        }
        if let Err(error) = self.evict() {
            tracing::warn!(dir = %self.config.dir.display(), %error, "compile cache: could not evict old entries");
        }
    }

    fn try_store(&self, digest: &str, component: &Component) -> anyhow::Result<()> {
        let bytes = component
            .serialize()
            .map_err(|error| anyhow::anyhow!("serializing: {error}"))?;
        create_private_dir(&self.config.dir)?;
        let sum = hex::encode(Sha256::digest(&bytes));
        // The artifact first: an artifact without its checksum is ignored,
        // and a checksum never names an artifact not yet in place.
        self.write_atomically(&self.path(digest, ARTIFACT), &bytes)?;
        self.write_atomically(&self.path(digest, CHECKSUM), sum.as_bytes())?;
        Ok(())
    }

    /// Write `bytes` to a temporary file in the cache directory and rename
    /// it to `path`, so `path` is only ever absent or whole.
    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Unique to this write: other processes (the pid), other threads
        // of this one (the counter).
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let temporary = self.config.dir.join(format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::File::create(&temporary).and_then(|mut file| file.write_all(bytes));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(anyhow::anyhow!("writing {}: {error}", temporary.display()));
        }
        std::fs::rename(&temporary, path).map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            anyhow::anyhow!("renaming {} into place: {error}", temporary.display())
        })
    }

    fn remove(&self, digest: &str) {
        let _ = std::fs::remove_file(self.path(digest, CHECKSUM));
        let _ = std::fs::remove_file(self.path(digest, ARTIFACT));
    }

    /// Keep the most recently used artifacts within both bounds; remove the
    /// rest, checksums without an artifact and stale temporary files.
    fn evict(&self) -> std::io::Result<()> {
        let mut artifacts = Vec::new();
        let mut checksums = Vec::new();
        for entry in std::fs::read_dir(&self.config.dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with('.') && name.contains(".tmp-") {
                let age = SystemTime::now()
                    .duration_since(modified)
                    .unwrap_or_default();
                if age > STALE_TEMPORARY {
                    let _ = std::fs::remove_file(entry.path());
                }
            } else if name.ends_with(&format!(".{CHECKSUM}")) {
                checksums.push(entry.path());
            } else if name.ends_with(&format!(".{ARTIFACT}")) {
                artifacts.push((modified, metadata.len(), entry.path()));
            }
        }
        // Newest first.
        artifacts.sort_by_key(|artifact| std::cmp::Reverse(artifact.0));
        let (mut kept, mut bytes) = (0usize, 0u64);
        for (_, size, path) in artifacts {
            if kept < self.config.max_entries && bytes.saturating_add(size) <= self.config.max_bytes
            {
                kept += 1;
                bytes = bytes.saturating_add(size);
                continue;
            }
            let _ = std::fs::remove_file(path.with_extension(CHECKSUM));
            let _ = std::fs::remove_file(&path);
        }
        for checksum in checksums {
            let artifact = checksum.with_extension("");
            if !artifact.exists() {
                let _ = std::fs::remove_file(&checksum);
            }
        }
        Ok(())
    }
}

/// Create `dir` (and its parents) readable by this user only, if absent.
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|error| anyhow::anyhow!("creating {}: {error}", dir.display()))
}

/// SHA-256 of a file's contents, hex.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(fuel: bool) -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).consume_fuel(fuel);
        Engine::new(&config).expect("engine")
    }

    #[test]
    fn an_artifact_is_named_for_the_engine_configuration_that_wrote_it() {
        // The same configuration in another engine (another process): the
        // same name, so a restart finds what it wrote.
        assert_eq!(engine_key(&engine(true)), engine_key(&engine(true)));
        // Code compiled without fuel metering must never be run by an
        // engine that meters fuel: another name, so never found.
        assert_ne!(engine_key(&engine(true)), engine_key(&engine(false)));
        let dir = tempfile::tempdir().expect("tempdir");
        let metered = DiskCache::new(DiskCacheConfig::new(dir.path()), &engine(true));
        let unmetered = DiskCache::new(DiskCacheConfig::new(dir.path()), &engine(false));
        let digest = "ab".repeat(32);
        assert_ne!(
            metered.path(&digest, ARTIFACT),
            unmetered.path(&digest, ARTIFACT)
        );
        let component = Component::new(&engine(false), "(component)").expect("compiles");
        unmetered.store(&digest, &component);
        assert!(unmetered.load(&engine(false), &digest).is_some());
        assert!(metered.load(&engine(true), &digest).is_none());
    }
}
