//! Names: the `DeploymentResource` object for a Radius id, the ARM deployment
//! for a spec, and which resource types must be deleted last.

/// Kubernetes object name for the `DeploymentResource` standing for `radius_id`:
/// `{name}-{type}-{hash}`, lower-case, at most 63 characters. The hash (FNV-1a
/// of the lower-cased id) keeps two resources with the same name but another
/// type or scope apart, which the bare resource name (Radius's choice) did not.
pub fn resource_object_name(radius_id: &str) -> String {
    let lower = radius_id.to_ascii_lowercase();
    let segments: Vec<&str> = lower
        .split('/')
        .filter(|segment| !segment.is_empty())
        .collect();
    let name = segments.last().copied().unwrap_or("resource");
    let kind = segments
        .len()
        .checked_sub(2)
        .and_then(|i| segments.get(i))
        .copied()
        .unwrap_or("resource");
    let hash = format!("{:08x}", fnv1a(lower.as_bytes()) as u32);
    let stem = format!("{}-{}", sanitize(name), sanitize(kind));
    let budget = 63 - hash.len() - 1;
    let stem = stem
        .get(..budget.min(stem.len()))
        .unwrap_or(&stem)
        .trim_end_matches('-');
    if stem.is_empty() {
        format!("r-{hash}")
    } else {
        format!("{stem}-{hash}")
    }
}

/// Name of the ARM deployment for a template at a spec hash:
/// `{template}-{first 12 of hash}`, at most 64 characters.
pub fn deployment_name(template_name: &str, spec_hash: &str) -> String {
    let short: String = spec_hash
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect();
    let name = sanitize(template_name);
    let budget = 64 - short.len() - 1;
    let name = name
        .get(..budget.min(name.len()))
        .unwrap_or(&name)
        .trim_end_matches('-');
    match (name.is_empty(), short.is_empty()) {
        (false, false) => format!("{name}-{short}"),
        (false, true) => name.to_string(),
        (true, false) => format!("deployment-{short}"),
        (true, true) => "deployment".to_string(),
    }
}

/// Deletion wave of a resource type (kept in the model: the host holds
/// deletions to the same order).
pub use radwasm_policy_model::scope::deletion_wave;

fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// A set of Radius ids compared case-insensitively, borrowing the ids.
/// Ids share long prefixes (`/planes/radius/local/resourceGroups/...`), so
/// entries are found by a hash of the id's case-folded tail first and
/// compared in full only on a hit. Hashing and comparing go eight bytes at a
/// time: in a wasm guest a byte loop costs one metered instruction a byte.
#[derive(Debug, Default, Clone)]
pub struct IdSet<'a> {
    entries: Vec<(u64, &'a str)>,
}

impl<'a> IdSet<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `id`; returns false if an equal id (ignoring case) was present.
    pub fn insert(&mut self, id: &'a str) -> bool {
        let hash = fold_hash(id);
        if self.find(hash, id) {
            return false;
        }
        self.entries.push((hash, id));
        true
    }

    pub fn contains(&self, id: &str) -> bool {
        self.find(fold_hash(id), id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, hash: u64, id: &str) -> bool {
        self.entries
            .iter()
            .any(|(h, entry)| *h == hash && eq_ignore_ascii_case_fast(entry, id))
    }
}

impl<'a> FromIterator<&'a str> for IdSet<'a> {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut set = IdSet::new();
        for id in iter {
            set.insert(id);
        }
        set
    }
}

/// Sets bit 5 of every byte: folds ASCII upper case onto lower case. It also
/// folds a few punctuation pairs (`@`/`` ` ``, `[`/`{`, ...), which is fine
/// for a hash; equality is decided by [`eq_ignore_ascii_case_fast`].
const CASE_BITS: u64 = 0x2020_2020_2020_2020;

/// Hash of the length and the last 32 bytes, case-folded (ids differ at the
/// end, in the type and name), without allocating.
fn fold_hash(id: &str) -> u64 {
    let bytes = id.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(32)..];
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = tail.chunks_exact(8);
    for word in &mut words {
        hash ^= word_at(word) | CASE_BITS;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    for byte in words.remainder() {
        hash ^= u64::from(byte | 0x20);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn word_at(chunk: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    u64::from_le_bytes(word)
}

/// `a.eq_ignore_ascii_case(b)`, comparing eight bytes at a time and falling
/// back to a byte comparison only for words that differ (ids almost always
/// agree in case, so that is rare).
pub fn eq_ignore_ascii_case_fast(a: &str, b: &str) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut left = a.as_bytes().chunks_exact(8);
    let mut right = b.as_bytes().chunks_exact(8);
    for (x, y) in (&mut left).zip(&mut right) {
        if word_at(x) != word_at(y) && !x.eq_ignore_ascii_case(y) {
            return false;
        }
    }
    left.remainder().eq_ignore_ascii_case(right.remainder())
}

/// 64-bit FNV-1a: tiny, stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: &str = "/planes/radius/local/resourceGroups/default";

    #[test]
    fn same_name_different_type_does_not_collide() {
        let container = resource_object_name(&format!(
            "{SCOPE}/providers/Applications.Core/containers/demo"
        ));
        let gateway = resource_object_name(&format!(
            "{SCOPE}/providers/Applications.Core/gateways/demo"
        ));
        assert_ne!(container, gateway);
        assert!(container.starts_with("demo-containers-"), "{container}");
    }

    #[test]
    fn names_are_stable_case_insensitive_dns_labels() {
        let a = resource_object_name(&format!(
            "{SCOPE}/providers/Applications.Core/containers/My_App"
        ));
        let b = resource_object_name(&format!(
            "{}/providers/applications.core/CONTAINERS/my_app",
            SCOPE.to_uppercase()
        ));
        assert_eq!(a, b);
        let long = resource_object_name(&format!(
            "{SCOPE}/providers/Applications.Core/containers/{}",
            "x".repeat(200)
        ));
        assert!(long.len() <= 63, "{long}");
        for name in [&a, &long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
    }

    #[test]
    fn id_sets_ignore_ascii_case_and_nothing_else() {
        let lower = format!("{SCOPE}/providers/applications.core/containers/front_end");
        let upper = lower.to_uppercase();
        let mut set = IdSet::new();
        assert!(set.insert(&lower));
        assert!(!set.insert(&upper), "same id in another case");
        assert!(set.contains(&upper));
        // Same length, differing only by characters the hash folds together.
        let at = format!("{SCOPE}/providers/A.B/c/x@y");
        let grave = format!("{SCOPE}/providers/A.B/c/x`y");
        assert!(set.insert(&at));
        assert!(set.insert(&grave), "@ and ` are different characters");
        assert!(!set.contains(&format!("{SCOPE}/providers/A.B/c/x_y")));
        // Prefixes and every tail length around the 8-byte words.
        for cut in 1..lower.len() {
            assert!(!set.contains(&lower[..cut]), "prefix of {cut} bytes");
            assert_eq!(
                eq_ignore_ascii_case_fast(&lower[..cut], &upper[..cut]),
                lower[..cut].eq_ignore_ascii_case(&upper[..cut])
            );
        }
        assert!(!eq_ignore_ascii_case_fast("abcdefgh-1", "abcdefgh-2"));
        assert!(!eq_ignore_ascii_case_fast("abcdefgX", "abcdefgY"));
    }

    #[test]
    fn deployment_names_fit_arm_limits() {
        assert_eq!(
            deployment_name("app", "abcdef0123456789"),
            "app-abcdef012345"
        );
        assert!(deployment_name(&"n".repeat(100), "abcdef0123456789").len() <= 64);
    }

    #[test]
    fn applications_and_environments_go_last() {
        assert_eq!(
            deletion_wave(&format!("{SCOPE}/providers/Applications.Core/containers/a")),
            0
        );
        assert_eq!(
            deletion_wave(&format!(
                "{SCOPE}/providers/Applications.Core/applications/a"
            )),
            1
        );
        assert_eq!(
            deletion_wave(&format!(
                "{SCOPE}/providers/Applications.Core/environments/a"
            )),
            2
        );
    }
}
