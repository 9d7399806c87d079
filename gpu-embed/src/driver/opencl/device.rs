//! One OpenCL device as the driver uses it (`Gpu`): what discovery reads of it (name, SPIR-V
//! versions, shared virtual memory, limits), why a device cannot be used, its context and
//! queues, and the table of its shared-virtual-memory allocations.

use super::api::{check, info_bytes, info_string, info_value, Api};
use super::queue::{lock, Queue, Queues};
use super::sys;
use crate::driver::DeviceLimits;
use crate::error::{Error, ErrorKind, Result};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

/// What the driver reads of a device before it opens it.
pub(super) struct Description {
    pub name: String,
    pub cpu: bool,
    /// The newest SPIR-V version its `CL_DEVICE_IL_VERSION` lists.
    pub spirv: Option<(u32, u32)>,
    pub svm: sys::cl_bitfield,
}

/// A device opened: its context, queues, limits and allocations. Leaked by discovery (devices
/// live as long as the program).
pub(super) struct Gpu {
    pub api: &'static Api,
    pub context: sys::cl_context,
    pub device: sys::cl_device_id,
    pub name: String,
    pub limits: DeviceLimits,
    pub cpu: bool,
    /// The newest SPIR-V version it takes.
    pub spirv: (u32, u32),
    /// Whether kernels may use any host address (fine-grained system SVM): then a pointer
    /// argument outside this driver's allocations is passed on, not refused.
    pub system_svm: bool,
    /// Whether it has `double` (`Float64` kernels).
    pub fp64: bool,
    /// Whether it has `cl_khr_fp16` (`Float16` kernels).
    pub fp16: bool,
    /// Whether it has OpenCL's 64-bit atomics (`cl_khr_int64_base_atomics` and
    /// `cl_khr_int64_extended_atomics`: `Int64Atomics` kernels).
    pub int64_atomics: bool,
    pub queues: Queues,
    /// Live allocations: address → bytes.
    allocations: Mutex<BTreeMap<u64, usize>>,
}

// SAFETY: the context and device are only passed to OpenCL calls, which are thread-safe for
// them; the rest is owned data behind locks.
unsafe impl Send for Gpu {}
// SAFETY: as for Send.
unsafe impl Sync for Gpu {}

fn device_query<'a>(
    api: &'a Api,
    device: sys::cl_device_id,
    param: sys::cl_uint,
) -> impl Fn(usize, *mut c_void, *mut usize) -> sys::cl_int + 'a {
    move |size, value, size_ret| {
        // SAFETY: a device the platform listed; `value` holds `size` bytes.
        unsafe { api.clGetDeviceInfo(device, param, size, value, size_ret) }
    }
}

/// `SPIR-V_1.0 SPIR-V_1.4` → (1, 4).
fn newest_spirv(il_versions: &str) -> Option<(u32, u32)> {
    il_versions
        .split_whitespace()
        .filter_map(|il| {
            let (major, minor) = il.strip_prefix("SPIR-V_")?.split_once('.')?;
            Some((major.parse().ok()?, minor.parse().ok()?))
        })
        .max()
}

impl Description {
    pub(super) fn read(
        api: &Api,
        platform_name: &str,
        device: sys::cl_device_id,
    ) -> Result<Description> {
        let name = info_string(
            "clGetDeviceInfo",
            device_query(api, device, sys::CL_DEVICE_NAME),
        )?;
        let kind: sys::cl_device_type = info_value(
            "clGetDeviceInfo",
            device_query(api, device, sys::CL_DEVICE_TYPE),
        )?;
        // Devices of OpenCL 1.x answer CL_INVALID_VALUE for both: no SPIR-V, no SVM.
        let il = info_string(
            "clGetDeviceInfo",
            device_query(api, device, sys::CL_DEVICE_IL_VERSION),
        )
        .unwrap_or_default();
        let svm: sys::cl_bitfield = info_value(
            "clGetDeviceInfo",
            device_query(api, device, sys::CL_DEVICE_SVM_CAPABILITIES),
        )
        .unwrap_or(0);
        Ok(Description {
            name: format!("{name} ({platform_name})"),
            cpu: kind & sys::CL_DEVICE_TYPE_CPU as sys::cl_device_type != 0,
            spirv: newest_spirv(&il),
            svm,
        })
    }

    /// Why the driver cannot run kernels on the device, if it cannot.
    pub(super) fn unusable(&self) -> Option<String> {
        if self.spirv.is_none() {
            return Some(format!(
                "{}: takes no SPIR-V (its CL_DEVICE_IL_VERSION lists none), which the opencl \
                 target's objects are",
                self.name
            ));
        }
        if self.svm & sys::CL_DEVICE_SVM_COARSE_GRAIN_BUFFER as sys::cl_bitfield == 0 {
            return Some(format!(
                "{}: has no shared virtual memory (CL_DEVICE_SVM_COARSE_GRAIN_BUFFER), which \
                 gpu-embed's device addresses are",
                self.name
            ));
        }
        None
    }
}

impl Gpu {
    /// Opens a usable device: a context of its own and its default queue.
    pub(super) fn open(
        api: &'static Api,
        device: sys::cl_device_id,
        description: Description,
    ) -> Result<Gpu> {
        let query = |param| device_query(api, device, param);
        let mut status = 0;
        // SAFETY: one device the platform listed; no properties, no callback.
        let context = unsafe {
            api.clCreateContext(
                std::ptr::null(),
                1,
                &device,
                None,
                std::ptr::null_mut(),
                &mut status,
            )
        };
        check(status, "clCreateContext")?;
        let sizes = info_bytes("clGetDeviceInfo", query(sys::CL_DEVICE_MAX_WORK_ITEM_SIZES))?;
        let sizes: Vec<usize> = sizes
            .chunks_exact(std::mem::size_of::<usize>())
            .map(|chunk| usize::from_ne_bytes(chunk.try_into().unwrap_or_default()))
            .collect();
        let dimension = |d: usize| {
            sizes
                .get(d)
                .map_or(1, |&s| u32::try_from(s).unwrap_or(u32::MAX))
        };
        let local: u64 = info_value("clGetDeviceInfo", query(sys::CL_DEVICE_LOCAL_MEM_SIZE))?;
        let global: u64 = info_value("clGetDeviceInfo", query(sys::CL_DEVICE_GLOBAL_MEM_SIZE))?;
        let units: u32 = info_value("clGetDeviceInfo", query(sys::CL_DEVICE_MAX_COMPUTE_UNITS))?;
        let group: usize =
            info_value("clGetDeviceInfo", query(sys::CL_DEVICE_MAX_WORK_GROUP_SIZE))?;
        let fp64: u64 =
            info_value("clGetDeviceInfo", query(sys::CL_DEVICE_DOUBLE_FP_CONFIG)).unwrap_or(0);
        let extensions = info_string("clGetDeviceInfo", query(sys::CL_DEVICE_EXTENSIONS))?;
        let limits = DeviceLimits {
            multiprocessors: units,
            warp_size: subgroup_size(api, device),
            max_threads_per_block: u32::try_from(group).unwrap_or(u32::MAX),
            max_block: [dimension(0), dimension(1), dimension(2)],
            // OpenCL bounds only the global size (grid × block, checked at launch).
            max_grid: [u32::MAX; 3],
            shared_memory_per_block: local,
            shared_memory_per_block_optin: local,
            // Managed memory is fine-grained buffer SVM: the host uses it at its address
            // without a map, while kernels run on other memory.
            managed_memory: description.svm
                & sys::CL_DEVICE_SVM_FINE_GRAIN_BUFFER as sys::cl_bitfield
                != 0,
            total_memory: global,
        };
        let queue = Queue::new(api, context, device)?;
        Ok(Gpu {
            api,
            context,
            device,
            name: description.name,
            limits,
            cpu: description.cpu,
            spirv: description.spirv.unwrap_or((1, 0)),
            system_svm: description.svm & sys::CL_DEVICE_SVM_FINE_GRAIN_SYSTEM as sys::cl_bitfield
                != 0,
            fp64: fp64 != 0,
            fp16: extensions.split_whitespace().any(|e| e == "cl_khr_fp16"),
            int64_atomics: ["cl_khr_int64_base_atomics", "cl_khr_int64_extended_atomics"]
                .iter()
                .all(|wanted| extensions.split_whitespace().any(|e| e == *wanted)),
            queues: Queues::new(queue),
            allocations: Mutex::new(BTreeMap::new()),
        })
    }

    /// `bytes` of coarse-grained shared virtual memory (at least one byte, 128-byte aligned).
    pub(super) fn alloc(&self, bytes: usize) -> Result<u64> {
        self.svm_alloc(bytes, sys::CL_MEM_READ_WRITE as sys::cl_svm_mem_flags)
    }

    /// `bytes` of managed memory: fine-grained buffer SVM, which the host reads and writes at
    /// the address kernels use, without mapping it (the device's `managed_memory` limit says
    /// it has it).
    pub(super) fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        if !self.limits.managed_memory {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "{} has no managed memory (no fine-grained buffer SVM, \
                     CL_DEVICE_SVM_FINE_GRAIN_BUFFER)",
                    self.name
                ),
            ));
        }
        self.svm_alloc(
            bytes,
            (sys::CL_MEM_READ_WRITE | sys::CL_MEM_SVM_FINE_GRAIN_BUFFER) as sys::cl_svm_mem_flags,
        )
    }

    fn svm_alloc(&self, bytes: usize, flags: sys::cl_svm_mem_flags) -> Result<u64> {
        // SAFETY: a live context; flags this device supports (coarse-grained SVM, which every
        // device opened has, or fine-grained buffer SVM, checked by the caller).
        let pointer = unsafe { self.api.clSVMAlloc(self.context, flags, bytes.max(1), 128) };
        if pointer.is_null() {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("clSVMAlloc of {bytes} bytes failed on {}", self.name),
            ));
        }
        lock(&self.allocations).insert(pointer as u64, bytes.max(1));
        Ok(pointer as u64)
    }

    /// Frees an allocation once the work queued before it on any stream has run, without
    /// waiting: `clEnqueueSVMFree` on the default queue, which the default stream's rule orders
    /// after every stream's queued work. An address this driver did not hand out (or freed
    /// already) is ignored.
    pub(super) fn free(&self, pointer: u64) {
        if lock(&self.allocations).remove(&pointer).is_none() {
            return;
        }
        let api = self.api;
        let queue = &self.queues.default;
        let mut pointers = [pointer as *mut c_void];
        let queued = self
            .queues
            .enqueue(queue, None, "clEnqueueSVMFree", |count, list, event| {
                // SAFETY: a live queue of this context and one allocation of it, freed once (it
                // left the table above); no callback, so the runtime frees it with clSVMFree;
                // `list` holds `count` live events.
                unsafe {
                    api.clEnqueueSVMFree(
                        queue.raw(),
                        1,
                        pointers.as_mut_ptr(),
                        None,
                        std::ptr::null_mut(),
                        count,
                        list,
                        event,
                    )
                }
            });
        if queued.is_err() {
            // Kernels and copies queued on any stream may still use it.
            let _ = self.queues.synchronize();
            // SAFETY: an allocation of this context, freed once, unused by queued work (all of
            // it has run).
            unsafe { api.clSVMFree(self.context, pointer as *mut c_void) };
        }
    }

    /// Whether `address .. address + bytes` lies in one live allocation.
    pub(super) fn allocated(&self, address: u64, bytes: u64) -> bool {
        let allocations = lock(&self.allocations);
        allocations
            .range(..=address)
            .next_back()
            .is_some_and(|(&start, &size)| {
                address
                    .checked_add(bytes)
                    .is_some_and(|end| end <= start + size as u64)
            })
    }

    /// Bytes allocated and not freed.
    pub(super) fn allocated_bytes(&self) -> u64 {
        lock(&self.allocations).values().map(|&b| b as u64).sum()
    }
}

/// The largest subgroup size the device reports (`CL_DEVICE_SUB_GROUP_SIZES_INTEL`, where it
/// has Intel's extension); 1 where it reports none.
fn subgroup_size(api: &Api, device: sys::cl_device_id) -> u32 {
    const CL_DEVICE_SUB_GROUP_SIZES_INTEL: sys::cl_uint = 0x4108;
    info_bytes(
        "clGetDeviceInfo",
        device_query(api, device, CL_DEVICE_SUB_GROUP_SIZES_INTEL),
    )
    .ok()
    .and_then(|bytes| {
        bytes
            .chunks_exact(std::mem::size_of::<usize>())
            .filter_map(|chunk| Some(usize::from_ne_bytes(chunk.try_into().ok()?)))
            .max()
    })
    .and_then(|size| u32::try_from(size).ok())
    .unwrap_or(1)
}
