// Named limits of the engine and its domains (accounts, sessions, idempotency, top-ups).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/clock.h"

namespace gpuhub::engine {

// Commands applied and committed together in one store transaction (group commit).
inline constexpr std::size_t kMaxCommandsPerBatch = 1024;
// Commands waiting for the writer; beyond this Submit answers unavailable (back-pressure instead
// of unbounded memory).
inline constexpr std::size_t kMaxQueuedCommands = 100'000;
// How often the writer runs the Tick hooks with the real clock when idle.
inline constexpr std::int64_t kTickIntervalMicros = 1 * kMicrosPerSecond;

// Usernames: 3..32 bytes of [a-z0-9_.-] after folding ASCII letters to lower case, starting with a
// letter or digit (so "Alice" and "alice" are the same account).
inline constexpr std::size_t kMinUsernameBytes = 3;
inline constexpr std::size_t kMaxUsernameBytes = 32;
// Passwords: at least 10 characters (bytes), at most 1024 bytes (Argon2 hashes any length, but a
// megabyte "password" is a denial-of-service attempt, not a secret).
inline constexpr std::size_t kMinPasswordBytes = 10;
inline constexpr std::size_t kMaxPasswordBytes = 1024;
// Bearer sessions live 30 days, and a user keeps at most 50 (the oldest is dropped at login).
inline constexpr std::int64_t kSessionLifetimeMicros = 30 * kMicrosPerDay;
inline constexpr std::size_t kMaxSessionsPerUser = 50;
inline constexpr std::size_t kMaxUsers = 10'000'000;

// Idempotency keys (Stripe's semantics): 1..255 printable ASCII characters, kept 24 hours.
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 255;
inline constexpr std::int64_t kIdempotencyKeyLifetimeMicros = 24 * kMicrosPerHour;
// A stored response larger than this is not kept (the request is still answered).
inline constexpr std::size_t kMaxStoredResponseBytes = 64 * 1024;

}  // namespace gpuhub::engine
