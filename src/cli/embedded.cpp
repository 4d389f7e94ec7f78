// The embedded demo profile, parsed from the bytes the build generated.
#include "embedded.hpp"

#include <string>

namespace joulepipe::cli {

model::Profile LoadEmbeddedDemoProfile() {
  return model::ParseProfileCsv(std::string(EmbeddedDemoProfile()),
                                std::string(kEmbeddedDemoProfileName));
}

}  // namespace joulepipe::cli
