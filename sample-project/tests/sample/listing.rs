//! The sample program's first screen: the table of embedded objects fits its longest values
//! (every row's columns line up) and says what a host object is instead of a size of 0.

use std::process::Command;

#[test]
fn the_table_of_objects_lines_up_and_names_host_objects_linked_in() {
    let output = Command::new(env!("CARGO_BIN_EXE_sample-project"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let table: Vec<&str> = stdout
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .collect();
    assert!(table[0].starts_with("module"), "{stdout}");
    // Columns line up: the kernels column starts at the same place in every row.
    let kernels_at = table[0].find("kernels").unwrap();
    for row in &table[1..] {
        let before = &row[..kernels_at];
        assert!(before.ends_with("  "), "a column overflows: {row}");
        let fields: Vec<&str> = before.split_whitespace().collect();
        let size = fields[4..].join(" ");
        if fields[1] == "host" {
            assert_eq!(size, "linked in", "{row}");
        } else {
            assert!(size.parse::<usize>().is_ok_and(|n| n > 0), "{row}");
        }
    }
    assert!(table.iter().any(|row| row.contains(" host ")), "{stdout}");
    // What loading each object asks of the driver, read from the object when it was built.
    let loads_with_at = table[0].find("loads with").unwrap();
    for row in &table[1..] {
        let fields: Vec<&str> = row[..kernels_at].split_whitespace().collect();
        let needs = &row[loads_with_at..];
        let expected = match (fields[1], fields[3]) {
            ("nvptx", "isa") => "PTX ISA ",
            ("nvptx", "bin") => "built by CUDA 12.",
            ("amdgpu", "bin") => "code object v5",
            _ => "-",
        };
        assert!(needs.starts_with(expected), "{expected}: {row}");
    }
}

/// After the table: without a GPU, what each driver found on a line of its own; then each
/// device's results under one heading naming the device once.
#[test]
fn each_driver_gets_a_line_and_each_device_one_heading() {
    let output = Command::new(env!("CARGO_BIN_EXE_sample-project"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    if stdout.contains("No GPU found") {
        for driver in ["CUDA", "HIP", "Level Zero", "Vulkan", "OpenCL"] {
            let lines = stdout
                .lines()
                .filter(|line| line.starts_with(&format!("  {driver}: ")))
                .count();
            assert_eq!(lines, 1, "{driver}: {stdout}");
        }
    }
    let lines: Vec<&str> = stdout.lines().collect();
    let headings: Vec<&str> = lines
        .windows(2)
        .filter(|pair| pair[1].starts_with("  kernel "))
        .map(|pair| pair[0])
        .collect();
    assert!(
        headings.iter().any(|h| h.starts_with("host CPU")),
        "{stdout}"
    );
    for (i, heading) in headings.iter().enumerate() {
        assert!(
            !headings[..i].contains(heading),
            "{heading} twice: {stdout}"
        );
        // The device's name, then its arch: not two parenthesized names in a row.
        assert!(!heading.contains(") ("), "{heading}");
    }
    // Results are indented under their heading, one per kernel.
    let vadd_rows = stdout.lines().filter(|l| l.starts_with("  vadd ")).count();
    assert_eq!(vadd_rows, headings.len(), "{stdout}");
}
