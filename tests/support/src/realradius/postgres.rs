//! PostgreSQL from Debian for Radius's stores, as Radius's contributors run
//! it beside the control plane: users `ucp` and `applications_rp`, one
//! database each, and the `resources` table and index every Radius store
//! uses. One server per Radius, on a loopback port and a socket in its own
//! directory, its data directory removed with it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::procs::{Procs, Spawn};

/// The password Radius's configurations use (`start-radius.sh` creates its
/// users with it); connections are from loopback only.
pub const PASSWORD: &str = "radius_pass";
/// Each Radius store's user and database, which have the same name.
pub const DATABASES: [&str; 2] = ["ucp", "applications_rp"];

const READY: Duration = Duration::from_secs(60);

/// The table and index of Radius's PostgreSQL store
/// (`pkg/components/database/postgres` reads and writes exactly these).
fn schema(user: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS resources (
  id TEXT PRIMARY KEY NOT NULL,
  original_id TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  root_scope TEXT NOT NULL,
  routing_scope TEXT NOT NULL,
  etag TEXT NOT NULL,
  created_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP,
  resource_data jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_resource_query ON resources (resource_type, root_scope);
GRANT ALL PRIVILEGES ON TABLE resources TO {user};
GRANT ALL PRIVILEGES ON ALL SEQUENCES IN SCHEMA public TO {user};"
    )
}

/// Debian's PostgreSQL server binaries (`/usr/lib/postgresql/<major>/bin`),
/// the newest major installed.
fn bin_dir() -> Result<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => Ok(bin),
        None => bail!(
            "no PostgreSQL server under /usr/lib/postgresql/*/bin: install Debian's \
             postgresql-15 (`apt-get install postgresql-15`; .ci/run does)"
        ),
    }
}

/// The `postgres` system user Debian's package creates: initdb and the
/// server refuse to run as root.
fn postgres_user() -> Result<(u32, u32)> {
    let out = std::process::Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .context("run `id -u postgres`")?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse::<u32>();
    let out = std::process::Command::new("id")
        .args(["-g", "postgres"])
        .output()
        .context("run `id -g postgres`")?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().parse::<u32>();
    match (uid, gid) {
        (Ok(uid), Ok(gid)) => Ok((uid, gid)),
        _ => bail!("there is no `postgres` user: install Debian's postgresql-15"),
    }
}

/// A running server: where to connect.
pub struct Postgres {
    pub port: u16,
    socket_dir: PathBuf,
    bin: PathBuf,
}

impl Postgres {
    /// `initdb` a cluster in `<dir>/pgdata`, start it on 127.0.0.1:`port`
    /// (as a child in `procs`), and create Radius's users, databases and
    /// tables.
    pub(crate) async fn start(procs: &mut Procs, dir: &Path, port: u16) -> Result<Postgres> {
        let bin = bin_dir()?;
        let (uid, gid) = postgres_user()?;
        let data = dir.join("pgdata");
        let socket_dir = dir.join("pgsocket");
        for d in [&data, &socket_dir] {
            std::fs::create_dir_all(d)?;
            std::os::unix::fs::chown(d, Some(uid), Some(gid))
                .with_context(|| format!("chown {} to postgres", d.display()))?;
        }
        // The server runs as `postgres`: it must be able to reach its files.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;

        let initdb = tokio::process::Command::new(bin.join("initdb"))
            .args(["-D"])
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
            .uid(uid)
            .gid(gid)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .await
            .context("run initdb")?;
        if !initdb.status.success() {
            bail!(
                "initdb failed ({}): {}",
                initdb.status,
                crate::output_text(&initdb)
            );
        }
        let args = vec![
            "-D".to_string(),
            data.display().to_string(),
            "-p".to_string(),
            port.to_string(),
            "-k".to_string(),
            socket_dir.display().to_string(),
            "-c".to_string(),
            "listen_addresses=127.0.0.1".to_string(),
            // A test database: nothing needs to survive a crash.
            "-c".to_string(),
            "fsync=off".to_string(),
            "-c".to_string(),
            "synchronous_commit=off".to_string(),
            "-c".to_string(),
            "full_page_writes=off".to_string(),
        ];
        procs.spawn_with(Spawn {
            user: Some((uid, gid)),
            stop_signal: libc::SIGQUIT,
            ..Spawn::new("postgres", &bin.join("postgres"), &args, dir)
        })?;
        let server = Postgres {
            port,
            socket_dir,
            bin,
        };
        server.wait_ready(procs).await?;
        for db in DATABASES {
            server
                .psql(
                    "postgres",
                    &format!("CREATE USER {db} WITH PASSWORD '{PASSWORD}';"),
                )
                .await?;
            server
                .psql("postgres", &format!("CREATE DATABASE {db} OWNER {db};"))
                .await?;
            server.psql(db, &schema(db)).await?;
        }
        Ok(server)
    }

    async fn wait_ready(&self, procs: &mut Procs) -> Result<()> {
        let deadline = Instant::now() + READY;
        loop {
            procs.check_running()?;
            let ready = tokio::process::Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(&self.socket_dir)
                .args(["-p", &self.port.to_string(), "-q"])
                .status()
                .await
                .context("run pg_isready")?;
            if ready.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("PostgreSQL not ready after {READY:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Run SQL as the superuser in `database`; an error names the SQL.
    pub async fn psql(&self, database: &str, sql: &str) -> Result<String> {
        let out = tokio::process::Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(&self.socket_dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-At", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .await
            .context("run psql")?;
        if !out.status.success() {
            bail!(
                "psql in {database} failed on `{sql}`: {}",
                crate::output_text(&out)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `postgresql://{user}:…@127.0.0.1:{port}/{user}`: a store's URL.
    pub fn url(&self, user: &str) -> String {
        format!(
            "postgresql://{user}:{PASSWORD}@127.0.0.1:{}/{user}?sslmode=disable",
            self.port
        )
    }
}
