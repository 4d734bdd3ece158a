//! Requeue delays of the default policy, in milliseconds. All bounded: no
//! delay grows without limit (failed deletes retry on a bounded
//! delay, not an ever-growing backoff).

/// Poll a running operation this soon when Radius gives no `Retry-After`.
/// Low, because the target is Ready within T + 250 ms of an operation taking T.
pub const POLL_DEFAULT_MS: u32 = 200;
/// Never poll faster than this, whatever Radius suggests.
pub const POLL_MIN_MS: u32 = 100;
/// Never wait longer than this between polls, whatever Radius suggests.
pub const POLL_MAX_MS: u32 = 5_000;
/// Retry after the host could not poll Radius.
pub const POLL_ERROR_RETRY_MS: u32 = 2_000;
/// Look again at unready dependencies this often.
pub const DEPENDENCY_WAIT_MS: u32 = 5_000;
/// Look again while removed DeploymentResources drain.
pub const CLEANUP_RECHECK_MS: u32 = 1_000;
/// Look again while a template's resources are being deleted.
pub const DELETING_RECHECK_MS: u32 = 1_000;
/// Retry a failed Radius delete after this fixed delay.
pub const DELETE_RETRY_MS: u32 = 10_000;

/// When to poll again, given Radius's hint (clamped into the bounds above).
pub fn poll_after(retry_after_ms: Option<u32>) -> u32 {
    retry_after_ms.map_or(POLL_DEFAULT_MS, |hint| hint.clamp(POLL_MIN_MS, POLL_MAX_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radius_hints_are_honoured_within_bounds() {
        assert_eq!(poll_after(None), POLL_DEFAULT_MS);
        assert_eq!(poll_after(Some(1_000)), 1_000);
        assert_eq!(poll_after(Some(0)), POLL_MIN_MS);
        assert_eq!(poll_after(Some(600_000)), POLL_MAX_MS);
    }
}
