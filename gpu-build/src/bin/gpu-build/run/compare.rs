//! How `gpu-build run --device all` compares two runs' outputs: line by line, word by word,
//! numbers within a relative tolerance, addresses (`0x…`) not at all. Plain text in, so that
//! `gpu-build/tests/command/every_device.rs` tests it directly (a seeded difference among them).

/// Where `output` first differs from `reference`: the line, and both versions of it. Words
/// are compared one by one; numbers within `tolerance`, relative to the larger (an absolute
/// `tolerance` near zero), and addresses (`0x…`) not at all.
pub fn first_difference(reference: &str, output: &str, tolerance: f64) -> Option<String> {
    let (expected, found): (Vec<&str>, Vec<&str>) =
        (reference.lines().collect(), output.lines().collect());
    (0..expected.len().max(found.len())).find_map(|index| {
        let (want, got) = (expected.get(index), found.get(index));
        if let (Some(want), Some(got)) = (want, got) {
            if lines_agree(want, got, tolerance) {
                return None;
            }
        }
        let show = |text: Option<&&str>| text.map_or("(no line)".to_string(), |t| format!("`{t}`"));
        Some(format!(
            "line {}: {}, here {}",
            index + 1,
            show(want),
            show(got)
        ))
    })
}

fn lines_agree(want: &str, got: &str, tolerance: f64) -> bool {
    let words = |line: &str| -> Vec<String> {
        line.split(|c: char| c.is_whitespace() || ",[]()={}:".contains(c))
            .filter(|word| !word.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (want, got) = (words(want), words(got));
    want.len() == got.len()
        && want.iter().zip(&got).all(|(a, b)| {
            if a == b || (a.starts_with("0x") && b.starts_with("0x")) {
                return true;
            }
            match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => {
                    let scale = x.abs().max(y.abs()).max(1.0);
                    (x - y).abs() <= tolerance * scale || (x.is_nan() && y.is_nan())
                }
                _ => false,
            }
        })
}
