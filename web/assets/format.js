// Display formatting only: every figure comes from the API; these functions decide how many digits
// a person sees. Money arrives as exact decimal strings ("1490.000000") and is rounded here for
// display only, on the string (never through floating point).

const CURRENCY_SYMBOL = { USD: '$', EUR: '€', GBP: '£' };

function groupThousands(digits) {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// Rounds a decimal string half-even to `places` digits and groups the integer part: "3643.2" -> "3,643.20".
export function decimal(value, places = 2) {
  if (value === null || value === undefined || value === '') return '—';
  let text = typeof value === 'number' ? numberToPlainString(value) : String(value).trim();
  const m = /^(-?)(\d*)(?:\.(\d*))?$/.exec(text);
  if (!m) return text;
  let [, sign, int, frac = ''] = m;
  int = int.replace(/^0+(?=\d)/, '') || '0';
  const keep = frac.slice(0, places).padEnd(places, '0');
  const rest = frac.slice(places);
  let digits = (int + keep).split('').map(Number);
  const first = rest.length ? Number(rest[0]) : 0;
  const tail = rest.slice(1).replace(/0/g, '');
  const last = digits.length ? digits[digits.length - 1] : 0;
  const roundUp = first > 5 || (first === 5 && (tail.length > 0 || last % 2 === 1));
  if (roundUp) {
    let i = digits.length - 1;
    while (i >= 0) {
      if (digits[i] === 9) {
        digits[i] = 0;
        i--;
      } else {
        digits[i]++;
        break;
      }
    }
    if (i < 0) digits.unshift(1);
  }
  const all = digits.join('');
  const intPart = all.slice(0, all.length - places) || '0';
  const fracPart = places > 0 ? all.slice(all.length - places) : '';
  const isZero = /^0*$/.test(intPart + fracPart);
  return (sign && !isZero ? '-' : '') + groupThousands(intPart) + (places > 0 ? '.' + fracPart : '');
}

function numberToPlainString(n) {
  if (!Number.isFinite(n)) return String(n);
  // Enough digits for the API's 6-decimal numbers without exponent notation.
  const s = n.toFixed(6);
  return s;
}

// "$1,490.00"; `places` 3 for per-GPU-hour prices on the exchange (tick 0.001).
export function usd(value, places = 2) {
  if (value === null || value === undefined) return '—';
  const d = decimal(value, places);
  return d.startsWith('-') ? '-$' + d.slice(1) : '$' + d;
}

export function money(value, currency, places = 2) {
  if (value === null || value === undefined) return '—';
  const d = decimal(value, places);
  const sym = CURRENCY_SYMBOL[currency];
  if (!sym) return `${d} ${currency}`;
  return d.startsWith('-') ? '-' + sym + d.slice(1) : sym + d;
}

export function gb(value, places = 2) {
  if (value === null || value === undefined) return '—';
  return decimal(value, places) + ' GB';
}

// "10.00" -> "10%", "12.50" -> "12.5%": a percentage as the API gives it, without trailing zeros.
export function percent(value) {
  if (value === null || value === undefined || value === '') return '—';
  const text = String(value);
  return (text.includes('.') ? text.replace(/\.?0+$/, '') : text) + '%';
}

export function integer(value) {
  if (value === null || value === undefined) return '—';
  return decimal(value, 0);
}

export function number(value, places) {
  if (value === null || value === undefined) return '—';
  return decimal(value, places);
}

// Dates in the reader's locale and time zone, with the time in UTC beside it when the reader is
// elsewhere ("4 Dec, 00:10 CET (23:10 UTC)"), since the server, its invoices and its clock count
// in UTC. The year only when it is not this year.
const LOCALE = undefined;  // the browser's
const withYear = { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' };
const { year: _y, ...thisYear } = withYear;
const localFormats = { year: new Intl.DateTimeFormat(LOCALE, withYear), now: new Intl.DateTimeFormat(LOCALE, thisYear) };
const utcTime = new Intl.DateTimeFormat(LOCALE, { hour: '2-digit', minute: '2-digit', timeZone: 'UTC' });
const readerInUtc = new Date().getTimezoneOffset() === 0 && /^(UTC|Etc\/UTC|Etc\/GMT|GMT)?$/.test(Intl.DateTimeFormat().resolvedOptions().timeZone || '');

export function timestamp(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const local = (d.getFullYear() === new Date().getFullYear() ? localFormats.now : localFormats.year).format(d);
  if (readerInUtc || /\bUTC\b/.test(local)) return local;
  return `${local} (${utcTime.format(d)} UTC)`;
}

// One money format for every page (issue 29):
//   amount(v, 'USD')   "$1,234.56": amounts to the cent, thousands separated;
//   perHour(v)         "$2.35/h": a price per hour quoted in cents (a term's hourly price);
//   perHour(v, {book: true}) "$2.880/h": the exchange's book quotes per-GPU-hour prices to 0.001,
//                      so its prices (asks, bids, trades, a lease's price) keep three decimals;
//   count(n)           "100,000,000".
export function amount(value, currency = 'USD') {
  return money(value, currency, 2);
}

export function perHour(value, { book = false, currency = 'USD' } = {}) {
  if (value === null || value === undefined) return '—';
  return money(value, currency, book ? 3 : 2) + '/h';
}

export function count(value) {
  if (value === null || value === undefined || value === '') return '—';
  return decimal(typeof value === 'number' ? Math.round(value) : value, 0);
}

// "infer" -> "Inference" and friends, for labels.
export const WORKLOAD_LABEL = {
  infer: 'Inference',
  full: 'Full fine-tune',
  lora: 'LoRA',
  qlora: 'QLoRA',
};

// "kv_cache" -> "KV cache".
export function componentLabel(name) {
  const special = { kv_cache: 'KV cache', runtime_overhead: 'Runtime overhead', lora_adapters: 'LoRA adapters', cuda_context: 'CUDA context' };
  if (special[name]) return special[name];
  const s = String(name).replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// "2 d 4 h", "3 h 12 min", "12 min", "45 s": the time from `nowMs` to `iso`, never negative (the
// countdowns of the rentals and instance pages; their clock is the server's, maybe a manual one).
export function timeUntil(iso, nowMs) {
  let s = Math.max(0, Math.round((Date.parse(iso) - nowMs) / 1000));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hours = Math.floor(s / 3600);
  s -= hours * 3600;
  const min = Math.floor(s / 60);
  if (d > 0) return `${d} d ${hours} h`;
  if (hours > 0) return `${hours} h ${min} min`;
  if (min > 0) return `${min} min`;
  return `${s} s`;
}
