//! The shared cache store (gpu-build's `remote-cache` feature) against real servers started here
//! on loopback: Redis (`redis-server`), WebDAV (nginx with its DAV modules), S3 (moto's server)
//! and a shared directory. Two fresh local caches stand for two CI runners sharing one store.
//! Each test runs in a process of its own: the S3 store reads AWS's environment variables, and
//! the builds set `GPU_BUILD_VERBOSE`.

use crate::common::*;
use gpu_build::{Build, CacheDir, CacheSetting, Report, Stage, Vendor};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The sample's vadd and saxpy for one NVIDIA chip and the host: four (module, target) pairs.
pub(super) const PAIRS: usize = 4;

/// A build of the two kernels into `out` with the local cache `local` over the store `store`.
/// With `GPU_BUILD_VERBOSE=1` (set for the test's whole process: each test of this
/// module runs in one of its own), a line per local hit, remote hit and miss.
fn build(out: &Path, local: &Path, store: &str, read_only: bool) -> Report {
    std::env::set_var("GPU_BUILD_VERBOSE", "1");
    let mut build = sample_build(out, local, store);
    build.remote_cache_read_only(read_only);
    build.compile().unwrap_or_else(|e| panic!("{e}"))
}

/// The build of the two kernels (the [`PAIRS`]) into `out` with the local cache `local` over
/// the store `store`, to be set further and run.
pub(super) fn sample_build(out: &Path, local: &Path, store: &str) -> Build {
    let mut build: Build = build_in(out);
    build
        .base_dir(workspace().join("sample-project"))
        .target(Vendor::Nvptx, &["sm_80"])
        .target(Vendor::Host, &[])
        .cache(CacheSetting::At(local.to_path_buf()))
        .remote_cache(store)
        .kernel("kernels/vadd.mlir")
        .kernel("kernels/saxpy.mlir");
    build
}

/// Every file under `dir` with its bytes, by path relative to `dir`.
pub(super) fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap();
            (e.path().strip_prefix(dir).unwrap().to_path_buf(), bytes)
        })
        .collect();
    files.sort();
    files
}

/// Two runners: the first compiles everything and fills the store, the second (fresh target
/// directory, fresh local cache) compiles nothing and writes the same bytes.
fn two_runners_share(store: &str) {
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    let first = build(dirs[0].path(), dirs[1].path(), store, false);
    assert_eq!(
        (first.compiled, first.cache_hits, first.remote_hits),
        (PAIRS, 0, 0),
        "{store}: {:?}",
        first.warnings
    );
    assert!(first.warnings.is_empty(), "{store}: {:?}", first.warnings);
    let second = build(dirs[2].path(), dirs[3].path(), store, false);
    assert_eq!(
        (second.compiled, second.cache_hits, second.remote_hits),
        (0, PAIRS, PAIRS),
        "{store}: the second runner compiles nothing: {:?}",
        second.warnings
    );
    assert_eq!(
        files(&dirs[2].path().join("gpu-build")),
        files(&dirs[0].path().join("gpu-build")),
        "{store}: byte-identical outputs"
    );
    // The remote hits went into the second runner's local cache: a third build there is local.
    let third = build(dirs[4].path(), dirs[3].path(), store, false);
    assert_eq!((third.cache_hits, third.remote_hits), (PAIRS, 0), "{store}");
    let lines = |report: &Report, what: &str| {
        let prefix = format!("cargo::warning=gpu-build cache {what}: ");
        report
            .cargo_directives
            .iter()
            .filter(|line| line.starts_with(&prefix))
            .count()
    };
    assert_eq!(
        [
            lines(&first, "miss"),
            lines(&second, "remote hit"),
            lines(&third, "local hit")
        ],
        [PAIRS; 3],
        "{store}: GPU_BUILD_VERBOSE names each lookup: {:?}",
        second.cargo_directives
    );
    let stats = CacheDir::new(dirs[3].path()).stats();
    let remote = stats
        .stores
        .iter()
        .find(|(name, _)| name.as_str() != "local")
        .map(|(_, s)| s.clone())
        .expect("the store's counts");
    assert_eq!((remote.builds, remote.hits), (2, PAIRS as u64), "{store}");
}

/// A server process, stopped when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The program `name` on PATH, or a visible skip (scripts/setup.sh installs them all).
fn program(name: &str, test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("skipped {test}: `{name}` is not installed (scripts/setup.sh installs it)");
    }
    found
}

impl Server {
    /// Starts `command`, a server listening on `port` with its files in `dir`, and waits until
    /// it accepts connections.
    fn start(command: &mut Command, port: u16, dir: tempfile::TempDir, what: &str) -> Server {
        let mut child = command.spawn().unwrap();
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{what} exited at start: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Server {
            child,
            port,
            _dir: dir,
        }
    }
}

pub(super) fn redis(test: &str) -> Option<Server> {
    let program = program("redis-server", test)?;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(program);
    command
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null());
    Some(Server::start(&mut command, port, dir, "redis-server"))
}

/// nginx serving a WebDAV folder (PUT, DELETE, MKCOL; PROPFIND from the dav-ext module).
pub(super) fn webdav(test: &str) -> Option<Server> {
    let program = program("nginx", test).or_else(|| {
        Path::new("/usr/sbin/nginx")
            .is_file()
            .then(|| PathBuf::from("/usr/sbin/nginx"))
    })?;
    let module = Path::new("/usr/lib/nginx/modules/ngx_http_dav_ext_module.so");
    if !module.is_file() {
        eprintln!("skipped {test}: nginx's dav-ext module is not installed (scripts/setup.sh)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let root = dir.path();
    std::fs::create_dir_all(root.join("www/cache")).unwrap();
    let config = format!(
        "daemon off; master_process off; pid {root}/nginx.pid; error_log {root}/error.log;
load_module {module};
events {{}}
http {{
  client_body_temp_path {root}/body; proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi; uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
  access_log off;
  server {{
    listen 127.0.0.1:{port};
    root {root}/www;
    client_max_body_size 0;
    location / {{
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on;
      autoindex on;
    }}
  }}
}}
",
        root = root.display(),
        module = module.display()
    );
    std::fs::write(root.join("nginx.conf"), config).unwrap();
    let mut command = Command::new(program);
    command
        .arg("-c")
        .arg(root.join("nginx.conf"))
        .arg("-p")
        .arg(root)
        .stderr(Stdio::null());
    Some(Server::start(&mut command, port, dir, "nginx"))
}

/// moto's S3 server with the bucket `gpu-cache`, and AWS's variables pointing at it.
pub(super) fn s3(test: &str) -> Option<Server> {
    let python = program("python3", test)?;
    let has_moto = Command::new(&python)
        .args(["-c", "import moto.server"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_moto {
        eprintln!("skipped {test}: moto's S3 server is not installed (scripts/setup.sh)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(python);
    command
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = Server::start(&mut command, port, dir, "moto");
    // Test credentials for a local server, in this test's own process.
    std::env::set_var("AWS_ACCESS_KEY_ID", "gpu-build-test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "gpu-build-test-secret");
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "PUT /gpu-cache HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "creating the bucket: {answer}"
    );
    Some(server)
}

#[test]
fn two_runners_share_a_redis_store() {
    if !rerun::in_own_process(module_path!(), "two_runners_share_a_redis_store", &[]) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let Some(server) = redis("two_runners_share_a_redis_store") else {
        return;
    };
    two_runners_share(&format!("redis://127.0.0.1:{}/0", server.port));
}

#[test]
fn two_runners_share_a_webdav_store() {
    if !rerun::in_own_process(module_path!(), "two_runners_share_a_webdav_store", &[]) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let Some(server) = webdav("two_runners_share_a_webdav_store") else {
        return;
    };
    two_runners_share(&format!("webdav://127.0.0.1:{}/cache", server.port));
}

#[test]
fn two_runners_share_an_s3_store() {
    if !rerun::in_own_process(module_path!(), "two_runners_share_an_s3_store", &[]) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let Some(_server) = s3("two_runners_share_an_s3_store") else {
        return;
    };
    two_runners_share("s3://gpu-cache/team");
}

#[test]
fn two_runners_share_a_directory() {
    if !rerun::in_own_process(module_path!(), "two_runners_share_a_directory", &[]) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let store = tempfile::tempdir().unwrap();
    two_runners_share(&format!("file://{}", store.path().display()));
}

/// Entries of a directory store, by path.
pub(super) fn store_entries(store: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = files(&store.join("v1"))
        .into_iter()
        .map(|(path, _)| store.join("v1").join(path))
        .collect();
    entries.sort();
    entries
}

#[test]
fn damaged_and_foreign_entries_are_detected_recompiled_and_replaced() {
    if !rerun::in_own_process(
        module_path!(),
        "damaged_and_foreign_entries_are_detected_recompiled_and_replaced",
        &[],
    ) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let store = tempfile::tempdir().unwrap();
    let address = format!("file://{}", store.path().display());
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    build(dirs[0].path(), dirs[1].path(), &address, false);
    let entries = store_entries(store.path());
    assert_eq!(entries.len(), PAIRS);
    let originals: Vec<Vec<u8>> = entries.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // One entry damaged (a byte flipped in the middle), one replaced by another key's entry.
    let mut damaged = originals[0].clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    std::fs::write(&entries[0], damaged).unwrap();
    std::fs::write(&entries[1], &originals[2]).unwrap();

    let second = build(dirs[2].path(), dirs[3].path(), &address, false);
    assert_eq!(
        (second.compiled, second.remote_hits),
        (2, PAIRS - 2),
        "both bad entries recompiled, the others used"
    );
    assert_eq!(
        files(&dirs[2].path().join("gpu-build")),
        files(&dirs[0].path().join("gpu-build")),
        "nothing of the bad entries reached the outputs"
    );
    let stats = CacheDir::new(dirs[3].path()).stats();
    assert_eq!(stats.stores[&address].rejected, 2);
    // Replaced in the store by what this build compiled.
    let now: Vec<Vec<u8>> = entries.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(now, originals, "the store holds intact entries again");
    assert_eq!(
        CacheDir::new(store.path()).verify().removed,
        Vec::<PathBuf>::new()
    );
}

#[test]
fn read_only_mode_reads_and_writes_nothing() {
    if !rerun::in_own_process(
        module_path!(),
        "read_only_mode_reads_and_writes_nothing",
        &[],
    ) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let store = tempfile::tempdir().unwrap();
    let address = format!("file://{}", store.path().display());
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let untrusted = build(dirs[0].path(), dirs[1].path(), &address, true);
    assert_eq!(untrusted.compiled, PAIRS);
    assert_eq!(
        store_entries(store.path()),
        Vec::<PathBuf>::new(),
        "nothing written"
    );
    // A store filled by a trusted build still serves a read-only one.
    build(
        dirs[2].path(),
        tempfile::tempdir().unwrap().path(),
        &address,
        false,
    );
    let before = files(store.path());
    let reader = build(
        dirs[3].path(),
        tempfile::tempdir().unwrap().path(),
        &address,
        true,
    );
    assert_eq!(reader.remote_hits, PAIRS);
    assert_eq!(
        files(store.path()),
        before,
        "a read-only build changes nothing there"
    );
}

/// A server that accepts connections and never answers.
fn black_hole() -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        while !stopped.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, stop)
}

#[test]
fn a_store_that_never_answers_costs_at_most_a_second_and_no_credentials_leak() {
    if !rerun::in_own_process(
        module_path!(),
        "a_store_that_never_answers_costs_at_most_a_second_and_no_credentials_leak",
        &[],
    ) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    for scheme in ["redis", "webdav"] {
        let (port, stop) = black_hole();
        let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
        let address = format!("{scheme}://user:s3cret-pw@127.0.0.1:{port}/0");
        let report = build(dirs[0].path(), dirs[1].path(), &address, false);
        stop.store(true, Ordering::SeqCst);
        assert_eq!(report.compiled, PAIRS);
        let cache_time = report.timings.get(Stage::Cache);
        assert!(
            cache_time <= Duration::from_secs(1),
            "{scheme}: the dead store cost {cache_time:?}"
        );
        let warning = report.warnings.join("\n");
        assert!(
            warning.contains(&format!(
                "{scheme}://127.0.0.1:{port}/0 failed (no answer within"
            )),
            "{scheme}: {warning}"
        );
        assert!(!warning.contains("s3cret"), "{warning}");
        for (path, bytes) in files(dirs[0].path())
            .into_iter()
            .chain(files(dirs[1].path()))
        {
            assert!(
                !bytes.windows(6).any(|w| w == b"s3cret"),
                "{}: holds the store's password",
                path.display()
            );
        }
    }
}

/// What a store does once it breaks.
#[derive(Clone, Copy, PartialEq)]
enum Breaks {
    /// Every connection cut, later ones refused: a killed server.
    Dies,
    /// Connections kept open and new ones accepted, nothing answered: a hung server.
    Hangs,
}

/// Forwards connections to `target` until more than `budget` bytes went to it, then breaks.
fn breaking_proxy(target: u16, budget: u64, breaks: Breaks) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = Arc::new(AtomicU64::new(0));
    let broken = Arc::new(AtomicBool::new(false));
    let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        while !(breaks == Breaks::Dies && broken.load(Ordering::SeqCst)) {
            let Ok((client, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            if broken.load(Ordering::SeqCst) {
                streams.lock().unwrap().push(client);
                continue;
            }
            let server = TcpStream::connect(("127.0.0.1", target)).unwrap();
            streams
                .lock()
                .unwrap()
                .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
            for (mut from, mut to, count) in [
                (
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    true,
                ),
                (server, client, false),
            ] {
                let (sent, broken, streams) = (sent.clone(), broken.clone(), streams.clone());
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 65536];
                    while let Ok(n) = from.read(&mut buffer) {
                        if n == 0 || broken.load(Ordering::SeqCst) {
                            break;
                        }
                        if count && sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64 > budget {
                            broken.store(true, Ordering::SeqCst);
                            if breaks == Breaks::Dies {
                                for stream in streams.lock().unwrap().iter() {
                                    let _ = stream.shutdown(Shutdown::Both);
                                }
                            }
                            break;
                        }
                        if to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        }
        // A killed server's listener goes: later connections are refused.
    });
    port
}

#[test]
fn a_store_killed_during_the_build_is_a_warning_and_the_build_succeeds() {
    if !rerun::in_own_process(
        module_path!(),
        "a_store_killed_during_the_build_is_a_warning_and_the_build_succeeds",
        &[],
    ) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let Some(server) = redis("a_store_killed_during_the_build") else {
        return;
    };
    // Dies during the first upload (an entry is several KB; lookups are a few hundred bytes).
    let port = breaking_proxy(server.port, 2048, Breaks::Dies);
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let report = build(
        dirs[0].path(),
        dirs[1].path(),
        &format!("redis://127.0.0.1:{port}"),
        false,
    );
    assert_eq!(report.compiled, PAIRS);
    let warning = report.warnings.join("\n");
    assert!(
        warning.contains(&format!("the shared store redis://127.0.0.1:{port} failed")),
        "{warning}"
    );
    // The local cache has everything.
    assert_eq!(CacheDir::new(dirs[1].path()).verify().intact, PAIRS);
}

/// A store that answers the lookups, then goes silent during the first upload: the end of the
/// build waits for uploads only while they make progress.
#[test]
fn a_store_that_hangs_during_the_build_costs_about_a_second() {
    if !rerun::in_own_process(
        module_path!(),
        "a_store_that_hangs_during_the_build_costs_about_a_second",
        &[],
    ) {
        return; // it ran in a process of its own: its builds set `GPU_BUILD_VERBOSE`
    }
    let test = "a_store_that_hangs_during_the_build";
    let (Some(redis), Some(webdav)) = (redis(test), webdav(test)) else {
        return;
    };
    for (scheme, server) in [("redis", redis.port), ("webdav", webdav.port)] {
        let port = breaking_proxy(server, 2048, Breaks::Hangs);
        let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
        let address = format!("{scheme}://127.0.0.1:{port}/0");
        let report = build(dirs[0].path(), dirs[1].path(), &address, false);
        assert_eq!(report.compiled, PAIRS);
        let warning = report.warnings.join("\n");
        // Whichever gives up first, the store's client (Redis has a response timeout of its
        // own) or the end of the build's wait for progress, the build says the store failed.
        assert!(
            warning.contains(&format!("the shared store {address} failed (")),
            "{warning}"
        );
        // The wait ends 800 ms after the last progress (`cache/remote.rs`'s STALL), where the
        // clients' own timeouts would take 20 s or more: 2 s tells the two apart with room for
        // a loaded machine (1 s failed by 25 ms while another build ran).
        let cache_time = report.timings.get(Stage::Cache);
        assert!(
            cache_time <= Duration::from_secs(2),
            "{scheme}: the hung store cost {cache_time:?}"
        );
    }
}
