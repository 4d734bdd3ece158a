//! The runtime's limits against guests of the size interpreted languages
//! build (many core instances, large tables), and the compile cache on disk
//! shared by engines (a restarted controller, the next `radwasm policy`
//! command).
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::path::{Path, PathBuf};

use radwasm::policy::{
    DiskCacheConfig, EngineOptions, Limits, LoadError, LoadOutcome, PolicyEngine, PoolLimits,
    embedded,
};
use radwasm_policy_model::{ObjectMeta, TemplateObservation};
use wasmparser::{Parser, Payload};

fn limits() -> Limits {
    Limits {
        fuel: 20_000_000,
        memory_bytes: 16 << 20,
        concurrent_decisions: 8,
    }
}

fn engine_with(pool: PoolLimits, compile_cache: Option<DiskCacheConfig>) -> PolicyEngine {
    radwasm::policy::engine_with_options(
        limits(),
        EngineOptions {
            pool,
            compile_cache,
            ..EngineOptions::default()
        },
    )
    .expect("engine")
}

fn cached_engine(dir: &Path) -> PolicyEngine {
    engine_with(PoolLimits::default(), Some(DiskCacheConfig::new(dir)))
}

fn template(name: &str, annotations: &[(&str, &str)]) -> TemplateObservation {
    TemplateObservation {
        meta: ObjectMeta {
            name: name.to_string(),
            namespace: "default".to_string(),
            uid: format!("uid-{name}"),
            generation: 1,
            annotations: annotations
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            ..ObjectMeta::default()
        },
        spec_hash: "hash-1".to_string(),
        ..TemplateObservation::default()
    }
}

fn guest(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("RADWASM_GUEST_DIR")).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

// --- guests as large as interpreted ones -------------------------------

/// Core module instances a component's top level creates (`instantiate` of
/// a module; a bag of exports is not an instance: wasmtime counts the
/// same), and the components in its top-level index space.
fn census(component: &[u8]) -> (usize, u32) {
    let (mut instances, mut components, mut depth) = (0usize, 0u32, 0usize);
    for payload in Parser::new(0).parse_all(component) {
        match payload.expect("a valid component") {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } if depth > 0 => {
                depth += 1;
            }
            Payload::ModuleSection { .. } => depth += 1,
            Payload::ComponentSection { .. } => {
                components += 1;
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::InstanceSection(reader) if depth == 0 => {
                for instance in reader {
                    if matches!(
                        instance.expect("an instance"),
                        wasmparser::Instance::Instantiate { .. }
                    ) {
                        instances += 1;
                    }
                }
            }
            Payload::ComponentAliasSection(reader) if depth == 0 => {
                for alias in reader {
                    if matches!(
                        alias.expect("an alias"),
                        wasmparser::ComponentAlias::InstanceExport {
                            kind: wasmparser::ComponentExternalKind::Component,
                            ..
                        } | wasmparser::ComponentAlias::Outer {
                            kind: wasmparser::ComponentOuterAliasKind::Component,
                            ..
                        }
                    ) {
                        components += 1;
                    }
                }
            }
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    if matches!(
                        import.expect("an import").ty,
                        wasmparser::ComponentTypeRef::Component(_)
                    ) {
                        components += 1;
                    }
                }
            }
            _ => {}
        }
    }
    (instances, components)
}

fn push_section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    push_leb(out, u32::try_from(content.len()).expect("small"));
    out.extend_from_slice(content);
}

fn push_leb(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = u8::try_from(value & 0x7f).expect("seven bits");
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `component` with a nested component appended and instantiated; the
/// nested one is `inner` (WAT). The guest decides as before: the nested
/// instance is neither imported from nor exported.
fn with_nested(component: &[u8], inner: &str) -> Vec<u8> {
    let nested = wat::parse_str(inner).expect("the nested component");
    let (_, components) = census(component);
    let mut out = component.to_vec();
    push_section(&mut out, 4, &nested);
    // instance ::= 0x00 componentidx vec(instantiatearg)
    let mut instance = vec![1, 0x00];
    push_leb(&mut instance, components);
    instance.push(0);
    push_section(&mut out, 5, &instance);
    out
}

/// `component` with core instances of an empty module added until it has
/// `total`, as an interpreted guest has (componentize-py: 38).
fn with_core_instances(component: &[u8], total: usize) -> Vec<u8> {
    // wit-component's nested components only re-export types and create
    // no core instance, so what the top level instantiates is the count
    // (the refusal test checks it against wasmtime's own).
    let (base, _) = census(component);
    assert!(total > base, "the guest already has {base} core instances");
    with_nested(
        component,
        &format!(
            "(component (core module $m) {})",
            "(core instance (instantiate $m))".repeat(total - base)
        ),
    )
}

#[test]
fn a_guest_with_as_many_core_instances_as_componentize_py_output_loads_and_decides() {
    let python_sized = with_core_instances(embedded::DEFAULT_POLICY, 38);
    let engine = engine_with(PoolLimits::default(), None);
    let policy = engine
        .load_bytes("python-sized.wasm", &python_sized)
        .expect("38 core instances fit the default pool");
    assert!(
        policy
            .decide_template(&template("app", &[]))
            .expect("decides")
            .plan
            .actions
            .contains(&radwasm_policy_model::TemplateAction::AddFinalizer)
    );
}

#[test]
fn a_guest_over_the_core_instance_cap_is_refused_naming_the_limit_and_the_flag() {
    let python_sized = with_core_instances(embedded::DEFAULT_POLICY, 38);
    let tight = engine_with(
        PoolLimits {
            core_instances: 37,
            ..PoolLimits::default()
        },
        None,
    );
    let error = tight
        .load_bytes("python-sized.wasm", &python_sized)
        .err()
        .expect("38 core instances do not fit a pool of 37");
    assert!(matches!(error, LoadError::Compile { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "python-sized.wasm: the component does not compile: it does not fit the instance pool: \
         it has 38 core module instances in all, and the pool allows 37 per policy; raise \
         --max-core-instances-per-policy (at most 1024)"
    );

    // One beyond the default cap.
    let cap = PoolLimits::default().core_instances;
    let over = with_core_instances(
        embedded::DEFAULT_POLICY,
        usize::try_from(cap).expect("small") + 1,
    );
    let error = engine_with(PoolLimits::default(), None)
        .load_bytes("over.wasm", &over)
        .err()
        .expect("over the default cap");
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "it has {} core module instances in all, and the pool allows {cap} per policy",
            cap + 1
        )),
        "{message}"
    );
}

#[test]
fn a_table_larger_than_the_pool_takes_is_refused_naming_the_flag() {
    let large_table = with_nested(
        embedded::DEFAULT_POLICY,
        "(component (core module $m (table 30000 funcref)) (core instance (instantiate $m)))",
    );
    let error = engine_with(PoolLimits::default(), None)
        .load_bytes("js-sized.wasm", &large_table)
        .err()
        .expect("a table of 30,000 elements is over the default 20,000");
    let message = error.to_string();
    assert!(
        message.contains("a table of 30000 elements, and the pool allows 20000")
            && message.contains("raise --max-table-elements"),
        "{message}"
    );
    let roomy = engine_with(
        PoolLimits {
            table_elements: 30_000,
            ..PoolLimits::default()
        },
        None,
    );
    roomy
        .load_bytes("js-sized.wasm", &large_table)
        .expect("fits once the flag is raised");
}

#[test]
fn every_decision_slot_takes_the_largest_guest_at_once() {
    // A guest of 38 core instances that burns its whole budget, decided on
    // as many threads as there are slots, all at once: each instantiation
    // finds its core instances (the pool counts them per slot), so each
    // decision ends out of fuel, none fails to instantiate.
    let python_sized = with_core_instances(&guest("misbehaving-policy"), 38);
    let engine = engine_with(PoolLimits::default(), None);
    let policy = engine
        .load_bytes("python-sized-looping.wasm", &python_sized)
        .expect("loads");
    let slots = usize::try_from(limits().concurrent_decisions).expect("small");
    let start = std::sync::Barrier::new(slots);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..slots)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    policy.decide_template(&template("bad", &[("radwasm.test/misbehave", "loop")]))
                })
            })
            .collect();
        for thread in threads {
            let error = thread
                .join()
                .expect("no panic")
                .expect_err("the loop never finishes");
            assert!(
                matches!(error, radwasm::policy::DecisionError::OutOfFuel { .. }),
                "{error}"
            );
        }
    });
}

// --- the compile cache on disk -----------------------------------------

/// The artifact files in the cache directory.
fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn outcomes(engine: &PolicyEngine) -> [u64; 3] {
    [
        engine.loads().get(LoadOutcome::Compiled),
        engine.loads().get(LoadOutcome::DiskCache),
        engine.loads().get(LoadOutcome::MemoryCache),
    ]
}

#[test]
fn a_second_engine_maps_what_the_first_compiled_instead_of_compiling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = cached_engine(dir.path());
    let compiled = embedded::load_default(&first).expect("loads");
    assert_eq!(outcomes(&first), [1, 0, 0], "compiled the first time");
    let kept = artifacts(dir.path());
    assert_eq!(kept.len(), 1, "{kept:?}");
    let name = kept[0].file_name().expect("a name").to_string_lossy();
    assert!(
        name.starts_with(&radwasm::policy::digest(embedded::DEFAULT_POLICY)),
        "named by the component's digest: {name}"
    );
    assert!(
        kept[0].with_extension("cwasm.sha256").exists(),
        "with its checksum beside it"
    );

    // Another engine (a restarted process) with the same configuration.
    let second = cached_engine(dir.path());
    let mapped = embedded::load_default(&second).expect("loads");
    assert_eq!(outcomes(&second), [0, 1, 0], "mapped, not compiled");
    let observation = template("app", &[]);
    assert_eq!(
        mapped.decide_template(&observation).expect("decides").plan,
        compiled
            .decide_template(&observation)
            .expect("decides")
            .plan
    );
    // The same engine again: its own memory.
    embedded::load_default(&second).expect("loads");
    assert_eq!(outcomes(&second), [0, 1, 1]);
}

#[test]
fn a_damaged_artifact_is_compiled_again_never_mapped() {
    let dir = tempfile::tempdir().expect("tempdir");
    embedded::load_default(&cached_engine(dir.path())).expect("loads");
    let artifact = artifacts(dir.path()).pop().expect("an artifact");
    let whole = std::fs::read(&artifact).expect("readable");

    // Cut short, as by a full disk or a crash while copying.
    std::fs::write(&artifact, &whole[..whole.len() / 2]).expect("truncate");
    let engine = cached_engine(dir.path());
    let policy = embedded::load_default(&engine).expect("loads all the same");
    assert_eq!(outcomes(&engine), [1, 0, 0], "compiled again");
    policy
        .decide_template(&template("app", &[]))
        .expect("decides");
    assert_eq!(
        std::fs::read(&artifact).expect("rewritten"),
        whole,
        "the entry is written again, whole"
    );

    // The same length, one byte in its code changed.
    let mut flipped = whole.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x5a;
    std::fs::write(&artifact, &flipped).expect("damage");
    let engine = cached_engine(dir.path());
    embedded::load_default(&engine).expect("loads all the same");
    assert_eq!(outcomes(&engine), [1, 0, 0], "compiled again");

    // Its checksum gone: not trusted either.
    std::fs::remove_file(artifact.with_extension("cwasm.sha256")).expect("remove");
    let engine = cached_engine(dir.path());
    embedded::load_default(&engine).expect("loads all the same");
    assert_eq!(outcomes(&engine), [1, 0, 0], "compiled again");

    // And whole again after that.
    let engine = cached_engine(dir.path());
    embedded::load_default(&engine).expect("loads");
    assert_eq!(outcomes(&engine), [0, 1, 0]);
}

#[test]
fn a_cache_directory_that_cannot_be_written_only_costs_the_compile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    // Under a regular file: neither creatable nor readable, even as root.
    let engine = cached_engine(&file.join("cache"));
    embedded::load_default(&engine).expect("loads all the same");
    embedded::load_default(&cached_engine(&file.join("cache"))).expect("loads all the same");
    assert_eq!(outcomes(&engine), [1, 0, 0]);
}

/// `component` with a custom section appended: the same policy, another
/// digest (as a new version pushed during a rollout would have).
fn with_custom_section(component: &[u8], tag: u8) -> Vec<u8> {
    let mut section = vec![u8::try_from(b"radwasm-test".len()).expect("small")];
    section.extend_from_slice(b"radwasm-test");
    section.push(tag);
    let mut out = component.to_vec();
    push_section(&mut out, 0, &section);
    out
}

#[test]
fn the_cache_keeps_the_most_recently_used_entries_within_its_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = DiskCacheConfig {
        max_entries: 2,
        ..DiskCacheConfig::new(dir.path())
    };
    let engine = engine_with(PoolLimits::default(), Some(config.clone()));
    let versions: Vec<Vec<u8>> = (0..3)
        .map(|tag| with_custom_section(embedded::DEFAULT_POLICY, tag))
        .collect();
    let digests: Vec<String> = versions
        .iter()
        .map(|bytes| radwasm::policy::digest(bytes))
        .collect();
    let kept = |dir: &Path| -> Vec<bool> {
        let names: Vec<String> = artifacts(dir)
            .iter()
            .map(|path| {
                path.file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        digests
            .iter()
            .map(|digest| names.iter().any(|name| name.starts_with(digest.as_str())))
            .collect()
    };
    for (tag, bytes) in versions.iter().enumerate() {
        engine
            .load_bytes(&format!("version {tag}"), bytes)
            .expect("loads");
        // Distinct modification times, whatever the file system's resolution.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(kept(dir.path()), [false, true, true], "the oldest went");

    // A byte bound below two artifacts keeps one: the one used last.
    let one = std::fs::metadata(&artifacts(dir.path())[0])
        .expect("metadata")
        .len();
    let small = engine_with(
        PoolLimits::default(),
        Some(DiskCacheConfig {
            max_bytes: one + one / 2,
            ..config
        }),
    );
    small.load_bytes("version 0", &versions[0]).expect("loads");
    assert_eq!(kept(dir.path()), [true, false, false]);
    assert!(
        !std::fs::read_dir(dir.path())
            .expect("listable")
            .flatten()
            .any(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.ends_with(".sha256")
                    && !dir.path().join(name.trim_end_matches(".sha256")).exists()
            }),
        "no checksum outlives its artifact"
    );
}
