//! The Vulkan loader, opened at run time, and the process's one instance (under the Khronos
//! validation layer when asked for), whose devices `mod.rs` opens.

use super::errors::{check, lock, vk_error};
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The library the loader is opened as, for messages.
const LIBRARY: &str = "libvulkan.so.1";
/// The Khronos validation layer.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";
/// Set to `1` to run every Vulkan device under the validation layer.
const VALIDATION_VARIABLE: &str = "GPU_EMBED_VULKAN_VALIDATION";

static VALIDATION: AtomicBool = AtomicBool::new(false);
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Runs the Vulkan instance (created once per process, when devices are first listed) under the
/// Khronos validation layer, with every warning and error it reports recorded for
/// [`take_vulkan_validation_messages`]; as `GPU_EMBED_VULKAN_VALIDATION=1` does. Has no effect
/// once the instance exists. For tests.
#[doc(hidden)]
pub fn enable_vulkan_validation() {
    VALIDATION.store(true, Ordering::SeqCst);
}

/// The validation layer's warnings and errors since the last call (see
/// [`enable_vulkan_validation`]), oldest first; clears them.
#[doc(hidden)]
pub fn take_vulkan_validation_messages() -> Vec<String> {
    std::mem::take(&mut *lock(&MESSAGES))
}

fn validation_requested() -> bool {
    VALIDATION.load(Ordering::SeqCst)
        || std::env::var(VALIDATION_VARIABLE).is_ok_and(|value| value == "1")
}

/// Records the validation layer's warnings and errors.
///
/// # Safety
/// Called by the Vulkan loader only, as `VK_EXT_debug_utils` specifies: `data` is null or
/// points at a callback data structure whose message is a NUL-terminated string, valid for the
/// call.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    let serious = vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR;
    if severity.intersects(serious) && !data.is_null() {
        // SAFETY: the layer passes valid callback data for the duration of the call; its message
        // is a NUL-terminated string or null.
        let message = unsafe { (*data).message_as_c_str() }
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_default();
        let level = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
            "error"
        } else {
            "warning"
        };
        lock(&MESSAGES).push(format!("{level}: {message}"));
    }
    vk::FALSE
}

/// The Vulkan loader and the instance made with it.
pub(crate) struct Vulkan {
    entry: ash::Entry,
    /// The name the loader was opened as, for messages.
    pub library: &'static str,
    instance: OnceLock<Result<Instance>>,
}

/// The process's instance: never destroyed (devices found once live as long as the program).
pub(crate) struct Instance {
    pub(super) instance: ash::Instance,
    /// The instance's API version (`VK_API_VERSION_1_3`, or the loader's when older).
    pub(super) api: u32,
    /// Kept alive with the instance: the messenger recording validation messages.
    _messenger: Option<vk::DebugUtilsMessengerEXT>,
}

/// The loader, or why it could not be opened (tried once per process).
pub(crate) fn driver() -> Result<&'static Vulkan, String> {
    static DRIVER: OnceLock<Result<Vulkan, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            // SAFETY: opening the Vulkan loader runs its initializers, as every Vulkan program
            // does; `ash` resolves the global entry points through `vkGetInstanceProcAddr`.
            match unsafe { ash::Entry::load() } {
                Ok(entry) => Ok(Vulkan {
                    entry,
                    library: LIBRARY,
                    instance: OnceLock::new(),
                }),
                Err(e) => {
                    let why = e.to_string();
                    let why = if why.contains("No such file") {
                        "not found".to_string()
                    } else {
                        why
                    };
                    Err(format!("no Vulkan loader: tried {LIBRARY} ({why})"))
                }
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Vulkan {
    pub(super) fn instance(&self) -> Result<&Instance> {
        self.instance
            .get_or_init(|| self.create_instance())
            .as_ref()
            .map_err(Clone::clone)
    }

    fn create_instance(&self) -> Result<Instance> {
        // SAFETY: a global command of a loaded loader.
        let loader = check(
            unsafe { self.entry.try_enumerate_instance_version() },
            || "vkEnumerateInstanceVersion".into(),
        )?
        .unwrap_or(vk::API_VERSION_1_0);
        if loader < vk::API_VERSION_1_1 {
            return Err(Error::new(
                ErrorKind::NoDevice,
                format!(
                    "the Vulkan loader is version {}.{}; gpu-embed needs Vulkan 1.1",
                    vk::api_version_major(loader),
                    vk::api_version_minor(loader)
                ),
            ));
        }
        let api = loader.min(vk::API_VERSION_1_3);
        let validation = validation_requested();
        let mut layers = Vec::new();
        let mut extensions = Vec::new();
        if validation {
            // SAFETY: a global command of a loaded loader.
            let available = check(
                unsafe { self.entry.enumerate_instance_layer_properties() },
                || "vkEnumerateInstanceLayerProperties".into(),
            )?;
            if !available
                .iter()
                .any(|layer| layer.layer_name_as_c_str() == Ok(VALIDATION_LAYER))
            {
                return Err(Error::new(
                    ErrorKind::NoDevice,
                    format!(
                        "Vulkan validation was requested ({VALIDATION_VARIABLE}=1 or \
                         enable_vulkan_validation), but the layer VK_LAYER_KHRONOS_validation is \
                         not installed (Debian: vulkan-validationlayers)"
                    ),
                ));
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let application = vk::ApplicationInfo::default()
            .application_name(c"gpu-embed")
            .engine_name(c"gpu-embed")
            .api_version(api);
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message));
        let mut create = vk::InstanceCreateInfo::default()
            .application_info(&application)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        if validation {
            // Messages of vkCreateInstance and vkDestroyInstance themselves.
            create = create.push_next(&mut messenger_info);
        }
        // SAFETY: a valid create info whose pointers outlive the call.
        let instance = unsafe { self.entry.create_instance(&create, None) }.map_err(|e| {
            let error = vk_error(e, "vkCreateInstance");
            if e == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
                // What the loader says when it finds no driver at all.
                Error::new(
                    ErrorKind::NoDevice,
                    format!("{} (no Vulkan driver (ICD) installed?)", error.message()),
                )
            } else {
                error
            }
        })?;
        let messenger = if validation {
            let debug = ash::ext::debug_utils::Instance::new(&self.entry, &instance);
            // SAFETY: the instance enables VK_EXT_debug_utils; a valid create info.
            Some(check(
                unsafe { debug.create_debug_utils_messenger(&messenger_info, None) },
                || "vkCreateDebugUtilsMessengerEXT".into(),
            )?)
        } else {
            None
        };
        Ok(Instance {
            instance,
            api,
            _messenger: messenger,
        })
    }
}
