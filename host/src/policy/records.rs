//! Decision records: one JSON line per policy decision, with the exact
//! observation the policy saw and what it answered, so a surprising decision
//! in production can be replayed against another policy build
//! (`radwasm policy replay`) or turned into a fixture case
//! (`radwasm policy record-to-case`). The format is in
//! `docs/decision-records.md`.
//!
//! [`Recorder::record`] is called on the reconcile path and never waits for
//! the disk: it hands the record to a bounded queue drained by one background
//! thread, which serialises it, keeps the last N lines in memory (served on
//! `/debug/decisions`) and appends it to size-rotated files. When the queue
//! is full the record is dropped and counted.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use radwasm_policy_model as model;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Decision, DecisionError, LoadedPolicy};

/// Records waiting for the writer thread; past this, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 1024;
/// File names of the record directory: `decisions-<UTC time>-<sequence>.jsonl`.
pub const FILE_PREFIX: &str = "decisions-";
/// Extension of record files.
pub const FILE_EXTENSION: &str = "jsonl";

/// The object kind a decision was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordKind {
    DeploymentTemplate,
    DeploymentResource,
}

impl RecordKind {
    /// The kind as Kubernetes names it.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::DeploymentTemplate => "DeploymentTemplate",
            RecordKind::DeploymentResource => "DeploymentResource",
        }
    }
}

/// Whether the decision was carried out (`enforce`) or only computed to
/// compare with the enforced one (`shadow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    Enforce,
    Shadow,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Enforce => "enforce",
            Role::Shadow => "shadow",
        }
    }
}

/// How the decision ended: a plan (`ok`) or no plan (`error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Ok,
    Error,
}

/// The policy build that decided, as in the objects' `status.policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyIdentity {
    pub name: String,
    #[serde(default)]
    pub version: String,
    /// SHA-256 of the component bytes, hex.
    #[serde(default)]
    pub digest: String,
}

impl PolicyIdentity {
    pub fn of(policy: &LoadedPolicy) -> Self {
        Self {
            name: policy.description().name.clone(),
            version: policy.description().version.clone(),
            digest: policy.digest().to_string(),
        }
    }

    /// `name@version`, as shown in status and logs.
    pub fn display_name(&self) -> String {
        if self.version.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.version)
        }
    }
}

/// Why a decision gave no plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedError {
    /// `DecisionError::reason()`: `PolicyError` when the policy refused to
    /// decide; `Trap`, `OutOfFuel`, `MemoryLimit`, `Instantiate` or
    /// `KindNotSupported` when the sandbox stopped it.
    pub reason: String,
    /// The policy's error code (`PolicyError` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The policy's message (`PolicyError`), or the whole error text.
    pub message: String,
}

impl From<&DecisionError> for RecordedError {
    fn from(error: &DecisionError) -> Self {
        match error {
            DecisionError::Policy { error, .. } => Self {
                reason: "PolicyError".to_string(),
                code: Some(error.code.clone()),
                message: error.message.clone(),
            },
            other => Self {
                reason: other.reason().to_string(),
                code: None,
                message: other.to_string(),
            },
        }
    }
}

impl RecordedError {
    /// True when the policy itself refused to decide (as opposed to the
    /// sandbox stopping it).
    pub fn is_policy_error(&self) -> bool {
        self.reason == "PolicyError"
    }

    /// One line: `PolicyError Invalid: message` or `OutOfFuel: message`.
    pub fn summary(&self) -> String {
        match &self.code {
            Some(code) => format!("{} {code}: {}", self.reason, self.message),
            None => format!("{}: {}", self.reason, self.message),
        }
    }
}

/// One policy decision: what was observed and what the policy answered.
/// Written as one JSON line, camelCase; `plan` and `error` are exclusive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// When the decision finished (RFC 3339, UTC).
    pub at: DateTime<Utc>,
    pub kind: RecordKind,
    /// `namespace/name`.
    pub object: String,
    pub policy: PolicyIdentity,
    pub role: Role,
    /// The observation exactly as `radwasm policy run -o` and fixture cases
    /// take it: `{"deploymentTemplate": {...}}` or `{"deploymentResource": {...}}`.
    pub observation: model::Observation,
    /// The plan's actions, as a fixture case's `expect.actions` writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    /// For a layer that decided: the plan of every policy below it, bottom
    /// first (the built-in default, or its `ReconcilePolicy` base, first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below: Vec<RecordedLayer>,
    /// Time to instantiate the guest and decide, in microseconds.
    pub duration_us: u64,
    /// Fuel the decision used (0 when it failed before reporting any).
    pub fuel: u64,
    pub outcome: Outcome,
}

/// The plan one policy under a layer decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedLayer {
    /// `name@version` of that policy.
    pub policy: String,
    /// Its plan's actions, as in `plan`.
    pub plan: Vec<Value>,
}

/// An observation a record can be made of.
pub trait RecordedObservation {
    fn record_kind(&self) -> RecordKind;
    /// `namespace/name` of the object observed.
    fn object(&self) -> String;
    /// The tagged observation, as fixture files write it.
    fn to_observation(&self) -> model::Observation;
}

fn object_name(meta: &model::ObjectMeta) -> String {
    format!("{}/{}", meta.namespace, meta.name)
}

impl RecordedObservation for model::TemplateObservation {
    fn record_kind(&self) -> RecordKind {
        RecordKind::DeploymentTemplate
    }
    fn object(&self) -> String {
        object_name(&self.meta)
    }
    fn to_observation(&self) -> model::Observation {
        model::Observation::DeploymentTemplate(self.clone())
    }
}

impl RecordedObservation for model::ResourceObservation {
    fn record_kind(&self) -> RecordKind {
        RecordKind::DeploymentResource
    }
    fn object(&self) -> String {
        object_name(&self.meta)
    }
    fn to_observation(&self) -> model::Observation {
        model::Observation::DeploymentResource(self.clone())
    }
}

impl RecordedObservation for model::Observation {
    fn record_kind(&self) -> RecordKind {
        match self {
            model::Observation::DeploymentTemplate(_) => RecordKind::DeploymentTemplate,
            model::Observation::DeploymentResource(_) => RecordKind::DeploymentResource,
        }
    }
    fn object(&self) -> String {
        match self {
            model::Observation::DeploymentTemplate(o) => o.object(),
            model::Observation::DeploymentResource(o) => o.object(),
        }
    }
    fn to_observation(&self) -> model::Observation {
        self.clone()
    }
}

/// A plan (or a plan's action list) a record can be made of.
pub trait RecordedPlan {
    /// The actions as a fixture case's `expect.actions` writes them.
    fn actions_json(&self) -> Vec<Value>;
}

impl<A: Serialize> RecordedPlan for Vec<A> {
    fn actions_json(&self) -> Vec<Value> {
        self.iter()
            .map(|action| serde_json::to_value(action).unwrap_or(Value::Null))
            .collect()
    }
}

impl RecordedPlan for model::TemplatePlan {
    fn actions_json(&self) -> Vec<Value> {
        self.actions.actions_json()
    }
}

impl RecordedPlan for model::ResourcePlan {
    fn actions_json(&self) -> Vec<Value> {
        self.actions.actions_json()
    }
}

impl RecordedPlan for model::Plan {
    fn actions_json(&self) -> Vec<Value> {
        match self {
            model::Plan::DeploymentTemplate(plan) => plan.actions_json(),
            model::Plan::DeploymentResource(plan) => plan.actions_json(),
        }
    }
}

/// The name of an action's kind: `"addFinalizer"` for `"addFinalizer"`,
/// `"setStatus"` for `{"setStatus": {...}}`.
pub fn action_kind(action: &Value) -> String {
    match action {
        Value::String(name) => name.clone(),
        Value::Object(map) if map.len() == 1 => map.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

impl DecisionRecord {
    /// A record of one decision that just finished, timestamped now.
    /// `took` is the time the decision took.
    pub fn new<O, P>(
        policy: &LoadedPolicy,
        role: Role,
        observation: &O,
        result: &Result<Decision<P>, DecisionError>,
        took: Duration,
    ) -> Self
    where
        O: RecordedObservation + ?Sized,
        P: RecordedPlan,
    {
        let below = match result {
            Ok(decision) => decision
                .below
                .iter()
                .map(|layer| RecordedLayer {
                    policy: layer.policy.clone(),
                    plan: layer.plan.actions_json(),
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let (plan, error, fuel, outcome) = match result {
            Ok(decision) => (
                Some(decision.plan.actions_json()),
                None,
                decision.fuel_used,
                Outcome::Ok,
            ),
            Err(error) => {
                let fuel = match error {
                    DecisionError::OutOfFuel { fuel, .. } => *fuel,
                    _ => 0,
                };
                (None, Some(RecordedError::from(error)), fuel, Outcome::Error)
            }
        };
        Self {
            at: Utc::now(),
            kind: observation.record_kind(),
            object: observation.object(),
            policy: PolicyIdentity::of(policy),
            role,
            observation: observation.to_observation(),
            plan,
            error,
            below,
            duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            fuel,
            outcome,
        }
    }

    /// Parse one line of a record file and check it is consistent (`kind`
    /// matches the observation, `outcome` matches `plan`/`error`).
    pub fn from_json_line(line: &str) -> Result<Self, String> {
        let record: DecisionRecord = serde_json::from_str(line)
            .map_err(|error| format!("not a decision record: {error}"))?;
        let observed = record.observation.record_kind();
        if observed != record.kind {
            return Err(format!(
                "kind is {} but the observation is a {}",
                record.kind.as_str(),
                observed.as_str()
            ));
        }
        match (record.outcome, &record.plan, &record.error) {
            (Outcome::Ok, Some(_), None) | (Outcome::Error, None, Some(_)) => Ok(record),
            (Outcome::Ok, _, _) => {
                Err("outcome is ok but the record has no plan, or an error too".into())
            }
            (Outcome::Error, _, _) => {
                Err("outcome is error but the record has no error, or a plan too".into())
            }
        }
    }

    /// The record as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        // Serialising these types cannot fail: every map key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What the policy answered: its actions, or why it gave none.
    pub fn answer(&self) -> Result<&[Value], &RecordedError> {
        match (&self.plan, &self.error) {
            (_, Some(error)) => Err(error),
            (Some(plan), None) => Ok(plan),
            (None, None) => Ok(&[]),
        }
    }
}

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

/// A byte size: a number with an optional `B`, `KiB`, `MiB` or `GiB`
/// suffix (`K`, `M`, `G` accepted too).
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

/// Labels of dropped records: why (`queue_full`: the writer was behind;
/// `write_error`: a file write failed or the writer had stopped).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub reason: &'static str,
}

/// The recorder's counters, registered by `Metrics::with_decision_records`.
#[derive(Clone, Debug, Default)]
pub struct RecordCounters {
    /// Records the writer stored (in the ring and/or the files).
    pub written: Counter,
    /// Records lost, by reason.
    pub dropped: Family<DropLabels, Counter>,
}

const QUEUE_FULL: DropLabels = DropLabels {
    reason: "queue_full",
};
const WRITE_ERROR: DropLabels = DropLabels {
    reason: "write_error",
};

impl RecordCounters {
    fn new() -> Self {
        let counters = Self::default();
        // Both reasons exist from the start, at 0.
        let _ = counters.dropped.get_or_create(&QUEUE_FULL);
        let _ = counters.dropped.get_or_create(&WRITE_ERROR);
        counters
    }

    fn drop_one(&self, labels: &DropLabels) {
        self.dropped.get_or_create(labels).inc();
    }
}

/// Where decisions go: a bounded in-memory ring and/or a directory of
/// rotated JSON-lines files, written by one background thread. Cheap to
/// clone; the writer stops once every clone is dropped, after writing what
/// was queued.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
    queue: Option<SyncSender<Message>>,
}

struct Shared {
    counters: RecordCounters,
    ring: Option<Ring>,
    directory: Option<PathBuf>,
}

enum Message {
    Record(Box<DecisionRecord>),
    Flush(mpsc::Sender<()>),
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("enabled", &self.is_enabled())
            .field("directory", &self.shared.directory)
            .field("ring", &self.shared.ring.as_ref().map(|ring| ring.capacity))
            .finish()
    }
}

/// Settings of a recorder (what [`RecordArgs`] turns into).
#[derive(Debug, Clone)]
struct Settings {
    directory: Option<PathBuf>,
    max_file_bytes: u64,
    max_files: usize,
    ring: usize,
    queue: usize,
}

impl Recorder {
    /// A recorder that records nothing (`record` is a no-op).
    pub fn disabled() -> Self {
        Self {
            shared: Arc::new(Shared {
                counters: RecordCounters::new(),
                ring: None,
                directory: None,
            }),
            queue: None,
        }
    }

    /// The recorder the flags ask for: disabled when there is neither a
    /// directory nor a ring. Creates the directory and checks it is
    /// writable; starts the writer thread.
    pub fn from_args(args: &RecordArgs) -> anyhow::Result<Self> {
        Self::start(
            Settings {
                directory: args.decision_records_dir.clone(),
                max_file_bytes: args.decision_records_max_file_bytes.max(1),
                max_files: usize::try_from(args.decision_records_max_files.max(1))
                    .unwrap_or(usize::MAX),
                ring: args.decision_ring,
                queue: QUEUE_CAPACITY,
            },
            None,
        )
    }

    /// Start with explicit settings; the writer waits for `gate` (tests).
    fn start(settings: Settings, gate: Option<Receiver<()>>) -> anyhow::Result<Self> {
        if settings.directory.is_none() && settings.ring == 0 {
            return Ok(Self::disabled());
        }
        if let Some(directory) = &settings.directory {
            check_directory(directory)?;
        }
        let shared = Arc::new(Shared {
            counters: RecordCounters::new(),
            ring: (settings.ring > 0).then(|| Ring::new(settings.ring)),
            directory: settings.directory.clone(),
        });
        let (sender, receiver) = mpsc::sync_channel(settings.queue.max(1));
        let files = settings.directory.map(|directory| RotatingFiles {
            directory,
            max_file_bytes: settings.max_file_bytes,
            max_files: settings.max_files.max(1),
            current: None,
            sequence: 0,
        });
        let writer = Writer {
            shared: shared.clone(),
            files,
            last_error_logged: None,
        };
        std::thread::Builder::new()
            .name("decision-records".into())
            .spawn(move || {
                if let Some(gate) = gate {
                    let _ = gate.recv();
                }
                writer.run(receiver);
            })
            .context("starting the decision-record writer thread")?;
        Ok(Self {
            shared,
            queue: Some(sender),
        })
    }

    /// False for [`Recorder::disabled`]: skip building records then.
    pub fn is_enabled(&self) -> bool {
        self.queue.is_some()
    }

    /// Hand a record to the writer. Never waits: when the writer is behind
    /// the record is dropped and counted.
    pub fn record(&self, record: DecisionRecord) {
        let Some(queue) = &self.queue else { return };
        match queue.try_send(Message::Record(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.shared.counters.drop_one(&QUEUE_FULL),
            // The writer thread is gone (it does not stop on its own while a
            // sender lives, so this is a bug or a panic): the record is lost.
            Err(TrySendError::Disconnected(_)) => self.shared.counters.drop_one(&WRITE_ERROR),
        }
    }

    /// Wait until everything recorded so far is written and the files are
    /// flushed to the operating system, at most `timeout`. False on timeout
    /// (or when the writer is gone). For shutdown and tests; not for the
    /// reconcile path.
    pub fn flush(&self, timeout: Duration) -> bool {
        let Some(queue) = &self.queue else {
            return true;
        };
        let deadline = Instant::now() + timeout;
        let (ack, acked) = mpsc::channel();
        let mut message = Message::Flush(ack);
        loop {
            match queue.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    message = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match acked.recv_timeout(left) {
            Ok(()) => true,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => false,
        }
    }

    /// The counters (registered with the metrics by
    /// `Metrics::with_decision_records`).
    pub fn counters(&self) -> &RecordCounters {
        &self.shared.counters
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.shared.counters.written.get()
    }

    /// Records dropped so far, for any reason.
    pub fn dropped(&self) -> u64 {
        self.shared
            .counters
            .dropped
            .get_or_create(&QUEUE_FULL)
            .get()
            + self
                .shared
                .counters
                .dropped
                .get_or_create(&WRITE_ERROR)
                .get()
    }

    /// The record directory, if records go to files.
    pub fn directory(&self) -> Option<&Path> {
        self.shared.directory.as_deref()
    }

    /// The last `limit` records of the in-memory ring (all of them if
    /// `None`) as JSON lines, oldest first, each ending in a newline; `None`
    /// when the ring is off.
    pub fn recent(&self, limit: Option<usize>) -> Option<String> {
        let ring = self.shared.ring.as_ref()?;
        let lines = ring.last(limit.unwrap_or(usize::MAX));
        let mut text = String::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        for line in &lines {
            text.push_str(line);
            text.push('\n');
        }
        Some(text)
    }
}

/// Create the directory if needed and check a file can be created in it.
fn check_directory(directory: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(directory).with_context(|| {
        format!(
            "creating the decision-record directory {}",
            directory.display()
        )
    })?;
    let probe = directory.join(format!(".radwasm-write-check-{}", std::process::id()));
    File::create(&probe).with_context(|| {
        format!(
            "the decision-record directory {} is not writable",
            directory.display()
        )
    })?;
    std::fs::remove_file(&probe).ok();
    Ok(())
}

/// The last N lines written, newest last.
struct Ring {
    capacity: usize,
    lines: Mutex<VecDeque<Arc<str>>>,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            lines: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
        }
    }

    fn push(&self, line: Arc<str>) {
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        while lines.len() >= self.capacity {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn last(&self, limit: usize) -> Vec<Arc<str>> {
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let skip = lines.len().saturating_sub(limit);
        lines.iter().skip(skip).cloned().collect()
    }
}

/// The background side: serialises, fills the ring, appends to files.
struct Writer {
    shared: Arc<Shared>,
    files: Option<RotatingFiles>,
    last_error_logged: Option<Instant>,
}

/// At most one log line per this interval about failing writes.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(60);

impl Writer {
    fn run(mut self, queue: Receiver<Message>) {
        while let Ok(message) = queue.recv() {
            self.handle(message);
            // Write whatever else is waiting before flushing once.
            while let Ok(message) = queue.try_recv() {
                self.handle(message);
            }
            self.flush_files();
        }
        self.flush_files();
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Record(record) => self.write(&record),
            Message::Flush(ack) => {
                self.flush_files();
                let _ = ack.send(());
            }
        }
    }

    fn write(&mut self, record: &DecisionRecord) {
        let line: Arc<str> = Arc::from(record.to_json_line());
        if let Some(ring) = &self.shared.ring {
            ring.push(line.clone());
        }
        let written = match &mut self.files {
            Some(files) => files.append(&line),
            None => Ok(()),
        };
        match written {
            Ok(()) => {
                self.shared.counters.written.inc();
            }
            Err(error) => {
                self.shared.counters.drop_one(&WRITE_ERROR);
                self.log_error(&error);
            }
        }
    }

    fn flush_files(&mut self) {
        if let Some(files) = &mut self.files
            && let Err(error) = files.flush()
        {
            self.log_error(&error);
        }
    }

    fn log_error(&mut self, error: &io::Error) {
        let now = Instant::now();
        if self
            .last_error_logged
            .is_some_and(|last| now.duration_since(last) < ERROR_LOG_INTERVAL)
        {
            return;
        }
        self.last_error_logged = Some(now);
        let directory = self
            .files
            .as_ref()
            .map(|files| files.directory.display().to_string())
            .unwrap_or_default();
        tracing::warn!(%error, directory, "writing decision records failed; records are being dropped");
    }
}

/// JSON-lines files in one directory: a new file when the current one would
/// pass `max_file_bytes`, the oldest deleted past `max_files`.
struct RotatingFiles {
    directory: PathBuf,
    max_file_bytes: u64,
    max_files: usize,
    current: Option<OpenFile>,
    sequence: u64,
}

struct OpenFile {
    writer: BufWriter<File>,
    bytes: u64,
}

impl RotatingFiles {
    fn append(&mut self, line: &str) -> io::Result<()> {
        let length = line.len() as u64 + 1;
        if self
            .current
            .as_ref()
            .is_some_and(|file| file.bytes > 0 && file.bytes + length > self.max_file_bytes)
        {
            self.rotate()?;
        }
        if self.current.is_none() {
            let opened = self.open_new()?;
            self.current = Some(opened);
        }
        let Some(file) = self.current.as_mut() else {
            return Ok(());
        };
        let result = file
            .writer
            .write_all(line.as_bytes())
            .and_then(|()| file.writer.write_all(b"\n"));
        match result {
            Ok(()) => {
                file.bytes += length;
                Ok(())
            }
            Err(error) => {
                // Start afresh next time: the disk may recover, and a line
                // cut short stays the last of its file.
                self.current = None;
                Err(error)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.current {
            Some(file) => {
                let flushed = file.writer.flush();
                if flushed.is_err() {
                    self.current = None;
                }
                flushed
            }
            None => Ok(()),
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut file) = self.current.take() {
            file.writer.flush()?;
        }
        Ok(())
    }

    /// A new file named after the current time (so names sort by age),
    /// after deleting the oldest so at most `max_files` remain with it.
    fn open_new(&mut self) -> io::Result<OpenFile> {
        self.prune(self.max_files.saturating_sub(1));
        let stamp = Utc::now().format("%Y%m%dT%H%M%S%.6fZ");
        loop {
            self.sequence += 1;
            let name = format!("{FILE_PREFIX}{stamp}-{:06}.{FILE_EXTENSION}", self.sequence);
            match OpenOptions::new()
                .append(true)
                .create_new(true)
                .open(self.directory.join(name))
            {
                Ok(file) => {
                    return Ok(OpenFile {
                        writer: BufWriter::with_capacity(64 << 10, file),
                        bytes: 0,
                    });
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
    }

    /// Delete the oldest record files until at most `keep` remain.
    fn prune(&self, keep: usize) {
        let mut files = match record_files_in(&self.directory) {
            Ok(files) => files,
            Err(error) => {
                tracing::warn!(%error, directory = %self.directory.display(), "cannot list decision-record files");
                return;
            }
        };
        let excess = files.len().saturating_sub(keep);
        for old in files.drain(..excess) {
            if let Err(error) = std::fs::remove_file(&old) {
                tracing::warn!(%error, file = %old.display(), "cannot delete an old decision-record file");
            }
        }
    }
}

/// The record files the recorder wrote in `directory`, oldest first.
pub fn record_files_in(directory: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(directory)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(FILE_PREFIX)
            && name.ends_with(&format!(".{FILE_EXTENSION}"))
            && entry.file_type().is_ok_and(|kind| kind.is_file())
        {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Limits, PolicyEngine};

    const WAIT: Duration = Duration::from_secs(10);

    fn template(name: &str) -> model::TemplateObservation {
        model::TemplateObservation {
            meta: model::ObjectMeta {
                name: name.into(),
                namespace: "default".into(),
                generation: 1,
                ..Default::default()
            },
            spec: model::TemplateSpec {
                template: r#"{"resources":{}}"#.into(),
                parameters: "{}".into(),
                provider_config: String::new(),
            },
            spec_hash: "abc".into(),
            ..Default::default()
        }
    }

    /// A record without a loaded policy (cheap; for the sink tests). Every
    /// one has the same time, so lines differ in length only by `name`.
    fn record(name: &str) -> DecisionRecord {
        DecisionRecord {
            at: "2026-11-24T10:15:00.123456789Z".parse().expect("a time"),
            kind: RecordKind::DeploymentTemplate,
            object: format!("default/{name}"),
            policy: PolicyIdentity {
                name: "default".into(),
                version: "0.1.0".into(),
                digest: "00".repeat(32),
            },
            role: Role::Enforce,
            observation: model::Observation::DeploymentTemplate(template(name)),
            plan: Some(vec![
                Value::from("addFinalizer"),
                serde_json::json!({"requeueAfter": 200}),
            ]),
            error: None,
            below: Vec::new(),
            duration_us: 42,
            fuel: 1000,
            outcome: Outcome::Ok,
        }
    }

    fn settings(directory: Option<PathBuf>) -> Settings {
        Settings {
            directory,
            max_file_bytes: 16 << 20,
            max_files: 8,
            ring: 0,
            queue: QUEUE_CAPACITY,
        }
    }

    fn lines_of(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_decided_record_round_trips_through_its_json_line() {
        let engine = PolicyEngine::new(Limits::default()).expect("engine");
        let policy = crate::policy::embedded::load_default(&engine).expect("default policy");
        let observation = template("app");
        let decision = policy
            .decide_template(&observation)
            .map(|decision| decision.map_plan(|plan| plan.actions));
        let record = DecisionRecord::new(
            &policy,
            Role::Shadow,
            &observation,
            &decision,
            Duration::from_micros(1234),
        );
        assert_eq!(record.object, "default/app");
        assert_eq!(record.kind, RecordKind::DeploymentTemplate);
        assert_eq!(record.outcome, Outcome::Ok);
        assert_eq!(record.duration_us, 1234);
        assert!(record.fuel > 0);
        assert_eq!(record.policy.digest, policy.digest());
        let line = record.to_json_line();
        assert!(!line.contains('\n'), "{line}");
        let value: Value = serde_json::from_str(&line).expect("JSON");
        for key in [
            "at",
            "kind",
            "object",
            "policy",
            "role",
            "observation",
            "plan",
            "durationUs",
            "fuel",
            "outcome",
        ] {
            assert!(value.get(key).is_some(), "{key} missing from {line}");
        }
        assert_eq!(value["role"], "shadow");
        assert_eq!(value["kind"], "DeploymentTemplate");
        assert!(
            value["observation"]["deploymentTemplate"].is_object(),
            "{line}"
        );
        assert_eq!(value["plan"][0], "addFinalizer", "{line}");
        assert!(
            DateTime::parse_from_rfc3339(value["at"].as_str().expect("at")).is_ok(),
            "{line}"
        );
        // The observation is exactly the observation-file form.
        let observation_file: model::Observation =
            serde_json::from_value(value["observation"].clone()).expect("observation form");
        assert_eq!(observation_file, record.observation);
        let again = DecisionRecord::from_json_line(&line).expect("parses back");
        assert_eq!(again, record);
    }

    #[test]
    fn errors_are_recorded_with_reason_code_and_message() {
        let refused: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
            Err(DecisionError::Policy {
                policy: "p".into(),
                error: model::PolicyError {
                    code: "Invalid".into(),
                    message: "bad spec".into(),
                },
            });
        let engine = PolicyEngine::new(Limits::default()).expect("engine");
        let policy = crate::policy::embedded::load_default(&engine).expect("default policy");
        let record = DecisionRecord::new(
            &policy,
            Role::Enforce,
            &template("x"),
            &refused,
            Duration::ZERO,
        );
        assert_eq!(record.outcome, Outcome::Error);
        assert_eq!(record.plan, None);
        let error = record.error.clone().expect("error");
        assert!(error.is_policy_error());
        assert_eq!(error.code.as_deref(), Some("Invalid"));
        assert_eq!(error.message, "bad spec");
        let line = record.to_json_line();
        assert!(!line.contains("\"plan\""), "{line}");
        assert_eq!(
            DecisionRecord::from_json_line(&line).expect("parses"),
            record
        );

        let fuel: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
            Err(DecisionError::OutOfFuel {
                policy: "p".into(),
                fuel: 7,
            });
        let record = DecisionRecord::new(
            &policy,
            Role::Enforce,
            &template("x"),
            &fuel,
            Duration::ZERO,
        );
        let error = record.error.expect("error");
        assert_eq!(error.reason, "OutOfFuel");
        assert_eq!(error.code, None);
        assert!(error.message.contains("CPU budget"), "{}", error.message);
        assert_eq!(record.fuel, 7);
    }

    #[test]
    fn inconsistent_lines_are_refused_with_the_reason() {
        let mut value = serde_json::to_value(record("a")).expect("value");
        value["kind"] = "DeploymentResource".into();
        let error = DecisionRecord::from_json_line(&value.to_string()).expect_err("kind");
        assert!(
            error.contains("observation is a DeploymentTemplate"),
            "{error}"
        );
        let mut value = serde_json::to_value(record("a")).expect("value");
        value["outcome"] = "error".into();
        let error = DecisionRecord::from_json_line(&value.to_string()).expect_err("outcome");
        assert!(error.contains("outcome is error"), "{error}");
        let error = DecisionRecord::from_json_line("{\"at\": 1").expect_err("cut short");
        assert!(error.contains("not a decision record"), "{error}");
    }

    #[test]
    fn files_rotate_by_size_and_names_sort_by_age() {
        let dir = tempfile::tempdir().expect("tempdir");
        let line_bytes = record("app-00").to_json_line().len() as u64 + 1;
        let recorder = Recorder::start(
            Settings {
                // Three records per file.
                max_file_bytes: line_bytes * 3 + 1,
                max_files: 100,
                ..settings(Some(dir.path().to_path_buf()))
            },
            None,
        )
        .expect("recorder");
        for index in 0..10 {
            recorder.record(record(&format!("app-{index:02}")));
        }
        assert!(recorder.flush(WAIT), "flushed");
        assert_eq!(recorder.written(), 10);
        assert_eq!(recorder.dropped(), 0);
        let files = record_files_in(dir.path()).expect("list");
        assert_eq!(files.len(), 4, "{files:?}");
        let mut objects = Vec::new();
        for (index, file) in files.iter().enumerate() {
            let size = std::fs::metadata(file).expect("size").len();
            assert!(
                size <= line_bytes * 3 + 1,
                "{} is {size} bytes",
                file.display()
            );
            let lines = lines_of(file);
            assert_eq!(
                lines.len(),
                if index < 3 { 3 } else { 1 },
                "{}",
                file.display()
            );
            for line in lines {
                objects.push(
                    DecisionRecord::from_json_line(&line)
                        .expect("record")
                        .object,
                );
            }
        }
        // Sorted file names give the records in the order they were made.
        let expected: Vec<String> = (0..10).map(|i| format!("default/app-{i:02}")).collect();
        assert_eq!(objects, expected);
    }

    #[test]
    fn a_record_larger_than_the_file_size_gets_a_file_of_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let recorder = Recorder::start(
            Settings {
                max_file_bytes: 10,
                ..settings(Some(dir.path().to_path_buf()))
            },
            None,
        )
        .expect("recorder");
        recorder.record(record("a"));
        recorder.record(record("b"));
        assert!(recorder.flush(WAIT));
        let files = record_files_in(dir.path()).expect("list");
        assert_eq!(files.len(), 2);
        assert!(files.iter().all(|file| lines_of(file).len() == 1));
    }

    #[test]
    fn the_oldest_files_are_deleted_past_the_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Somebody else's file in the directory is left alone.
        std::fs::write(dir.path().join("notes.txt"), "keep me").expect("write");
        let line_bytes = record("app-00").to_json_line().len() as u64 + 1;
        let recorder = Recorder::start(
            Settings {
                max_file_bytes: line_bytes,
                max_files: 3,
                ..settings(Some(dir.path().to_path_buf()))
            },
            None,
        )
        .expect("recorder");
        for index in 0..7 {
            recorder.record(record(&format!("app-{index:02}")));
        }
        assert!(recorder.flush(WAIT));
        let files = record_files_in(dir.path()).expect("list");
        assert_eq!(files.len(), 3, "{files:?}");
        let objects: Vec<String> = files
            .iter()
            .flat_map(|file| lines_of(file))
            .map(|line| {
                DecisionRecord::from_json_line(&line)
                    .expect("record")
                    .object
            })
            .collect();
        assert_eq!(
            objects,
            ["default/app-04", "default/app-05", "default/app-06"]
        );
        assert!(dir.path().join("notes.txt").exists());
        // A restart keeps to the cap too, counting the files already there.
        drop(recorder);
        let recorder = Recorder::start(
            Settings {
                max_file_bytes: line_bytes,
                max_files: 3,
                ..settings(Some(dir.path().to_path_buf()))
            },
            None,
        )
        .expect("recorder");
        recorder.record(record("app-07"));
        assert!(recorder.flush(WAIT));
        let files = record_files_in(dir.path()).expect("list");
        assert_eq!(files.len(), 3, "{files:?}");
        let last = lines_of(files.last().expect("newest"));
        assert!(last[0].contains("app-07"), "{last:?}");
    }

    #[test]
    fn the_ring_keeps_the_last_n_newest_last() {
        let recorder = Recorder::start(
            Settings {
                ring: 5,
                ..settings(None)
            },
            None,
        )
        .expect("recorder");
        assert!(recorder.is_enabled());
        for index in 0..12 {
            recorder.record(record(&format!("app-{index:02}")));
        }
        assert!(recorder.flush(WAIT));
        assert_eq!(recorder.written(), 12);
        let objects = |text: String| -> Vec<String> {
            text.lines()
                .map(|line| DecisionRecord::from_json_line(line).expect("record").object)
                .collect()
        };
        let all = recorder.recent(None).expect("ring on");
        assert_eq!(
            objects(all),
            (7..12)
                .map(|i| format!("default/app-{i:02}"))
                .collect::<Vec<_>>()
        );
        let two = recorder.recent(Some(2)).expect("ring on");
        assert_eq!(objects(two), ["default/app-10", "default/app-11"]);
        assert_eq!(recorder.recent(Some(0)).expect("ring on"), "");
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let (open, gate) = mpsc::channel();
        let recorder = Recorder::start(
            Settings {
                ring: 100,
                queue: 4,
                ..settings(None)
            },
            Some(gate),
        )
        .expect("recorder");
        let started = Instant::now();
        for index in 0..10 {
            recorder.record(record(&format!("app-{index:02}")));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "record waited");
        assert_eq!(recorder.dropped(), 6);
        assert_eq!(
            recorder.counters().dropped.get_or_create(&QUEUE_FULL).get(),
            6
        );
        // A flush cannot get into a full queue before its time is up.
        assert!(!recorder.flush(Duration::from_millis(20)));
        open.send(()).expect("open the gate");
        assert!(recorder.flush(WAIT));
        assert_eq!(recorder.written(), 4);
        let kept = recorder.recent(None).expect("ring").lines().count();
        assert_eq!(kept, 4);
    }

    #[test]
    fn a_failing_directory_counts_write_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = dir.path().join("records");
        let recorder = Recorder::start(
            Settings {
                ring: 10,
                ..settings(Some(records.clone()))
            },
            None,
        )
        .expect("recorder");
        // The directory disappears and a file takes its place.
        std::fs::remove_dir_all(&records).expect("remove");
        std::fs::write(&records, "not a directory").expect("write");
        recorder.record(record("a"));
        assert!(recorder.flush(WAIT));
        assert_eq!(recorder.written(), 0);
        assert_eq!(
            recorder
                .counters()
                .dropped
                .get_or_create(&WRITE_ERROR)
                .get(),
            1
        );
        // The ring still has it.
        assert_eq!(recorder.recent(None).expect("ring").lines().count(), 1);
    }

    #[test]
    fn an_unwritable_directory_is_refused_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("write");
        let args = RecordArgs {
            decision_records_dir: Some(file.join("records")),
            ..RecordArgs::default()
        };
        let error = Recorder::from_args(&args).expect_err("not a directory");
        assert!(
            format!("{error:#}").contains("decision-record directory"),
            "{error:#}"
        );
    }

    #[test]
    fn no_directory_and_no_ring_is_disabled() {
        let recorder = Recorder::from_args(&RecordArgs {
            decision_ring: 0,
            ..RecordArgs::default()
        })
        .expect("recorder");
        assert!(!recorder.is_enabled());
        recorder.record(record("a"));
        assert!(recorder.flush(WAIT));
        assert_eq!(recorder.written() + recorder.dropped(), 0);
        assert_eq!(recorder.recent(None), None);
        assert!(!Recorder::disabled().is_enabled());
    }

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

    #[test]
    fn the_counters_are_exported_as_metrics() {
        let (open, gate) = mpsc::channel();
        let recorder = Recorder::start(
            Settings {
                ring: 10,
                queue: 1,
                ..settings(None)
            },
            Some(gate),
        )
        .expect("recorder");
        let metrics = crate::metrics::Metrics::default().with_decision_records(&recorder);
        recorder.record(record("a"));
        recorder.record(record("b"));
        open.send(()).expect("open");
        assert!(recorder.flush(WAIT));
        let text = metrics.encode();
        for line in [
            "radwasm_decision_records_written_total 1",
            r#"radwasm_decision_records_dropped_total{reason="queue_full"} 1"#,
            r#"radwasm_decision_records_dropped_total{reason="write_error"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[tokio::test]
    async fn the_metrics_server_serves_the_ring() {
        let recorder = Recorder::start(
            Settings {
                ring: 10,
                ..settings(None)
            },
            None,
        )
        .expect("recorder");
        for index in 0..3 {
            recorder.record(record(&format!("app-{index}")));
        }
        assert!(recorder.flush(WAIT));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let address = crate::metrics::serve(
            "127.0.0.1:0".parse().expect("address"),
            Arc::new(crate::metrics::Metrics::default().with_decision_records(&recorder)),
            crate::metrics::Readiness::default(),
            shutdown.clone(),
        )
        .await
        .expect("serves");
        let get = |path: &str| reqwest::get(format!("http://{address}{path}"));
        let response = get("/debug/decisions").await.expect("decisions");
        assert_eq!(response.status(), 200);
        let body = response.text().await.expect("body");
        let objects: Vec<String> = body
            .lines()
            .map(|line| DecisionRecord::from_json_line(line).expect("record").object)
            .collect();
        assert_eq!(objects, ["default/app-0", "default/app-1", "default/app-2"]);
        let body = get("/debug/decisions?limit=1")
            .await
            .expect("limited")
            .text()
            .await
            .expect("body");
        assert_eq!(body.lines().count(), 1);
        assert!(body.contains("default/app-2"), "{body}");
        let bad = get("/debug/decisions?limit=many").await.expect("bad limit");
        assert_eq!(bad.status(), 400);
        shutdown.cancel();

        // Without a ring the endpoint says so.
        let shutdown = tokio_util::sync::CancellationToken::new();
        let address = crate::metrics::serve(
            "127.0.0.1:0".parse().expect("address"),
            Arc::new(crate::metrics::Metrics::default()),
            crate::metrics::Readiness::default(),
            shutdown.clone(),
        )
        .await
        .expect("serves");
        let response = reqwest::get(format!("http://{address}/debug/decisions"))
            .await
            .expect("decisions");
        assert_eq!(response.status(), 404);
        shutdown.cancel();
    }
}
