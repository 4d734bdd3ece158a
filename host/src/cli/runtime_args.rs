//! Options of the policy runtime itself, shared by the controller commands
//! (`run`, `dev`) and the author's tools (`radwasm policy ...`): where
//! compiled components are kept, and how large a guest the instance pool
//! takes (`docs/policy-runtime.md`).

use std::path::PathBuf;

use clap::Args;

use crate::policy::{DiskCacheConfig, EngineOptions, LoadCounter, PoolLimits};

/// `--compile-cache` and the instance pool's per-guest limits.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// Directory to keep compiled policies in, so a restart (or the next
    /// `radwasm policy` command) maps them instead of compiling again;
    /// `off` keeps none. Default: $XDG_CACHE_HOME/radwasm/compiled, else
    /// $HOME/.cache/radwasm/compiled (none if neither is set). An entry is
    /// used only by the same wasmtime build and configuration, and only if
    /// its checksum matches; a directory that cannot be written only costs
    /// the compile.
    #[arg(long, env = "RADWASM_COMPILE_CACHE", value_name = "DIR|off")]
    pub compile_cache: Option<String>,
    /// Most MiB of compiled policies the cache directory keeps (the least
    /// recently used go first; also at most 32 entries).
    #[arg(long, default_value_t = crate::policy::DiskCacheConfig::new("").max_bytes >> 20)]
    pub compile_cache_max_mib: u64,
    /// Core module instances one policy may create (interpreted guests
    /// need many: componentize-py's have 38). At most 1024.
    #[arg(long, default_value_t = PoolLimits::default().core_instances)]
    pub max_core_instances_per_policy: u32,
    /// Linear memories one policy may define. At most 16.
    #[arg(long, default_value_t = PoolLimits::default().memories)]
    pub max_memories_per_policy: u32,
    /// Tables one policy may define. At most 256.
    #[arg(long, default_value_t = PoolLimits::default().tables)]
    pub max_tables_per_policy: u32,
    /// Elements one table of a policy may hold. At most 100000.
    #[arg(long, default_value_t = PoolLimits::default().table_elements)]
    pub max_table_elements: u32,
}

impl Default for RuntimeArgs {
    fn default() -> Self {
        let pool = PoolLimits::default();
        Self {
            compile_cache: None,
            compile_cache_max_mib: crate::policy::DiskCacheConfig::new("").max_bytes >> 20,
            max_core_instances_per_policy: pool.core_instances,
            max_memories_per_policy: pool.memories,
            max_tables_per_policy: pool.tables,
            max_table_elements: pool.table_elements,
        }
    }
}

impl RuntimeArgs {
    /// The pool limits asked for, checked against their caps.
    pub fn pool_limits(&self) -> anyhow::Result<PoolLimits> {
        let pool = PoolLimits {
            core_instances: self.max_core_instances_per_policy,
            memories: self.max_memories_per_policy,
            tables: self.max_tables_per_policy,
            table_elements: self.max_table_elements,
        };
        pool.check().map_err(anyhow::Error::msg)?;
        Ok(pool)
    }

    /// The cache directory asked for: the flag (or its variable), else the
    /// user's cache directory; `None` for `off` or when there is no home.
    pub fn compile_cache_dir(&self) -> Option<PathBuf> {
        match self.compile_cache.as_deref().map(str::trim) {
            Some("off") => None,
            Some("") | None => DiskCacheConfig::default_dir(),
            Some(dir) => Some(PathBuf::from(dir)),
        }
    }

    /// Engine options from these flags, counting loads into `loads`.
    pub fn engine_options(&self, loads: LoadCounter) -> anyhow::Result<EngineOptions> {
        let compile_cache = self.compile_cache_dir().map(|dir| DiskCacheConfig {
            max_bytes: self.compile_cache_max_mib.saturating_mul(1 << 20),
            ..DiskCacheConfig::new(dir)
        });
        Ok(EngineOptions {
            pool: self.pool_limits()?,
            compile_cache,
            loads,
            ..EngineOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    #[test]
    fn the_flags_become_engine_options() {
        let parsed = Command::try_parse_from([
            "radwasm",
            "--compile-cache",
            "/var/cache/radwasm",
            "--compile-cache-max-mib",
            "64",
            "--max-core-instances-per-policy",
            "40",
        ])
        .expect("parses");
        let options = parsed
            .runtime
            .engine_options(LoadCounter::default())
            .expect("within the caps");
        let cache = options.compile_cache.expect("a disk cache");
        assert_eq!(cache.dir, PathBuf::from("/var/cache/radwasm"));
        assert_eq!(cache.max_bytes, 64 << 20);
        assert_eq!(options.pool.core_instances, 40);
        assert_eq!(options.pool.tables, PoolLimits::default().tables);

        let off = Command::try_parse_from(["radwasm", "--compile-cache", "off"]).expect("parses");
        assert_eq!(off.runtime.compile_cache_dir(), None);

        let over =
            Command::try_parse_from(["radwasm", "--max-tables-per-policy", "257"]).expect("parses");
        let error = over
            .runtime
            .engine_options(LoadCounter::default())
            .expect_err("over the cap");
        assert!(
            error.to_string().contains("--max-tables-per-policy 257"),
            "{error}"
        );
    }
}
