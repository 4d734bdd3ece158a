//! Size-rotated record files: `RotatingFiles` appends JSON lines to
//! `decisions-<UTC time>-<sequence>.jsonl` in one directory, starting a new
//! file by size and deleting the oldest past a count; [`record_files_in`]
//! lists them oldest first.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use chrono::Utc;

/// File names of the record directory: `decisions-<UTC time>-<sequence>.jsonl`.
pub const FILE_PREFIX: &str = "decisions-";
/// Extension of record files.
pub const FILE_EXTENSION: &str = "jsonl";

/// JSON-lines files in one directory: a new file when the current one would
/// pass `max_file_bytes`, the oldest deleted past `max_files`.
// Hand-written: tracing-appender rotates by time only; file-rotate's names don't sort by age.
pub(super) struct RotatingFiles {
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
    /// Files in `directory`; nothing is opened before the first line.
    pub(super) fn new(directory: PathBuf, max_file_bytes: u64, max_files: usize) -> Self {
        Self {
            directory,
            max_file_bytes,
            max_files: max_files.max(1),
            current: None,
            sequence: 0,
        }
    }

    /// The directory the files are in.
    pub(super) fn directory(&self) -> &Path {
        &self.directory
    }

    pub(super) fn append(&mut self, line: &str) -> io::Result<()> {
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

    pub(super) fn flush(&mut self) -> io::Result<()> {
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
