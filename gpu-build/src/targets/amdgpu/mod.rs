//! AMDGPU hooks: code object version, the device libraries (`ocml`, `ockl`) with their control
//! variables, object → hsaco with `ld.lld -shared`.

pub(crate) mod chips;
pub(crate) mod flags;
pub(crate) mod toolkit;

use crate::error::{Error, ErrorKind, Result};
use crate::shared_library::Linker;
use crate::targets::interface::{
    Artifact, Backend, Chip, Compiled, Description, Job, LlvmBackend, LlvmTarget, ObjectSteps,
    Question, Target, TargetSpec,
};
use crate::targets::support::link::{link_only_needed, load_bitcode};
use crate::targets::support::llvm::{emit_object, optimize};
use crate::timing::Stage;
use crate::toolkit::Toolkits;
use flags::AmdgpuFlags;
use gpu_manifest::{Format, LoadRequirement, ObjectAbi, Vendor};
use inkwell::attributes::AttributeLoc;
use inkwell::module::{FlagBehavior, Linkage, Module};
use inkwell::targets::RelocMode;
use inkwell::types::IntType;
use inkwell::values::UnnamedAddress;
use inkwell::{AddressSpace, GlobalVisibility};
use toolkit::rocm;

/// Upstream's `#rocdl.target` chip default.
pub const DEFAULT_CHIP: &str = "gfx900";
/// Code object version when none is given. Upstream defaults to 600, which no ROCm before 6.3
/// loads; the device libraries Debian ships (ROCm 5.2) know code objects 4 and 5, and every
/// ROCm runtime since 5.2 loads version 5 (`gpu_manifest::LoadRequirement::oldest_rocm`).
pub const DEFAULT_ABI: &str = "500";
/// The code object versions `abi` may name.
const ABIS: &[&str] = &["400", "500", "600"];

/// The constant address space the device libraries read their control variables from.
const CONSTANT_ADDRESS_SPACE: u16 = 4;

/// LLVM's `CallingConv::AMDGPU_KERNEL`.
const AMDGPU_KERNEL: u32 = 91;
/// What the ROCDL translation gives a kernel without a known block size: at most 256 threads.
const TRANSLATION_DEFAULT_BLOCK: &str = "1,256";
/// What HIP gives its kernels, and what the runtime lets a launch ask for: up to 1024 threads.
const HIP_DEFAULT_BLOCK: &str = "1,1024";

pub(crate) struct Amdgpu;

/// What the Amdgpu target is.
static DESCRIPTION: Description = Description {
    attribute_name: Some("rocdl.target"),
    abis: ABIS,
    default_abi: DEFAULT_ABI,
    flags: flags::FLAGS,
    example_chip: chips::EXAMPLE,
    default_chip: Some(DEFAULT_CHIP),
    triple: Some("amdgcn-amd-amdhsa"),
    triple_prefix: Some("amdgcn"),
    dialects: &["rocdl", "amdgpu"],
    chip_override_variable: Some("GPU_BUILD_AMDGPU_CHIPS"),
    maker: "AMD",
    lowering_name: "ROCDL",
    ..Description::new(Vendor::Amdgpu, Backend::Llvm(&LLVM))
};

/// How the Amdgpu target compiles through LLVM.
static LLVM: LlvmBackend = LlvmBackend {
    steps: &Amdgpu,
    back_ends: &[inkwell::targets::Target::initialize_amd_gpu],
    kernel_calling_convention: Some(AMDGPU_KERNEL),
    vendor_dialect_pass: None,
    kernel_attribute: "rocdl.kernel",
    reloc_mode: RelocMode::Default,
    driver_symbols: &[],
    is_gpu: true,
    converts_wide_integers: true,
    isa_dump_extension: "s",
};

impl Target for Amdgpu {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn chip(&self, spec: &TargetSpec) -> Result<Chip> {
        let chip = chips::parse(&spec.chip)?;
        chips::check_features(&spec.features)?;
        Ok(chip)
    }

    fn load_requirement(&self, format: Format, bytes: &[u8]) -> Option<LoadRequirement> {
        (format == Format::Bin)
            .then(|| code_object_version(bytes))
            .flatten()
            .map(|version| LoadRequirement::CodeObject { version })
    }

    fn toolkit_identity(&self, toolkits: &Toolkits) -> String {
        toolkits
            .identity(Vendor::Amdgpu, |cargo| rocm(toolkits).identity(cargo))
            .to_string()
    }

    fn explain(&self, question: Question<'_>) -> Option<&'static str> {
        match question {
            Question::NotLowered(op) => {
                op.starts_with("gpu.subgroup_mma_").then_some(
                    "MLIR 22 lowers the gpu dialect's subgroup MMA ops only to NVIDIA's WMMA instructions; \
                     on AMDGPU write `amdgpu.wmma` / `amdgpu.mfma`, or build this module for nvptx only",
                )
            }
            _ => None,
        }
    }
}

impl LlvmTarget for Amdgpu {
    /// `runtime=HIP`, as upstream's ROCDL pipeline for HIP: `gpu.printf` becomes the device
    /// library's printf (`__ockl_printf_*`, a hostcall the HIP runtime serves).
    fn lowering_pass(&self, processor: &str) -> String {
        let chipset = chips::lowered_as(processor);
        format!("convert-gpu-to-rocdl{{chipset={chipset} runtime=HIP}}")
    }

    /// The code object version and block sizes, the device libraries; the object, linked into
    /// an hsaco with ld.lld.
    fn to_object(&self, mut steps: ObjectSteps<'_, '_>) -> Result<Compiled> {
        let (job, module, machine) = (steps.job, steps.module, steps.machine);
        pre_link(&job, module)?;
        let mut searched = steps.link_user_bitcode()?;
        searched.extend(link_device_libraries(&job, module)?);
        steps.drop_unused()?;
        steps.optimize(|| optimize(module, machine, job.spec.opt_level))?;
        steps.check_resolved(Vec::new(), &searched)?;
        let object = emit_object(&job, machine, module, &mut steps.dumps, steps.dump.isa)?;
        let artifacts = object_to_hsaco(&job, object)?;
        Ok(steps.finish(artifacts, ObjectAbi::LoweredParams))
    }
}

/// Before linking: the code object version every AMDGPU object records (`abi` 500 → v5), and
/// HIP's block-size limit for kernels whose source did not set one (a 512-thread launch of a
/// kernel compiled for 256 fails on the device).
fn pre_link<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<()> {
    let abi = code_object_abi(job)?;
    let value = job.llvm.i32_type().const_int(u64::from(abi), false);
    module.add_basic_value_flag("amdhsa_code_object_version", FlagBehavior::Error, value);
    for kernel in module
        .get_functions()
        .filter(|f| f.get_call_conventions() == AMDGPU_KERNEL)
    {
        let attribute = "amdgpu-flat-work-group-size";
        let current = kernel.get_string_attribute(AttributeLoc::Function, attribute);
        if current
            .is_none_or(|a| a.get_string_value().to_bytes() == TRANSLATION_DEFAULT_BLOCK.as_bytes())
        {
            kernel.remove_string_attribute(AttributeLoc::Function, attribute);
            kernel.add_attribute(
                AttributeLoc::Function,
                job.llvm
                    .create_string_attribute(attribute, HIP_DEFAULT_BLOCK),
            );
        }
    }
    Ok(())
}

/// The code object version `job`'s object records: its `abi`, but at least v6 (600) for a
/// generic processor, which LLVM builds only as code object v6.
fn code_object_abi(job: &Job) -> Result<u32> {
    let abi = abi_number(&job.spec.abi)?;
    let generic = chips::lowered_as(job.processor) != job.processor;
    Ok(if generic { abi.max(600) } else { abi })
}

fn abi_number(abi: &str) -> Result<u32> {
    abi.parse().map_err(|_| {
        Error::new(
            ErrorKind::InvalidTarget,
            format!("unknown ROCDL abi `{abi}`"),
        )
    })
}

/// `ocml` and `ockl` when the module calls into them (as upstream decides: by the `__ocml_*` /
/// `__ockl_*` declarations), after defining the control variables they read.
fn link_device_libraries<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<Vec<String>> {
    let declared = |prefix: &[u8]| {
        module
            .get_functions()
            .any(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(prefix))
    };
    let needs_ocml = declared(b"__ocml_");
    let needs_ockl = declared(b"__ockl_");
    if !needs_ocml && !needs_ockl {
        return Ok(Vec::new());
    }
    let rocm = rocm(job.toolkits);
    let Some(dir) = rocm.bitcode_dir.found.clone() else {
        return Err(Error::new(
            ErrorKind::ToolkitNotFound,
            format!(
                "the kernel calls the AMD device libraries, but {}",
                rocm.device_libs_missing_help()
            ),
        ));
    };
    define_control_variables(job, module)?;
    let mut linked = Vec::new();
    for (needed, name) in [
        (needs_ocml, "ocml.bc"),
        (needs_ockl || needs_ocml, "ockl.bc"),
    ] {
        if needed {
            let path = dir.join(name);
            let library = load_bitcode(job.llvm, &path, "device library", job.cargo)?;
            link_only_needed(module, library, name, job.diagnostics)?;
            linked.push(path.display().to_string());
        }
    }
    Ok(linked)
}

/// `__oclc_*` globals as upstream defines them (linkonce_odr, protected, addrspace(4)), but with
/// the ISA version in ROCm's numbering (gfx90a = 9010, as `oclc_isa_version_90a.bc` has it;
/// upstream 22.1 computes 10000) and the wavefront size the code generator actually uses.
fn define_control_variables<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<()> {
    let flags = AmdgpuFlags::of(&job.spec.flags);
    let fast = job.spec.flags.fast;
    let isa = isa_version(job.processor);
    let wave64 = wave64(job)?;
    let i8_type = job.llvm.i8_type();
    let i32_type = job.llvm.i32_type();
    let variables: [(&str, IntType, u64); 7] = [
        (
            "__oclc_finite_only_opt",
            i8_type,
            u64::from(flags.finite_only || fast),
        ),
        (
            "__oclc_unsafe_math_opt",
            i8_type,
            u64::from(flags.unsafe_math || fast),
        ),
        ("__oclc_daz_opt", i8_type, u64::from(flags.daz || fast)),
        (
            "__oclc_correctly_rounded_sqrt32",
            i8_type,
            u64::from(!flags.unsafe_sqrt && !fast),
        ),
        ("__oclc_wavefrontsize64", i8_type, u64::from(wave64)),
        ("__oclc_ISA_version", i32_type, u64::from(isa)),
        (
            "__oclc_ABI_version",
            i32_type,
            u64::from(code_object_abi(job)?),
        ),
    ];
    for (name, ty, value) in variables {
        if module.get_global(name).is_some_and(|g| !g.is_declaration()) {
            continue;
        }
        let global = module.add_global(ty, Some(AddressSpace::from(CONSTANT_ADDRESS_SPACE)), name);
        global.set_initializer(&ty.const_int(value, false));
        global.set_constant(true);
        global.set_linkage(Linkage::LinkOnceODR);
        global.set_visibility(GlobalVisibility::Protected);
        global.set_unnamed_address(UnnamedAddress::Local);
        global.set_alignment(ty.get_bit_width() / 8);
    }
    Ok(())
}

/// Major generation of a `gfx` processor (9 for gfx90a, 11 for gfx1100 and gfx11-generic).
fn major(processor: &str) -> u32 {
    let digits = processor.trim_start_matches("gfx");
    if let Some((major, _)) = digits.split_once('-') {
        return major.parse().unwrap_or(0);
    }
    digits
        .get(..digits.len().saturating_sub(2))
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// ROCm's ISA version number: major * 1000 + minor * 100 + stepping (gfx90a → 9010).
pub(crate) fn isa_version(processor: &str) -> u32 {
    let processor = chips::lowered_as(processor);
    let digits = processor.trim_start_matches("gfx");
    if digits.contains('-') {
        return major(processor) * 1000;
    }
    let tail: Vec<u32> = digits
        .chars()
        .rev()
        .take(2)
        .filter_map(|c| c.to_digit(16))
        .collect();
    match tail.as_slice() {
        [stepping, minor] => major(processor) * 1000 + minor * 100 + stepping,
        _ => 0,
    }
}

/// Whether code runs in 64-wide waves: always before gfx10; from gfx10 on, LLVM's default is
/// wave32 unless the features ask for `+wavefrontsize64`.
fn wave64(job: &Job) -> Result<bool> {
    let features = &job.spec.features;
    let native64 = major(job.processor) < 10;
    let no_wave64 = AmdgpuFlags::of(&job.spec.flags).no_wave64;
    if native64 && no_wave64 {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "`no_wave64` cannot apply to {}: chips before gfx10 only run 64-wide waves",
                job.processor
            ),
        ));
    }
    Ok(native64 || (features.contains("+wavefrontsize64") && !no_wave64))
}

/// `ld.lld -shared <object> -o <hsaco>`, as upstream (lld in this process where linked in).
fn object_to_hsaco(job: &Job, object: Vec<u8>) -> Result<Vec<Artifact>> {
    let rocm = rocm(job.toolkits);
    let Some(linker) = Linker::new(rocm.ld_lld.found.as_deref()) else {
        return Err(Error::new(
            ErrorKind::ToolkitNotFound,
            rocm.ld_lld_missing_help(),
        ));
    };
    let what = format!("the {} object", job.processor);
    let bytes = job.timings.time(Stage::Lld, || {
        linker.shared_library(&object, job.scratch, &what)
    })?;
    Ok(vec![Artifact {
        format: Format::Bin,
        extension: "hsaco".to_string(),
        bytes,
    }])
}

/// The code object version of an hsaco, from its ELF header: OS/ABI `ELFOSABI_AMDGPU_HSA` (64)
/// and ABI version 2, 3, 4 for code objects 4, 5, 6 (LLVM's AMDGPUUsage).
fn code_object_version(hsaco: &[u8]) -> Option<u32> {
    const ELFOSABI_AMDGPU_HSA: u8 = 64;
    let ident = hsaco.get(..9)?;
    (ident[..4] == *b"\x7fELF" && ident[7] == ELFOSABI_AMDGPU_HSA).then(|| u32::from(ident[8]) + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_object_versions_from_the_elf_header() {
        let header = |abi_version| {
            let mut ident = *b"\x7fELF\x02\x01\x01\x40\x00";
            ident[8] = abi_version;
            ident
        };
        assert_eq!(code_object_version(&header(3)), Some(5));
        assert_eq!(code_object_version(&header(2)), Some(4));
        assert_eq!(
            code_object_version(b"\x7fELF\x02\x01\x01\x00\x00"),
            None,
            "not HSA"
        );
        assert_eq!(code_object_version(b"\x7fEL"), None);
    }

    #[test]
    fn isa_versions_follow_rocm_numbering() {
        assert_eq!(isa_version("gfx90a"), 9010);
        assert_eq!(isa_version("gfx942"), 9402);
        assert_eq!(isa_version("gfx900"), 9000);
        assert_eq!(isa_version("gfx1100"), 11000);
        assert_eq!(isa_version("gfx1030"), 10300);
        assert_eq!(isa_version("gfx11-generic"), 11000);
        assert_eq!(isa_version("gfx10-3-generic"), 10300);
        assert_eq!(isa_version("gfx9-4-generic"), 9400);
    }

    /// The numbers the installed device libraries use for the same chips.
    #[test]
    fn isa_versions_match_the_device_libraries() {
        let dir = std::path::Path::new("/usr/lib")
            .join(crate::toolkit::multiarch())
            .join("amdgcn/bitcode");
        for (chip, file) in [("gfx90a", "90a"), ("gfx1030", "1030"), ("gfx906", "906")] {
            let text = std::process::Command::new("llvm-dis-22")
                .arg(dir.join(format!("oclc_isa_version_{file}.bc")))
                .args(["-o", "-"])
                .output()
                .expect("llvm-dis-22 runs");
            let text = String::from_utf8_lossy(&text.stdout);
            assert!(
                text.contains(&format!("constant i32 {},", isa_version(chip))),
                "{chip}: {text}"
            );
        }
    }
}
