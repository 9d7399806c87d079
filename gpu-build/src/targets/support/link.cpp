// Upstream ModuleToObject's bitcode linking, which LLVM's C API cannot express: a library is read
// lazily (only the functions that get linked are ever parsed) and linked with
// Linker::LinkOnlyNeeded, internalizing what it brought (upstream's `linkFiles`). See link.rs.

#include "llvm-c/Core.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/IPO/Internalize.h"

#include <cstring>
#include <memory>
#include <string>

extern "C" {

// The bitcode or IR file at `path`, loaded lazily into `context`; null with `*error` set (free it
// with LLVMDisposeMessage) when it cannot be read.
LLVMModuleRef gpu_build_load_lazily(LLVMContextRef context, const char *path, char **error) {
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module =
      llvm::getLazyIRFileModule(path, diagnostic, *llvm::unwrap(context));
  if (!module) {
    std::string text;
    llvm::raw_string_ostream stream(text);
    diagnostic.print(nullptr, stream, false);
    stream.flush();
    *error = strdup(text.c_str());
    return nullptr;
  }
  return llvm::wrap(module.release());
}

// Links what `module` needs of `library` (taken over) into it, internalized. Returns true on an
// error, which the context's diagnostic handler has received.
LLVMBool gpu_build_link_only_needed(LLVMModuleRef module, LLVMModuleRef library) {
  std::unique_ptr<llvm::Module> source(llvm::unwrap(library));
  return llvm::Linker::linkModules(
      *llvm::unwrap(module), std::move(source), llvm::Linker::Flags::LinkOnlyNeeded,
      [](llvm::Module &linked, const llvm::StringSet<> &imported) {
        llvm::internalizeModule(linked, [&imported](const llvm::GlobalValue &value) {
          return !value.hasName() || imported.count(value.getName()) == 0;
        });
      });
}

}  // extern "C"
