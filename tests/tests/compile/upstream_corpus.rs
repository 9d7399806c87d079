//! MLIR 22's own GPU integration tests (llvm-project `mlir/test/Integration/GPU`, the CUDA,
//! ROCM, SYCL, LevelZero and SPIRV folders), from Debian's source of the LLVM release we link
//! (`scripts/setup.sh` unpacks them): every program compiled with our compiler for NVPTX,
//! AMDGPU, the host, Vulkan and OpenCL (the SPIR-V objects checked by `spirv-val`), and with
//! `mlir-opt-22`'s own pipelines. Whatever upstream compiles, we compile, and the OpenCL-style
//! target compiles at least what Vulkan does; what we do not is listed below with the reason our
//! error gives. Run with `--nocapture` for the table.

use crate::common::*;
use gpu_build::Vendor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const CORPUS: &str = "/opt/gpu-build/mlir-integration-tests/GPU";

/// The programs a target does not compile, and what the error must say. Everything else in the
/// corpus must compile.
const EXPECTED_FAILURES: &[(&str, Vendor, &str)] = &[
    // AMD's buffer ops: AMDGPU only.
    (
        "ROCM/vector-transferops.mlir",
        Vendor::Nvptx,
        "`amdgpu.raw_buffer_load` is a amdgpu operation and cannot be compiled for nvptx",
    ),
    (
        "ROCM/vector-transferops.mlir",
        Vendor::Host,
        "`amdgpu.raw_buffer_load` is a amdgpu operation and cannot be compiled for host",
    ),
    // NVIDIA-only tensor-core, TMA, mbarrier and cluster instructions.
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f16-f16-accum.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f16-f16-accum.mlir",
        Vendor::Host,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f32.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f32.mlir",
        Vendor::Host,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/cga_cluster.mlir",
        Vendor::Amdgpu,
        "`gpu.cluster_id` cannot be lowered for amdgpu",
    ),
    (
        "CUDA/sm90/cga_cluster.mlir",
        Vendor::Host,
        "the kernel uses `llvm.nvvm.read.ptx.sreg.clusterid.x`",
    ),
    (
        "CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/gemm_pred_f32_f16_f16_128x128x128.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/gemm_pred_f32_f16_f16_128x128x128.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/tma_load_128x128_stride_noswizzle.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/tma_load_128x128_stride_noswizzle.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/tma_load_128x64_swizzle128b.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/tma_load_128x64_swizzle128b.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/tma_load_64x64_swizzle128b.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/tma_load_64x64_swizzle128b.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/tma_load_64x8_8x128_noswizzle.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/tma_load_64x8_8x128_noswizzle.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    (
        "CUDA/sm90/transform-dialect/tma_load_64x8_8x128_noswizzle-transform.mlir",
        Vendor::Amdgpu,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for amdgpu",
    ),
    (
        "CUDA/sm90/transform-dialect/tma_load_64x8_8x128_noswizzle-transform.mlir",
        Vendor::Host,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for host",
    ),
    // MLIR 22 lowers the gpu dialect's subgroup MMA only to NVIDIA's WMMA.
    (
        "CUDA/TensorCore/sm80/wmma-matmul-f64.mlir",
        Vendor::Amdgpu,
        "`gpu.subgroup_mma_load_matrix` cannot be lowered for amdgpu",
    ),
    (
        "CUDA/TensorCore/wmma-matmul-f16.mlir",
        Vendor::Amdgpu,
        "`gpu.subgroup_mma_load_matrix` cannot be lowered for amdgpu",
    ),
    (
        "CUDA/TensorCore/wmma-matmul-f32-bare-ptr.mlir",
        Vendor::Amdgpu,
        "`gpu.subgroup_mma_load_matrix` cannot be lowered for amdgpu",
    ),
    (
        "CUDA/TensorCore/wmma-matmul-f32.mlir",
        Vendor::Amdgpu,
        "`gpu.subgroup_mma_load_matrix` cannot be lowered for amdgpu",
    ),
    // MLIR 22's ROCDL lowering of cf.assert fails (mlir-opt-22 fails the same way).
    (
        "CUDA/assert.mlir",
        Vendor::Amdgpu,
        "for amdgpu (gfx90a) failed",
    ),
    // Vendor ops of NVIDIA and AMD, and clusters: OpenCL.
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f16-f16-accum.mlir",
        Vendor::OpenCl,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f32.mlir",
        Vendor::OpenCl,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/cga_cluster.mlir",
        Vendor::OpenCl,
        "`gpu.cluster_id` cannot be lowered for opencl",
    ),
    (
        "CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/gemm_pred_f32_f16_f16_128x128x128.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/tma_load_128x128_stride_noswizzle.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/tma_load_128x64_swizzle128b.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/tma_load_64x64_swizzle128b.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/tma_load_64x8_8x128_noswizzle.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "CUDA/sm90/transform-dialect/tma_load_64x8_8x128_noswizzle-transform.mlir",
        Vendor::OpenCl,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for opencl",
    ),
    (
        "ROCM/vector-transferops.mlir",
        Vendor::OpenCl,
        "`amdgpu.raw_buffer_load` is a amdgpu operation and cannot be compiled for opencl",
    ),
    // The same for Vulkan: everything but NVIDIA's and AMD's own ops and clusters.
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f16-f16-accum.mlir",
        Vendor::Vulkan,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/TensorCore/sm80/transform-mma-sync-matmul-f32.mlir",
        Vendor::Vulkan,
        "`nvgpu.mma.sync` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/cga_cluster.mlir",
        Vendor::Vulkan,
        "`gpu.cluster_id` cannot be lowered for vulkan",
    ),
    (
        "CUDA/sm90/gemm_f32_f16_f16_128x128x128.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/gemm_pred_f32_f16_f16_128x128x128.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/tma_load_128x128_stride_noswizzle.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/tma_load_128x64_swizzle128b.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/tma_load_64x64_swizzle128b.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/tma_load_64x8_8x128_noswizzle.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "CUDA/sm90/transform-dialect/tma_load_64x8_8x128_noswizzle-transform.mlir",
        Vendor::Vulkan,
        "`nvgpu.mbarrier.create` is a nvptx operation and cannot be compiled for vulkan",
    ),
    (
        "ROCM/vector-transferops.mlir",
        Vendor::Vulkan,
        "`amdgpu.raw_buffer_load` is a amdgpu operation and cannot be compiled for vulkan",
    ),
];

/// The chip each program is written for: its NVIDIA instructions need at least that.
fn nvptx_chip(program: &str) -> &'static str {
    if program.starts_with("CUDA/sm90/") {
        "sm_90a"
    } else {
        "sm_80"
    }
}

pub(crate) fn programs(corpus: &Path) -> Vec<String> {
    let mut programs = Vec::new();
    for folder in ["CUDA", "ROCM", "SYCL", "LevelZero", "SPIRV"] {
        for entry in walkdir::WalkDir::new(corpus.join(folder)) {
            let path = entry.unwrap().into_path();
            if path.extension().is_some_and(|e| e == "mlir") {
                let relative = path.strip_prefix(corpus).unwrap();
                programs.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    programs.sort();
    programs
}

fn mlir_opt(args: &[&str]) -> bool {
    Command::new("mlir-opt-22")
        .args(args)
        .output()
        .expect("mlir-opt-22 runs (scripts/setup.sh installs it)")
        .status
        .success()
}

/// The program as its RUN lines have it before lowering: its transform schedule applied (where
/// it has one), its kernels outlined into gpu.modules. Returns the scheduled program too, which
/// upstream's NVVM pipeline takes (it outlines kernels itself, after converting nvgpu types).
pub(crate) fn prepare(source: &Path, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let text = std::fs::read_to_string(source).unwrap();
    let scheduled = if text.contains("transform.named_sequence") {
        let scheduled = dir.join(format!("{name}.scheduled.mlir"));
        let s = scheduled.to_str().unwrap();
        assert!(
            mlir_opt(&[
                source.to_str().unwrap(),
                "-transform-interpreter",
                "-test-transform-dialect-erase-schedule",
                "-o",
                s
            ]),
            "{name}: its transform schedule applies"
        );
        scheduled
    } else {
        source.to_path_buf()
    };
    let outlined = dir.join(format!("{name}.mlir"));
    assert!(
        mlir_opt(&[
            scheduled.to_str().unwrap(),
            "-gpu-kernel-outlining",
            "-o",
            outlined.to_str().unwrap()
        ]),
        "{name}: mlir-opt-22 outlines it"
    );
    (outlined, scheduled)
}

fn upstream_compiles(program: &str, vendor: Vendor, scheduled: &Path, outlined: &Path) -> bool {
    match vendor {
        Vendor::Nvptx => mlir_opt(&[
            scheduled.to_str().unwrap(),
            &format!(
                "--gpu-lower-to-nvvm-pipeline=cubin-chip={} cubin-features=+ptx80 cubin-format=isa",
                nvptx_chip(program)
            ),
            "-o",
            "/dev/null",
        ]),
        Vendor::Amdgpu => mlir_opt(&[
            outlined.to_str().unwrap(),
            "--pass-pipeline=builtin.module(rocdl-attach-target{chip=gfx90a},gpu.module(strip-debuginfo,convert-vector-to-scf,convert-scf-to-cf,convert-gpu-to-rocdl{runtime=HIP}),gpu-module-to-binary{format=isa})",
            "-o",
            "/dev/null",
        ]),
        // The SYCL and LevelZero tests' own pipeline, with the entry-point attribute they write
        // by hand added by MLIR's test pass (the other programs have none).
        Vendor::OpenCl => mlir_opt(&[
            outlined.to_str().unwrap(),
            "--pass-pipeline=builtin.module(spirv-attach-target{ver=v1.0 caps=Addresses,Int64,Kernel},gpu.module(test-spirv-entry-point-abi),convert-gpu-to-spirv{use-64bit-index=true},gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)),gpu-module-to-binary)",
            "-o",
            "/dev/null",
        ]),
        // The conversion steps of the SPIR-V tests' pipeline for Vulkan
        // (`-test-vulkan-runner-pipeline`, which serializes through its own launch rewriting,
        // not `gpu-module-to-binary`), with the entry-point attribute they write by hand added
        // by MLIR's test pass.
        Vendor::Vulkan => mlir_opt(&[
            outlined.to_str().unwrap(),
            "--pass-pipeline=builtin.module(spirv-attach-target{ver=v1.3 caps=Shader,Int64,Float64,GroupNonUniform,GroupNonUniformArithmetic,GroupNonUniformShuffle exts=SPV_KHR_storage_buffer_storage_class client_api=Vulkan},gpu.module(test-spirv-entry-point-abi),convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce))",
            "-o",
            "/dev/null",
        ]),
        Vendor::Host => false,
    }
}

#[test]
fn mlirs_gpu_integration_tests_compile_wherever_upstream_compiles_them() {
    let corpus = Path::new(CORPUS);
    assert!(
        corpus.join("CUDA").is_dir(),
        "{CORPUS} is missing: run scripts/setup.sh (it unpacks MLIR's GPU integration tests)"
    );
    let programs = programs(corpus);
    assert!(programs.len() >= 40, "{programs:?}");
    let dir = tempfile::tempdir().unwrap();
    let vendors = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Host,
        Vendor::Vulkan,
        Vendor::OpenCl,
    ];
    let mut ours: BTreeMap<Vendor, usize> = BTreeMap::new();
    let mut upstream: BTreeMap<Vendor, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    println!(
        "{:<72} nvptx  amdgpu host   vulkan opencl | mlir-opt: nvptx amdgpu vulkan opencl",
        "program"
    );
    for program in &programs {
        let name = program.replace('/', "_");
        let (outlined, scheduled) = prepare(&corpus.join(program), dir.path(), &name);
        let mut row = Vec::new();
        for vendor in vendors {
            let out = dir.path().join(format!("{name}.{vendor}"));
            let mut build = build_in(&out);
            build.base_dir(dir.path()).kernel(&outlined);
            match vendor {
                Vendor::Nvptx => build.target(vendor, &[nvptx_chip(program)]),
                Vendor::Amdgpu => build.target(vendor, &["gfx90a"]),
                Vendor::Host | Vendor::Vulkan | Vendor::OpenCl => build.target(vendor, &[]),
            };
            let result = build.compile();
            if let (Ok(report), Vendor::OpenCl | Vendor::Vulkan) = (&result, vendor) {
                for (object, bytes) in objects_of(report, vendor) {
                    let valid = match vendor {
                        Vendor::Vulkan => super::vulkan::spirv_val(&bytes, &object.chip),
                        _ => super::opencl::spirv_val_opencl(&bytes, &object.chip),
                    };
                    if let Err(why) = valid {
                        problems.push(format!(
                            "{program}: spirv-val refuses its {vendor} object: {why}"
                        ));
                    }
                }
            }
            let expected = EXPECTED_FAILURES
                .iter()
                .find(|(p, v, _)| p == program && *v == vendor);
            match (&result, expected) {
                (Ok(_), None) => *ours.entry(vendor).or_default() += 1,
                (Ok(_), Some(_)) => problems.push(format!(
                    "{program} now compiles for {vendor}: take it off EXPECTED_FAILURES"
                )),
                (Err(error), Some((_, _, says))) if error.to_string().contains(says) => {}
                (Err(error), _) => problems.push(format!(
                    "{program} for {vendor}: unexpected error:\n{error}"
                )),
            }
            let up = upstream_compiles(program, vendor, &scheduled, &outlined);
            if up {
                *upstream.entry(vendor).or_default() += 1;
                if result.is_err() {
                    problems.push(format!(
                        "{program}: mlir-opt-22 compiles it for {vendor}, we do not"
                    ));
                }
            }
            row.push((result.is_ok(), up));
            std::fs::remove_dir_all(&out).ok();
        }
        let mark = |ok: bool| if ok { "ok" } else { "-" };
        println!(
            "{program:<72} {:<6} {:<6} {:<6} {:<6} {:<9} | {:<15} {:<6} {:<6} {}",
            mark(row[0].0),
            mark(row[1].0),
            mark(row[2].0),
            mark(row[3].0),
            mark(row[4].0),
            mark(row[0].1),
            mark(row[1].1),
            mark(row[3].1),
            mark(row[4].1)
        );
        if row[3].0 && !row[4].0 {
            problems.push(format!("{program}: Vulkan compiles it, OpenCL does not"));
        }
    }
    for vendor in vendors {
        println!(
            "{vendor}: we compile {} of {}, mlir-opt-22 {}",
            ours.get(&vendor).copied().unwrap_or(0),
            programs.len(),
            upstream.get(&vendor).copied().unwrap_or(0)
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
