//! `ReconcilePolicy` benchmarks, on the stage of `scale` (the embedded or
//! real API server, the Radius simulator, `radwasm run` as a child process),
//! with the `ReconcilePolicy` CRD installed:
//!
//! * `swap`: from an edit of a policy (its `url` and `sha256`, or the
//!   ConfigMap it reads) until every template it decides for shows the new
//!   version's digest in `status.policy.digest` (the first decision by the
//!   new version, carried out). A ~2 MiB component through a `url:` served
//!   by this process on loopback; the unpadded default policy through a
//!   ConfigMap and through a URL. Where the time goes: when the URL was
//!   fetched, when the controller logged the activation, when the policy's
//!   status showed the digest; and what compiling takes in this process.
//! * `shadow`: `scale` without and with one `Shadow` policy (the built-in
//!   default, matching every template), alternating, on fresh stages.
//! * `selection`: `scale` with no `ReconcilePolicy`, with 100 of which none
//!   matches, and with 100 of which one matches every template; the
//!   controller's reconcile and decision histograms from `/metrics`; and
//!   `PolicyRegistry::select` timed in this process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use radwasm::crd::DeploymentTemplate;
use radwasm::policy::{Limits, PolicySlot};
use radwasm::reconcile_policy::ReconcilePolicy;
use radwasm::reconcile_policy::registry::{Active, PolicyRegistry, Selection, Subject};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{NAMESPACE, Options, ScaleRun, Server, Stage, ms, scale_run};

// ---------------------------------------------------------------- swap

/// Where a swapped policy's module comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Url,
    ConfigMap,
}

/// One series of swaps.
struct Variant {
    /// Names the policy (`swap-{label}`), its templates and ConfigMap.
    label: &'static str,
    source: Source,
    /// Component size; `None`: the base component plus a short tag.
    size: Option<usize>,
}

/// One swap, measured from the edit.
#[derive(Default, Clone)]
struct SwapSample {
    /// The module server saw the GET (URL sources only).
    fetched: Option<Duration>,
    /// The controller logged `policy version activated` for the digest.
    activated: Option<Duration>,
    /// The policy's `status.digest` (Ready) was seen.
    policy_status: Option<Duration>,
    /// The first template's `status.policy.digest` was seen.
    first_template: Duration,
    /// Every template's.
    all_templates: Duration,
}

/// `component` with a custom section named `radwasm-bench` appended, holding
/// `tag` and then pseudo-random filler, so the whole is `size` bytes (or
/// just long enough for the tag). Custom sections are valid anywhere in a
/// component and ignored by the runtime: the same policy, another digest.
fn padded(component: &[u8], tag: &str, size: Option<usize>) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    fn leb_len(n: usize) -> usize {
        let mut out = Vec::new();
        leb(n, &mut out);
        out.len()
    }
    let name = b"radwasm-bench";
    let header = leb_len(name.len()) + name.len() + tag.len();
    let minimum = component.len() + 1 + leb_len(header) + header;
    let target = size.unwrap_or(0).max(minimum);
    // Payload length such that id + LEB(payload) + payload == target - component.
    let room = target - component.len() - 1;
    let payload = (1..=5)
        .map(|n| room.saturating_sub(n))
        .find(|&p| leb_len(p) + p == room)
        .unwrap_or(header);
    let mut out = Vec::with_capacity(target);
    out.extend_from_slice(component);
    out.push(0);
    leb(payload, &mut out);
    leb(name.len(), &mut out);
    out.extend_from_slice(name);
    out.extend_from_slice(tag.as_bytes());
    // xorshift64 filler, seeded by the tag: incompressible, reproducible.
    let mut state = tag.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    while out.len() < component.len() + 1 + leb_len(payload) + payload {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push(state as u8);
    }
    out
}

/// Components served over HTTP on loopback, as `url:` modules; remembers
/// when each path was first asked for.
struct ModuleServer {
    base: String,
    modules: Arc<Mutex<HashMap<String, bytes::Bytes>>>,
    requested: Arc<Mutex<HashMap<String, Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ModuleServer {
    async fn start() -> anyhow::Result<Self> {
        use axum::extract::{Path, State};
        use axum::http::{StatusCode, header};
        use axum::response::IntoResponse;

        type Shared = (
            Arc<Mutex<HashMap<String, bytes::Bytes>>>,
            Arc<Mutex<HashMap<String, Instant>>>,
        );
        async fn serve(
            Path(name): Path<String>,
            State((modules, requested)): State<Shared>,
        ) -> axum::response::Response {
            if let Ok(mut requested) = requested.lock() {
                requested.entry(name.clone()).or_insert_with(Instant::now);
            }
            let found = modules.lock().ok().and_then(|m| m.get(&name).cloned());
            match found {
                Some(bytes) => {
                    ([(header::CONTENT_TYPE, "application/wasm")], bytes).into_response()
                }
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
        let modules = Arc::new(Mutex::new(HashMap::new()));
        let requested = Arc::new(Mutex::new(HashMap::new()));
        let app = axum::Router::new()
            .route("/modules/{name}", axum::routing::get(serve))
            .with_state((modules.clone(), requested.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}/modules", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            base,
            modules,
            requested,
            task,
        })
    }

    /// Serve `bytes` as `name`; its URL.
    fn publish(&self, name: &str, bytes: Vec<u8>) -> String {
        if let Ok(mut modules) = self.modules.lock() {
            modules.insert(name.to_string(), bytes.into());
        }
        format!("{}/{name}", self.base)
    }

    fn requested(&self, name: &str) -> Option<Instant> {
        self.requested.lock().ok()?.get(name).copied()
    }
}

impl Drop for ModuleServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The first time each digest was seen on each template's `status.policy`
/// and on each `ReconcilePolicy`'s status (with `Ready` true), from watches.
#[derive(Default)]
struct Digests {
    templates: HashMap<(String, String), Instant>,
    policies: HashMap<(String, String), Instant>,
}

struct DigestWatch {
    digests: Arc<Mutex<Digests>>,
    changes: watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Watch every `K`: the first time each object shows a digest (`digest`
/// takes it from the object), note when in the map `into` picks, and
/// announce it on `notify`.
fn watch_digests<K>(
    api: Api<K>,
    digests: Arc<Mutex<Digests>>,
    notify: Arc<watch::Sender<u64>>,
    digest: fn(&K) -> Option<String>,
    into: fn(&mut Digests) -> &mut HashMap<(String, String), Instant>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = stream.next().await {
            let Ok(object) = event else { continue };
            let Some(seen) = digest(&object) else {
                continue;
            };
            let now = Instant::now();
            if let Ok(mut digests) = digests.lock() {
                into(&mut digests)
                    .entry((object.name_any(), seen))
                    .or_insert(now);
            }
            notify.send_modify(|n| *n += 1);
        }
    })
}

impl DigestWatch {
    fn start(client: &Client) -> Self {
        let digests = Arc::new(Mutex::new(Digests::default()));
        let (notify, changes) = watch::channel(0u64);
        let notify = Arc::new(notify);
        let templates = watch_digests(
            Api::<DeploymentTemplate>::all(client.clone()),
            digests.clone(),
            notify.clone(),
            |template| {
                template
                    .status
                    .as_ref()
                    .and_then(|s| s.policy.as_ref())
                    .map(|p| p.digest.clone())
            },
            |digests| &mut digests.templates,
        );
        let policies = watch_digests(
            Api::<ReconcilePolicy>::all(client.clone()),
            digests.clone(),
            notify,
            |policy| {
                let status = policy.status.as_ref()?;
                let ready = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                let digest = status.digest.as_deref().filter(|_| ready)?;
                Some(digest.trim_start_matches("sha256:").to_string())
            },
            |digests| &mut digests.policies,
        );
        Self {
            digests,
            changes,
            tasks: vec![templates, policies],
        }
    }

    /// Wait until `done` holds.
    async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        done: impl FnMut(&Digests) -> bool,
    ) -> anyhow::Result<()> {
        super::wait_until(&self.digests, &self.changes, what, timeout, done).await
    }

    fn template_at(&self, name: &str, digest: &str) -> Option<Instant> {
        let digests = self.digests.lock().ok()?;
        digests
            .templates
            .get(&(name.to_string(), digest.to_string()))
            .copied()
    }

    fn policy_at(&self, name: &str, digest: &str) -> Option<Instant> {
        let digests = self.digests.lock().ok()?;
        digests
            .policies
            .get(&(name.to_string(), digest.to_string()))
            .copied()
    }
}

impl Drop for DigestWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// When the controller logged each digest's activation
/// (`policy version activated … digest=…`, INFO, from
/// `radwasm::reconcile_policy::loader`), by digest.
fn activations(log: &str) -> HashMap<String, SystemTime> {
    let mut found = HashMap::new();
    for line in log.lines() {
        if !line.contains("policy version activated") {
            continue;
        }
        let Some(stamp) = line.split_whitespace().next() else {
            continue;
        };
        let Ok(at) = chrono::DateTime::parse_from_rfc3339(stamp) else {
            continue;
        };
        let Some(digest) = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("digest="))
        else {
            continue;
        };
        found
            .entry(digest.to_string())
            .or_insert_with(|| SystemTime::from(at));
    }
    found
}

fn policy_object(name: &str, spec: Value) -> anyhow::Result<ReconcilePolicy> {
    serde_json::from_value(json!({
        "apiVersion": "radwasm.io/v1alpha1",
        "kind": "ReconcilePolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .context("a ReconcilePolicy")
}

fn config_map(name: &str, bytes: Vec<u8>) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "policy.wasm".to_string(),
            ByteString(bytes),
        )])),
        ..Default::default()
    }
}

/// Create `name` with these labels.
async fn apply_labelled(stage: &Stage, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<()> {
    let mut object = super::template(name);
    object.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Api::<DeploymentTemplate>::namespaced(stage.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating template {name}"))?;
    Ok(())
}

/// `p`-th percentile (nearest rank) of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    values.sort_by(f64::total_cmp);
    values
}

/// `p50 / p90` of durations in milliseconds, or `—`.
fn p50_p90(values: impl IntoIterator<Item = Option<Duration>>) -> String {
    let values = sorted(values.into_iter().flatten().map(ms));
    if values.is_empty() {
        return "—".to_string();
    }
    format!(
        "{:.0} / {:.0}",
        percentile(&values, 50.0),
        percentile(&values, 90.0)
    )
}

/// Hot swaps of one policy, from the edit to the new version's first
/// decisions.
pub async fn swap(options: &Options, server: Server) -> anyhow::Result<()> {
    let base = match &options.module_file {
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        None => radwasm::policy::embedded::DEFAULT_POLICY.to_vec(),
    };
    let large = options.module_kib << 10;
    let variants = [
        Variant {
            label: "url-large",
            source: Source::Url,
            size: Some(large),
        },
        Variant {
            label: "configmap",
            source: Source::ConfigMap,
            size: None,
        },
        Variant {
            label: "url",
            source: Source::Url,
            size: None,
        },
    ];

    // What loading costs in this process, before anything else runs: the
    // host's own load path (SHA-256, compile, link, `describe`), each time
    // a digest never compiled before.
    println!(
        "swap: base component {} bytes ({}), large {} bytes; {} swaps each, {} templates per policy",
        base.len(),
        options
            .module_file
            .as_ref()
            .map_or("the embedded default policy".to_string(), |p| p
                .display()
                .to_string()),
        large.max(base.len()),
        options.swaps,
        options.swap_templates
    );
    {
        // Each new digest is compiled; loading the same bytes again finds
        // the compiled component in the engine's cache, so it times
        // everything else (SHA-256, checks, linking, `describe`). The
        // engine keeps every component it compiled: the RSS growth per new
        // digest (the loaded policies themselves are dropped).
        let engine = radwasm::policy::engine(Limits::default())?;
        // Warm-up: the engine's first compile sets up what every later one
        // reuses.
        engine
            .load_bytes("bench", &padded(&base, "in-process warm-up", None))
            .map_err(|e| anyhow::anyhow!("the padded component does not load: {e}"))?;
        println!(
            "| in this process | size | load, new digest (p50 / max) | load again, cached (p50 / max) | RSS growth per new digest |"
        );
        println!("| --- | --- | --- | --- | --- |");
        for (what, size) in [("base + tag", None), ("large", Some(large))] {
            let (mut fresh, mut cached) = (Vec::new(), Vec::new());
            let reps = 10;
            let rss_before = super::proc_status_kib(std::process::id(), "VmRSS:").unwrap_or(0);
            let mut length = 0;
            for i in 0..reps {
                let bytes = padded(&base, &format!("in-process {what} {i}"), size);
                length = bytes.len();
                for took in [&mut fresh, &mut cached] {
                    let started = Instant::now();
                    let loaded = engine
                        .load_bytes("bench", &bytes)
                        .map_err(|e| anyhow::anyhow!("the padded component does not load: {e}"))?;
                    took.push(ms(started.elapsed()));
                    drop(loaded);
                }
            }
            let rss_after = super::proc_status_kib(std::process::id(), "VmRSS:").unwrap_or(0);
            let (fresh, cached) = (sorted(fresh), sorted(cached));
            println!(
                "| {what} | {length} bytes | {:.0} / {:.0} ms | {:.1} / {:.1} ms | {:.2} MiB |",
                percentile(&fresh, 50.0),
                fresh[fresh.len() - 1],
                percentile(&cached, 50.0),
                cached[cached.len() - 1],
                rss_after.saturating_sub(rss_before) as f64 / 1024.0 / reps as f64,
            );
        }
    }

    let mut stage = Stage::start_with(server, Duration::from_millis(200), 0, true).await?;
    stage.drift_resync = options.drift_resync.clone();
    let modules = ModuleServer::start().await?;
    let controller = stage.controller_logging("warn,radwasm::reconcile_policy::loader=info")?;
    let digests = DigestWatch::start(&stage.client);
    let policies: Api<ReconcilePolicy> = Api::all(stage.client.clone());
    let config_maps: Api<ConfigMap> = Api::namespaced(stage.client.clone(), NAMESPACE);

    let mut report = Vec::new();
    for variant in &variants {
        let name = format!("swap-{}", variant.label);
        let versions: Vec<Vec<u8>> = (0..=options.swaps)
            .map(|i| padded(&base, &format!("{name} version {i}"), variant.size))
            .collect();
        let shas: Vec<String> = versions
            .iter()
            .map(|v| radwasm::policy::digest(v))
            .collect();
        let size = versions[0].len();
        let module = |i: usize| -> Value {
            match variant.source {
                Source::Url => json!({
                    "url": modules.publish(&format!("{name}-{i}.wasm"), versions[i].clone()),
                    "sha256": shas[i],
                }),
                Source::ConfigMap => json!({
                    "configMap": {"namespace": NAMESPACE, "name": name, "key": "policy.wasm"}
                }),
            }
        };
        if variant.source == Source::ConfigMap {
            config_maps
                .create(
                    &PostParams::default(),
                    &config_map(&name, versions[0].clone()),
                )
                .await
                .context("creating the module ConfigMap")?;
        }
        policies
            .create(
                &PostParams::default(),
                &policy_object(
                    &name,
                    json!({"module": module(0),
                           "objectSelector": {"matchLabels": {"swap": variant.label}}}),
                )?,
            )
            .await
            .with_context(|| format!("creating ReconcilePolicy {name}"))?;
        digests
            .wait(&format!("{name} Ready"), Duration::from_secs(120), |d| {
                d.policies.contains_key(&(name.clone(), shas[0].clone()))
            })
            .await
            .with_context(|| controller.log_tail())?;
        let templates: Vec<String> = (0..options.swap_templates)
            .map(|i| format!("{name}-{i:02}"))
            .collect();
        for template in &templates {
            apply_labelled(&stage, template, &[("swap", variant.label)]).await?;
        }
        digests
            .wait(
                &format!("{name}'s templates decided by version 0"),
                Duration::from_secs(120),
                |d| {
                    templates
                        .iter()
                        .all(|t| d.templates.contains_key(&(t.clone(), shas[0].clone())))
                },
            )
            .await
            .with_context(|| controller.log_tail())?;
        stage
            .wait(
                &format!("{name}'s templates Ready"),
                Duration::from_secs(120),
                |seen| {
                    templates
                        .iter()
                        .all(|t| seen.templates_ready.contains_key(t))
                },
            )
            .await
            .with_context(|| controller.log_tail())?;

        let rss_before = controller.rss_kib().unwrap_or(0);
        let cpu_before = controller.cpu_seconds().unwrap_or(0.0);
        let mut samples = Vec::new();
        let mut edits = Vec::new();
        for i in 1..=options.swaps {
            // Let the last swap's writes settle.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let edited = Instant::now();
            let edited_wall = SystemTime::now();
            match variant.source {
                Source::Url => {
                    policies
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"spec": {"module": module(i)}})),
                        )
                        .await
                        .with_context(|| format!("editing {name}"))?;
                }
                Source::ConfigMap => {
                    config_maps
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"binaryData": {
                                "policy.wasm": ByteString(versions[i].clone())
                            }})),
                        )
                        .await
                        .with_context(|| format!("editing ConfigMap {name}"))?;
                }
            }
            let sha = &shas[i];
            digests
                .wait(
                    &format!("{name} version {i} deciding for every template"),
                    Duration::from_secs(120),
                    |d| {
                        templates
                            .iter()
                            .all(|t| d.templates.contains_key(&(t.clone(), sha.clone())))
                    },
                )
                .await
                .with_context(|| controller.log_tail())?;
            let at: Vec<Duration> = templates
                .iter()
                .filter_map(|t| digests.template_at(t, sha))
                .map(|at| at.saturating_duration_since(edited))
                .collect();
            // The policy's status may lag the templates (or have been
            // overwritten by the next write already): give it a moment.
            let _ = digests
                .wait("the policy's status", Duration::from_secs(5), |d| {
                    d.policies.contains_key(&(name.clone(), sha.clone()))
                })
                .await;
            samples.push(SwapSample {
                fetched: (variant.source == Source::Url)
                    .then(|| modules.requested(&format!("{name}-{i}.wasm")))
                    .flatten()
                    .map(|at| at.saturating_duration_since(edited)),
                activated: None,
                policy_status: digests
                    .policy_at(&name, sha)
                    .map(|at| at.saturating_duration_since(edited)),
                first_template: at.iter().min().copied().unwrap_or_default(),
                all_templates: at.iter().max().copied().unwrap_or_default(),
            });
            edits.push((sha.clone(), edited_wall));
        }
        let swap_cpu = controller.cpu_seconds().unwrap_or(0.0) - cpu_before;
        let rss_after = controller.rss_kib().unwrap_or(0);
        let log = std::fs::read_to_string(&controller.log).unwrap_or_default();
        let activated = activations(&log);
        for (sample, (sha, edited)) in samples.iter_mut().zip(&edits) {
            sample.activated = activated
                .get(sha)
                .and_then(|at| at.duration_since(*edited).ok());
        }
        report.push((variant, size, samples, rss_before, rss_after, swap_cpu));
    }

    println!(
        "\nfrom the edit (ms, p50 / p90 over {} swaps; {} templates each):",
        options.swaps, options.swap_templates
    );
    println!(
        "| module | size | URL fetched | activated (log) | policy status | first template decided | all templates decided | controller CPU per swap | controller RSS before → after |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (variant, size, samples, rss_before, rss_after, cpu) in &report {
        println!(
            "| {} | {:.0} KiB | {} | {} | {} | {} | {} | {:.2} s | {:.1} → {:.1} MiB |",
            match variant.source {
                Source::Url => "url",
                Source::ConfigMap => "configMap",
            },
            *size as f64 / 1024.0,
            p50_p90(samples.iter().map(|s| s.fetched)),
            p50_p90(samples.iter().map(|s| s.activated)),
            p50_p90(samples.iter().map(|s| s.policy_status)),
            p50_p90(samples.iter().map(|s| Some(s.first_template))),
            p50_p90(samples.iter().map(|s| Some(s.all_templates))),
            cpu / samples.len().max(1) as f64,
            *rss_before as f64 / 1024.0,
            *rss_after as f64 / 1024.0,
        );
    }
    let first = |label: &str| -> Vec<f64> {
        report
            .iter()
            .find(|(v, ..)| v.label == label)
            .map(|(_, _, samples, ..)| sorted(samples.iter().map(|s| ms(s.first_template))))
            .unwrap_or_default()
    };
    let (large_first, url_first, config_first) =
        (first("url-large"), first("url"), first("configmap"));
    println!(
        "  ratios of p50 (first template): url {:.0} KiB / url {:.0} KiB = {:.2}x; configMap / url (same bytes) = {:.2}x",
        report[0].1 as f64 / 1024.0,
        report[2].1 as f64 / 1024.0,
        percentile(&large_first, 50.0) / percentile(&url_first, 50.0),
        percentile(&config_first, 50.0) / percentile(&url_first, 50.0),
    );
    drop(digests);
    controller.stop()?;
    stage.stop().await;
    Ok(())
}

// ------------------------------------------------- shadow and selection

/// What one arm (a fresh stage and controller, some policies, a `scale`
/// run) measured.
struct Arm {
    run: ScaleRun,
    /// Controller CPU from the first create until it was idle again
    /// (detached shadow decisions included).
    settled_cpu: f64,
    /// Mean reconcile time by kind (template, resource), from `/metrics`.
    reconcile_ms: (f64, f64),
    /// Mean enforcing decision time (µs) and count.
    decision_us: f64,
    decisions: f64,
    /// Shadow decisions: agreed, disagreed, failed.
    shadow: (f64, f64, f64),
    /// Controller CPU (ms) per `ReconcilePolicy` spec edit that leaves
    /// every object's choice as it was, with every template and resource
    /// in the cache; `None` without policies.
    event_cpu_ms: Option<f64>,
}

/// Controller CPU until it has been under 1 % of a core for 2 s running
/// (at most 60 s); the CPU seconds then.
async fn until_idle(controller: &super::ControllerProcess) -> f64 {
    let mut last = controller.cpu_seconds().unwrap_or(0.0);
    let mut quiet = 0;
    let started = Instant::now();
    while quiet < 2 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = controller.cpu_seconds().unwrap_or(0.0);
        quiet = if now - last < 0.01 { quiet + 1 } else { 0 };
        last = now;
    }
    last
}

/// Sum of the samples of metric `name` whose line contains every filter.
pub(super) fn metric(text: &str, name: &str, filters: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.split(['{', ' '])
                .next()
                .is_some_and(|metric| metric == name)
        })
        .filter(|line| filters.iter().all(|f| line.contains(f)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        + 0.0
}

/// A fresh stage and controller; `policies` created and Ready; then
/// `scale`; then until the controller is idle.
async fn arm(
    options: &Options,
    server: Server,
    policies: &[(String, Value)],
) -> anyhow::Result<Arm> {
    let mut stage =
        Stage::start_with(server, Duration::from_millis(options.deploy_ms), 0, true).await?;
    stage.drift_resync = options.drift_resync.clone();
    let controller = stage.controller()?;
    let api: Api<ReconcilePolicy> = Api::all(stage.client.clone());
    for (name, spec) in policies {
        api.create(&PostParams::default(), &policy_object(name, spec.clone())?)
            .await
            .with_context(|| format!("creating ReconcilePolicy {name}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let listed = api.list(&ListParams::default()).await?;
        let ready = listed
            .items
            .iter()
            .filter(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        if ready == policies.len() {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{ready} of {} ReconcilePolicies Ready after 300 s:\n{}",
                policies.len(),
                controller.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let run = scale_run(options, &stage, &controller, false).await?;
    let at_ready = controller.cpu_seconds().unwrap_or(0.0);
    let last = until_idle(&controller).await;
    let text = controller.metrics().await?;
    // Every policy's spec edited once (its priority, up by 1,000: the same
    // policy still wins wherever one did), 50 ms apart so that no two
    // edits coalesce: each is a selection change, so every template and
    // resource in the cache is selected again (and the loader checks the
    // unchanged module).
    let event_cpu_ms = if policies.is_empty() {
        None
    } else {
        let before = controller.cpu_seconds().unwrap_or(0.0);
        for (i, (name, _)) in policies.iter().enumerate() {
            let patch = json!({"spec": {"priority": 1000 + i}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("editing ReconcilePolicy {name}"))?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let after = until_idle(&controller).await;
        Some(1e3 * (after - before) / policies.len() as f64)
    };
    let mean = |name: &str, filters: &[&str]| {
        metric(&text, &format!("{name}_sum"), filters)
            / metric(&text, &format!("{name}_count"), filters)
    };
    let figures = Arm {
        settled_cpu: run.controller_cpu + (last - at_ready),
        run,
        reconcile_ms: (
            1e3 * mean(
                "radwasm_reconcile_seconds",
                &["kind=\"DeploymentTemplate\""],
            ),
            1e3 * mean(
                "radwasm_reconcile_seconds",
                &["kind=\"DeploymentResource\""],
            ),
        ),
        decision_us: 1e6 * mean("radwasm_policy_decision_seconds", &[]),
        decisions: metric(&text, "radwasm_policy_decision_seconds_count", &[]),
        shadow: (
            metric(
                &text,
                "radwasm_shadow_decisions_total",
                &["outcome=\"agreed\""],
            ),
            metric(
                &text,
                "radwasm_shadow_decisions_total",
                &["outcome=\"disagreed\""],
            ),
            metric(
                &text,
                "radwasm_shadow_decisions_total",
                &["outcome=\"failed\""],
            ),
        ),
        event_cpu_ms,
    };
    controller.stop()?;
    stage.stop().await;
    Ok(figures)
}

fn arm_row(round: usize, what: &str, arm: &Arm) -> String {
    format!(
        "| {round} | {what} | {:.1} s | {:.2} s | {:.2} s | {:.2} / {:.2} ms | {:.1} µs | {:.0} | {:.0} / {:.0} / {:.0} | {:.1} MiB | {} |",
        arm.run.templates_ready.as_secs_f64(),
        arm.run.controller_cpu,
        arm.settled_cpu,
        arm.reconcile_ms.0,
        arm.reconcile_ms.1,
        arm.decision_us,
        arm.decisions,
        arm.shadow.0,
        arm.shadow.1,
        arm.shadow.2,
        arm.run.peak_rss_kib as f64 / 1024.0,
        arm.event_cpu_ms
            .map_or("—".to_string(), |ms| format!("{ms:.1} ms")),
    )
}

const ARM_HEADER: &str = "| round | policies | all templates Ready | controller CPU to Ready | controller CPU to idle | reconcile mean (template / resource) | decision mean | enforcing decisions | shadow agreed / disagreed / failed | controller peak RSS | controller CPU per policy spec edit |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |";

/// Run each variant `options.rounds` times, rotating the order each
/// round; print every arm and the medians' ratios to the first variant.
async fn rounds(
    options: &Options,
    server: Server,
    variants: &[(&str, Vec<(String, Value)>)],
) -> anyhow::Result<()> {
    println!("{ARM_HEADER}");
    let mut arms: Vec<Vec<Arm>> = variants.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for k in 0..variants.len() {
            let v = (k + round) % variants.len();
            let (what, policies) = &variants[v];
            let figures = arm(options, server, policies).await?;
            println!("{}", arm_row(round + 1, what, &figures));
            arms[v].push(figures);
        }
    }
    let median =
        |arms: &[Arm], f: &dyn Fn(&Arm) -> f64| percentile(&sorted(arms.iter().map(f)), 50.0);
    println!(
        "\nmedians of {} rounds, and ratio to \"{}\":",
        options.rounds, variants[0].0
    );
    println!(
        "| policies | all templates Ready | controller CPU to Ready | controller CPU to idle | reconcile mean (template / resource) | decision mean |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let figures: [&dyn Fn(&Arm) -> f64; 6] = [
        &|a| a.run.templates_ready.as_secs_f64(),
        &|a| a.run.controller_cpu,
        &|a| a.settled_cpu,
        &|a| a.reconcile_ms.0,
        &|a| a.reconcile_ms.1,
        &|a| a.decision_us,
    ];
    let base: Vec<f64> = figures.iter().map(|f| median(&arms[0], f)).collect();
    for (v, (what, _)) in variants.iter().enumerate() {
        let m: Vec<f64> = figures.iter().map(|f| median(&arms[v], f)).collect();
        let r: Vec<f64> = m.iter().zip(&base).map(|(m, b)| m / b).collect();
        println!(
            "| {what} | {:.1} s ({:.2}x) | {:.2} s ({:.2}x) | {:.2} s ({:.2}x) | {:.2} ms ({:.2}x) / {:.2} ms ({:.2}x) | {:.1} µs ({:.2}x) |",
            m[0], r[0], m[1], r[1], m[2], r[2], m[3], r[3], m[4], r[4], m[5], r[5]
        );
    }
    Ok(())
}

/// `scale` without and with one `Shadow` policy matching everything.
pub async fn shadow(options: &Options, server: Server) -> anyhow::Result<()> {
    println!(
        "shadow: scale ({} templates x 3 resources, {} ms deployments) without and with one Shadow ReconcilePolicy (builtin default, no selectors), {} rounds",
        options.templates, options.deploy_ms, options.rounds
    );
    let variants = [
        ("none", Vec::new()),
        (
            "one Shadow (builtin default, all)",
            vec![(
                "shadow-default".to_string(),
                json!({"module": {"builtin": "default"}, "mode": "Shadow"}),
            )],
        ),
    ];
    rounds(options, server, &variants).await
}

/// `n` Enforce policies (builtin default) whose namespace selector matches
/// and whose object selector matches no template; with `one_matches`, the
/// last of them has no object selector, so it decides for every template.
fn selection_policies(n: usize, one_matches: bool) -> Vec<(String, Value)> {
    (0..n)
        .map(|i| {
            let namespaces = json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]
            }]});
            let spec = if one_matches && i == n - 1 {
                json!({"module": {"builtin": "default"}, "namespaceSelector": namespaces, "priority": i})
            } else {
                json!({"module": {"builtin": "default"}, "namespaceSelector": namespaces,
                       "objectSelector": {"matchLabels": {"team": format!("team-{i:03}")}},
                       "priority": i})
            };
            (format!("select-{i:03}"), spec)
        })
        .collect()
}

/// `PolicyRegistry::select` timed in this process, in ns per call.
fn select_cost(policies: &[(String, Value)]) -> anyhow::Result<f64> {
    let engine = radwasm::policy::engine(Limits::default())?;
    let slot = PolicySlot::load(
        engine,
        radwasm::policy::Source::BuiltIn(radwasm::policy::embedded::DEFAULT),
    )?;
    let registry = PolicyRegistry::new(slot.clone());
    registry.set_listed();
    for (name, spec) in policies {
        registry.upsert(&policy_object(name, spec.clone())?);
        registry.activate(
            name,
            Active {
                policy: slot.current(),
                identity: name.clone(),
                verified: None,
            },
        );
    }
    let labels = BTreeMap::new();
    let annotations = BTreeMap::new();
    let namespace_labels = BTreeMap::from([(
        "kubernetes.io/metadata.name".to_string(),
        NAMESPACE.to_string(),
    )]);
    let subject = Subject {
        labels: &labels,
        annotations: &annotations,
        namespace_labels: Some(&namespace_labels),
    };
    let calls = 200_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..calls {
            match std::hint::black_box(registry.select(std::hint::black_box(&subject))) {
                Selection::Decide(chosen) => {
                    std::hint::black_box(chosen);
                }
                _ => bail!("selection did not decide"),
            }
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / calls as f64);
    }
    Ok(best)
}

/// `scale` with no `ReconcilePolicy`, 100 matching none, 100 of which one
/// matches every template.
pub async fn selection(options: &Options, server: Server) -> anyhow::Result<()> {
    let n = options.policies;
    let variants = [
        ("none".to_string(), Vec::new()),
        (format!("{n}, none matching"), selection_policies(n, false)),
        (
            format!("{n}, one matching every template"),
            selection_policies(n, true),
        ),
    ];
    println!(
        "selection: PolicyRegistry::select in this process (best of 5 x 200,000 calls, a template with no labels):"
    );
    for (what, policies) in &variants {
        println!("  {what}: {:.0} ns per call", select_cost(policies)?);
    }
    println!(
        "selection: scale ({} templates x 3 resources, {} ms deployments) with these ReconcilePolicies (builtin default, Enforce), {} rounds",
        options.templates, options.deploy_ms, options.rounds
    );
    let variants: Vec<(&str, Vec<(String, Value)>)> = variants
        .iter()
        .map(|(what, policies)| (what.as_str(), policies.clone()))
        .collect();
    rounds(options, server, &variants).await
}
