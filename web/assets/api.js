// The one way the pages talk to the server: JSON over fetch, same origin.
//
// Signed-in pages use the HttpOnly session cookie (the page never sees the token). Every request
// that changes something sends the session's CSRF token in X-CSRF-Token; the token comes from
// GET /v1/sessions/current and is kept in memory only. Errors come back as ApiError with the API's
// code, message and, where the API names one, the request field it concerns.

export class ApiError extends Error {
  constructor(status, code, message, field, details) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field || null;
    // The whole error object of the answer: some errors carry more (a 402's shortfall and top-up).
    this.details = details || {};
  }
}

let csrfToken = null;
let sessionPromise = null;

const SAFE = new Set(['GET', 'HEAD']);
// A request the server does not answer within this long is given up with a sentence, so that no
// page waits ("Calculating…") forever on a server that hangs.
const TIMEOUT_MS = 30000;

export async function api(method, path, body, { idempotencyKey } = {}) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (typeof AbortSignal !== 'undefined' && AbortSignal.timeout) init.signal = AbortSignal.timeout(TIMEOUT_MS);
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (!SAFE.has(method) && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e && e.name === 'TimeoutError') throw new ApiError(0, 'timeout', 'The server did not answer within 30 seconds. Try again in a moment.');
    throw new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.');
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = null;
    }
  }
  if (!response.ok) {
    const err = data && data.error ? data.error : {};
    const message = err.message || `The server answered ${response.status} ${response.statusText}.`;
    if (response.status === 401 && path !== '/v1/sessions') forgetSession();
    throw new ApiError(response.status, err.code || 'http_' + response.status, message, err.field, err);
  }
  return data;
}

// A fresh key per user action, so that a double click or a retried request is applied once.
export function newIdempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

// One Idempotency-Key per distinct request of a form: submitting the same body again (a double
// click, a retry after a network error) reuses the key, so the server applies it once; a changed
// body gets a new key. Call done() once the server has answered with success.
export class RequestKey {
  constructor() {
    this.fingerprint = null;
    this.key = null;
  }

  for(body) {
    const fingerprint = JSON.stringify(body);
    if (this.fingerprint !== fingerprint) {
      this.fingerprint = fingerprint;
      this.key = newIdempotencyKey();
    }
    return this.key;
  }

  done() {
    this.fingerprint = null;
    this.key = null;
  }
}

// The signed-in user, or null. {authenticated, user, expires_at, csrf_token}. Cached per page load.
export function currentSession({ refresh = false } = {}) {
  if (!sessionPromise || refresh) {
    sessionPromise = api('GET', '/v1/sessions/current')
      .then((s) => {
        csrfToken = s && s.csrf_token ? s.csrf_token : null;
        return s && s.authenticated ? s : null;
      })
      .catch(() => {
        csrfToken = null;
        return null;
      });
  }
  return sessionPromise;
}

function forgetSession() {
  csrfToken = null;
  sessionPromise = Promise.resolve(null);
  document.dispatchEvent(new CustomEvent('gpuhub:session', { detail: null }));
}

// `totpCode`: for an account with two-factor sign-in (the API answers 401 naming totp_code
// without it).
export async function logIn(username, password, totpCode) {
  const body = { username, password, cookie: true };
  if (totpCode) body.totp_code = totpCode;
  const s = await api('POST', '/v1/sessions', body);
  csrfToken = s.csrf_token;
  const session = { authenticated: true, user: s.user, expires_at: s.expires_at, csrf_token: s.csrf_token };
  sessionPromise = Promise.resolve(session);
  document.dispatchEvent(new CustomEvent('gpuhub:session', { detail: session }));
  return session;
}

export async function logOut() {
  try {
    await api('DELETE', '/v1/sessions/current');
  } finally {
    forgetSession();
  }
}
