//! Churn with faults, black box: many templates across namespaces updated,
//! deleted and re-created at random while Radius and the API server
//! misbehave and the controller is SIGKILLed and restarted; then faults off,
//! churn stopped, and every invariant checked once the system converges.
//!
//! Short by default (40 templates, ~40 s of churn, 3 kills; part of
//! `cargo test`, on the embedded API server only); the full form
//! with `RADWASM_CHURN_FULL=1` (200 templates, 4 minutes, 10 kills). The
//! seed is printed; `RADWASM_CHURN_SEED=<n>` replays one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use radwasm::crd::{DeploymentResource, DeploymentTemplate};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::harness::{Backend, System, fixture, template_in};

const NAMESPACES: [&str; 4] = ["churn-a", "churn-b", "churn-c", "churn-d"];
/// The largest number of Radius mutations one object may receive in 10 s:
/// the host spaces failed mutations by at least 1 s per object.
const MAX_MUTATIONS_PER_10S: u64 = 10;

struct Plan {
    templates: usize,
    churn: Duration,
    kills: usize,
    converge: Duration,
}

impl Plan {
    fn from_env() -> Plan {
        if std::env::var("RADWASM_CHURN_FULL").is_ok_and(|v| !v.is_empty() && v != "0") {
            Plan {
                templates: 200,
                churn: Duration::from_secs(240),
                kills: 10,
                converge: Duration::from_secs(600),
            }
        } else {
            Plan {
                templates: 40,
                churn: Duration::from_secs(40),
                kills: 3,
                converge: Duration::from_secs(120),
            }
        }
    }
}

/// One template name the churn works on.
struct Slot {
    namespace: &'static str,
    name: String,
    /// Bumped on every spec written, so every spec (and so every deployment
    /// name) is distinct.
    revision: u64,
    /// Whether the test believes it exists (not deleted by the test).
    live: bool,
}

impl Slot {
    fn object(&self, rng: &mut StdRng) -> DeploymentTemplate {
        let fixture_name = if rng.random_bool(0.5) {
            "deploymenttemplate-outputresources-1.json"
        } else {
            "deploymenttemplate-outputresources-2.json"
        };
        let text = fixture(fixture_name)
            .replace(
                "output-resources-",
                &format!("{}-{}-", self.namespace, self.name),
            )
            .replace(
                "\"contentVersion\": \"1.0.0.0\"",
                &format!("\"contentVersion\": \"1.0.0.{}\"", self.revision),
            );
        let parameters = if rng.random_bool(0.5) { "" } else { "{}" };
        let mut object = template_in(self.namespace, &self.name, &text, parameters);
        object.metadata.annotations =
            Some([("radapp.io/deployment-retry".to_string(), "2s".to_string())].into());
        object
    }
}

/// One status a watch saw.
#[derive(Debug, Clone)]
struct Seen {
    key: String,
    uid: String,
    generation: i64,
    observed: i64,
    phase: String,
    ready: String,
    status_hash: String,
    spec_hash: String,
    failure_subject: Option<String>,
    deleting: bool,
    finalizers: Vec<String>,
    outputs: Vec<String>,
    at: chrono::DateTime<chrono::Utc>,
}

fn hash_of(object: &DeploymentTemplate) -> String {
    radwasm::controller::observe::spec_hash(&radwasm::controller::observe::spec_texts(object))
}

fn watch_all(system: &System) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let api: Api<DeploymentTemplate> = Api::all(system.client.clone());
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(template) = event else { continue };
                let status = template.status.clone().unwrap_or_default();
                let ready = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.status.clone())
                    .unwrap_or_default();
                let record = Seen {
                    key: format!(
                        "{}/{}",
                        template.metadata.namespace.clone().unwrap_or_default(),
                        template.metadata.name.clone().unwrap_or_default()
                    ),
                    uid: template.metadata.uid.clone().unwrap_or_default(),
                    generation: template.metadata.generation.unwrap_or_default(),
                    observed: status.observed_generation.unwrap_or_default(),
                    phase: status.phrase.clone().unwrap_or_default(),
                    ready,
                    status_hash: status.status_hash.clone().unwrap_or_default(),
                    spec_hash: hash_of(&template),
                    failure_subject: status.last_failure.as_ref().map(|f| f.subject.clone()),
                    deleting: template.metadata.deletion_timestamp.is_some(),
                    finalizers: template.metadata.finalizers.clone().unwrap_or_default(),
                    outputs: status.output_resources.clone(),
                    at: chrono::Utc::now(),
                };
                if let Ok(mut seen) = seen.lock() {
                    seen.push(record);
                }
            }
        })
    };
    (seen, task)
}

/// Per object (`put:<deployment>` / `delete:<id>`), the Radius mutations so far.
fn mutation_counts(system: &System) -> BTreeMap<String, u64> {
    let stats = system.radius().stats();
    let mut counts = BTreeMap::new();
    for (name, n) in stats.deployment_puts_by_name {
        counts.insert(format!("put:{name}"), n);
    }
    for (id, n) in stats.deletes_by_id {
        counts.insert(format!("delete:{id}"), n);
    }
    counts
}

/// Call `op` until it succeeds or says the object is (not) there, at most
/// 20 times: the API server fails some requests on purpose.
async fn with_retries<T, F, Fut>(mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut last = None;
    for _ in 0..20 {
        match op().await {
            Ok(value) => return Ok(value),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                return Err(kube::Error::Api(e));
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last.expect("an error"))
}

/// Switch a random set of faults on, each at roughly a fifth of the traffic.
/// `RADWASM_CHURN_FAULTS`: `all` (the default), `radius` or `apiserver`
/// (only that side misbehaves) or `none` (churn and kills only), to narrow
/// down a finding; the same random draws are made whatever it says.
fn random_faults(system: &System, rng: &mut StdRng) -> String {
    let which = std::env::var("RADWASM_CHURN_FAULTS").unwrap_or_default();
    let (radius_on, apiserver_on) = match which.as_str() {
        "radius" => (true, false),
        "apiserver" => (false, true),
        "none" => (false, false),
        _ => (true, true),
    };
    let error_rate = rng.random_range(0.05..0.2);
    let throttle = rng.random_range(0..4);
    let drops = rng.random_range(0..4);
    let failed_deployments = rng.random_range(0..3);
    let failed_deletes = rng.random_range(0..2);
    let vanish = rng.random_range(0..2);
    let deploy_ms = rng.random_range(200..3000);
    let latency_ms = rng.random_range(0..300);
    let api_rate = rng.random_range(0.0..0.15);
    let api_code = if rng.random_bool(0.5) { 500 } else { 429 };
    let drop_watches = rng.random_bool(0.3);
    let expire = rng.random_bool(0.2);
    let watch_lag_ms = if rng.random_bool(0.3) {
        rng.random_range(50..700)
    } else {
        0
    };
    let mut text = String::new();
    if radius_on {
        let radius = system.radius().faults();
        radius.set_error_rate(error_rate);
        radius.throttle_next(throttle, 1);
        radius.drop_next_connections(drops);
        radius.fail_next_deployments(
            failed_deployments,
            "RecipeFailed",
            "a transient cloud error (churn)",
        );
        radius.fail_next_deletes(failed_deletes);
        radius.vanish_next_operations(vanish);
        radius.set_deploy_duration(Duration::from_millis(deploy_ms));
        radius.set_latency(Duration::from_millis(latency_ms));
        text.push_str(&format!(
            "radius: 5xx {error_rate:.2}, 429x{throttle}, drop x{drops}, fail-deploy x{failed_deployments}, \
             fail-delete x{failed_deletes}, vanish x{vanish}, deploy {deploy_ms} ms, latency {latency_ms} ms; "
        ));
    }
    if apiserver_on {
        let apiserver = system
            .apiserver
            .as_ref()
            .expect("embedded API server")
            .faults();
        apiserver.set_error_rate(api_rate, api_code);
        if drop_watches {
            apiserver.drop_watches();
        }
        if expire {
            apiserver.expire_history();
        }
        apiserver.set_watch_lag(Duration::from_millis(watch_lag_ms));
        text.push_str(&format!(
            "apiserver: {api_code} at {api_rate:.2}, drop watches {drop_watches}, 410 {expire}, \
             watch lag {watch_lag_ms} ms"
        ));
    }
    if text.is_empty() {
        text.push_str("none");
    }
    text
}

fn faults_off(system: &System) {
    let radius = system.radius().faults();
    radius.clear();
    radius.set_deploy_duration(Duration::from_millis(300));
    if let Some(apiserver) = system.apiserver.as_ref() {
        apiserver.faults().clear();
    }
}

/// Whether every template is Ready at its generation and none is being deleted.
async fn converged(system: &System) -> Option<(usize, usize, usize)> {
    let api: Api<DeploymentTemplate> = Api::all(system.client.clone());
    let list = api.list(&ListParams::default()).await.ok()?;
    let total = list.items.len();
    let terminating = list
        .items
        .iter()
        .filter(|t| t.metadata.deletion_timestamp.is_some())
        .count();
    let ready = list
        .items
        .iter()
        .filter(|t| {
            t.metadata.deletion_timestamp.is_none()
                && t.status.as_ref().is_some_and(|s| {
                    s.phrase.as_deref() == Some("Ready")
                        && s.observed_generation == t.metadata.generation
                        && s.status_hash.as_deref() == Some(hash_of(t).as_str())
                })
        })
        .count();
    Some((ready, total, terminating))
}

struct Row {
    name: &'static str,
    value: String,
    ok: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_with_faults_converges_and_keeps_every_invariant() {
    let mut plan = Plan::from_env();
    // `RADWASM_CHURN_KILLS=<n>`: another number of SIGKILLs (to narrow down).
    if let Some(kills) = std::env::var("RADWASM_CHURN_KILLS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        plan.kills = kills;
    }
    let seed: u64 = std::env::var("RADWASM_CHURN_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!(
        "churn: seed {seed} (replay with RADWASM_CHURN_SEED={seed}); {} templates, {:?} churn, {} kills",
        plan.templates, plan.churn, plan.kills
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    // The last decisions are kept in memory, so a template that does not
    // converge can be explained by what its policy saw and answered.
    let mut system = System::start_on(
        Backend::Embedded,
        &["--decision-ring", "5000"],
        Duration::from_millis(300),
    )
    .await;
    for namespace in NAMESPACES {
        system.create_namespace(namespace).await;
    }
    let (seen, watch) = watch_all(&system);

    let mut slots: Vec<Slot> = (0..plan.templates)
        .map(|i| Slot {
            namespace: NAMESPACES[i % NAMESPACES.len()],
            name: format!("t{i:03}"),
            revision: 0,
            live: false,
        })
        .collect();
    // Create every template before the faults start.
    for slot in &mut slots {
        let object = slot.object(&mut rng);
        system
            .templates_in(slot.namespace)
            .create(&PostParams::default(), &object)
            .await
            .expect("create template");
        slot.live = true;
    }

    // Kill moments, at random within the churn.
    let mut kills: Vec<Duration> = (0..plan.kills)
        .map(|_| Duration::from_millis(rng.random_range(2_000..plan.churn.as_millis() as u64)))
        .collect();
    kills.sort();
    let mut kills = std::collections::VecDeque::from(kills);

    let mut samples: Vec<(Instant, BTreeMap<String, u64>)> =
        vec![(Instant::now(), mutation_counts(&system))];
    let mut walls = vec![chrono::Utc::now()];
    let mut last_faults = Instant::now() - Duration::from_secs(60);
    let mut counts = BTreeMap::<&str, u64>::new();
    let churn_start = Instant::now();
    let mut steps = 0u64;
    // Bounded: by time, and by a step count no realistic run reaches.
    while churn_start.elapsed() < plan.churn && steps < 100_000 {
        steps += 1;
        if last_faults.elapsed() > Duration::from_secs(2) {
            let faults = random_faults(&system, &mut rng);
            eprintln!(
                "churn: t={:>5.1}s faults: {faults}",
                started.elapsed().as_secs_f64()
            );
            last_faults = Instant::now();
        }
        if kills.front().is_some_and(|at| churn_start.elapsed() >= *at) {
            kills.pop_front();
            system.kill_controller();
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..1_000))).await;
            system.start_controller();
            *counts.entry("controller SIGKILL + restart").or_default() += 1;
            eprintln!(
                "churn: t={:>5.1}s SIGKILL + restart",
                started.elapsed().as_secs_f64()
            );
        }
        if samples
            .last()
            .is_some_and(|(at, _)| at.elapsed() >= Duration::from_secs(1))
        {
            {
                samples.push((Instant::now(), mutation_counts(&system)));
                walls.push(chrono::Utc::now());
            }
        }
        let at = rng.random_range(0..slots.len());
        let roll = rng.random_range(0..100);
        let slot = &mut slots[at];
        let api = system.templates_in(slot.namespace);
        let post = PostParams::default();
        let patch_params = PatchParams::default();
        let delete_params = DeleteParams::default();
        if !slot.live {
            slot.revision += 1;
            let object = slot.object(&mut rng);
            match with_retries(|| api.create(&post, &object)).await {
                Ok(_) => {
                    slot.live = true;
                    *counts.entry("re-create").or_default() += 1;
                }
                // Still being deleted: try again later.
                Err(_) => {
                    *counts
                        .entry("re-create refused (still deleting)")
                        .or_default() += 1
                }
            }
        } else if roll < 75 {
            slot.revision += 1;
            let object = slot.object(&mut rng);
            let patch = json!({"spec": {
                "template": object.spec.template,
                "parameters": object.spec.parameters,
            }});
            let patch = Patch::Merge(&patch);
            let name = slot.name.clone();
            match with_retries(|| api.patch(&name, &patch_params, &patch)).await {
                Ok(_) => *counts.entry("spec update").or_default() += 1,
                Err(e) => {
                    *counts.entry("spec update failed").or_default() += 1;
                    eprintln!("churn: update {}/{}: {e}", slot.namespace, slot.name);
                }
            }
        } else {
            let name = slot.name.clone();
            match with_retries(|| api.delete(&name, &delete_params)).await {
                Ok(_) => {
                    slot.live = false;
                    *counts.entry("delete").or_default() += 1;
                }
                Err(e) => {
                    *counts.entry("delete failed").or_default() += 1;
                    eprintln!("churn: delete {}/{}: {e}", slot.namespace, slot.name);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..200))).await;
    }
    faults_off(&system);
    let churn_took = churn_start.elapsed();
    eprintln!("churn: stopped after {churn_took:?}, {steps} steps: {counts:?}");
    if !system.controller_running() {
        system.start_controller();
    }

    // Converge, bounded.
    let converge_start = Instant::now();
    let mut last = None;
    while converge_start.elapsed() < plan.converge {
        if samples
            .last()
            .is_some_and(|(at, _)| at.elapsed() >= Duration::from_secs(1))
        {
            {
                samples.push((Instant::now(), mutation_counts(&system)));
                walls.push(chrono::Utc::now());
            }
        }
        last = converged(&system).await;
        if let Some((ready, total, 0)) = last
            && ready == total
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let converge_took = converge_start.elapsed();
    // Let late writes land, then one last sample and stop the watch.
    tokio::time::sleep(Duration::from_secs(2)).await;
    {
        samples.push((Instant::now(), mutation_counts(&system)));
        walls.push(chrono::Utc::now());
    }
    let last = converged(&system).await.or(last);
    watch.abort();
    let seen = seen.lock().expect("seen").clone();

    // The state at the end.
    let templates: Vec<DeploymentTemplate> = Api::<DeploymentTemplate>::all(system.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list templates")
        .items;
    let resources: Vec<DeploymentResource> = Api::<DeploymentResource>::all(system.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list resources")
        .items;
    let live_uids: BTreeSet<String> = templates
        .iter()
        .filter_map(|t| t.metadata.uid.clone())
        .collect();
    let mut rows = Vec::new();
    let (ready, total, terminating) = last.unwrap_or((0, 0, usize::MAX));
    rows.push(Row {
        name: "live templates Ready at their generation",
        value: format!("{ready}/{total} in {converge_took:.1?} ({terminating} still deleting)"),
        ok: ready == total && terminating == 0 && total > 0,
    });

    // DeploymentResources of each template equal its outputResources.
    let mut owned: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut orphans = Vec::new();
    for resource in &resources {
        let owner = resource
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        match owner {
            Some(o) if live_uids.contains(&o.uid) => {
                owned
                    .entry(o.uid.clone())
                    .or_default()
                    .insert(resource.spec.id.to_ascii_lowercase());
            }
            _ => orphans.push(format!(
                "{}/{} {}",
                resource.metadata.namespace.clone().unwrap_or_default(),
                resource.metadata.name.clone().unwrap_or_default(),
                resource.spec.id
            )),
        }
    }
    let mut mismatched = Vec::new();
    let mut expected_ids = BTreeSet::new();
    for t in &templates {
        let outputs: BTreeSet<String> = t
            .status
            .as_ref()
            .map(|s| {
                s.output_resources
                    .iter()
                    .map(|i| i.to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        expected_ids.extend(outputs.iter().cloned());
        let uid = t.metadata.uid.clone().unwrap_or_default();
        let have = owned.get(&uid).cloned().unwrap_or_default();
        if have != outputs {
            mismatched.push(format!(
                "{}/{}: resources {have:?} outputs {outputs:?}",
                t.metadata.namespace.clone().unwrap_or_default(),
                t.metadata.name.clone().unwrap_or_default()
            ));
        }
    }
    rows.push(Row {
        name: "templates whose DeploymentResources != outputResources",
        value: format!(
            "{} {:?}",
            mismatched.len(),
            mismatched.iter().take(3).collect::<Vec<_>>()
        ),
        ok: mismatched.is_empty(),
    });
    rows.push(Row {
        name: "DeploymentResources without a live owner",
        value: format!(
            "{} {:?}",
            orphans.len(),
            orphans.iter().take(3).collect::<Vec<_>>()
        ),
        ok: orphans.is_empty(),
    });
    let in_radius: BTreeSet<String> = system
        .radius()
        .resource_ids()
        .iter()
        .map(|i| i.to_ascii_lowercase())
        .collect();
    let unaccounted: Vec<_> = in_radius.difference(&expected_ids).collect();
    rows.push(Row {
        name: "Radius resources no live template accounts for",
        value: format!(
            "{} {:?}",
            unaccounted.len(),
            unaccounted.iter().take(3).collect::<Vec<_>>()
        ),
        ok: unaccounted.is_empty(),
    });
    let logs = system.all_logs();
    for id in &unaccounted {
        let stem = id.rsplit('/').next().unwrap_or_default();
        let namespace = NAMESPACES
            .iter()
            .find(|ns| stem.starts_with(&format!("{ns}-")))
            .copied()
            .unwrap_or_default();
        let name = stem
            .strip_prefix(&format!("{namespace}-"))
            .and_then(|rest| rest.split('-').next())
            .unwrap_or_default();
        let owner = templates.iter().find(|t| {
            t.metadata.namespace.as_deref() == Some(namespace)
                && t.metadata.name.as_deref() == Some(name)
        });
        eprintln!(
            "churn: unaccounted {id}: template {namespace}/{name} {}; DELETEs of it {}; in Radius {}; status {}",
            if owner.is_some() { "live" } else { "gone" },
            system.radius().stats().deletes_for(id),
            system
                .radius()
                .resource(id)
                .and_then(|r| r.get("systemData").cloned())
                .unwrap_or_default(),
            serde_json::to_string(&owner.map(|t| &t.status)).unwrap_or_default()
        );
        let key = format!("delete:{id}");
        for (i, (_, counts)) in samples.iter().enumerate().skip(1) {
            let before = samples[i - 1].1.get(&key).copied().unwrap_or(0);
            let now = counts.get(&key).copied().unwrap_or(0);
            if now > before {
                eprintln!("    DELETE between {} and {}", walls[i - 1], walls[i]);
            }
        }
        let mut last_line = String::new();
        for s in seen
            .iter()
            .filter(|s| s.key == format!("{namespace}/{name}"))
        {
            let line = format!(
                "uid {} gen {} observed {} phase {} deleting {} finalizers {:?} outputs {:?}",
                &s.uid[..8.min(s.uid.len())],
                s.generation,
                s.observed,
                s.phase,
                s.deleting,
                s.finalizers,
                s.outputs
                    .iter()
                    .map(|o| o.rsplit('/').next().unwrap_or_default())
                    .collect::<Vec<_>>()
            );
            if line != last_line {
                eprintln!("    {} watch: {line}", s.at);
                last_line = line;
            }
        }
        let lines: Vec<&str> = logs
            .lines()
            .filter(|l| {
                l.to_ascii_lowercase().contains(stem)
                    || l.contains(&format!("{namespace}/{name}"))
                    || l.contains(&format!("name={name}"))
            })
            .collect();
        for line in lines.iter().rev().take(25).rev() {
            eprintln!("    {}", line.chars().take(400).collect::<String>());
        }
    }
    if !unaccounted.is_empty() {
        let path = std::env::temp_dir().join(format!("radwasm-churn-{seed}.log"));
        if std::fs::write(&path, &logs).is_ok() {
            eprintln!("churn: the whole controller log: {}", path.display());
        }
    }
    let missing: Vec<_> = expected_ids.difference(&in_radius).collect();
    rows.push(Row {
        name: "live templates' outputs missing in Radius",
        value: format!(
            "{} {:?}",
            missing.len(),
            missing.iter().take(3).collect::<Vec<_>>()
        ),
        ok: missing.is_empty(),
    });

    // Deployment PUTs per spec: every spec has a name of its own.
    let stats = system.radius().stats();
    let distinct = stats.deployment_puts_by_name.len() as u64;
    let excess: u64 = stats
        .deployment_puts_by_name
        .values()
        .map(|n| n.saturating_sub(1))
        .sum();
    let max_per_spec = stats
        .deployment_puts_by_name
        .values()
        .copied()
        .max()
        .unwrap_or(0);
    // A spec is legitimately sent again after its deployment failed or its
    // operation vanished, or when a kill came between the PUT and the status
    // write recording its operation (at most one per template per kill).
    let allowed = stats.faults.failed_deployments
        + stats.faults.vanished_operations
        + (plan.kills * plan.templates) as u64;
    rows.push(Row {
        name: "deployment PUTs per spec (total/specs/max; repeats <= failed+vanished+kills*templates)",
        value: format!(
            "{}/{distinct}/{max_per_spec}; repeats {excess} <= {} + {} + {}",
            stats.deployment_puts,
            stats.faults.failed_deployments,
            stats.faults.vanished_operations,
            plan.kills * plan.templates
        ),
        ok: excess <= allowed,
    });

    // From the watch: Ready only at a generation whose spec was deployed;
    // Failed only for this generation's own failure.
    let mut hash_at: HashMap<(String, i64), String> = HashMap::new();
    for s in &seen {
        hash_at.insert((s.uid.clone(), s.generation), s.spec_hash.clone());
    }
    let mut wrong_ready = Vec::new();
    let mut wrong_failed = Vec::new();
    let mut unknown = 0;
    for s in &seen {
        let Some(expected) = hash_at.get(&(s.uid.clone(), s.observed)) else {
            if s.phase == "Ready" || s.phase == "Failed" {
                unknown += 1;
            }
            continue;
        };
        if (s.phase == "Ready" || s.ready == "True") && &s.status_hash != expected {
            wrong_ready.push(s.clone());
        }
        if s.phase == "Failed"
            && let Some(subject) = &s.failure_subject
            && !subject.is_empty()
            && subject != expected
        {
            wrong_failed.push(s.clone());
        }
    }
    rows.push(Row {
        name: "watch: Ready at a generation whose spec was not deployed",
        value: format!(
            "{} of {} statuses ({unknown} at a generation the watch never saw) {:?}",
            wrong_ready.len(),
            seen.len(),
            wrong_ready.first()
        ),
        ok: wrong_ready.is_empty(),
    });
    rows.push(Row {
        name: "watch: Failed carried over from another generation",
        value: format!("{} {:?}", wrong_failed.len(), wrong_failed.first()),
        ok: wrong_failed.is_empty(),
    });

    // Largest number of mutations one object received within ~10 s
    // (sampled about every second: pairs of samples at most 10 s apart).
    let mut worst = (0u64, String::new());
    for (i, (at_i, counts_i)) in samples.iter().enumerate() {
        for (at_j, counts_j) in samples[i + 1..].iter() {
            if at_j.duration_since(*at_i) > Duration::from_secs(10) {
                break;
            }
            for (key, n) in counts_j {
                let delta = n - counts_i.get(key).copied().unwrap_or(0);
                if delta > worst.0 {
                    worst = (delta, key.clone());
                }
            }
        }
    }
    rows.push(Row {
        name: "most Radius mutations of one object in 10 s (sampled 1 s)",
        value: format!("{} ({}) <= {MAX_MUTATIONS_PER_10S}", worst.0, worst.1),
        ok: worst.0 <= MAX_MUTATIONS_PER_10S,
    });
    let panics: Vec<&str> = logs.lines().filter(|l| l.contains("panicked")).collect();
    rows.push(Row {
        name: "`panicked` in the controller log",
        value: format!("{} {:?}", panics.len(), panics.first()),
        ok: panics.is_empty(),
    });
    rows.push(Row {
        name: "faults fired (Radius)",
        value: format!("{:?}", stats.faults),
        ok: true,
    });
    rows.push(Row {
        name: "churn",
        value: format!("{steps} steps in {churn_took:.1?}: {counts:?}"),
        ok: true,
    });

    eprintln!("\nchurn: seed {seed}, run time {:.1?}", started.elapsed());
    eprintln!("| invariant | value | |\n| --- | --- | --- |");
    for row in &rows {
        eprintln!(
            "| {} | {} | {} |",
            row.name,
            row.value,
            if row.ok { "ok" } else { "FAIL" }
        );
    }
    let failed: Vec<&str> = rows.iter().filter(|r| !r.ok).map(|r| r.name).collect();
    if !failed.is_empty() {
        let not_ready: Vec<String> = templates
            .iter()
            .filter(|t| {
                t.status.as_ref().and_then(|s| s.phrase.as_deref()) != Some("Ready")
                    || t.metadata.deletion_timestamp.is_some()
            })
            .take(5)
            .map(|t| {
                let uid = t.metadata.uid.clone().unwrap_or_default();
                let theirs: Vec<String> = resources
                    .iter()
                    .filter(|r| {
                        r.metadata.namespace == t.metadata.namespace
                            && r.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|o| o.uid == uid)
                    })
                    .map(|r| {
                        format!(
                            "{} deleting {} finalizers {:?} status {}",
                            r.metadata.name.clone().unwrap_or_default(),
                            r.metadata.deletion_timestamp.is_some(),
                            r.metadata.finalizers,
                            serde_json::to_string(&r.status).unwrap_or_default()
                        )
                    })
                    .collect();
                format!(
                    "{}/{} resources {theirs:#?} gen {:?} deleting {} status {}",
                    t.metadata.namespace.clone().unwrap_or_default(),
                    t.metadata.name.clone().unwrap_or_default(),
                    t.metadata.generation,
                    t.metadata.deletion_timestamp.is_some(),
                    serde_json::to_string(&t.status).unwrap_or_default()
                )
            })
            .collect();
        // What the controller said of each template not Ready, and the whole
        // log in a file, to find out why.
        let logs = system.all_logs();
        let decisions = system.scrape("/debug/decisions").await;
        let mut about = String::new();
        for t in templates.iter().filter(|t| {
            !t.status.as_ref().is_some_and(|s| {
                s.phrase.as_deref() == Some("Ready")
                    && s.observed_generation == t.metadata.generation
            })
        }) {
            let key = format!(
                "{}/{}",
                t.metadata.namespace.clone().unwrap_or_default(),
                t.metadata.name.clone().unwrap_or_default()
            );
            let lines: Vec<&str> = logs.lines().filter(|l| l.contains(&key)).collect();
            about.push_str(&last_decisions(&decisions, &key));
            // And of each child it still owns: a child left being deleted
            // is what a template waiting for cleanup waits on.
            let uid = t.metadata.uid.clone().unwrap_or_default();
            for child in resources.iter().filter(|r| {
                r.metadata.namespace == t.metadata.namespace
                    && r.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid)
            }) {
                let child = format!(
                    "{}/{}",
                    child.metadata.namespace.clone().unwrap_or_default(),
                    child.metadata.name.clone().unwrap_or_default()
                );
                about.push_str(&last_decisions(&decisions, &child));
            }
            about.push_str(&format!(
                "--- the controller's last lines about {key} ---\n"
            ));
            for line in lines.iter().rev().take(30).rev() {
                about.push_str(&line.chars().take(400).collect::<String>());
                about.push('\n');
            }
        }
        let path = std::env::temp_dir().join(format!("radwasm-churn-{seed}.log"));
        let _ = std::fs::write(&path, &logs);
        panic!(
            "seed {seed}: invariants failed: {failed:?}\nnot ready: {not_ready:#?}\n{about}--- controller log (tail; all of it in {}) ---\n{}",
            path.display(),
            system.logs()
        );
    }
    system.shutdown().await;
}

/// The last two decision records (of `/debug/decisions`) about the object
/// `namespace/name`, under a heading.
fn last_decisions(decisions: &str, key: &str) -> String {
    let object = format!("\"object\":\"{key}\"");
    let decided: Vec<&str> = decisions.lines().filter(|l| l.contains(&object)).collect();
    let mut text = format!("--- the last decisions about {key} ---\n");
    for line in decided.iter().rev().take(2).rev() {
        text.push_str(line);
        text.push('\n');
    }
    text
}
