//! How large a guest the pooling instance allocator accepts, and what a
//! guest that does not fit is told.
//!
//! A guest compiled from Rust is one core module instance with one memory
//! and one table. An interpreted guest is much larger: `componentize-py`
//! (with `--stub-wasi`) links CPython, its runtime and shims into 38 core
//! instances; `componentize-js` (StarlingMonkey) into 3, with a table of
//! nearly 8,000 functions. Both use one memory and two tables. The defaults
//! below take either with room to spare; the caps keep an operator's flags
//! from reserving unbounded address space.
//!
//! wasmtime checks a component against these limits when it compiles or
//! deserializes it, so a guest that does not fit is refused at load time,
//! never at its first decision; [`explain`] turns wasmtime's wording into
//! one that names the flag to raise.

use std::fmt;

use wasmtime::{Enabled, PoolingAllocationConfig};

/// Per-guest limits of the instance pool (`--max-core-instances-per-policy`
/// and friends). Each is checked against its cap by [`PoolLimits::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Core module instances one guest may create (wasmtime counts every
    /// instantiation in the component, nested components included).
    pub core_instances: u32,
    /// Linear memories one guest may define, in all its modules together.
    pub memories: u32,
    /// Tables one guest may define, in all its modules together.
    pub tables: u32,
    /// Elements one table may hold (its initial size must fit; growth past
    /// it is refused).
    pub table_elements: u32,
}

/// The most each [`PoolLimits`] field may be set to.
pub const POOL_CAPS: PoolLimits = PoolLimits {
    core_instances: 1024,
    memories: 16,
    tables: 256,
    table_elements: 100_000,
};

impl Default for PoolLimits {
    fn default() -> Self {
        Self {
            // componentize-py output has 38.
            core_instances: 64,
            memories: 4,
            tables: 16,
            // componentize-js output starts with about 7,700 elements.
            table_elements: 20_000,
        }
    }
}

impl PoolLimits {
    /// Refuse a limit of zero or above its cap, naming the flag.
    pub fn check(&self) -> Result<(), String> {
        for (value, cap, what) in [
            (
                self.core_instances,
                POOL_CAPS.core_instances,
                Misfit::CoreInstances,
            ),
            (self.memories, POOL_CAPS.memories, Misfit::Memories),
            (self.tables, POOL_CAPS.tables, Misfit::Tables),
            (
                self.table_elements,
                POOL_CAPS.table_elements,
                Misfit::TableElements,
            ),
        ] {
            if value == 0 || value > cap {
                return Err(format!(
                    "{} {value}: must be between 1 and {cap}",
                    what.flag()
                ));
            }
        }
        Ok(())
    }
}

/// The pooling allocator for `concurrent_decisions` decisions at
/// once, each of a guest within `pool`.
///
/// Core instances cost nothing up front (the pool only counts them), so
/// there are enough for every decision to be of the largest guest allowed.
/// Memories and tables are address space reserved when the engine starts
/// (a memory slot is a 4 GiB reservation plus guards, so bounds checks are
/// free): two memories and eight tables a decision, as before, which the
/// interpreted guests above fit with room to spare; at least one guest of
/// the largest size allowed fits whatever the concurrency.
pub fn pooling_config(
    concurrent_decisions: u32,
    memory_bytes: usize,
    pool: &PoolLimits,
) -> PoolingAllocationConfig {
    let concurrent = concurrent_decisions.max(1);
    let mut config = PoolingAllocationConfig::default();
    config
        .total_component_instances(concurrent)
        .total_core_instances(concurrent.saturating_mul(pool.core_instances))
        .max_core_instances_per_component(pool.core_instances)
        // The metadata of one guest's instances (a few KiB each), allocated
        // on demand: room for the largest guest allowed.
        .max_component_instance_size(
            (1usize << 20).max(usize::try_from(pool.core_instances).unwrap_or(0) * (32 << 10)),
        )
        .total_memories(concurrent.saturating_mul(2).max(pool.memories))
        .max_memories_per_component(pool.memories)
        .max_memories_per_module(pool.memories)
        .total_tables(concurrent.saturating_mul(8).max(pool.tables))
        .max_tables_per_component(pool.tables)
        .max_tables_per_module(pool.tables)
        .table_elements(usize::try_from(pool.table_elements).unwrap_or(usize::MAX))
        .total_stacks(concurrent)
        .max_memory_size(memory_bytes)
        // Reset the first pages of each memory and table by hand instead
        // of returning them to the kernel: a decision touches the same few
        // pages every time, and refaulting them costs more than the memset
        // (docs/benchmarks-decisions.md has the figures).
        .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        // Where the kernel can tell which pages a guest dirtied (Linux
        // 6.7+, PAGEMAP_SCAN), reset only those instead of the whole
        // resident prefix.
        .pagemap_scan(Enabled::Auto);
    config
}

/// Bytes at the start of each guest memory kept resident between instances:
/// the 64 KiB shadow stack the guests are linked with, their data and the
/// start of the heap.
const MEMORY_KEEP_RESIDENT: usize = 128 << 10;
/// Bytes of each table kept resident between instances.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Which pool limit a guest exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfit {
    CoreInstances,
    Memories,
    Tables,
    TableElements,
    /// A memory's initial size is over the per-instance memory cap.
    MemorySize,
}

impl Misfit {
    /// The controller flag (and `radwasm policy` option) that raises it.
    pub fn flag(self) -> &'static str {
        match self {
            Misfit::CoreInstances => "--max-core-instances-per-policy",
            Misfit::Memories => "--max-memories-per-policy",
            Misfit::Tables => "--max-tables-per-policy",
            Misfit::TableElements => "--max-table-elements",
            Misfit::MemorySize => "--memory-mib",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Misfit::CoreInstances => "core module instances",
            Misfit::Memories => "linear memories",
            Misfit::Tables => "tables",
            Misfit::TableElements => "table elements",
            Misfit::MemorySize => "bytes of initial linear memory",
        }
    }

    /// How far the flag may go.
    fn cap(self) -> String {
        match self {
            Misfit::CoreInstances => format!("at most {}", POOL_CAPS.core_instances),
            Misfit::Memories => format!("at most {}", POOL_CAPS.memories),
            Misfit::Tables => format!("at most {}", POOL_CAPS.tables),
            Misfit::TableElements => format!("at most {}", POOL_CAPS.table_elements),
            Misfit::MemorySize => "in MiB".to_string(),
        }
    }
}

/// A guest that does not fit the instance pool: what it needs and what the
/// pool allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolMisfit {
    pub what: Misfit,
    pub needs: u64,
    pub allowed: u64,
    /// `true` when the limit is per core module rather than for the whole guest.
    pub per_module: bool,
}

impl fmt::Display for PoolMisfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = if self.per_module {
            "in one of its modules"
        } else {
            "in all"
        };
        let what = self.what.what();
        match self.what {
            Misfit::TableElements => write!(
                f,
                "it does not fit the instance pool: a table of {} elements, and the pool allows {} \
                 {what} a table; raise {} ({})",
                self.needs,
                self.allowed,
                self.what.flag(),
                self.what.cap()
            ),
            Misfit::MemorySize => write!(
                f,
                "it does not fit the instance pool: a memory of {} initial bytes, over the {} bytes \
                 a guest's memory may grow to; raise {}",
                self.needs,
                self.allowed,
                self.what.flag()
            ),
            _ => write!(
                f,
                "it does not fit the instance pool: it has {} {what} {scope}, and the pool allows {} \
                 per policy; raise {} ({})",
                self.needs,
                self.allowed,
                self.what.flag(),
                self.what.cap()
            ),
        }
    }
}

/// wasmtime's refusal of a component that does not fit the pool, read back
/// into what it needs and what the pool allows; `None` for any other error.
/// (wasmtime says this only as text; `host/tests/policy_runtime.rs` pins
/// the wording for each limit, so an upgrade that changes it is noticed.)
pub fn explain(error: &wasmtime::Error) -> Option<PoolMisfit> {
    error
        .chain()
        .find_map(|cause| misfit_in(&cause.to_string()))
}

fn misfit_in(message: &str) -> Option<PoolMisfit> {
    let per_component = |what| {
        let needs = number_after(message, "transitively contains ")?;
        let allowed = number_after(message, "configured maximum of ")?;
        Some(PoolMisfit {
            what,
            needs,
            allowed,
            per_module: false,
        })
    };
    let per_module = |what| {
        let needs = number_after(message, "count of ")?;
        let allowed = number_after(message, "per-instance limit of ")?;
        Some(PoolMisfit {
            what,
            needs,
            allowed,
            per_module: true,
        })
    };
    if message.contains("core module instances, which exceeds the configured maximum") {
        per_component(Misfit::CoreInstances)
    } else if message.contains("linear memories, which exceeds the configured maximum") {
        per_component(Misfit::Memories)
    } else if message.contains("tables, which exceeds the configured maximum") {
        per_component(Misfit::Tables)
    } else if message.contains("defined memories count of") {
        per_module(Misfit::Memories)
    } else if message.contains("defined tables count of") && message.contains("per-instance") {
        per_module(Misfit::Tables)
    } else if message.contains("has a minimum element size of") {
        Some(PoolMisfit {
            what: Misfit::TableElements,
            needs: number_after(message, "minimum element size of ")?,
            allowed: number_after(message, "exceeds the limit of ")?,
            per_module: true,
        })
    } else if message.contains("memory has a minimum byte size of") {
        Some(PoolMisfit {
            what: Misfit::MemorySize,
            needs: number_after(message, "minimum byte size of ")?,
            allowed: number_after(message, "exceeds the limit of ")?,
            per_module: true,
        })
    } else {
        None
    }
}

/// The decimal number right after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasmtime_refusals_are_read_back_into_what_exceeds_which_limit() {
        let core = misfit_in(
            "The component transitively contains 39 core module instances, which exceeds the \
             configured maximum of 38 in the pooling allocator",
        )
        .expect("recognised");
        assert_eq!(
            core,
            PoolMisfit {
                what: Misfit::CoreInstances,
                needs: 39,
                allowed: 38,
                per_module: false
            }
        );
        assert_eq!(
            core.to_string(),
            "it does not fit the instance pool: it has 39 core module instances in all, and the \
             pool allows 38 per policy; raise --max-core-instances-per-policy (at most 1024)"
        );
        let table = misfit_in(
            "module table does not fit in pooling allocator requirements: table index 0 has a \
             minimum element size of 7689 which exceeds the limit of 5000",
        )
        .expect("recognised");
        assert_eq!(
            (table.what, table.needs, table.allowed),
            (Misfit::TableElements, 7689, 5000)
        );
        assert!(
            table.to_string().contains("--max-table-elements"),
            "{table}"
        );
        let tables = misfit_in("defined tables count of 3 exceeds the per-instance limit of 2")
            .expect("recognised");
        assert_eq!((tables.what, tables.per_module), (Misfit::Tables, true));
        assert!(misfit_in("failed to parse WebAssembly module").is_none());
    }

    #[test]
    fn limits_outside_their_caps_are_refused_naming_the_flag() {
        assert_eq!(PoolLimits::default().check(), Ok(()));
        assert_eq!(POOL_CAPS.check(), Ok(()));
        let error = PoolLimits {
            core_instances: POOL_CAPS.core_instances + 1,
            ..PoolLimits::default()
        }
        .check()
        .expect_err("over the cap");
        assert_eq!(
            error,
            "--max-core-instances-per-policy 1025: must be between 1 and 1024"
        );
        assert!(
            PoolLimits {
                tables: 0,
                ..PoolLimits::default()
            }
            .check()
            .is_err()
        );
    }
}
