// Web sessions: the same sessions as the API's bearer tokens, carried in a cookie for the pages.
//
// - POST /v1/sessions {"username", "password", "cookie": true} sets the token in the cookie
//   `gpuhub_session` (HttpOnly, SameSite=Strict, Path=/, Max-Age = the session's lifetime, and
//   Secure when the request came over TLS: a proxy saying `X-Forwarded-Proto: https` or
//   `Forwarded: proto=https`), and answers the CSRF token instead of the session token, which the
//   page never sees.
// - A request with an Authorization header authenticates by that header alone (API clients are
//   unaffected by cookies); otherwise the cookie is the credential.
// - CSRF: a request authenticated by the cookie with a method other than GET/HEAD/OPTIONS must
//   carry `X-CSRF-Token: <csrf token>`, where the CSRF token is derived from the session token
//   (SHA-256 of a fixed label and the token): it cannot be computed without the token, needs no
//   storage, and dies with the session. Pages read it from GET /v1/sessions/current (same-origin
//   only: there are no CORS headers). SameSite=Strict is the first line; the token is the second.
#pragma once

#include <string>
#include <string_view>

#include "core/strings.h"
#include "engine/accounts.h"
#include "http/router.h"

namespace gpuhub::http {

inline constexpr std::string_view kSessionCookieName = "gpuhub_session";
inline constexpr std::string_view kCsrfHeader = "x-csrf-token";

struct Credentials {
  std::string token;         // "" when the request carries none
  bool from_cookie = false;  // true: the session cookie (CSRF rules apply)
};

// The credential of a request: the Authorization header when present (even if malformed, so that
// a bad header is never silently replaced by a cookie), else the session cookie.
inline Credentials CredentialsOf(const Request& request) {
  if (request.headers.count("authorization")) return {request.BearerToken(), false};
  return {request.Cookie(kSessionCookieName), true};
}

inline std::string CsrfTokenFor(std::string_view session_token) {
  return engine::Sha256Hex("gpuhub csrf v1\n" + std::string(session_token));
}

inline bool IsSafeMethod(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

// Compares without an early exit, so that timing does not tell how much of a guess was right.
inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// True when the request may proceed as far as CSRF is concerned: bearer credentials, a safe
// method, or a cookie request whose X-CSRF-Token matches its session.
inline bool CsrfAllows(const Request& request, const Credentials& credentials) {
  if (!credentials.from_cookie || credentials.token.empty() || IsSafeMethod(request.method)) {
    return true;
  }
  std::string_view given = Trim(request.Header(std::string(kCsrfHeader)));
  return !given.empty() && ConstantTimeEquals(given, CsrfTokenFor(credentials.token));
}

inline Response CsrfRefused() {
  return Response::Error(403, "permission_denied",
                         "missing or invalid CSRF token: requests made with the session cookie "
                         "must send the X-CSRF-Token header (GET /v1/sessions/current gives it)");
}

// Whether the client reached us over TLS, as far as a proxy in front says so.
inline bool CameOverTls(const Request& request) {
  std::string proto = ToLower(std::string(Trim(request.Header("x-forwarded-proto"))));
  if (proto.rfind("https", 0) == 0) return true;
  std::string forwarded = ToLower(request.Header("forwarded"));
  return forwarded.find("proto=https") != std::string::npos;
}

inline std::string SessionCookie(std::string_view token, std::int64_t max_age_seconds,
                                 bool secure) {
  std::string c(kSessionCookieName);
  c += "=";
  c += token;
  c += "; Path=/; Max-Age=" + std::to_string(max_age_seconds) + "; HttpOnly; SameSite=Strict";
  if (secure) c += "; Secure";
  return c;
}

// Deletes the cookie in the browser (same attributes, empty value, Max-Age=0).
inline std::string ClearedSessionCookie(bool secure) { return SessionCookie("", 0, secure); }

}  // namespace gpuhub::http
