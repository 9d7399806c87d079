//! Devices: found once per process, from every driver that loads (`discovery.rs`); each keeps
//! the modules loaded on it (`modules.rs`).

mod discovery;
mod modules;

pub(crate) use discovery::format_uuid;
use discovery::{discovery, parse_uuid};
pub use modules::FunctionSlot;
use modules::Loaded;
pub(crate) use modules::LoadedFunction;

use crate::binary::{Binary, Vendor};
use crate::driver::{self, DeviceHandle, DeviceLimits, Driver, EventHandle, FoundDevice};
use crate::error::{Error, ErrorKind, Result};
use crate::select::DeviceArch;
use crate::trace::event;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

/// Device memory at one moment, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes free now.
    pub free: u64,
    /// Bytes in all.
    pub total: u64,
}

/// A GPU the program can launch kernels on.
#[derive(Clone)]
pub struct Device {
    /// Devices are found once per process and live as long (see `Inner`): a reference, so
    /// that the buffers, streams and marks that name their device copy a pointer, not a count
    /// each launch would change.
    inner: &'static Inner,
}

/// A device's state. Devices are found once per process and kept in statics
/// ([`Device::gpus`], [`Device::host`]), so this is never dropped: modules stay loaded for the
/// life of the process.
struct Inner {
    found: FoundDevice,
    /// Loaded modules with their kernels, in the order they were loaded (a program has a few).
    modules: Mutex<Vec<Loaded>>,
    /// The kernel launched last on the device, on any stream: what a fault reported later, by a
    /// synchronization or a copy, most likely came from.
    last_launch: LastLaunchSlot,
    /// Buffers' work is no longer ordered across streams (`Device::disable_tracking`).
    untracked: AtomicBool,
    /// Tracking's marker events nothing holds any more, to record again
    /// (`Driver::create_marker_event`): an operation then costs a recording, not a creation.
    markers: Mutex<Vec<EventHandle>>,
    /// The driver's `orders_all_work` and `streams_follow_the_default_stream`, asked once:
    /// each launch's tracking reads them (two calls through the driver's vtable per launch).
    orders_all_work: bool,
    streams_follow_the_default_stream: bool,
}

/// Marker events kept per device at most; more are destroyed.
const POOLED_MARKERS: usize = 256;

/// A device's driver, the device current on the thread while this lives (`Device::current`).
pub(crate) struct Current {
    driver: &'static dyn Driver,
    /// What the thread had current before, put back on drop (none: nothing to put back).
    previous: Option<DeviceHandle>,
}

impl std::ops::Deref for Current {
    type Target = dyn Driver;

    fn deref(&self) -> &(dyn Driver + 'static) {
        self.driver
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            self.driver.restore(previous);
        }
    }
}

/// A kernel launch, remembered to name in the report of a fault found later: one per kernel
/// function on a device, for the life of the process as the function (`modules.rs`).
pub(crate) struct LastLaunch {
    pub binary: &'static Binary,
    pub kernel: &'static str,
}

/// The launch a device, stream or event was last told of: a pointer, written with each launch
/// without a lock (a lock per launch was a fifth of the stub's own cost).
#[derive(Default)]
pub(crate) struct LastLaunchSlot(AtomicPtr<LastLaunch>);

impl LastLaunchSlot {
    pub(crate) fn set(&self, launch: Option<&'static LastLaunch>) {
        let pointer = launch.map_or(std::ptr::null_mut(), |launch| {
            (launch as *const LastLaunch).cast_mut()
        });
        self.0.store(pointer, Ordering::Release);
    }

    pub(crate) fn get(&self) -> Option<&'static LastLaunch> {
        // SAFETY: null or a `&'static LastLaunch` that `set` stored, never written through.
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }
}

/// A kernel fault names the launch it most likely came from: GPUs report faults of queued work
/// at a later synchronization, where the failing call says nothing about which kernel it was.
pub(crate) fn name_faulting_launch(error: Error, last: Option<&LastLaunch>, on: &str) -> Error {
    match last {
        Some(launch) if error.kind() == ErrorKind::KernelFault => error.map_message(|message| {
            format!(
                "{message} (the last kernel launched {on} was `{}` of gpu.module @{})",
                launch.kernel,
                launch.binary.name()
            )
        }),
        _ => error,
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Device({} {} {})",
            self.vendor(),
            self.name(),
            self.inner.found.arch
        )
    }
}

impl Device {
    /// Every GPU of every driver found: NVIDIA (CUDA) first, then AMD (HIP), then Vulkan
    /// devices (any maker's GPUs, and devices that run on the CPU such as Mesa's lavapipe),
    /// then OpenCL devices that take SPIR-V (Intel's GPUs and CPU runtime); a GPU with several
    /// drivers is listed by each. An error (never a panic) names the libraries
    /// tried when no driver loads.
    pub fn gpus() -> Result<Vec<Device>> {
        discovery().all.clone()
    }

    /// One line per GPU driver, in discovery order: the devices it found (those that run on the
    /// CPU marked so), or why it found none (`CUDA: no CUDA driver: tried libcuda.so.1 (not
    /// found)`). For telling a user why there is no GPU, a line each.
    pub fn discovery_report() -> Vec<String> {
        discovery().report.clone()
    }

    /// The devices drivers found but cannot run kernels on, each named with the reason (an
    /// OpenCL device whose driver takes no SPIR-V, such as PoCL 3.1; a CUDA device in the
    /// prohibited compute mode), after discovery.
    pub fn passed_over() -> Vec<String> {
        discovery();
        driver::registry::passed_over()
    }

    /// The device at `index` of [`Device::all`] (GPUs in discovery order, then the host).
    pub fn by_index(index: usize) -> Result<Device> {
        let all = Device::all();
        let count = all.len();
        all.into_iter().nth(index).ok_or_else(|| {
            Error::new(
                ErrorKind::NoDevice,
                format!(
                    "no device {index}: there are {count} ({})",
                    Device::listing()
                ),
            )
        })
    }

    /// The one device whose name contains `name` (case ignored), e.g. `"H100"`, `"llvmpipe"`,
    /// `"host"`: an error when none or several do, naming them all.
    pub fn by_name(name: &str) -> Result<Device> {
        let wanted = name.to_lowercase();
        let mut matching: Vec<Device> = Device::all()
            .into_iter()
            .filter(|d| d.name().to_lowercase().contains(&wanted))
            .collect();
        match matching.len() {
            1 => Ok(matching.remove(0)),
            0 => Err(Error::new(
                ErrorKind::NoDevice,
                format!(
                    "no device's name contains `{name}`; the devices: {}",
                    Device::listing()
                ),
            )),
            _ => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "several devices' names contain `{name}`: {}; use Device::by_index or \
                     Device::by_uuid",
                    matching
                        .iter()
                        .map(Device::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// The device whose UUID (as `nvidia-smi -L`, `rocm-smi --showuniqueid` or
    /// `vulkaninfo` print it) is `uuid`: 16 bytes, or 32 hexadecimal digits with or without
    /// dashes and a `GPU-` prefix.
    pub fn by_uuid(uuid: &str) -> Result<Device> {
        let bytes = parse_uuid(uuid)?;
        Device::all()
            .into_iter()
            .find(|d| d.uuid() == Some(bytes))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoDevice,
                    format!(
                        "no device has UUID {uuid}; the devices: {}",
                        Device::listing()
                    ),
                )
            })
    }

    /// The device's UUID from its driver; `None` for the host.
    pub fn uuid(&self) -> Option<[u8; 16]> {
        self.inner.found.uuid
    }

    /// Every device with its index and UUID, for messages.
    fn listing() -> String {
        Device::all()
            .iter()
            .enumerate()
            .map(|(index, device)| match device.uuid() {
                Some(uuid) => format!("{index}: {} ({})", device.name(), format_uuid(uuid)),
                None => format!("{index}: {}", device.name()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The CPU this program runs on, which runs kernels built with the `host` target.
    pub fn host() -> Device {
        static HOST_DEVICE: OnceLock<Device> = OnceLock::new();
        HOST_DEVICE
            .get_or_init(|| Device::from_found(driver::registry::host_device()))
            .clone()
    }

    /// Every GPU, then the host.
    pub fn all() -> Vec<Device> {
        let mut devices = Device::gpus().unwrap_or_default();
        devices.push(Device::host());
        devices
    }

    /// [`Device::default_gpu`], or the host when there is none.
    pub fn default_device() -> Device {
        Device::default_gpu().unwrap_or_else(|_| Device::host())
    }

    /// The first real GPU: CUDA's, then HIP's, then a Vulkan GPU (discrete, integrated or
    /// virtual). A Vulkan device that runs on the CPU (lavapipe) is listed by [`Device::gpus`]
    /// but never chosen here: the host target runs kernels faster on the same CPU. An error
    /// naming what was tried when there is none.
    pub fn default_gpu() -> Result<Device> {
        discovery().real.clone()?.into_iter().next().ok_or_else(|| {
            Error::new(
                ErrorKind::NoDevice,
                "GPU drivers loaded but report no device",
            )
        })
    }

    fn from_found(found: FoundDevice) -> Device {
        Device {
            // Leaked on purpose: a device lives for the process (it is made only by discovery
            // and `Device::host`, each once per process, into statics).
            inner: Box::leak(Box::new(Inner {
                orders_all_work: found.driver.orders_all_work(),
                streams_follow_the_default_stream: found.driver.streams_follow_the_default_stream(),
                found,
                modules: Mutex::new(Vec::new()),
                untracked: AtomicBool::new(false),
                markers: Mutex::default(),
                last_launch: LastLaunchSlot::default(),
            })),
        }
    }

    /// The device's name (`NVIDIA H200`, `AMD Instinct MI210`, `host CPU (16 threads)`).
    pub fn name(&self) -> &str {
        &self.inner.found.name
    }

    /// Which driver runs it.
    pub fn vendor(&self) -> Vendor {
        self.inner.found.driver.vendor()
    }

    /// What object selection matches against: `sm_90`, `gfx90a:sramecc+:xnack-`.
    pub fn arch(&self) -> DeviceArch {
        DeviceArch {
            vendor: self.vendor(),
            arch: self.inner.found.arch.clone(),
            name: self.name().to_string(),
            driver_version: self.inner.found.driver_version,
        }
    }

    /// What the device has and what a launch on it may ask for.
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.found.limits
    }

    /// Free and total device memory, in bytes, as the driver reports them now.
    pub fn memory(&self) -> Result<MemoryInfo> {
        let (free, total) = self.current()?.memory_info().map_err(|e| self.context(e))?;
        Ok(MemoryInfo { free, total })
    }

    /// The driver's handle of the device, for mixing with other libraries on the same device:
    /// the primary `CUcontext` (CUDA), the device ordinal (HIP), null (host). On Vulkan it points
    /// at gpu-embed's own state of the device, which only this crate can use.
    pub fn raw_handle(&self) -> *mut std::ffi::c_void {
        self.inner.found.raw.interop_pointer()
    }

    /// A marker event from the device's pool, if it has one.
    pub(crate) fn pooled_marker(&self) -> Option<EventHandle> {
        self.inner
            .markers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
    }

    /// Keeps a marker event nothing holds for the next operation; `false` when the pool is
    /// full (the caller destroys what comes back).
    pub(crate) fn pool_marker(&self, marker: EventHandle) -> Result<(), EventHandle> {
        let mut markers = self.inner.markers.lock().unwrap_or_else(|p| p.into_inner());
        if markers.len() < POOLED_MARKERS {
            markers.push(marker);
            return Ok(());
        }
        Err(marker)
    }

    /// Whether both handles are the same device.
    pub fn is_same(&self, other: &Device) -> bool {
        std::ptr::eq(self.inner, other.inner)
    }

    /// A number only this device has (never 0), for a comparison without a reference.
    pub(crate) fn identity(&self) -> usize {
        self.inner as *const Inner as usize
    }

    /// Lets this device's kernels read and write `peer`'s memory directly (NVLink or PCIe
    /// peer-to-peer: `cuCtxEnablePeerAccess`, `hipDeviceEnablePeerAccess`); enabled already is
    /// no error. Peer copies ([`Stream::copy_from_peer`](crate::Stream::copy_from_peer)) need no access: without it the driver
    /// routes them through the host. An error between devices of different drivers, for the
    /// host and Vulkan devices, and where the two GPUs cannot reach each other.
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        if self.is_same(peer) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{} is the device itself, not a peer", peer.name()),
            ));
        }
        if self.vendor() != peer.vendor() {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "peer access between {} and {}: only two GPUs of one driver (CUDA or HIP) \
                     reach each other's memory",
                    self.name(),
                    peer.name()
                ),
            ));
        }
        self.current()?
            .enable_peer_access(&peer.inner.found.raw)
            .map_err(|e| {
                e.map_message(|message| {
                    format!("{message}: from {} to {}", self.name(), peer.name())
                })
            })
    }

    /// The driver's handle of the device (CUDA: its primary context; HIP: its ordinal).
    pub(crate) fn handle(&self) -> &DeviceHandle {
        &self.inner.found.raw
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        event!(debug, device = self.name(), "synchronize device");
        self.current()?.synchronize().map_err(|e| self.context(e))
    }

    /// Stops ordering buffers' work across streams on this device (cudarc's
    /// `disable_event_tracking`): work on one stream no longer waits for other streams' work on
    /// the same buffer, and no events are recorded for it (each buffer then waits for the whole
    /// device when dropped). For programs that order their streams with their own events and
    /// want to save the tracking's event per operation.
    ///
    /// # Safety
    /// From now on the caller orders, with events, all work on different streams that shares a
    /// buffer: a kernel that reads sizes or indices from a buffer another stream is still
    /// writing could otherwise reach outside the memory its launch's `# Safety` covers.
    pub unsafe fn disable_tracking(&self) {
        self.inner.untracked.store(true, Ordering::Relaxed);
    }

    /// Whether the device's driver orders every operation after all earlier ones and keeps
    /// freed memory until the work queued on it has run (then buffers need not track their
    /// work).
    pub(crate) fn orders_all_work(&self) -> bool {
        self.inner.orders_all_work
    }

    /// Whether the streams the device's driver makes start after the work queued on its
    /// default stream before them (`Driver::streams_follow_the_default_stream`).
    pub(crate) fn streams_follow_the_default_stream(&self) -> bool {
        self.inner.streams_follow_the_default_stream
    }

    /// Waits until everything queued on the device's default stream has run.
    pub(crate) fn synchronize_default_stream(&self) -> Result<()> {
        self.current()?
            .synchronize_stream(&crate::driver::StreamHandle::DEFAULT)
            .map_err(|e| self.context(e))
    }

    /// Whether buffers' work is ordered across streams (see [`Device::disable_tracking`]).
    pub(crate) fn tracks(&self) -> bool {
        !self.inner.untracked.load(Ordering::Relaxed)
    }

    /// The driver, with this device made current on the calling thread until the returned
    /// guard goes, which puts back what the thread had current before (another library's CUDA
    /// context stays that library's; a thread that had none keeps the device's).
    pub(crate) fn current(&self) -> Result<Current> {
        let driver = self.inner.found.driver;
        let previous = driver
            .make_current(&self.inner.found.raw)
            .map_err(|e| self.context(e))?;
        Ok(Current { driver, previous })
    }

    /// Adds the device to a driver error.
    /// A kernel fault also names the last kernel launched on the device.
    pub(crate) fn context(&self, error: Error) -> Error {
        let error = error.map_message(|message| format!("{message} on {}", self.name()));
        name_faulting_launch(error, self.inner.last_launch.get(), "on the device")
    }

    /// Remembers a kernel launched on the device.
    pub(crate) fn launched(&self, launch: &'static LastLaunch) {
        self.inner.last_launch.set(Some(launch));
    }

    /// The kernel launched last on the device, on any stream.
    pub(crate) fn last_launch(&self) -> Option<&'static LastLaunch> {
        self.inner.last_launch.get()
    }
}
