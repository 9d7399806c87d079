//! Finding the devices, once per process, from every driver that loads; and device UUIDs as the
//! vendors' tools print them.

use super::Device;
use crate::driver;
use crate::error::{Error, ErrorKind, Result};
use std::sync::OnceLock;

/// The devices found, once per process: all of them, and the real GPUs among them (not the
/// Vulkan devices that run on the CPU).
pub(super) struct Discovery {
    pub(super) all: Result<Vec<Device>>,
    pub(super) real: Result<Vec<Device>>,
    /// One line per driver: what it found, or why it found nothing.
    pub(super) report: Vec<String>,
}

pub(super) fn discovery() -> &'static Discovery {
    static DEVICES: OnceLock<Discovery> = OnceLock::new();
    DEVICES.get_or_init(find_gpus)
}

type Probe<T> = std::result::Result<Result<Vec<T>>, String>;

fn find_gpus() -> Discovery {
    let (drivers, probes): (Vec<&'static str>, Vec<Probe<Device>>) = driver::registry::find_gpus()
        .into_iter()
        .map(|(driver, probe)| {
            let probe =
                probe.map(|found| found.map(|f| f.into_iter().map(Device::from_found).collect()));
            (driver, probe)
        })
        .unzip();
    let report = drivers
        .iter()
        .zip(&probes)
        .map(|(driver, probe)| match probe {
            Ok(Ok(devices)) => format!(
                "{driver}: {}",
                devices
                    .iter()
                    .map(|d| if d.inner.found.cpu {
                        format!("{} (runs on the CPU)", d.name())
                    } else {
                        d.name().to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ok(Err(error)) => format!("{driver}: {}", error.message()),
            Err(why) => format!("{driver}: {why}"),
        })
        .collect();
    let on_cpu: Vec<String> = probes
        .iter()
        .flat_map(|probe| match probe {
            Ok(Ok(devices)) => devices.as_slice(),
            _ => &[],
        })
        .filter(|d| d.inner.found.cpu)
        .map(|d| format!("{} ({})", d.name(), d.vendor()))
        .collect();
    let real: Vec<Probe<Device>> = probes
        .iter()
        .map(|probe| match probe {
            Ok(Ok(devices)) => Ok(Ok(devices
                .iter()
                .filter(|d| !d.inner.found.cpu)
                .cloned()
                .collect())),
            Ok(Err(error)) => Ok(Err(error.clone())),
            Err(why) => Err(why.clone()),
        })
        .collect();
    let mut real = gather(real);
    if !on_cpu.is_empty() {
        let note = format!(
            "; found only devices that run on the CPU, not chosen as GPUs: {} (the host target \
             is faster there; find them in Device::gpus())",
            on_cpu.join(", ")
        );
        real = match real {
            Ok(gpus) if gpus.is_empty() => {
                Err(Error::new(ErrorKind::NoDevice, format!("no GPU{note}")))
            }
            Err(error) => Err(error.map_message(|message| format!("{message}{note}"))),
            ok => ok,
        };
    }
    Discovery {
        all: gather(probes),
        real,
        report,
    }
}

/// Every driver's devices, CUDA's first (then HIP's, then Vulkan's). Each probe is `Err` when the driver's library does not
/// load, `Ok(Err)` when it loads but fails (no device, a driver older than its library), else
/// its devices. A failing driver does not hide another's devices; the result is an error only
/// when no driver gave any, and then it names every driver's reason.
fn gather<T>(probes: Vec<std::result::Result<Result<Vec<T>>, String>>) -> Result<Vec<T>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let mut failed = Vec::new();
    for probe in probes {
        match probe {
            Ok(Ok(devices)) => found.extend(devices),
            Ok(Err(error)) => failed.push(error.message().to_string()),
            Err(why) => missing.push(why),
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    match (failed.is_empty(), missing.is_empty()) {
        (true, true) => Ok(found),
        (true, false) => Err(Error::new(
            ErrorKind::NoDriver,
            format!("no GPU driver found: {}", missing.join("; ")),
        )),
        (false, _) => Err(Error::new(
            ErrorKind::NoDevice,
            format!(
                "no GPU: {}",
                failed
                    .into_iter()
                    .chain(missing)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )),
    }
}

/// `GPU-6c9a5b2e-...` or plain hexadecimal, dashes ignored: 16 bytes.
pub(super) fn parse_uuid(text: &str) -> Result<[u8; 16]> {
    let digits: String = text
        .trim()
        .trim_start_matches("GPU-")
        .chars()
        .filter(|&c| c != '-')
        .collect();
    let invalid = || {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("`{text}` is not a device UUID: 32 hexadecimal digits, dashes allowed"),
        )
    };
    if digits.len() != 32 || !digits.is_ascii() {
        return Err(invalid());
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
    }
    Ok(bytes)
}

/// The 8-4-4-4-12 spelling.
pub(crate) fn format_uuid(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(what: &str) -> std::result::Result<Result<Vec<&'static str>>, String> {
        Ok(Err(Error::new(ErrorKind::Driver, format!("{what} failed"))))
    }

    #[test]
    fn a_driver_that_fails_does_not_hide_another_drivers_devices() {
        let found = gather(vec![failing("cuInit"), Ok(Ok(vec!["gfx90a"]))]).unwrap();
        assert_eq!(found, ["gfx90a"]);
        let found = gather(vec![Ok(Ok(vec!["sm_90"])), failing("hipInit")]).unwrap();
        assert_eq!(found, ["sm_90"]);
        let found = gather(vec![Ok(Ok(vec!["sm_90"])), Ok(Ok(vec!["gfx90a"]))]).unwrap();
        assert_eq!(found, ["sm_90", "gfx90a"]);
    }

    #[test]
    fn no_device_anywhere_names_every_reason() {
        let error = gather::<&str>(vec![
            failing("cuInit"),
            Err("libamdhip64.so: not found".into()),
        ])
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NoDevice);
        assert!(error.message().contains("cuInit failed"), "{error}");
        assert!(
            error.message().contains("libamdhip64.so: not found"),
            "{error}"
        );
        let error = gather::<&str>(vec![
            Err("libcuda.so.1".into()),
            Err("libamdhip64.so".into()),
        ])
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NoDriver);
        assert_eq!(
            error.message(),
            "no GPU driver found: libcuda.so.1; libamdhip64.so"
        );
        assert!(gather::<&str>(vec![Ok(Ok(vec![]))]).unwrap().is_empty());
    }

    #[test]
    fn uuids_read_as_the_tools_print_them() {
        let bytes = parse_uuid("GPU-6c9a5b2e-0f3d-4c1a-8e55-0123456789ab").unwrap();
        assert_eq!(format_uuid(bytes), "6c9a5b2e-0f3d-4c1a-8e55-0123456789ab");
        assert_eq!(
            parse_uuid("6c9a5b2e0f3d4c1a8e550123456789AB").unwrap(),
            bytes
        );
        assert!(parse_uuid("6c9a5b2e").is_err());
        assert!(parse_uuid("zz9a5b2e0f3d4c1a8e550123456789ab").is_err());
    }
}
