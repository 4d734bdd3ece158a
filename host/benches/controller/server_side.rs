//! The real API server's side of a `scale` phase: what kube-apiserver
//! counted in its own `/metrics` (requests by verb, resource and
//! subresource, with the time it spent serving them; watch events sent, by
//! resource, with their bytes), each control-plane process's peak RSS, and,
//! with `--apiserver-profile DIR`, CPU profiles of kube-apiserver taken
//! back to back through the phase (read them with
//! `go tool pprof -top DIR/create-*.pb.gz`).
//!
//! Everything here reads kube-apiserver through the admin client on
//! loopback; none of it applies to the embedded API server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use futures::AsyncReadExt as _;
use kube::Client;

/// One scrape of kube-apiserver's `/metrics`, kept as text.
pub struct Scrape(String);

impl Scrape {
    pub async fn take(client: &Client) -> anyhow::Result<Self> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = client
            .request_text(request)
            .await
            .context("reading kube-apiserver's /metrics")?;
        Ok(Self(text))
    }
}

/// One sample of a Prometheus text line: its family name, labels, value.
fn sample(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut map = BTreeMap::new();
    // Label values here hold no `",` sequence, so splitting on it is exact.
    for pair in labels.split("\",").filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once("=\"")?;
        map.insert(key, value.trim_end_matches('"'));
    }
    Some((name, map, value))
}

/// Sum `family`'s samples of one scrape by the key `key` makes of each
/// sample's labels (samples it returns `None` for are left out).
fn sums(
    scrape: &Scrape,
    family: &str,
    key: impl Fn(&BTreeMap<&str, &str>) -> Option<String>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, labels, value) in scrape.0.lines().filter_map(sample) {
        if name == family
            && let Some(key) = key(&labels)
        {
            *out.entry(key).or_insert(0.0) += value;
        }
    }
    out
}

/// The increase of each key between two scrapes.
fn increase(before: &BTreeMap<String, f64>, after: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .into_iter()
        .map(|(key, value)| {
            let grown = value - before.get(&key).copied().unwrap_or(0.0);
            (key, grown)
        })
        .filter(|(_, grown)| *grown > 0.5e-9)
        .collect()
}

/// `VERB resource[/subresource]`, the way the tables show a request.
fn request_key(labels: &BTreeMap<&str, &str>) -> Option<String> {
    let resource = labels.get("resource").copied().unwrap_or("");
    if resource.is_empty() {
        return None;
    }
    let verb = labels.get("verb").copied().unwrap_or("?");
    Some(match labels.get("subresource").copied().unwrap_or("") {
        "" => format!("{verb} {resource}"),
        sub => format!("{verb} {resource}/{sub}"),
    })
}

/// Watch events are labelled by `resource` (or `kind` in older servers).
fn watch_key(labels: &BTreeMap<&str, &str>) -> Option<String> {
    labels
        .get("resource")
        .or_else(|| labels.get("kind"))
        .map(|r| r.to_string())
}

/// etcd requests kube-apiserver sent, as `operation resource` (`get
/// deploymenttemplates.radapp.io`): a write that met a stale cached object
/// reads the current one from etcd and applies again. (Older servers label
/// the resource `type`.)
fn etcd_key(labels: &BTreeMap<&str, &str>) -> Option<String> {
    let resource = labels.get("resource").or_else(|| labels.get("type"))?;
    Some(format!("{} {resource}", labels.get("operation")?))
}

/// What kube-apiserver served between two scrapes.
pub struct ServerLoad {
    /// `operation resource` → etcd requests.
    etcd: BTreeMap<String, f64>,
    /// `VERB resource[/sub]` → (requests, seconds spent serving them).
    requests: BTreeMap<String, (f64, f64)>,
    /// resource → (watch events sent, their bytes).
    watch_events: BTreeMap<String, (f64, f64)>,
}

impl ServerLoad {
    pub fn between(before: &Scrape, after: &Scrape) -> Self {
        let grown = |family: &str, key: fn(&BTreeMap<&str, &str>) -> Option<String>| {
            increase(&sums(before, family, key), sums(after, family, key))
        };
        let counts = grown("apiserver_request_total", request_key);
        let seconds = grown("apiserver_request_duration_seconds_sum", request_key);
        // Long-running requests (WATCH) are counted but not timed.
        let requests = counts
            .into_iter()
            .filter(|(key, _)| !key.starts_with("WATCH "))
            .map(|(key, n)| {
                let spent = seconds.get(&key).copied().unwrap_or(0.0);
                (key, (n, spent))
            })
            .collect();
        let events = grown("apiserver_watch_events_total", watch_key);
        let bytes = grown("apiserver_watch_events_sizes_sum", watch_key);
        let watch_events = events
            .into_iter()
            .map(|(key, n)| {
                let size = bytes.get(&key).copied().unwrap_or(0.0);
                (key, (n, size))
            })
            .collect();
        Self {
            etcd: grown("etcd_requests_total", etcd_key),
            requests,
            watch_events,
        }
    }

    /// Requests by verb, resource and subresource, and watch events by
    /// resource, per template; largest first.
    pub fn print_per(&self, phase: &str, templates: usize) {
        let per = |n: f64| n / templates as f64;
        let mut requests: Vec<_> = self.requests.iter().collect();
        requests.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        let total: (f64, f64) = requests
            .iter()
            .fold((0.0, 0.0), |sum, (_, (n, s))| (sum.0 + n, sum.1 + s));
        println!(
            "kube-apiserver, {phase} (its /metrics; every client, this benchmark's creates, deletes and watches included):"
        );
        println!("| request | total | per template | serving time per template |");
        println!("| --- | --- | --- | --- |");
        for (key, (n, seconds)) in requests {
            println!(
                "| {key} | {n:.0} | {:.2} | {:.2} ms |",
                per(*n),
                1000.0 * per(*seconds)
            );
        }
        println!(
            "| **all** | {:.0} | {:.2} | {:.2} ms |",
            total.0,
            per(total.0),
            1000.0 * per(total.1)
        );
        println!("| watch events sent | total | per template | KiB per template |");
        println!("| --- | --- | --- | --- |");
        // Rows under one in a hundred templates are the cluster's own.
        let shown = |n: f64| per(n) >= 0.01;
        for (resource, (n, bytes)) in self.watch_events.iter().filter(|(_, (n, _))| shown(*n)) {
            println!(
                "| {resource} | {n:.0} | {:.2} | {:.1} |",
                per(*n),
                per(*bytes) / 1024.0
            );
        }
        println!("| etcd requests from kube-apiserver | total | per template |");
        println!("| --- | --- | --- |");
        for (key, n) in self.etcd.iter().filter(|(_, n)| shown(**n)) {
            println!("| {key} | {n:.0} | {:.2} |", per(*n));
        }
    }
}

/// Each control-plane process's peak RSS (`VmHWM`) so far, in MiB.
pub fn peak_rss(pids: &[u32]) -> Vec<(String, f64)> {
    pids.iter()
        .filter_map(|pid| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let kib = super::proc_status_kib(*pid, "VmHWM:")?;
            Some((name.trim().to_string(), kib as f64 / 1024.0))
        })
        .collect()
}

pub fn format_mib(parts: &[(String, f64)]) -> String {
    parts
        .iter()
        .map(|(name, mib)| format!("{name} {mib:.0} MiB"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The server's side of one phase, from its start: the scrape it began
/// with and the profiler, if profiles were asked for.
pub struct Phase {
    client: Client,
    name: String,
    before: Scrape,
    profiler: Option<Profiler>,
    profiles: Option<PathBuf>,
    memory: MemoryWatch,
}

impl Phase {
    /// `apiserver` is kube-apiserver's process id, for its memory.
    pub async fn start(
        client: &Client,
        apiserver: u32,
        profiles: Option<&Path>,
        name: &str,
    ) -> anyhow::Result<Self> {
        let profiler = profiles
            .map(|dir| Profiler::start(client, dir, name))
            .transpose()?;
        Ok(Self {
            client: client.clone(),
            name: name.to_string(),
            before: Scrape::take(client).await?,
            profiler,
            profiles: profiles.map(Path::to_path_buf),
            memory: MemoryWatch::start(client, apiserver, profiles, name),
        })
    }

    /// What the server served since the start; prints where the profiles
    /// went and how to read them.
    pub async fn finish(self) -> anyhow::Result<ServerLoad> {
        let after = Scrape::take(&self.client).await?;
        let load = ServerLoad::between(&self.before, &after);
        let peak = self.memory.stop().await?;
        println!(
            "  kube-apiserver memory, {}: peak RSS {:.0} MiB at {:.1} s; then: {}",
            self.name,
            peak.rss_mib,
            peak.at.as_secs_f64(),
            peak.go.describe()
        );
        println!(
            "  kube-apiserver memory at the end of {}: {}",
            self.name,
            GoMemory::of(&after).describe()
        );
        if let Some(dir) = &self.profiles {
            let end = dir.join(format!("{}-heap-end.pb.gz", self.name));
            heap_profile(&self.client, &end).await?;
            println!(
                "  kube-apiserver heap profiles of {}: {} (at the peak), {} (at the end); read them with `go tool pprof -top -sample_index=inuse_space FILE` (or alloc_space)",
                self.name,
                peak.heap_profile
                    .as_deref()
                    .map_or("none".into(), |p| p.display().to_string()),
                end.display()
            );
        }
        if let Some(profiler) = self.profiler {
            let files = profiler.stop().await?;
            if let Some(first) = files.first() {
                println!(
                    "  kube-apiserver CPU profiles of {}: {} x 5 s; read them with `go tool pprof -top {}`",
                    self.name,
                    files.len(),
                    first
                        .with_file_name(format!("{}-*.pb.gz", self.name))
                        .display()
                );
            }
        }
        Ok(load)
    }
}

/// CPU profiles of kube-apiserver through one phase: 5-second profiles,
/// back to back, written as `DIR/<phase>-<n>.pb.gz` until [`stop`].
///
/// [`stop`]: Profiler::stop
pub struct Profiler {
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<PathBuf>>>,
}

impl Profiler {
    pub fn start(client: &Client, dir: &Path, phase: &str) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let running = Arc::new(AtomicBool::new(true));
        let (client, dir, phase) = (client.clone(), dir.to_path_buf(), phase.to_string());
        let still = running.clone();
        let task = tokio::spawn(async move {
            let mut written = Vec::new();
            while still.load(Ordering::Relaxed) {
                let request =
                    http::Request::get("/debug/pprof/profile?seconds=5").body(Vec::new())?;
                let mut body = Vec::new();
                client
                    .request_stream(request)
                    .await
                    .context("reading kube-apiserver's /debug/pprof/profile")?
                    .read_to_end(&mut body)
                    .await?;
                let path = dir.join(format!("{phase}-{:03}.pb.gz", written.len()));
                std::fs::write(&path, body)?;
                written.push(path);
            }
            Ok(written)
        });
        Ok(Self { running, task })
    }

    /// Stop after the profile being taken; the files written.
    pub async fn stop(self) -> anyhow::Result<Vec<PathBuf>> {
        self.running.store(false, Ordering::Relaxed);
        self.task.await?
    }
}

/// The Go runtime's view of kube-apiserver's memory in one `/metrics`
/// scrape (`go_memstats_*`), in MiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct GoMemory {
    /// Heap objects allocated and not yet freed: live ones and garbage the
    /// next collection frees.
    pub heap_alloc: f64,
    /// The heap size at which the next collection starts (with `GOGC=100`,
    /// twice the heap the last one left live).
    pub next_gc: f64,
    /// Heap spans in use, and idle spans not yet returned to the system.
    pub heap_inuse: f64,
    pub heap_idle_kept: f64,
    /// All memory the runtime holds from the system.
    pub sys: f64,
}

impl GoMemory {
    fn of(scrape: &Scrape) -> Self {
        let value = |family: &str| {
            scrape
                .0
                .lines()
                .filter_map(sample)
                .find(|(name, _, _)| *name == family)
                .map_or(0.0, |(_, _, v)| v / (1024.0 * 1024.0))
        };
        Self {
            heap_alloc: value("go_memstats_heap_alloc_bytes"),
            next_gc: value("go_memstats_next_gc_bytes"),
            heap_inuse: value("go_memstats_heap_inuse_bytes"),
            heap_idle_kept: value("go_memstats_heap_idle_bytes")
                - value("go_memstats_heap_released_bytes"),
            sys: value("go_memstats_sys_bytes"),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "Go heap allocated {:.0} MiB (live + not yet collected), next GC at {:.0} MiB, heap spans in use {:.0} MiB, idle kept {:.0} MiB, runtime total {:.0} MiB",
            self.heap_alloc, self.next_gc, self.heap_inuse, self.heap_idle_kept, self.sys
        )
    }
}

/// kube-apiserver's memory at its highest in a phase.
#[derive(Debug, Default)]
pub struct MemoryPeak {
    /// Its RSS at the highest reading, in MiB, and when (from the start).
    pub rss_mib: f64,
    pub at: std::time::Duration,
    /// The Go runtime's view, scraped as that high was read.
    pub go: GoMemory,
    /// Its heap profile then (with `--apiserver-profile`).
    pub heap_profile: Option<PathBuf>,
}

/// kube-apiserver's memory through one phase: its RSS read every 250 ms
/// and, at each new high 16 MiB or more above the last one taken, the Go
/// runtime's view from `/metrics` and, with `--apiserver-profile DIR`, a
/// heap profile (`DIR/<phase>-heap-peak.pb.gz`, replaced at each higher
/// one). The heap profile's `inuse_space` is what the last collection left
/// live; `alloc_space` all allocated since the server started.
pub struct MemoryWatch {
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<MemoryPeak>>,
}

/// A heap profile of kube-apiserver, written to `path`.
async fn heap_profile(client: &Client, path: &Path) -> anyhow::Result<()> {
    let request = http::Request::get("/debug/pprof/heap").body(Vec::new())?;
    let mut body = Vec::new();
    client
        .request_stream(request)
        .await
        .context("reading kube-apiserver's /debug/pprof/heap")?
        .read_to_end(&mut body)
        .await?;
    std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))
}

impl MemoryWatch {
    pub fn start(client: &Client, pid: u32, dir: Option<&Path>, phase: &str) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let still = running.clone();
        let (client, dir, phase) = (
            client.clone(),
            dir.map(Path::to_path_buf),
            phase.to_string(),
        );
        let task = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let mut peak = MemoryPeak::default();
            let mut taken = 0.0;
            while still.load(Ordering::Relaxed) {
                let rss = super::proc_status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
                if rss > peak.rss_mib {
                    peak.rss_mib = rss;
                    peak.at = started.elapsed();
                    if rss >= taken + 16.0 {
                        taken = rss;
                        peak.go = GoMemory::of(&Scrape::take(&client).await?);
                        if let Some(dir) = &dir {
                            let path = dir.join(format!("{phase}-heap-peak.pb.gz"));
                            heap_profile(&client, &path).await?;
                            peak.heap_profile = Some(path);
                        }
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Ok(peak)
        });
        Self { running, task }
    }

    pub async fn stop(self) -> anyhow::Result<MemoryPeak> {
        self.running.store(false, Ordering::Relaxed);
        self.task.await?
    }
}
