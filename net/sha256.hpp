// SHA-256 (FIPS 180-4) of a byte string, for comparing secrets as fixed-size
// digests (access_control.cpp: the API key check takes the same time whatever
// the lengths and contents of the offered and the configured key). Not a
// general crypto API: no streaming, no HMAC. Pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace pagoda::net {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view bytes);

}  // namespace pagoda::net
