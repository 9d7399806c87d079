//! The double's record: a line per call (`call NAME ARGS -> CODE`), per violation of the
//! driver's rules (`violation NAME: WHAT`), per launch as the image reads it (`launch ...`), and
//! at exit a line per thing never freed (`leak ...`), appended to `GPU_DOUBLE_LOG`; and the calls
//! `GPU_DOUBLE_FAIL` names failed.

use crate::config::config;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

struct Log {
    file: Option<std::fs::File>,
    calls: HashMap<String, u64>,
}

fn log() -> &'static Mutex<Log> {
    static LOG: std::sync::OnceLock<Mutex<Log>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let file = config().log.as_ref().and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        });
        Mutex::new(Log {
            file,
            calls: HashMap::new(),
        })
    })
}

/// Appends one line to the record.
pub fn line(text: &str) {
    let mut log = log().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(file) = &mut log.file {
        let _ = writeln!(file, "{text}");
    }
}

/// Counts a call of `name` and returns the code it is to fail with, if `GPU_DOUBLE_FAIL` names
/// this call (logged as `injected`).
pub fn injected(name: &str) -> Option<i32> {
    let count = {
        let mut log = log().lock().unwrap_or_else(|e| e.into_inner());
        let count = log.calls.entry(name.to_string()).or_insert(0);
        *count += 1;
        *count
    };
    let failure = config()
        .failures
        .iter()
        .find(|f| f.call == name && f.nth.is_none_or(|nth| nth == count))?;
    line(&format!("injected {name} #{count} -> {}", failure.code));
    Some(failure.code)
}
