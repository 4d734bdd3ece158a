//! The flags of `radwasm run` and `radwasm dev` for decision records, and
//! the recorder settings they make.

use std::path::PathBuf;

use crate::policy::records::{QUEUE_CAPACITY, RecorderSettings};

/// Flags of `radwasm run` / `radwasm dev` for decision records.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Append every policy decision (observation, plan or error, policy,
    /// timing) as a JSON line to files in this directory, rotated by size.
    /// Off when not given. See docs/decision-records.md.
    #[arg(long, value_name = "DIR")]
    pub decision_records_dir: Option<PathBuf>,
    /// Start a new record file once the current one would pass this size
    /// (bytes; suffixes KiB, MiB, GiB accepted).
    #[arg(long, value_name = "BYTES", default_value = "16MiB", value_parser = parse_size)]
    pub decision_records_max_file_bytes: u64,
    /// Record files kept in the directory; the oldest are deleted.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub decision_records_max_files: u32,
    /// Keep the last N decision records in memory, served as JSON lines on
    /// `/debug/decisions` of the metrics server; 0 (the default) turns it
    /// off. Records hold whole specs, parameter values included, and the
    /// endpoint has no authentication: turn it on only where the metrics
    /// port is private.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub decision_ring: usize,
}

impl Default for RecordArgs {
    fn default() -> Self {
        Self {
            decision_records_dir: None,
            decision_records_max_file_bytes: 16 << 20,
            decision_records_max_files: 8,
            decision_ring: 0,
        }
    }
}

impl RecordArgs {
    /// The recorder these flags ask for.
    pub fn settings(&self) -> RecorderSettings {
        RecorderSettings {
            directory: self.decision_records_dir.clone(),
            max_file_bytes: self.decision_records_max_file_bytes,
            max_files: usize::try_from(self.decision_records_max_files).unwrap_or(usize::MAX),
            ring: self.decision_ring,
            queue: QUEUE_CAPACITY,
        }
    }
}

/// A byte size: a number with an optional `B`, `KiB`, `MiB` or `GiB`
/// suffix (`K`, `M`, `G` accepted too).
///
/// Not the `bytesize` crate: it reads `16M` as 16,000,000 bytes, where this
/// flag has always read it as 16 MiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (for example 16MiB or 1048576)"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit {other:?} (use B, KiB, MiB or GiB)"
            ));
        }
    };
    let bytes = number
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err("the size must be at least 1 byte".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
