//! Benchmark of the embedded API server over real HTTP on loopback with the
//! kube-rs client: 10,000 custom objects created while 5 watchers follow,
//! full and paged list latency, write-to-watchers fan-out latency, and the
//! process's memory. Run with
//! `cargo bench -p radwasm-kube-apiserver --bench apiserver`; figures go to
//! docs/benchmarks.md. Every loop is bounded in count, and the whole run in
//! time.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use radwasm_sim_apiserver::{ApiServerConfig, start};
use serde_json::json;
use tokio::sync::mpsc;

const OBJECTS: usize = 10_000;
const WATCHERS: usize = 5;
const IN_FLIGHT: usize = 32;
const FAN_OUT_SAMPLES: usize = 500;
const LIST_RUNS: usize = 5;
/// The whole run must end within this.
const RUN_BOUND: Duration = Duration::from_secs(600);

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer"}, "color": {"type": "string"},
                        "template": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
    }))
    .expect("crd")
}

fn widget(i: usize) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "bench.example.com/v1", "kind": "Widget",
        "metadata": {"name": format!("w-{i:05}"), "labels": {"bench": "yes", "shard": (i % 10).to_string()}},
        "spec": {"size": i, "color": "blue", "template": "x".repeat(512)}}))
    .expect("widget")
}

/// What a watcher reports: (object name, spec.size, when it arrived).
type Seen = (String, i64, Instant);

async fn run() -> anyhow::Result<()> {
    let rss_start = rss_kib();
    let server = start(ApiServerConfig::default()).await?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let rss_empty = rss_kib();

    // Five watchers from the current version, each reporting what it sees.
    let start_rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(usize, Seen)>();
    let mut watchers = Vec::new();
    for id in 0..WATCHERS {
        let api = api.clone();
        let tx = seen_tx.clone();
        let rv = start_rv.clone();
        watchers.push(tokio::spawn(async move {
            let params = WatchParams::default().timeout(290);
            let mut stream = api.watch(&params, &rv).await?.boxed();
            while let Some(event) = stream.try_next().await? {
                let object = match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
                    _ => continue,
                };
                let name = object.metadata.name.clone().unwrap_or_default();
                let size = object.data["spec"]["size"].as_i64().unwrap_or(-1);
                if tx.send((id, (name, size, Instant::now()))).is_err() {
                    break;
                }
            }
            anyhow::Ok(())
        }));
    }
    drop(seen_tx);

    // 1. Create 10,000 objects, IN_FLIGHT at a time.
    let created_at = Instant::now();
    let creates = futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &widget(i))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>();
    creates.await?;
    let create_time = created_at.elapsed();
    let rss_created = rss_kib();

    // All five watchers must see all 10,000 ADDED events.
    let mut added = [0usize; WATCHERS];
    let mut all_seen = None;
    while added.iter().any(|n| *n < OBJECTS) {
        let Some((id, _)) = tokio::time::timeout(Duration::from_secs(60), seen_rx.recv()).await?
        else {
            anyhow::bail!("a watcher ended early");
        };
        added[id] += 1;
        if added.iter().all(|n| *n >= OBJECTS) {
            all_seen = Some(created_at.elapsed());
        }
    }
    let fan_out_all = all_seen.unwrap_or_default();

    // 2. List latency: all 10,000 at once, and paged by 500.
    let mut full = Vec::new();
    let mut paged = Vec::new();
    for _ in 0..LIST_RUNS {
        let at = Instant::now();
        let list = api.list(&ListParams::default()).await?;
        full.push(at.elapsed());
        anyhow::ensure!(list.items.len() == OBJECTS, "listed {}", list.items.len());

        let at = Instant::now();
        let mut count = 0;
        let mut token: Option<String> = None;
        for _ in 0..(OBJECTS / 500 + 2) {
            let mut params = ListParams::default().limit(500);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = api.list(&params).await?;
            count += page.items.len();
            token = page.metadata.continue_.clone();
            if token.is_none() {
                break;
            }
        }
        paged.push(at.elapsed());
        anyhow::ensure!(count == OBJECTS, "paged {count}");
    }
    full.sort();
    paged.sort();
    // The same list as raw HTTP, without kube-rs decoding 10,000 objects.
    let mut raw = Vec::new();
    for _ in 0..LIST_RUNS {
        let request = http::Request::get("/apis/bench.example.com/v1/namespaces/default/widgets")
            .body(Vec::new())?;
        let at = Instant::now();
        let text = client.request_text(request).await?;
        raw.push(at.elapsed());
        anyhow::ensure!(text.len() > OBJECTS * 500, "short list body");
    }
    raw.sort();
    let at = Instant::now();
    let selected = api.list(&ListParams::default().labels("shard=3")).await?;
    let selector_time = at.elapsed();
    anyhow::ensure!(selected.items.len() == OBJECTS / 10);

    // 3. Fan-out latency: one write, until all five watchers saw it.
    let mut latencies = Vec::new();
    for sample in 0..FAN_OUT_SAMPLES {
        let name = format!("w-{:05}", sample * (OBJECTS / FAN_OUT_SAMPLES));
        let size = (OBJECTS + sample) as i64;
        let at = Instant::now();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": size}})),
        )
        .await?;
        let mut got = 0;
        let mut last = at;
        while got < WATCHERS {
            let Some((_, (seen_name, seen_size, when))) =
                tokio::time::timeout(Duration::from_secs(30), seen_rx.recv()).await?
            else {
                anyhow::bail!("a watcher ended early");
            };
            if seen_name == name && seen_size == size {
                got += 1;
                last = last.max(when);
            }
        }
        latencies.push(last - at);
    }
    latencies.sort();
    let rss_end = rss_kib();

    for watcher in &watchers {
        watcher.abort();
    }
    server.shutdown().await;

    println!(
        "## embedded API server, {OBJECTS} custom objects (~0.8 KB each), {WATCHERS} watchers"
    );
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| create {OBJECTS} ({IN_FLIGHT} in flight, {WATCHERS} watchers attached) | {:.2} s, {:.0} objects/s |",
        create_time.as_secs_f64(),
        OBJECTS as f64 / create_time.as_secs_f64()
    );
    println!(
        "| all {WATCHERS} watchers received all {OBJECTS} ADDED (from first create) | {:.2} s |",
        fan_out_all.as_secs_f64()
    );
    println!(
        "| list all {OBJECTS}, p50 / max of {LIST_RUNS} | {} / {} |",
        ms(percentile(&full, 0.5)),
        ms(percentile(&full, 1.0))
    );
    println!(
        "| list all {OBJECTS} as raw HTTP (no client decoding), p50 / max of {LIST_RUNS} | {} / {} |",
        ms(percentile(&raw, 0.5)),
        ms(percentile(&raw, 1.0))
    );
    println!(
        "| list all paged by 500 ({} requests), p50 / max of {LIST_RUNS} | {} / {} |",
        OBJECTS / 500,
        ms(percentile(&paged, 0.5)),
        ms(percentile(&paged, 1.0))
    );
    println!(
        "| list with label selector (1,000 of {OBJECTS}) | {} |",
        ms(selector_time)
    );
    println!(
        "| write until all {WATCHERS} watchers saw it, p50 / p99 ({FAN_OUT_SAMPLES} writes) | {} / {} |",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99))
    );
    println!(
        "| RSS: start / server+CRD / after creates / end | {} / {} / {} / {} MiB |",
        rss_start / 1024,
        rss_empty / 1024,
        rss_created / 1024,
        rss_end / 1024
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        tokio::time::timeout(RUN_BOUND, run())
            .await
            .map_err(|_| anyhow::anyhow!("the benchmark did not finish in {RUN_BOUND:?}"))?
    })
}
