//! The pipeline driver. Every (gpu.module, target) pair is a task; the cache answers what it
//! can; each file's remaining modules are lowered once per distinct lowering (in parallel), and
//! each remaining task runs ModuleToObject from its lowering's bitcode (in parallel). Results are
//! collected in memory for `output` to write.

use crate::cache::{compiler_identity, Cache, Key, TaskOutput};
use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::frontend::llvm_ir;
use crate::frontend::mlir::Mlir;
use crate::kernel_abi::{kernels_from_arguments, kernels_of};
use crate::llvm_errors::{Compiling, Diagnostics};
use crate::lower::{lower_to_llvm, serialize_from_mlir, Lowering};
use crate::module_to_object::module_to_object;
use crate::output::{start_build, write_manifest, write_outputs, CompiledModule};
use crate::parallel::run_all;
use crate::plan::{plan_file, BuildContext, FilePlan, ModulePlan};
use crate::report::{Paths, Report};
use crate::request::BuildInputs;
use crate::targets::interface::{build_triple, Compiled, DumpRequest, ObjectSettings, TargetSpec};
use crate::targets::{all, target};
use crate::timing::Stage;
use crate::timing::Timings;
use crate::toolkit::Toolkits;
use crate::up_to_date;
use crate::util::{identifier_part, sha256_hex};
use gpu_manifest::Kernel;
use gpu_manifest::Vendor;
use inkwell::context::Context as LlvmContext;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module as LlvmModule;

/// One gpu.module for one target.
struct Task<'p> {
    file: &'p FilePlan,
    module: &'p ModulePlan,
    spec: &'p TargetSpec,
    lowering: Lowering,
}

/// A file's gpu.modules that need one lowering, lowered together from one parse.
struct LoweringUnit<'p> {
    file: &'p FilePlan,
    lowering: Lowering,
    modules: Vec<UnitModule<'p>>,
    /// The first target served, for messages.
    first: &'p TargetSpec,
}

/// One gpu.module of a lowering unit, with the tasks that start from its lowering.
struct UnitModule<'p> {
    plan: &'p ModulePlan,
    /// Indices of the tasks in the build's task list.
    tasks: Vec<usize>,
}

/// One lowered gpu.module, as every target sharing its lowering starts from it.
struct LoweredModule {
    kernels: Vec<Kernel>,
    lowered: Lowered,
}

/// What a lowering made of one gpu.module.
enum Lowered {
    /// LLVM bitcode, which ModuleToObject finishes for each task's target.
    Bitcode(Vec<u8>),
    /// The objects themselves: a target serialized from MLIR (SPIR-V) finishes them while
    /// lowering; with the warnings that gave (kernels the target refused alone).
    Finished(Compiled, Vec<String>),
}

/// Everything compiled (or found in the cache), module by module.
pub(crate) struct Compilation {
    pub modules: Vec<CompiledModule>,
    /// (module, target) pairs compiled.
    pub compiled: usize,
    /// (module, target) pairs taken from the cache.
    pub cache_hits: usize,
    /// Of those, the ones the shared store had (and the local cache did not).
    pub remote_hits: usize,
}

/// Compiles every module of `plans` for every target.
pub(crate) fn compile_all(
    plans: &[FilePlan],
    options: &BuildContext,
    toolkits: &Toolkits,
    cache: Option<&Cache>,
    cargo: &CargoOutput,
) -> Result<Compilation> {
    let tasks = tasks(plans)?;
    let keys: Vec<Option<Key>> = match cache {
        Some(_) => {
            let identity = compiler_identity();
            tasks
                .iter()
                .map(|task| cache_key(&identity, task, options, toolkits, cargo).map(Some))
                .collect::<Result<_>>()?
        }
        None => tasks.iter().map(|_| None).collect(),
    };
    let found: Vec<Option<TaskOutput>> = options.timings.time(Stage::Cache, || {
        let Some(cache) = cache else {
            return tasks.iter().map(|_| None).collect();
        };
        let wanted: Vec<Option<&Key>> = keys.iter().map(Option::as_ref).collect();
        let found = cache.get_many(&wanted, cargo);
        tasks
            .iter()
            .zip(&keys)
            .zip(found)
            .map(|((task, key), found)| {
                if let Some(key) = key {
                    cache.note(cargo, || {
                        format!(
                            "gpu-build cache {}: {} @{} for {} {} ({})",
                            match &found {
                                Some(found) if found.remote => "remote hit",
                                Some(_) => "local hit",
                                None => "miss",
                            },
                            task.file.source.display,
                            task.module.desc.name,
                            task.spec.vendor,
                            task.spec.chip,
                            key.short()
                        )
                    });
                }
                found.map(|found| found.output)
            })
            .collect()
    });
    let misses: Vec<usize> = (0..tasks.len()).filter(|i| found[*i].is_none()).collect();
    let cache_hits = tasks.len() - misses.len();
    // Each task's output with its index in `tasks`, put back in that order for `assemble`.
    let mut outputs: Vec<(usize, TaskOutput)> = found
        .into_iter()
        .enumerate()
        .filter_map(|(index, found)| Some((index, found?)))
        .collect();
    for (_, output) in &outputs {
        output.warnings.iter().for_each(|w| cargo.warn(w.clone()));
    }

    let units = lowering_units(&tasks, &misses);
    let lowered = run_all(&units, |unit| lower_unit(unit, options))?;
    // Each task with the lowering it starts from (a unit's modules come back in the order it
    // lowered them), in task order: the first error reported is the first task's.
    let mut jobs: Vec<(usize, &LoweredModule)> = units
        .iter()
        .zip(&lowered)
        .flat_map(|(unit, lowered)| unit.modules.iter().zip(lowered))
        .flat_map(|(module, lowered)| module.tasks.iter().map(move |&index| (index, lowered)))
        .collect();
    jobs.sort_unstable_by_key(|&(index, _)| index);
    let done = std::sync::atomic::AtomicUsize::new(cache_hits);
    let built = run_all(&jobs, |&(index, lowered)| {
        let task = &tasks[index];
        let (result, warnings) = cargo.capture_warnings(|| match &lowered.lowered {
            Lowered::Bitcode(bitcode) => {
                module_objects(task, bitcode, &lowered.kernels, options, toolkits, cargo)
            }
            Lowered::Finished(compiled, warnings) => {
                warnings.iter().for_each(|w| cargo.warn(w.clone()));
                Ok(compiled.clone())
            }
        });
        if options.progress && result.is_ok() {
            let done = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            eprintln!(
                "[{done}/{}] {} @{} for {} {}",
                tasks.len(),
                task.file.source.display,
                task.module.desc.name,
                task.spec.vendor,
                task.spec.chip
            );
        }
        let output = result.map(|compiled| TaskOutput {
            kernels: lowered.kernels.clone(),
            compiled,
            warnings,
        })?;
        // Stored as soon as it is compiled, so that uploads to a shared store run while the
        // other tasks compile.
        if let (Some(cache), Some(key)) = (cache, &keys[index]) {
            options
                .timings
                .time(Stage::Cache, || cache.put(key, &output, cargo));
        }
        Ok(output)
    })?;
    outputs.extend(jobs.iter().map(|&(index, _)| index).zip(built));
    outputs.sort_unstable_by_key(|&(index, _)| index);
    if let Some(cache) = cache.filter(|_| !misses.is_empty()) {
        options.timings.time(Stage::Cache, || cache.evict());
    }
    let remote_hits = cache.map_or(0, |cache| {
        options.timings.time(Stage::Cache, || cache.finish(cargo))
    });
    Ok(Compilation {
        modules: assemble(plans, outputs.into_iter().map(|(_, output)| output))?,
        compiled: misses.len(),
        cache_hits,
        remote_hits,
    })
}

/// Every (module, target) pair of every file, in file order.
fn tasks(plans: &[FilePlan]) -> Result<Vec<Task<'_>>> {
    let mut tasks = Vec::new();
    for file in plans {
        for module in &file.modules {
            for spec in &module.specs {
                tasks.push(Task {
                    file,
                    module,
                    spec,
                    lowering: Lowering::for_target(file.kind, spec)?,
                });
            }
        }
    }
    Ok(tasks)
}

/// The lowerings the tasks numbered `misses` need: one unit per file and lowering, with the
/// modules that need it and, for each, the tasks it serves, in file order.
fn lowering_units<'p>(tasks: &[Task<'p>], misses: &[usize]) -> Vec<LoweringUnit<'p>> {
    let mut units: Vec<LoweringUnit> = Vec::new();
    for &index in misses {
        let task = &tasks[index];
        let position = units
            .iter()
            .position(|u| std::ptr::eq(u.file, task.file) && u.lowering == task.lowering)
            .unwrap_or_else(|| {
                units.push(LoweringUnit {
                    file: task.file,
                    lowering: task.lowering.clone(),
                    modules: Vec::new(),
                    first: task.spec,
                });
                units.len() - 1
            });
        let unit = &mut units[position];
        match unit
            .modules
            .iter_mut()
            .find(|m| std::ptr::eq(m.plan, task.module))
        {
            Some(module) => module.tasks.push(index),
            None => unit.modules.push(UnitModule {
                plan: task.module,
                tasks: vec![index],
            }),
        }
    }
    units
}

/// Lowers a unit's modules (one parse of the file): a target serialized from MLIR finishes
/// their objects there; the others get each module as bitcode, with each kernel's lowered
/// parameters read from it.
fn lower_unit(unit: &LoweringUnit, options: &BuildContext) -> Result<Vec<LoweredModule>> {
    let source = &unit.file.source;
    let _compiling = Compiling::new(format!(
        "{}: lowering for {} {}",
        source.display, unit.first.vendor, unit.first.chip
    ));
    match &unit.lowering {
        Lowering::Serialized(spec) => serialize_unit(unit, spec, options),
        Lowering::Mlir {
            pipeline,
            kernel_attribute,
            ..
        } => lower_unit_to_bitcode(unit, options, |llvm| {
            let indexed: Vec<_> = unit
                .modules
                .iter()
                .map(|m| (m.plan.index, &m.plan.desc))
                .collect();
            lower_to_llvm(
                &Mlir::new(),
                source,
                &indexed,
                pipeline,
                kernel_attribute,
                unit.first,
                llvm,
            )
        }),
        Lowering::LlvmIr => lower_unit_to_bitcode(unit, options, |llvm| {
            llvm_ir::parse(llvm, source, unit.file.kind).map(|module| vec![module])
        }),
    }
}

/// A unit of a target serialized from MLIR: each module's objects, made from one parse.
fn serialize_unit(
    unit: &LoweringUnit,
    spec: &TargetSpec,
    options: &BuildContext,
) -> Result<Vec<LoweredModule>> {
    let kernels: Vec<Vec<Kernel>> = unit
        .modules
        .iter()
        .map(|module| kernels_from_arguments(&module.plan.desc))
        .collect();
    let modules: Vec<_> = unit
        .modules
        .iter()
        .zip(&kernels)
        .map(|(module, kernels)| (module.plan.index, &module.plan.desc, kernels.as_slice()))
        .collect();
    let compiled = options.timings.time(Stage::Lower, || {
        serialize_from_mlir(&Mlir::new(), &unit.file.source, &modules, spec)
    })?;
    Ok(kernels
        .into_iter()
        .zip(compiled)
        .map(|(kernels, compiled)| LoweredModule {
            kernels,
            lowered: Lowered::Finished(compiled.0, compiled.1),
        })
        .collect())
}

/// A unit of targets through LLVM: `lower` makes its modules' LLVM IR in a fresh LLVM context,
/// handed on as bitcode (each task reads it into a context of its own).
fn lower_unit_to_bitcode(
    unit: &LoweringUnit,
    options: &BuildContext,
    lower: impl for<'ll> FnOnce(&'ll LlvmContext) -> Result<Vec<LlvmModule<'ll>>>,
) -> Result<Vec<LoweredModule>> {
    let llvm = LlvmContext::create();
    let _diagnostics = Diagnostics::attach(&llvm);
    let modules = options.timings.time(Stage::Lower, || lower(&llvm))?;
    unit.modules
        .iter()
        .zip(modules)
        .map(|(module, llvm_module)| {
            let desc = &module.plan.desc;
            let context = format!(
                "{}: gpu.module @{} for {} {}",
                desc.location, desc.name, unit.first.vendor, unit.first.chip
            );
            Ok(LoweredModule {
                kernels: kernels_of(desc, &llvm_module).map_err(|e| e.context(&context))?,
                lowered: Lowered::Bitcode(
                    llvm_module.write_bitcode_to_memory().as_slice().to_vec(),
                ),
            })
        })
        .collect()
}

/// ModuleToObject for one task, from its lowering's bitcode, in its own LLVM context.
fn module_objects(
    task: &Task,
    bitcode: &[u8],
    kernels: &[Kernel],
    options: &BuildContext,
    toolkits: &Toolkits,
    cargo: &CargoOutput,
) -> Result<Compiled> {
    let (source, desc, spec) = (&task.file.source, &task.module.desc, task.spec);
    let context = format!(
        "{}: gpu.module @{} for {} {}",
        desc.location, desc.name, spec.vendor, spec.chip
    );
    let _compiling = Compiling::new(&context);
    let llvm = LlvmContext::create();
    let diagnostics = Diagnostics::attach(&llvm);
    let buffer = MemoryBuffer::create_from_memory_range(bitcode, &desc.name);
    let module = LlvmModule::parse_bitcode_from_buffer(&buffer, &llvm).map_err(|e| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal error: reading back lowered bitcode: {e}"),
        )
    })?;
    let settings = ObjectSettings {
        link_base: options.base_dir,
        symbol_prefix: &symbol_prefix(options.crate_name, &source.display, &desc.name),
        dump: options.dump,
        scratch: options.scratch,
        timings: options.timings,
        source: &source.display,
        kernels,
    };
    module_to_object(
        module,
        &llvm,
        &diagnostics,
        spec,
        &settings,
        toolkits,
        cargo,
    )
    .map_err(|e| e.context(&context))
}

/// A whole build: plan every kernel file, compile (or take from the cache), write the outputs
/// and the record that lets the next build reuse them.
pub(crate) fn compile_build(
    build: &BuildInputs,
    paths: &Paths,
    cargo: &CargoOutput,
) -> Result<Report> {
    let (out_dir, base_dir, crate_name) = (&paths.out_dir, &paths.base_dir, &paths.crate_name);
    // Everything about this build that is not a file or an environment variable it reads,
    // gpu-build's own code included (another version of it writes other objects).
    let settings = format!(
        "{} {} crate={crate_name} base={} target={}",
        compiler_identity(),
        build.outputs_key(),
        base_dir.display(),
        build_triple()
    );
    let timings = Timings::default();
    if let Some(manifest) = up_to_date::reuse(out_dir, &settings, cargo) {
        let mut report = Report::new(manifest, out_dir);
        report.reused = true;
        return Ok(report);
    }
    let scratch = start_build(out_dir)?;
    let chip_overrides = chip_overrides(cargo);
    let host_features = host_features(cargo);
    let options = BuildContext {
        opt_level: build.opt_level,
        chip_overrides: &chip_overrides,
        base_dir,
        dump: dump_request(cargo)?,
        crate_name,
        scratch: scratch.path(),
        timings: &timings,
        host_triple: build.host_triple.as_deref(),
        host_features: host_features.as_deref(),
        checked: build
            .checked
            .unwrap_or_else(|| cargo.env("GPU_EMBED_CHECK").is_some_and(|v| v != "0")),
        progress: build.progress,
    };
    let cache = Cache::open(&build.cache, &build.remote_cache, out_dir, cargo)?;

    let plans = run_all(&build.kernels, |(path, requests)| {
        let requests = requests.as_deref().unwrap_or(&build.requests);
        plan_file(
            &base_dir.join(path),
            path.display().to_string(),
            requests,
            &options,
            cargo,
        )
    })?;
    let toolkits = Toolkits::new(cargo);
    let compilation = compile_all(&plans, &options, &toolkits, cache.as_ref(), cargo)?;

    let manifest = timings.time(Stage::Output, || {
        let manifest = write_outputs(out_dir, compilation.modules, crate_name, cargo)?;
        write_manifest(out_dir, &manifest)?;
        Ok::<_, Error>(manifest)
    })?;
    drop(scratch);
    up_to_date::record(out_dir, &settings, cargo)?;
    let mut report = Report::new(manifest, out_dir);
    report.compiled = compilation.compiled;
    report.cache_hits = compilation.cache_hits;
    report.remote_hits = compilation.remote_hits;
    report.timings = timings.snapshot();
    Ok(report)
}

/// The build machine's CPU features (LLVM's list) when the crate is compiled with
/// `-C target-cpu=native` (cargo's `CARGO_ENCODED_RUSTFLAGS`): host kernels then use the same
/// instructions as the crate's own code (AVX2, AVX-512 ...) and, like it, run on this machine's
/// kind of CPU only. Any other `target-cpu` leaves host kernels at the triple's baseline.
pub(crate) fn host_features(cargo: &CargoOutput) -> Option<String> {
    let flags = cargo.env("CARGO_ENCODED_RUSTFLAGS")?;
    wants_native_cpu(&flags.to_string_lossy()).then(|| {
        inkwell::targets::TargetMachine::get_host_cpu_features()
            .to_string_lossy()
            .into_owned()
    })
}

/// Whether rustc flags (cargo's encoding: separated by 0x1f) end up at `-C target-cpu=native`
/// (the last `target-cpu` wins, as in rustc).
fn wants_native_cpu(encoded: &str) -> bool {
    let mut flags = encoded.split('\x1f');
    let mut native = false;
    while let Some(flag) = flags.next() {
        let setting = match flag {
            "-C" | "--codegen" => flags.next().unwrap_or_default(),
            other => other.strip_prefix("-C").unwrap_or_default(),
        };
        if let Some(cpu) = setting.strip_prefix("target-cpu=") {
            native = cpu == "native";
        }
    }
    native
}

/// `GPU_BUILD_NVPTX_CHIPS=sm_80,sm_90` / `GPU_BUILD_AMDGPU_CHIPS=...` (each target's
/// `chip_override_variable`): chips that replace every module's chips for that target (for CI
/// and packagers).
pub(crate) fn chip_overrides(cargo: &CargoOutput) -> Vec<(Vendor, Vec<String>)> {
    all()
        .filter_map(|target| {
            Some((
                target.description().vendor,
                target.description().chip_override_variable?,
            ))
        })
        .filter_map(|(vendor, name)| {
            let value = cargo.env(name)?;
            let chips: Vec<String> = value
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            (!chips.is_empty()).then_some((vendor, chips))
        })
        .collect()
}

pub(crate) fn dump_request(cargo: &CargoOutput) -> Result<DumpRequest> {
    let mut request = DumpRequest::default();
    let Some(value) = cargo.env("GPU_BUILD_DUMP") else {
        return Ok(request);
    };
    for item in value
        .to_string_lossy()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match item {
            "llvm" => request.llvm = true,
            "isa" => request.isa = true,
            "all" => request = DumpRequest { llvm: true, isa: true },
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("GPU_BUILD_DUMP: unknown item `{other}`; use a comma-separated list of `llvm`, `isa` or `all`"),
                ))
            }
        }
    }
    Ok(request)
}

/// Everything that can change what `task` produces (see `cache`).
fn cache_key(
    compiler: &str,
    task: &Task,
    options: &BuildContext,
    toolkits: &Toolkits,
    cargo: &CargoOutput,
) -> Result<Key> {
    let (file, desc, spec) = (task.file, &task.module.desc, task.spec);
    let mut lines = vec![
        compiler.to_string(),
        format!(
            "file {} {:?} sha256 {}",
            file.source.display, file.kind, file.digest
        ),
        format!("module {} @{}", task.module.index, desc.name),
        format!("target {spec:?}"),
        format!("dump {:?}", options.dump),
    ];
    for link in &spec.link {
        let path = options.base_dir.join(link);
        cargo.read_file(&path);
        let bytes = std::fs::read(&path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "{}: cannot read link file {}: {e}",
                    desc.location,
                    path.display()
                ),
            )
        })?;
        lines.push(format!(
            "link {} sha256 {}",
            link.display(),
            sha256_hex(&bytes)
        ));
    }
    let target = target(spec.vendor);
    lines.push(format!("toolkit {}", target.toolkit_identity(toolkits)));
    if target.description().names_symbols_after_the_crate {
        lines.push(format!(
            "symbols {}",
            symbol_prefix(options.crate_name, &file.source.display, &desc.name)
        ));
    }
    Ok(Key::new(&lines))
}

/// Objects linked into the crate (the host's) define global symbols of the final program: the
/// crate, file and module name keep them apart from everything else.
fn symbol_prefix(crate_name: &str, source: &str, module: &str) -> String {
    let [crate_name, source, module] = [crate_name, source, module].map(identifier_part);
    format!("__gpu_host__{crate_name}__{source}__{module}__")
}

/// Groups task outputs (in [`tasks`] order) back into modules. Every target of a module must
/// lower its kernels to the same number of parameters: one launch stub serves them all.
fn assemble(
    plans: &[FilePlan],
    mut outputs: impl Iterator<Item = TaskOutput>,
) -> Result<Vec<CompiledModule>> {
    let mut modules = Vec::new();
    for file in plans {
        for plan in &file.modules {
            let mut module = CompiledModule {
                source: file.source.display.clone(),
                name: plan.desc.name.clone(),
                kernels: Vec::new(),
                objects: Vec::new(),
            };
            // `tasks` made one task per spec, in this order.
            for (index, (spec, output)) in plan.specs.iter().zip(outputs.by_ref()).enumerate() {
                if index == 0 {
                    module.kernels = output.kernels;
                } else if let Some(kernel) = module
                    .kernels
                    .iter()
                    .zip(&output.kernels)
                    .find(|(a, b)| a.params.len() != b.params.len())
                {
                    return Err(Error::new(
                        ErrorKind::Lowering,
                        format!(
                            "{}: kernel `{}` lowers to different parameter lists for different targets",
                            plan.desc.location, kernel.0.name
                        ),
                    ));
                }
                module.objects.push((spec.clone(), output.compiled));
            }
            modules.push(module);
        }
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_cpu_native_is_read_from_cargos_rustflags() {
        assert!(wants_native_cpu("-C\x1ftarget-cpu=native"));
        assert!(wants_native_cpu("-Ctarget-cpu=native\x1f-Copt-level=3"));
        assert!(!wants_native_cpu(
            "-Ctarget-cpu=native\x1f-C\x1ftarget-cpu=x86-64-v3"
        ));
        assert!(!wants_native_cpu("--cfg\x1ffoo"));
        assert!(!wants_native_cpu(""));
    }
}
