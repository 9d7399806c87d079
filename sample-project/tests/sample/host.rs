//! Every sample kernel through its launch stub on the host CPU, against the plain Rust
//! reference: integers (vadd's sums of small values) exactly, floats within the stated tolerance.

use gpu_embed::Device;

/// This module's tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    crate::rerun::memcheck_module(module_path!());
}

#[test]
fn every_sample_kernel_runs_on_the_host_and_matches_the_reference() {
    let host = Device::host();
    // Run again by `every_cpu_level_runs_every_kernel` at a lower level than the processor's.
    if let Ok(cpu) = std::env::var("GPU_EMBED_HOST_CPU") {
        assert!(
            host.name().ends_with(&format!(", {cpu})")),
            "{}",
            host.name()
        );
    }
    for (kernel, run) in sample_project::run_all(&host) {
        let run = run.unwrap_or_else(|e| panic!("{kernel}: {e}"));
        assert_eq!(run.kernel, kernel);
        assert!(
            run.object.starts_with("host "),
            "{kernel} ran {}",
            run.object
        );
        assert!(
            run.max_error <= run.tolerance,
            "{kernel}: max error {} above {}",
            run.max_error,
            run.tolerance
        );
    }
}

/// x86-64 host objects carry a copy of each kernel per CPU level (baseline, v3, v4); the
/// processor here runs its highest, so the others run through `GPU_EMBED_HOST_CPU`: this
/// binary's kernel test again, at each level up to the processor's.
#[test]
fn every_cpu_level_runs_every_kernel() {
    use gpu_manifest::targets::host::X86_64_CPUS;
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: CPU levels are x86-64's");
        return;
    }
    let name = Device::host().name().to_string();
    let highest = X86_64_CPUS
        .iter()
        .position(|cpu| name.ends_with(&format!(", {cpu})")))
        .unwrap_or_else(|| panic!("the host device's name gives its CPU level: {name}"));
    for cpu in &X86_64_CPUS[..=highest] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &crate::rerun::test_name(
                    module_path!(),
                    "every_sample_kernel_runs_on_the_host_and_matches_the_reference",
                ),
            ])
            .env("GPU_EMBED_HOST_CPU", cpu)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "{cpu}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
