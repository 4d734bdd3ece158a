//! Child processes of a test harness (the real Kubernetes control plane, the
//! real Radius control plane and its PostgreSQL), each logging to a file,
//! none outliving the test process.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

/// One child process, its output in `<dir>/<name>.log`.
pub(crate) struct Proc {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
    /// The signal that stops it (and that it gets when the test process
    /// dies): SIGKILL for most, SIGQUIT for PostgreSQL, whose postmaster
    /// then stops its backends.
    pub stop_signal: libc::c_int,
}

/// How a child is started beyond its binary and arguments.
pub(crate) struct Spawn<'a> {
    pub name: &'static str,
    pub bin: &'a Path,
    pub args: &'a [String],
    /// Working directory and where `<name>.log` goes.
    pub dir: &'a Path,
    pub env: &'a [(&'a str, String)],
    /// Run as this user and group instead of ours (PostgreSQL refuses root).
    pub user: Option<(u32, u32)>,
    pub stop_signal: libc::c_int,
}

impl<'a> Spawn<'a> {
    pub fn new(name: &'static str, bin: &'a Path, args: &'a [String], dir: &'a Path) -> Self {
        Spawn {
            name,
            bin,
            args,
            dir,
            env: &[],
            user: None,
            stop_signal: libc::SIGKILL,
        }
    }
}

/// The running children; dropping this stops them (newest first) and waits
/// for them, so nothing outlives a test, also when it panics.
#[derive(Default)]
pub(crate) struct Procs(pub Vec<Proc>);

impl Procs {
    pub fn spawn(
        &mut self,
        dir: &Path,
        bin: &Path,
        name: &'static str,
        args: &[String],
    ) -> Result<()> {
        self.spawn_with(Spawn::new(name, bin, args, dir))
    }

    pub fn spawn_with(&mut self, spawn: Spawn<'_>) -> Result<()> {
        let log = spawn.dir.join(format!("{}.log", spawn.name));
        let out = File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let mut cmd = Command::new(spawn.bin);
        cmd.args(spawn.args)
            .current_dir(spawn.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        for (key, value) in spawn.env {
            cmd.env(key, value);
        }
        if let Some((uid, gid)) = spawn.user {
            cmd.uid(uid).gid(gid);
        }
        // If the test process dies without unwinding (SIGKILL, abort), the
        // kernel signals the child too. The signal follows the thread that
        // spawned the child, which is the test's runtime thread and outlives
        // the processes.
        let signal = spawn.stop_signal;
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("start {}", spawn.bin.display()))?;
        self.0.push(Proc {
            name: spawn.name,
            child,
            log,
            stop_signal: signal,
        });
        Ok(())
    }

    /// An error if any child has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for p in &mut self.0 {
            if let Some(status) = p.child.try_wait()? {
                bail!("{} exited early ({status})", p.name);
            }
        }
        Ok(())
    }

    /// The children's process ids, oldest first.
    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(|p| p.child.id()).collect()
    }

    /// The children's process ids with their stop signals, oldest first.
    pub fn stops(&self) -> Vec<(u32, libc::c_int)> {
        self.0
            .iter()
            .map(|p| (p.child.id(), p.stop_signal))
            .collect()
    }

    /// The last lines of every log, for error messages.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for p in &self.0 {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            out.push_str(&format!(
                "\n--- last {} lines of {} ({}) ---\n{}\n",
                tail.len(),
                p.name,
                p.log.display(),
                tail.join("\n")
            ));
        }
        out
    }
}

/// Stop each process (newest first) with its signal and reap it: what a
/// harness's exit handler does for children it can no longer own.
pub(crate) fn stop_all(stops: &[(u32, libc::c_int)]) {
    for (pid, signal) in stops.iter().rev() {
        let Ok(pid) = libc::pid_t::try_from(*pid) else {
            continue;
        };
        // SAFETY: plain syscalls on our own children.
        unsafe {
            libc::kill(pid, *signal);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in self.0.iter_mut().rev() {
            if let Ok(None) = p.child.try_wait()
                && let Ok(pid) = libc::pid_t::try_from(p.child.id())
            {
                // SAFETY: a plain syscall on our own child, not yet reaped.
                unsafe {
                    libc::kill(pid, p.stop_signal);
                }
            }
            let _ = p.child.wait();
        }
    }
}
