//! The shared store under the local cache (feature `remote-cache`): Redis, S3-compatible object
//! storage, WebDAV over HTTP(S) and a plain directory, through Apache OpenDAL (the storage layer
//! sccache uses), so that the runners of a CI fleet and the machines of a team compile each
//! (gpu.module, target) once between them.
//!
//! The store holds the same entries as the local cache, under the same names
//! (`v1/<two hex digits>/<key digest>`). Every entry read is checked against its SHA-256 and its
//! full key text by the caller (`Cache::get_many`) before use, and against its signature when the
//! build trusts signing keys (`signing.rs`): only a signature tells who wrote an entry.
//!
//! A store never fails a build. The first operation waits at most `FIRST_ANSWER` for an answer
//! (a store that accepts connections and never answers costs that once); any failure or timeout
//! marks the store failed for the rest of the build, which then compiles what the local cache
//! lacks and stores nothing remotely, and says why once. Writes run on the store's own threads
//! while the build goes on (at most `UPLOADS_AT_ONCE` at a time) and are waited for before the
//! build returns, for as long as they make progress: when none finishes for `STALL`, the store
//! is given up on (one that answered and then went silent costs that much once).

use super::stats::Counters;
use opendal::{services, ErrorKind, Operator};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// How long the first operation waits for the store to answer at all.
const FIRST_ANSWER: Duration = Duration::from_millis(800);
/// How long a read may take once the store has answered (an entry is at most a few MB).
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one upload may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the end of a build waits for the next upload to finish.
const STALL: Duration = Duration::from_millis(800);
/// Uploads running at once; the rest wait their turn on the store's threads.
const UPLOADS_AT_ONCE: usize = 4;

/// An open store.
pub(crate) struct RemoteStore {
    operator: Operator,
    /// Present from `open` until the store is dropped (see `Drop`).
    runtime: Option<Runtime>,
    /// The store's address without credentials, for messages and statistics.
    pub name: String,
    pub read_only: bool,
    /// How long the first operation waits for an answer: [`FIRST_ANSWER`] in a build.
    first_answer: Duration,
    /// How long `flush` waits for the next upload to finish: [`STALL`] in a build.
    stall: Duration,
    answered: AtomicBool,
    /// Why the store was given up on, if it was.
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    uploads: Mutex<Vec<JoinHandle<Result<usize, String>>>>,
    upload_slots: Arc<Semaphore>,
    /// What this build did with the store.
    pub counters: Counters,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("name", &self.name)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Credentials and settings a store reads besides its address (its usual environment
/// variables; passed in so that the build's record of what it read stays complete).
pub(crate) type Environment<'a> = &'a dyn Fn(&str) -> Option<String>;

impl RemoteStore {
    /// The store at `address`: `redis://[user:password@]host[:port][/db]`,
    /// `s3://bucket[/prefix]` (endpoint, region and credentials from `AWS_ENDPOINT_URL`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`), `webdav://host[:port]/path`
    /// or `webdavs://` (also `http://` and `https://`; user and password from the address or
    /// `GPU_BUILD_CACHE_USERNAME` / `GPU_BUILD_CACHE_PASSWORD`), `file:///path` or an absolute
    /// path. Nothing is contacted yet. The error says what is wrong with the address.
    pub fn open(address: &str, read_only: bool, env: Environment) -> Result<RemoteStore, String> {
        // OpenDAL's HTTP transport (reqwest with rustls), installed once for the process; its
        // automatic installation (a constructor run before `main`) is a default feature left out.
        opendal::install_default();
        let (operator, name) = operator_for(address, env)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gpu-build-cache")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the threads that talk to the store: {e}"))?;
        Ok(RemoteStore {
            operator,
            runtime: Some(runtime),
            name,
            read_only,
            first_answer: FIRST_ANSWER,
            stall: STALL,
            answered: AtomicBool::new(false),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            uploads: Mutex::new(Vec::new()),
            upload_slots: Arc::new(Semaphore::new(UPLOADS_AT_ONCE)),
            counters: Counters::default(),
        })
    }

    /// The store for a command someone runs on it (`gpu-build cache`), which waits as long for
    /// its first answer as for any other: a build must not stall on a silent store, a command
    /// asked to read one may.
    pub fn patient(mut self) -> RemoteStore {
        self.first_answer = READ_TIMEOUT;
        self.stall = WRITE_TIMEOUT;
        self
    }

    /// Why the store was given up on during this build, if it was.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok()?.clone()
    }

    fn give_up(&self, why: String) {
        self.failed.store(true, Ordering::SeqCst);
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(why);
        }
    }

    /// The entries stored under `digests`, read at the same time; `None` for each one the store
    /// does not have (or after it failed).
    pub fn read_many(&self, digests: &[&str]) -> Vec<Option<Vec<u8>>> {
        let Some(runtime) = self.runtime.as_ref() else {
            return vec![None; digests.len()];
        };
        if digests.is_empty() || self.failed.load(Ordering::SeqCst) {
            return vec![None; digests.len()];
        }
        let limit = if self.answered.load(Ordering::SeqCst) {
            READ_TIMEOUT
        } else {
            self.first_answer
        };
        let reads = digests.iter().map(|digest| {
            let operator = self.operator.clone();
            let path = entry_path(digest);
            async move { tokio::time::timeout(limit, operator.read(&path)).await }
        });
        let results = runtime.block_on(async {
            let handles: Vec<_> = reads.map(|read| tokio::spawn(read)).collect();
            let mut results = Vec::with_capacity(handles.len());
            for handle in handles {
                results.push(handle.await);
            }
            results
        });
        let mut found = Vec::with_capacity(results.len());
        for result in results {
            found.push(match result {
                Ok(Ok(Ok(buffer))) => {
                    self.answered.store(true, Ordering::SeqCst);
                    let bytes = buffer.to_vec();
                    Counters::bytes(&self.counters.bytes_read, bytes.len());
                    Some(bytes)
                }
                Ok(Ok(Err(e))) if e.kind() == ErrorKind::NotFound => {
                    self.answered.store(true, Ordering::SeqCst);
                    None
                }
                Ok(Ok(Err(e))) => {
                    self.give_up(format!("reading an entry failed: {}", redact_error(&e)));
                    None
                }
                Ok(Err(_)) => {
                    self.give_up(format!("no answer within {} ms", limit.as_millis()));
                    None
                }
                Err(e) => {
                    self.give_up(format!("a read stopped: {e}"));
                    None
                }
            });
        }
        // Whatever came back before the store failed is still checked and used.
        found
    }

    /// Starts storing `bytes` under `digest` on the store's threads (nothing in read-only mode
    /// or after the store failed).
    pub fn write(&self, digest: &str, bytes: Vec<u8>) {
        let Some(runtime) = self.runtime.as_ref() else {
            return;
        };
        if self.read_only || self.failed.load(Ordering::SeqCst) {
            return;
        }
        let operator = self.operator.clone();
        let path = entry_path(digest);
        let slots = self.upload_slots.clone();
        let upload = runtime.spawn(async move {
            let _slot = slots
                .acquire_owned()
                .await
                .map_err(|e| format!("an upload could not start: {e}"))?;
            let length = bytes.len();
            match tokio::time::timeout(WRITE_TIMEOUT, operator.write(&path, bytes)).await {
                Ok(Ok(_)) => Ok(length),
                Ok(Err(e)) => Err(format!("storing an entry failed: {}", redact_error(&e))),
                Err(_) => Err(format!(
                    "storing an entry took more than {} s",
                    WRITE_TIMEOUT.as_secs()
                )),
            }
        });
        if let Ok(mut uploads) = self.uploads.lock() {
            uploads.push(upload);
        }
    }

    /// Waits for the uploads still running while they make progress: when none finishes for
    /// `STALL`, the store is given up on and the rest are abandoned (a later build stores
    /// them).
    pub fn flush(&self) {
        let Some(runtime) = self.runtime.as_ref() else {
            return;
        };
        let uploads = match self.uploads.lock() {
            Ok(mut uploads) => std::mem::take(&mut *uploads),
            Err(_) => return,
        };
        let mut progress = Instant::now();
        for upload in uploads {
            if self.failed.load(Ordering::SeqCst) {
                upload.abort();
                continue;
            }
            let left = (progress + self.stall).saturating_duration_since(Instant::now());
            match runtime.block_on(async { tokio::time::timeout(left, upload).await }) {
                Ok(Ok(Ok(length))) => {
                    progress = Instant::now();
                    self.answered.store(true, Ordering::SeqCst);
                    Counters::one(&self.counters.writes);
                    Counters::bytes(&self.counters.bytes_written, length);
                }
                Ok(Ok(Err(why))) => self.give_up(why),
                Ok(Err(e)) => self.give_up(format!("an upload stopped: {e}")),
                Err(_) => self.give_up(format!(
                    "no upload finished within {} ms at the end of the build",
                    self.stall.as_millis()
                )),
            }
        }
    }

    /// Removes every entry (`gpu-build cache clear --remote`).
    pub fn clear(&self) -> Result<(), String> {
        let runtime = self.runtime.as_ref().ok_or("the store is shutting down")?;
        runtime
            .block_on(async {
                tokio::time::timeout(
                    READ_TIMEOUT,
                    self.operator.delete_with("v1/").recursive(true),
                )
                .await
            })
            .map_err(|_| format!("no answer within {} s", READ_TIMEOUT.as_secs()))?
            .map_err(|e| redact_error(&e))
    }
}

impl Drop for RemoteStore {
    fn drop(&mut self) {
        // Requests a dead store never answers must not hold up the end of the build: the
        // runtime is left to stop on its own instead of waiting for them.
        if let Ok(mut uploads) = self.uploads.lock() {
            uploads.drain(..).for_each(|upload| upload.abort());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Where an entry lives in the store, as in the local cache.
fn entry_path(digest: &str) -> String {
    format!("v1/{}/{digest}", &digest[..2.min(digest.len())])
}

/// OpenDAL's message for `error`, which names the operation and the path but not credentials.
fn redact_error(error: &opendal::Error) -> String {
    format!("{:?}: {}", error.kind(), error.message())
}

/// The operator for `address` and the address as messages show it (without credentials).
fn operator_for(address: &str, env: Environment) -> Result<(Operator, String), String> {
    let address = address.trim();
    if address.starts_with('/') {
        return fs_operator(address);
    }
    let url = url::Url::parse(address).map_err(|e| {
        format!(
            "`{}` is not a store address ({e}); use redis://host:port, s3://bucket/prefix, \
             webdav://host/path, https://host/path or file:///path",
            redacted_address(address)
        )
    })?;
    let mut shown = url.clone();
    // Neither can fail on a URL with a host; a URL without one keeps nothing to hide.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    let name = shown.to_string();
    let user = || {
        Some(url.username())
            .filter(|u| !u.is_empty())
            .map(String::from)
            .or_else(|| env("GPU_BUILD_CACHE_USERNAME"))
    };
    let password = || {
        url.password()
            .map(String::from)
            .or_else(|| env("GPU_BUILD_CACHE_PASSWORD"))
    };
    // The store's folder for the entries: the address's path.
    let root = format!("/{}/", url.path().trim_matches('/'));
    let host = || {
        url.host_str()
            .map(String::from)
            .ok_or_else(|| format!("`{name}` names no host"))
    };
    let built = match url.scheme() {
        "file" => return fs_operator(url.path()),
        "redis" => {
            let port = url.port().unwrap_or(6379);
            let mut builder = services::Redis::default()
                .endpoint(&format!("tcp://{}:{port}", host()?))
                .root("/gpu-build/");
            let db = url.path().trim_matches('/');
            if !db.is_empty() {
                let db: i64 = db.parse().map_err(|_| {
                    format!("`{name}`: the path names a Redis database, a number, not `{db}`")
                })?;
                builder = builder.db(db);
            }
            if let Some(user) = user() {
                builder = builder.username(&user);
            }
            if let Some(password) = password() {
                builder = builder.password(&password);
            }
            Operator::new(builder)
        }
        "s3" => {
            let bucket = host()?;
            let region = env("AWS_REGION")
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into());
            let mut builder = services::S3::default()
                .bucket(&bucket)
                .root(&root)
                .region(&region);
            if let Some(endpoint) = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")) {
                builder = builder.endpoint(&endpoint);
            }
            // The credentials come from AWS's usual variables (and profile files) through
            // OpenDAL's loader, never from gpu-build's own settings.
            Operator::new(builder)
        }
        "webdav" | "webdavs" | "http" | "https" => {
            let secure = matches!(url.scheme(), "webdavs" | "https");
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            let endpoint = format!(
                "{}://{}{port}",
                if secure { "https" } else { "http" },
                host()?
            );
            let mut builder = services::Webdav::default().endpoint(&endpoint).root(&root);
            if let Some(user) = user() {
                builder = builder.username(&user);
            }
            if let Some(password) = password() {
                builder = builder.password(&password);
            }
            Operator::new(builder)
        }
        "rediss" => {
            return Err(format!(
                "`{name}`: Redis over TLS is not supported; use redis:// on a trusted network \
                 or a TLS tunnel"
            ))
        }
        other => {
            return Err(format!(
                "`{name}`: unknown kind of store `{other}`; use redis://, s3://, webdav://, \
                 webdavs://, http://, https:// or file://"
            ))
        }
    };
    let operator = built.map_err(|e| format!("`{name}`: {}", redact_error(&e)))?;
    Ok((operator, name))
}

fn fs_operator(path: &str) -> Result<(Operator, String), String> {
    let name = format!("file://{path}");
    let root = std::path::Path::new(path);
    // Written beside the entries and renamed into place, so readers never see half of one.
    let builder = services::Fs::default()
        .root(path)
        .atomic_write_dir(&root.join(".incoming").to_string_lossy());
    let operator = Operator::new(builder).map_err(|e| format!("`{name}`: {}", redact_error(&e)))?;
    Ok((operator, name))
}

/// `address` with anything between `://` and `@` left out, for a message about an address that
/// does not parse.
fn redacted_address(address: &str) -> String {
    match (address.find("://"), address.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            format!("{}://…@{}", &address[..start], &address[at + 1..])
        }
        _ => address.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn addresses_name_their_store_without_credentials() {
        let (_, name) = operator_for("redis://cache:s3cret@127.0.0.1:6390/2", &no_env).unwrap();
        assert_eq!(name, "redis://127.0.0.1:6390/2");
        let (_, name) = operator_for("webdav://u:p@dav.example/cache", &no_env).unwrap();
        assert_eq!(name, "webdav://dav.example/cache");
        let (_, name) = operator_for("/srv/cache", &no_env).unwrap();
        assert_eq!(name, "file:///srv/cache");
        let (_, name) = operator_for("s3://bucket/team", &no_env).unwrap();
        assert_eq!(name, "s3://bucket/team");
    }

    #[test]
    fn bad_addresses_say_what_to_use_and_hide_credentials() {
        let error = operator_for("ftp://user:pw@host/x", &no_env).unwrap_err();
        assert!(error.contains("unknown kind of store `ftp`"), "{error}");
        assert!(!error.contains("pw"), "{error}");
        let error = operator_for("redis://host/zero", &no_env).unwrap_err();
        assert!(error.contains("a Redis database, a number"), "{error}");
        let error = operator_for("not an address :pw@", &no_env).unwrap_err();
        assert!(error.contains("redis://host:port"), "{error}");
        let error = operator_for("rediss://u:pw@host", &no_env).unwrap_err();
        assert!(error.contains("TLS") && !error.contains("pw"), "{error}");
    }
}
