//! The host target follows cargo's `TARGET`: cross-compiling for aarch64 gives AArch64 code.
//! It runs in a process of its own: it sets `TARGET`.

use crate::common::*;
use gpu_build::Vendor;
use object::Object as _;

#[test]
fn the_host_target_is_cargos_target_triple() {
    if !rerun::in_own_process(
        module_path!(),
        "the_host_target_is_cargos_target_triple",
        &[],
    ) {
        return; // it ran in a process of its own: it sets `TARGET`
    }
    for (triple, architecture) in [
        ("aarch64-unknown-linux-gnu", object::Architecture::Aarch64),
        ("x86_64-unknown-linux-gnu", object::Architecture::X86_64),
    ] {
        std::env::set_var("TARGET", triple);
        let out = tempfile::tempdir().unwrap();
        let report = build_in(out.path())
            .kernel(workspace().join("sample-project/kernels/matmul.mlir"))
            .target(Vendor::Host, &[])
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
        let object = &report.manifest.modules[0].objects[0];
        assert_eq!(object.chip, triple);
        let bytes = std::fs::read(out.path().join(&object.path)).unwrap();
        assert_eq!(
            object::File::parse(bytes.as_slice())
                .unwrap()
                .architecture(),
            architecture,
            "{triple}"
        );
    }
}
