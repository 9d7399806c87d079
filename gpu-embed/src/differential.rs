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

/// What [`on_every_device`] found: a line per device, and whether it agreed with the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The host's line first (the reference), then one per other device: that it agreed,
    /// where it first differed, or why it failed.
    pub devices: Vec<(String, bool)>,
}

impl Comparison {
    /// Whether every device agreed with the host.
    pub fn agreed(&self) -> bool {
        self.devices.iter().all(|(_, agreed)| *agreed)
    }

    /// Every device's line, one per line.
    pub fn report(&self) -> String {
        let lines: Vec<&str> = self.devices.iter().map(|(line, _)| line.as_str()).collect();
        lines.join("\n")
    }
}

/// Runs `compute` on the host device, then on every other device found ([`Device::all`]), and
/// compares each result with the host's ([`first_mismatch`]). An error on the host is returned
/// as it is: there is nothing to compare with; an error on another device is that device's line.
pub fn on_every_device<T: Copy + Into<f64>>(
    tolerance: f64,
    mut compute: impl FnMut(&Device) -> Result<Vec<T>>,
) -> Result<Comparison> {
    let host = Device::host();
    let reference = compute(&host)?;
    let mut devices = vec![(format!("{}: the reference", host.name()), true)];
    for device in Device::all().iter().filter(|d| !d.is_same(&host)) {
        let name = format!("{} ({})", device.name(), device.vendor());
        devices.push(match compute(device) {
            Ok(values) => match first_mismatch(&reference, &values, tolerance) {
                None => (format!("{name}: same as the host"), true),
                Some(mismatch) => (format!("{name}: differs at {mismatch}"), false),
            },
            Err(error) => (format!("{name}: failed: {error}"), false),
        });
    }
    Ok(Comparison { devices })
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
