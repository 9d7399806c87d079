//! `gpu-build run --device all`: the program on every kind of device found, each run in a
//! child process of its own (a run loads its device's runtime and JIT-compiles the host code
//! into the process), and each device's output compared with the host's (the first run's),
//! numbers within a relative tolerance, addresses (`0x…`) ignored. The run fails, naming the
//! first differing line, when a device's output differs or its run fails.

use super::compare::first_difference;
use super::{choose_device, DeviceChoice, RunRequest};
use clap::ValueEnum;
use std::process::Command;

/// Runs `request`'s program on every device found (every `--device` choice that names one, the
/// host first) and compares the outputs with the first run's (the host's): the reference
/// output first, then a line per device.
pub fn run_on_every_device(request: &RunRequest) -> Result<(), String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to run it per device: {e}"))?;
    let mut reference: Option<(String, String)> = None;
    // Each device's line, and whether it agreed.
    let mut lines: Vec<(String, bool)> = Vec::new();
    let mut not_found = Vec::new();
    for choice in DeviceChoice::value_variants() {
        if matches!(choice, DeviceChoice::Default | DeviceChoice::All) {
            continue;
        }
        let Some(name) = choice.to_possible_value().map(|v| v.get_name().to_string()) else {
            continue;
        };
        let Ok(device) = choose_device(*choice) else {
            not_found.push(name);
            continue;
        };
        let mut command = Command::new(&program);
        command
            .arg("run")
            .arg(request.file)
            .args(["--device", &name, "--entry-point", request.entry_point])
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
        lines.push(if !output.status.success() {
            (
                format!("{label}: the run failed (its messages are above)"),
                false,
            )
        } else if let Some((first, want)) = &reference {
            match first_difference(want, &stdout, request.tolerance) {
                None => (format!("{label}: same output as {first}"), true),
                Some(at) => (format!("{label}: differs from {first} at {at}"), false),
            }
        } else {
            reference = Some((name, stdout));
            (format!("{label}: ran (the reference)"), true)
        });
    }
    if let Some((_, output)) = &reference {
        print!("{output}");
    }
    for (line, _) in &lines {
        println!("{line}");
    }
    if !not_found.is_empty() {
        println!("not found: {}", not_found.join(", "));
    }
    let problems: Vec<&str> = lines
        .iter()
        .filter(|(_, agreed)| !agreed)
        .map(|(line, _)| line.as_str())
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}
