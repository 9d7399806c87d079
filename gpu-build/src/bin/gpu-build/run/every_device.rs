//! `gpu-build run --device all`: the program on every kind of device found, each run in a
//! child process of its own (a run loads its device's runtime and JIT-compiles the host code
//! into the process), and each device's output compared with the host's (the first run's),
//! numbers within a relative tolerance, addresses (`0x…`) ignored. The run fails, naming the
//! first differing line, when a device's output differs or its run fails.

use super::compare::first_difference;
use super::{choose_device, DeviceChoice, RunRequest};
use std::process::Command;

/// The devices `--device all` runs on, the host (the reference) first.
const DEVICES: [(DeviceChoice, &str); 5] = [
    (DeviceChoice::Host, "host"),
    (DeviceChoice::Cuda, "cuda"),
    (DeviceChoice::Hip, "hip"),
    (DeviceChoice::Vulkan, "vulkan"),
    (DeviceChoice::Opencl, "opencl"),
];

/// Runs `request`'s program on every device found and compares the outputs with the first
/// run's (the host's): the reference output first, then a line per device.
pub fn run_on_every_device(request: &RunRequest) -> Result<(), String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to run it per device: {e}"))?;
    let mut reference: Option<(String, String)> = None;
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let mut not_found = Vec::new();
    for (choice, name) in DEVICES {
        let Ok(device) = choose_device(choice) else {
            not_found.push(name);
            continue;
        };
        let mut command = Command::new(&program);
        command
            .arg("run")
            .arg(request.file)
            .args(["--device", name, "--entry-point", request.entry_point])
            .arg(format!("-O{}", request.opt_level));
        for library in request.shared_libs {
            command.arg("--shared-libs").arg(library);
        }
        let output = command
            .output()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let label = format!("{name} ({})", device.name());
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            eprintln!("{name}: {line}");
        }
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let line = if !output.status.success() {
            problems.push(format!("{label}: the run failed (its messages are above)"));
            format!("{label}: failed")
        } else if let Some((first, want)) = &reference {
            match first_difference(want, &stdout, request.tolerance) {
                None => format!("{label}: same output as {first}"),
                Some(difference) => {
                    let line = format!("{label}: differs from {first} at {difference}");
                    problems.push(line.clone());
                    line
                }
            }
        } else {
            reference = Some((name.to_string(), stdout));
            format!("{label}: ran (the reference)")
        };
        lines.push(line);
    }
    if let Some((_, output)) = &reference {
        print!("{output}");
    }
    for line in &lines {
        println!("{line}");
    }
    if !not_found.is_empty() {
        println!("not found: {}", not_found.join(", "));
    }
    if reference.is_none() && problems.is_empty() {
        return Err("no device ran the program".to_string());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}
