// lld's ELF linker in this process, for `ld.lld -shared`: a ld.lld process spends most of its
// time starting (loading LLVM's shared library and running its initializers, ~15-30 ms) against
// well under a millisecond linking one kernel's object. See mod.rs.

#include "lld/Common/Driver.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <string>

LLD_HAS_DRIVER(elf)

namespace lld {
// lld/Common/Version.h's, which includes a generated Version.inc that Debian's liblld-22-dev
// does not ship; the function is in liblldCommon.
std::string getLLDVersion();
}  // namespace lld

extern "C" {

// Links the ELF relocatable object `input` into the shared library `output`, as `ld.lld -shared
// input -o output` does. Returns lld's exit code (0: linked); `*message` (free with free()) holds
// what lld printed. `*can_run_again` is false when lld's state is no longer usable and no further
// link may be made in this process. Not reentrant: one call at a time per process.
int gpu_build_lld_link_shared(const char *input, const char *output, char **message,
                              int *can_run_again) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  // One thread: gpu-build's workers already link objects in parallel, one lld call at a time.
  const char *args[] = {"ld.lld", "-shared", "--threads=1", input, "-o", output};
  lld::Result result = lld::lldMain(args, stream, stream, {{lld::Gnu, &lld::elf::link}});
  stream.flush();
  *message = strdup(text.c_str());
  *can_run_again = result.canRunAgain ? 1 : 0;
  return result.retCode;
}

// lld's version (`LLD 22.1.8 ...`), for cache keys; free with free().
char *gpu_build_lld_version(void) { return strdup(lld::getLLDVersion().c_str()); }

}  // extern "C"
