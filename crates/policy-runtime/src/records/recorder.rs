//! The recorder: [`Recorder`] hands records to one background thread
//! (`Writer`) over a bounded queue, and that thread keeps the last N in
//! memory (`Ring`) and appends them to size-rotated files
//! (`RotatingFiles`, in `files.rs`), as its [`RecorderSettings`] say; and
//! its counters.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::DecisionRecord;
use super::files::RotatingFiles;

/// Records waiting for the writer thread; past this, new ones are dropped.
pub const QUEUE_CAPACITY: usize = 1024;

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

pub(super) const QUEUE_FULL: DropLabels = DropLabels {
    reason: "queue_full",
};
pub(super) const WRITE_ERROR: DropLabels = DropLabels {
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

/// What a recorder keeps, and where.
#[derive(Debug, Clone)]
pub struct RecorderSettings {
    /// The directory of record files; `None` writes none.
    pub directory: Option<PathBuf>,
    /// A new file is started once the current one would pass this size.
    pub max_file_bytes: u64,
    /// Record files kept in the directory; the oldest are deleted.
    pub max_files: usize,
    /// The last N records kept in memory; 0 keeps none.
    pub ring: usize,
    /// Records waiting for the writer thread; past this, new ones are
    /// dropped and counted.
    pub queue: usize,
}

impl Default for RecorderSettings {
    fn default() -> Self {
        Self {
            directory: None,
            max_file_bytes: 16 << 20,
            max_files: 8,
            ring: 0,
            queue: QUEUE_CAPACITY,
        }
    }
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

    /// The recorder `settings` ask for: disabled when there is neither a
    /// directory nor a ring. Creates the directory and checks it is
    /// writable; starts the writer thread.
    pub fn start(settings: RecorderSettings) -> anyhow::Result<Self> {
        Self::start_gated(settings, None)
    }

    /// [`Self::start`], with the writer waiting for `gate` first: a test
    /// fills the queue deterministically.
    #[doc(hidden)]
    pub fn start_gated(
        settings: RecorderSettings,
        gate: Option<Receiver<()>>,
    ) -> anyhow::Result<Self> {
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
        let files = settings.directory.map(|directory| {
            RotatingFiles::new(
                directory,
                settings.max_file_bytes.max(1),
                settings.max_files.max(1),
            )
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
            .map(|files| files.directory().display().to_string())
            .unwrap_or_default();
        tracing::warn!(%error, directory, "writing decision records failed; records are being dropped");
    }
}
