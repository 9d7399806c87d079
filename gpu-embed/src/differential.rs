//! Differential checks for tests: one computation on every device found, each result compared
//! with the host's within a tolerance — what `gpu-build run --device all` does for whole MLIR
//! programs, for the Rust code that launches kernels. The host device is the reference: its
//! code is the plainest CPU code of the same kernel, and it is on every machine.

use crate::{Device, Result};

/// Where `device`'s values first differ from `host`'s: the index and both values (or the
/// lengths, when those differ). Values agree within `tolerance` relative to the larger
/// magnitude, absolutely below 1; NaN agrees with NaN only.
pub fn first_mismatch<T: Copy + Into<f64>>(
    host: &[T],
    device: &[T],
    tolerance: f64,
) -> Option<String> {
    if host.len() != device.len() {
        return Some(format!(
            "{} values, the host's {}",
            device.len(),
            host.len()
        ));
    }
    host.iter()
        .zip(device)
        .enumerate()
        .find_map(|(index, (&want, &got))| {
            let (want, got): (f64, f64) = (want.into(), got.into());
            let scale = want.abs().max(got.abs()).max(1.0);
            let agree = (want.is_nan() && got.is_nan()) || (want - got).abs() <= tolerance * scale;
            (!agree).then(|| format!("index {index}: {got}, the host's {want}"))
        })
}

/// Runs `compute` on the host device, then on every other device found ([`Device::all`]), and
/// compares each result with the host's ([`first_mismatch`]). `Ok`: a line per device saying
/// it agreed; `Err`: a line per device that differed (where) or failed (why), after those that
/// agreed. An error on the host is returned as it is: there is nothing to compare with.
pub fn on_every_device<T: Copy + Into<f64>>(
    tolerance: f64,
    mut compute: impl FnMut(&Device) -> Result<Vec<T>>,
) -> Result<std::result::Result<Vec<String>, String>> {
    let host = Device::host();
    let reference = compute(&host)?;
    let mut agreed = vec![format!("{}: the reference", host.name())];
    let mut problems = Vec::new();
    for device in Device::all().iter().filter(|d| !d.is_same(&host)) {
        let name = format!("{} ({})", device.name(), device.vendor());
        match compute(device) {
            Ok(values) => match first_mismatch(&reference, &values, tolerance) {
                None => agreed.push(format!("{name}: same as the host")),
                Some(mismatch) => problems.push(format!("{name}: differs at {mismatch}")),
            },
            Err(error) => problems.push(format!("{name}: failed: {error}")),
        }
    }
    Ok(if problems.is_empty() {
        Ok(agreed)
    } else {
        Err(agreed
            .into_iter()
            .chain(problems)
            .collect::<Vec<_>>()
            .join("\n"))
    })
}

#[cfg(test)]
mod tests {
    use super::first_mismatch;

    #[test]
    fn values_within_the_tolerance_agree() {
        assert_eq!(
            first_mismatch(&[1.0f32, 2.5, 1e6], &[1.0, 2.500001, 1e6 + 1.0], 1e-5),
            None
        );
        assert_eq!(first_mismatch(&[f32::NAN], &[f32::NAN], 0.0), None);
        assert_eq!(first_mismatch::<i32>(&[], &[], 0.0), None);
    }

    /// Seeded differences: each is found, with where.
    #[test]
    fn a_value_off_a_nan_or_another_length_is_named() {
        assert_eq!(
            first_mismatch(&[1i32, 2, 3], &[1, 2, 4], 0.0).as_deref(),
            Some("index 2: 4, the host's 3")
        );
        assert!(first_mismatch(&[1.0f64], &[f64::NAN], 1.0).is_some());
        assert_eq!(
            first_mismatch(&[1u8, 2], &[1], 0.0).as_deref(),
            Some("1 values, the host's 2")
        );
    }
}
