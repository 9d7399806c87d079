//! The double's state, shared by both vendors' entry points: devices and contexts here, memory
//! (`memory.rs`), modules (`modules.rs`), streams and events (`streams.rs`), capture and graphs
//! (`graphs.rs`), launches (`launch.rs`) and what is never freed (`leaks.rs`). One lock guards
//! it all; every entry point takes it once (`call`).

mod graphs;
mod launch;
mod leaks;
mod memory;
mod modules;
mod streams;

pub use launch::LaunchRequest;
pub use memory::{MemoryKind, Pattern};

use crate::config::config;
use crate::record;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock};

pub use crate::vendor::Vendor;

/// What went wrong, as each vendor's façade turns it into its own error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidValue,
    InvalidHandle,
    InvalidContext,
    InvalidDevice,
    OutOfMemory,
    NotReady,
    NoBinary,
    InvalidImage,
    UnsupportedPtx,
    IllegalAddress,
    CaptureUnsupported,
    CaptureInvalidated,
    CaptureWrongThread,
    NotFound,
    PeerAlreadyEnabled,
    HostAlreadyRegistered,
    HostNotRegistered,
    NotInitialized,
    DevicesUnavailable,
    InvalidPtx,
}

/// A failed call: its code, why, and whether the caller broke a rule (a violation, recorded) or
/// the driver would fail it in normal use (an event not yet reached, an injected failure).
#[derive(Debug)]
pub struct Fault {
    pub code: Code,
    pub message: String,
    pub violation: bool,
    /// A vendor's own code, from `GPU_DOUBLE_FAIL`.
    pub injected: Option<i32>,
}

impl Fault {
    /// The caller broke one of the driver's rules.
    pub fn violation(code: Code, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            violation: true,
            injected: None,
        }
    }

    /// A failure a correct caller meets too.
    pub fn expected(code: Code, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            violation: false,
            injected: None,
        }
    }
}

pub type Outcome<T> = Result<T, Fault>;

pub struct Device {
    pub vendor: Vendor,
    /// The vendor's ordinal.
    pub ordinal: usize,
    /// `sm_90`, `gfx90a:sramecc+:xnack-`.
    pub chip: String,
    pub memory_used: u64,
    /// Devices whose memory kernels on this one may use (peer access enabled).
    pub peers: Vec<usize>,
    /// CUDA: the primary context while retained, and how often.
    pub primary: Option<u64>,
    pub primary_retains: u32,
}

impl Device {
    pub fn warp_size(&self) -> u32 {
        // gfx9 (CDNA included) runs wave64; RDNA (gfx10 on) HIP kernels run wave32.
        if self.vendor == Vendor::Hip && !self.chip.starts_with("gfx1") {
            64
        } else {
            32
        }
    }

    pub fn multiprocessors(&self) -> u32 {
        if self.vendor == Vendor::Cuda {
            132
        } else {
            104
        }
    }

    /// Shared memory a block may use without opting in, and with (CUDA's 227 KiB on sm_90).
    pub fn shared_per_block(&self) -> (u64, u64) {
        match self.vendor {
            Vendor::Cuda => (48 * 1024, 227 * 1024),
            Vendor::Hip => (64 * 1024, 64 * 1024),
        }
    }
}

pub struct Context {
    pub device: usize,
    pub alive: bool,
    /// Its legacy default stream.
    pub null_stream: u64,
}

pub struct World {
    next_handle: u64,
    /// Orders every queued operation (`streams.rs`).
    next_seq: u64,
    /// The device clock events read, in microseconds.
    clock: u64,
    pub devices: Vec<Device>,
    pub contexts: BTreeMap<u64, Context>,
    memory: memory::Memory,
    modules: modules::Modules,
    queues: streams::Queues,
    /// What each destroyed handle was, for "used after destroy".
    destroyed: BTreeMap<u64, &'static str>,
}

thread_local! {
    /// CUDA: the thread's current context (0: none).
    static CURRENT_CONTEXT: Cell<u64> = const { Cell::new(0) };
    /// HIP: the thread's current device ordinal.
    static CURRENT_HIP_DEVICE: Cell<usize> = const { Cell::new(0) };
    /// The stream this thread is capturing into, thread-local mode (0: none).
    static CAPTURING: Cell<u64> = const { Cell::new(0) };
}

fn world() -> &'static Mutex<World> {
    static WORLD: OnceLock<Mutex<World>> = OnceLock::new();
    WORLD.get_or_init(|| {
        leaks::report_at_exit();
        Mutex::new(World::new())
    })
}

/// Runs one entry point: counts it, fails it if `GPU_DOUBLE_FAIL` says so, runs `body` under the
/// lock and records the call and any violation.
pub fn call<T>(
    name: &str,
    args: impl Display,
    body: impl FnOnce(&mut World) -> Outcome<T>,
) -> Outcome<T> {
    if let Some(code) = record::injected(name) {
        return Err(Fault {
            code: Code::InvalidValue,
            message: "injected".into(),
            violation: false,
            injected: Some(code),
        });
    }
    let result = {
        let mut world = world().lock().unwrap_or_else(|e| e.into_inner());
        body(&mut world)
    };
    match &result {
        Ok(_) => record::line(&format!("call {name}({args}) -> ok")),
        Err(fault) => {
            record::line(&format!(
                "call {name}({args}) -> {:?}: {}",
                fault.code, fault.message
            ));
            if fault.violation {
                record::line(&format!("violation {name}: {}", fault.message));
            }
        }
    }
    result
}

impl World {
    fn new() -> World {
        let mut world = World {
            next_handle: 0x1000,
            next_seq: 1,
            clock: 0,
            devices: Vec::new(),
            contexts: BTreeMap::new(),
            memory: memory::Memory::default(),
            modules: modules::Modules::default(),
            queues: streams::Queues::default(),
            destroyed: BTreeMap::new(),
        };
        let config = config();
        for (ordinal, chip) in config.cuda_devices.iter().enumerate() {
            world.add_device(Vendor::Cuda, ordinal, chip);
        }
        for (ordinal, chip) in config.hip_devices.iter().enumerate() {
            let device = world.add_device(Vendor::Hip, ordinal, chip);
            // HIP has one context per device, alive for the process.
            world.new_context(device);
        }
        world
    }

    fn add_device(&mut self, vendor: Vendor, ordinal: usize, chip: &str) -> usize {
        self.devices.push(Device {
            vendor,
            ordinal,
            chip: chip.to_string(),
            memory_used: 0,
            peers: Vec::new(),
            primary: None,
            primary_retains: 0,
        });
        self.devices.len() - 1
    }

    pub fn handle(&mut self) -> u64 {
        self.next_handle += 0x10;
        self.next_handle
    }

    /// `what` was destroyed: later uses are reported as such.
    fn bury(&mut self, handle: u64, what: &'static str) {
        self.destroyed.insert(handle, what);
    }

    /// An unknown handle: used after destroy, or never made.
    fn unknown(&self, handle: u64, what: &str) -> Fault {
        match self.destroyed.get(&handle) {
            Some(was) => Fault::violation(
                Code::InvalidHandle,
                format!("{was} {handle:#x} used after it was destroyed"),
            ),
            None => Fault::violation(Code::InvalidHandle, format!("{handle:#x} is no {what}")),
        }
    }

    fn new_context(&mut self, device: usize) -> u64 {
        let id = self.handle();
        let stream = self.handle();
        let null_stream = self.queues.null_stream(id, stream);
        self.contexts.insert(
            id,
            Context {
                device,
                alive: true,
                null_stream,
            },
        );
        id
    }

    /// The device of a vendor's ordinal.
    pub fn device_index(&self, vendor: Vendor, ordinal: i64) -> Outcome<usize> {
        self.devices
            .iter()
            .position(|d| d.vendor == vendor && d.ordinal as i64 == ordinal)
            .ok_or_else(|| Fault::violation(Code::InvalidDevice, format!("no device {ordinal}")))
    }

    pub fn device_count(&self, vendor: Vendor) -> usize {
        self.devices.iter().filter(|d| d.vendor == vendor).count()
    }

    /// CUDA: retains the device's primary context.
    pub fn retain_primary(&mut self, device: usize) -> u64 {
        let context = match self.devices[device].primary {
            Some(context) => context,
            None => self.new_context(device),
        };
        let device = &mut self.devices[device];
        device.primary = Some(context);
        device.primary_retains += 1;
        context
    }

    /// CUDA: releases a retain; the last one destroys the context and everything in it.
    pub fn release_primary(&mut self, device: usize) -> Outcome<()> {
        let state = &mut self.devices[device];
        let Some(context) = state.primary else {
            return Err(Fault::violation(
                Code::InvalidContext,
                format!(
                    "device {} has no retained primary context to release",
                    state.ordinal
                ),
            ));
        };
        state.primary_retains -= 1;
        if state.primary_retains == 0 {
            state.primary = None;
            self.destroy_context(context)?;
        }
        Ok(())
    }

    pub fn create_context(&mut self, device: usize) -> u64 {
        self.new_context(device)
    }

    pub fn destroy_context(&mut self, context: u64) -> Outcome<()> {
        self.live_context(context)?;
        self.synchronize_context(context);
        if let Some(c) = self.contexts.get_mut(&context) {
            c.alive = false;
        }
        self.bury(context, "context");
        Ok(())
    }

    /// `context` if it is a live one.
    pub fn live_context(&self, context: u64) -> Outcome<&Context> {
        match self.contexts.get(&context) {
            Some(c) if c.alive => Ok(c),
            Some(_) => Err(Fault::violation(
                Code::InvalidContext,
                format!("context {context:#x} used after it was destroyed"),
            )),
            None => Err(self.unknown(context, "context")),
        }
    }

    /// CUDA: the thread's current context, which must be live.
    pub fn current_context(&self) -> Outcome<u64> {
        let context = CURRENT_CONTEXT.get();
        if context == 0 {
            return Err(Fault::violation(
                Code::InvalidContext,
                "no context is current on this thread",
            ));
        }
        self.live_context(context)?;
        Ok(context)
    }

    pub fn current_context_raw() -> u64 {
        CURRENT_CONTEXT.get()
    }

    pub fn set_current_context(&self, context: u64) -> Outcome<()> {
        if context != 0 {
            self.live_context(context)?;
        }
        CURRENT_CONTEXT.set(context);
        Ok(())
    }

    /// HIP: the context of the thread's current device.
    pub fn hip_context(&self) -> Outcome<u64> {
        let device = self.device_index(Vendor::Hip, CURRENT_HIP_DEVICE.get() as i64)?;
        self.context_of_device(device)
    }

    pub fn context_of_device(&self, device: usize) -> Outcome<u64> {
        self.contexts
            .iter()
            .find(|(_, c)| c.device == device && c.alive)
            .map(|(id, _)| *id)
            .ok_or_else(|| Fault::violation(Code::InvalidContext, "the device has no context"))
    }

    pub fn hip_current_device() -> usize {
        CURRENT_HIP_DEVICE.get()
    }

    pub fn set_hip_device(&self, ordinal: i64) -> Outcome<()> {
        self.device_index(Vendor::Hip, ordinal)?;
        CURRENT_HIP_DEVICE.set(ordinal as usize);
        Ok(())
    }

    pub fn device_of_context(&self, context: u64) -> Outcome<usize> {
        Ok(self.live_context(context)?.device)
    }

    /// Lets kernels on `device` use `peer`'s memory.
    pub fn enable_peer(&mut self, device: usize, peer: usize) -> Outcome<()> {
        if device == peer {
            return Err(Fault::violation(
                Code::InvalidDevice,
                "peer access to the device itself",
            ));
        }
        if self.devices[device].peers.contains(&peer) {
            return Err(Fault::expected(
                Code::PeerAlreadyEnabled,
                "peer access is already enabled",
            ));
        }
        self.devices[device].peers.push(peer);
        Ok(())
    }

    /// Advances the device clock by `micros` and reads it.
    fn tick(&mut self, micros: u64) -> u64 {
        self.clock += micros;
        self.clock
    }

    /// A violation found while queued work runs, where no caller is waiting for an answer.
    fn late_violation(&self, message: String) {
        record::line(&format!("violation (while queued work ran): {message}"));
    }

    /// Whether this thread is capturing, in thread-local mode, into some stream: calls that
    /// may synchronize are then refused, and invalidate the capture (CUDA's "potentially unsafe
    /// API calls" during capture).
    pub fn refuse_during_capture(&mut self, what: &str) -> Outcome<()> {
        let capturing = CAPTURING.get();
        if capturing == 0 {
            return Ok(());
        }
        self.queues.invalidate(capturing, what);
        Err(Fault::violation(
            Code::CaptureUnsupported,
            format!("{what} while this thread captures stream {capturing:#x}"),
        ))
    }
}
