// The optional shared secret of a job's rendezvous store. When DSX_STORE_SECRET is set (the
// launcher sets it for every rank), the server sends a random nonce and only a client that
// answers with HMAC-SHA256(secret, nonce) may join; the secret itself never crosses the wire.
#pragma once

#include <string>

namespace dsx::comm {

inline constexpr const char* kStoreSecretEnv = "DSX_STORE_SECRET";

// The secret from the environment, or "" when the variable is unset or empty (secret off).
std::string store_secret_from_env();

// kNonceBytes random bytes from the system's CSPRNG.
std::string make_nonce();

// HMAC-SHA256(secret, nonce): what a client proves knowledge of the secret with.
std::string secret_proof(const std::string& secret, const std::string& nonce);

// Constant-time comparison, so a wrong guess does not leak how much of it was right.
bool proofs_equal(const std::string& a, const std::string& b);

}  // namespace dsx::comm
