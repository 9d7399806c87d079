//! An object linked into a shared library, as `ld.lld -shared OBJECT -o LIBRARY`: an hsaco from
//! an AMDGPU object, a loadable host module from a host object.
//!
//! Where gpu-build was built with lld's libraries (Debian's `liblld-22-dev`: build.rs looks),
//! lld links in this process ([`lld.cpp`](lld.cpp)); otherwise, or after lld reported that its
//! state is unusable, the `ld.lld` program found for the target does. A ld.lld process costs its
//! start, loading LLVM (~15-30 ms), for well under a millisecond of linking, once per AMDGPU
//! object; the bytes are the same (the linked-in lld is the installed one's library).

use crate::error::{Error, ErrorKind, Result};
use crate::toolkit::program_identity;
use std::path::{Path, PathBuf};

/// How this process links shared libraries: lld linked in, or a `ld.lld` program.
#[derive(Debug, Clone)]
pub(crate) enum Linker {
    #[cfg(gpu_build_lld)]
    InProcess,
    Program(PathBuf),
}

impl Linker {
    /// lld in this process where it is linked in and usable, else the program `found` (none:
    /// neither, and the caller says what to install).
    pub fn new(found: Option<&Path>) -> Option<Linker> {
        #[cfg(gpu_build_lld)]
        if in_process::usable() {
            return Some(Linker::InProcess);
        }
        found.map(|path| Linker::Program(path.to_path_buf()))
    }

    /// The linker's identity for cache keys: lld's version, or the program's.
    pub fn identity(found: Option<&Path>) -> String {
        match Linker::new(found) {
            #[cfg(gpu_build_lld)]
            Some(Linker::InProcess) => format!("{} (in process)", in_process::version()),
            Some(Linker::Program(path)) => program_identity(Some(&path)),
            None => program_identity(None),
        }
    }

    /// `object` linked into a shared library, in a scratch directory under `scratch` (ld.lld
    /// reads and writes files either way). `what` names the object in messages.
    pub fn shared_library(&self, object: &[u8], scratch: &Path, what: &str) -> Result<Vec<u8>> {
        let io =
            |e: std::io::Error| Error::new(ErrorKind::Io, format!("preparing ld.lld input: {e}"));
        let dir = tempfile::Builder::new()
            .prefix("ld.lld-")
            .tempdir_in(scratch)
            .map_err(io)?;
        let input = dir.path().join("kernel.o");
        let output = dir.path().join("kernel.so");
        std::fs::write(&input, object).map_err(io)?;
        match self {
            #[cfg(gpu_build_lld)]
            Linker::InProcess => in_process::link_shared(&input, &output).map_err(|message| {
                Error::new(
                    ErrorKind::ToolFailed,
                    format!("lld failed linking {what}:\n{message}"),
                )
            })?,
            Linker::Program(ld_lld) => run_program(ld_lld, &input, &output, what)?,
        }
        std::fs::read(&output)
            .map_err(|e| Error::new(ErrorKind::Io, format!("reading ld.lld output: {e}")))
    }
}

fn run_program(ld_lld: &Path, input: &Path, output: &Path, what: &str) -> Result<()> {
    let result = std::process::Command::new(ld_lld)
        .arg("-shared")
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .map_err(|e| {
            Error::new(
                ErrorKind::ToolFailed,
                format!("cannot run {}: {e}", ld_lld.display()),
            )
        })?;
    if !result.status.success() {
        return Err(Error::new(
            ErrorKind::ToolFailed,
            format!(
                "{} failed linking {what} ({}):\n{}",
                ld_lld.display(),
                result.status,
                String::from_utf8_lossy(&result.stderr).trim()
            ),
        ));
    }
    Ok(())
}

#[cfg(gpu_build_lld)]
mod in_process {
    use std::ffi::{c_char, c_int, CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    extern "C" {
        fn gpu_build_lld_link_shared(
            input: *const c_char,
            output: *const c_char,
            message: *mut *mut c_char,
            can_run_again: *mut c_int,
        ) -> c_int;
        fn gpu_build_lld_version() -> *mut c_char;
    }

    /// lld keeps its state in globals: one link at a time in this process.
    static LLD: Mutex<()> = Mutex::new(());
    /// Cleared when lld says it cannot run again (a crash it recovered from); later links run
    /// the ld.lld program.
    static USABLE: AtomicBool = AtomicBool::new(true);

    pub fn usable() -> bool {
        USABLE.load(Ordering::Acquire)
    }

    /// Takes over a string the C++ side allocated with strdup.
    fn take(text: *mut c_char) -> String {
        if text.is_null() {
            return String::new();
        }
        // SAFETY: non-null pointers come from strdup in lld.cpp: NUL-terminated, owned by us.
        let owned = unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated by strdup (malloc), freed once, here.
        unsafe { libc::free(text.cast()) };
        owned
    }

    pub fn version() -> String {
        // SAFETY: takes no arguments; returns a strdup'ed string (or null), taken over by `take`.
        take(unsafe { gpu_build_lld_version() })
    }

    /// Links `input` into the shared library `output`; lld's messages on failure.
    pub fn link_shared(input: &Path, output: &Path) -> Result<(), String> {
        let path = |path: &Path| {
            CString::new(path.as_os_str().as_bytes())
                .map_err(|_| format!("{} contains a NUL byte", path.display()))
        };
        let (input, output) = (path(input)?, path(output)?);
        let _one_at_a_time = LLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut message = std::ptr::null_mut();
        let mut can_run_again: c_int = 1;
        // SAFETY: both paths are NUL-terminated and outlive the call; `message` and
        // `can_run_again` are valid for writes; the lock makes this the only lld call running.
        let code = unsafe {
            gpu_build_lld_link_shared(
                input.as_ptr(),
                output.as_ptr(),
                &mut message,
                &mut can_run_again,
            )
        };
        let message = take(message);
        if can_run_again == 0 {
            USABLE.store(false, Ordering::Release);
        }
        if code != 0 {
            return Err(if message.trim().is_empty() {
                format!("lld exited with {code}")
            } else {
                message.trim().to_string()
            });
        }
        Ok(())
    }
}

#[cfg(all(test, gpu_build_lld))]
mod tests {
    use super::Linker;
    use crate::cargo::CargoOutput;
    use crate::toolkit::find_ld_lld;

    /// A gfx90a kernel's relocatable object, from the installed `llc-22`.
    fn amdgpu_object(dir: &std::path::Path) -> Vec<u8> {
        let source = dir.join("kernel.ll");
        std::fs::write(
            &source,
            "define amdgpu_kernel void @store_one(ptr addrspace(1) %p) {\n  store i32 1, ptr addrspace(1) %p\n  ret void\n}\n",
        )
        .unwrap();
        let object = dir.join("kernel.o");
        let status = std::process::Command::new("llc-22")
            .args([
                "-mtriple=amdgcn-amd-amdhsa",
                "-mcpu=gfx90a",
                "-filetype=obj",
            ])
            .arg(&source)
            .arg("-o")
            .arg(&object)
            .status()
            .expect("llc-22 runs");
        assert!(status.success());
        std::fs::read(object).unwrap()
    }

    #[test]
    fn lld_in_the_process_links_what_the_ld_lld_program_links() {
        let dir = tempfile::tempdir().unwrap();
        let object = amdgpu_object(dir.path());
        let program = find_ld_lld(&CargoOutput::default(), &[])
            .found
            .expect("ld.lld-22 is installed (scripts/setup.sh)");
        let by_program = Linker::Program(program)
            .shared_library(&object, dir.path(), "a test object")
            .unwrap();
        let in_process = Linker::InProcess
            .shared_library(&object, dir.path(), "a test object")
            .unwrap();
        assert_eq!(&in_process[..4], b"\x7fELF");
        assert_eq!(
            u16::from_le_bytes([in_process[16], in_process[17]]),
            3,
            "a shared object (ET_DYN)"
        );
        assert!(in_process == by_program, "the same bytes as ld.lld's");
    }

    #[test]
    fn a_bad_object_is_lld_s_error_and_lld_links_again_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = Linker::InProcess
            .shared_library(b"not an object", dir.path(), "a test object")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("lld failed linking a test object") && error.contains("kernel.o"),
            "{error}"
        );
        let object = amdgpu_object(dir.path());
        let linked = Linker::InProcess
            .shared_library(&object, dir.path(), "a test object")
            .unwrap();
        assert_eq!(&linked[..4], b"\x7fELF");
        assert!(super::in_process::usable());
    }
}
